# npy(..., to_tensor=true) and npz(..., to_tensor=true): torchvision's
# ToTensor on each input sample, as a Dataset applying
# Compose([ToTensor(), Normalize(...)]) to the arrays' images does: raw
# uint8 images, (N, H, W) or (N, H, W, C), made (C, H, W) floats divided by
# 255, then normalised.
# - Fashion-MNIST's test split as raw uint8 (N, 28, 28) and (N, 28, 28, 1)
#   arrays, and in an .npz archive laid out as Keras' mnist.npz (x_train,
#   y_train: uint8), with to_tensor=true and normalize=, train the seed CNN
#   exactly as mnist(normalize=) reading the IDX files does (step losses,
#   test line, weights, bit for bit), on the CPU and on the host GPU
#   library.
# - Three-channel (N, 4, 5, 3) uint8 images train as the same values saved
#   (N, 3, 4, 5) float32 over 255, bit for bit: the channels move first.
# - Float images are moved but not scaled, as ToTensor leaves them.
# - Samples of another shape, a model input not (C, H, W) and token ids
#   are refused at the argument, saying what ToTensor takes.
. "$(dirname "$0")/preamble.inc"
. tests/cli/runs.inc
W=build/tests/npy_write
F=/usr/share/datasets/fashion-mnist
[ -f $F/t10k-images-idx3-ubyte.gz ] || { fail "no Fashion-MNIST under $F (./configure --deps installs it)"; exit 1; }
IM=$F/t10k-images-idx3-ubyte.gz LB=$F/t10k-labels-idx1-ubyte.gz N=10000
$W --idx $IM "$tmp/xhw.npy" '|u1' $N,28,28 && $W --idx $IM "$tmp/xhwc.npy" '|u1' $N,28,28,1 && $W --idx $LB "$tmp/y.npy" '|u1' $N &&
	build/tests/npz_write "$tmp/mnist.npz" x_train="$tmp/xhw.npy" y_train="$tmp/y.npy" || fail "npy_write or npz_write failed"
cnn() { # cnn NAME DATASET: the seed CNN trained and tested on DATASET
	cat > "$tmp/$1.net" <<-END
	import "$(pwd)/models/mnist_cnn.net"
	data {
	    train = $2
	    test  = $2
	}
	END
}
norm='normalize=(0.2860, 0.3530)'
cnn ref "mnist(\"$F\", split=\"test\", $norm)"
cnn hw "npy(input=\"$tmp/xhw.npy\", target=\"$tmp/y.npy\", to_tensor=true, $norm)"
cnn hwc "npy(input=\"$tmp/xhwc.npy\", target=\"$tmp/y.npy\", to_tensor=true, $norm)"
cnn keras "npz(\"$tmp/mnist.npz\", input=\"x_train\", target=\"y_train\", to_tensor=true, $norm)"
for v in ref hw hwc keras; do
	train $v $v --set train.test_batch=2000
done
for v in hw hwc keras; do
	same ref $v
done
if gpu_lib fakecuda; then
	train ref-gpu ref --set train.test_batch=2000 $gpu
	train hw-gpu hw --set train.test_batch=2000 $gpu
	same ref-gpu hw-gpu
	unset TRAINC_CUDA_LIB
fi

# three channels: (N, H, W, C) uint8 against (N, C, H, W) float32 / 255
$W --ramp 251 --hwc 3 "$tmp/rgb.npy" '|u1' 64,4,5,3 && $W --ramp 251 --norm 0,1 "$tmp/chw.npy" '<f4' 64,3,4,5 &&
	$W --ramp 251 --hwc 3 "$tmp/rgbf.npy" '<f4' 64,4,5,3 && $W --ramp 251 "$tmp/chwf.npy" '<f4' 64,3,4,5 &&
	$W --ramp 3 "$tmp/c3.npy" '<i8' 64 || fail "npy_write failed"
small() { # small NAME DATASET: a small classifier of (3, 4, 5) images
	printf '%s\n' 'model Rgb {' '    input(3, 4, 5)' '    conv1 = conv2d(3, 4, 3, padding=1)' '    relu' '    flatten' '    fc = linear(3)' '}' \
		"data { train = $2 }" 'train { loss = cross_entropy; optimizer = sgd(lr=0.1, momentum=0.9); batch = 16 }' \
		> "$tmp/$1.net"
}
small rgb "npy(input=\"$tmp/rgb.npy\", target=\"$tmp/c3.npy\", to_tensor=true, normalize=([0.4, 0.5, 0.6], [0.2, 0.25, 0.3]))"
small chw "npy(input=\"$tmp/chw.npy\", target=\"$tmp/c3.npy\", normalize=([0.4, 0.5, 0.6], [0.2, 0.25, 0.3]))"
small rgbf "npy(input=\"$tmp/rgbf.npy\", target=\"$tmp/c3.npy\", to_tensor=true)"
small chwf "npy(input=\"$tmp/chwf.npy\", target=\"$tmp/c3.npy\")"
for v in rgb chw rgbf chwf; do
	train $v $v
done
same chw rgb
same chwf rgbf

# what ToTensor does not take
$W --idx $IM "$tmp/xchw.npy" '|u1' $N,1,28,28 || fail "npy_write failed"
cnn chw_given "npy(input=\"$tmp/xchw.npy\", target=\"$tmp/y.npy\", to_tensor=true)"
refuses chw_given chw_given "xchw.npy: its samples are (1, 28, 28) (the array is (10000, 1, 28, 28)), but to_tensor=true takes images as ToTensor does, (H, W, C) or (H, W)"
sed 's/input(3, 4, 5)/input(60)/; s/conv1 = conv2d(3, 4, 3, padding=1)/fc0 = linear(8)/' "$tmp/rgbf.net" > "$tmp/flat.net"
refuses flat flat "to_tensor=true gives (C, H, W) images, as ToTensor does, but the model takes input(60,)"
exit $failed
