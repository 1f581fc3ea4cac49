# DDP: 2 ranks with batch b against 1 rank with batch 2b, from the same
# initial weights, must give the same parameters after k steps (the
# sampler gives rank r samples r, r+2, ... of the same permutation, and
# gradients are averaged); global_batch gives the same result at 1, 2 and
# 4 ranks.  Tolerance: float sums in a different order, 1e-5.
set -e
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
net=tests/cli/nets/mlp_mse.net
stcmp=build/tests/stcmp
"$TRAINC" $net --set train.batch=16 --run-dir "$dir/r1" --save "$dir/one.safetensors" > "$dir/log1"
"$TRAINC" $net --cpus 2 --set train.batch=8 --run-dir "$dir/r2" --save "$dir/two.safetensors" > "$dir/log2"
$stcmp "$dir/one.safetensors" "$dir/two.safetensors" 1e-5
# and the runs really trained: the weights moved from their start
"$TRAINC" $net --set train.batch=16 --set train.steps=1 --run-dir "$dir/r0" --save "$dir/first.safetensors" > /dev/null
set +e
$stcmp "$dir/one.safetensors" "$dir/first.safetensors" 1e-3 > /dev/null 2>&1
moved=$?
set -e
[ $moved = 1 ] || { echo "six steps left the weights where one step put them (stcmp exit $moved)"; exit 1; }
for w in 1 2 4; do
	"$TRAINC" $net --cpus $w --set train.global_batch=16 --set train.batch=16 > /dev/null 2>&1 && { echo "batch and global_batch together must be refused"; exit 1; }
	sed 's/batch = 8/global_batch = 16; micro_batch = 2/' $net > "$dir/g.net"
	"$TRAINC" "$dir/g.net" --cpus $w --run-dir "$dir/g$w" --save "$dir/g$w.safetensors" > "$dir/logg$w"
done
$stcmp "$dir/g1.safetensors" "$dir/g2.safetensors" 1e-5
$stcmp "$dir/g1.safetensors" "$dir/g4.safetensors" 1e-5
$stcmp "$dir/g1.safetensors" "$dir/one.safetensors" 1e-5
grep -q 'batch 4 per rank in 2 micro-batches of 2' "$dir/logg4"
# an epoch's short last step (100 samples: 6 steps of 16, then 4) weighs
# its micro-batches by their samples, as the step's one batch would: with
# micro-batches = without, at 1 and 2 ranks
for w in 1 2; do
	sed -e 's/batch = 8/global_batch = 16; micro_batch = 2/' -e 's/samples=96/samples=100/' -e 's/steps = 6/steps = 7/' $net > "$dir/sm.net"
	sed -e 's/batch = 8/global_batch = 16/' -e 's/samples=96/samples=100/' -e 's/steps = 6/steps = 7/' $net > "$dir/s.net"
	"$TRAINC" "$dir/sm.net" --cpus $w --run-dir "$dir/sm$w" --save "$dir/sm$w.safetensors" > /dev/null
	"$TRAINC" "$dir/s.net" --cpus $w --run-dir "$dir/s$w" --save "$dir/s$w.safetensors" > /dev/null
	$stcmp "$dir/sm$w.safetensors" "$dir/s$w.safetensors" 1e-5
done
