#!/bin/sh
# bench/gpu.sh: trainc against PyTorch on one NVIDIA GPU.
#
#   1. The seed CNN (models/mnist_cnn.net, PyTorch's FSDP MNIST example),
#      one epoch, batch 64, one process:
#        - trainc --gpus 1, images/s from its "Train Epoch: 1<TAB>Average
#          loss: ...<TAB>N images/s" line (training only);
#        - the seed program as the tutorial writes it, bench/torch_fsdp_mnist.py
#          (FSDP at world size 1 over NCCL, DataLoader with 2 workers);
#        - PyTorch's best case, bench/torch_mnist_gpu.py (no FSDP, no
#          DataLoader, the data set on the GPU, batches gathered by index);
#      then a table: epoch s, images/s, trainc's images/s over each, and
#      the targets: >= 10x the seed program, >= 2x PyTorch with the data on
#      the GPU.  The PyTorch programs time the training part of the epoch
#      with CUDA events (their "RESULT" line); the test pass is outside every
#      figure.
#   2. Step latency of the DDP tutorial's ToyModel (models/toy.net), 2000
#      steps in one epoch (a synthetic set of 40000 samples in place of the
#      tutorial's 20, so the steps run back to back as PyTorch's replays do;
#      with 20, every step is an epoch of its own and the host waits at its
#      end): trainc's "Step time: X us per step; CUDA graph launch floor:
#      Y us (ratio Z)" line, target X within 2x of Y; and for reference
#      PyTorch's step time, eager and replayed as a CUDA graph
#      (bench/torch_toy_gpu.py).
# Without a GPU it prints "bench/gpu.sh: skipped: no NVIDIA GPU" and exits
# 0.  Without PyTorch with CUDA it says why the PyTorch figures are skipped
# and still runs trainc's part; a part that fails or times out leaves "-" in
# the table and its log is named.  Nothing here stops the rest: every
# command runs under timeout, and all of them together under BUDGET.
#
# Usage: bench/gpu.sh   (from the repository root, after ./configure && ninja;
#                        one epoch each, about 2 minutes on an H200)
# Environment:
#   TRAINC   trainc binary (build/trainc)
#   PYTHON   the Python with torch to use (default: the first of python3 and
#            /usr/bin/python3 whose torch sees a CUDA device)
#   DATA     folder of the MNIST IDX files (default: the first of data/mnist,
#            /usr/share/datasets/fashion-mnist, data/fashion-mnist holding
#            train-images-idx3-ubyte[.gz], directly or under MNIST/raw or
#            FashionMNIST/raw); a path containing "fashion" is normalised
#            with Fashion-MNIST's mean and std, any other with MNIST's
#   BUDGET   seconds for the whole script (360); each command's own limit is
#            cut to what is left
#   BENCH_LOG  a new or empty folder for the logs and trainc's run records
#            (default: a new one under /tmp)
#   DEVICE=cpu LIMIT=N  a check of this script without a GPU: trainc with
#            --cpus 1, the PyTorch programs with --device cpu, each pass
#            stopped after N batches (LIMIT works on a GPU too)
# ($tdev, $pdev, $plimit, $tsteps and $steps are unquoted on purpose: each
# holds several words)
# shellcheck disable=SC2086
set -u
case ${1:-} in
-h|--help) sed -n '2,/^set /p' "$0" | sed '$d; /^# shellcheck/d; s/^# \{0,1\}//'; exit 0 ;;
'') ;;
*) echo "$0: takes no arguments; its settings come from the environment (--help)" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.." || exit 2
DEVICE=${DEVICE:-cuda}
LIMIT=${LIMIT:-0}
BUDGET=${BUDGET:-360}
TRAINC=${TRAINC:-build/trainc}
me=bench/gpu.sh
start=$(date +%s)

if [ "$DEVICE" = cuda ]; then
	gpus=
	if command -v nvidia-smi >/dev/null 2>&1; then
		gpus=$(timeout -k 5 30 nvidia-smi -L 2>/dev/null | grep '^GPU ')
	elif [ -e /dev/nvidia0 ]; then
		gpus="GPU 0: (no nvidia-smi; /dev/nvidia0 present)"
	fi
	if [ -z "$gpus" ]; then
		echo "$me: skipped: no NVIDIA GPU"
		exit 0
	fi
