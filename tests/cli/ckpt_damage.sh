# What --resume says of a checkpoint it cannot continue from is true and
# says what to do: `latest` naming a file is not taken for an incomplete
# folder; a newest checkpoint that fails its manifest names the step folder
# before it when that one is whole (and following the advice resumes);
# state.json values no run writes are damage: a world beyond an int (before,
# 4294967297 was read as 1), a batch past the end of an epoch (before, taken
# for a later epoch), a file longer than any state.json (before, "a field
# is missing"), a micro-batch size these settings do not take and a key
# given twice (before, read by the first copy and trusted); sharded shard files swapped (manifest and all) are named,
# where they trained on each other's parts.
. "$(dirname "$0")/preamble.inc"
net=tests/cli/nets/mlp_mse.net
"$TRAINC" $net --set train.checkpoint_every=2 --save "$tmp/ck" --run-dir "$tmp/r0" > /dev/null 2>&1 || fail "the checkpointing run failed"
n=0
refused() { # FOLDER MESSAGE: --resume FOLDER exits 2 saying MESSAGE
	n=$((n + 1))
	"$TRAINC" $net --resume "$1" --run-dir "$tmp/r$n" > "$tmp/out" 2>&1
	rc=$?
	[ $rc -eq 2 ] && grep -qF -- "$2" "$tmp/out" || { fail "--resume $1: exit $rc, no '$2':"; sed 's/^/    /' "$tmp/out"; }
}
copy() { rm -rf "$tmp/$1"; cp -r "$tmp/ck" "$tmp/$1"; }

copy file
: > "$tmp/file/step-00000008"
echo step-00000008 > "$tmp/file/latest"
refused "$tmp/file" "$tmp/file/latest names step-00000008, which is not a folder, so not a checkpoint; $tmp/file/step-00000006 is a whole checkpoint: write step-00000006 into $tmp/file/latest to resume from it"

copy bad
printf 'X' | dd of="$tmp/bad/step-00000006/weights.safetensors" bs=1 seek=200 conv=notrunc 2> /dev/null
refused "$tmp/bad" "the file is corrupt; $tmp/bad/step-00000004 is a whole checkpoint: write step-00000004 into $tmp/bad/latest to resume from it"
echo step-00000004 > "$tmp/bad/latest"
"$TRAINC" $net --resume "$tmp/bad" --run-dir "$tmp/rb" > "$tmp/out" 2>&1 && grep -q "Resumed from $tmp/bad at step 4" "$tmp/out" ||
	{ fail "the advice does not resume:"; sed 's/^/    /' "$tmp/out"; }
# the one before damaged too: nothing is offered
echo step-00000006 > "$tmp/bad/latest"
printf 'X' | dd of="$tmp/bad/step-00000004/weights.safetensors" bs=1 seek=200 conv=notrunc 2> /dev/null
refused "$tmp/bad" "the file is corrupt"
grep -q "whole checkpoint" "$tmp/out" && fail "a damaged checkpoint was offered: $(cat "$tmp/out")"

copy world
restate "$tmp/world/step-00000006" 's/"world": 1,/"world": 4294967297,/'
refused "$tmp/world" "state.json: a position no run reaches (epoch 1, batch 6, step 6, 4294967297 ranks, micro-batch 8); the checkpoint is damaged"
copy batch
restate "$tmp/batch/step-00000006" 's/"batch": 6,/"batch": 13,/'
refused "$tmp/batch" "the state.json of the checkpoint 'latest' names says \"batch\": 13, past the end of an epoch (12 batches at this run's 1 rank); the checkpoint is damaged"
copy micro
restate "$tmp/micro/step-00000006" 's/"micro": 8,/"micro": 4,/'
refused "$tmp/micro" "state.json: \"micro\": 4 at 1 rank, where these settings take 8 samples per micro-batch; the checkpoint is damaged"
copy twice
restate "$tmp/twice/step-00000006" '1a\
  "step": 2,'
refused "$tmp/twice" "state.json: \"step\" is given twice; the checkpoint is damaged"
copy long
restate "$tmp/long/step-00000006" "1s/^/$(printf '%2100s' '')/"
refused "$tmp/long" "state.json: more than 2047 bytes, longer than any state.json trainc writes; the checkpoint is damaged"
[ $failed = 0 ] && echo "ok what --resume says of a checkpoint it cannot use is true and says what to do"
# the two shard files of a 2-rank FSDP checkpoint, swapped with their manifest lines
"$TRAINC" tests/cli/nets/mlp_fsdp.net --cpus 2 --save "$tmp/sh" --run-dir "$tmp/rs" > /dev/null 2>&1 || fail "the sharded run failed"
f=$tmp/sh/$(cat "$tmp/sh/latest")
mv "$f/shard-00000-of-00002.safetensors" "$f/x" && mv "$f/shard-00001-of-00002.safetensors" "$f/shard-00000-of-00002.safetensors" &&
	mv "$f/x" "$f/shard-00001-of-00002.safetensors"
for s in 0 1; do
	leaf=shard-0000$s-of-00002.safetensors
	crc=$(gzip -c "$f/$leaf" | tail -c 8 | head -c 4 | od -An -tx4 | tr -d ' ')
	sed -i "s/^$leaf .*/$leaf $(wc -c < "$f/$leaf") $crc/" "$f/manifest.txt"
done
"$TRAINC" tests/cli/nets/mlp_fsdp.net --cpus 1 --resume "$tmp/sh" --run-dir "$tmp/rsw" > "$tmp/out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -qF "shard-00000-of-00002.safetensors holds rank 1's part, not rank 0's; the shard files were renamed" "$tmp/out" ||
	{ fail "swapped shard files: exit $rc:"; sed 's/^/    /' "$tmp/out"; }
exit $failed
