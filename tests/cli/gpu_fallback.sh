# The GPU path where there is no GPU: one trainc binary for every machine.
# trainc links no CUDA library (the GPU part is build/trainc-cuda.so,
# loaded for --gpus); --gpus without a usable GPU, or without the library,
# exits 2 saying why and what to do; the same binary trains on CPUs; the
# GPU checks skip cleanly.  On a machine with a GPU the same script checks
# that --gpus trains instead.
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

# the same binary trains on the CPU
"$TRAINC" models/toy.net --run-dir "$tmp/cpu" > "$tmp/out" 2> "$tmp/err" || { fail "the CPU run failed:"; cat "$tmp/err"; }
exit $failed
