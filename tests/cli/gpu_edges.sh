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
# - the rate and loss tables of an epoch's steps: a per-step schedule
#   over three epochs, in each of the GPU trainer's step forms, and
#   resumed inside an epoch, trains and logs as the CPU does;
# - communicators whose initialisation never finishes
#   (TRAINC_FAKE_NCCL_PENDING=stuck): every rank waits for the others
#   there, and the launcher stops the job at parallel.timeout as hung,
#   naming NCCL's start-up as what every rank waited on (comm_nccl's own
#   wait is twice as long), leaving no process behind.
# Skipped where CUDA was not configured.
. "$(dirname "$0")/preamble.inc"
if [ ! -f build/tests/trainc-fakecuda.so ]; then
	echo "gpu_edges: skipped: trainc was configured without CUDA"
	exit 0
fi
export TRAINC_PLAIN=1
stcmp=build/tests/stcmp

# run TAG LIB ARGS...: trainc over LIB (cpu: the CPU trainer, one thread),
# weights in $tmp/TAG.safetensors (checkpoints in SAVE, where set), output
# in $tmp/TAG.log; its exit status
run() {
	run_tag=$1 run_lib=$2
	shift 2
	if [ "$run_lib" = cpu ]; then
		set -- --cpus 1 --threads 1 "$@"
	else
		set -- --gpus "${GPUS:-1}" "$@"
	fi
	TRAINC_CUDA_LIB=$(pwd)/build/tests/trainc-$run_lib.so "$TRAINC" "$@" --run-dir "$tmp/run-$run_tag" \
		--save "${SAVE:-$tmp/$run_tag.safetensors}" > "$tmp/$run_tag.log" 2>&1
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

# the rate and loss tables hold an epoch's steps (step k at k % 4 here):
# 12 steps of a per-step cosine schedule with restarts, in the one-kernel
# step, layer by layer and without the graph, and resumed inside the
# second epoch, train as the CPU does, each step's logged loss the CPU's
lr='train.scheduler=cosine_warm_restarts(t_0=3, t_mult=2, eta_min=1e-4, every="step")'
sched="--set train.batch=5 --set train.steps=12 --set train.log_interval=1 --set train.optimizer=sgd(lr=0.05)"
# shellcheck disable=SC2086
ok sch-cpu cpu models/toy.net $sched --set "$lr"
losses() { sed -n 's/.*"kind": "step".*"loss": \([^,]*\),.*/\1/p' "$tmp/run-$1/metrics.jsonl" | tr '\n' ' '; }
# near A B: the step losses of runs A and B agree within 1e-6 relative, 12 each
near() {
	echo "$(losses "$1")|$(losses "$2")" | awk -F'|' '{ n = split($1, a, " "); m = split($2, b, " "); if (n != 12 || m != 12) exit 1
		for (i = 1; i <= n; i++) { d = a[i] - b[i]; if (d < 0) d = -d; if (d > 1e-6 * b[i]) exit 1 } }'
}
for lib in fakecuda kemu; do
	[ -f build/tests/trainc-$lib.so ] || continue
	# shellcheck disable=SC2086
	ok sch-$lib-tiny $lib models/toy.net $sched --set "$lr"
	# shellcheck disable=SC2086
	TRAINC_CUDA_TINY=0 ok sch-$lib-layers $lib models/toy.net $sched --set "$lr"
	# shellcheck disable=SC2086
	TRAINC_CUDA_GRAPH=0 ok sch-$lib-eager $lib models/toy.net $sched --set "$lr"
	for how in tiny layers eager; do
		same sch-$lib-$how sch-cpu 1e-6 "$lib ($how): 12 steps of a per-step schedule over 3 epochs = CPU"
		near sch-$lib-$how sch-cpu || fail "$lib ($how): step losses $(losses sch-$lib-$how), CPU $(losses sch-cpu)"
	done
	# shellcheck disable=SC2086
	SAVE=$tmp/sch-ck-$lib ok sch-a-$lib $lib models/toy.net $sched --set "$lr" --set train.steps=6
	# shellcheck disable=SC2086
	ok sch-b-$lib $lib models/toy.net $sched --set "$lr" --resume "$tmp/sch-ck-$lib"
	grep -q 'Resumed from .* at step 6' "$tmp/sch-b-$lib.log" || fail "$lib: the schedule's run did not resume at step 6"
	same sch-b-$lib sch-cpu 1e-6 "$lib: resumed inside an epoch = CPU's uninterrupted run"
done
[ $failed = 0 ] && echo "ok a per-step schedule over several epochs, from tables of an epoch's steps, trains as on the CPU"

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
[ $rc -eq 1 ] && [ $took -lt 20 ] && grep -q "^trainc: every rank waited 2 s (parallel.timeout) on NCCL's start-up of the job's communicators (ncclCommInitRankConfig; NCCL_DEBUG=INFO shows how far it got); the job is stopped as hung$" "$tmp/stuck.log" ||
	{ fail "an NCCL initialisation that never finishes: exit $rc after $took s:"; sed 's/^/    /' "$tmp/stuck.log"; }
pgrep -f "$tmp/run-stuck" > /dev/null && fail "an NCCL initialisation that never finishes left a process behind"
[ $failed = 0 ] && echo "ok an NCCL initialisation that never finishes: the job is stopped as hung at the timeout"
exit $failed