fi

LOG=${BENCH_LOG:-$(mktemp -d /tmp/gpu_bench.XXXXXX)}
mkdir -p "$LOG" && LOG=$(cd "$LOG" && pwd) || exit 2

# lim N: N, or the seconds left of BUDGET when fewer (0 when none are left)
lim() {
	left=$((BUDGET - ($(date +%s) - start)))
	if [ "$left" -lt "$1" ]; then echo $((left > 0 ? left : 0)); else echo "$1"; fi
}
# run NAME SECONDS CMD...: CMD under timeout into $LOG/NAME.log; its status
# in $LOG/NAME.rc; a note when it failed or timed out
run() {
	name=$1 t=$(lim "$2")
	shift 2
	if [ "$t" -lt 5 ]; then
		echo "  $name: skipped: the ${BUDGET} s budget is spent"
		echo 124 >"$LOG/$name.rc"
		return
	fi
	echo "  $name ($t s at most): $*"
	timeout -k 10 "$t" "$@" >"$LOG/$name.log" 2>&1
	rc=$?
	echo "$rc" >"$LOG/$name.rc"
	case $rc in
	0) ;;
	124 | 137) echo "  $name: timed out after $t s; see $LOG/$name.log" ;;
	*)
		echo "  $name: failed (exit $rc); see $LOG/$name.log; its last lines:"
		tail -3 "$LOG/$name.log" | sed 's/^/    /'
		;;
	esac
}
# result NAME KEY: KEY=... of the RESULT line in $LOG/NAME.log
result() { [ -f "$LOG/$1.log" ] && sed -n 's/^RESULT //p' "$LOG/$1.log" | tail -1 | tr ' ' '\n' | sed -n "s/^$2=//p"; }
# ratio A B: A / B with two decimals, or "-"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else printf "-" }'; }
# verdict RATIO TARGET TEXT: PASS, FAIL, or "not measured"
verdict() {
	if [ "$1" = - ]; then
		echo "  not measured  $3"
	elif awk -v r="$1" -v t="$2" 'BEGIN { exit !(r >= t) }'; then
		echo "  PASS  $3: x$1"
	else
		echo "  FAIL  $3: x$1"
	fi
}

# the Python with a CUDA torch, or why there is none
PY='' why=''
for p in ${PYTHON:-python3 /usr/bin/python3}; do
	command -v "$p" >/dev/null 2>&1 || { why="$why $p: not found;"; continue; }
	v=$(timeout -k 5 120 "$p" -c 'import torch; print(torch.__version__, torch.cuda.is_available())' 2>/dev/null | tail -1)
	case $v in
	"") why="$why $p: no torch (import torch failed);" ;;
	*" True") PY=$p && break ;;
	*)
		if [ "$DEVICE" = cpu ]; then PY=$p && break; fi
		why="$why $p: torch ${v% *} without CUDA (torch.cuda.is_available() is False);"
		;;
	esac
done

# the data set, and its normalisation
has_idx() {
	for d in "$1" "$1/MNIST/raw" "$1/FashionMNIST/raw"; do
		[ -f "$d/train-images-idx3-ubyte" ] || [ -f "$d/train-images-idx3-ubyte.gz" ] && return 0
	done
	return 1
}
DATA_ASKED=${DATA:-}
if [ -z "${DATA:-}" ]; then
	for d in data/mnist /usr/share/datasets/fashion-mnist data/fashion-mnist; do
		if has_idx "$d"; then DATA=$d && break; fi
	done
fi
DATA=${DATA:-}
if [ -n "$DATA" ] && ! has_idx "$DATA"; then
	echo "$me: $DATA holds no train-images-idx3-ubyte[.gz] (nor under MNIST/raw or FashionMNIST/raw)"
	DATA=
fi
case $DATA in
*[Ff]ashion*) MEAN=0.2860 STD=0.3530 ;;
*) MEAN=0.1307 STD=0.3081 ;;
esac

