# Device placement on virtual CPU devices: ToyMpModel at --cpus 4 (2 ranks
# of 2 devices) equals ToyModel at --cpus 2 from the same initial weights;
# pipelined (micro-batches) equals not pipelined; a model on 3 devices
# with a residual crossing devices equals the same model unplaced;
# 64 pipeline stages (the limit) train; placement errors are reported before spawning at the annotation's line.
set -e
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
stcmp=build/tests/stcmp
run() { name=$1; shift; "$TRAINC" "$@" --run-dir "$dir/$name" --save "$dir/$name.safetensors" > "$dir/$name.log"; }
run toy models/toy.net --cpus 2 --set train.steps=3
run mp models/toy_mp.net --cpus 4 --set train.steps=3
$stcmp "$dir/toy.safetensors" "$dir/mp.safetensors" 1e-6
run mp4 models/toy_mp.net --cpus 4 --set train.steps=3 --set parallel.microbatches=4
$stcmp "$dir/mp.safetensors" "$dir/mp4.safetensors" 1e-6
grep -q 'Pipeline: 2 stages over 2 devices, 4 micro-batches' "$dir/mp4.log"
sed 's/^parallel ddp$/parallel fsdp { wrap = size(min_params=50) }/' models/toy_mp.net > "$dir/mpf.net"
run mpf "$dir/mpf.net" --cpus 4 --set train.steps=3
$stcmp "$dir/mp.safetensors" "$dir/mpf.safetensors" 1e-6
grep -q 'FSDP rank 0' "$dir/mpf.log"
echo "ok ToyMpModel at 2 ranks x 2 devices equals ToyModel, with DDP, FSDP and 4 micro-batches"

sed 's/ @device([0-9])//' tests/cli/nets/mlp_3dev.net > "$dir/flat.net"
run flat "$dir/flat.net"
run three tests/cli/nets/mlp_3dev.net --cpus 3
run three2 tests/cli/nets/mlp_3dev.net --cpus 6 --set train.batch=8
run three4 tests/cli/nets/mlp_3dev.net --cpus 3 --set parallel.microbatches=4
for r in three three2 three4; do $stcmp "$dir/flat.safetensors" "$dir/$r.safetensors" 1e-5 > /dev/null || { echo "$r differs"; exit 1; }; done
"$TRAINC" print tests/cli/nets/mlp_3dev.net --cpus 3 > "$dir/print"
[ "$(grep -c 'Transfer(device' "$dir/print")" -ge 3 ] || { echo "print shows too few transfers"; cat "$dir/print"; exit 1; }
"$TRAINC" graph tests/cli/nets/mlp_3dev.net > "$dir/dot"
grep -q 'device 2' "$dir/dot"
echo "ok a model on 3 devices (one rank, two ranks, pipelined) equals the unplaced model; print and graph show transfers"

set +e
"$TRAINC" tests/cli/nets/mlp_3dev.net --cpus 4 > "$dir/out" 2> "$dir/err"; rc=$?
set -e
[ $rc -eq 2 ] || { echo "--cpus 4 for 3 devices: exit $rc"; exit 1; }
grep -q 'mlp_3dev.net:11:25: error: each rank owns 3 devices' "$dir/err" || { cat "$dir/err"; exit 1; }
grep -q '@device(2)' "$dir/err"
! grep -q 'parameters' "$dir/out"
set +e; "$TRAINC" print models/toy_mp.net --gpus 1 2> "$dir/err"; rc=$?; set -e
[ $rc -eq 2 ] && grep -q 'gives a rank only 1 device' "$dir/err" || { echo "too few devices: exit $rc"; cat "$dir/err"; exit 1; }
echo "ok placement errors name the annotation before anything starts"

# 64 pipeline stages, the most a rank may have, train; the 65th is refused
# when compiling (tests/errors/place_too_many_stages.net)
{
	printf 'block Pair {\n    linear(8) @device(0)\n    linear(8) @device(1)\n}\n'
	printf 'model M {\n    input(8)\n    repeat 32 { Pair }\n}\n'
	printf 'data { train = synthetic(input=randn(8), target=randn(8), samples=8) }\n'
	printf 'train { loss = mse; optimizer = sgd(0.01); batch = 8; steps = 1 }\n'
} > "$dir/st64.net"
run st64 "$dir/st64.net" --set parallel.microbatches=2
grep -q 'Pipeline: 64 stages over 2 devices, 2 micro-batches' "$dir/st64.log" || { cat "$dir/st64.log"; exit 1; }
echo "ok 64 pipeline stages train"
