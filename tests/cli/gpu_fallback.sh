# The GPU path where there is no GPU: one trainc binary for every machine.
# trainc links no CUDA library (the GPU part is build/trainc-cuda.so,
# loaded for --gpus); --gpus without a usable GPU, or without the library,
# exits 2 saying why and what to do; the same binary trains on CPUs; the
# GPU checks skip cleanly.  On a machine with a GPU the same script checks
# that --gpus trains instead.  Without --gpus or --cpus, training takes
# every GPU present (over a stand-in driver and the host stand-in for CUDA
# here), or one rank on the CPU.
. "$(dirname "$0")/preamble.inc"

# trainc itself needs no CUDA library at load time
if ldd "$TRAINC" | grep -Eq 'libcuda|libcudart|libcublas|libcudnn|libnccl'; then
	fail "trainc links a CUDA library:"
	ldd "$TRAINC" | grep -E 'cuda|cublas|cudnn|nccl' | sed 's/^/    /'
fi

# a library that is not there: the message says so and what to do
TRAINC_CUDA_LIB=$tmp/none.so "$TRAINC" models/toy.net --gpus 1 > "$tmp/out" 2> "$tmp/err"
rc=$?
[ $rc = 2 ] || fail "--gpus with no GPU library: exit $rc, expected 2"
grep -q 'built without CUDA.*--cpus N' "$tmp/err" || { fail "--gpus with no GPU library: unclear message:"; cat "$tmp/err"; }

# a library from another build: refused before it reads the plan
TRAINC_CUDA_LIB=$(pwd)/build/tests/stale_gpu.so "$TRAINC" models/toy.net --gpus 1 > "$tmp/out" 2> "$tmp/err"
rc=$?
[ $rc = 2 ] && grep -q 'was built from other sources than this trainc.*rebuild both with ninja' "$tmp/err" ||
	{ fail "--gpus with a GPU library of another build: exit $rc, expected 2 and a refusal:"; sed 's/^/    /' "$tmp/err"; }

# a library that is not a shared object
echo "not a library" > "$tmp/bad.so"
TRAINC_CUDA_LIB=$tmp/bad.so "$TRAINC" models/toy.net --gpus 1 > "$tmp/out" 2> "$tmp/err"
rc=$?
[ $rc = 2 ] || fail "--gpus with a broken GPU library: exit $rc, expected 2"
grep -q 'cannot load the GPU library' "$tmp/err" || { fail "--gpus with a broken GPU library: unclear message:"; cat "$tmp/err"; }

lib=$(dirname "$TRAINC")/trainc-cuda.so
if [ -f "$lib" ]; then
	# the library's only dependencies on CUDA are the toolkit's libraries, not the driver
	ldd "$lib" | grep -q 'libcuda\.so' && fail "trainc-cuda.so needs the driver library (libcuda) at load time"
	if nvidia-smi -L > /dev/null 2>&1; then
		"$TRAINC" models/toy.net --gpus 1 --run-dir "$tmp/run" > "$tmp/out" 2> "$tmp/err" || {
			fail "--gpus 1 on a machine with a GPU failed:"; cat "$tmp/err"; }
	else
		"$TRAINC" models/toy.net --gpus 1 --run-dir "$tmp/run" > "$tmp/out" 2> "$tmp/err"
		rc=$?
		[ $rc = 2 ] || fail "--gpus 1 without a GPU: exit $rc, expected 2"
		grep -Eq 'no usable CUDA device|no CUDA device' "$tmp/err" && grep -q -- '--cpus N' "$tmp/err" ||
			{ fail "--gpus 1 without a GPU: unclear message:"; cat "$tmp/err"; }
		[ -s "$tmp/out" ] && { fail "--gpus 1 without a GPU printed to stdout:"; cat "$tmp/out"; }
		# the op checks and the GPU script skip, saying so
		if [ -x build/tests/gpu_ops ]; then
			build/tests/gpu_ops models/toy.net > "$tmp/out" 2>&1
			rc=$?
			[ $rc = 77 ] && grep -q 'skipped: no CUDA device' "$tmp/out" || { fail "gpu_ops without a GPU: exit $rc"; cat "$tmp/out"; }
		fi
		sh tests/gpu/run > "$tmp/out" 2>&1
		rc=$?
		[ $rc = 0 ] && grep -q 'skipped: no NVIDIA GPU' "$tmp/out" || { fail "tests/gpu/run without a GPU: exit $rc"; cat "$tmp/out"; }
	fi
fi

# the same binary trains on the CPU, and without --gpus or --cpus a machine
# without the driver says nothing of GPUs
"$TRAINC" models/toy.net --run-dir "$tmp/cpu" > "$tmp/out" 2> "$tmp/err" || { fail "the CPU run failed:"; cat "$tmp/err"; }
if ! nvidia-smi -L > /dev/null 2>&1; then
	grep -q '1 rank, batch' "$tmp/out" || { fail "no flag, no GPU: not one CPU rank:"; cat "$tmp/out"; }
	[ -s "$tmp/err" ] && { fail "no flag, no GPU: something said on stderr:"; cat "$tmp/err"; }
