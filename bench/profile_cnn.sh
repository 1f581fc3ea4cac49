#!/bin/sh
# bench/profile_cnn.sh: where trainc's time goes on the seed CNN (CPU).
#
# Three views of build/trainc models/fashion_mnist_cnn.net at THREADS
# threads (1), batch 64:
#   1. steady-state training steps: perf record attaches once step SKIP (50)
#      has been printed and samples for PERF_SECONDS (5) at 499 Hz with DWARF
#      call graphs, so start-up and the end-of-epoch test pass are left out.
#      Printed: the share of each object (oneDNN's generated convolution
#      kernels show as "[JIT] tid N": perf cannot name them), the top
#      functions by their own time, and the inclusive time of trainc's
#      functions (runtime/exec.c, runtime/kern_*.c, runtime/optim.c);
#   2. oneDNN's own timing of every primitive it runs (ONEDNN_VERBOSE=1),
#      summed per primitive and shape, in ms per step over steps 11-60:
#      this splits the JIT share of view 1 into conv1/conv2 forward,
#      backward-data, backward-weights and the layout reorders;
#   3. start-up: a run of one step under perf record -k CLOCK_MONOTONIC, the
#      samples from launch to the end of step 1 only (the launch time and
#      the step come from bench/steptime.py on the same clock), by object
#      and function.
# Usage: bench/profile_cnn.sh    (from the repository root; about 30 seconds)
# Environment: TRAINC (build/trainc), THREADS (1), SKIP (50), PERF_SECONDS (5),
#   PROF_LOG (folder for perf.data and logs; default a new one under /tmp).
# Needs perf (Debian package linux-perf) and python3.
set -eu
case ${1:-} in
-h|--help) sed -n '2,/^set /p' "$0" | sed '$d; /^# shellcheck/d; s/^# \{0,1\}//'; exit 0 ;;
'') ;;
*) echo "$0: takes no arguments; its settings come from the environment (--help)" >&2; exit 2 ;;
esac

cd "$(dirname "$0")/.."
TRAINC=${TRAINC:-build/trainc}
THREADS=${THREADS:-1}
SKIP=${SKIP:-50}
PERF_SECONDS=${PERF_SECONDS:-5}
ROOT=$(pwd)
NET=$ROOT/models/fashion_mnist_cnn.net
command -v perf >/dev/null || { echo "profile_cnn.sh: needs perf (apt-get install linux-perf)" >&2; exit 2; }
[ -x "$TRAINC" ] || { echo "profile_cnn.sh: no $TRAINC; build it with: ninja build/trainc" >&2; exit 2; }
LOG=${PROF_LOG:-$(mktemp -d /tmp/profile_cnn.XXXXXX)}
mkdir -p "$LOG"
cp "$TRAINC" "$LOG/trainc"
LOG=$(cd "$LOG" && pwd)
TC="$LOG/trainc"
# trainc keeps a record of every run under ./runs: keep those with the logs
cd "$LOG"
echo "logs and perf data in $LOG; $THREADS thread(s)"

# 1. steady state.  Enough steps that training outlasts the sampling window
# (about 40 ms a step at one thread).
steps=$((SKIP + 200 * PERF_SECONDS / 4 + 100))
python3 "$ROOT/bench/steptime.py" --steps 1 --skip 0 --log "$LOG/steady.log" -- \
	"$TC" "$NET" --cpus 1 --threads "$THREADS" --set train.steps="$steps" --set train.log_interval=1 >"$LOG/steady.kv" &
spid=$!
n=0
while ! grep -q "Train Epoch: 1 \[$((SKIP * 64))/" "$LOG/steady.log" 2>/dev/null; do
	sleep 0.05
	n=$((n + 1))
	[ "$n" -lt 1200 ] || { echo "profile_cnn.sh: trainc did not reach step $SKIP" >&2; exit 1; }
