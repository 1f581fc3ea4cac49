# A checkpoint that cannot be written (here: files over a size limit, as a
# full disk refuses them) loses no work: a checkpoint_every save that fails
# is a warning and training goes on, the run directory still gets the
# final weights, the exit status says the checkpoint failed, and no
# temporary folder is left behind; single rank, DDP and sharded FSDP, each
# said once for a job of two ranks (rank 0 for both when each rank's shard
# failed).  Before, the run stopped at the first failed save without the
# weights.
. "$(dirname "$0")/preamble.inc"
cat > "$tmp/m.net" <<'NET'
model M {
    input(64)
    linear(256)
    relu
    linear(10)
}
data { train = synthetic(input=randn(64), target=classes(10), samples=256) }
train { loss = cross_entropy; optimizer = adam(lr=1e-3); batch = 16; steps = 6; checkpoint_every = 2 }
NET
{ cat "$tmp/m.net"; echo 'parallel fsdp { shard = "full" }'; } > "$tmp/f.net"
# the weights (77 KB) fit under 100 KB a file, Adam's state (154 KB) does not;
# the GPU trainer's too, over the host stand-in where CUDA was configured
lib=$PWD/build/tests/trainc-fakecuda.so
cases="m.net --cpus 1|m.net --cpus 2|f.net --cpus 2"
[ -f "$lib" ] && cases="$cases|m.net --gpus 2|f.net --gpus 2"
IFS='|'
set -- $cases
unset IFS
for case in "$@"; do
	set -- $case
	name=$1
	shift
	rm -rf "$tmp/ck" "$tmp/run"
	(trap '' XFSZ; ulimit -f 200; TRAINC_CUDA_LIB=$lib TRAINC_FAKE_GPUS=2 "$TRAINC" "$tmp/$name" "$@" --save "$tmp/ck" \
		--run-dir "$tmp/run" > "$tmp/out" 2>&1)
	rc=$?
	[ $rc -eq 1 ] || fail "$case: exit $rc, expected 1"
	[ "$(grep -c "warning: the checkpoint of step 2 was not saved" "$tmp/out")" = 1 ] || fail "$case: not one warning for step 2"
	grep -q "Train Epoch: 1	Average loss" "$tmp/out" || fail "$case: training did not go on to the end"
	[ "$(grep -c "^trainc: cannot save the checkpoint" "$tmp/out")" = 1 ] || fail "$case: the final failure is not said once"
	grep -q "failed with\|^\[rank [0-9]*\] trainc" "$tmp/out" && fail "$case: a rank said it, or was blamed"
	[ -s "$tmp/run/weights.safetensors" ] && grep -q "(the final weights are there)" "$tmp/out" ||
		fail "$case: the run directory lacks the final weights"
	[ -z "$(ls -A "$tmp/ck" 2>/dev/null | grep tmp)" ] || fail "$case: temporary folders left: $(ls -A "$tmp/ck")"
	[ $failed = 0 ] || { sed 's/^/    /' "$tmp/out" | tail -8; break; }
	echo "ok $case: failed checkpoints said, training went on, weights in the run directory"
done

# the ranks say a failed checkpoint once: above, every rank's shard failed
# and rank 0 spoke for the job; here only rank 1's does (its own file size
# limit, set once it runs, before any save), and rank 1 says so, naming
# itself, once a save and once at the end (before, each rank whose shard
# failed warned, rank 0 added that another rank's had, and at the end every
# rank failed the job, the launcher blaming one of them)
if command -v prlimit > /dev/null; then
	sed 's/steps = 6; checkpoint_every = 2/steps = 400; checkpoint_every = 200/' "$tmp/f.net" > "$tmp/f2.net"
	rm -rf "$tmp/ck" "$tmp/run"
	(trap '' XFSZ; exec "$TRAINC" "$tmp/f2.net" --cpus 2 --save "$tmp/ck" --run-dir "$tmp/run" > "$tmp/out" 2>&1) &
	job=$!
	r1=
	for i in $(seq 1000); do
		for c in $(pgrep -P $job); do
			tr '\0' '\n' < /proc/$c/environ 2> /dev/null | grep -qx RANK=1 && r1=$c
		done
		[ -n "$r1" ] && break
		sleep 0.01
	done
	# stopped, rank 1 holds the job back: no save starts until it goes on
	limited=
	if [ -n "$r1" ] && kill -STOP "$r1" 2> /dev/null; then
		[ -z "$(ls -A "$tmp/ck")" ] && prlimit --pid "$r1" --fsize=60000 && limited=1
		kill -CONT "$r1"
	fi
	wait $job
	rc=$?
	if [ -z "$limited" ]; then
		echo "ok (skipped: the job saved before rank 1's limit was set)"
	else
		[ $rc -eq 1 ] || fail "rank 1's shard: exit $rc, expected 1"
		shard="rank 1 could not write its shard: $tmp/ck/.tmp-shards-00000"
		[ "$(grep -c "^\[rank 1\] trainc: warning: the checkpoint of step [24]00 was not saved: $shard[24]00-[0-9]*/shard-00001-of-00002" \
			"$tmp/out")" = 2 ] || fail "rank 1's shard: not one warning a save, said by rank 1"
		[ "$(grep -c "^trainc: cannot save the checkpoint: $shard" "$tmp/out")" = 1 ] || fail "rank 1's shard: the end not said once"
		[ "$(grep -c 'not saved\|cannot save\|failed with' "$tmp/out")" = 3 ] || fail "rank 1's shard: more said than that"
		[ $failed = 0 ] && echo "ok one rank's shard that cannot be written: said once, by that rank, naming it" ||
			sed 's/^/    /' "$tmp/out" | cut -c1-200
	fi
