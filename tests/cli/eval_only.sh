# train.steps = 0 trains nothing: the run evaluates the weights it starts
# from (--init, --resume or the initial ones) on the test set once and
# writes them unchanged.  A run trained a few steps and saved, then
# evaluated with steps = 0 from its weights, gives the training run's final
# test loss and accuracy, and the weights, running statistics and
# num_batches_tracked come back bit for bit (no training forward moves the
# statistics), at 1 rank and at 2 (DDP); FSDP sharded over 2 ranks
# evaluates them as 1 rank does.  --save DIR is refused (no checkpoint to
# write), a training batch of 1 is no reason to refuse, and a resumed
# checkpoint is evaluated too.
. "$(dirname "$0")/preamble.inc"
net=tests/cli/nets/bn1d_mlp.net

# i64 FILE NAME: an int64 scalar of a safetensors file
i64() {
	len=$(od -An -tu8 -N8 "$1" | tr -d ' ')
	off=$(head -c $((8 + len)) "$1" | tail -c +9 | tr -d ' ' | sed -n "s/.*\"$2\":{[^}]*\"data_offsets\":\[\([0-9]*\),.*/\1/p")
	[ -n "$off" ] && od -An -td8 -j $((8 + len + off)) -N8 "$1" | tr -d ' '
}
# evalline DIR: the last evaluation's loss and accuracy in DIR/metrics.jsonl
evalline() {
	grep '"kind": "eval"' "$1/metrics.jsonl" | tail -n 1 | sed 's/.*\("loss": .*\)}$/\1/'
}
run() { # NAME ARGS...: a run that must succeed
	name=$1
	shift
	"$TRAINC" "$@" --run-dir "$tmp/$name" > "$tmp/$name.out" 2>&1 || { fail "$name: the run failed:"; sed 's/^/    /' "$tmp/$name.out"; }
}
# same NAME A B: weights files A and B equal bit for bit, num_batches_tracked too
same() {
	build/tests/stcmp "$2" "$3" 0 > /dev/null || fail "$1: the weights changed: $(build/tests/stcmp "$2" "$3" 0 2>&1)"
	[ "$(i64 "$2" bn.num_batches_tracked)" = "$(i64 "$3" bn.num_batches_tracked)" ] ||
		fail "$1: num_batches_tracked $(i64 "$2" bn.num_batches_tracked) became $(i64 "$3" bn.num_batches_tracked)"
}

for n in 1 2; do
	run train$n $net --cpus $n --threads 1 --set train.steps=4 --save "$tmp/w$n.safetensors"
	run eval$n $net --cpus $n --threads 1 --set train.steps=0 --init "$tmp/w$n.safetensors" --save "$tmp/e$n.safetensors"
	[ "$(evalline "$tmp/eval$n")" = "$(evalline "$tmp/train$n")" ] ||
		fail "$n rank(s): steps = 0 evaluates to $(evalline "$tmp/eval$n"), the training run's last evaluation was $(evalline "$tmp/train$n")"
	[ "$(grep -c '"kind": "eval"' "$tmp/eval$n/metrics.jsonl")" = 1 ] || fail "$n rank(s): not one evaluation"
	grep -q '"kind": "step"' "$tmp/eval$n/metrics.jsonl" && fail "$n rank(s): steps = 0 logged a step"
	grep -qF "train.steps = 0: nothing is trained, the weights of $tmp/w$n.safetensors are evaluated as given" "$tmp/eval$n.out" ||
		{ fail "$n rank(s): no line saying nothing is trained:"; sed 's/^/    /' "$tmp/eval$n.out"; }
	grep -q "Test set: Average loss" "$tmp/eval$n.out" || fail "$n rank(s): no test line"
	grep -q "Train Epoch\|Training loop" "$tmp/eval$n.out" && fail "$n rank(s): steps = 0 reports training"
	same "$n rank(s), --save" "$tmp/w$n.safetensors" "$tmp/e$n.safetensors"
	same "$n rank(s), the run directory's weights" "$tmp/w$n.safetensors" "$tmp/eval$n/weights.safetensors"
done

