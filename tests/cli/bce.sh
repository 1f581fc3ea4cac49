# bce and bce_with_logits, as PyTorch's BCELoss and BCEWithLogitsLoss
# (test_kern holds PyTorch's losses and gradients, the clamped logs among
# them; test_cuda_body and gpu_ops the GPU's against the CPU's), through
# whole runs of tests/cli/nets/bce.net: bce after sigmoid and
# bce_with_logits on the scores before it are one loss, so the two log the
# same losses and end in the same weights (within float rounding), on the
# CPU and, where CUDA was configured, through the GPU library on the host
# stand-in and over the CUDA kernel files, which train as the CPU does.
# The model's end is checked against the loss (warnings), a bce output
# outside [0, 1] stops the run naming why, and randn targets are refused.
. "$(dirname "$0")/preamble.inc"
net=tests/cli/nets/bce.net
sed '/^    sigmoid$/d' $net > "$tmp/logits.net"

# train NAME NET LOSS [ARGS...]: one thread, every step logged, the weights
# in $tmp/NAME.safetensors
train() {
	name=$1 file=$2 loss=$3
	shift 3
	"$TRAINC" "$file" --threads 1 --set "train.loss=$loss" --set train.log_interval=1 --save "$tmp/$name.safetensors" \
		--run-dir "$tmp/$name" "$@" > "$tmp/$name.out" 2>&1 || { fail "$name: the run failed:"; sed 's/^/    /' "$tmp/$name.out"; }
}
losses() { sed -n 's/.*"kind": "\(step\|eval\)".*"loss": \([^,]*\),.*/\2/p' "$tmp/$1/metrics.jsonl"; }
# close A B R TOL: the step and test losses of run B are R times A's, within TOL relative
close() {
	losses "$1" > "$tmp/a"
	losses "$2" > "$tmp/b"
	paste "$tmp/a" "$tmp/b" > "$tmp/pair"
	[ "$(wc -l < "$tmp/pair")" -eq 15 ] || { fail "$1, $2: $(wc -l < "$tmp/pair") losses, expected 12 steps and 3 tests"; return; }
	awk -v r="$3" -v tol="$4" '{ d = $2 - r * $1; if (d < 0) d = -d; if (!(d <= tol * $2) || $1 <= 0) { print "line " NR ": " $1 " and " $2; exit 1 } }' \
		"$tmp/pair" > "$tmp/bad" || fail "$2's losses are not $3 times $1's: $(cat "$tmp/bad")"
}
near() { # A B TOL: the weights within TOL
	build/tests/stcmp "$tmp/$1.safetensors" "$tmp/$2.safetensors" "$3" > "$tmp/cmp" 2>&1 ||
		fail "$1 and $2 end in other weights: $(cat "$tmp/cmp")"
}

for where in cpu fakecuda kemu; do
	gpu_lib $where || continue
	# shellcheck disable=SC2086 # $gpu is one option and its value, or nothing
	set -- $gpu
	train bce-$where $net bce "$@"
	train logits-$where "$tmp/logits.net" bce_with_logits "$@"
	# a batch's sum is 48 times its mean (16 samples of 3): the same
	# steps at lr / 48, and per sample three times the mean's loss
	train sum-$where $net 'bce(reduction="sum")' --set 'train.optimizer=sgd(lr=0.010416666666666666, momentum=0.9)' "$@"
	close bce-$where logits-$where 1 1e-5
	near bce-$where logits-$where 1e-5
	close bce-$where sum-$where 3 1e-5
	near bce-$where sum-$where 1e-5
	# the GPU library trains as the CPU does
	if [ $where != cpu ]; then
		near bce-cpu bce-$where 1e-5
		near logits-cpu logits-$where 1e-5
	fi
done
gpu_lib cpu
# the loss falls: the first step's loss is above the last test loss
first=$(losses bce-cpu | sed -n 1p) last=$(losses bce-cpu | tail -n 1)
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' || fail "bce does not learn: first loss $first, last test loss $last"

# warnings at the loss, with a note at the model's last layer
"$TRAINC" check "$tmp/logits.net" > "$tmp/w1.out" 2>&1 || fail "check of bce without sigmoid failed"
grep -qF "warning: bce takes probabilities, but the model does not end in sigmoid" "$tmp/w1.out" &&
	grep -qF "logits.net:8:11: note: the model's last layer is here" "$tmp/w1.out" ||
	{ fail "bce without sigmoid is not warned of:"; sed 's/^/    /' "$tmp/w1.out"; }
sed 's/loss = bce$/loss = bce_with_logits/' $net > "$tmp/twice.net"
"$TRAINC" check "$tmp/twice.net" > "$tmp/w2.out" 2>&1 || fail "check of bce_with_logits after sigmoid failed"
grep -qF "twice.net:16:12: warning: bce_with_logits applies sigmoid itself, but the model already ends in sigmoid" "$tmp/w2.out" ||
	{ fail "bce_with_logits after sigmoid is not warned of:"; sed 's/^/    /' "$tmp/w2.out"; }
"$TRAINC" check $net > "$tmp/w3.out" 2>&1 && ! grep -q warning "$tmp/w3.out" ||
	{ fail "bce after sigmoid is warned of:"; sed 's/^/    /' "$tmp/w3.out"; }
# scores outside [0, 1] under bce: NaN at the first step, and the run says why
"$TRAINC" "$tmp/logits.net" --threads 1 --run-dir "$tmp/nan" > "$tmp/nan.out" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -qF "the loss is NaN at step 1 (epoch 1); every layer's output is finite, so one of the model's outputs is outside [0, 1]" "$tmp/nan.out" &&
	grep -qF "bce takes probabilities: end the model in sigmoid, or use bce_with_logits on the raw scores" "$tmp/nan.out" ||
	{ fail "bce on raw scores: exit $rc, not stopped as expected:"; sed 's/^/    /' "$tmp/nan.out"; }
# normal targets are no probabilities
refused randn 's/target=rand(3), samples=64/target=randn(3), samples=64/' \
	"12:13: error: bce needs targets in [0, 1], but randn draws them from N(0, 1); draw them with target=rand(3)"
refused randn-logits 's/loss = bce$/loss = bce_with_logits/; s/target=rand(3), samples=64/target=randn(3), samples=64/' \
	"12:13: error: bce_with_logits needs targets in [0, 1]"
refused class 's/target=rand(3), samples=64/target=classes(3), samples=64/' \
	"12:13: error: bce needs real-valued targets, but this dataset gives class labels"
refused pos_weight 's/loss = bce$/loss = bce_with_logits(pos_weight=2)/' "16:"
exit $failed
