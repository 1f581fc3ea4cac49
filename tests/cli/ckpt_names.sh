# A --save folder may hold the user's own files: pruning and the sweep of
# interrupted saves touch only trainc's names, in trainc's exact formats
# (step- and the step's digits; .tmp-step-N-PID, .tmp-shards-N-PID and
# .tmp-latest-PID whose process is gone).  Before, every .tmp-* entry was
# removed and any step-* name counted as one of the two kept checkpoints.
# The two kept are the newest by step number: before, names were compared
# as strings, so past step 99,999,999 each new save (step-100000000 sorts
# before step-99999998) was pruned at once and `latest` named a removed folder.
. "$(dirname "$0")/preamble.inc"
net=tests/cli/nets/mlp_mse.net
ck=$tmp/ck
mkdir -p "$ck/.tmp-mystuff" "$ck/step-notes" "$ck/step-0000001" "$tmp/elsewhere"
echo keep > "$ck/.tmp-mystuff/a.txt"
echo keep > "$ck/step-notes/b.txt"
echo keep > "$tmp/elsewhere/c.txt"
# links are not trainc's folders: one is left, one that step 1's save
# replaces is removed itself, not the files it leads to
ln -s "$tmp/elsewhere" "$ck/step-00000000"
ln -s "$tmp/elsewhere" "$ck/step-00000001"
# leftovers of saves: of processes that are gone (no PID is this large) and of this one
mkdir "$ck/.tmp-step-00000003-999999999" "$ck/.tmp-shards-00000003-999999999" "$ck/.tmp-step-00000003-$$"
: > "$ck/.tmp-latest-999999999"
: > "$ck/.tmp-latest-$$"
"$TRAINC" $net --set train.checkpoint_every=1 --save "$ck" --run-dir "$tmp/r1" > "$tmp/out" 2>&1 || { fail "the run failed"; cat "$tmp/out"; }
for kept in .tmp-mystuff/a.txt step-notes/b.txt step-0000001 step-00000000/c.txt .tmp-step-00000003-$$ .tmp-latest-$$ \
	step-00000005/manifest.txt step-00000006/manifest.txt; do
	[ -e "$ck/$kept" ] || fail "$kept was removed"
done
for gone in .tmp-step-00000003-999999999 .tmp-shards-00000003-999999999 .tmp-latest-999999999 step-00000001 step-00000004; do
	[ -e "$ck/$gone" ] && fail "$gone was left"
done
[ "$(cat "$ck/latest")" = step-00000006 ] || fail "latest: $(cat "$ck/latest")"
[ -e "$tmp/elsewhere/c.txt" ] || fail "a file behind a link was removed"
[ $failed = 0 ] && echo "ok pruning keeps the two newest step folders and leaves the user's files and live saves alone"

# steps past 99,999,999: the folders of a run at steps 4 and 6, renamed as
# steps 99999996 and 99999998, go on to step 100000000
big=$tmp/big
"$TRAINC" $net --set train.checkpoint_every=2 --set train.steps=4 --save "$big" --run-dir "$tmp/r2" > /dev/null 2>&1 || fail "the run at steps 2 and 4 failed"
for s in 2:99999996 4:99999998; do
	from=$(printf 'step-%08d' "${s%:*}") to=step-${s#*:}
	mv "$big/$from" "$big/$to"
	restate "$big/$to" "s/\"step\": ${s%:*},/\"step\": ${s#*:},/"
done
echo step-99999998 > "$big/latest"
"$TRAINC" $net --set train.checkpoint_every=1 --set train.steps=100000000 --set train.log_interval=100 --resume "$big" --save "$big" \
	--run-dir "$tmp/r3" > "$tmp/out" 2>&1 || { fail "the resume to step 100000000 failed"; cat "$tmp/out"; }
grep -q "Resumed from $big at step 99999998" "$tmp/out" || { fail "not resumed at step 99999998:"; cat "$tmp/out"; }
[ "$(cat "$big/latest")" = step-100000000 ] || fail "latest: $(cat "$big/latest")"
[ "$(cd "$big" && echo step-*)" = "step-100000000 step-99999999" ] || fail "kept: $(cd "$big" && echo step-*), not the two newest"
"$TRAINC" $net --set train.steps=100000000 --resume "$big" --run-dir "$tmp/r4" > "$tmp/out" 2>&1
grep -q "Nothing to train" "$tmp/out" || { fail "the folder latest names does not resume:"; cat "$tmp/out"; }
[ $failed = 0 ] && echo "ok past step 99,999,999 the newest checkpoints are kept and latest names one of them"
exit $failed
