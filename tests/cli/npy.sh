# npy(input=X, target=Y): arrays saved with numpy.save as a dataset, as
# PyTorch's TensorDataset over torch.from_numpy(np.load(...)) takes them.
# Fashion-MNIST's test split (its first 2000 samples, as IDX files and as
# .npy files, so that each run evaluates in a fifth of the time; the
# faults below take the whole split) written as .npy files (build/tests/npy_write,
# with torchvision's normalisation computed as trainc computes it) trains
# exactly as mnist() reading the IDX files does: the same step losses,
# test loss and final weights, bit for bit, from float32, float64 and
# big-endian arrays, with int64, uint8 and int32 labels, in format 1.0 and
# 2.0, and from ToTensor's values with normalize=, on the CPU, at --cpus 2, and through the GPU library on the host
# stand-in.  Raw uint8, float16 and float32 images of the same values train
# alike; vector targets (mse) of float16 and float32 alike; token ids
# (int64) feed an embedding.  Every fault of a file is said at the
# argument naming it, with the file's byte where there is one, and the
# launch stops with status 2 before any worker starts.
. "$(dirname "$0")/preamble.inc"
W=build/tests/npy_write
F=/usr/share/datasets/fashion-mnist
[ -f $F/t10k-images-idx3-ubyte.gz ] || { fail "no Fashion-MNIST under $F (./configure --deps installs it)"; exit 1; }
IM=$F/t10k-images-idx3-ubyte.gz LB=$F/t10k-labels-idx1-ubyte.gz
NORM=0.2860,0.3530
# the split's first 2000 samples as IDX files: the header's count (2000 =
# 0x7d0) and the first 2000 images and labels
mkdir -p "$tmp/fm"
{ printf '\0\0\10\3\0\0\7\320\0\0\0\34\0\0\0\34'; gzip -dc $IM | tail -c +17 | head -c $((2000 * 784)); } > "$tmp/fm/t10k-images-idx3-ubyte"
{ printf '\0\0\10\1\0\0\7\320'; gzip -dc $LB | tail -c +9 | head -c 2000; } > "$tmp/fm/t10k-labels-idx1-ubyte"
[ "$(wc -c < "$tmp/fm/t10k-images-idx3-ubyte")" -eq $((16 + 2000 * 784)) ] && [ "$(wc -c < "$tmp/fm/t10k-labels-idx1-ubyte")" -eq 2008 ] ||
	fail "the first 2000 samples of $F were not written"
IM_FULL=$IM LB_FULL=$LB
IM=$tmp/fm/t10k-images-idx3-ubyte LB=$tmp/fm/t10k-labels-idx1-ubyte N=2000

# the CNN on either dataset, training and evaluating on the test split
cnn() { # cnn NAME TRAIN TEST
	cat > "$tmp/$1.net" <<-EOF
	import "$(pwd)/models/mnist_cnn.net"
	data {
	    train = $2
	    test  = $3
	}
	EOF
}
npy() { echo "npy(input=\"$tmp/$1\", target=\"$tmp/$2\")"; }
mn="mnist(\"$tmp/fm\", split=\"test\", normalize=(0.2860, 0.3530))"
$W --idx $IM --norm $NORM "$tmp/x.npy" '<f4' $N,1,28,28 && $W --idx $LB "$tmp/y.npy" '<i8' $N &&
	$W --idx $IM --norm $NORM --version 2 "$tmp/x8.npy" '<f8' $N,1,28,28 && $W --idx $LB "$tmp/yu1.npy" '|u1' $N &&
	$W --idx $IM --norm $NORM "$tmp/xbe.npy" '>f4' $N,1,28,28 && $W --idx $LB "$tmp/ybe.npy" '>i4' $N ||
	fail "npy_write failed"
cnn ref "$mn" "$mn"
cnn f4 "$(npy x.npy y.npy)" "$(npy x.npy y.npy)"
cnn f8 "$(npy x8.npy yu1.npy)" "$(npy x8.npy yu1.npy)"
cnn be "$(npy xbe.npy ybe.npy)" "$(npy x.npy y.npy)"

