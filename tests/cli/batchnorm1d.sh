# batchnorm1d against PyTorch's BatchNorm1d: the MLP linear -> batchnorm1d
# -> relu -> linear (input (C,)) and a model whose batch norm sees (C, L),
# trained 5 steps from the same initial weights (--init; batch norm weight,
# bias and running statistics away from their defaults) on the same
# MNIST-format samples, give PyTorch 1.13's losses, final weights and
# buffers (running_mean, running_var, num_batches_tracked) and evaluation
# (running statistics) within 1e-6.  The reference values and files come
# from tests/golden/batchnorm1d_torch.py, which draws the samples as
# samples() below does.  Also: print shows PyTorch's repr, and a batch of
# 1 in training is refused as PyTorch refuses it.
. "$(dirname "$0")/preamble.inc"

# samples N SEED WHAT: the images (WHAT=images) or labels of N samples, as
# octal escapes for printf; see batchnorm1d_torch.py's samples()
samples() {
	awk -v n="$1" -v x="$2" -v what="$3" '
	function be32(v) { printf "\\%03o\\%03o\\%03o\\%03o", int(v / 16777216) % 256, int(v / 65536) % 256, int(v / 256) % 256, v % 256 }
	BEGIN {
		if (what == "images") { printf "\\000\\000\\010\\003"; be32(n); be32(28); be32(28) }
		else { printf "\\000\\000\\010\\001"; be32(n) }
		for (s = 0; s < n; s++) {
			x = (x * 75 + 74) % 65537
			label = x % 10
			if (what != "images") printf "\\%03o", label
			for (p = 0; p < 784; p++) {
				x = (x * 75 + 74) % 65537
				r = int(int(p / 28) / 7) * 4 + int((p % 28) / 7)
				if (what == "images") printf "\\%03o", x % 128 + ((r + label) % 3 == 0 ? 127 : 0)
			}
		}
	}'
}
mkdir -p "$tmp/data"
printf "$(samples 40 1 images)" > "$tmp/data/train-images-idx3-ubyte"
printf "$(samples 40 1 labels)" > "$tmp/data/train-labels-idx1-ubyte"
printf "$(samples 20 2 images)" > "$tmp/data/t10k-images-idx3-ubyte"
printf "$(samples 20 2 labels)" > "$tmp/data/t10k-labels-idx1-ubyte"
[ "$(wc -c < "$tmp/data/train-images-idx3-ubyte")" -eq $((16 + 40 * 784)) ] || fail "the training images were not written"
data="--set data.train=mnist(\"$tmp/data\") --set data.test=mnist(\"$tmp/data\",split=\"test\")"

# near NAME GOT WANT: |got - want| <= 1e-6 (1 + |want|)
near() {
	awk -v g="$2" -v w="$3" 'BEGIN { d = g - w; if (d < 0) d = -d; a = w < 0 ? -w : w; exit !(g != "" && d <= 1e-6 * (1 + a)) }' ||
		fail "$1: $2, PyTorch $3"
}

# i64 FILE NAME: an int64 scalar of a safetensors file
i64() {
	len=$(od -An -tu8 -N8 "$1" | tr -d ' ')
	off=$(head -c $((8 + len)) "$1" | tail -c +9 | tr -d ' ' | sed -n "s/.*\"$2\":{[^}]*\"data_offsets\":\[\([0-9]*\),.*/\1/p")
	[ -n "$off" ] && od -An -td8 -j $((8 + len + off)) -N8 "$1" | tr -d ' '
}

