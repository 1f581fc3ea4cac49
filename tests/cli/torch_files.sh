# Weights in torch.save's format through the command: --save NAME.pt writes
# the tensors --save NAME.safetensors writes, bit for bit (ToyModel, and
# the seed CNN gathered from 2 FSDP ranks in 5 units); --init NAME.pt
# trains on as --init NAME.safetensors does; a state_dict PyTorch saved is
# read (tests/golden/torch_files_torch.py wrote them); and the files that
# are not a state_dict trainc can read are refused before training, exit 2,
# saying what they hold and what to save instead, once for a job of 2
# ranks.  Where /usr/bin/python3 (or $TORCH_PYTHON) has PyTorch,
# torch.load(weights_only=True) reads what trainc wrote and finds the same
# values.
. "$(dirname "$0")/preamble.inc"
losses() { grep -o 'Loss: [0-9.e+-]*' "$1"; }

# 1. ToyModel, 3 steps, saved both ways
for f in a.pt b.safetensors; do
	"$TRAINC" models/toy.net --set train.steps=3 --save "$tmp/$f" --run-dir "$tmp/r-$f" > "$tmp/save-$f.out" 2>&1 ||
		{ fail "toy --save $f failed"; cat "$tmp/save-$f.out"; }
done
grep -q "Saved the weights to $tmp/a.pt" "$tmp/save-a.pt.out" || fail "--save a.pt does not say it saved the weights there"
[ "$(head -c 4 "$tmp/a.pt" | od -An -tx1 | tr -d ' ')" = 504b0304 ] || fail "a.pt is not a ZIP archive"
build/tests/stcmp "$tmp/a.pt" "$tmp/b.safetensors" 0 > /dev/null && build/tests/stcmp "$tmp/b.safetensors" "$tmp/a.pt" 0 > /dev/null ||
	fail "--save a.pt and --save b.safetensors hold different tensors: $(build/tests/stcmp "$tmp/a.pt" "$tmp/b.safetensors" 0 2>&1)"

# 2. --init from either trains on alike
for f in a.pt b.safetensors; do
	"$TRAINC" models/toy.net --init "$tmp/$f" --set train.steps=4 --set train.log_interval=1 --run-dir "$tmp/i-$f" \
		> "$tmp/init-$f.out" 2>&1 || { fail "--init $f failed"; cat "$tmp/init-$f.out"; }
	losses "$tmp/init-$f.out" > "$tmp/init-$f.loss"
done
grep -q "Initialised from $tmp/a.pt" "$tmp/init-a.pt.out" || fail "--init a.pt does not say it initialised from it"
[ "$(wc -l < "$tmp/init-a.pt.loss")" -eq 4 ] && cmp -s "$tmp/init-a.pt.loss" "$tmp/init-b.safetensors.loss" ||
	fail "--init a.pt trains otherwise than --init b.safetensors"
echo "ok ToyModel: --save NAME.pt = --save NAME.safetensors bit for bit, --init of either trains alike"

# 3. the seed CNN under FSDP at 2 ranks (the full state dict gathered on
# rank 0), 2 steps on synthetic data
syn='synthetic(input=randn(1, 28, 28), target=classes(10), samples=256)'
for f in c.pt c.safetensors; do
	"$TRAINC" models/mnist_cnn.net --cpus 2 --set "data.train=$syn" --set "data.test=$syn" --set train.steps=2 \
		--set "parallel.wrap=size(min_params=100)" --save "$tmp/$f" --run-dir "$tmp/c-$f" > "$tmp/out" 2>&1 ||
		{ fail "the CNN's --save $f at 2 ranks failed"; cat "$tmp/out"; }
done
build/tests/stcmp "$tmp/c.pt" "$tmp/c.safetensors" 0 > /dev/null && build/tests/stcmp "$tmp/c.safetensors" "$tmp/c.pt" 0 > /dev/null ||
	fail "the CNN's --save c.pt differs from --save c.safetensors"
echo "ok the seed CNN under FSDP at 2 ranks saves the same tensors as .pt"

# 4. files of PyTorch's: a state_dict of slices of one storage, float64
# biases among them, initialises ToyModel (PyTorch 1.13's and 2.15's
# archives alike); the others are refused
for v in torch torch2; do
	"$TRAINC" models/toy.net --init tests/golden/${v}_toy_slices.pt --set train.steps=0 --save "$tmp/s-$v.safetensors" \
		--run-dir "$tmp/s-$v" > "$tmp/out" 2>&1 || { fail "--init ${v}_toy_slices.pt failed"; cat "$tmp/out"; }