steps() { sed -n 's/.*"kind": "step".*"loss": \([^,]*\),.*/\1/p' "$tmp/$1/metrics.jsonl"; }
train() { # train NAME NET ARGS...: 4 steps, the weights saved as NAME.safetensors
	name=$1 net=$2
	shift 2
	"$TRAINC" "$tmp/$net.net" --threads 1 --set train.steps=4 --set train.test_batch=2000 --run-dir "$tmp/$name" \
		--save "$tmp/$name.safetensors" "$@" > "$tmp/$name.out" 2>&1 ||
		{ fail "$name: the run failed:"; sed 's/^/    /' "$tmp/$name.out"; }
}
same() { # same A B: the same step losses, test line and weights
	[ -n "$(steps $1)" ] && [ "$(steps $1)" = "$(steps $2)" ] ||
		fail "$2 trains otherwise than $1: $(steps $2 | tr '\n' ' ') against $(steps $1 | tr '\n' ' ')"
	[ "$(grep 'Test set' "$tmp/$1.out")" = "$(grep 'Test set' "$tmp/$2.out")" ] && grep -q 'Test set' "$tmp/$1.out" ||
		fail "$2's test line differs from $1's: $(grep 'Test set' "$tmp/$2.out") against $(grep 'Test set' "$tmp/$1.out")"
	build/tests/stcmp "$tmp/$1.safetensors" "$tmp/$2.safetensors" 0 > "$tmp/$2.cmp" 2>&1 ||
		fail "$2's weights differ from $1's: $(cat "$tmp/$2.cmp")"
}
train ref ref
for v in f4 f8 be; do
	train $v $v
	same ref $v
done
# ToTensor's values saved, normalize= as mnist()'s: the same bits
$W --idx $IM --norm 0,1 "$tmp/x01.npy" '<f4' $N,1,28,28 || fail "npy_write failed"
n01="npy(input=\"$tmp/x01.npy\", target=\"$tmp/y.npy\", normalize=(0.2860, 0.3530))"
cnn n01 "$n01" "$n01"
cnn n01c "$(echo "$n01" | sed 's/(0.2860, 0.3530)/([0.2860], [0.3530])/')" "$n01"
for v in n01 n01c; do
	train $v $v
	same ref $v
done

# two ranks, and the GPU library on the host stand-in
train ref2 ref --cpus 2
train f4-2 f4 --cpus 2
same ref2 f4-2
if gpu_lib fakecuda; then
	train ref-gpu ref $gpu
	train f4-gpu f4 $gpu
	same ref-gpu f4-gpu
	unset TRAINC_CUDA_LIB
fi

# raw pixel values: uint8, float16 (exact up to 2048) and float32 alike
$W --idx $IM "$tmp/xu1.npy" '|u1' $N,1,28,28 && $W --idx $IM "$tmp/xf2.npy" '<f2' $N,1,28,28 &&
	$W --idx $IM "$tmp/xr4.npy" '<f4' $N,1,28,28 || fail "npy_write failed"
cnn u1 "$(npy xu1.npy y.npy)" "$(npy xu1.npy y.npy)"
cnn f2 "$(npy xf2.npy y.npy)" "$(npy xf2.npy y.npy)"
cnn r4 "$(npy xr4.npy y.npy)" "$(npy xr4.npy y.npy)"
for v in u1 f2 r4; do train $v $v; done
same r4 u1
same r4 f2
[ "$(steps r4)" != "$(steps f4)" ] || fail "raw pixels train as normalised ones"

# vector targets: mse on ToyModel, float16 and float32 targets alike
$W --values 0.5,-1.25,2,0.75,-0.5,1,3 "$tmp/tx.npy" '<f4' 40,10 && $W --values 1.5,-0.25,0.125 "$tmp/ty4.npy" '<f4' 40,5 &&
	$W --values 1.5,-0.25,0.125 "$tmp/ty2.npy" '<f2' 40,5 && $W --values 1 "$tmp/ty6.npy" '<f4' 40,6 || fail "npy_write failed"