echo "$me: $(date -u '+%Y-%m-%d %H:%M UTC'), logs in $LOG"
if [ "$DEVICE" = cuda ]; then
	echo "$gpus" | sed 's/^/  /'
	command -v nvidia-smi >/dev/null 2>&1 &&
		timeout -k 5 30 nvidia-smi --query-gpu=driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/  driver, memory: /'
else
	echo "  DEVICE=cpu: a check of this script on the CPU, not a GPU measurement"
fi
if [ -x "$TRAINC" ]; then
	echo "  trainc: $(timeout -k 5 30 "$TRAINC" --version 2>/dev/null | head -1)"
else
	echo "  trainc: skipped: no $TRAINC (build it with ./configure && ninja)"
fi
if [ -n "$PY" ]; then
	echo "  PyTorch: $PY, torch $(timeout -k 5 60 "$PY" -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)' 2>/dev/null)"
else
	echo "  PyTorch: skipped: no PyTorch with CUDA here (${why# }); the PyTorch columns stay empty"
fi
if [ -n "$DATA" ]; then
	echo "  data: $DATA, normalised ($MEAN, $STD)"
else
	echo "  data: skipped: no MNIST or Fashion-MNIST IDX files (looked in ${DATA_ASKED:-data/mnist, /usr/share/datasets/fashion-mnist and data/fashion-mnist}); set DATA=DIR; the CNN figures stay empty"
fi
if [ "$DEVICE" = cpu ]; then
	tdev="--cpus 1" pdev="--device cpu"
else
	tdev="--gpus 1" pdev="--device cuda"
fi
[ "$LIMIT" -gt 0 ] && echo "  LIMIT=$LIMIT: every pass stops after $LIMIT batches (not a full epoch)"
plimit="--limit-batches $LIMIT"
tsteps="--set train.epochs=1"
[ "$LIMIT" -gt 0 ] && tsteps="$tsteps --set train.steps=$LIMIT"

echo
echo "== 1. seed CNN, one epoch, batch 64"
if [ -x "$TRAINC" ] && [ -n "$DATA" ]; then
	# the seed program's wrap policy (min_num_params=100); at one rank it
	# changes only how the parameters are grouped
	run trainc_cnn 150 "$TRAINC" models/mnist_cnn.net $tdev $tsteps \
		--set "parallel.wrap=size(min_params=100)" \
		--set "data.train=mnist(\"$DATA\", split=\"train\", normalize=($MEAN, $STD))" \
		--set "data.test=mnist(\"$DATA\", split=\"test\", normalize=($MEAN, $STD))" \
		--run-dir "$LOG/run-cnn"
else
	echo "  trainc: skipped (see above)"
fi
if [ -n "$PY" ] && [ -n "$DATA" ]; then
	run torch_gpu_data 90 "$PY" bench/torch_mnist_gpu.py $pdev $plimit --data "$DATA" --mean "$MEAN" --std "$STD"
else
	echo "  PyTorch with the data on the device: skipped (see above)"
fi

echo
echo "== 2. ToyModel step latency, 2000 steps"
if [ -x "$TRAINC" ]; then
	run trainc_toy 60 "$TRAINC" models/toy.net $tdev --set train.steps=2000 --set train.log_interval=100000 \
		--set "data.train=synthetic(input=randn(10), target=randn(5), samples=40000)" --run-dir "$LOG/run-toy"
else
	echo "  trainc: skipped (see above)"
fi
if [ -n "$PY" ]; then
	steps="--steps 2000"
	[ "$LIMIT" -gt 0 ] && steps=$plimit
	run torch_toy 60 "$PY" bench/torch_toy_gpu.py $pdev $steps
else
	echo "  PyTorch: skipped (see above)"
fi

# the seed program last: it takes longest, and the rest matters more
echo
echo "== 1, continued: the seed program"
if [ -n "$PY" ] && [ -n "$DATA" ]; then
	# MASTER_ADDR and MASTER_PORT from the environment, else localhost and a free port
	run torch_fsdp 150 "$PY" bench/torch_fsdp_mnist.py $pdev $plimit --data "$DATA" --mean "$MEAN" --std "$STD"
else
	echo "  skipped (see above)"
fi