done
build/tests/stcmp "$tmp/s-torch.safetensors" "$tmp/s-torch2.safetensors" 0 > /dev/null ||
	fail "PyTorch 1.13's and 2.15's torch_toy_slices.pt initialise ToyModel differently"
grep -q "Initialised from tests/golden/torch2_toy_slices.pt" "$tmp/out" || { fail "--init torch2_toy_slices.pt does not say so"; cat "$tmp/out"; }
refused() { # FILE PATTERN
	for cpus in 1 2; do
		"$TRAINC" models/toy.net --cpus $cpus --init "tests/golden/$1" --run-dir "$tmp/x" > "$tmp/out" 2>&1
		rc=$?
		[ $rc = 2 ] || fail "--init $1 at --cpus $cpus: exit $rc, expected 2"
		[ "$(grep -c -- "$2" "$tmp/out")" = 1 ] || { fail "--init $1 at --cpus $cpus does not say /$2/ once:"; cat "$tmp/out"; }
		[ -e "$tmp/x" ] && fail "--init $1: a run directory was left" && rm -rf "$tmp/x"
	done
}
refused torch_toy_module.pt "holds a pickled __main__.ToyModel object (torch.save(model) saves the module itself), not a state_dict; save the weights alone: torch.save(model.state_dict(), PATH)"
refused torch_toy_checkpoint.pt "'model' is a dict, not a tensor: the file is a checkpoint holding more than a state_dict; save the model's alone: torch.save(checkpoint\\['model'\\], PATH)"
refused torch_toy_transposed.pt "'net1.weight' is not contiguous (stride 10 in dimension 1); save tensor.contiguous()"
refused torch_toy_legacy.pt "byte 0: a pickle, as torch.save wrote before PyTorch 1.6"
# a damaged archive: its end record gone
head -c 1500 tests/golden/torch_net.pt > "$tmp/cut.pt"
"$TRAINC" models/toy.net --init "$tmp/cut.pt" --run-dir "$tmp/x" > "$tmp/out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "cut.pt: no ZIP end record in its last 64 KiB; the file is truncated" "$tmp/out" ||
	{ fail "a truncated .pt: exit $rc"; cat "$tmp/out"; }
# damaged archives (PyTorch 2.15's): one byte changed in a storage, and in
# the pickle, fails that record's CRC-32, which the error names
for at in 1000:data/0 100:data.pkl; do
	cp tests/golden/torch2_toy_slices.pt "$tmp/bad.pt"
	printf '\377' | dd of="$tmp/bad.pt" bs=1 seek="${at%%:*}" conv=notrunc 2> /dev/null
	"$TRAINC" models/toy.net --init "$tmp/bad.pt" --run-dir "$tmp/x" > "$tmp/out" 2>&1
	rc=$?
	[ $rc = 2 ] && grep -q "bad.pt: bytes [0-9]* to [0-9]*: record torch2_toy_slices/${at#*:} does not match its CRC-32 (the archive says [0-9a-f]*, the bytes give [0-9a-f]*): the file is damaged; save it again" "$tmp/out" ||
		{ fail "a .pt changed at byte ${at%%:*}: exit $rc"; cat "$tmp/out"; }
done
echo "ok PyTorch's files: slices of a storage read, a module, a checkpoint, a transposed view, the old pickle, a truncated archive and damaged records refused"

# 5. PyTorch itself, where it is installed
py=${TORCH_PYTHON:-/usr/bin/python3}
if "$py" -c 'import torch' 2> /dev/null; then
	"$py" - "$tmp/a.pt" "$tmp/b.safetensors" <<-'EOF' > "$tmp/py" 2>&1 || { fail "torch.load of trainc's a.pt:"; cat "$tmp/py"; }
	import json, struct, sys, torch
	kw = {"weights_only": True} if "weights_only" in torch.load.__code__.co_varnames else {}
	sd = torch.load(sys.argv[1], **kw)
	assert list(sd) == ["net1.weight", "net1.bias", "net2.weight", "net2.bias"], list(sd)
	raw = open(sys.argv[2], "rb").read()
	n = struct.unpack("<Q", raw[:8])[0]
	header = json.loads(raw[8:8 + n])
	for name, t in sd.items():
	    b, e = header[name]["data_offsets"]
	    want = torch.frombuffer(bytearray(raw[8 + n + b:8 + n + e]), dtype=torch.float32).reshape(header[name]["shape"])
	    assert t.dtype == torch.float32 and t.is_contiguous() and torch.equal(t, want), name
	EOF
	echo "ok torch.load of PyTorch $("$py" -c 'import torch; print(torch.__version__)') reads trainc's .pt (weights_only)"
else
	echo "ok (PyTorch is not installed here: torch.load of trainc's .pt not tried)"
fi
exit $failed
