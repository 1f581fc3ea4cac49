# `trainc print models/mnist_cnn.net --gpus 2`: the FSDP module tree of
# PyTorch's MNIST example under size_based_auto_wrap_policy(min_params=20000):
# fc1 is its own unit (1,179,776 params); the root unit keeps the other
# 20,106; 1,199,882 parameters in all, as torch counts them.
. "$(dirname "$0")/preamble.inc"
has() { grep -qF -- "$1" "$tmp/out" || fail "print lacks '$1'"; }

"$TRAINC" print models/mnist_cnn.net --gpus 2 > "$tmp/out" 2> "$tmp/err"
rc=$?
[ "$rc" -eq 0 ] || fail "trainc print models/mnist_cnn.net --gpus 2: exit $rc"
[ -s "$tmp/err" ] && { fail "print wrote to stderr:"; sed 's/^/    /' "$tmp/err"; }

head -1 "$tmp/out" | grep -q '^Net: 1,199,882 parameters (1,199,882 trainable)' || fail "first line: $(head -1 "$tmp/out")"
has '1,199,882 parameters'
has '(fc1): FullyShardedDataParallel('
has 'unit 1: 1,179,776 params'
has 'unit 0: 20,106 params'
sed -n 2p "$tmp/out" | grep -q '^FullyShardedDataParallel( .*# unit 0: 20,106 params' || fail "the root is not unit 0 with 20,106 params"
has 'Linear(in_features=9216, out_features=128, bias=True)'
has 'Conv2d(1, 32, kernel_size=(3, 3), stride=(1, 1))'
has 'Conv2d(32, 64, kernel_size=(3, 3), stride=(1, 1))'
has 'Linear(in_features=128, out_features=10, bias=True)'
has '2 ranks'
# exactly two units, and fc1 the only wrapped child
[ "$(grep -c 'FullyShardedDataParallel(' "$tmp/out")" -eq 2 ] || fail "expected 2 FSDP units"
[ "$(grep -c '# unit ' "$tmp/out")" -eq 2 ] || fail "expected 2 '# unit' comments"
# the per-rank share is half of each unit
has 'unit 1: 1,179,776 params, 589,888 per rank'
has 'unit 0: 20,106 params, 10,053 per rank'

# the unit sizes add up to the total
sum=$(sed -n 's/.*# unit [0-9]*: \([0-9,]*\) params.*/\1/p' "$tmp/out" | tr -d , | awk '{ s += $1 } END { print s }')
[ "$sum" = 1199882 ] || fail "units hold $sum parameters, not 1199882"

# the comm column holds a buffer for the reduce-scatter results, one shard
# of each unit (the params column here), only where a step runs several
# backward passes to add up: with microbatches = 2, not with one
comm() { "$TRAINC" print models/mnist_cnn.net --cpus 2 "$@" | awk '$1 == "0" && NF >= 7 { print $2, $6 }'; }
one=$(comm) two=$(comm --set parallel.microbatches=2)
echo "$one $two" | awk '{ d = $4 - $2; if (d - $1 > 0.011 || $1 - d > 0.011) exit 1 }' ||
	fail "params, comm with one backward pass a step and with two: $one, $two (want comm to differ by params)"

exit $failed