# trainc's figures: images/s from the "Train Epoch: 1<TAB>Average loss" line;
# the epoch's images from "Net: ..., N training samples" (batch 64 per step
# when LIMIT cut the epoch short)
t_ips=- t_s=-
if [ -f "$LOG/trainc_cnn.log" ]; then
	t_ips=$(awk -F'\t' '/^Train Epoch: 1\tAverage loss:/ { sub(/ images\/s.*/, "", $3); print $3; exit }' "$LOG/trainc_cnn.log")
	n=$(sed -n 's/^Net: .*, \([0-9,]*\) training samples.*/\1/p' "$LOG/trainc_cnn.log" | tr -d , | head -1)
	[ "$LIMIT" -gt 0 ] && n=$((LIMIT * 64))
	t_s=$(awk -v n="${n:-0}" -v r="${t_ips:-0}" 'BEGIN { if (n > 0 && r > 0) printf "%.3f", n / r; else printf "-" }')
	t_ips=${t_ips:--}
fi
s_ips=$(result torch_fsdp images_per_s) s_s=$(result torch_fsdp epoch_s)
g_ips=$(result torch_gpu_data images_per_s) g_s=$(result torch_gpu_data epoch_s)

echo
echo "== results"
row() { printf "%-44s %9s %10s %12s\n" "$1" "${2:--}" "${3:--}" "$4"; }
row program "epoch s" "images/s" "trainc/that"
row "trainc $tdev" "$t_s" "$t_ips" ""
row "PyTorch FSDP example (seed program)" "$s_s" "$s_ips" "$(ratio "$t_ips" "${s_ips:-}")"
row "PyTorch, data on the device" "$g_s" "$g_ips" "$(ratio "$t_ips" "${g_ips:-}")"
[ -n "$PY" ] || echo "(PyTorch rows skipped: no PyTorch with CUDA)"
for f in trainc_cnn torch_fsdp torch_gpu_data; do
	[ -f "$LOG/$f.log" ] || continue
	grep -h -e '^CUDA event elapsed time' -e '^CPU clock elapsed time' -e '^Training loop elapsed time' \
		-e '^Test set:' "$LOG/$f.log" | sed "s/^/  $f: /"
done
echo "targets (the issue's):"
verdict "$(ratio "$t_ips" "${s_ips:-}")" 10 "trainc >= 10x the seed program's images/s"
verdict "$(ratio "$t_ips" "${g_ips:-}")" 2 "trainc >= 2x PyTorch's images/s with the data on the GPU"

echo
echo "ToyModel, us per step:"
line=
if [ -f "$LOG/trainc_toy.log" ]; then
	line=$(grep -m1 '^Step time: ' "$LOG/trainc_toy.log")
	if [ -n "$line" ]; then
		echo "  trainc: $line"
	else
		echo "  trainc: no 'Step time: X us per step; CUDA graph launch floor: Y us (ratio Z)' line; see $LOG/trainc_toy.log"
	fi
else
	echo "  trainc: skipped (see above)"
fi
if [ -f "$LOG/torch_toy.log" ]; then
	echo "  PyTorch: eager $(result torch_toy eager_us), CUDA graph replay $(result torch_toy graph_us), one-kernel graph replay $(result torch_toy floor_us)"
	grep -e '^graph: skipped' -e '^graph: failed' "$LOG/torch_toy.log" | sed 's/^/  PyTorch /'
else
	echo "  PyTorch: skipped (see above)"
fi
echo "target: trainc's step time within 2x of its CUDA graph launch floor:"
step_us=$(echo "$line" | sed -n 's/^Step time: \([0-9.]*\) us per step.*/\1/p')
floor_us=$(echo "$line" | sed -n 's/.*CUDA graph launch floor: \([0-9.]*\) us.*/\1/p')
if [ "$(ratio "${step_us:-}" "${floor_us:-}")" = - ]; then
	echo "  not measured"
elif awk -v s="$step_us" -v f="$floor_us" 'BEGIN { exit !(s <= 2 * f) }'; then
	echo "  PASS  $step_us us per step, floor $floor_us us: x$(ratio "$step_us" "$floor_us") of the floor"
else
	echo "  FAIL  $step_us us per step, floor $floor_us us: x$(ratio "$step_us" "$floor_us") of the floor"
fi
echo "($(($(date +%s) - start)) s)"
