# The seed ToyModel trains one step and saves weights PyTorch can load by name.
set -e
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$TRAINC" models/toy.net --save "$dir/toy.safetensors" > "$dir/out"
grep -q 'Train Epoch: 1' "$dir/out"
grep -q 'Saved the weights to' "$dir/out"
for name in net1.weight net1.bias net2.weight net2.bias; do
	grep -aq "\"$name\"" "$dir/toy.safetensors" || { echo "missing $name"; exit 1; }
done
# a missing dataset is an error that names the path, not a crash
if "$TRAINC" models/mnist_cnn.net --set train.steps=1 2> "$dir/err"; then echo "expected failure"; exit 1; fi
grep -q 'data/mnist' "$dir/err"
