# What a checkpoint must be resumed with: the same model and settings, but
# not the same spelling of them (defaults written out, in-sizes given,
# arguments reordered, the model renamed).  A file without a parallel section resumes
# with --set parallel.timeout=N (the documented way to wait longer for a
# slow rank), and with or without `parallel ddp` (which is what it runs);
# a layer named like a resumable setting (`steps = relu`) is part of the
# model, so another layer there is a different model.  The data's files
# may move (the hash covers what the data is); a checkpoint of the earlier
# hash, which covered their paths, resumes at them.
. "$(dirname "$0")/preamble.inc"

model() { # model NAME ACTIVATION: the model, data and train sections
	printf 'model M {\n    input(10)\n    l1 = linear(16)\n    steps = %s\n    l2 = linear(5)\n}\n' "$2" > "$tmp/$1.net"
	printf 'data { train = synthetic(input=randn(10), target=randn(5), samples=32) }\n' >> "$tmp/$1.net"
	printf 'train { loss = mse; optimizer = adam(lr=0.01); batch = 8; steps = 4 }\n' >> "$tmp/$1.net"
}
model relu relu
model tanh tanh
cp "$tmp/relu.net" "$tmp/ddp.net" && printf 'parallel ddp\n' >> "$tmp/ddp.net"
"$TRAINC" "$tmp/relu.net" --save "$tmp/ck" --run-dir "$tmp/r0" > "$tmp/out" 2>&1 || fail "first run: $(cat "$tmp/out")"

# resume CASE FILE ARGS...: a resume that must go on from step 4
resume() {
	name=$1 file=$2
	shift 2
	"$TRAINC" "$file" --resume "$tmp/ck" --set train.steps=6 --run-dir "$tmp/$name" "$@" > "$tmp/$name.out" 2>&1 &&
		grep -q 'Resumed from .* at step 4' "$tmp/$name.out" || fail "$name: $(cat "$tmp/$name.out")"
}
resume timeout "$tmp/relu.net" --set parallel.timeout=100
resume ddp "$tmp/ddp.net"
resume ddp-timeout "$tmp/ddp.net" --set parallel.timeout=100

# the same meaning spelt otherwise: defaults written out, the in-size
# given, arguments by keyword and reordered, another model name
sed -e 's/^model M/model Renamed/' -e 's/linear(16)/linear(10, 16, bias=true)/' \
	-e 's/adam(lr=0.01)/adam(amsgrad=false, lr=0.010, betas=(0.9, 0.999))/' "$tmp/relu.net" > "$tmp/spelt.net"
printf 'parallel ddp { bucket_mb = 25 }\n' >> "$tmp/spelt.net"
cmp -s "$tmp/relu.net" "$tmp/spelt.net" && fail "the respelt file is the same file"
resume spelt "$tmp/spelt.net"

# and the other way: a checkpoint of `parallel ddp` resumes without it
"$TRAINC" "$tmp/ddp.net" --save "$tmp/ck2" --run-dir "$tmp/r2" > /dev/null 2>&1 || fail "parallel ddp run"
"$TRAINC" "$tmp/relu.net" --resume "$tmp/ck2" --set train.steps=6 --run-dir "$tmp/r3" > "$tmp/r3.out" 2>&1 ||
	fail "parallel ddp's checkpoint without parallel ddp: $(cat "$tmp/r3.out")"

# a different layer named `steps` is a different model
if "$TRAINC" "$tmp/tanh.net" --resume "$tmp/ck" --set train.steps=6 --run-dir "$tmp/tanh" > "$tmp/tanh.out" 2>&1; then
	fail "a tanh model resumed a relu model's checkpoint"
fi
grep -q 'was made by a different model or settings' "$tmp/tanh.out" || fail "tanh: $(cat "$tmp/tanh.out")"
# and a different setting still is too
if "$TRAINC" "$tmp/relu.net" --resume "$tmp/ck" --set train.steps=6 --set "train.optimizer=adam(lr=0.02)" \
	--run-dir "$tmp/lr" > "$tmp/lr.out" 2>&1; then
	fail "another learning rate resumed the checkpoint"
fi

# the data's files may move: the hash covers what the data is, not where
# it lies.  A run on npy files, checkpointed at step 4, resumes from copies
# elsewhere as its uninterrupted run goes on; other data (normalised
# otherwise) is still another model's
old=tests/cli/hash3_ckpt
mkdir "$tmp/a" "$tmp/b"
cp $old/x.npy $old/y.npy "$tmp/a/"
cp $old/x.npy $old/y.npy "$tmp/b/"
sed "s|$old/|$tmp/a/|g" $old/model.net > "$tmp/a/m.net"
sed "s|$old/|$tmp/b/|g" $old/model.net > "$tmp/b/m.net"
step_losses() { sed -n 's/.*"kind": "step", "step": \([0-9]*\),.*"loss": \([^,]*\),.*/\1 \2/p' "$1/metrics.jsonl" | awk '$1 > 4'; }
"$TRAINC" "$tmp/a/m.net" --threads 1 --save "$tmp/ck-a" --run-dir "$tmp/ra" > /dev/null 2>&1 || fail "the npy run failed"
"$TRAINC" "$tmp/a/m.net" --threads 1 --set train.steps=8 --run-dir "$tmp/ra8" > /dev/null 2>&1 || fail "the npy run of 8 steps failed"
rm -r "$tmp/a"
"$TRAINC" "$tmp/b/m.net" --threads 1 --set train.steps=8 --resume "$tmp/ck-a" --run-dir "$tmp/rb" > "$tmp/rb.out" 2>&1 ||
	fail "a checkpoint did not resume from its data's copies elsewhere: $(cat "$tmp/rb.out")"
[ -n "$(step_losses "$tmp/rb")" ] && [ "$(step_losses "$tmp/rb")" = "$(step_losses "$tmp/ra8")" ] ||
	fail "resumed over moved data: $(step_losses "$tmp/rb" | tr '\n' ' '), the uninterrupted run $(step_losses "$tmp/ra8" | tr '\n' ' ')"
sed 's|y.npy")|y.npy", normalize=(0.5, 2))|' "$tmp/b/m.net" > "$tmp/b/norm.net"
"$TRAINC" "$tmp/b/norm.net" --threads 1 --set train.steps=8 --resume "$tmp/ck-a" --run-dir "$tmp/rn" > "$tmp/rn.out" 2>&1 &&
	fail "a checkpoint resumed over normalised data"
grep -q 'was made by a different model or settings' "$tmp/rn.out" || fail "normalised data: $(cat "$tmp/rn.out")"
# a checkpoint of the hash that covered the paths (written by that trainc)
# resumes at them, its losses as its uninterrupted run logged them (within
# 1e-5 relative: another CPU's kernels sum in another order)
"$TRAINC" $old/model.net --threads 1 --set train.steps=8 --resume $old/ck --run-dir "$tmp/r-old" > "$tmp/r-old.out" 2>&1 ||
	fail "an earlier checkpoint did not resume at its data's paths: $(cat "$tmp/r-old.out")"
step_losses "$tmp/r-old" | paste - $old/losses | awk 'NF != 4 || $1 != $3 || ($2 - $4) ^ 2 > 1e-10 * $4 ^ 2 { bad = 1 } END { exit bad || NR != 4 }' ||
	fail "an earlier checkpoint resumed otherwise: $(step_losses "$tmp/r-old" | tr '\n' ' '), logged $(tr '\n' ' ' < $old/losses)"
exit $failed
