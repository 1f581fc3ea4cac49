# No input is opened in a way that can wait: a FIFO where trainc reads a
# file (--init, a --resume folder's latest, manifest.txt, state.json and
# weights.safetensors, an IDX data file) is refused by name as not a
# regular file, and one in the place of the dataset cache's copy only
# means no cache.  Before, open() waited for a writer for ever.
. "$(dirname "$0")/preamble.inc"
net=tests/cli/nets/mlp_mse.net

refused() { # WHAT PATH COMMAND...: exit 2 within seconds, PATH named as a FIFO
	what=$1 path=$2
	shift 2
	timeout 20 "$@" > "$tmp/out" 2>&1
	rc=$?
	[ $rc -eq 2 ] || fail "$what: exit $rc, expected 2 (124: it waited on the FIFO)"
	grep -qF "$path is not a regular file (a FIFO)" "$tmp/out" || { fail "$what: not refused by name:"; sed 's/^/    /' "$tmp/out"; }
}

mkfifo "$tmp/fifo.safetensors"
refused "--init FIFO" "$tmp/fifo.safetensors" "$TRAINC" models/toy.net --init "$tmp/fifo.safetensors" --run-dir "$tmp/r0"

"$TRAINC" $net --set train.checkpoint_every=2 --save "$tmp/ck" --run-dir "$tmp/r1" > /dev/null 2>&1 || fail "the checkpointing run failed"
for f in latest step-00000006/manifest.txt step-00000006/state.json step-00000006/weights.safetensors; do
	rm -rf "$tmp/c"
	cp -r "$tmp/ck" "$tmp/c"
	rm "$tmp/c/$f"
	mkfifo "$tmp/c/$f"
	refused "--resume, $f a FIFO" "$tmp/c/$f" "$TRAINC" $net --resume "$tmp/c" --run-dir "$tmp/r-$(basename "$f")"
done
# the launcher reads the checkpoint before it starts the ranks
refused "--resume --cpus 2, weights.safetensors a FIFO" "$tmp/c/step-00000006/weights.safetensors" \
	"$TRAINC" $net --cpus 2 --resume "$tmp/c" --run-dir "$tmp/r2"

# MNIST-format files: 2 images of 28 x 28 and their labels, gzip'd
mkdir "$tmp/d"
{ printf '\0\0\010\003\0\0\0\002\0\0\0\034\0\0\0\034'; head -c 1568 /dev/zero; } | gzip > "$tmp/d/train-images-idx3-ubyte.gz"
printf '\0\0\010\001\0\0\0\002\001\002' | gzip > "$tmp/d/train-labels-idx1-ubyte.gz"
printf 'model M {\n    input(1, 28, 28)\n    flatten\n    linear(10)\n}\ndata { train = mnist("%s") }\ntrain { loss = cross_entropy; optimizer = sgd(0.1); batch = 2; steps = 1 }\n' \
	"$tmp/d" > "$tmp/d.net"
XDG_CACHE_HOME="$tmp/cache" "$TRAINC" "$tmp/d.net" --run-dir "$tmp/r3" > /dev/null 2>&1 || fail "the MNIST-format files do not train"
copy=$(ls "$tmp"/cache/trainc/idx-*.raw 2>/dev/null)
[ -n "$copy" ] || fail "no cached copy was written"
if [ -n "$copy" ]; then
	rm "$copy"
	mkfifo "$copy"
	XDG_CACHE_HOME="$tmp/cache" timeout 20 "$TRAINC" "$tmp/d.net" --run-dir "$tmp/r4" > "$tmp/out" 2>&1
	rc=$?
	[ $rc -eq 0 ] || { fail "a FIFO for the cached copy: exit $rc"; sed 's/^/    /' "$tmp/out"; }
	[ -p "$copy" ] || fail "the FIFO in the cache was replaced"
fi
mv "$tmp/d/train-labels-idx1-ubyte.gz" "$tmp/labels.gz"
mkfifo "$tmp/d/train-labels-idx1-ubyte"
refused "an IDX file a FIFO" "$tmp/d/train-labels-idx1-ubyte" "$TRAINC" "$tmp/d.net" --run-dir "$tmp/r5"
refused "an IDX file a FIFO, --cpus 2" "$tmp/d/train-labels-idx1-ubyte" "$TRAINC" "$tmp/d.net" --cpus 2 --run-dir "$tmp/r6"
[ $failed = 0 ] && echo "ok FIFOs in the place of input files are refused by name without waiting; in the cache, passed by"
exit $failed
