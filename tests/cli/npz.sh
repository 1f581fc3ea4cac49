# npz(PATH, input=KEY, target=KEY): two arrays of one .npz archive, as
# np.load(PATH)[KEY] gives them, otherwise as npy(...) takes them.
# - Fashion-MNIST's test split packed by build/tests/npz_write as
#   numpy.savez packs it (stored), as numpy.savez_compressed does
#   (deflated), and with ZIP64 directory fields and end record (as an
#   archive past 4 GiB has them) and a comment trains the seed CNN bit for
#   bit as the two .npy files do, on one thread, at --cpus 2 and on the
#   host GPU library.
# - Archives numpy itself wrote (tests/golden/toy_savez*.npz, from
#   tests/golden/npz_numpy.py) train ToyModel as the .npy files of the same
#   values do; the keys default to savez's arr_0 and arr_1.
# - Faults (a key the archive lacks, named with the ones it has; a damaged
#   CRC, stored or deflated; a cut archive; another ZIP method; an
#   encrypted member; a .npy given as an archive and an archive given as
#   a .npy) are said at the argument, before any worker starts.
. "$(dirname "$0")/preamble.inc"
. tests/cli/runs.inc
W=build/tests/npy_write Z=build/tests/npz_write
F=/usr/share/datasets/fashion-mnist
[ -f $F/t10k-images-idx3-ubyte.gz ] || { fail "no Fashion-MNIST under $F (./configure --deps installs it)"; exit 1; }
N=10000
$W --idx $F/t10k-images-idx3-ubyte.gz --norm 0.2860,0.3530 "$tmp/x.npy" '<f4' $N,1,28,28 &&
	$W --idx $F/t10k-labels-idx1-ubyte.gz "$tmp/y.npy" '<i8' $N &&
	$Z "$tmp/d.npz" images="$tmp/x.npy" labels="$tmp/y.npy" && $Z --deflate 1 "$tmp/dc.npz" images="$tmp/x.npy" labels="$tmp/y.npy" &&
	$Z --zip64 1 --comment 'made for the tests' "$tmp/d64.npz" images="$tmp/x.npy" labels="$tmp/y.npy" &&
	$Z --crc 1 "$tmp/crc.npz" images="$tmp/x.npy" labels="$tmp/y.npy" || fail "npy_write or npz_write failed"
cnn() { # cnn NAME DATASET
	printf 'import "%s/models/mnist_cnn.net"\ndata {\n    train = %s\n}\n' "$(pwd)" "$2" > "$tmp/$1.net"
}
cnn ref "npy(input=\"$tmp/x.npy\", target=\"$tmp/y.npy\")"
for v in d dc d64 crc; do
	cnn $v "npz(\"$tmp/$v.npz\", input=\"images\", target=\"labels\")"
done
train ref ref
for v in d dc d64; do
	train $v $v
	same ref $v
done
train ref2 ref --cpus 2
train d2 d --cpus 2
same ref2 d2
if gpu_lib fakecuda; then
	train ref-gpu ref $gpu
	train dc-gpu dc $gpu
	same ref-gpu dc-gpu
	unset TRAINC_CUDA_LIB
fi

# numpy's own archives, and savez's default keys
$W --values 0.5,-1.25,2,0.75,-0.5,1,3 "$tmp/tx.npy" '<f4' 40,10 && $W --values 1.5,-0.25,0.125 "$tmp/ty.npy" '<f4' 40,5 &&
	$Z "$tmp/arr.npz" arr_0="$tmp/tx.npy" arr_1="$tmp/ty.npy" || fail "npy_write or npz_write failed"
