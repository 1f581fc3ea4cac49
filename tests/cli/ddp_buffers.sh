# Buffers (batch-norm statistics) at 2 ranks.  DDP gives every rank rank
# 0's at each forward (PyTorch's broadcast_buffers=True), so evaluation
# uses rank 0's running statistics, and a run resumed after epoch 1 from a
# checkpoint (which holds rank 0's) evaluates epoch 2 exactly as the
# uninterrupted run (before, rank 1 evaluated with its own: 0.3696 against
# 0.3723, PyTorch 0.3669).  Sharded FSDP keeps each rank's own, as
# PyTorch's FSDP, and each rank's shard file saves them, so its resumed run
# evaluates as the uninterrupted one too (before, every rank resumed with
# rank 0's).
. "$(dirname "$0")/preamble.inc"
net=tests/cli/nets/bn_ddp.net
evals() { grep '"kind": "eval"' "$1/metrics.jsonl" | sed 's/.*"epoch": \([0-9]*\), "loss": \([^,]*\),.*/\1 \2/'; }
"$TRAINC" $net --cpus 2 --run-dir "$tmp/whole" > /dev/null 2>&1 || fail "the uninterrupted run failed"
"$TRAINC" $net --cpus 2 --set train.epochs=1 --save "$tmp/ck" --run-dir "$tmp/first" > /dev/null 2>&1 || fail "the first epoch failed"
"$TRAINC" $net --cpus 2 --resume "$tmp/ck" --run-dir "$tmp/rest" > /dev/null 2>&1 || fail "the resumed run failed"
evals "$tmp/whole" | tail -1 > "$tmp/a"
evals "$tmp/rest" | tail -1 > "$tmp/b"
[ -s "$tmp/a" ] && cmp -s "$tmp/a" "$tmp/b" || { fail "epoch 2's evaluation: uninterrupted $(cat "$tmp/a"), resumed $(cat "$tmp/b")"; }
# and the buffers moved: epoch 1's evaluation is not epoch 2's
[ "$(evals "$tmp/whole" | head -1 | cut -d' ' -f2)" != "$(cut -d' ' -f2 "$tmp/a")" ] || fail "the two evaluations are equal"
[ $failed = 0 ] && echo "ok DDP evaluates with rank 0's buffers: resumed = uninterrupted ($(cat "$tmp/a"))"

{ cat $net; echo 'parallel fsdp { shard = "full" }'; } > "$tmp/fsdp.net"
"$TRAINC" "$tmp/fsdp.net" --cpus 2 --run-dir "$tmp/fwhole" > /dev/null 2>&1 || fail "the uninterrupted FSDP run failed"
"$TRAINC" "$tmp/fsdp.net" --cpus 2 --set train.steps=5 --save "$tmp/fck" --run-dir "$tmp/ffirst" > /dev/null 2>&1 || fail "the first FSDP steps failed"
"$TRAINC" "$tmp/fsdp.net" --cpus 2 --resume "$tmp/fck" --run-dir "$tmp/frest" > /dev/null 2>&1 || fail "the resumed FSDP run failed"
evals "$tmp/fwhole" | tail -1 > "$tmp/fa"
evals "$tmp/frest" | tail -1 > "$tmp/fb"
[ -s "$tmp/fa" ] && cmp -s "$tmp/fa" "$tmp/fb" || fail "FSDP, epoch 2's evaluation: uninterrupted $(cat "$tmp/fa"), resumed $(cat "$tmp/fb")"
# each rank kept its own statistics: FSDP does not evaluate as DDP does
cmp -s "$tmp/a" "$tmp/fa" && fail "FSDP evaluated with rank 0's buffers, as DDP ($(cat "$tmp/fa"))"
[ $failed = 0 ] && echo "ok sharded FSDP keeps each rank's buffers, in its checkpoint too: resumed = uninterrupted ($(cat "$tmp/fa"))"

# a checkpoint_every save at an epoch's last step is written after the
# epoch's evaluation, so a run stopped during the evaluation resumes to
# evaluate again (before, the checkpoint came first and the resumed run
# went on to the next epoch: that evaluation was never made)
"$TRAINC" $net --cpus 2 --set train.checkpoint_every=4 --save "$tmp/ce" --run-dir "$tmp/ce-run" > "$tmp/ce.out" 2>&1 ||
	fail "the checkpoint_every run failed"
order=$(grep -n 'Test set\|Checkpoint: step 4 ' "$tmp/ce.out" | head -2 | cut -d: -f2 | cut -c1-4 | tr '\n' ' ')
[ "$order" = "Test Chec " ] || fail "at the epoch's end the checkpoint came before the evaluation: $order"
[ $failed = 0 ] && echo "ok an epoch's last checkpoint_every save follows its evaluation"
exit $failed