# check NAME LOSSES TEST_LOSS CORRECT: the run of tests/cli/nets/bn1d_NAME.net
check() {
	name=$1 want_losses=$2 want_test=$3 want_correct=$4
	# shellcheck disable=SC2086 # $data is two --set arguments
	"$TRAINC" tests/cli/nets/bn1d_$name.net $data --threads 1 --init tests/golden/bn1d_${name}_init.safetensors \
		--set train.log_interval=1 --save "$tmp/$name.safetensors" --run-dir "$tmp/$name" > "$tmp/$name.out" 2>&1 ||
		{ fail "$name: the run failed:"; sed 's/^/    /' "$tmp/$name.out"; return; }
	got=$(sed -n 's/.*"kind": "step".*"loss": \([^,]*\),.*/\1/p' "$tmp/$name/metrics.jsonl" | tr '\n' ' ')
	set -- $want_losses
	k=0
	for g in $got; do
		k=$((k + 1))
		near "$name: step $k's loss" "$g" "$(eval echo \${$k})"
	done
	[ $k -eq 5 ] || fail "$name: $k step losses logged, expected 5"
	eval=$(grep '"kind": "eval"' "$tmp/$name/metrics.jsonl")
	near "$name: the test set's loss" "$(echo "$eval" | sed -n 's/.*"loss": \([^,]*\),.*/\1/p')" "$want_test"
	echo "$eval" | grep -qF "\"accuracy\": $want_correct}" || fail "$name: test accuracy $eval, expected $want_correct"
	build/tests/stcmp tests/golden/bn1d_${name}_final.safetensors "$tmp/$name.safetensors" 1e-6 > "$tmp/$name.cmp" ||
		fail "$name: the final weights and running statistics are not PyTorch's: $(build/tests/stcmp tests/golden/bn1d_${name}_final.safetensors "$tmp/$name.safetensors" 1e-6 2>&1)"
	[ "$(i64 "$tmp/$name.safetensors" bn.num_batches_tracked)" = 12 ] ||
		fail "$name: bn.num_batches_tracked is '$(i64 "$tmp/$name.safetensors" bn.num_batches_tracked)', PyTorch's 12 (7 + 5 steps)"
}

# batchnorm1d_torch.py's output
check mlp "2.31669020652771 2.3927905559539795 2.198050022125244 2.26839017868042 2.4868595600128174" 2.3402862548828125 0.05
check seq "2.4538588523864746 2.4754645824432373 2.3574440479278564 2.2374110221862793 2.400237798690796" 2.329839515686035 0

# PyTorch's repr, defaults and given arguments
"$TRAINC" print tests/cli/nets/bn1d_mlp.net | grep -qF '(bn): BatchNorm1d(12, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)' ||
	fail "print does not show BatchNorm1d's repr: $("$TRAINC" print tests/cli/nets/bn1d_mlp.net | grep '(bn)')"
"$TRAINC" print tests/cli/nets/bn1d_seq.net | grep -qF '(bn): BatchNorm1d(7, eps=0.001, momentum=0.2, affine=True, track_running_stats=True)' ||
	fail "print does not show BatchNorm1d's repr: $("$TRAINC" print tests/cli/nets/bn1d_seq.net | grep '(bn)')"

# a training batch of 1 over (C,): "Expected more than 1 value per channel
# when training" in PyTorch, refused before any step here
"$TRAINC" tests/cli/nets/bn1d_mlp.net --set train.batch=1 --set train.steps=1 --run-dir "$tmp/one" > "$tmp/out" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "batch 1: exit $rc, expected 1"
grep -qF "trainc: tests/cli/nets/bn1d_mlp.net:9:10: batchnorm1d would normalise over one value per channel: its input is (12,), one value a channel, and a training batch (or pipeline micro-batch) holds 1 sample" "$tmp/out" ||
	{ fail "batch 1 is not refused with the layer's place:"; sed 's/^/    /' "$tmp/out"; }
# over (C, L) a sample has L values a channel: a batch of 1 trains, as in PyTorch
"$TRAINC" tests/cli/nets/bn1d_seq.net --set train.batch=1 --set train.steps=2 --run-dir "$tmp/seq1" > "$tmp/out" 2>&1 ||
	{ fail "batch 1 over (C, L) was refused:"; sed 's/^/    /' "$tmp/out"; }
exit $failed
