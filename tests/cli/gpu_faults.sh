# faults.sh's first three faults (a rank killed, SIGINT, a hung rank) on
# the GPU path over the host stand-in (two ranks of one GPU each; NCCL runs
# over Gloo there): the job ends within seconds, names the cause and leaves
# no process behind.  Then a collective lost on the second GPU of a rank of
# two (TRAINC_FAKE_NCCL_FAIL): the GPU wait watches every communicator of
# the rank, so the job ends at once naming that GPU's communicator, not at
# the timeout.  Skipped where CUDA was not configured.
set -u
case $TRAINC in */*) TRAINC=$(cd "$(dirname "$TRAINC")" && pwd)/$(basename "$TRAINC") || exit 1 ;; esac
cd "$(dirname "$0")/../.." || exit 1
lib=$(pwd)/build/tests/trainc-fakecuda.so
if [ ! -f "$lib" ]; then
	echo "gpu_faults: skipped: trainc was configured without CUDA"
	exit 0
fi
TRAINC_CUDA_LIB=$lib TRAINC_FAKE_GPUS=2 FAULT_RANKS="--gpus 2" FAULT_HANG_NET=tests/cli/nets/mlp_mse.net TRAINC=$TRAINC \
	sh tests/cli/faults.sh
failed=$?

# GPU 1 is rank 0's second: its communicator's second collective (after the
# broadcast of the initial parameters) is step 1's gradient all-reduce
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
TRAINC_PLAIN=1 TRAINC_CUDA_LIB=$lib TRAINC_FAKE_GPUS=4 TRAINC_FAKE_NCCL_FAIL=1:2 "$TRAINC" models/toy_mp.net --gpus 4 \
	--set train.steps=4 --set parallel.timeout=10 --run-dir "$tmp/run" > "$tmp/out" 2> "$tmp/err"
rc=$?
took=$(($(date +%s) - start))
if [ $rc -ne 0 ] && [ $took -lt 10 ] && grep -q 'rank 0: the NCCL communicator of GPU 1 failed during' "$tmp/err"; then
	echo "ok a collective lost on a rank's second GPU: exit $rc after ${took} s, its communicator named"
else
	echo "FAIL: a collective lost on a rank's second GPU: exit $rc after ${took} s:"
	tail -n 5 "$tmp/err"
	failed=1
fi
exit $failed
