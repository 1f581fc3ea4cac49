# nll(ignore_index=K) and cross_entropy(ignore_index=K), as PyTorch's
# NLLLoss and CrossEntropyLoss: samples whose target is K add nothing to
# the loss or its gradient and do not count in the mean.
# - tests/cli/nets/ignore_index.net (cross_entropy, label smoothing too)
#   and ignore_index_nll.net (nll after log_softmax), trained 5 steps from
#   given weights on MNIST-format files with class 3 (7) ignored, give
#   PyTorch's losses, test loss and final weights within 1e-6, on the CPU
#   and through the GPU library on the host and over its kernel files.
#   The values and files come from tests/golden/ignore_index_torch.py.
# - Partly labelled arrays: Fashion-MNIST's test split saved with every
#   label 3 made -100 trains the seed CNN (its loss a sum) and under a
#   mean bit for bit as the true labels with ignore_index=3 do, on one
#   thread, at --cpus 2 and on the host GPU library.
# - An ignore_index no target has trains as the default does, bit for bit.
# - A batch whose every target is ignored has a NaN mean (PyTorch's 0/0):
#   the run stops saying so and what to change; under a sum it trains.
# - A checkpoint of one ignore_index does not resume under another.
# The language's refusals are tests/errors/train_loss_ignore_*.net.
. "$(dirname "$0")/preamble.inc"
. tests/cli/runs.inc
. tests/cli/torch_ref.inc
mnist_files "$tmp/data" 40 20

# ignore_index_torch.py's output
torch_check ce tests/cli/nets/ignore_index.net tests/golden/ignore_index_init.safetensors \
	"2.433734893798828 2.260396957397461 2.073727607727051 2.08180832862854 1.9265029430389404" 1.8629087448120116 \
	tests/golden/ignore_index_final.safetensors 1e-6
torch_check nll tests/cli/nets/ignore_index_nll.net tests/golden/ignore_index_nll_init.safetensors \
	"2.3681771755218506 2.3834378719329834 2.0301496982574463 2.12365984916687 2.033231735229492" 2.3790430068969726 \
	tests/golden/ignore_index_nll_final.safetensors 1e-6
test_line ce-cpu 1.8629 3

# the Fashion-MNIST test split as arrays: true labels, and class 3 made -100
W=build/tests/npy_write
F=/usr/share/datasets/fashion-mnist
[ -f $F/t10k-images-idx3-ubyte.gz ] || { fail "no Fashion-MNIST under $F (./configure --deps installs it)"; exit 1; }
IM=$F/t10k-images-idx3-ubyte.gz LB=$F/t10k-labels-idx1-ubyte.gz N=10000
$W --idx $IM --norm 0.2860,0.3530 "$tmp/x.npy" '<f4' $N,1,28,28 && $W --idx $LB "$tmp/y.npy" '<i8' $N &&
	$W --idx $LB --map 3:-100 "$tmp/y3.npy" '<i8' $N && $W --idx $LB --first 64:-100 "$tmp/y64.npy" '<i8' $N ||
	fail "npy_write failed"
cnn() { # cnn NAME LABELS: the seed CNN on x.npy and LABELS
	printf 'import "%s/models/mnist_cnn.net"\ndata {\n    train = npy(input="%s/x.npy", target="%s/%s")\n}\n' \
		"$(pwd)" "$tmp" "$tmp" "$2" > "$tmp/$1.net"
}
cnn true y.npy
cnn part y3.npy
cnn first y64.npy
sum='train.loss=nll(reduction="sum", ignore_index=3)'
train t3 true --set "$sum"
train p3 part
same t3 p3
train t3m true --set 'train.loss=nll(ignore_index=3)'
train p3m part --set 'train.loss=nll'
same t3m p3m
train plain true
[ "$(steps plain)" != "$(steps t3)" ] || fail "ignore_index=3 trains as if no class were ignored"
train t3-2 true --set "$sum" --cpus 2
train p3-2 part --cpus 2
same t3-2 p3-2
if gpu_lib fakecuda; then
	train t3-gpu true --set "$sum" $gpu
	train p3-gpu part $gpu
	same t3-gpu p3-gpu
	train t3m-gpu true --set 'train.loss=nll(ignore_index=3)' $gpu
	train p3m-gpu part --set 'train.loss=nll' $gpu
	same t3m-gpu p3m-gpu
	unset TRAINC_CUDA_LIB
fi

# an ignore_index that no target has: the default's run, bit for bit
train absent true --set 'train.loss=nll(reduction="sum", ignore_index=-1)'
same plain absent

# a first batch of 64 ignored samples: NaN under a mean, stopped and said; a sum trains
"$TRAINC" "$tmp/first.net" --threads 1 --set train.steps=2 --set train.shuffle=false --set 'train.loss=nll' \
	--run-dir "$tmp/nan" > "$tmp/nan.out" 2>&1