toy() { # toy NAME TARGET
	sed "s|synthetic(.*samples=20)|npy(input=\"$tmp/tx.npy\", target=\"$tmp/$2\")|" models/toy.net > "$tmp/$1.net"
}
toy t4 ty4.npy
toy t2 ty2.npy
for v in t4 t2; do
	"$TRAINC" "$tmp/$v.net" --threads 1 --set train.steps=3 --run-dir "$tmp/$v" > "$tmp/$v.out" 2>&1 ||
		{ fail "$v: the run failed:"; sed 's/^/    /' "$tmp/$v.out"; }
done
[ -n "$(steps t4)" ] && [ "$(steps t4)" = "$(steps t2)" ] || fail "float16 targets train otherwise than float32 ones"

# token ids into an embedding; an id past its rows is refused at its byte
$W --ramp 1000 "$tmp/ids.npy" '<i8' 64,16 && $W --ramp 4 "$tmp/cls.npy" '<i8' 64 &&
	$W --ramp 1001 "$tmp/ids_far.npy" '<i8' 64,16 && $W --ramp 1000 "$tmp/ids_f.npy" '<f4' 64,16 || fail "npy_write failed"
tokens() { # tokens NAME IDS
	sed "s|synthetic(.*samples=256)|npy(input=\"$tmp/$2\", target=\"$tmp/cls.npy\")|" models/token_mlp.net > "$tmp/$1.net"
	grep -q 'npy(input' "$tmp/$1.net" || fail "$1: models/token_mlp.net was not rewritten"
}
tokens tok ids.npy
"$TRAINC" "$tmp/tok.net" --threads 1 --set train.steps=2 --run-dir "$tmp/tok" > "$tmp/tok.out" 2>&1 && [ -n "$(steps tok)" ] ||
	{ fail "token ids: the run failed:"; sed 's/^/    /' "$tmp/tok.out"; }

# faults: `refuses NAME NET WANT`: the launch exits 2 with WANT
refuses() {
	"$TRAINC" "$tmp/$2.net" --threads 1 --set train.steps=1 --run-dir "$tmp/$1" > "$tmp/$1.out" 2>&1
	rc=$?
	[ $rc -eq 2 ] || fail "$1: exited $rc, expected 2"
	grep -qF -- "$3" "$tmp/$1.out" || { fail "$1: not refused with '$3':"; sed 's/^/    /' "$tmp/$1.out"; }
}
tokens tok_far ids_far.npy
refuses tok_far tok_far "ids_far.npy: byte 8128: sample 62 (from 0) has token id 1000, but the embedding that reads the input has rows 0 to 999"
tokens tok_f ids_f.npy
refuses tok_f tok_f "ids_f.npy: the model takes token ids (dtype=\"long\""
toy t6 ty6.npy
refuses t6 t6 "ty6.npy: the targets are (6,) per sample (the array is (40, 6)), but the model's output is (5,)"

# the faults against the whole split's arrays
IM=$IM_FULL LB=$LB_FULL N=10000
$W --idx $IM --norm $NORM "$tmp/x.npy" '<f4' $N,1,28,28 && $W --idx $LB "$tmp/y.npy" '<i8' $N || fail "npy_write failed"
fault() { # fault NAME WANT npy_write-ARGS...: a target or input file made so, refused with WANT
	name=$1 want=$2
	shift 2
	$W "$@" || fail "$name: npy_write failed"
	case $name in
	x_*) cnn $name "$(npy $name.npy y.npy)" "$(npy x.npy y.npy)" ;;
	*) cnn $name "$(npy x.npy $name.npy)" "$(npy x.npy y.npy)" ;;
	esac
	refuses $name $name "$want"
}
col_x=':3:23: error: '
fault x_flat "$tmp/x_flat.npy: its samples are (784,) (the array is (10000, 784)), but the model takes input(1, 28, 28) (" \
	--idx $IM "$tmp/x_flat.npy" '<f4' $N,784
grep -q "save a.reshape(10000, 1, 28, 28) instead" "$tmp/x_flat.out" || fail "x_flat: no reshape given"
grep -qF "x_flat.net$col_x" "$tmp/x_flat.out" || fail "x_flat: not said at the input argument"
fault x_fortran "byte 44: the array is stored in Fortran order" --fortran 1 "$tmp/x_fortran.npy" '<f4' $N,1,28,28
fault y_float "y_float.npy: class labels must be integers, but this array is float32; save a.astype(numpy.int64)" \
	--values 1 "$tmp/y_float.npy" '<f4' $N
