# The GPU trainer's host logic without a GPU: trainc loads the GPU
# library's own objects linked over a host stand-in for CUDA, cuBLAS, cuDNN
# and NCCL (build/tests/trainc-fakecuda.so, tests/fakecuda; its NCCL runs
# over Gloo), and its runs are compared with the CPU trainer's: the
# one-kernel step and the layer-by-layer step, streamed and device-resident
# data, two devices per rank with and without a pipeline, DDP and FSDP
# (FULL_SHARD, SHARD_GRAD_OP) at 2 ranks, DDP and FSDP over ranks of 2 devices, the
# seed CNN with dropout, embeddings, batch norm and residuals, plain and
# sharded checkpoints resumed, evaluation, and CUDA-graph steps against
# step-by-step ones.  The
# arithmetic on a real GPU, the streams' ordering and CUDA graphs are
# tests/gpu/run's to check.  Skipped where CUDA was not configured.
set -u
case $TRAINC in */*) TRAINC=$(cd "$(dirname "$TRAINC")" && pwd)/$(basename "$TRAINC") || exit 1 ;; esac
cd "$(dirname "$0")/../.." || exit 1
lib=${TRAINC_FAKE_LIB:-$(pwd)/build/tests/trainc-fakecuda.so} # another build of it (sanitizers, say)
if [ ! -f "$lib" ]; then
	echo "gpu_host: skipped: trainc was configured without CUDA"
	exit 0
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=1; }
stcmp=build/tests/stcmp
export TRAINC_PLAIN=1
# the CPU references convolve directly: Winograd's digit of precision is
# test_kern's to bound, not a difference of the GPU path's
export TRAINC_CONV_PATH=onednn

# run TAG ARGS...: trainc on the stand-in GPU (or --cpus in ARGS), weights in $tmp/TAG.safetensors
run() {
	run_tag=$1
	shift
	TRAINC_CUDA_LIB=$lib "$TRAINC" "$@" --run-dir "$tmp/run-$run_tag" --save "$tmp/$run_tag.safetensors" > "$tmp/$run_tag.log" 2>&1 ||
		{ fail "$run_tag: trainc $* exited $?:"; tail -n 5 "$tmp/$run_tag.log"; }
}
# same A B TOL WHAT
same() {
	$stcmp "$tmp/$1.safetensors" "$tmp/$2.safetensors" "$3" > "$tmp/cmp" 2>&1 || { fail "$4: $(cat "$tmp/cmp")"; return; }
	echo "ok $4 ($(cat "$tmp/cmp"))"
}

# the op checks of tests/gpu/run, over the stand-in: every layer of every
# model forward and backward, the optimizers, NCCL at a world of one
# (in the background, one thread beside the runs below; reported at the end)
ops=${TRAINC_FAKE_OPS:-build/tests/gpu_ops_host} # its build over the kernel files (kemu)
ops_pid=
if [ -x $ops ]; then
	{ TRAINC_FAKE_GPUS=3 $ops models/*.net tests/cli/nets/*.net > "$tmp/ops.log" 2>&1; echo $? > "$tmp/ops.rc"; } &
	ops_pid=$!
fi

# ToyModel: the one-kernel step, the layer-by-layer step and the CPU
run toy-tiny models/toy.net --gpus 1 --set train.steps=30
TRAINC_CUDA_TINY=0 run toy-layers models/toy.net --gpus 1 --set train.steps=30
TRAINC_CUDA_TINY=0 TRAINC_GPU_STREAM=1 run toy-stream models/toy.net --gpus 1 --set train.steps=30
run toy-cpu models/toy.net --cpus 1 --threads 1 --set train.steps=30
grep -q 'one kernel each' "$tmp/toy-tiny.log" || fail "the ToyModel did not take the one-kernel step: $(grep '^GPU' "$tmp/toy-tiny.log")"
# where the system will not page-lock the batches, pageable ones serve
TRAINC_CUDA_TINY=0 TRAINC_GPU_STREAM=1 TRAINC_FAKE_HOST_LOCK=0 run toy-pageable models/toy.net --gpus 1 --set train.steps=30
grep -q 'copied in per batch from page-locked memory' "$tmp/toy-stream.log" || fail "TRAINC_GPU_STREAM=1 did not stream from page-locked memory"
grep -q 'copied in per batch from pageable memory' "$tmp/toy-pageable.log" || fail "no pageable batches where page-locking fails"
same toy-pageable toy-layers 0 "toy: streamed from pageable memory = device data"
same toy-tiny toy-cpu 1e-5 "toy: one-kernel GPU step = CPU"
same toy-layers toy-cpu 1e-5 "toy: layer-by-layer GPU step = CPU"
same toy-stream toy-layers 0 "toy: streamed data = device data"
# clipped to a norm the steps exceed, the one-kernel step clips as the CPU does
run toy-clip-tiny models/toy.net --gpus 1 --set train.steps=30 --set train.clip_grad_norm=0.1
run toy-clip-cpu models/toy.net --cpus 1 --threads 1 --set train.steps=30 --set train.clip_grad_norm=0.1
grep -q 'one kernel each' "$tmp/toy-clip-tiny.log" || fail "the clipped ToyModel did not take the one-kernel step: $(grep '^GPU' "$tmp/toy-clip-tiny.log")"
same toy-clip-tiny toy-clip-cpu 1e-5 "toy, clipped: one-kernel GPU step = CPU"
$stcmp "$tmp/toy-clip-cpu.safetensors" "$tmp/toy-cpu.safetensors" 1e-3 > /dev/null 2>&1 && fail "clip_grad_norm=0.1 trains the ToyModel as no clipping does"

# drop_last: an epoch whose samples are not whole batches drops the
# incomplete one and trains every other at full size, as on the CPU (the
# GPU trainer cut the epoch's last full batch to the remainder's size);
# 11 samples, batches of 2, 15 steps (3 epochs of 5 at 1 rank); at 2 ranks
# too; and streamed
for spec in "dl1|1|" "dl2|2|" "dls|1|1"; do
	tag=${spec%%|*} rest=${spec#*|}
	n=${rest%%|*} stream=${rest#*|}
	dl="--set data.train=synthetic(input=randn(10),target=randn(5),samples=11) --set train.batch=2 --set train.drop_last=true"
	dl="$dl --set train.steps=15"
	TRAINC_FAKE_GPUS=2 TRAINC_GPU_STREAM=$stream run $tag-gpu models/toy.net --gpus $n $dl
	run $tag-cpu models/toy.net --cpus $n --threads 1 $dl
	same $tag-gpu $tag-cpu 1e-5 "drop_last: GPU = CPU at $n rank(s)${stream:+, streamed}"
done

# the CUDA-graph path (the stand-in records captured work and replays it)
# equals the step-by-step path bit for bit: the one-kernel step, DDP at 2
# ranks, FSDP, a pipeline over 2 devices
grep -q 'Step time: .* us per step (CUDA graph of one kernel' "$tmp/toy-tiny.log" || fail "the ToyModel steps were not replayed as a graph"
TRAINC_CUDA_GRAPH=0 run toy-eager models/toy.net --gpus 1 --set train.steps=30
same toy-tiny toy-eager 0 "toy: CUDA graph = step by step"
for spec in "ddp2|tests/cli/nets/mlp_mse.net|2" "fsdp2|tests/cli/nets/mlp_fsdp.net|2" "pipe|models/toy_mp.net|2"; do
	case_=${spec%%|*} rest=${spec#*|}
	net=${rest%%|*} n=${rest#*|}
	extra=
	[ $case_ = pipe ] && extra="--set parallel.microbatches=4 --set train.steps=10"
	TRAINC_FAKE_GPUS=2 run $case_-graph $net --gpus $n $extra
	TRAINC_FAKE_GPUS=2 TRAINC_CUDA_GRAPH=0 run $case_-eager $net --gpus $n $extra
	grep -q 'Step time: .* (CUDA graph' "$tmp/$case_-graph.log" || fail "$case_: no step was replayed as a graph"
	same $case_-graph $case_-eager 0 "$case_: CUDA graph = step by step"
done

# an MLP with tanh, SGD with momentum, several batches an epoch, a short last one
run mlp-gpu tests/cli/nets/mlp_mse.net --gpus 1 --set train.batch=10 --set train.steps=20
run mlp-cpu tests/cli/nets/mlp_mse.net --cpus 1 --threads 1 --set train.batch=10 --set train.steps=20
same mlp-gpu mlp-cpu 1e-5 "mlp: GPU = CPU over epochs with a short last batch"

# ToyMp on two devices of one rank, and pipelined in 4 micro-batches
TRAINC_FAKE_GPUS=2 run mp-gpu models/toy_mp.net --gpus 2 --set train.steps=10
run mp-cpu models/toy_mp.net --cpus 2 --threads 1 --set train.steps=10
same mp-gpu mp-cpu 1e-5 "toy_mp: 2 GPUs of one rank = 2 CPU devices"
TRAINC_FAKE_GPUS=2 run mp4-gpu models/toy_mp.net --gpus 2 --set train.steps=10 --set parallel.microbatches=4
run mp4-cpu models/toy_mp.net --cpus 2 --threads 1 --set train.steps=10 --set parallel.microbatches=4
same mp4-gpu mp4-cpu 1e-5 "toy_mp pipelined: 2 GPUs = 2 CPU devices"
# a rank of 2 GPUs that evaluates a test set, with data on the device and
# streamed in micro-batches (every kernel launched where its GPU is current;
# the output's GPU counts accuracy hits in its own memory, as the stand-in
# refuses an atomic onto another GPU's)
TRAINC_FAKE_GPUS=2 run mpe-gpu tests/cli/nets/mp_eval.net --gpus 2
TRAINC_FAKE_GPUS=2 TRAINC_GPU_STREAM=1 run mpe-stream tests/cli/nets/mp_eval.net --gpus 2 --set parallel.microbatches=2
run mpe-cpu tests/cli/nets/mp_eval.net --cpus 2 --threads 1
same mpe-gpu mpe-cpu 1e-5 "mp_eval: 2 GPUs of one rank with evaluation = 2 CPU devices"
same mpe-stream mpe-cpu 1e-5 "mp_eval: streamed and pipelined on 2 GPUs = 2 CPU devices"
for tag in mpe-gpu mpe-stream; do
	[ "$(grep '^Test set' "$tmp/$tag.log")" = "$(grep '^Test set' "$tmp/mpe-cpu.log")" ] && grep -q '^Test set' "$tmp/$tag.log" ||
		fail "mp_eval: the evaluation of $tag differs from the CPU's"
done

# several ranks: DDP and FSDP over NCCL (the stand-in's runs over Gloo)
# DDP's evaluation with rank 0's batch-norm statistics on every rank
TRAINC_FAKE_GPUS=2 run bnddp-gpu tests/cli/nets/bn_ddp.net --gpus 2
run bnddp-cpu tests/cli/nets/bn_ddp.net --cpus 2 --threads 1
same bnddp-gpu bnddp-cpu 1e-5 "DDP with batch norm at 2 ranks: GPU path = CPU"
grep -q '^Test set' "$tmp/bnddp-cpu.log" && [ "$(grep '^Test set' "$tmp/bnddp-gpu.log")" = "$(grep '^Test set' "$tmp/bnddp-cpu.log")" ] ||
	fail "DDP with batch norm: GPU evaluation '$(grep '^Test set' "$tmp/bnddp-gpu.log")', CPU '$(grep '^Test set' "$tmp/bnddp-cpu.log")'"
TRAINC_FAKE_GPUS=4 run ddp-gpu models/toy.net --gpus 2 --set train.steps=20
run ddp-cpu models/toy.net --cpus 2 --threads 1 --set train.steps=20
same ddp-gpu ddp-cpu 1e-6 "DDP at 2 ranks: GPU path = CPU"
for shard in full grad_op; do
	TRAINC_FAKE_GPUS=2 run fsdp-$shard-gpu tests/cli/nets/mlp_fsdp.net --gpus 2 --set "parallel.shard=\"$shard\""
	run fsdp-$shard-cpu tests/cli/nets/mlp_fsdp.net --cpus 2 --threads 1 --set "parallel.shard=\"$shard\""
	same fsdp-$shard-gpu fsdp-$shard-cpu 1e-6 "FSDP $shard at 2 ranks, clipped: GPU path = CPU"
done
grep -q 'FSDP\|Rank 1: GPU 1' "$tmp/fsdp-full-gpu.log" || fail "the FSDP run did not run 2 ranks"
TRAINC_FAKE_GPUS=4 run mp-ddp-gpu models/toy_mp.net --gpus 4 --set train.steps=10
run mp-ddp-cpu models/toy_mp.net --cpus 4 --threads 1 --set train.steps=10
same mp-ddp-gpu mp-ddp-cpu 1e-6 "toy_mp: 2 ranks of 2 GPUs (DDP) = 2 ranks of 2 CPU devices"
# FSDP with micro-batches
TRAINC_FAKE_GPUS=2 run fsdpm-gpu tests/cli/nets/mlp_fsdp.net --gpus 2 --set parallel.microbatches=2
run fsdpm-cpu tests/cli/nets/mlp_fsdp.net --cpus 2 --threads 1 --set parallel.microbatches=2
same fsdpm-gpu fsdpm-cpu 1e-6 "FSDP with 2 micro-batches at 2 ranks: GPU path = CPU"
# FSDP over ranks of 2 GPUs (the units on each rank's first GPU)
printf 'import "%s/models/toy_mp.net"\nparallel fsdp { wrap = size(min_params=50) }\n' "$(pwd)" > "$tmp/mpf.net"
TRAINC_FAKE_GPUS=4 run mpf-gpu "$tmp/mpf.net" --gpus 4 --set train.steps=10
run mpf-cpu "$tmp/mpf.net" --cpus 4 --threads 1 --set train.steps=10
same mpf-gpu mpf-cpu 1e-6 "FSDP over 2 ranks of 2 GPUs = 2 ranks of 2 CPU devices"
# units whose layers alternate between a rank's 2 GPUs, pipelined: a
# unit's gradients are zeroed, and an older unit's added into its shard,
# right after a layer on the second GPU (the stand-in stops a kernel
# launched on the first GPU's stream while the second is current)
TRAINC_FAKE_GPUS=4 run fsdp2dev-gpu tests/cli/nets/fsdp_2dev.net --gpus 4 --set parallel.microbatches=2
run fsdp2dev-cpu tests/cli/nets/fsdp_2dev.net --cpus 4 --threads 1 --set parallel.microbatches=2
same fsdp2dev-gpu fsdp2dev-cpu 1e-6 "FSDP, layers alternating between 2 GPUs of each rank, pipelined: GPU path = CPU"
# an FSDP checkpoint (one shard per rank) written and resumed on the GPU path
TRAINC_FAKE_GPUS=2 run fck-full tests/cli/nets/mlp_fsdp.net --gpus 2 --set train.steps=8
TRAINC_FAKE_GPUS=2 TRAINC_CUDA_LIB=$lib "$TRAINC" tests/cli/nets/mlp_fsdp.net --gpus 2 --set train.steps=4 --save "$tmp/fck" \
	--run-dir "$tmp/run-fck1" > "$tmp/fck1.log" 2>&1 || { fail "FSDP checkpoint at step 4:"; tail -n 5 "$tmp/fck1.log"; }
grep -q '(2 shards)' "$tmp/fck1.log" || fail "the FSDP checkpoint was not sharded: $(grep Checkpoint "$tmp/fck1.log")"
TRAINC_FAKE_GPUS=2 run fck-rest tests/cli/nets/mlp_fsdp.net --gpus 2 --set train.steps=8 --resume "$tmp/fck"
same fck-full fck-rest 0 "FSDP sharded checkpoint on the GPU path: resumed = uninterrupted"
# the resumed epoch's average covers the steps before the stop too
grep 'Average loss' "$tmp/fck-rest.log" | cut -f 1,2 > "$tmp/avg-rest"
grep 'Average loss' "$tmp/fck-full.log" | cut -f 1,2 | tail -n "$(wc -l < "$tmp/avg-rest")" > "$tmp/avg-full"
[ -s "$tmp/avg-rest" ] && cmp -s "$tmp/avg-full" "$tmp/avg-rest" ||
	fail "epoch averages after a resume on the GPU path: $(cat "$tmp/avg-full") against $(cat "$tmp/avg-rest")"
# resumed at its last step: nothing more is trained
TRAINC_FAKE_GPUS=2 TRAINC_CUDA_LIB=$lib "$TRAINC" tests/cli/nets/mlp_fsdp.net --gpus 2 --set train.steps=4 --resume "$tmp/fck" \
	--run-dir "$tmp/run-fck2" > "$tmp/fck2.log" 2>&1 || { fail "resuming at the last step:"; tail -n 5 "$tmp/fck2.log"; }
grep -q 'Nothing to train' "$tmp/fck2.log" && ! grep -q '"kind": "step"' "$tmp/run-fck2/metrics.jsonl" ||
	fail "a GPU run resumed at its last step trained on: $(cat "$tmp/fck2.log")"
# sharded evaluation with a different number of test chunks per rank (3
# samples at test_batch 1 over 2 ranks): every rank gathers as often
uneven="--set train.steps=2 --set train.test_batch=1 --set data.test=synthetic(input=randn(12),target=randn(4),samples=3) --set parallel.timeout=30"
# shellcheck disable=SC2086
TRAINC_FAKE_GPUS=2 run unev-gpu tests/cli/nets/mlp_fsdp.net --gpus 2 $uneven
# shellcheck disable=SC2086
run unev-cpu tests/cli/nets/mlp_fsdp.net --cpus 2 --threads 1 $uneven
grep -q 'Test set' "$tmp/unev-cpu.log" && [ "$(grep 'Test set' "$tmp/unev-gpu.log")" = "$(grep 'Test set' "$tmp/unev-cpu.log")" ] ||
	fail "sharded evaluation with uneven chunks: GPU '$(grep 'Test set' "$tmp/unev-gpu.log")', CPU '$(grep 'Test set' "$tmp/unev-cpu.log")'"
# evaluation with batch statistics (batchnorm without running statistics)
# and a short last test chunk, which runs at its own size on both paths
run bneval-gpu tests/cli/nets/bn_eval.net --gpus 1
run bneval-cpu tests/cli/nets/bn_eval.net --cpus 1 --threads 1
evloss() { sed -n 's/.*"kind": "eval".*"loss": \([^,]*\),.*/\1/p' "$tmp/run-$1/metrics.jsonl"; }
awk -v a="$(evloss bneval-gpu)" -v b="$(evloss bneval-cpu)" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= 1e-6) }' ||
	fail "evaluation with a short last chunk and batch statistics: GPU $(evloss bneval-gpu), CPU $(evloss bneval-cpu)"

