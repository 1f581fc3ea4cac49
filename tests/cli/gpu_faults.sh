# faults.sh's first three faults (a rank killed, SIGINT, a hung rank) on
# the GPU path over the host stand-in (two ranks of one GPU each; NCCL runs
# over Gloo there): the job ends within seconds, names the cause and leaves
# no process behind.  Skipped where CUDA was not configured.
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
