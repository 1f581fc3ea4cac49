#!/bin/sh
# examples/fsdp_mnist/match_pytorch.sh: trainc and PyTorch, loss for loss.
#
# The FSDP MNIST example's CNN without its dropouts, on Fashion-MNIST, at
# 2 ranks: trainc --cpus 2 under FSDP, and PyTorch (match_pytorch.py, the
# same training in one process).  Both start from torch.manual_seed(1)'s
# weights (trainc draws them as PyTorch does, from train.seed = 1), see the
# same samples in the same batches (trainc shuffles as DistributedSampler
# does: torch.randperm after set_epoch) and take the same Adadelta steps.
# Prints the losses of both, step by step, and exits 1 unless the first
# CHECK steps agree within TOL.  The programs round differently
# (convolution algorithms, summation order), and Adadelta at lr 1.0 makes
# such differences grow from step to step; how soon depends on the CPU: a
# last-bit difference can flip a discrete choice (a ReLU at zero, a max-pool
# between near-equal values) and move a whole channel's gradient by 1e-4,
# after which the two runs part.  For scale, the table also gives how far
# PyTorch drifts from itself when it only changes its thread count (2
# instead of 1).
#
# Usage: examples/fsdp_mnist/match_pytorch.sh   (from anywhere, after ninja;
#                                                under a minute)
# (relative paths in TRAINC, PYTHON and DATA are taken from where it is
# started)
# Environment:
#   TRAINC   trainc binary (build/trainc)
#   PYTHON   a Python with torch (python3; Debian's python3-torch will do)
#   DATA     Fashion-MNIST's IDX files (/usr/share/datasets/fashion-mnist)
#   STEPS    optimizer steps (50; at most 468, the first epoch's)
#   CHECK    the steps that must agree (5)
#   TOL      the largest relative difference allowed in them (1e-5)
set -u
case ${1:-} in
-h|--help) sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
'') ;;
*) echo "$0: takes no arguments; its settings come from the environment (--help)" >&2; exit 2 ;;
esac
# paths given relative to where the script was started from
here=$(pwd)
absolute() { case $1 in /*) echo "$1" ;; */*) echo "$here/$1" ;; *) echo "$1" ;; esac; }
[ -n "${TRAINC:-}" ] && TRAINC=$(absolute "$TRAINC")
[ -n "${DATA:-}" ] && case $DATA in /*) ;; *) DATA=$here/$DATA ;; esac
[ -n "${PYTHON:-}" ] && PYTHON=$(absolute "$PYTHON")
cd "$(dirname "$0")/../.." || exit 2
TRAINC=${TRAINC:-build/trainc}
PYTHON=${PYTHON:-python3}
DATA=${DATA:-/usr/share/datasets/fashion-mnist}
STEPS=${STEPS:-50}
CHECK=${CHECK:-5}
TOL=${TOL:-1e-5}
case $STEPS$CHECK in *[!0-9]*) echo "$0: STEPS and CHECK are whole numbers (STEPS=$STEPS CHECK=$CHECK)" >&2; exit 2 ;; esac
[ "$STEPS" -ge 1 ] && [ "$CHECK" -ge 1 ] && [ "$CHECK" -le "$STEPS" ] ||
	{ echo "$0: need 1 <= CHECK <= STEPS (CHECK=$CHECK STEPS=$STEPS)" >&2; exit 2; }
awk -v t="$TOL" 'BEGIN { exit !(t ~ /^[0-9.]+([eE][-+]?[0-9]+)?$/ && t + 0 > 0) }' ||
	{ echo "$0: TOL must be a positive number, not '$TOL'" >&2; exit 2; }
[ -x "$TRAINC" ] || { echo "$0: no $TRAINC; build it first (./configure && ninja)" >&2; exit 2; }
"$PYTHON" -c 'import torch' 2> /dev/null || { echo "$0: $PYTHON has no torch; install python3-torch or set PYTHON" >&2; exit 2; }
tmp=$(mktemp -d /tmp/match_pytorch.XXXXXX) || exit 2
trap 'rm -rf "$tmp"' EXIT

# the example's model and settings, without the dropouts, on Fashion-MNIST
sed '/dropout/d; s|"data/mnist"|"'"$DATA"'"|; s|(0.1307, 0.3081)|(0.2860, 0.3530)|' models/mnist_cnn.net > "$tmp/net.net"
for t in 1 2; do
	"$PYTHON" examples/fsdp_mnist/match_pytorch.py --data "$DATA" --mean 0.2860 --std 0.3530 --steps "$STEPS" \
		--threads $t > "$tmp/torch$t" || { echo "$0: the PyTorch side failed" >&2; exit 1; }
done
"$TRAINC" "$tmp/net.net" --cpus 2 --set train.steps="$STEPS" --set train.log_interval=1 \
	--run-dir "$tmp/run" > "$tmp/trainc.out" 2>&1 || { cat "$tmp/trainc.out"; echo "$0: trainc failed" >&2; exit 1; }
sed -n 's/.*"kind": "step", "step": \([0-9]*\),.*"loss": \([^,]*\),.*/\1 \2/p' "$tmp/run/metrics.jsonl" > "$tmp/trainc"
awk -v tol="$TOL" -v steps="$STEPS" -v check="$CHECK" '
	function rel(a, b) { return (a > b ? a - b : b - a) / (b < 0 ? -b : b) }
	FILENAME ~ /trainc$/ { t[$1] = $2; next }
	FILENAME ~ /torch1$/ { p[$2] = $4; next }
	{ q[$2] = $4 }
	END {
		printf "%5s %10s %10s %10s   %s\n", "step", "trainc", "PyTorch", "rel. diff", "PyTorch at 2 threads: rel. diff"
		for (s = 1; s <= steps; s++) {
			if (!(s in t) || !(s in p) || !(s in q)) { printf "step %d: a loss is missing\n", s; exit 1 }
			r = rel(t[s], p[s]); r2 = rel(q[s], p[s])
			if (s <= check && r > worst) worst = r
			if (s <= check && r2 > worst2) worst2 = r2
			if (s <= check || s % 10 == 0) printf "%5d %10.6f %10.6f %10.2e   %.2e\n", s, t[s], p[s], r, r2
		}
		printf "steps 1-%d: trainc and PyTorch within %.2e of each other (allowed %s); PyTorch at 2 threads within %.2e of itself\n",
			check, worst, tol, worst2
		exit worst > tol
	}' "$tmp/trainc" "$tmp/torch1" "$tmp/torch2"