# embeddings (token ids), batch norm, residuals, pools
run tok-gpu models/token_mlp.net --gpus 1 --set train.steps=8
run tok-cpu models/token_mlp.net --cpus 1 --threads 1 --set train.steps=8
same tok-gpu tok-cpu 1e-5 "token_mlp: embedding on the GPU path = CPU"
# an embedding on the second GPU of ranks under FSDP, which keeps a rank's
# units on its first: the gradient is summed on the second GPU, where the
# ids, dy and the scratch it sorts in are, into dw over peer access
cat > "$tmp/embf.net" << 'EOF'
model EmbFsdp {
    input(16, dtype="long")
    tok = embedding(100, 8) @device(1)
    flatten
    hidden = linear(128, 16) @device(0)
    tanh
    out = linear(16, 4) @device(1)
}
data  { train = synthetic(input=randint(100, 16), target=classes(4), samples=64) }
train { loss = cross_entropy; optimizer = adam(lr=1e-3); batch = 8; steps = 4 }
parallel fsdp { wrap = size(min_params=100) }
EOF
TRAINC_FAKE_GPUS=4 run embf-gpu "$tmp/embf.net" --gpus 4
run embf-cpu "$tmp/embf.net" --cpus 4 --threads 1
same embf-gpu embf-cpu 1e-5 "FSDP, an embedding on the second GPU of each rank: GPU path = CPU"
data=/usr/share/datasets/fashion-mnist
if ls "$data"/train-images-idx3-ubyte* > /dev/null 2>&1; then
	# the seed CNN with its dropout (the GPU path draws the CPU's masks),
	# trained only.  Adadelta at lr 1.0 on a summed loss amplifies rounding
	# (oneDNN's and im2col's convolutions part by 2e-4 after one step), so
	# the CPU runs the stand-in's convolution path, im2col; then one
	# evaluation of the test set on each path
	printf 'import "%s/models/mnist_cnn.net"\ndata { train = mnist("%s", split="train", normalize=(0.2860, 0.3530)) }\n' \
		"$(pwd)" "$data" > "$tmp/cnn.net"
	run cnn-gpu "$tmp/cnn.net" --gpus 1 --set train.steps=4
	TRAINC_CONV_PATH=im2col run cnn-cpu "$tmp/cnn.net" --cpus 1 --threads 1 --set train.steps=4
	same cnn-gpu cnn-cpu 1e-5 "seed CNN with dropout, 4 steps: GPU path = CPU"
	# its biases and ReLUs run as one kernel each (kc_bias_relu): the same
	# arithmetic as apart
	TRAINC_CUDA_FUSE=0 run cnn-apart "$tmp/cnn.net" --gpus 1 --set train.steps=4
	same cnn-gpu cnn-apart 0 "seed CNN: bias and ReLU fused = apart, bit for bit"
	run eval-gpu models/fashion_mnist_cnn.net --gpus 1 --set train.steps=2
	run eval-cpu models/fashion_mnist_cnn.net --cpus 1 --threads 1 --set train.steps=2
	acc_g=$(grep -o 'Accuracy: [0-9]*/[0-9]*' "$tmp/eval-gpu.log" | tail -n 1)
	acc_c=$(grep -o 'Accuracy: [0-9]*/[0-9]*' "$tmp/eval-cpu.log" | tail -n 1)
	[ -n "$acc_g" ] && [ "$acc_g" = "$acc_c" ] && echo "ok seed CNN: the same evaluation ($acc_g)" ||
		fail "seed CNN: evaluation '$acc_g' on the GPU path, '$acc_c' on the CPU"
	grep -q '^CUDA event elapsed time: ' "$tmp/eval-gpu.log" || fail "the GPU run did not print the CUDA event time"
	# batch norm (running statistics too), residuals, strided convolutions
	printf 'import "%s/models/resnet_mini.net"\ndata { train = mnist("%s", split="train", normalize=(0.2860, 0.3530)) }\n' \
		"$(pwd)" "$data" > "$tmp/res.net"
	run res-gpu "$tmp/res.net" --gpus 1 --set train.steps=1 --set train.batch=8
	run res-cpu "$tmp/res.net" --cpus 1 --threads 1 --set train.steps=1 --set train.batch=8
	same res-gpu res-cpu 1e-5 "resnet_mini (batch norm, residuals), a step: GPU path = CPU"