fi

# Without --gpus or --cpus, training takes every GPU present: played here by
# a stand-in for the driver's library (an empty libcuda.so.1, which is all
# trainc looks for before it asks its GPU library) and the host stand-in for
# CUDA with TRAINC_FAKE_GPUS devices
fake=$(pwd)/build/tests/trainc-fakecuda.so
if [ -f "$fake" ] && mkdir "$tmp/drv" && cc -shared -o "$tmp/drv/libcuda.so.1" -x c /dev/null 2> /dev/null; then
	gpus() { # gpus N ARGS...: trainc ARGS with N stand-in GPUs and the stand-in driver
		n=$1
		shift
		rm -rf "$tmp/run"
		LD_LIBRARY_PATH=$tmp/drv TRAINC_CUDA_LIB=$fake TRAINC_FAKE_GPUS=$n "$TRAINC" "$@" --run-dir "$tmp/run" > "$tmp/out" 2> "$tmp/err"
		rc=$?
	}
	gpus 2 models/toy.net
	[ $rc = 0 ] && grep -q '2 ranks on GPUs' "$tmp/out" || { fail "no flag, 2 GPUs: exit $rc, not 2 GPU ranks:"; cat "$tmp/out" "$tmp/err"; }
	grep -q '"--gpus", "2"' "$tmp/run/run.json" || fail "no flag, 2 GPUs: run.json does not record the workers' --gpus 2"
	gpus 1 models/toy.net
	[ $rc = 0 ] && grep -q '1 rank on GPU' "$tmp/out" || { fail "no flag, 1 GPU: exit $rc, not a GPU rank:"; cat "$tmp/out" "$tmp/err"; }
	# a rank of toy_mp takes 2 devices: 3 GPUs make one rank, 1 GPU none
	gpus 3 models/toy_mp.net
	[ $rc = 0 ] && grep -q '1 rank on GPU' "$tmp/out" && grep -q '2 per rank' "$tmp/out" ||
		{ fail "no flag, toy_mp on 3 GPUs: exit $rc, not one rank of 2 GPUs:"; cat "$tmp/out" "$tmp/err"; }
	gpus 1 models/toy_mp.net
	[ $rc = 0 ] && grep -q '1 rank, batch' "$tmp/out" &&
		grep -qx 'trainc: training on the CPU: a rank of this model takes 2 GPUs, and 1 is visible' "$tmp/err" ||
		{ fail "no flag, toy_mp on 1 GPU: exit $rc, not the CPU with a word why:"; cat "$tmp/out" "$tmp/err"; }
	# --cpus chooses the CPU; check and print plan one rank as before
	gpus 2 models/toy.net --cpus 1
	[ $rc = 0 ] && grep -q '1 rank, batch' "$tmp/out" || { fail "--cpus 1 with 2 GPUs: not the CPU:"; cat "$tmp/out" "$tmp/err"; }
	LD_LIBRARY_PATH=$tmp/drv TRAINC_CUDA_LIB=$fake TRAINC_FAKE_GPUS=2 "$TRAINC" print models/mnist_cnn.net > "$tmp/out" 2>&1
	grep -q 'FSDP FULL_SHARD, 1 rank,' "$tmp/out" || fail "print with 2 GPUs present does not plan 1 rank: $(grep 'Memory per rank' "$tmp/out")"
	# the driver there, the GPU library broken: the CPU, saying why
	LD_LIBRARY_PATH=$tmp/drv TRAINC_CUDA_LIB=$tmp/bad.so "$TRAINC" models/toy.net --run-dir "$tmp/run2" > "$tmp/out" 2> "$tmp/err"
	rc=$?
	[ $rc = 0 ] && grep -q '^trainc: training on the CPU: cannot load the GPU library' "$tmp/err" ||
		{ fail "no flag, a broken GPU library: exit $rc:"; cat "$tmp/out" "$tmp/err"; }
	# the file's errors come before the GPU library is loaded: with the
	# library broken, only the error is said
	printf 'model m {\n  x = input(4)\n  y = linear(x, 2\n}\n' > "$tmp/bad.net"
	LD_LIBRARY_PATH=$tmp/drv TRAINC_CUDA_LIB=$tmp/bad.so "$TRAINC" "$tmp/bad.net" > "$tmp/out" 2> "$tmp/err"
	rc=$?
	[ $rc = 2 ] && grep -q 'bad.net:4:1: error' "$tmp/err" && ! grep -q 'GPU' "$tmp/err" ||
		{ fail "no flag, a file with an error: exit $rc, not the error alone:"; cat "$tmp/err"; }
	echo "ok without --gpus or --cpus: every GPU present, else the CPU"
else
	echo "ok (no stand-in for CUDA or no C compiler here: the choice of GPUs without --gpus is left out)"
fi
exit $failed