fi

# only `latest` cannot be written (its temporary file leads to /dev/full,
# a full disk; exec keeps the PID the file is named by): the step's folder
# is taken out again, so "was not saved" is true and latest never names
# anything but a whole checkpoint, and no temporary file is left.  Before,
# the folder stayed, the warning said it was not saved, and the temporary
# file stayed, failing every later save too.
full_latest() { # CK RUN ARGS...: a single-rank run whose first `latest` update fails
	ck=$1 run=$2
	shift 2
	sh -c 'ck=$1; shift; ln -s /dev/full "$ck/.tmp-latest-$$" && exec "$@"' sh "$ck" "$TRAINC" tests/cli/nets/mlp_mse.net \
		--save "$ck" --run-dir "$run" "$@" > "$tmp/out" 2>&1
}
rm -rf "$tmp/ck"
mkdir "$tmp/ck"
full_latest "$tmp/ck" "$tmp/rl1" --set train.checkpoint_every=2
rc=$?
[ $rc -eq 0 ] || fail "latest on a full disk, then not: exit $rc"
grep -q "warning: the checkpoint of step 2 was not saved: $tmp/ck/latest cannot be made to name step-00000002 (.*No space left on device), so $tmp/ck/step-00000002 is removed again; the folder holds no checkpoint yet; training goes on" "$tmp/out" ||
	fail "latest on a full disk: the warning"
[ "$(cd "$tmp/ck" && echo * .tmp*)" = "latest step-00000004 step-00000006 .tmp*" ] || fail "latest on a full disk: left $(ls -A "$tmp/ck")"
# the last save fails so: the run directory has the weights, latest the step before
full_latest "$tmp/ck" "$tmp/rl2" --set train.steps=8 --resume "$tmp/ck"
rc=$?
[ $rc -eq 1 ] && grep -q "(the final weights are there)" "$tmp/out" || fail "the last save's latest on a full disk: exit $rc"
grep -q "so $tmp/ck/step-00000008 is removed again and latest still names the checkpoint before it" "$tmp/out" ||
	fail "the last save's latest on a full disk: the message"
[ "$(cat "$tmp/ck/latest")" = step-00000006 ] && [ ! -e "$tmp/ck/step-00000008" ] && [ -z "$(ls -A "$tmp/ck" | grep tmp)" ] ||
	fail "the last save's latest on a full disk: left $(ls -A "$tmp/ck"), latest $(cat "$tmp/ck/latest")"
[ $failed = 0 ] && echo "ok a latest that cannot be written: the step's folder is taken out again, as the warning says" ||
	sed 's/^/    /' "$tmp/out" | tail -8

# metrics.jsonl past the size limit: one warning, training goes on, and
# every line left is whole (before, a failed write was ignored and the next
# line was glued to the half-written one)
(trap '' XFSZ; ulimit -f 16; "$TRAINC" models/toy.net --set train.steps=200 --set train.log_interval=1 --run-dir "$tmp/rm" \
	> /dev/null 2> "$tmp/err")
rc=$?
[ $rc -eq 0 ] || fail "metrics.jsonl over the limit: exit $rc"
[ "$(grep -c 'warning: .*metrics.jsonl: write failed' "$tmp/err")" = 1 ] || { fail "metrics.jsonl over the limit: not one warning:"; cat "$tmp/err"; }
[ -s "$tmp/rm/weights.safetensors" ] || fail "metrics.jsonl over the limit: no final weights"
bad=$(grep -cv '^{"time": .*}$' "$tmp/rm/metrics.jsonl")
[ "$bad" = 0 ] || fail "metrics.jsonl over the limit: $bad broken lines"
[ $failed = 0 ] && echo "ok metrics.jsonl that cannot grow: one warning, whole lines, the run ends well"
# the final weights' temporary file, left by a run killed while writing
# it (its PID in its name), is removed by the next write to that path; a
# live writer's stays (before, every such file stayed for good)
dead=$(sh -c 'echo $$')
: > "$tmp/w.safetensors.tmp.$dead.Xy12Zw"
: > "$tmp/w.safetensors.tmp.$$.Xy12Zw"
"$TRAINC" models/toy.net --set train.steps=2 --save "$tmp/w.safetensors" --run-dir "$tmp/rw" > "$tmp/out" 2>&1 ||
	fail "--save w.safetensors: $(cat "$tmp/out")"
[ "$(cd "$tmp" && echo w.safetensors*)" = "w.safetensors w.safetensors.tmp.$$.Xy12Zw" ] ||
	fail "the killed writer's temporary file is not removed, or the live one's is: $(cd "$tmp" && echo w.safetensors*)"
[ $failed = 0 ] && echo "ok a temporary weights file whose writer is gone is removed by the next write"
exit $failed
