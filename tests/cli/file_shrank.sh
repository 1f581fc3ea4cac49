# A file another program truncates in place while a run has it mapped (here
# the dataset cache's decompressed copy) ends the run with a line naming the
# file and exit status 3, said once for a job of several ranks, plus whether
# the run's checkpoints let it go on; they do, and the next run makes the
# copy anew.  The GPU trainer (on the host stand-in) ends the same way.
# Before, touching the file's lost pages raised SIGBUS: "Bus error" at one
# rank (exit 135), "rank 0 failed with signal SIGBUS" under the launcher,
# and no word of the file.  (A safetensors file truncated while mapped:
# test_safetensors.)
. "$(dirname "$0")/preamble.inc"
export XDG_CACHE_HOME="$tmp/cache"

# MNIST-format files, gzip'd (so trainc keeps a decompressed copy): 2000
# images of 28 x 28, a copy of 1.5 MiB
mkdir "$tmp/d"
{ printf '\0\0\010\003\0\0\007\320\0\0\0\034\0\0\0\034'; head -c 1568000 /dev/zero; } | gzip > "$tmp/d/train-images-idx3-ubyte.gz"
{ printf '\0\0\010\001\0\0\007\320'; head -c 2000 /dev/zero; } | gzip > "$tmp/d/train-labels-idx1-ubyte.gz"
printf 'model M {\n    input(1, 28, 28)\n    flatten\n    linear(10)\n}\ndata { train = mnist("%s") }\ntrain { loss = cross_entropy; optimizer = sgd(0.1); batch = 10; steps = 1 }\n' \
	"$tmp/d" > "$tmp/d.net"
"$TRAINC" "$tmp/d.net" --run-dir "$tmp/r0" > /dev/null 2>&1 || fail "the first run (which writes the copy) failed"
copy=$(ls "$tmp"/cache/trainc/idx-*.raw 2>/dev/null)
[ -n "$copy" ] || { fail "no cached copy was written"; exit $failed; }
cp "$copy" "$tmp/copy"

# shrunk TAG WHEN ARGS...: a long run on the copy, which is truncated to
# nothing once the run has logged a step (so it has the copy mapped) and
# WHEN (a path) exists; its exit status in $rc, stderr in $tmp/TAG.err;
# $run_env: VAR=VALUE words for its environment
run_env=
shrunk() {
	tag=$1 when=$2
	shift 2
	env $run_env "$TRAINC" "$tmp/d.net" --set train.steps=1000000 --set train.log_interval=1 --run-dir "$tmp/$tag" "$@" \
		> "$tmp/$tag.out" 2> "$tmp/$tag.err" &
	pid=$!
	i=0
	until grep -q '^Train Epoch' "$tmp/$tag.out" && [ -e "$when" ] || [ $i -ge 600 ] || ! kill -0 $pid 2> /dev/null; do
		sleep 0.1
		i=$((i + 1))
	done
	truncate -s 0 "$copy"
	i=0
	while kill -0 $pid 2> /dev/null && [ $i -lt 600 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	kill -KILL $pid 2> /dev/null
	wait $pid
	rc=$?
}
said="trainc: $copy shrank while this run was reading it (another program truncated or rewrote it in place); it is trainc's decompressed copy of a gzip'd data set: run again and trainc makes it anew from the .gz files"
# check TAG NOTE: exit 3, the file named once, then NOTE, and nothing else
check() {
	printf '%s\n%s\n' "$said" "$2" > "$tmp/want"
	[ $rc -eq 3 ] || fail "$1: exit $rc, expected 3"
	grep -v '^\(\[rank [0-9]*\] \)\?trainc: comm ' "$tmp/$1.err" | cmp -s - "$tmp/want" ||
		{ fail "$1: stderr differs:"; diff "$tmp/want" "$tmp/$1.err" | sed 's/^/    /'; }
}

# one rank, no checkpoints: truncated once training is under way
shrunk one "$copy"
check one "trainc: nothing was saved (--save DIR keeps checkpoints)"
[ $failed = 0 ] && echo "ok one rank: the copy truncated under it is named, exit 3"

# two ranks saving checkpoints: truncated once one is saved; the job says
# it once (a peer's lost all-reduce, said as it comes, is not blamed), the
# checkpoint resumes, and the run makes the copy anew; the --resume the
# note suggests quotes a folder whose name has a space, as a shell needs
# (before, "--resume DIR/c k" was written bare)
cp "$tmp/copy" "$copy"
ck="$tmp/c k"
shrunk job "$ck/latest" --cpus 2 --save "$ck" --set train.checkpoint_every=20
check job "trainc: the checkpoints in $ck are intact: --resume '$ck' continues from the latest"
step=$(sed -n 's/^step-0*\([0-9][0-9]*\)$/\1/p' "$ck/latest")
"$TRAINC" "$tmp/d.net" --cpus 2 --resume "$ck" --set train.steps=$((step + 5)) --run-dir "$tmp/again" > "$tmp/again.out" 2>&1 ||
	{ fail "--resume after the job stopped: exit $?"; sed 's/^/    /' "$tmp/again.out"; }
cmp -s "$copy" "$tmp/copy" || fail "the copy was not made anew"
[ $failed = 0 ] && echo "ok two ranks: said once, exit 3, and the checkpoint resumes (step $step)"

# the GPU trainer, on the host stand-in for CUDA, streaming batches from
# the copy (device-resident data is read once, before the copy can shrink)
lib=$(pwd)/build/tests/trainc-fakecuda.so
if [ -f "$lib" ]; then
	cp "$tmp/copy" "$copy"
	run_env="TRAINC_CUDA_LIB=$lib TRAINC_GPU_STREAM=1 TRAINC_CUDA_TINY=0"
	shrunk gpu "$copy" --gpus 1
	check gpu "trainc: nothing was saved (--save DIR keeps checkpoints)"
	[ $failed = 0 ] && echo "ok the GPU trainer (host stand-in): the same"
fi
exit $failed
