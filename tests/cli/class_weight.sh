# nll(weight=[...]) and cross_entropy(weight=[...]), as PyTorch's weight
# tensor of NLLLoss and CrossEntropyLoss: a sample of class t weighs w[t]
# in the loss and its gradient, and a mean divides by the counted
# samples' weights.
# - tests/cli/nets/class_weight.net (cross_entropy with label smoothing)
#   and class_weight_nll.net (nll after log_softmax, class 3 ignored too),
#   each weighing class 8 at 0, trained 5 steps from given weights on
#   MNIST-format files, give PyTorch's losses, test loss and final
#   weights within 1e-6 on the CPU and through the GPU library on the
#   host and over its kernel files.  The values and files come from
#   tests/golden/class_weight_torch.py.
# - Weights of 1 train the seed CNN as no weights do, bit for bit, on the
#   CPU and on the host GPU library.
# - A batch of classes weighing 0 has a NaN mean (PyTorch's 0/0): the run
#   stops saying so, on the CPU and on the host GPU library; a class
#   weighing 0 that no target has is not said to be the cause of a loss
#   that diverged.  Other weights do not resume a checkpoint.
# The language's refusals are tests/errors/train_loss_weight_*.net;
# test_cuda_body and gpu_ops check the kernels' weighted sums and
# gradients against the CPU's.
. "$(dirname "$0")/preamble.inc"
. tests/cli/torch_ref.inc
mnist_files "$tmp/data" 40 20

# class_weight_torch.py's output
torch_check ce tests/cli/nets/class_weight.net tests/golden/class_weight_init.safetensors \
	"2.401822328567505 2.4292213916778564 1.927956223487854 1.8085802793502808 1.7811834812164307" 2.137508010864258 \
	tests/golden/class_weight_final.safetensors 1e-6
torch_check nll tests/cli/nets/class_weight_nll.net tests/golden/class_weight_nll_init.safetensors \
	"2.371403455734253 2.1871795654296875 1.9955215454101562 1.740895390510559 1.2527027130126953" 2.156159019470215 \
	tests/golden/class_weight_nll_final.safetensors 1e-6
test_line ce-cpu 2.1375 2

# weights of 1: the seed CNN (nll, a sum) bit for bit as without
mnist_files "$tmp/big" 256 64
steps() { sed -n 's/.*"kind": "step".*"loss": \([^,]*\),.*/\1/p' "$tmp/$1/metrics.jsonl"; }
train() { # train NAME ARGS...: the seed CNN 3 steps on $data, the weights saved as NAME.safetensors
	name=$1
	shift
	# shellcheck disable=SC2086 # $data is two --set arguments
	"$TRAINC" models/mnist_cnn.net $data --threads 1 --set train.steps=3 --set train.log_interval=1 --run-dir "$tmp/$name" \
		--save "$tmp/$name.safetensors" "$@" > "$tmp/$name.out" 2>&1 || { fail "$name: the run failed:"; sed 's/^/    /' "$tmp/$name.out"; }
}
same() { # same A B: the same step losses, test line and weights
	[ -n "$(steps $1)" ] && [ "$(steps $1)" = "$(steps $2)" ] ||
		fail "$2 trains otherwise than $1: $(steps $2 | tr '\n' ' ') against $(steps $1 | tr '\n' ' ')"
	[ "$(grep 'Test set' "$tmp/$1.out")" = "$(grep 'Test set' "$tmp/$2.out")" ] ||
		fail "$2's test line differs from $1's: $(grep 'Test set' "$tmp/$2.out") against $(grep 'Test set' "$tmp/$1.out")"
	build/tests/stcmp "$tmp/$1.safetensors" "$tmp/$2.safetensors" 0 > "$tmp/$2.cmp" 2>&1 ||
		fail "$2's weights differ from $1's: $(cat "$tmp/$2.cmp")"
}
ones='train.loss=nll(reduction="sum", weight=[1, 1, 1, 1, 1, 1, 1, 1, 1, 1])'
train plain
train ones --set "$ones"
same plain ones
train half --set 'train.loss=nll(reduction="sum", weight=[1, 1, 1, 1, 1, 0.5, 1, 1, 1, 1])'
[ "$(steps plain)" != "$(steps half)" ] || fail "a class weighing 0.5 trains as if it weighed 1"
if gpu_lib fakecuda; then
	train plain-gpu $gpu
	train ones-gpu --set "$ones" $gpu
	same plain-gpu ones-gpu
	unset TRAINC_CUDA_LIB
