# The CUDA kernel files themselves, run on the host: gpu_host.sh's checks
# with build/tests/trainc-kemu.so, where runtime/cuda/kernels_*.cu are
# compiled over CUDA's thread model (tests/fakecuda/kemu.h: a block's
# threads as fibers meeting at barriers, shared memory, warp exchanges,
# launch shapes checked), in place of fake_kc.c's per-element loops, in
# kemu's forward order; gpu_kemu_order.sh runs every op and the
# one-kernel step with threads and blocks in reverse and shuffled orders.
# Skipped where CUDA was not configured.
set -u
case $TRAINC in */*) TRAINC=$(cd "$(dirname "$TRAINC")" && pwd)/$(basename "$TRAINC") || exit 1 ;; esac
cd "$(dirname "$0")/../.." || exit 1
lib=$(pwd)/build/tests/trainc-kemu.so
if [ ! -f "$lib" ]; then
	echo "gpu_kemu: skipped: trainc was configured without CUDA"
	exit 0
fi
out=$(TRAINC_KEMU_ORDER=forward TRAINC_FAKE_LIB=$lib TRAINC_FAKE_OPS=build/tests/gpu_ops_kemu sh tests/cli/gpu_host.sh 2>&1)
rc=$?
echo "$out" | grep -v '^ok' | sed 's/^/[kernel files] /'
[ $rc = 0 ] && echo "ok gpu_host.sh over the kernel files: $(echo "$out" | grep -c '^ok') checks" || exit 1
