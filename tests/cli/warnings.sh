# Warnings: what compiles but trains otherwise than meant.  `trainc check`
# shows them and exits 0, a run shows them once (not again from each
# worker) and trains on.
. "$(dirname "$0")/preamble.inc"

# write NAME LAST-LAYER LOSS SCHEDULER: a small classifier
write() {
	printf 'model M {\n    input(8)\n    linear(8, 4)\n    %s\n}\n' "$2" > "$tmp/$1.net"
	printf 'data { train = synthetic(input=randn(8), target=classes(4), samples=64) }\n' >> "$tmp/$1.net"
	printf 'train {\n    loss = %s\n    optimizer = sgd(lr=0.1)\n    scheduler = %s\n    batch = 16\n}\n' "$3" "$4" >> "$tmp/$1.net"
}
# warns NAME WANT...: `trainc check` exits 0 and prints exactly WANT (lines)
warns() {
	name=$1
	shift
	"$TRAINC" check "$tmp/$name.net" > "$tmp/out" 2> "$tmp/err"
	rc=$?
	[ "$rc" -eq 0 ] || fail "$name: check exited $rc"
	[ -s "$tmp/out" ] && fail "$name: check wrote to stdout"
	: > "$tmp/want"
	[ $# -gt 0 ] && printf '%s\n' "$@" > "$tmp/want"
	cmp -s "$tmp/want" "$tmp/err" || { fail "$name: unexpected diagnostics:"; diff "$tmp/want" "$tmp/err" | sed 's/^/    /'; }
}

write nll relu nll constant
f=$tmp/nll.net
warns nll \
	"$f:8:12: warning: nll takes log-probabilities, but the model does not end in log_softmax: on raw scores the loss falls without bound; use cross_entropy, or end the model in log_softmax(dim=1)" \
	"    loss = nll" \
	"           ^~~" \
	"$f:4:5: note: the model's last layer is here" \
	"    relu" \
	"    ^~~~"

write nll_softmax softmax 'nll(reduction="sum")' constant
f=$tmp/nll_softmax.net
warns nll_softmax \
	"$f:8:12: warning: nll takes log-probabilities, but the model ends in softmax, which gives probabilities; end it in log_softmax(dim=1) instead, or drop the softmax and use cross_entropy" \
	'    loss = nll(reduction="sum")' \
	"           ^~~" \
	"$f:4:5: note: the model's last layer is here" \
	"    softmax" \
	"    ^~~~~~~"

write ce_softmax 'softmax(dim=1)' cross_entropy constant
f=$tmp/ce_softmax.net
warns ce_softmax \
	"$f:8:12: warning: cross_entropy applies log_softmax itself, but the model already ends in softmax: softmax is applied twice and learning slows; drop the softmax" \
	"    loss = cross_entropy" \
	"           ^~~~~~~~~~~~~" \
	"$f:4:5: note: the model's last layer is here" \
	"    softmax(dim=1)" \
	"    ^~~~~~~"

# what is meant: no warning
write clean 'log_softmax(dim=1)' nll 'cosine(t_max=4, every="step")'
warns clean
write clean2 relu cross_entropy 'cosine(t_max=1)'
warns clean2

# cosine counted in epochs over a run of fewer epochs
write cosine relu cross_entropy 'cosine(t_max=938)'
f=$tmp/cosine.net
warns cosine \
	"$f:10:30: warning: cosine's t_max is 938 epochs (every=\"epoch\"), but the run has 1 epoch: the rate never comes down to eta_min; to count t_max in optimizer steps, add every=\"step\"" \
	"    scheduler = cosine(t_max=938)" \
	"                             ^~~"
# counted in steps: 64 samples in batches of 16 are 4 steps an epoch, 8 on 2 epochs
write cosine_steps relu cross_entropy 'cosine(t_max=100, every="step")'
f=$tmp/cosine_steps.net
"$TRAINC" check "$f" --set train.epochs=2 2> "$tmp/err" || fail "cosine_steps: check failed"
grep -qF "$f:10:30: warning: cosine's t_max is 100 steps, but the run has 8 optimizer steps, so the rate does not come down to eta_min; make t_max at most 8" "$tmp/err" ||
	{ fail "cosine_steps: no warning:"; sed 's/^/    /' "$tmp/err"; }
# on 2 ranks each takes 32 samples: 2 steps an epoch
"$TRAINC" check "$f" --cpus 2 2> "$tmp/err" || fail "cosine_steps --cpus 2: check failed"
[ "$(grep -c 'warning:' "$tmp/err")" -eq 1 ] || { fail "cosine_steps --cpus 2: not one warning:"; sed 's/^/    /' "$tmp/err"; }
grep -qF "the run has 2 optimizer steps" "$tmp/err" || { fail "cosine_steps --cpus 2: wrong step count:"; sed 's/^/    /' "$tmp/err"; }
# the run's length unknown (an mnist set's size is read at run time): no warning
printf 'model M {\n    input(1, 28, 28)\n    flatten\n    linear(10)\n}\n' > "$tmp/mnist.net"
printf 'data { train = mnist("/usr/share/datasets/fashion-mnist") }\n' >> "$tmp/mnist.net"
printf 'train { loss = cross_entropy; optimizer = sgd(lr=0.1); scheduler = cosine(t_max=100000, every="step"); batch = 64 }\n' >> "$tmp/mnist.net"
warns mnist

# a dilated max-pool window that steps over the whole input: PyTorch gives
# -inf there (and so a non-finite loss); a column of width 1 whose window
# starts in the padding at -1 has taps at -1, 1, 3 and 5
printf 'model M {\n    input(1, 4, 1)\n    pool = maxpool2d((2, 4), stride=(1, 5), padding=(0, 1), dilation=(1, 2), ceil_mode=true)\n}\n' > "$tmp/pool.net"
f=$tmp/pool.net
warns pool \
	"$f:3:12: warning: pool: output column 0's window has no tap inside the input (width 1, padding 1, dilation 2): its value is -inf, as in PyTorch, and the loss will not be finite; use less padding or dilation" \
	"    pool = maxpool2d((2, 4), stride=(1, 5), padding=(0, 1), dilation=(1, 2), ceil_mode=true)" \
	"           ^~~~~~~~~"
# dilation 1, or a window whose taps reach the input: no warning
sed 's/dilation=(1, 2)/dilation=(1, 1)/' "$f" > "$tmp/pool_plain.net"
warns pool_plain
printf 'model M {\n    input(1, 4, 2)\n    pool = maxpool2d((2, 4), stride=(1, 5), padding=(0, 1), dilation=(1, 2), ceil_mode=true)\n}\n' > "$tmp/pool_reach.net"
warns pool_reach

# a run warns once, from the launcher, and trains on
for ranks in 1 2; do
	"$TRAINC" "$tmp/nll.net" --cpus $ranks --set train.steps=2 --run-dir "$tmp/run$ranks" > "$tmp/out" 2>&1
	rc=$?
	[ "$rc" -eq 0 ] || { fail "nll at $ranks rank(s): exit $rc"; sed 's/^/    /' "$tmp/out" | tail; }
	[ "$(grep -c 'warning: nll takes log-probabilities' "$tmp/out")" -eq 1 ] ||
		{ fail "nll at $ranks rank(s): not warned exactly once:"; sed 's/^/    /' "$tmp/out" | head -30; }
	grep -q 'Train Epoch' "$tmp/out" || fail "nll at $ranks rank(s): did not train"
done
exit $failed
