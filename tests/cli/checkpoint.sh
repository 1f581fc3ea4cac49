# Checkpoints: a run stopped after k steps and resumed continues exactly as
# the uninterrupted run (same losses at every later step, same final
# weights, bit for bit), at 1 and 2 ranks; kill -9 at random moments during
# saves never destroys the previous checkpoint; a checkpoint of an earlier
# trainc (its Philox shuffle order) resumes in that order (its logged losses
# within 1e-5: another CPU's BLAS sums in another order); a corrupted or truncated
# checkpoint file is refused with its name.
set -e
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
stcmp=build/tests/stcmp
# the test MLP with dropout, so random streams must continue too
sed 's/    tanh/    tanh\n    dropout(0.2)/' tests/cli/nets/mlp_mse.net > "$dir/net.net"
losses() { grep '"kind": "step"' "$1/metrics.jsonl" | sed 's/.*"step": \([0-9]*\).*"loss": \([^,]*\),.*/\1 \2/'; }
for w in 1 2; do
	"$TRAINC" "$dir/net.net" --cpus $w --set train.steps=20 --run-dir "$dir/full$w" --save "$dir/ck_full$w" > "$dir/full.out"
	"$TRAINC" "$dir/net.net" --cpus $w --set train.steps=7 --run-dir "$dir/half$w" --save "$dir/ck$w" > /dev/null
	"$TRAINC" "$dir/net.net" --cpus $w --set train.steps=20 --resume "$dir/ck$w" --run-dir "$dir/rest$w" > "$dir/out" 
	grep -q 'Resumed from .* at step 7' "$dir/out"
	losses "$dir/full$w" | awk '$1 > 7' > "$dir/a"
	losses "$dir/rest$w" > "$dir/b"
	[ -s "$dir/a" ] && cmp "$dir/a" "$dir/b" || { echo "losses after the resume differ at $w rank(s)"; diff "$dir/a" "$dir/b" | head; exit 1; }
	$stcmp "$dir/full$w/weights.safetensors" "$dir/rest$w/weights.safetensors" 0
	# the resumed epoch's average covers the batches before the stop too
	averages() { sed -n 's/^Train Epoch: \([0-9]*\)	Average loss: \([0-9.]*\).*/\1 \2/p' "$1"; }
	averages "$dir/out" > "$dir/eb"
	averages "$dir/full.out" | tail -n "$(wc -l < "$dir/eb")" > "$dir/ea"
	[ -s "$dir/ea" ] && cmp -s "$dir/ea" "$dir/eb" || { echo "epoch averages after the resume differ at $w rank(s)"; diff "$dir/ea" "$dir/eb"; exit 1; }
	echo "ok resume at $w rank(s): $(wc -l < "$dir/b") later steps and $(wc -l < "$dir/eb") epoch averages identical"
	# resumed at its last step (mid-epoch): nothing more is trained
	"$TRAINC" "$dir/net.net" --cpus $w --set train.steps=7 --resume "$dir/ck$w" --run-dir "$dir/again$w" > "$dir/out"
	grep -q 'Nothing to train: train.steps is 7' "$dir/out" || { echo "resumed at the last step:"; cat "$dir/out"; exit 1; }
	! grep -q 'elapsed time' "$dir/out" || { echo "nothing trained, yet a training time:"; cat "$dir/out"; exit 1; }
	[ -z "$(losses "$dir/again$w")" ] || { echo "a run resumed at its last step trained on"; losses "$dir/again$w"; exit 1; }
	$stcmp "$dir/half$w/weights.safetensors" "$dir/again$w/weights.safetensors" 0
	# and saved into the checkpoint it resumed from: the step's folder is
	# swapped for the new one in one rename, and it still resumes
	"$TRAINC" "$dir/net.net" --cpus $w --set train.steps=7 --resume "$dir/ck$w" --save "$dir/ck$w" --run-dir "$dir/same$w" > /dev/null
	ls -a "$dir/ck$w" | grep -v '^\.*$' | grep -qv '^latest$\|^step-0000000[57]$' && { echo "leftovers in the checkpoint:"; ls -a "$dir/ck$w"; exit 1; }
	"$TRAINC" "$dir/net.net" --cpus $w --set train.steps=7 --resume "$dir/ck$w" --run-dir "$dir/same2$w" | grep -q 'Nothing to train'
done

