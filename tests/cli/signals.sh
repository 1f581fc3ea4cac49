# A single rank (no launcher) stopped by SIGTERM or Ctrl-C says so and how
# to go on, and ends as the signal ends a process; a closed output pipe
# (trainc ... | head) no longer kills it before it writes its weights, as
# it does not kill ranks under the launcher.  Before, both ended it
# silently, the pipe with exit 141 and no weights.  A job of several
# ranks says the same, and keeps a SIGINT it was started ignoring ignored.
. "$(dirname "$0")/preamble.inc"
net=tests/cli/nets/mlp_mse.net
# terminated WHAT SECONDS NOTE ARGS...: trainc ARGS, sent SIGTERM after
# SECONDS, exits 143 with NOTE (a pattern) on stderr
terminated() {
	what=$1 secs=$2 note=$3
	shift 3
	"$TRAINC" $net --set train.steps=100000 "$@" > /dev/null 2> "$tmp/err" &
	pid=$!
	sleep "$secs"
	kill -TERM $pid
	wait $pid
	rc=$?
	[ $rc -eq 143 ] || fail "$what: exit $rc, expected 143"
	grep -q "$note" "$tmp/err" || { fail "$what: no word of it:"; cat "$tmp/err"; }
}
terminated SIGTERM 1 "stopped by a signal before a checkpoint was saved in $tmp/ck" --save "$tmp/ck" --run-dir "$tmp/r1"
# with a checkpoint saved, the note says how to resume from it
terminated "SIGTERM after a checkpoint" 1 "stopped by a signal; --resume $tmp/ck2 continues from its latest checkpoint" \
	--set train.checkpoint_every=100 --save "$tmp/ck2" --run-dir "$tmp/r1b"
"$TRAINC" $net --set train.steps=300 --set train.log_interval=1 --run-dir "$tmp/r2" 2> "$tmp/err2" | head -1 > /dev/null
[ -s "$tmp/r2/weights.safetensors" ] || { fail "a closed output pipe: no weights"; cat "$tmp/err2"; }
[ $failed = 0 ] && echo "ok a single rank: SIGTERM said with how to resume (exit 143); a closed pipe does not stop it"
# resuming a run already past its epochs says there is nothing to train;
# a --resume folder that does not exist is named as such
"$TRAINC" tests/cli/nets/bn_ddp.net --save "$tmp/ep" --run-dir "$tmp/e1" > /dev/null 2>&1 || fail "a 2-epoch run failed"
"$TRAINC" tests/cli/nets/bn_ddp.net --resume "$tmp/ep" --run-dir "$tmp/e2" > "$tmp/out" 2>&1
grep -q "Nothing to train: the run is past epoch 2 and train.epochs is 2" "$tmp/out" || { fail "a finished run resumed:"; cat "$tmp/out"; }
"$TRAINC" $net --resume "$tmp/nowhere" > "$tmp/out" 2>&1
grep -q "nowhere: no such folder" "$tmp/out" || { fail "--resume of a missing folder:"; cat "$tmp/out"; }
[ $failed = 0 ] && echo "ok a run resumed past its epochs has nothing to train; a missing --resume folder is named"

# a job of two ranks stopped by SIGTERM says how to resume too; one started
# with SIGINT ignored (as a shell without job control starts `cmd &`) keeps
# ignoring it, in the launcher and the workers (the launcher caught it)
terminated "a job's SIGTERM" 2 "^trainc: stopped by a signal; --resume $tmp/ck3 continues from its latest checkpoint" \
	--cpus 2 --set train.checkpoint_every=50 --save "$tmp/ck3" --run-dir "$tmp/j1"
"$TRAINC" $net --cpus 2 --set train.steps=1000 --run-dir "$tmp/j2" > /dev/null 2> "$tmp/err" &
pid=$!
sleep 1
kill -INT $pid $(pgrep -P $pid)
wait $pid
rc=$?
[ $rc -eq 0 ] || { fail "a job started ignoring SIGINT: exit $rc"; cat "$tmp/err"; }
[ $failed = 0 ] && echo "ok a job's SIGTERM says how to resume; an ignored SIGINT stays ignored"
exit $failed
