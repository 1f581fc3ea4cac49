# A checkpoint folder belongs to one run: a fresh run into a folder that
# holds another run's checkpoints is refused (before, it replaced them
# silently), the run continues into it with --resume DIR --save DIR, and
# while a run saves into a folder a second one is refused (before, each
# removed the other's half-written saves).
. "$(dirname "$0")/preamble.inc"
net=tests/cli/nets/mlp_mse.net
"$TRAINC" $net --save "$tmp/ck" --run-dir "$tmp/r1" > /dev/null 2>&1 || fail "the first run failed"
before=$(cat "$tmp/ck/latest")
"$TRAINC" $net --set train.seed=7 --save "$tmp/ck" --run-dir "$tmp/r2" > "$tmp/out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "already holds another run's checkpoints; continue that run with --resume" "$tmp/out" ||
	{ fail "a fresh run into another run's checkpoints: exit $rc"; cat "$tmp/out"; }
[ "$(cat "$tmp/ck/latest")" = "$before" ] || fail "the refused run changed the folder"
"$TRAINC" $net --set train.steps=8 --resume "$tmp/ck" --save "$tmp/ck" --run-dir "$tmp/r3" > /dev/null 2>&1 ||
	fail "--resume DIR --save DIR was refused"
[ "$(cat "$tmp/ck/latest")" = step-00000008 ] || fail "the resumed run did not save into its folder: $(cat "$tmp/ck/latest")"
# another run's run directory is no checkpoint folder either (its record,
# weights and metrics would sit among this run's checkpoints)
"$TRAINC" $net --save "$tmp/r1" --run-dir "$tmp/r5" > "$tmp/out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "is another run's run directory (it holds run.json); save into a new folder" "$tmp/out" ||
	{ fail "--save into another run's run directory: exit $rc"; cat "$tmp/out"; }
[ -e "$tmp/r1/latest" ] && fail "the refused run saved into another run's run directory"
# this run's own run directory may be its --save folder
"$TRAINC" $net --save "$tmp/r6" --run-dir "$tmp/r6" > "$tmp/out" 2>&1 || { fail "--save = --run-dir was refused"; cat "$tmp/out"; }
mkdir "$tmp/busy"
flock "$tmp/busy" "$TRAINC" $net --save "$tmp/busy" --run-dir "$tmp/r4" > "$tmp/out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "another trainc run is saving into it" "$tmp/out" || { fail "a folder in use: exit $rc"; cat "$tmp/out"; }
[ $failed = 0 ] && echo "ok a checkpoint folder belongs to one run: others refused, --resume continues into it"
exit $failed
