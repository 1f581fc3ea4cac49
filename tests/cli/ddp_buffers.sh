# DDP gives every rank rank 0's buffers at each forward (PyTorch's
# broadcast_buffers=True), so evaluation at 2 ranks uses rank 0's running
# statistics: a run resumed after epoch 1 from a checkpoint (which holds
# rank 0's buffers) evaluates epoch 2 exactly as the uninterrupted run.
# Before, rank 1 evaluated with its own statistics, and the resumed run's
# epoch 2 evaluation differed (0.3696 against 0.3723; PyTorch 0.3669).
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
exit $failed