fi

# a model larger than the GPU's memory: a clear error, not a crash
TRAINC_FAKE_GPU_MIB=100 TRAINC_CUDA_LIB=$lib "$TRAINC" tests/cli/nets/mlp_50m.net --gpus 1 --run-dir "$tmp/run-oom" > "$tmp/oom.log" 2>&1
rc=$?
[ $rc = 1 ] && grep -q 'GPU 0: out of memory allocating the plan.s regions (768.4 MiB), with [0-9.]* MiB of its 100.0 MiB free; lower the batch' "$tmp/oom.log" &&
	echo "ok a model too large for the GPU: exit 1, named with the GPU's free memory" ||
	fail "a model too large for the GPU: exit $rc: $(cat "$tmp/oom.log")"

# a GPU older than the kernels are built for: exit 2 before any work, naming it
TRAINC_FAKE_GPUS=2 TRAINC_FAKE_CC=7.0 TRAINC_CUDA_LIB=$lib "$TRAINC" models/toy.net --gpus 1 --run-dir "$tmp/run-cc" \
	> "$tmp/cc.log" 2>&1
rc=$?
[ $rc = 2 ] && grep -q 'GPU 0 (.*) has compute capability 7.0, and trainc.s GPU kernels need 7.5 (Turing) or later; hide it with CUDA_VISIBLE_DEVICES; train on CPUs with --cpus N' "$tmp/cc.log" &&
	echo "ok a GPU of compute capability 7.0: exit 2, named" || fail "a GPU of compute capability 7.0: exit $rc: $(cat "$tmp/cc.log")"