# a checkpoint of a trainc that shuffled in its own (Philox) order, keyed by
# train.seed, before it followed torch.randperm: written at step 7 by that
# trainc (tests/cli/philox_ckpt), with the losses its uninterrupted run
# logged after step 7.  It goes on in that order, and checkpoints saved on
# from it keep saying so.  The logged losses came from one CPU's BLAS; another
# CPU's kernels sum in another order, so they are compared
# within 1e-5 relative: batches in another order differ by far more
old=tests/cli/philox_ckpt
# close A B: files of "step loss" lines with the same steps, losses within 1e-5 relative
close() {
	[ "$(wc -l < "$1")" = "$(wc -l < "$2")" ] && [ -s "$1" ] &&
		paste "$1" "$2" | awk '{ d = $2 - $4; if ($1 != $3 || d * d > 1e-10 * $2 * $2) exit 1 }'
}
"$TRAINC" $old/model.net --set train.steps=20 --resume $old/ck --run-dir "$dir/old1" > /dev/null
losses "$dir/old1" > "$dir/b"
close $old/losses "$dir/b" || { echo "an earlier trainc's checkpoint resumed in another order:"; diff $old/losses "$dir/b"; exit 1; }
"$TRAINC" $old/model.net --set train.steps=13 --resume $old/ck --run-dir "$dir/old13" --save "$dir/ck_old2" > /dev/null
grep -q '"shuffle_order": "philox"' "$dir/ck_old2/step-00000013/state.json" || { echo "a resumed Philox run saved another order:"; cat "$dir/ck_old2/step-00000013/state.json"; exit 1; }
"$TRAINC" $old/model.net --set train.steps=20 --resume "$dir/ck_old2" --run-dir "$dir/old2" > /dev/null
awk '$1 > 13' $old/losses > "$dir/a"
losses "$dir/old2" > "$dir/b"
close "$dir/a" "$dir/b" || { echo "a Philox run resumed twice changed order:"; diff "$dir/a" "$dir/b"; exit 1; }
echo "ok an earlier trainc's checkpoint resumes in its order, losses as its uninterrupted run logged them"
# a shuffle_order trainc does not write is refused, not taken for the earlier order
cp -r "$dir/ck_old2" "$dir/ck_bad"
st="$dir/ck_bad/step-00000013/state.json"
sed 's/"shuffle_order": "philox"/"shuffle_order": "random"/' "$st" > "$dir/state" && mv "$dir/state" "$st"
crc=$(gzip -c "$st" | tail -c 8 | head -c 4 | od -An -tx4 | tr -d ' ')
sed -i "s/^state.json .*/state.json $(wc -c < "$st") $crc/" "$dir/ck_bad/step-00000013/manifest.txt"
if "$TRAINC" $old/model.net --set train.steps=20 --resume "$dir/ck_bad" --run-dir "$dir/bad" > "$dir/out" 2>&1; then
	echo "an unknown shuffle_order was accepted"; exit 1
fi
grep -q 'shuffle_order is not "randperm" or "philox"' "$dir/out" || { echo "an unknown shuffle_order:"; cat "$dir/out"; exit 1; }
# a position that is not a whole number in range is damage, not its prefix
for edit in 's/"step": [0-9]*/"step": 99999999999999999999/' 's/"epoch": [0-9]*/"epoch": 1e30/'; do
	cp "$dir/ck_old2/step-00000013/state.json" "$st"
	sed "$edit" "$st" > "$dir/state" && mv "$dir/state" "$st"
	crc=$(gzip -c "$st" | tail -c 8 | head -c 4 | od -An -tx4 | tr -d ' ')
	sed -i "s/^state.json .*/state.json $(wc -c < "$st") $crc/" "$dir/ck_bad/step-00000013/manifest.txt"
	if "$TRAINC" $old/model.net --set train.steps=20 --resume "$dir/ck_bad" --run-dir "$dir/bad" > "$dir/out" 2>&1; then
		echo "state.json edited by '$edit' was accepted"; exit 1
	fi
	grep -q 'state.json: a field is missing or not a whole number in range; the checkpoint is damaged' "$dir/out" ||
		{ echo "state.json edited by '$edit':"; cat "$dir/out"; exit 1; }
done

# a longer parallel.timeout may be given on resume, also where the file's
# parallel section has no body (`parallel ddp`)
"$TRAINC" models/toy.net --cpus 2 --set train.steps=1 --save "$dir/tk" --run-dir "$dir/tk1" > /dev/null
"$TRAINC" models/toy.net --cpus 2 --set train.steps=2 --set parallel.timeout=60 --resume "$dir/tk" --run-dir "$dir/tk2" > "$dir/out" 2>&1 ||
	{ echo "a resume with another parallel.timeout was refused:"; cat "$dir/out"; exit 1; }