fault y_col "y_col.npy: the labels are (10000, 1), one per row; save them flat" --idx $LB "$tmp/y_col.npy" '<i8' $N,1
fault y_few "y_few.npy: 9999 targets, but $tmp/x.npy holds 10000 samples" --idx $LB "$tmp/y_few.npy" '<i8' 9999
fault y_class "y_class.npy: byte 129: the label at index 1 is 10, but the model scores 10 classes (labels 0 to 9, or" \
	--values 3,10 "$tmp/y_class.npy" '|u1' $N
fault y_neg "y_neg.npy: byte 128: the label at index 0 is -1, but the model scores 10 classes (labels 0 to 9, or the loss's ignore_index -100" \
	--values -1 "$tmp/y_neg.npy" '<i8' $N
fault y_cut "y_cut.npy: byte 80123: the file ends 79995 bytes into the array's data, but shape (10000,) of int64 needs 80000 bytes" \
	--cut 5 --idx $LB "$tmp/y_cut.npy" '<i8' $N
fault y_extra "y_extra.npy: byte 80128: 3 bytes follow the array's data" --extra 3 --idx $LB "$tmp/y_extra.npy" '<i8' $N
fault y_str "y_str.npy: byte 20: the array holds strings (dtype '<U5'), not numbers" \
	--header "{'descr': '<U5', 'fortran_order': False, 'shape': (10000,), }" "$tmp/y_str.npy" '<i8' 1
fault y_key "y_key.npy: byte 51: the header has a key other than descr, fortran_order and shape" \
	--header "{'descr': '<i8', 'fortran_order': False, 'shap': (10000,), }" "$tmp/y_key.npy" '<i8' $N
fault y_c8 "y_c8.npy: byte 20: dtype '<c8' is not one trainc reads" \
	--header "{'descr': '<c8', 'fortran_order': False, 'shape': (10000,), }" "$tmp/y_c8.npy" '<i8' $N
fault y_v4 "y_v4.npy: byte 6: .npy format version 4.0 is not one trainc reads" --version 4 "$tmp/y_v4.npy" '<i8' $N
grep -qF "y_v4.net:3:" "$tmp/y_v4.out" || fail "y_v4: not said at the target argument"
printf 'label\n' > "$tmp/y_text.npy"
cnn y_text "$(npy x.npy y_text.npy)" "$(npy x.npy y.npy)"
refuses y_text y_text "y_text.npy: byte 0: not a .npy file (it does not begin with \\x93NUMPY)"
printf 'PK\003\004rest' > "$tmp/y_zip.npy"
cnn y_zip "$(npy x.npy y_zip.npy)" "$(npy x.npy y.npy)"
refuses y_zip y_zip "y_zip.npy: byte 0: this is a ZIP archive (an .npz, or a torch.save file), not a .npy file"
cnn y_gone "$(npy x.npy gone.npy)" "$(npy x.npy y.npy)"
refuses y_gone y_gone "cannot open $tmp/gone.npy, the target array: No such file or directory"
# the test set's files are checked as the training set's
cnn t_bad "$(npy x.npy y.npy)" "$(npy x.npy y_class.npy)"
refuses t_bad t_bad "y_class.npy: byte 129: the label at index 1 is 10"
grep -qF "t_bad.net:4:" "$tmp/t_bad.out" || fail "t_bad: not said at the test set's target"

# the .net file's own faults, found by check
net=$tmp/f4.net
refused rand_input "s|input=\"[^\"]*\"|input=randn(784)|" "3:23: error: npy reads arrays from files, so input is a path such as \"x.npy\""
refused no_target "s|, target=\"[^\"]*\"||" "3:13: error: npy needs the target array's file"
refused path_set "s|npy(input=\"[^\"]*\", target=\"[^\"]*\")|\"x.npy\"|" "3:13: error: a dataset is a call, not a path"
refused synth_path "s|npy(input=\"[^\"]*\", target=\"[^\"]*\")|synthetic(input=\"x.npy\", target=classes(10), samples=4)|" \
	"3:29: error: synthetic draws random data; for arrays saved in .npy files write npy("
exit $failed
