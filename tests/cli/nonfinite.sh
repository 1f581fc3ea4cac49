# A loss that goes non-finite stops the run with exit 1, naming the step
# and the first layer whose output went bad, in one process and at 2
# ranks, where the job says it once: rank 0 for both when both ranks' loss
# went bad (here at step 3: the weights diverged on every rank), and the
# rank whose loss did, named, when only one rank's did (a layer norm with
# eps=0 over rank 1's sample, whose pixels are all alike).  Before, each
# rank said it, and the launcher named one again with its stderr.  The
# GPU trainer's too, over the host stand-in where CUDA was configured, and a
# loss of +infinity (not NaN) is said so.
. "$(dirname "$0")/preamble.inc"
sed 's/optimizer = sgd(lr=0.05, momentum=0.9)/optimizer = sgd(lr=1e30)/' tests/cli/nets/mlp_mse.net > "$tmp/nan.net"
said="the loss is NaN at step 3 (epoch 1); the first non-finite output is fc1's
trainc: lower the learning rate, clip gradients (clip_grad_norm) or check the data
trainc: stopped at a non-finite loss"
# stops NAME WANT ARGS...: trainc ARGS exits 1 and its stderr is WANT
stops() {
	name=$1 want=$2
	shift 2
	"$TRAINC" "$@" > "$tmp/out" 2> "$tmp/err"
	rc=$?
	[ $rc -eq 1 ] && [ "$(cat "$tmp/err")" = "$want" ] || { fail "$name: exit $rc, stderr:"; sed 's/^/    /' "$tmp/err"; }
}
stops "one rank" "trainc: $said" "$tmp/nan.net" --run-dir "$tmp/r1"
stops "two ranks" "trainc: $said" "$tmp/nan.net" --cpus 2 --run-dir "$tmp/r2"
[ $failed = 0 ] && echo "ok a non-finite loss stops the run and names the step and layer, once for a job"

# weights that are not finite from the start (--init) are named as the
# cause, not the learning rate or the data: the first float of the file's
# data made NaN
"$TRAINC" models/toy.net --save "$tmp/w.safetensors" --run-dir "$tmp/rw" > /dev/null 2>&1 || fail "the weights run failed"
hlen=$(od -An -tu4 -N4 "$tmp/w.safetensors" | tr -d ' ')
printf '\000\000\300\177' | dd of="$tmp/w.safetensors" bs=1 seek=$((8 + hlen)) conv=notrunc 2> /dev/null
for n in 1 2; do
	"$TRAINC" models/toy.net --init "$tmp/w.safetensors" --cpus $n --run-dir "$tmp/ri$n" > /dev/null 2> "$tmp/err"
	rc=$?
	[ $rc -eq 1 ] && [ "$(grep -c 'is not finite in the weights the run started from (--init '"$tmp"'/w.safetensors); give weights that are$' "$tmp/err")" = 1 ] &&
		! grep -q 'lower the learning rate' "$tmp/err" || { fail "NaN --init weights at $n: exit $rc, stderr:"; sed 's/^/    /' "$tmp/err"; }
done
[ $failed = 0 ] && echo "ok weights that are not finite from the start are named, once for a job"

# two samples of 28 x 28: rank 0's of varied pixels, rank 1's all alike
mkdir "$tmp/d"
{
	printf '\000\000\010\003\000\000\000\002\000\000\000\034\000\000\000\034'
	awk 'BEGIN { for (p = 0; p < 784; p++) printf "%c", p % 200 + 1; for (p = 0; p < 784; p++) printf "%c", 7 }'
} > "$tmp/d/train-images-idx3-ubyte"
printf '\000\000\010\001\000\000\000\002\003\005' > "$tmp/d/train-labels-idx1-ubyte"
printf 'model M {\n    input(1, 28, 28)\n    flatten\n    ln = layernorm(784, eps=0)\n    linear(10)\n}\n' > "$tmp/ln.net"
printf 'data { train = mnist("%s") }\n' "$tmp/d" >> "$tmp/ln.net"
printf 'train { loss = cross_entropy; optimizer = sgd(lr=0.1); batch = 1; shuffle = false }\n' >> "$tmp/ln.net"
"$TRAINC" "$tmp/ln.net" --cpus 2 --run-dir "$tmp/r3" > "$tmp/out" 2> "$tmp/err"
rc=$?
one="trainc: rank 1: the loss is NaN at step 1 (epoch 1); the first non-finite output is ln's
trainc: ln has eps=0, so a row whose values are all equal normalises to NaN, as in PyTorch; give it an eps above 0
trainc: stopped at a non-finite loss"
# rank 0's own end (its collective with rank 1 broke) is not blamed
[ $rc -eq 1 ] && [ "$(grep -v '^trainc: comm ' "$tmp/err")" = "$one" ] ||
	{ fail "one rank's loss: exit $rc, stderr:"; sed 's/^/    /' "$tmp/err"; }
