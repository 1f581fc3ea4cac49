# Parameter names of the seed CNN are exactly PyTorch's state_dict keys:
# conv1.weight conv1.bias conv2.weight conv2.bias fc1.weight fc1.bias
# fc2.weight fc2.bias, with PyTorch's shapes.  Checked twice: from the
# module tree of `trainc print`, and from the tensors `trainc --save` writes
# after one step on synthetic data (so no dataset is needed).  And the
# initial values are PyTorch's: ToyModel's after torch.manual_seed(1),
# bit for bit (tests/golden/toy_seed1.safetensors, written by PyTorch 1.13),
# and the CNN's the same however FSDP shards it.  The weights are read after
# one SGD step at lr 1e-30, which moves none of them.
. "$(dirname "$0")/preamble.inc"
want='conv1.weight conv1.bias conv2.weight conv2.bias fc1.weight fc1.bias fc2.weight fc2.bias'

# 1. from print: each Conv2d/Linear line gives NAME.weight and, unless
# bias=False, NAME.bias; an FSDP wrapper's name passes to the module inside.
"$TRAINC" print models/mnist_cnn.net > "$tmp/print" || fail "trainc print failed"
got=$(awk '
	match($0, /\(([A-Za-z0-9_]+)\): FullyShardedDataParallel\(/) { split(substr($0, RSTART + 1), a, ")"); outer = a[1]; next }
	match($0, /\(([A-Za-z0-9_]+)\): (Conv2d|Linear)\(/) {
		split(substr($0, RSTART + 1), a, ")"); name = a[1]
		if (name == "_fsdp_wrapped_module" || name == "module") name = outer
		printf "%s.weight ", name
		if ($0 !~ /bias=False/) printf "%s.bias ", name
	}' "$tmp/print" | sed 's/ $//')
[ "$got" = "$want" ] || fail "names from print: '$got', expected '$want'"

# 2. from the saved tensors (the safetensors header is JSON at byte 8)
syn='synthetic(input=randn(1, 28, 28), target=classes(10), samples=64)'
if "$TRAINC" models/mnist_cnn.net --set "data.train=$syn" --set "data.test=$syn" --set train.steps=1 \
	--save "$tmp/net.safetensors" > "$tmp/out" 2>&1; then
	# an 8-byte little-endian length, then that many bytes of JSON
	len=$(od -An -tu8 -N8 "$tmp/net.safetensors" | tr -d ' ')
	head -c $((8 + len)) "$tmp/net.safetensors" | tail -c +9 | tr -d ' ' > "$tmp/header"
	# top-level keys are the ones followed by an object holding "dtype"
	names=$(sed 's/"\([^"]*\)":{"dtype"/\n@\1\n/g' "$tmp/header" | sed -n 's/^@//p' | sort | tr '\n' ' ' | sed 's/ $//')
	sorted=$(echo "$want" | tr ' ' '\n' | sort | tr '\n' ' ' | sed 's/ $//')
	[ "$names" = "$sorted" ] || fail "saved tensors: '$names', expected '$sorted'"
	for spec in 'conv1.weight":"dtype":"F32","shape":[32,1,3,3]' 'conv1.bias":"dtype":"F32","shape":[32]' \
		'conv2.weight":"dtype":"F32","shape":[64,32,3,3]' 'conv2.bias":"dtype":"F32","shape":[64]' \
		'fc1.weight":"dtype":"F32","shape":[128,9216]' 'fc1.bias":"dtype":"F32","shape":[128]' \
		'fc2.weight":"dtype":"F32","shape":[10,128]' 'fc2.bias":"dtype":"F32","shape":[10]'; do
		tr -d '{' < "$tmp/header" | grep -qF "$spec" || fail "saved tensors lack $spec"
	done
else
	fail "trainc could not train one step on synthetic data and save:"
	sed 's/^/    /' "$tmp/out" | tail -10
fi

# 3. initial values
tiny="train.optimizer=sgd(lr=1e-30)"
"$TRAINC" models/toy.net --set "$tiny" --save "$tmp/toy.safetensors" --run-dir "$tmp/toy" > "$tmp/out" 2>&1 ||
	{ fail "the toy run failed"; cat "$tmp/out"; }
build/tests/stcmp tests/golden/toy_seed1.safetensors "$tmp/toy.safetensors" 0 > /dev/null ||
	fail "ToyModel's initial weights are not torch.manual_seed(1)'s: $(build/tests/stcmp tests/golden/toy_seed1.safetensors "$tmp/toy.safetensors" 0 2>&1)"
"$TRAINC" models/mnist_cnn.net --set "data.train=$syn" --set "data.test=$syn" --set train.steps=1 --set "$tiny" \
	--set "parallel.wrap=none" --save "$tmp/one.safetensors" --run-dir "$tmp/one" > "$tmp/out" 2>&1 || { fail "the CNN run failed"; cat "$tmp/out"; }
"$TRAINC" models/mnist_cnn.net --set "data.train=$syn" --set "data.test=$syn" --set train.steps=1 --set "$tiny" --cpus 2 \
	--set "parallel.wrap=size(min_params=100)" --save "$tmp/two.safetensors" --run-dir "$tmp/two" > "$tmp/out" 2>&1 ||
	{ fail "the sharded CNN run failed"; cat "$tmp/out"; }
build/tests/stcmp "$tmp/one.safetensors" "$tmp/two.safetensors" 0 > /dev/null ||
	fail "the CNN's initial weights differ when FSDP shards it over 2 ranks in 5 units"

exit $failed