toy() { # toy NAME DATASET
	sed "s|synthetic(.*samples=20)|$2|" models/toy.net > "$tmp/$1.net"
	grep -qF "$2" "$tmp/$1.net" || fail "$1: models/toy.net was not rewritten"
}
toy tref "npy(input=\"$tmp/tx.npy\", target=\"$tmp/ty.npy\")"
toy tsz "npz(\"$(pwd)/tests/golden/toy_savez.npz\", input=\"x\", target=\"y\")"
toy tszc "npz(\"$(pwd)/tests/golden/toy_savez_compressed.npz\", input=\"x\", target=\"y\")"
toy tarr "npz(\"$tmp/arr.npz\")"
for v in tref tsz tszc tarr; do
	"$TRAINC" "$tmp/$v.net" --threads 1 --set train.steps=3 --run-dir "$tmp/$v" > "$tmp/$v.out" 2>&1 ||
		{ fail "$v: the run failed:"; sed 's/^/    /' "$tmp/$v.out"; }
done
for v in tsz tszc tarr; do
	[ -n "$(steps tref)" ] && [ "$(steps tref)" = "$(steps $v)" ] ||
		fail "$v trains otherwise than the .npy files: $(steps $v | tr '\n' ' ') against $(steps tref | tr '\n' ' ')"
done

# faults
refuses crc crc "crc.npz: byte 31360248: labels.npy's CRC-32 is 0e4690fb, but its bytes give 0e4690fa"
grep -qF "the archive is damaged" "$tmp/crc.out" || fail "crc: the damage is not named"
cnn key "npz(\"$tmp/d.npz\", input=\"x\", target=\"labels\")"
refuses key key "d.npz: the archive holds no array 'x'; its arrays are images, labels"
grep -qF "key.net:3:17: error: " "$tmp/key.out" || fail "key: not said at the archive's argument"
cp "$tmp/dc.npz" "$tmp/dbad.npz" && printf '\377\377\377\377' | dd of="$tmp/dbad.npz" bs=1 seek=3000 conv=notrunc 2> /dev/null ||
	fail "the deflated archive was not damaged"
cnn dbad "npz(\"$tmp/dbad.npz\", input=\"images\", target=\"labels\")"
refuses dbad dbad "dbad.npz: byte "
grep -qE "images.npy (does not inflate to its 31360128 bytes|'s CRC-32 is)" "$tmp/dbad.out" ||
	{ fail "dbad: a damaged deflated member is not named:"; sed 's/^/    /' "$tmp/dbad.out"; }
$Z --method 12 "$tmp/bz.npz" images="$tmp/tx.npy" labels="$tmp/ty.npy" && $Z --flags 1 "$tmp/enc.npz" images="$tmp/tx.npy" labels="$tmp/ty.npy" ||
	fail "npz_write failed"
toy bz "npz(\"$tmp/bz.npz\", input=\"images\", target=\"labels\")"
refuses bz bz "bz.npz: byte 2776: images.npy is compressed with ZIP method 12; trainc reads stored and deflated members"
toy enc "npz(\"$tmp/enc.npz\", input=\"images\", target=\"labels\")"
refuses enc enc "enc.npz: byte 2776: images.npy is encrypted"
head -c 1000000 "$tmp/d.npz" > "$tmp/cut.npz"
cnn cut "npz(\"$tmp/cut.npz\", input=\"images\", target=\"labels\")"
refuses cut cut "cut.npz: byte 1000000: no ZIP end record; the archive is cut short or not a ZIP file"
cnn npy_as_npz "npz(\"$tmp/y.npy\", input=\"images\", target=\"labels\")"
refuses npy_as_npz npy_as_npz "y.npy: byte 80128: no ZIP end record"
cnn npz_as_npy "npy(input=\"$tmp/x.npy\", target=\"$tmp/d.npz\")"
refuses npz_as_npy npz_as_npy "d.npz: byte 0: this is a ZIP archive (an .npz, or a torch.save file), not a .npy file; read an .npz with npz("

# the .net file's own faults, found by check
net=$tmp/d.net
refused no_path "s|npz(\"[^\"]*\", |npz(|" "3:13: error: npz needs the archive's path"
refused same_key "s|target=\"labels\"|target=\"images\"|" "3:"
grep -qF 'input and target are both the array "images"' "$tmp/same_key.out" || fail "same_key: not refused as expected"
exit $failed
