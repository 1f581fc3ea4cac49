# What the GPU library's other stand-in runs leave out, each run through
# the host stand-in (build/tests/trainc-fakecuda.so) and over the CUDA
# kernel files (trainc-kemu.so) and compared with the CPU trainer's run:
# - tests/cli/nets/gpu_variants.net: a frozen convolution, batch norm and
#   layer norm without affine parameters, softmax over the channels and
#   log_softmax over dimension 1 (strided, not rows), GELU's tanh form,
#   Adam with amsgrad; evaluated after each epoch;
# - tests/cli/nets/gelu_mlp.net, both GELUs in the one-kernel step and the
#   layer-by-layer one, under centered RMSprop;
# - tests/cli/nets/norm_mlp.net, batch, layer, group and instance norms in the
#   one-kernel step;
# - evaluation alone on the GPU (train.steps = 0 and --init);
# - a checkpoint at an epoch's last step, which waits for the epoch's test
#   pass, resumed: the uninterrupted run's weights;
# - DDP over a global_batch with reduction="sum" at 2 ranks (the ranks'
#   gradients summed, not averaged);
# - an FSDP checkpoint of a model with batch-norm buffers, sharded over 2
#   ranks and resumed;
# - token ids and a test set of short last chunk, streamed from the host;
# - a rank spanning two GPUs that cannot reach each other's memory
#   (TRAINC_FAKE_NO_PEER=1, the host stand-in): refused (exit 2) before
#   training, saying so.
# Skipped where CUDA was not configured.
. "$(dirname "$0")/preamble.inc"
if [ ! -f build/tests/trainc-fakecuda.so ]; then
	echo "gpu_variants: skipped: trainc was configured without CUDA"
	exit 0
fi
export TRAINC_PLAIN=1
export TRAINC_CONV_PATH=onednn # as gpu_host.sh: the CPU convolves directly
stcmp=build/tests/stcmp
var=tests/cli/nets/gpu_variants.net

# run TAG LIB ARGS...: trainc over LIB (cpu: the CPU trainer, one thread),
# weights in $tmp/TAG.safetensors (checkpoints in SAVE, where set), output
# in $tmp/TAG.log
run() {
	run_tag=$1 run_lib=$2
	shift 2
	if [ "$run_lib" = cpu ]; then
		set -- --cpus "${CPUS:-1}" --threads 1 "$@"
	else
		set -- --gpus "${GPUS:-1}" "$@"
	fi
	TRAINC_CUDA_LIB=$(pwd)/build/tests/trainc-$run_lib.so "$TRAINC" "$@" --run-dir "$tmp/run-$run_tag" \
		--save "${SAVE:-$tmp/$run_tag.safetensors}" > "$tmp/$run_tag.log" 2>&1 ||
		{ fail "$run_tag: trainc $* exited $?:"; tail -n 5 "$tmp/$run_tag.log"; }
}
# same A B TOL WHAT
same() {
	$stcmp "$tmp/$1.safetensors" "$tmp/$2.safetensors" "$3" > "$tmp/cmp" 2>&1 || fail "$4: $(cat "$tmp/cmp")"
}
# test_lines A B WHAT [N]: the runs' test lines (their last N) agree (4
# places, as printed)
test_lines() {
	a=$(grep 'Test set' "$tmp/$1.log" | tail -n "${4:-100}") b=$(grep 'Test set' "$tmp/$2.log" | tail -n "${4:-100}")
	[ -n "$a" ] && [ "$a" = "$b" ] || fail "$3: test lines '$a', CPU '$b'"
}

run var-cpu cpu $var
run gelu-cpu cpu tests/cli/nets/gelu_mlp.net
run gelu-layers-cpu cpu tests/cli/nets/gelu_mlp.net
run norm-cpu cpu tests/cli/nets/norm_mlp.net
run eval-cpu cpu $var --set train.steps=0 --init "$tmp/var-cpu.safetensors"
run tok-cpu cpu models/token_mlp.net
# the summed loss's gradients are 16 times the mean's: a rate of 0.05
# diverges, and amplifies the ranks' other orders of summing
sed 's/batch = 8/global_batch = 16/; s/loss = mse/loss = mse(reduction="sum")/; s/lr=0.05/lr=0.003/' tests/cli/nets/mlp_mse.net > "$tmp/gsum.net"
CPUS=2 run gsum-cpu cpu "$tmp/gsum.net"
printf 'import "%s/tests/cli/nets/bn_ddp.net"\nparallel fsdp { wrap = size(min_params=20) }\n' "$(pwd)" > "$tmp/bnf.net"
CPUS=2 run bnf-cpu cpu "$tmp/bnf.net"
run short-cpu cpu $var --set train.test_batch=8