fi

# every class weighing 0: every batch's mean is NaN, said so
# shellcheck disable=SC2086
"$TRAINC" models/mnist_cnn.net $data --threads 1 --set train.steps=2 --set 'train.loss=nll(weight=[0, 0, 0, 0, 0, 0, 0, 0, 0, 0])' \
	--run-dir "$tmp/zero" > "$tmp/zero.out" 2>&1 && fail "weights of 0 under a mean: the run succeeded"
grep -qF "the loss is NaN at step 1 (epoch 1); every target of the batch is the loss's ignore_index (-100) or a class of weight 0" "$tmp/zero.out" ||
	{ fail "a batch weighing 0 is not explained:"; sed 's/^/    /' "$tmp/zero.out"; }
# the GPU trainer sees the loss only: it names what the data has, targets
# of a class weighing 0 (no target here is -100)
if gpu_lib fakecuda; then
	# shellcheck disable=SC2086
	"$TRAINC" models/mnist_cnn.net $data $gpu --set train.steps=2 --set 'train.loss=nll(weight=[0, 0, 0, 0, 0, 0, 0, 0, 0, 0])' \
		--run-dir "$tmp/zero-gpu" > "$tmp/zero-gpu.out" 2>&1 && fail "weights of 0 under a mean on a GPU: the run succeeded"
	grep -qF "; or: a batch whose every target is of a class of weight 0 has a NaN mean, as in PyTorch" "$tmp/zero-gpu.out" ||
		{ fail "a batch weighing 0 on a GPU is not explained:"; sed 's/^/    /' "$tmp/zero-gpu.out"; }
	unset TRAINC_CUDA_LIB
fi
# a class weighing 0 that no target has (class 9: the targets are 0..8)
# is not offered as the cause of a loss that diverged, nor is the
# ignore_index that no target has
build/tests/npy_write --ramp 7 "$tmp/dx.npy" '<f4' 64,4 && build/tests/npy_write --ramp 9 "$tmp/dy.npy" '<i8' 64 ||
	fail "npy_write failed"
printf 'model M {\n    input(4)\n    linear(4, 10)\n}\n' > "$tmp/div.net"
printf 'data { train = npy(input="%s/dx.npy", target="%s/dy.npy") }\n' "$tmp" "$tmp" >> "$tmp/div.net"
printf 'train {\n    loss = cross_entropy(weight=[1, 1, 1, 1, 1, 1, 1, 1, 1, 0])\n' >> "$tmp/div.net"
printf '    optimizer = sgd(lr=1e38)\n    batch = 8\n}\n' >> "$tmp/div.net"
for where in cpu fakecuda; do
	gpu_lib $where || continue
	# shellcheck disable=SC2086
	"$TRAINC" "$tmp/div.net" $gpu --run-dir "$tmp/div-$where" > "$tmp/div-$where.out" 2>&1 && fail "$where: sgd(lr=1e38) did not diverge"
	grep -q 'the loss is [+NaNinfty-]* at step' "$tmp/div-$where.out" && ! grep -q 'weight 0\|ignore_index' "$tmp/div-$where.out" ||
		{ fail "$where: a diverged loss is put down to a class weighing 0:"; sed 's/^/    /' "$tmp/div-$where.out"; }
	unset TRAINC_CUDA_LIB
done

# a checkpoint made with other weights is another setting's
# shellcheck disable=SC2086
"$TRAINC" models/mnist_cnn.net $data --threads 1 --set train.steps=2 --set "$ones" --save "$tmp/ck" --run-dir "$tmp/ck-run" \
	> "$tmp/ck.out" 2>&1 || { fail "the checkpoint run failed:"; sed 's/^/    /' "$tmp/ck.out"; }
# shellcheck disable=SC2086
"$TRAINC" models/mnist_cnn.net $data --threads 1 --set train.steps=3 --resume "$tmp/ck" --run-dir "$tmp/r" > "$tmp/r.out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q 'was made by a different model or settings' "$tmp/r.out" ||
	{ fail "a resume without the weights: exit $rc, expected 2:"; sed 's/^/    /' "$tmp/r.out"; }
exit $failed