echo "ok parallel.timeout changes on resume"

# kill -9 while checkpoints are written every step
big="--set train.checkpoint_every=1 --set train.steps=100000000 --set train.log_interval=1000000"
for i in 1 2 3 4 5; do
	"$TRAINC" models/fashion_mnist_cnn.net $big --run-dir "$dir/k$i" --save "$dir/kill" ${resume:-} > /dev/null 2>&1 &
	pid=$!
	sleep "$(awk -v s=$i 'BEGIN { srand(s * 7919); printf "%.2f", 1.0 + rand() * 1.5 }')"
	kill -9 $pid 2>/dev/null || true
	wait $pid 2>/dev/null || true
	if [ -e "$dir/kill/latest" ]; then
		"$TRAINC" models/fashion_mnist_cnn.net --resume "$dir/kill" $big --run-dir "$dir/kr$i" > "$dir/out" 2>&1 &
		rp=$!
		for t in $(seq 300); do grep -q 'Resumed from' "$dir/out" && break; kill -0 $rp 2>/dev/null || break; sleep 0.1; done
		kill -9 $rp 2>/dev/null || true
		wait $rp 2>/dev/null || true
		grep -q 'Resumed from' "$dir/out" || { echo "kill -9 round $i: the previous checkpoint does not load"; cat "$dir/out"; exit 1; }
		resume="--resume $dir/kill"
	fi
done
ls "$dir/kill" | grep -q '^step-' || { echo "no checkpoint was ever completed"; exit 1; }
echo "ok kill -9 during saves: the latest checkpoint always loads"

# corruption and truncation are named
ck="$dir/ck1/$(cat "$dir/ck1/latest")"
cp "$ck/weights.safetensors" "$dir/keep"
printf 'X' | dd of="$ck/weights.safetensors" bs=1 seek=200 conv=notrunc 2> /dev/null
if "$TRAINC" "$dir/net.net" --resume "$dir/ck1" --run-dir "$dir/c1" > /dev/null 2> "$dir/err"; then echo "corrupt file accepted"; exit 1; fi
grep -q "weights.safetensors: checksum .* the file is corrupt" "$dir/err" || { cat "$dir/err"; exit 1; }
head -c 100 "$dir/keep" > "$ck/weights.safetensors"
if "$TRAINC" "$dir/net.net" --resume "$dir/ck1" --run-dir "$dir/c2" > /dev/null 2> "$dir/err"; then echo "truncated file accepted"; exit 1; fi
grep -q "weights.safetensors: 100 bytes, but the manifest says" "$dir/err" || { cat "$dir/err"; exit 1; }
# a rank count the checkpoint cannot resume at is a mistake in the command: exit 2, at 2 ranks and at 1
rc=0; "$TRAINC" "$dir/net.net" --cpus 2 --resume "$dir/ck_full1" --run-dir "$dir/c3" > /dev/null 2> "$dir/err" || rc=$?
[ $rc -eq 2 ] || { echo "world change: exit $rc, expected 2"; exit 1; }
grep -q "was made by 1 rank, this run has 2" "$dir/err" || { cat "$dir/err"; exit 1; }
rc=0; "$TRAINC" "$dir/net.net" --resume "$dir/ck_full2" --run-dir "$dir/c4" > /dev/null 2> "$dir/err4" || rc=$?
[ $rc -eq 2 ] && grep -q "was made by 2 ranks, this run has 1" "$dir/err4" || { echo "world change at 1 rank: exit $rc:"; cat "$dir/err4"; exit 1; }
[ "$(grep -c 'was made by' "$dir/err")" = 1 ] || { echo "the refusal is not said once, by the launcher:"; cat "$dir/err"; exit 1; }
# latest naming a step folder removed by hand: the older one left is named
"$TRAINC" tests/cli/nets/mlp_mse.net --set train.checkpoint_every=2 --save "$dir/ck_gone" --run-dir "$dir/g1" > /dev/null 2>&1
rm -rf "$dir/ck_gone/step-00000006"
if "$TRAINC" tests/cli/nets/mlp_mse.net --resume "$dir/ck_gone" --run-dir "$dir/g2" > /dev/null 2> "$dir/err"; then echo "a gone step folder was resumed"; exit 1; fi
grep -q "names step-00000006, which is gone; the folder still holds step-00000004" "$dir/err" || { cat "$dir/err"; exit 1; }
echo "ok corrupt, truncated and mismatched checkpoints are refused by name"