for lib in fakecuda kemu; do
	[ -f build/tests/trainc-$lib.so ] || continue
	run var-$lib $lib $var
	same var-$lib var-cpu 1e-5 "$lib: gpu_variants.net = CPU"
	test_lines var-$lib var-cpu "$lib: gpu_variants.net's evaluations"
	grep -q 'one kernel each' "$tmp/var-$lib.log" && fail "$lib: gpu_variants.net took the one-kernel step"

	run gelu-$lib $lib tests/cli/nets/gelu_mlp.net
	grep -q 'one kernel each' "$tmp/gelu-$lib.log" || fail "$lib: gelu_mlp.net did not take the one-kernel step: $(grep '^GPU' "$tmp/gelu-$lib.log")"
	same gelu-$lib gelu-cpu 1e-5 "$lib: GELUs and centered RMSprop in the one-kernel step = CPU"
	TRAINC_CUDA_TINY=0 run gelu-layers-$lib $lib tests/cli/nets/gelu_mlp.net
	same gelu-layers-$lib gelu-cpu 1e-5 "$lib: GELUs and centered RMSprop layer by layer = CPU"
	run norm-$lib $lib tests/cli/nets/norm_mlp.net
	grep -q 'one kernel each' "$tmp/norm-$lib.log" || fail "$lib: norm_mlp.net did not take the one-kernel step: $(grep '^GPU' "$tmp/norm-$lib.log")"
	same norm-$lib norm-cpu 1e-5 "$lib: batch, layer, group and instance norms in the one-kernel step = CPU"

	run eval-$lib $lib $var --set train.steps=0 --init "$tmp/var-cpu.safetensors"
	test_lines eval-$lib eval-cpu "$lib: evaluation alone"
	grep -q 'Test set' "$tmp/eval-$lib.log" || fail "$lib: evaluation alone printed no test line"

	# 48 samples, batches of 8: step 6 ends the first epoch
	SAVE=$tmp/ck-$lib run ck-$lib $lib $var --set train.checkpoint_every=6
	[ -d "$tmp/ck-$lib/step-00000006" ] || fail "$lib: no checkpoint at the epoch's last step"
	echo step-00000006 > "$tmp/ck-$lib/latest"
	run ck-rest-$lib $lib $var --resume "$tmp/ck-$lib"
	grep -q 'Resumed from .* at step 6' "$tmp/ck-rest-$lib.log" || fail "$lib: the resume did not start at step 6"
	same ck-rest-$lib var-$lib 0 "$lib: a checkpoint at an epoch's end, resumed = uninterrupted"

	TRAINC_FAKE_GPUS=2 GPUS=2 run gsum-$lib $lib "$tmp/gsum.net"
	same gsum-$lib gsum-cpu 1e-5 "$lib: DDP over a global_batch with reduction=\"sum\" = CPU"

	TRAINC_FAKE_GPUS=2 GPUS=2 run bnf-$lib $lib "$tmp/bnf.net"
	same bnf-$lib bnf-cpu 1e-5 "$lib: FSDP with batch norm at 2 ranks = CPU"
	SAVE=$tmp/bnf-ck-$lib TRAINC_FAKE_GPUS=2 GPUS=2 run bnf-a-$lib $lib "$tmp/bnf.net" --set train.steps=5
	TRAINC_FAKE_GPUS=2 GPUS=2 run bnf-b-$lib $lib "$tmp/bnf.net" --resume "$tmp/bnf-ck-$lib"
	grep -q 'Resumed from .* at step 5' "$tmp/bnf-b-$lib.log" || fail "$lib: the FSDP resume did not start at step 5"
	same bnf-b-$lib bnf-$lib 0 "$lib: FSDP checkpoint with batch-norm buffers, resumed = uninterrupted"
	test_lines bnf-b-$lib bnf-$lib "$lib: FSDP resumed, its evaluation" 1

	TRAINC_GPU_STREAM=1 run tok-$lib $lib models/token_mlp.net
	grep -q 'copied in per batch' "$tmp/tok-$lib.log" || fail "$lib: token ids were not streamed"
	same tok-$lib tok-cpu 1e-5 "$lib: token ids streamed = CPU"
	TRAINC_GPU_STREAM=1 run short-$lib $lib $var --set train.test_batch=8
	test_lines short-$lib short-cpu "$lib: a streamed test set in chunks of 8, 8 and 4"
done

TRAINC_FAKE_NO_PEER=1 TRAINC_FAKE_GPUS=2 TRAINC_CUDA_LIB=$(pwd)/build/tests/trainc-fakecuda.so "$TRAINC" models/toy_mp.net --gpus 2 \
	--run-dir "$tmp/run-nopeer" > "$tmp/nopeer.log" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -qF "GPUs 0 and 1 cannot access each other's memory (no peer access), which a rank spanning them needs" "$tmp/nopeer.log" ||
	{ fail "GPUs without peer access: exit $rc, expected 2:"; sed 's/^/    /' "$tmp/nopeer.log"; }
[ -e "$tmp/run-nopeer" ] && fail "GPUs without peer access: the refused run left a run directory"
exit $failed
