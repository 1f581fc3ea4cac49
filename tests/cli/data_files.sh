# MNIST-format files whose images are not the size the model was planned
# for (mnist() promises 28 x 28) are refused before training, naming the
# file, the header byte and the .net line, in one process and in the
# launcher of several; before, 64 x 64 images were copied past the end of
# every planned input row and the run "trained" with exit 0.
. "$(dirname "$0")/preamble.inc"

# idx DIR PREFIX SIDE: 2 images of SIDE x SIDE (SIDE < 256) and their labels
idx() {
	side=$(printf '\\%03o' "$3")
	{ printf '\0\0\010\003\0\0\0\002\0\0\0'; printf "$side"; printf '\0\0\0'; printf "$side"
	  head -c $((2 * $3 * $3)) /dev/zero; } > "$1/$2-images-idx3-ubyte"
	printf '\0\0\010\001\0\0\0\002\001\002' > "$1/$2-labels-idx1-ubyte"
}
mkdir -p "$tmp/big" "$tmp/small" "$tmp/ok"
idx "$tmp/big" train 64
idx "$tmp/small" train 16
idx "$tmp/ok" train 28
idx "$tmp/ok" t10k 27
for d in big small ok; do
	printf 'model M {\n    input(1, 28, 28)\n    flatten\n    linear(10)\n}\ndata {\n    train = mnist("%s")\n    test = mnist("%s", split="test")\n}\ntrain { loss = cross_entropy; optimizer = sgd(0.1); batch = 2; steps = 2 }\n' \
		"$tmp/$d" "$tmp/ok" > "$tmp/$d.net"
done

# expect NET SIDE FILE ARGS...: exit 2 and the message about FILE's SIDE x SIDE images
expect() {
	net=$1 side=$2 file=$3
	shift 3
	"$TRAINC" "$net" --run-dir "$tmp/run" "$@" > "$tmp/out" 2>&1
	rc=$?
	[ "$rc" -eq 2 ] || fail "$net $*: exit $rc, expected 2"
	pat="$file: byte 8: the images are $side x $side pixels, but the model is planned for mnist\(\)'s \(1, 28, 28\) samples \($net:[0-9]+:[0-9]+\); resize the images to 28 x 28"
	grep -Eq -- "$pat" "$tmp/out" || { fail "$net $*: no /$pat/:"; sed 's/^/    /' "$tmp/out"; }
	[ -e "$tmp/run" ] && fail "$net $*: a run record was started for a run that cannot begin"
	grep -q "Loss" "$tmp/out" && fail "$net $*: trained"
}
expect "$tmp/big.net" 64 "$tmp/big/train-images-idx3-ubyte" --threads 1
expect "$tmp/small.net" 16 "$tmp/small/train-images-idx3-ubyte" --threads 1
expect "$tmp/big.net" 64 "$tmp/big/train-images-idx3-ubyte" --cpus 2
# the test split too (27 x 27), found after the training split opened fine
expect "$tmp/ok.net" 27 "$tmp/ok/t10k-images-idx3-ubyte" --threads 1

# a training split of 1 image at 2 ranks, and of none at 1: named with the
# file, before any worker starts
mkdir -p "$tmp/one" "$tmp/none"
{ printf '\0\0\010\003\0\0\0\001\0\0\0\034\0\0\0\034'; head -c 784 /dev/zero; } > "$tmp/one/train-images-idx3-ubyte"
printf '\0\0\010\001\0\0\0\001\001' > "$tmp/one/train-labels-idx1-ubyte"
printf '\0\0\010\003\0\0\0\0\0\0\0\034\0\0\0\034' > "$tmp/none/train-images-idx3-ubyte"
printf '\0\0\010\001\0\0\0\0' > "$tmp/none/train-labels-idx1-ubyte"
for d in one none; do
	sed -e "s|mnist(\"$tmp/ok\")|mnist(\"$tmp/$d\")|" -e '/split="test"/d' "$tmp/ok.net" > "$tmp/$d.net"