# FSDP, sharded over 2 ranks in 3 units, evaluates the weights as 1 rank does
{ cat $net; printf 'parallel fsdp { wrap = size(min_params=50) }\n'; } > "$tmp/fsdp.net"
run fsdp "$tmp/fsdp.net" --cpus 2 --threads 1 --set train.steps=0 --init "$tmp/w2.safetensors" --save "$tmp/f.safetensors"
run one "$net" --threads 1 --set train.steps=0 --init "$tmp/w2.safetensors"
awk -v a="$(evalline "$tmp/fsdp" | sed 's/"loss": \([^,]*\),.*/\1/')" -v b="$(evalline "$tmp/one" | sed 's/"loss": \([^,]*\),.*/\1/')" \
	'BEGIN { d = a - b; exit !(a != "" && d * d <= 1e-24 * b * b) }' ||
	fail "FSDP over 2 ranks evaluates to $(evalline "$tmp/fsdp"), 1 rank to $(evalline "$tmp/one")"
same "FSDP" "$tmp/w2.safetensors" "$tmp/f.safetensors"

# the initial weights, and a training batch of 1 (refused for training)
run init $net --threads 1 --set train.steps=0 --set train.batch=1 --save "$tmp/i.safetensors"
grep -qF "the initial weights (train.seed = 1) are evaluated as given" "$tmp/init.out" || fail "initial weights: $(cat "$tmp/init.out")"
[ "$(i64 "$tmp/i.safetensors" bn.num_batches_tracked)" = 0 ] || fail "initial weights: num_batches_tracked moved"

# a checkpoint, resumed with steps = 0, evaluates as its run's end did
run ck $net --threads 1 --set train.steps=3 --save "$tmp/ck"
run resumed $net --threads 1 --set train.steps=0 --resume "$tmp/ck"
[ "$(evalline "$tmp/resumed")" = "$(evalline "$tmp/ck")" ] ||
	fail "resumed: $(evalline "$tmp/resumed"), the checkpointed run's $(evalline "$tmp/ck")"
same "resumed" "$tmp/ck/weights.safetensors" "$tmp/resumed/weights.safetensors"
# one taken at an epoch's end (5 batches of 8 of 40 samples) is evaluated
# as that epoch's weights: its eval line names the step and the epoch the
# training run's last one did, not the next epoch its position starts
evalfull() { grep '"kind": "eval"' "$1/metrics.jsonl" | tail -n 1 | sed 's/^{"time": [0-9.]*, //'; }
run ck5 $net --threads 1 --set train.steps=5 --save "$tmp/ck5"
run resumed5 $net --threads 1 --set train.steps=0 --resume "$tmp/ck5"
[ "$(evalfull "$tmp/resumed5")" = "$(evalfull "$tmp/ck5")" ] ||
	fail "resumed at an epoch's end: $(evalfull "$tmp/resumed5"), the checkpointed run's $(evalfull "$tmp/ck5")"

# no checkpoint to write
"$TRAINC" $net --set train.steps=0 --save "$tmp/dir" --run-dir "$tmp/nodir" > "$tmp/out" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "--save DIR: exit $rc, expected 2"
grep -qF "trainc: --save $tmp/dir: train.steps = 0 trains nothing, so there is no checkpoint to write; give --save FILE.safetensors" "$tmp/out" ||
	{ fail "--save DIR is not refused:"; sed 's/^/    /' "$tmp/out"; }
[ -e "$tmp/dir" ] && fail "--save DIR: the folder was made"

# no test set: the weights are written unchanged, and the run says so
grep -v 'test = synthetic' $net > "$tmp/notest.net"
run notest "$tmp/notest.net" --threads 1 --set train.steps=0 --init "$tmp/w1.safetensors" --save "$tmp/n.safetensors"
grep -qF "are kept as given: there is no test set to evaluate them on" "$tmp/notest.out" || fail "no test set: $(cat "$tmp/notest.out")"
build/tests/stcmp "$tmp/w1.safetensors" "$tmp/n.safetensors" 0 > /dev/null || fail "no test set: the weights changed"
exit $failed
