# A test set whose header is sound but whose data is damaged (gzip'd
# images that end early, a label out of range) loads in the background while training
# starts; its failure stops the run at the next step, naming the file,
# instead of after a whole epoch of training that is then lost.
. "$(dirname "$0")/preamble.inc"

# idx DIR PREFIX N IMAGE-BYTES LABEL: a header promising N 28 x 28 images,
# IMAGE-BYTES bytes of them, and N labels, the last one LABEL
idx() {
	n=$(printf '\\%03o' "$3")
	{ printf '\0\0\010\003\0\0\0'; printf "$n"; printf '\0\0\0\034\0\0\0\034'; head -c "$4" /dev/urandom; } > "$1/$2-images-idx3-ubyte"
	{ printf '\0\0\010\001\0\0\0'; printf "$n"; head -c $(($3 - 1)) /dev/zero; printf "$(printf '\\%03o' "$5")"; } > "$1/$2-labels-idx1-ubyte"
}
for d in cut label; do
	mkdir -p "$tmp/$d"
	idx "$tmp/$d" train 200 $((200 * 784)) 3
	printf 'model M {\n    input(1, 28, 28)\n    flatten\n    linear(64)\n    relu\n    linear(10)\n}\n' > "$tmp/$d.net"
	printf 'data {\n    train = mnist("%s")\n    test = mnist("%s", split="test")\n}\n' "$tmp/$d" "$tmp/$d" >> "$tmp/$d.net"
	printf 'train { loss = cross_entropy; optimizer = sgd(0.01); batch = 2; epochs = 100; log_interval = 100 }\n' >> "$tmp/$d.net"
done
idx "$tmp/cut" t10k 100 $((60 * 784)) 1
gzip "$tmp/cut/t10k-images-idx3-ubyte" # its size is known only once it is read
idx "$tmp/label" t10k 100 $((100 * 784)) 200

for d in cut label; do
	TRAINC_NO_CACHE=1 "$TRAINC" "$tmp/$d.net" --threads 1 --run-dir "$tmp/run-$d" > "$tmp/out" 2>&1
	rc=$?
	[ "$rc" -eq 1 ] || fail "$d: exit $rc, expected 1"
	grep -q "^trainc: $tmp/$d/t10k-" "$tmp/out" || { fail "$d: the message does not name the test file:"; sed 's/^/    /' "$tmp/out"; }
	grep -q "Average loss" "$tmp/out" && { fail "$d: trained a whole epoch before the damaged test set stopped it:"; sed 's/^/    /' "$tmp/out"; }
done
exit $failed
