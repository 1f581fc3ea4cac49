# A batch norm whose input is 1 x 1 a channel, given a batch of one sample,
# has one value per channel to normalise: refused before training with the
# layer's place and what to change (an assertion aborted the run at that
# batch), in training (batch 1, an epoch's last batch of 1) and, without
# running statistics, in evaluation (a last test batch of 1).
. "$(dirname "$0")/preamble.inc"
net=$tmp/bn.net
printf 'model M {\n    input(3, 4, 4)\n    conv2d(3, 3, kernel=3)\n    adaptive_avgpool2d(1)\n    batchnorm2d(3)\n    flatten\n    linear(10)\n}\n' > "$net"
printf 'data {\n    train = synthetic(input=randn(3, 4, 4), target=classes(10), samples=9)\n}\n' >> "$net"
printf 'train { loss = cross_entropy; optimizer = sgd(lr=0.01); batch = 8; epochs = 1 }\n' >> "$net"

# refused NAME WANT ARGS...: exit 2 (a mistake in the file) before any step, saying WANT
refused() {
	name=$1 want=$2
	shift 2
	"$TRAINC" "$@" --run-dir "$tmp/$name" > "$tmp/out" 2>&1
	rc=$?
	[ $rc -eq 2 ] || fail "$name: exit $rc, expected 2"
	grep -qF "trainc: $want" "$tmp/out" || { fail "$name: no '$want':"; sed 's/^/    /' "$tmp/out"; }
	grep -q "Loss" "$tmp/out" && fail "$name: trained"
}
at="$net:5:5: batchnorm2d would normalise over one value per channel: its input is 1 x 1 a channel and"
refused last "$at the epoch's last training batch (or one of its pipeline micro-batches) holds 1 sample" "$net"
refused batch1 "$at a training batch (or pipeline micro-batch) holds 1 sample" "$net" --set train.batch=1
"$TRAINC" "$net" --set train.drop_last=true --run-dir "$tmp/dropped" > "$tmp/out" 2>&1 || fail "drop_last: $(cat "$tmp/out")"

# without running statistics a test batch normalises over itself too
sed -i 's/batchnorm2d(3)/batchnorm2d(3, track_running_stats=false)/; s/samples=9)$/samples=8)\n    test = synthetic(input=randn(3, 4, 4), target=classes(10), samples=9)/' "$net"
refused test "$at the last test batch holds 1 sample" "$net" --set train.test_batch=8
# at the default test_batch (1000) the 9 test samples are one batch, as in PyTorch
"$TRAINC" "$net" --run-dir "$tmp/t1000" > "$tmp/out" 2>&1 || fail "test_batch 1000: $(cat "$tmp/out")"
# where the memory planned for evaluation holds fewer test samples than
# test_batch, evaluation runs in chunks of what it holds, and the message
# says so (a model this small may take 32 MiB for it: a test_batch past that)
chunk=$("$TRAINC" print "$net" --set train.test_batch=100000000 | sed -n 's/.* in chunks of \([0-9]*\) test samples.*/\1/p')
[ "${chunk:-100000000}" -lt 100000000 ] || fail "expected evaluation chunks smaller than test_batch 100000000, got '${chunk}'"
refused chunk "$at the last evaluation chunk (of ${chunk:-?} test samples each: the memory planned for evaluation holds no more) holds 1 sample" \
	"$net" --set train.test_batch=100000000 --set "data.test=synthetic(input=randn(3, 4, 4), target=classes(10), samples=$((${chunk:-0} + 1)))"
grep -qF "set train.test_batch to ${chunk:-?} or less" "$tmp/out" || fail "chunk: no test_batch to set: $(cat "$tmp/out")"
"$TRAINC" "$net" --set train.test_batch=3 --run-dir "$tmp/t3" > "$tmp/out" 2>&1 || fail "test_batch 3: $(cat "$tmp/out")"
"$TRAINC" "$net" --cpus 2 --run-dir "$tmp/two" > "$tmp/out" 2>&1 || fail "2 ranks (5 and 4 test samples): $(cat "$tmp/out")"
exit $failed
