# zeropad2d and conv2d(padding="same") with even dilated kernel extents,
# against PyTorch 1.13: tests/cli/nets/zeropad.net (ZeroPad2d padding some
# sides and cropping others; Conv2d "same" padding the right and bottom one
# more than the left and top, which trainc does with a hidden zero pad
# before an unpadded convolution), trained 5 steps from the same initial
# weights on the same MNIST-format samples, gives PyTorch's reprs, output
# sizes, losses, test set loss and final weights (so the pads' gradients)
# within 1e-6, on the CPU and, where CUDA was configured, through the GPU
# library on the host.  The layers are unnamed: the initial weights load by
# PyTorch's state_dict names, so the hidden pads take no index.  The
# reference values and files come from tests/golden/zeropad_torch.py.
# A checkpoint resumes where "same" means what it meant (padding=1 for a
# kernel of 3), and not after a pad changes.  Samples of rank 2 and 4 are
# padded in their last two dimensions, as F.pad pads them.
. "$(dirname "$0")/preamble.inc"
. tests/cli/torch_ref.inc
mnist_files "$tmp/data" 40 20
net=tests/cli/nets/zeropad.net

# zeropad_torch.py's output
torch_check zeropad $net tests/golden/zeropad_init.safetensors \
	"2.312201499938965 2.2785236835479736 2.278712272644043 2.2632672786712646 2.322821617126465" 2.328063201904297 \
	tests/golden/zeropad_final.safetensors 1e-6

# PyTorch's reprs and output sizes
prints $net '(0): ZeroPad2d((1, 2, -3, 0))                                                        # (1, 25, 31)' \
	'(1): Conv2d(1, 4, kernel_size=(4, 4), stride=(1, 1), padding=same)                   # (4, 25, 31)  68 params' \
	'(4): Conv2d(4, 6, kernel_size=(2, 3), stride=(1, 1), padding=same, dilation=(1, 2))  # (6, 12, 15)  150 params' \
	'(5): ZeroPad2d((-1, -1, -1, -1))                                                     # (6, 10, 13)' \
	'(7): Conv2d(6, 4, kernel_size=(3, 4), stride=(1, 1), padding=same, bias=False)       # (4, 10, 13)  288 params' \
	'(10): Linear(in_features=48, out_features=10, bias=True)                             # (10,)  490 params'

# resume CASE CK FILE: FILE resumes checkpoint CK; fails unless it does
resume() {
	"$TRAINC" "$3" --resume "$tmp/$2" --set train.steps=3 --run-dir "$tmp/$1" > "$tmp/$1.out" 2>&1 &&
		grep -q 'Resumed from .* at step 2' "$tmp/$1.out"
}
"$TRAINC" $net --set train.steps=2 --save "$tmp/ck" --run-dir "$tmp/r0" > "$tmp/r0.out" 2>&1 || fail "zeropad.net: $(cat "$tmp/r0.out")"
resume again ck $net || fail "zeropad.net did not resume its own checkpoint: $(cat "$tmp/again.out")"
sed 's/zeropad2d(-1)/zeropad2d((-1, -1, -1, 0))/' $net > "$tmp/other.net"
resume other ck "$tmp/other.net" && fail "a checkpoint resumed with another zero pad"
grep -q 'was made by a different model or settings' "$tmp/other.out" || fail "another zero pad: $(cat "$tmp/other.out")"
sed 's/padding="same", bias=false/padding=(1, 1), bias=false/' $net > "$tmp/numbers.net"
resume numbers ck "$tmp/numbers.net" && fail "padding=(1, 1) resumed the checkpoint of a \"same\" that pads (1, 2) across"
# kernel 3: "same" is padding=1, and either resumes the other's checkpoint
sed -e 's/conv2d(1, 4, kernel=4, padding="same")/conv2d(1, 4, kernel=3, padding=1)/' $net > "$tmp/one.net"
sed -e 's/conv2d(1, 4, kernel=4, padding="same")/conv2d(1, 4, kernel=3, padding="same")/' $net > "$tmp/same.net"
"$TRAINC" "$tmp/one.net" --set train.steps=2 --save "$tmp/ck1" --run-dir "$tmp/r1" > "$tmp/r1.out" 2>&1 || fail "one.net: $(cat "$tmp/r1.out")"
resume same ck1 "$tmp/same.net" || fail "padding=\"same\" did not resume padding=1: $(cat "$tmp/same.out")"

# zeropad2d pads the last two dimensions of a sample of any rank from 2, as
# F.pad does: (5, 6) and (2, 3, 5, 6) samples train as (1, 5, 6) and
# (6, 5, 6) samples of the same values, bit for bit (synthetic data draws
# by element index); a (6,) sample is refused at the layer
shaped() { # NAME SHAPE: a net of SHAPE samples padded, flattened, classified
	printf 'model M {\n    input(%s)\n    zeropad2d((1, 2, -1, 0))\n    flatten\n    linear(10)\n}\n' "$2" > "$tmp/$1.net"
	printf 'data { train = synthetic(input=randn(%s), target=classes(10), samples=64) }\n' "$2" >> "$tmp/$1.net"
	printf 'train { loss = cross_entropy; optimizer = sgd(lr=0.1); batch = 16; steps = 5; log_interval = 1 }\n' >> "$tmp/$1.net"
	rm -rf "$tmp/run-$1" "$tmp/$1.safetensors"
	"$TRAINC" "$tmp/$1.net" --save "$tmp/$1.safetensors" --run-dir "$tmp/run-$1" > "$tmp/$1.out" 2>&1 || fail "$2 samples: $(cat "$tmp/$1.out")"
	grep -o 'Loss: [0-9.e+-]*' "$tmp/$1.out" > "$tmp/$1.loss"
}
for pair in "5, 6|1, 5, 6" "2, 3, 5, 6|6, 5, 6"; do
	shaped a "${pair%%|*}"
	shaped b "${pair#*|}"
	[ "$(wc -l < "$tmp/a.loss")" = 5 ] && cmp -s "$tmp/a.loss" "$tmp/b.loss" && build/tests/stcmp "$tmp/a.safetensors" "$tmp/b.safetensors" 0 > /dev/null ||
		fail "(${pair%%|*}) samples do not train as (${pair#*|}): $(paste "$tmp/a.loss" "$tmp/b.loss" | head -3)"
done
"$TRAINC" print "$tmp/a.net" | grep -q 'ZeroPad2d((1, 2, -1, 0)) *# (2, 3, 4, 9)' || fail "(2, 3, 5, 6) padded: $("$TRAINC" print "$tmp/a.net")"
printf 'model M {\n    input(6)\n    zeropad2d(1)\n    linear(10)\n}\n' > "$tmp/flat.net"
"$TRAINC" check "$tmp/flat.net" > "$tmp/flat.out" 2>&1
grep -q 'flat.net:3:5: error: layer 0 (zeropad2d) expects (height, width) input per sample, or more dimensions before them, but the layer before it gives (6,)' "$tmp/flat.out" ||
	fail "a (6,) sample padded: $(cat "$tmp/flat.out")"
exit $failed
