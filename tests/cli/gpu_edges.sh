# The GPU library's paths that hang on what the GPU has or how NCCL
# answers, through the host stand-in (build/tests/trainc-fakecuda.so) and,
# where they run kernels, over the CUDA kernel files (trainc-kemu.so):
# - batch norm on the model's input (tests/cli/nets/bn_input.net), whose
#   backward computes no input gradient: the CPU trainer's weights;
# - a training set larger than half the GPU's free memory
#   (TRAINC_FAKE_GPU_MIB=48 and 200000 samples of toy.net) is copied in
#   per batch, said so, and trains as the CPU does;
# - a GPU too small for the setup (20 MiB, less than cuBLAS's workspace)
#   fails with exit 1 saying it ran out of memory, how much the GPU had
#   and what to change, not only a call and a line;
# - an NCCL that answers ncclInProgress before each call settles
#   (TRAINC_FAKE_NCCL_PENDING=3), as a non-blocking communicator may:
#   two ranks train as without it, bit for bit;
# - communicators whose initialisation never finishes
#   (TRAINC_FAKE_NCCL_PENDING=stuck): every rank waits for the others
#   there, and the launcher stops the job at parallel.timeout as hung
#   (comm_nccl's own wait is twice as long), leaving no process behind.
# Skipped where CUDA was not configured.
. "$(dirname "$0")/preamble.inc"
if [ ! -f build/tests/trainc-fakecuda.so ]; then
	echo "gpu_edges: skipped: trainc was configured without CUDA"
	exit 0
fi
export TRAINC_PLAIN=1
stcmp=build/tests/stcmp

# run TAG LIB ARGS...: trainc over LIB (cpu: the CPU trainer, one thread),
# weights in $tmp/TAG.safetensors, output in $tmp/TAG.log; its exit status
run() {
	run_tag=$1 run_lib=$2
	shift 2
	if [ "$run_lib" = cpu ]; then
		set -- --cpus 1 --threads 1 "$@"
	else
		set -- --gpus "${GPUS:-1}" "$@"
	fi
	TRAINC_CUDA_LIB=$(pwd)/build/tests/trainc-$run_lib.so "$TRAINC" "$@" --run-dir "$tmp/run-$run_tag" \
		--save "$tmp/$run_tag.safetensors" > "$tmp/$run_tag.log" 2>&1
}
# ok TAG ARGS...: run TAG ARGS, which must succeed
ok() {
	run "$@" || { fail "$1: trainc exited $?:"; tail -n 5 "$tmp/$1.log"; }
}
# same A B TOL WHAT
same() {
	$stcmp "$tmp/$1.safetensors" "$tmp/$2.safetensors" "$3" > "$tmp/cmp" 2>&1 || fail "$4: $(cat "$tmp/cmp")"
}

sed 's/samples=20/samples=200000/; s/steps = 1/steps = 4/' models/toy.net > "$tmp/big.net"
ok bn-cpu cpu tests/cli/nets/bn_input.net
ok big-cpu cpu "$tmp/big.net"
for lib in fakecuda kemu; do
	[ -f build/tests/trainc-$lib.so ] || continue
	ok bn-$lib $lib tests/cli/nets/bn_input.net
	same bn-$lib bn-cpu 1e-5 "$lib: batch norm on the input = CPU"

	TRAINC_FAKE_GPU_MIB=48 ok big-$lib $lib "$tmp/big.net"
	grep -q '^The training set needs 11.4 MiB and the GPU has [0-9.]* MiB free: its batches are copied in as they are used$' \
		"$tmp/big-$lib.log" || fail "$lib: a training set of more than half the free memory was not said to be copied in per batch"
	grep -q 'data copied in per batch' "$tmp/big-$lib.log" || fail "$lib: the large training set was not streamed"
	same big-$lib big-cpu 1e-6 "$lib: a training set copied in per batch = CPU"
done
[ $failed = 0 ] && echo "ok batch norm on the input and a training set too large for the GPU train as on the CPU"

TRAINC_FAKE_GPU_MIB=20 run small fakecuda models/toy.net
rc=$?
[ $rc -eq 1 ] && grep -q '^trainc: rank 0, GPU 0: out of memory (.*), with 20.0 MiB of its 20.0 MiB free; lower the batch' "$tmp/small.log" ||
	{ fail "a GPU too small for the setup: exit $rc:"; sed 's/^/    /' "$tmp/small.log"; }
[ $failed = 0 ] && echo "ok a GPU too small for the setup: exit 1, how much memory it had and what to change"

mlp=tests/cli/nets/mlp_mse.net
TRAINC_FAKE_GPUS=2 GPUS=2 ok nccl fakecuda $mlp
TRAINC_FAKE_NCCL_PENDING=3 TRAINC_FAKE_GPUS=2 GPUS=2 ok pending fakecuda $mlp
same pending nccl 0 "NCCL calls answered ncclInProgress first"
[ $failed = 0 ] && echo "ok NCCL calls that settle after ncclInProgress train as those that do not"

start=$(date +%s)
TRAINC_FAKE_NCCL_PENDING=stuck TRAINC_FAKE_GPUS=2 GPUS=2 run stuck fakecuda $mlp --set parallel.timeout=2
rc=$?
took=$(($(date +%s) - start))
[ $rc -eq 1 ] && [ $took -lt 20 ] && grep -q '^trainc: rank [01] made no progress for 2 s (parallel.timeout); it is stopped as hung$' "$tmp/stuck.log" ||
	{ fail "an NCCL initialisation that never finishes: exit $rc after $took s:"; sed 's/^/    /' "$tmp/stuck.log"; }
pgrep -f "$tmp/run-stuck" > /dev/null && fail "an NCCL initialisation that never finishes left a process behind"
[ $failed = 0 ] && echo "ok an NCCL initialisation that never finishes: the job is stopped as hung at the timeout"
exit $failed