done
short() { # NET MESSAGE ARGS...
	net=$1 msg=$2
	shift 2
	"$TRAINC" "$net" --run-dir "$tmp/run-short" "$@" > "$tmp/out" 2>&1
	rc=$?
	[ "$rc" -eq 2 ] && grep -Fq -- "$msg" "$tmp/out" || { fail "$net $*: exit $rc, no '$msg':"; sed 's/^/    /' "$tmp/out"; }
	grep -q '^\[rank' "$tmp/out" && fail "$net $*: workers were started"
}
short "$tmp/one.net" "$tmp/one/train-images-idx3-ubyte: 1 training samples cannot feed 2 ranks; lower --cpus or --gpus" --cpus 2
short "$tmp/none.net" "$tmp/none/train-images-idx3-ubyte: the training set has no samples" --threads 1
short "$tmp/none.net" "$tmp/none/train-images-idx3-ubyte: the training set has no samples" --cpus 2
# a test split of none, as refused (before, the run trained, evaluated
# nothing and printed "Accuracy: 0/0 (-nan%)" with exit 0), at one rank, in
# the launcher of several, and in a run that only evaluates
mkdir -p "$tmp/notest"
idx "$tmp/notest" train 28
printf '\0\0\010\003\0\0\0\0\0\0\0\034\0\0\0\034' > "$tmp/notest/t10k-images-idx3-ubyte"
printf '\0\0\010\001\0\0\0\0' > "$tmp/notest/t10k-labels-idx1-ubyte"
sed "s|$tmp/ok\"|$tmp/notest\"|g" "$tmp/ok.net" > "$tmp/notest.net"
for args in "--threads 1" "--cpus 2" "--set train.steps=0"; do
	short "$tmp/notest.net" "$tmp/notest/t10k-images-idx3-ubyte: the test set has no samples; give it some, or leave data.test out" $args
done
# a training label past the classes, found as the set loads (on a thread of
# its own while the model is set up): named with the file and byte, exit
# 2, no run record, at one rank and in a job
mkdir -p "$tmp/badlabel"
idx "$tmp/badlabel" train 28
printf '\0\0\010\001\0\0\0\002\001\014' > "$tmp/badlabel/train-labels-idx1-ubyte"
sed "s|mnist(\"$tmp/ok\")|mnist(\"$tmp/badlabel\")|" "$tmp/ok.net" > "$tmp/badlabel.net"
for ranks in --threads=1 --cpus=2; do
	rm -rf "$tmp/bl"
	"$TRAINC" "$tmp/badlabel.net" --set 'data.test=mnist("'"$tmp"'/ok", split="train")' ${ranks%%=*} ${ranks#*=} --run-dir "$tmp/bl" > "$tmp/out" 2>&1
	rc=$?
	[ $rc -eq 2 ] && grep -q "$tmp/badlabel/train-labels-idx1-ubyte: byte 9: label 12 of sample 1 is not below the 10 classes" "$tmp/out" ||
		{ fail "a bad training label ($ranks): exit $rc:"; sed 's/^/    /' "$tmp/out"; }
	[ -e "$tmp/bl/run.json" ] && fail "a bad training label ($ranks): a run record was made"
	grep -q "Loss" "$tmp/out" && fail "a bad training label ($ranks): trained"
done

# a folder without the dataset is named at the data statement (file:line:col,
# exit 2, as other mistakes in the file), before any worker starts
for ranks in --threads=1 --cpus=2; do
	"$TRAINC" models/mnist_cnn.net --set 'data.train=mnist("'"$tmp"'/nowhere")' ${ranks%%=*} ${ranks#*=} --run-dir "$tmp/nw" > "$tmp/out" 2>&1
	rc=$?
	[ $rc -eq 2 ] || fail "a missing dataset folder ($ranks): exit $rc, expected 2"
	grep -q "^--set:1:16: error: $tmp/nowhere: no train split of MNIST found; tried $tmp/nowhere/train-images-idx3-ubyte" "$tmp/out" ||
		{ fail "a missing dataset folder ($ranks):"; sed 's/^/    /' "$tmp/out"; }
	[ -e "$tmp/nw" ] && fail "a missing dataset folder ($ranks): a run record was started"
done
exit $failed