rc=$?
[ $rc -ne 0 ] || fail "an all-ignored batch under a mean: the run succeeded"
grep -qF 'the loss is NaN at step 1 (epoch 1); every target of the batch is the loss'"'"'s ignore_index (-100), and a mean over no target is NaN' "$tmp/nan.out" &&
	grep -qF 'give the loss reduction="sum"' "$tmp/nan.out" ||
	{ fail "an all-ignored batch is not explained:"; sed 's/^/    /' "$tmp/nan.out"; }
train first first --set train.shuffle=false --set train.log_interval=1
# so in a micro-batch of a step; and on the GPU library, which names the likely cause
sed -e 's/    batch = 64 .*/    global_batch = 128; micro_batch = 32/' -e "s|mnist(.*\$|npy(input=\"$tmp/x.npy\", target=\"$tmp/y64.npy\")|" \
	models/mnist_cnn.net > "$tmp/micro.net"
grep -q 'micro_batch = 32' "$tmp/micro.net" && [ "$(grep -c y64.npy "$tmp/micro.net")" = 2 ] || fail "models/mnist_cnn.net was not rewritten"
"$TRAINC" "$tmp/micro.net" --threads 1 --set train.steps=2 --set train.shuffle=false --set 'train.loss=nll' --run-dir "$tmp/nanm" \
	> "$tmp/nanm.out" 2>&1
grep -qF "every target of the micro-batch is the loss's ignore_index (-100)" "$tmp/nanm.out" ||
	{ fail "an all-ignored micro-batch is not explained:"; sed 's/^/    /' "$tmp/nanm.out"; }
if gpu_lib fakecuda; then
	"$TRAINC" "$tmp/first.net" $gpu --set train.steps=2 --set train.shuffle=false --set 'train.loss=nll' --run-dir "$tmp/nang" \
		> "$tmp/nang.out" 2>&1
	grep -qF "the loss is NaN at step 1 (epoch 1)" "$tmp/nang.out" &&
		grep -qF "a batch whose every target is the loss's ignore_index (-100) has a NaN mean" "$tmp/nang.out" ||
		{ fail "an all-ignored batch on the GPU library is not explained:"; sed 's/^/    /' "$tmp/nang.out"; }
	unset TRAINC_CUDA_LIB
fi
[ "$(steps first | head -n 1)" = 0 ] || fail "an all-ignored batch under a sum: step 1's loss is $(steps first | head -n 1), not 0"

# a checkpoint made with ignore_index=3 is another setting's
"$TRAINC" "$tmp/true.net" --threads 1 --set train.steps=2 --set "$sum" --save "$tmp/ck3" --run-dir "$tmp/ck" > "$tmp/ck.out" 2>&1 ||
	{ fail "the checkpoint run failed:"; sed 's/^/    /' "$tmp/ck.out"; }
"$TRAINC" "$tmp/true.net" --threads 1 --set train.steps=3 --set "$sum" --resume "$tmp/ck3" --run-dir "$tmp/r1" > "$tmp/r1.out" 2>&1 &&
	grep -q 'Resumed from .* at step 2' "$tmp/r1.out" || { fail "ignore_index=3's checkpoint does not resume:"; sed 's/^/    /' "$tmp/r1.out"; }
"$TRAINC" "$tmp/true.net" --threads 1 --set train.steps=3 --resume "$tmp/ck3" --run-dir "$tmp/r2" > "$tmp/r2.out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q 'was made by a different model or settings' "$tmp/r2.out" ||
	{ fail "a resume without ignore_index=3: exit $rc, expected 2:"; sed 's/^/    /' "$tmp/r2.out"; }

# a label neither a class nor the ignore_index is refused at its byte
$W --idx $LB --map 3:-1 "$tmp/yneg.npy" '<i8' $N || fail "npy_write failed"
cnn neg yneg.npy
"$TRAINC" "$tmp/neg.net" --threads 1 --set train.steps=1 --run-dir "$tmp/neg" > "$tmp/neg.out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -qF "yneg.npy: byte 232: the label at index 13 is -1, but the model scores 10 classes (labels 0 to 9, or the loss's ignore_index -100" "$tmp/neg.out" ||
	{ fail "a label of -1: exit $rc, expected 2 and its byte:"; sed 's/^/    /' "$tmp/neg.out"; }
"$TRAINC" "$tmp/neg.net" --threads 1 --set train.steps=1 --set 'train.loss=nll(ignore_index=-1)' --run-dir "$tmp/neg1" \
	> "$tmp/neg1.out" 2>&1 || { fail "labels of -1 under ignore_index=-1 are refused:"; sed 's/^/    /' "$tmp/neg1.out"; }
exit $failed