# a driver older than the CUDA the library was built with: exit 2, naming both versions
TRAINC_FAKE_DRIVER=12.4 TRAINC_CUDA_LIB=$lib "$TRAINC" models/toy.net --gpus 1 --run-dir "$tmp/run-drv" > "$tmp/drv.log" 2>&1
rc=$?
[ $rc = 2 ] && grep -q 'the NVIDIA driver supports CUDA up to 12.4, and trainc.s GPU library was built with CUDA [0-9]*\.[0-9]* (cudaGetDeviceCount: .*); update the driver, or rebuild trainc with a CUDA toolkit the driver supports; train on CPUs with --cpus N' "$tmp/drv.log" &&
	echo "ok a driver older than the library's CUDA: exit 2, both versions named" ||
	fail "a driver older than the library's CUDA: exit $rc: $(cat "$tmp/drv.log")"

# a checkpoint written on the GPU path and resumed there continues exactly
run ck-full tests/cli/nets/mlp_mse.net --gpus 1 --set train.steps=14
TRAINC_CUDA_LIB=$lib "$TRAINC" tests/cli/nets/mlp_mse.net --gpus 1 --set train.steps=6 --save "$tmp/ck" --run-dir "$tmp/run-ck1" \
	> "$tmp/ck1.log" 2>&1 || { fail "checkpoint at step 6:"; tail -n 5 "$tmp/ck1.log"; }