[ $failed = 0 ] && echo "ok a non-finite loss on one rank of two is said once, naming that rank"

# with --save DIR, the run ends with whether --resume DIR can go on: at
# step 3 no checkpoint of checkpoint_every = 4 has been written yet, at 1
# rank and 2; with checkpoint_every = 2 one has
for ranks in 1 2; do
	"$TRAINC" "$tmp/nan.net" --cpus $ranks --set train.checkpoint_every=4 --save "$tmp/ck4-$ranks" --run-dir "$tmp/c4-$ranks" > /dev/null 2> "$tmp/err"
	grep -qx "trainc: no checkpoint had been saved in $tmp/ck4-$ranks yet (train.checkpoint_every = 4 writes the first after step 4)" "$tmp/err" ||
		{ fail "no checkpoint yet at $ranks rank(s), stderr:"; sed 's/^/    /' "$tmp/err"; }
	"$TRAINC" "$tmp/nan.net" --cpus $ranks --set train.checkpoint_every=2 --save "$tmp/ck2-$ranks" --run-dir "$tmp/c2-$ranks" > /dev/null 2> "$tmp/err"
	grep -qx "trainc: the checkpoints in $tmp/ck2-$ranks are intact: --resume $tmp/ck2-$ranks continues from the latest" "$tmp/err" ||
		{ fail "a checkpoint at $ranks rank(s), stderr:"; sed 's/^/    /' "$tmp/err"; }
done
[ $failed = 0 ] && echo "ok a run stopped by a non-finite loss says whether --resume can go on"

lib=$PWD/build/tests/trainc-fakecuda.so
if [ -f "$lib" ]; then
	export TRAINC_CUDA_LIB="$lib" TRAINC_FAKE_GPUS=2
	gpu="trainc: the loss is NaN at step 3 (epoch 1); lower the learning rate, clip gradients (clip_grad_norm) or check the data (train with --cpus to name the first layer that overflows)"
	stops "one GPU" "$gpu" "$tmp/nan.net" --gpus 1 --run-dir "$tmp/g1"
	stops "two GPUs" "$gpu" "$tmp/nan.net" --gpus 2 --run-dir "$tmp/g2"
	[ $failed = 0 ] && echo "ok on GPUs: a non-finite loss stops the run, once for a job"
	# weights overflowed to infinities of one sign (positive inputs, a rate
	# of 1e38): outputs of -infinity, a squared error of +infinity, not NaN
	printf 'model Lin {\n    input(4)\n    fc = linear(4, 1)\n}\n' > "$tmp/inf.net"
	printf 'data { train = synthetic(input=rand(4), target=rand(1), samples=32) }\n' >> "$tmp/inf.net"
	printf 'train { loss = mse(reduction="sum"); optimizer = sgd(lr=1e38); batch = 8; shuffle = false }\n' >> "$tmp/inf.net"
	stops "+infinity on a GPU" "trainc: the loss is +infinity at step 2 (epoch 1);${gpu#*(epoch 1);}" "$tmp/inf.net" --gpus 1 --run-dir "$tmp/g3"
	unset TRAINC_CUDA_LIB
	stops "+infinity on the CPU" "trainc: the loss is +infinity at step 2 (epoch 1); the first non-finite output is fc's
trainc: lower the learning rate, clip gradients (clip_grad_norm) or check the data
trainc: stopped at a non-finite loss" "$tmp/inf.net" --run-dir "$tmp/c3"
	[ $failed = 0 ] && echo "ok a loss of +infinity is said so, on a GPU and on the CPU"
fi
exit $failed