done
pid=$(pgrep -P "$spid")
perf record -q -k CLOCK_MONOTONIC -F 499 --call-graph dwarf,8192 -o "$LOG/steady.data" -p "$pid" -- sleep "$PERF_SECONDS" 2>/dev/null
wait "$spid"
# the steps that ended between the first and the last sample
t0=$(tr ' ' '\n' <"$LOG/steady.kv" | sed -n 's/^t0=//p')
span=$(perf script -i "$LOG/steady.data" -F time 2>/dev/null | sed -n '1p;$p' | tr -d ': ' | tr '\n' ' ')
steady=$(awk -F'\t' -v t0="$t0" -v span="$span" '
	BEGIN { split(span, s, " ") }
	$2 ~ /^Train Epoch: 1 \[/ { t = t0 + $1; n++; if (t >= s[1] && t <= s[2]) { if (!first) first = n; last = n; tl = t; if (!tf) tf = t } }
	END { printf "steps %d to %d, %.1f ms a step under perf", first, last, 1000 * (tl - tf) / (last - first) }' "$LOG/steady.log")
echo
echo "== 1. steady state: $PERF_SECONDS s of samples over $steady =="
echo "-- share by object --"
perf report -i "$LOG/steady.data" --no-children --sort dso -g none --stdio 2>/dev/null | grep '%' | head -8
echo "-- top functions, own time --"
perf report -i "$LOG/steady.data" --no-children --sort dso,sym -g none --stdio 2>/dev/null | grep '%' |
	grep -v '\[JIT\]' | head -16
echo "   (one line per address: all [JIT] addresses together are the [JIT] share above)"
echo "-- trainc's functions, inclusive time (the JIT share is not under them: perf cannot unwind through generated code) --"
perf report -i "$LOG/steady.data" --children --sort sym -g none --stdio 2>/dev/null | grep '%' |
	grep -E '\] (exec_|forward_node|backward_node|kern_[a-z0-9_]+$|optim_|adadelta|train_run|loader_|dataset_)' | head -24

# 2. oneDNN's timing per primitive
ONEDNN_VERBOSE=1 "$TC" "$NET" --cpus 1 --threads "$THREADS" --set train.steps=60 --set train.log_interval=1 >"$LOG/onednn.out" 2>&1
echo
echo "== 2. oneDNN primitives, steps 11-60 (ms per step; 'mb4' is a chunk of 4 images) =="
awk -F, '
	/^Train Epoch: 1 \[/ { n++; next }
	n >= 10 && n < 60 && /^onednn_verbose,exec/ {
		key = $4 == "reorder" ? "reorder " $(NF - 1) " " $7 : $4 " " $6 " " $(NF - 1)
		t[key] += $NF; c[key]++; total += $NF
	}
	END {
		for (k in t) printf "%8.3f ms %6.1f calls  %s\n", t[k] / 50, c[k] / 50, k
		printf "%8.3f ms in oneDNN per step\n", total / 50
	}' "$LOG/onednn.out" | sort -rn | head -14

# 3. start-up
python3 "$ROOT/bench/steptime.py" --steps 1 --skip 0 --log "$LOG/startup.log" -- \
	perf record -q -k CLOCK_MONOTONIC -F 1999 -o "$LOG/startup.data" -- "$TC" "$NET" --cpus 1 --threads "$THREADS" \
	--set train.steps=1 --set train.log_interval=1 >"$LOG/startup.kv"
t0=$(tr ' ' '\n' <"$LOG/startup.kv" | sed -n 's/^t0=//p')
first=$(tr ' ' '\n' <"$LOG/startup.kv" | sed -n 's/^first_step_s=//p')
end=$(awk -v a="$t0" -v b="$first" 'BEGIN { printf "%.6f", a + b }')
echo
echo "== 3. start-up: launch to the end of step 1, $first s (under perf) =="
# ms: the sample count (second column of perf report -n) at 1999 Hz, in ms
ms() { awk '{ $2 = sprintf("%7.1f ms", $2 * 1000 / 1999); print }'; }
echo "-- by thread and object (CPU time; main is the busiest thread) --"
perf report -i "$LOG/startup.data" --time "$t0,$end" --no-children --sort pid,dso -g none --stdio -n 2>/dev/null |
	grep '%' | head -10 | ms
echo "-- top functions of the main thread (libz's are unnamed: it has no symbols) --"
perf report -i "$LOG/startup.data" --time "$t0,$end" --no-children --sort pid,dso,sym -g none --stdio -n 2>/dev/null |
	grep '%' | grep "$(perf report -i "$LOG/startup.data" --time "$t0,$end" --sort pid -g none --stdio 2>/dev/null |
		grep -m1 '%' | awk '{ print $2 }')" | head -16 | ms