run ck-rest tests/cli/nets/mlp_mse.net --gpus 1 --set train.steps=14 --resume "$tmp/ck"
grep -q 'Resumed from .* at step 6' "$tmp/ck-rest.log" || fail "the GPU path did not resume at step 6"
same ck-full ck-rest 0 "checkpoint on the GPU path: resumed = uninterrupted"
# checkpoints cross between the paths: written on the GPU and resumed on the
# CPU, and the other way, each equal to the CPU's uninterrupted run
run ckx-cpu-full tests/cli/nets/mlp_mse.net --cpus 1 --threads 1 --set train.steps=14
"$TRAINC" tests/cli/nets/mlp_mse.net --cpus 1 --threads 1 --set train.steps=6 --save "$tmp/ckc" \
	--run-dir "$tmp/run-ckc" > "$tmp/ckc.log" 2>&1 || { fail "CPU checkpoint at step 6:"; tail -n 5 "$tmp/ckc.log"; }
run ckx-gpu-rest tests/cli/nets/mlp_mse.net --gpus 1 --set train.steps=14 --resume "$tmp/ckc"
run ckx-cpu-rest tests/cli/nets/mlp_mse.net --cpus 1 --threads 1 --set train.steps=14 --resume "$tmp/ck"
same ckx-gpu-rest ckx-cpu-full 1e-5 "CPU checkpoint resumed on the GPU path = the CPU's uninterrupted run"
same ckx-cpu-rest ckx-cpu-full 1e-5 "GPU checkpoint resumed on the CPU = the CPU's uninterrupted run"

if [ -n "$ops_pid" ]; then
	wait $ops_pid
	[ "$(cat "$tmp/ops.rc")" = 0 ] &&
		echo "ok gpu_ops over the stand-in: $(tail -n 1 "$tmp/ops.log")" ||
		{ fail "gpu_ops over the stand-in:"; grep -v '^ok' "$tmp/ops.log" | head -20; }
fi
exit $failed
