# cross_entropy(label_smoothing=EPS), as PyTorch's CrossEntropyLoss:
# tests/cli/nets/label_smoothing.net trained 5 steps from given initial
# weights gives PyTorch's losses, test set loss (smoothed too, as the same
# criterion gives) and final weights within 1e-6, on the CPU and, where
# CUDA was configured, through the GPU library on the host and over its
# kernel files (the one-kernel step's loss included).  The reference
# values and files come from tests/golden/label_smoothing_torch.py.
# label_smoothing=0 is cross_entropy itself: the same losses bit for bit,
# and a checkpoint of one resumes with the other; another smoothing trains
# another way, so a resume with it is refused.
# Its errors (nll's and mse's, a value outside [0, 1]) are
# tests/errors/train_loss_smoothing_*.net; test_kern and test_cuda_body
# check the kernels against PyTorch's gradients, sums and ignored rows.
. "$(dirname "$0")/preamble.inc"
. tests/cli/torch_ref.inc
mnist_files "$tmp/data" 40 20
net=tests/cli/nets/label_smoothing.net

# label_smoothing_torch.py's output
torch_check smooth $net tests/golden/label_smoothing_init.safetensors \
	"2.3511908054351807 2.3498549461364746 2.2328011989593506 2.126204013824463 2.111971378326416" 2.274201011657715 \
	tests/golden/label_smoothing_final.safetensors 1e-6

# at 0, cross_entropy itself
sed 's/cross_entropy(label_smoothing=0.2)/cross_entropy/' $net > "$tmp/plain.net"
sed 's/label_smoothing=0.2/label_smoothing=0/' $net > "$tmp/zero.net"
grep -q 'loss = cross_entropy$' "$tmp/plain.net" && grep -q 'label_smoothing=0)' "$tmp/zero.net" || fail "the nets were not rewritten"
steps() { sed -n 's/.*"kind": "step".*"loss": \([^,]*\),.*/\1/p' "$tmp/$1/metrics.jsonl"; }
for v in plain zero; do
	"$TRAINC" "$tmp/$v.net" --threads 1 --set train.steps=4 --save "$tmp/$v-ck" --run-dir "$tmp/$v" > "$tmp/$v.out" 2>&1 ||
		{ fail "$v: the run failed:"; sed 's/^/    /' "$tmp/$v.out"; }
done
[ -n "$(steps plain)" ] && [ "$(steps plain)" = "$(steps zero)" ] ||
	fail "label_smoothing=0 does not train as cross_entropy: $(steps plain | tr '\n' ' ') against $(steps zero | tr '\n' ' ')"
[ "$(steps plain)" != "$(steps smooth-cpu)" ] || fail "label_smoothing=0.2 trains as cross_entropy"
"$TRAINC" "$tmp/zero.net" --resume "$tmp/plain-ck" --set train.steps=5 --run-dir "$tmp/r1" > "$tmp/r1.out" 2>&1 &&
	grep -q 'Resumed from .* at step 4' "$tmp/r1.out" || { fail "cross_entropy's checkpoint does not resume at 0:"; sed 's/^/    /' "$tmp/r1.out"; }
"$TRAINC" $net --resume "$tmp/plain-ck" --set train.steps=5 --run-dir "$tmp/r2" > "$tmp/r2.out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q 'was made by a different model or settings' "$tmp/r2.out" ||
	{ fail "a resume with label_smoothing=0.2 from cross_entropy's checkpoint: exit $rc, expected 2:"; sed 's/^/    /' "$tmp/r2.out"; }
exit $failed
