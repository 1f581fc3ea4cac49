# The CUDA kernel files themselves, run on the host: gpu_host.sh's checks
# with build/tests/trainc-kemu.so, where runtime/cuda/kernels_*.cu are
# compiled over CUDA's thread model (tests/fakecuda/kemu.h: a block's
# threads as fibers meeting at barriers, shared memory, warp exchanges,
# launch shapes checked), in place of fake_kc.c's per-element loops; then
# every op again (tests/gpu_ops.c) and the ToyModel's one-kernel step with
# the threads of every block, and the blocks, run in reverse order, so a
# kernel whose result depends on the order of its threads fails here.
# Skipped where CUDA was not configured.
set -u
case $TRAINC in */*) TRAINC=$(cd "$(dirname "$TRAINC")" && pwd)/$(basename "$TRAINC") || exit 1 ;; esac
cd "$(dirname "$0")/../.." || exit 1
lib=$(pwd)/build/tests/trainc-kemu.so
if [ ! -f "$lib" ]; then
	echo "gpu_kemu: skipped: trainc was configured without CUDA"
	exit 0
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=1; }

out=$(TRAINC_FAKE_LIB=$lib TRAINC_FAKE_OPS=build/tests/gpu_ops_kemu sh tests/cli/gpu_host.sh 2>&1)
rc=$?
echo "$out" | grep -v '^ok' | sed 's/^/[kernel files] /'
[ $rc = 0 ] && echo "ok gpu_host.sh over the kernel files: $(echo "$out" | grep -c '^ok') checks" || failed=1

export TRAINC_KEMU_ORDER=reverse
TRAINC_FAKE_GPUS=3 build/tests/gpu_ops_kemu models/*.net tests/cli/nets/*.net > "$tmp/ops.log" 2>&1 &&
	echo "ok every op, threads and blocks in reverse order: $(tail -n 1 "$tmp/ops.log")" ||
	{ fail "ops with threads and blocks in reverse order:"; grep -v '^ok' "$tmp/ops.log" | head -20; }
export TRAINC_PLAIN=1
for dev in "--gpus 1" "--cpus 1 --threads 1"; do
	tag=${dev%% *}
	TRAINC_CUDA_LIB=$lib "$TRAINC" models/toy.net $dev --set train.steps=30 --run-dir "$tmp/run$tag" \
		--save "$tmp/toy$tag.safetensors" > "$tmp/toy$tag.log" 2>&1 || { fail "toy.net $dev exited $?:"; tail -n 5 "$tmp/toy$tag.log"; }
done
grep -q 'one kernel each' "$tmp/toy--gpus.log" || fail "the ToyModel did not take the one-kernel step"
build/tests/stcmp "$tmp/toy--gpus.safetensors" "$tmp/toy--cpus.safetensors" 1e-5 > "$tmp/cmp" 2>&1 &&
	echo "ok toy: one-kernel step, threads in reverse order = CPU ($(cat "$tmp/cmp"))" ||
	fail "toy: one-kernel step, threads in reverse order: $(cat "$tmp/cmp")"
exit $failed
