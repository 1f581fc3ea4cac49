# bce and bce_with_logits, as PyTorch's BCELoss and BCEWithLogitsLoss
# (test_kern holds PyTorch's losses and gradients, the clamped logs among
# them; test_cuda_body and gpu_ops the GPU's against the CPU's), through
# whole runs of tests/cli/nets/bce.net: bce after sigmoid and
# bce_with_logits on the scores before it are one loss, so the two log the
# same losses and end in the same weights (within float rounding), on the
# CPU and, where CUDA was configured, through the GPU library on the host
# stand-in and over the CUDA kernel files, which train as the CPU does.
# They match PyTorch's losses and weights from the same start, on data
# drawn as trainc draws it, pos_weight one number or one per output.
# bce_with_logits' pos_weight of 1 is none, bit for bit, and
# resumes its checkpoints; another weight trains otherwise, the GPU's as
# the CPU's.  The model's end is checked against the loss (warnings), a
# bce output outside [0, 1] stops the run naming why, and randn targets
# are refused.
. "$(dirname "$0")/preamble.inc"
. tests/cli/torch_ref.inc
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
logged() { sed -n 's/.*"kind": "\(step\|eval\)".*"loss": \([^,]*\),.*/\2/p' "$tmp/$1/metrics.jsonl"; }
# close A B R TOL: the step and test losses of run B are R times A's, within TOL relative
close() {
	logged "$1" > "$tmp/a"
	logged "$2" > "$tmp/b"
	paste "$tmp/a" "$tmp/b" > "$tmp/pair"
	[ "$(wc -l < "$tmp/pair")" -eq 15 ] || { fail "$1, $2: $(wc -l < "$tmp/pair") losses, expected 12 steps and 3 tests"; return; }
	awk -v r="$3" -v tol="$4" '{ d = $2 - r * $1; if (d < 0) d = -d; if (!(d <= tol * $2) || $1 <= 0) { print "line " NR ": " $1 " and " $2; exit 1 } }' \
		"$tmp/pair" > "$tmp/bad" || fail "$2's losses are not $3 times $1's: $(cat "$tmp/bad")"
}
same_weights() { # A B TOL: the weights within TOL
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
	same_weights bce-$where logits-$where 1e-5
	close bce-$where sum-$where 3 1e-5
	same_weights bce-$where sum-$where 1e-5
	# pos_weight: 1 is none, bit for bit; 3 another run
	train pw1-$where "$tmp/logits.net" 'bce_with_logits(pos_weight=1)' "$@"
	same_weights logits-$where pw1-$where 0
	train pw3-$where "$tmp/logits.net" 'bce_with_logits(pos_weight=3)' "$@"
	[ "$(logged pw3-$where | sed -n 1p)" != "$(logged logits-$where | sed -n 1p)" ] || fail "$where: pos_weight=3 logs pos_weight 1's first loss"
	# the GPU library trains as the CPU does
	if [ $where != cpu ]; then
		same_weights bce-cpu bce-$where 1e-5
		same_weights logits-cpu logits-$where 1e-5
		same_weights pw3-cpu pw3-$where 1e-5
	fi
done
gpu_lib cpu
# the loss falls: the first step's loss is above the last test loss
first=$(logged bce-cpu | sed -n 1p) last=$(logged bce-cpu | tail -n 1)
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' || fail "bce does not learn: first loss $first, last test loss $last"

# warnings at the loss, with a note at the model's last layer
warned "bce without sigmoid" "$tmp/logits.net" "warning: bce takes probabilities, but the model does not end in sigmoid"
warned "bce without sigmoid" "$tmp/logits.net" "logits.net:8:11: note: the model's last layer is here"
sed 's/loss = bce$/loss = bce_with_logits/' $net > "$tmp/twice.net"
warned "bce_with_logits after sigmoid" "$tmp/twice.net" \
	"twice.net:16:12: warning: bce_with_logits applies sigmoid itself, but the model already ends in sigmoid"
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
	"12:46: error: bce needs targets in [0, 1], but randn draws them from N(0, 1); draw them with target=rand(3)"
refused randn-logits 's/loss = bce$/loss = bce_with_logits/; s/target=rand(3), samples=64/target=randn(3), samples=64/' \
	"12:46: error: bce_with_logits needs targets in [0, 1]"
refused class 's/target=rand(3), samples=64/target=classes(3), samples=64/' \
	"12:13: error: bce needs real-valued targets, but this dataset gives class labels"
refused bce-pos_weight 's/loss = bce$/loss = bce(pos_weight=2)/' "16:16: error: bce has no argument 'pos_weight'; it takes reduction"
refused pos_weights 's/loss = bce$/loss = bce_with_logits(pos_weight=[1, 2])/' \
	"16:39: error: pos_weight has 2 weights, but the model's output (3,) has 3 along its last dimension"
refused pos_weights-neg 's/loss = bce$/loss = bce_with_logits(pos_weight=[1, -2, 3])/' \
	"16:43: error: a pos_weight must be a finite number, at least 0, not -2"
refused pos_weight-neg 's/loss = bce$/loss = bce_with_logits(pos_weight=-1)/' \
	"16:39: error: pos_weight must be a finite number, at least 0, not -1"
# pos_weight is part of how the run trains: a checkpoint resumes with it
# written as its default or not, and not with another
"$TRAINC" "$tmp/logits.net" --set train.loss=bce_with_logits --set train.epochs=1 --save "$tmp/ck" --run-dir "$tmp/ck-run" > "$tmp/ck.out" 2>&1 ||
	{ fail "the checkpointed run failed:"; sed 's/^/    /' "$tmp/ck.out"; }
"$TRAINC" "$tmp/logits.net" --set 'train.loss=bce_with_logits(pos_weight=1.0)' --resume "$tmp/ck" --run-dir "$tmp/r1" > "$tmp/r1.out" 2>&1 &&
	grep -q 'Resumed from .* at step 4' "$tmp/r1.out" || { fail "the checkpoint does not resume with pos_weight=1.0:"; sed 's/^/    /' "$tmp/r1.out"; }
"$TRAINC" "$tmp/logits.net" --set 'train.loss=bce_with_logits(pos_weight=2)' --resume "$tmp/ck" --run-dir "$tmp/r2" > "$tmp/r2.out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q 'was made by a different model or settings' "$tmp/r2.out" ||
	{ fail "the checkpoint resumed with pos_weight=2: exit $rc, expected 2:"; sed 's/^/    /' "$tmp/r2.out"; }
# (last, as torch_run sets net)
# PyTorch's runs (tests/golden/bce_torch.py, which draws the synthetic
# sets as trainc does): BCELoss after the sigmoid and BCEWithLogitsLoss
# with pos_weight 3 before it, from the same weights, in the dataset's order
data="--set data.train=synthetic(input=rand(6),target=rand(3),samples=64) --set data.test=synthetic(input=rand(6),target=rand(3),samples=32)"
if torch_run torch-bce $net tests/golden/bce_init.safetensors --set train.shuffle=false; then
	losses torch-bce "0.7008175253868103 0.685996949672699 0.7028818726539612 0.6955966949462891 0.6878865361213684 0.7100415229797363 \
	0.6784618496894836 0.6965015530586243 0.6909315586090088 0.7058429718017578 0.6803798079490662 0.692633330821991" 0.6964728832244873
	weights torch-bce tests/golden/bce_final.safetensors
fi
if torch_run torch-pw3 "$tmp/logits.net" tests/golden/bce_init.safetensors --set train.shuffle=false \
	--set 'train.loss=bce_with_logits(pos_weight=3)'; then
	losses torch-pw3 "1.46661376953125 1.2625735998153687 1.1178386211395264 1.127951741218567 1.2705286741256714 1.335771918296814 \
	1.139755129814148 1.1104410886764526 1.135746955871582 1.2223459482192993 1.2248036861419678 1.1407839059829712" 1.1546473503112793
	weights torch-pw3 tests/golden/bce_pw3_final.safetensors
fi
# a pos_weight per output, on the CPU and the GPU library (not the
# one-kernel step, which takes none)
for where in cpu fakecuda kemu; do
	gpu_lib $where || continue
	# shellcheck disable=SC2086 # $gpu is one option and its value, or nothing
	if torch_run torch-pwl-$where "$tmp/logits.net" tests/golden/bce_init.safetensors --set train.shuffle=false \
		--set 'train.loss=bce_with_logits(pos_weight=[1, 4, 0.5])' $gpu; then
		losses torch-pwl-$where "0.916839599609375 0.9009978771209717 0.8337334990501404 0.82850581407547 0.903090238571167 0.8280804753303528 \
	0.8981263637542725 0.823378324508667 0.8286215662956238 0.8303194046020508 0.8127104640007019 0.8538486361503601" 0.8529095649719238
		weights torch-pwl-$where tests/golden/bce_pw_list_final.safetensors 1e-5
	fi
done
gpu_lib cpu
exit $failed
