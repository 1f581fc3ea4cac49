# train.steps = 0 trains nothing: the run evaluates the weights it starts
# from (--init, --resume or the initial ones) on the test set once and
# writes them unchanged.  A run trained a few steps and saved, then
# evaluated with steps = 0 from its weights, gives the training run's final
# test loss and accuracy, and the weights, running statistics and
# num_batches_tracked come back bit for bit (no training forward moves the
# statistics), at 1 rank and at 2 (DDP); FSDP sharded over 2 ranks
# evaluates them as 1 rank does.  --save DIR is refused (no checkpoint to
# write), a training batch of 1 is no reason to refuse, and a resumed
# checkpoint is evaluated too.  No training batch is split or read, so a
# global_batch (or its micro_batch) that does not split over the ranks is
# evaluated as 1 rank evaluates it, and a checkpoint of a per-rank batch is
# evaluated at another rank count as its run's last evaluation was, and a
# training set with fewer samples than ranks is no reason to refuse; all
# stay refused for training.
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
# lossof DIR: the last evaluation's loss in DIR/metrics.jsonl
lossof() { evalline "$1" | sed 's/"loss": \([^,]*\),.*/\1/'; }
# near NAME A B [REL]: the runs in $tmp/A and $tmp/B evaluate to the same
# loss within REL relative, 1e-12 by default (the ranks' sums add up in
# another order)
near() {
	awk -v a="$(lossof "$tmp/$2")" -v b="$(lossof "$tmp/$3")" -v r="${4:-1e-12}" 'BEGIN { d = a - b; exit !(a != "" && d * d <= r * r * b * b) }' ||
		fail "$1 evaluates to $(evalline "$tmp/$2"), expected $(evalline "$tmp/$3")"
}
# refused NAME MESSAGE ARGS...: a command that exits 2 saying MESSAGE
refused() {
	name=$1 msg=$2
	shift 2
	"$TRAINC" "$@" > "$tmp/out" 2>&1
	rc=$?
	[ $rc -eq 2 ] && grep -qF "$msg" "$tmp/out" || { fail "$name: exit $rc, expected 2 and \"$msg\":"; sed 's/^/    /' "$tmp/out"; }
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
near "FSDP over 2 ranks" fsdp one
same "FSDP" "$tmp/w2.safetensors" "$tmp/f.safetensors"

# a global_batch of 10 over 3 ranks, or in micro-batches of 4 over 2: a
# training run is refused, an evaluation is planned for a share of
# ceil(10 / ranks) and evaluates as 1 rank does; check and print agree
sed 's/; batch = 8;/; global_batch = 10;/' $net > "$tmp/gb.net"
sed 's/; batch = 8;/; global_batch = 10; micro_batch = 4;/' $net > "$tmp/gbm.net"
refused "global_batch 10 over 3 ranks, training" "global_batch 10 does not split evenly over 3 ranks" \
	"$tmp/gb.net" --cpus 3 --threads 1 --set train.steps=1 --run-dir "$tmp/gbno"
refused "micro_batch 4 over 2 ranks, training" "global_batch 10 does not split into 2 ranks of whole micro-batches of 4" \
	check "$tmp/gbm.net" --cpus 2 --set train.steps=1
run gb1 "$tmp/gb.net" --threads 1 --set train.steps=0 --init "$tmp/w2.safetensors"
run gb3 "$tmp/gb.net" --cpus 3 --threads 1 --set train.steps=0 --init "$tmp/w2.safetensors" --save "$tmp/g.safetensors"
run gbm2 "$tmp/gbm.net" --cpus 2 --threads 1 --set train.steps=0 --init "$tmp/w2.safetensors"
near "global_batch 10 over 3 ranks" gb3 gb1
near "global_batch 10 in micro-batches of 4 over 2 ranks" gbm2 gb1
near "global_batch 10 at 1 rank" gb1 one
same "global_batch 10 over 3 ranks" "$tmp/w2.safetensors" "$tmp/g.safetensors"
"$TRAINC" check "$tmp/gb.net" --cpus 3 --set train.steps=0 > "$tmp/out" 2>&1 || { fail "check at 3 ranks:"; sed 's/^/    /' "$tmp/out"; }
"$TRAINC" print "$tmp/gb.net" --cpus 3 --set train.steps=0 > "$tmp/out" 2>&1
grep -q "3 ranks, batch 4 per rank" "$tmp/out" || { fail "print at 3 ranks:"; sed 's/^/    /' "$tmp/out"; }

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

# a checkpoint of a per-rank batch made at 2 ranks, at an epoch's end (3
# batches of 8 of a rank's 20 samples) and in the next epoch: training on
# at 1 rank is refused, evaluating at 1 and 3 ranks gives its run's last
# evaluation (DDP's, with rank 0's running statistics), its step and epoch
for s in 3 4; do
	run ckr$s $net --cpus 2 --threads 1 --set train.steps=$s --save "$tmp/ckr$s"
	for n in 1 3; do
		run ckr$s.$n $net --cpus $n --threads 1 --set train.steps=0 --resume "$tmp/ckr$s"
		near "a checkpoint of 2 ranks after $s steps, at $n rank(s)" ckr$s.$n ckr$s
		[ "$(evalfull "$tmp/ckr$s.$n" | sed 's/"loss": [^,]*, //')" = "$(evalfull "$tmp/ckr$s" | sed 's/"loss": [^,]*, //')" ] ||
			fail "a checkpoint of 2 ranks after $s steps, at $n rank(s): $(evalfull "$tmp/ckr$s.$n"), its run's $(evalfull "$tmp/ckr$s")"
		grep -q "^Resumed from $tmp/ckr$s at step $s (epoch [12], batch [0-9]* of its 2 ranks)$" "$tmp/ckr$s.$n.out" ||
			{ fail "a checkpoint of 2 ranks after $s steps, at $n rank(s): no line naming its position:"; sed 's/^/    /' "$tmp/ckr$s.$n.out"; }
	done
done
refused "a checkpoint of 2 ranks, training on at 1" "was made by 2 ranks, this run has 1; with a per-rank batch the data order depends on the rank count" \
	$net --threads 1 --set train.steps=5 --resume "$tmp/ckr3" --run-dir "$tmp/ckrno"

# fewer training samples than ranks: nothing is read from them, so 3
# ranks evaluate as 1 does; training at 3 ranks stays refused
cat > "$tmp/few.net" <<'EOF'
model MLP {
    input(12)
    fc1 = linear(12, 4)
}
data  { train = synthetic(input=randn(12), target=randn(4), samples=2)
        test = synthetic(input=randn(12), target=randn(4), samples=10) }
train { loss = mse; optimizer = sgd(lr=0.05); batch = 1 }
parallel ddp
EOF
refused "2 training samples, training at 3 ranks" "2 training samples cannot feed 3 ranks" "$tmp/few.net" --cpus 3 --run-dir "$tmp/fewno"
run few3 "$tmp/few.net" --cpus 3 --threads 1 --set train.steps=0
run few1 "$tmp/few.net" --threads 1 --set train.steps=0
# (1 rank evaluates the 10 samples as one chunk, 3 ranks in chunks of 3 or
# 4: the loss of a chunk is a float32 sum, as PyTorch's of a test batch)
near "2 training samples, evaluated at 3 ranks" few3 few1 1e-6

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
