#!/bin/sh
# bench/cpu_cnn.sh: trainc against PyTorch on the seed CNN, CPU, one process.
#
# Model, data and settings: models/fashion_mnist_cnn.net (the CNN of PyTorch's
# FSDP MNIST example on Fashion-MNIST, batch 64, Adadelta lr 1.0, NLL sum),
# and the same in bench/torch_cnn.py on /usr/bin/python3 (Debian's
# python3-torch).  For each thread count (1 and 2 by default):
#   - steady-state training throughput: both programs print a line after
#     every step (trainc with --set train.log_interval=1); bench/steptime.py
#     stamps each line as it arrives and takes images/s between the end of
#     step SKIP and the end of step STEPS, so start-up, the first SKIP steps
#     and the end-of-epoch test pass are all excluded.  Also images/s from
#     the median step time over the same steps, which a few steps slowed by
#     other work do not move;
#   - peak resident memory of the same run, from /usr/bin/time -v: training
#     STEPS steps and then one pass over the 10,000 test images at batch 1000
#     (trainc evaluates at the end of every epoch; torch_cnn.py does the same
#     so that both runs do the same work).  A second row has training alone:
#     trainc evaluating at the training batch (--set train.test_batch=64),
#     PyTorch not evaluating;
#   - launch to first step: launch of the process to the arrival of the line
#     printed after step 1 (optimizer update done), same run.  trainc's total
#     wall time for --set train.steps=1 is shown too: an upper bound that also
#     holds the end-of-epoch test pass.  torch_cnn.py's own figure, from
#     /proc/self/stat (10 ms resolution), is in the run log.
# Each throughput run is made REPEATS times (2) and the best figures kept:
# other work only ever slows a run down.  Then a table (metric, trainc,
# PyTorch, ratio) and the targets with PASS/FAIL: images/s >= 1.5x PyTorch,
# peak memory < 1/4 of PyTorch's, first step within 0.1 s of launch.  On a
# busy machine runtime grows: a 2-thread run with one core taken by other
# work runs 5-15 times slower.
#
# Usage: bench/cpu_cnn.sh        (from the repository root; about 3 minutes
#                                 on a quiet 2-core machine)
# Environment: TRAINC (default build/trainc), PYTHON (/usr/bin/python3),
#   THREADS ("1 2"), STEPS (400), SKIP (50), REPEATS (2).  Two cores are
#   easily disturbed: before starting it waits for the 1-minute load average
#   to be at most MAX_LOAD (1.5), and before every run for other work to take
#   less than QUIET cores (0.15, sampled over a second); a throughput run
#   during which other work took more than QUIET cores ("others" in
#   bench/steptime.py) does not count towards REPEATS, up to RETRIES (2)
#   extra runs.  All waits together are capped at LOAD_WAIT seconds (120);
#   past that it neither waits nor makes extra runs, and says so.
#   BENCH_LOG: a new or empty folder for the raw logs (default: a new one
#   under /tmp); trainc's run records (runs/) go there too.
# Needs /usr/bin/time (Debian package time), numpy and python3-torch.
set -eu
case ${1:-} in
-h|--help) sed -n '2,/^set /p' "$0" | sed '$d; /^# shellcheck/d; s/^# \{0,1\}//'; exit 0 ;;
'') ;;
*) echo "$0: takes no arguments; its settings come from the environment (--help)" >&2; exit 2 ;;
esac

cd "$(dirname "$0")/.."
TRAINC=${TRAINC:-build/trainc}
PYTHON=${PYTHON:-/usr/bin/python3}
THREADS=${THREADS:-"1 2"}
STEPS=${STEPS:-400}
SKIP=${SKIP:-50}
REPEATS=${REPEATS:-2}
MAX_LOAD=${MAX_LOAD:-1.5}
QUIET=${QUIET:-0.15}
RETRIES=${RETRIES:-2}
LOAD_WAIT=${LOAD_WAIT:-120}
ROOT=$(pwd)
NET=$ROOT/models/fashion_mnist_cnn.net
BATCH=64

[ -x "$TRAINC" ] || { echo "cpu_cnn.sh: no $TRAINC; build it with: ninja build/trainc" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "cpu_cnn.sh: needs /usr/bin/time: apt-get install time" >&2; exit 2; }
"$PYTHON" -c 'import torch, numpy' 2>/dev/null || { echo "cpu_cnn.sh: $PYTHON lacks torch or numpy (apt-get install python3-torch)" >&2; exit 2; }

LOG=${BENCH_LOG:-$(mktemp -d /tmp/cpu_cnn.XXXXXX)}
mkdir -p "$LOG"
# a private copy, so a rebuild during the run does not change the binary
cp "$TRAINC" "$LOG/trainc"
LOG=$(cd "$LOG" && pwd)
TC="$LOG/trainc"
# trainc keeps a record of every run under ./runs: keep those with the logs
cd "$LOG"
start=$(date +%s)

# busy: cores busy over the next second (nothing of ours runs meanwhile)
busy() {
	a=$(awk '/^cpu / { print $2+$3+$4+$7+$8+$9, $5+$6 }' /proc/stat)
	sleep 1
	b=$(awk '/^cpu / { print $2+$3+$4+$7+$8+$9, $5+$6 }' /proc/stat)
	echo "$a $b" | awk -v n="$(nproc)" '{ u = $3 - $1; i = $4 - $2; printf "%.2f", (u + i > 0) ? u / (u + i) * n : 0 }'
}
# quiet FIRST: wait until other work takes less than QUIET cores and, when
# FIRST is 1, the 1-minute load average is at most MAX_LOAD (between our own
# runs the load average mostly counts us)
waited=0
quiet() {
	while :; do
		b=$(busy)
		l=$(cut -d' ' -f1 /proc/loadavg)
		if awk -v b="$b" -v q="$QUIET" -v l="$l" -v m="$MAX_LOAD" -v first="$1" \
			'BEGIN { exit !(b < q && (!first || l <= m)) }'; then
			return 0
		fi
		if [ "$waited" -ge "$LOAD_WAIT" ]; then
			[ "$waited" -gt "$LOAD_WAIT" ] ||
				echo "cpu_cnn.sh: warning: the machine stays busy ($b cores, load $l); going on without waiting" >&2
			waited=$((LOAD_WAIT + 1))
			return 0
		fi
		echo "cpu_cnn.sh: machine busy ($b cores, load $l), waiting" >&2
		sleep 4
		waited=$((waited + 5))
	done
}

# kv FILE KEY: the value of KEY=... in FILE
kv() { tr ' ' '\n' <"$1" | sed -n "s/^$2=//p"; }
rss_mib() { awk -F': ' '/Maximum resident set size/ { printf "%.1f", $2 / 1024 }' "$1"; }

# once NAME CMD...: wait for a quiet machine, then run CMD under steptime.py
# and /usr/bin/time -v into $LOG/NAME.{log,kv,time}
once() {
	name=$1
	shift
	quiet 0
	"$PYTHON" "$ROOT/bench/steptime.py" --batch "$BATCH" --skip "$SKIP" --steps "$STEPS" --log "$LOG/$name.log" -- \
		/usr/bin/time -v -o "$LOG/$name.time" "$@" >"$LOG/$name.kv"
	if [ "$(kv "$LOG/$name.kv" rc)" != 0 ]; then
		echo "cpu_cnn.sh: $name failed; see $LOG/$name.log" >&2
		tail -5 "$LOG/$name.log" >&2
		exit 1
	fi
	echo "  $name: $(cat "$LOG/$name.kv") peak_rss_mib=$(rss_mib "$LOG/$name.time")"
}

# best NAME CMD...: runs of CMD as NAME.1, NAME.2, ... until REPEATS of them
# had other work under QUIET cores, or REPEATS + RETRIES runs were made (only
# REPEATS once the waits have used up LOAD_WAIT).  NAME.kv gets the highest
# images/s (steady and median, each) and the lowest first-step time over all
# of them, and the "others" of the run with the highest steady images/s;
# NAME.time is that run's.  (sh has no local variables: best uses names of
# its own.)
best() {
	bname=$1
	shift
	att=0
	calm=0
	while [ "$calm" -lt "$REPEATS" ] && [ "$att" -lt $((REPEATS + RETRIES)) ]; do
		att=$((att + 1))
		once "$bname.$att" "$@"
		if awk -v o="$(kv "$LOG/$bname.$att.kv" others)" -v q="$QUIET" 'BEGIN { exit !(o <= q) }'; then
			calm=$((calm + 1))
		elif [ "$waited" -ge "$LOAD_WAIT" ] && [ "$att" -ge "$REPEATS" ]; then
			break
		fi
	done
	top=$(for f in "$LOG/$bname".[0-9]*.kv; do echo "$(kv "$f" steady_ips) $f"; done | sort -g | tail -1 | cut -d' ' -f2)
	cp "${top%.kv}.time" "$LOG/$bname.time"
	{
		echo "steady_ips=$(kv "$top" steady_ips)"
		echo "median_ips=$(for f in "$LOG/$bname".[0-9]*.kv; do kv "$f" median_ips; done | sort -g | tail -1)"
		echo "first_step_s=$(for f in "$LOG/$bname".[0-9]*.kv; do kv "$f" first_step_s; done | sort -g | head -1)"
		echo "others=$(kv "$top" others)"
		echo "runs=$att"
	} | tr '\n' ' ' >"$LOG/$bname.kv"
}

echo "trainc $("$TC" --version 2>/dev/null | head -1), $("$PYTHON" -c 'import torch; print("torch", torch.__version__)')," \
	"$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "steps $STEPS (steady state over steps $((SKIP + 1))..$STEPS), batch $BATCH, best of $REPEATS, logs in $LOG"
quiet 1

for t in $THREADS; do
	best "trainc_t$t" "$TC" "$NET" --cpus 1 --threads "$t" --set train.steps="$STEPS" --set train.log_interval=1
	best "torch_t$t" "$PYTHON" "$ROOT/bench/torch_cnn.py" --threads "$t" --steps "$STEPS" --skip "$SKIP" --batch "$BATCH"
	# upper bound for trainc's first step: a whole run of one step (its test pass included)
	once "trainc_1step_t$t" "$TC" "$NET" --cpus 1 --threads "$t" --set train.steps=1
done
# peak memory of training alone, at the first thread count
t1=${THREADS%% *}
once "trainc_train_only_t$t1" "$TC" "$NET" --cpus 1 --threads "$t1" --set train.steps="$SKIP" --set train.test_batch="$BATCH"
once "torch_train_only_t$t1" "$PYTHON" "$ROOT/bench/torch_cnn.py" --threads "$t1" --steps "$SKIP" --skip 0 --test-batch 0

echo
# row METRIC TRAINC TORCH: ratio trainc/PyTorch
row() { awk -v m="$1" -v a="$2" -v b="$3" 'BEGIN { r = (b + 0 > 0) ? sprintf("%.2f", a / b) : "-"; printf "%-50s %9s %9s %6s\n", m, a, b, r }'; }
printf "%-50s %9s %9s %6s\n" metric trainc PyTorch ratio
for t in $THREADS; do
	row "images/s, steps $((SKIP + 1))-$STEPS, $t thread(s)" "$(kv "$LOG/trainc_t$t.kv" steady_ips)" "$(kv "$LOG/torch_t$t.kv" steady_ips)"
done
for t in $THREADS; do
	row "images/s from the median step, $t thread(s)" "$(kv "$LOG/trainc_t$t.kv" median_ips)" "$(kv "$LOG/torch_t$t.kv" median_ips)"
done
for t in $THREADS; do
	row "peak RSS MiB, train + test pass, $t thread(s)" "$(rss_mib "$LOG/trainc_t$t.time")" "$(rss_mib "$LOG/torch_t$t.time")"
done
row "peak RSS MiB, training only, $t1 thread(s)" "$(rss_mib "$LOG/trainc_train_only_t$t1.time")" "$(rss_mib "$LOG/torch_train_only_t$t1.time")"
for t in $THREADS; do
	row "launch to end of step 1 (s), $t thread(s)" "$(kv "$LOG/trainc_t$t.kv" first_step_s)" "$(kv "$LOG/torch_t$t.kv" first_step_s)"
done
for t in $THREADS; do
	row "whole run of steps=1 (s, bound), $t thread(s)" "$(kv "$LOG/trainc_1step_t$t.kv" wall_s)" "-"
done
for t in $THREADS; do
	row "other work during the best run (cores), $t thr." "$(kv "$LOG/trainc_t$t.kv" others)" "$(kv "$LOG/torch_t$t.kv" others)"
done

echo
echo "targets:"
# suspect T: a remark when other work took more than QUIET cores during the
# best trainc or PyTorch run at T threads
suspect() {
	awk -v a="$(kv "$LOG/trainc_t$1.kv" others)" -v b="$(kv "$LOG/torch_t$1.kv" others)" -v q="$QUIET" \
		'BEGIN { if (a > q || b > q) printf " (suspect: other work took %s / %s cores)", a, b }'
}
# verdict OK TEXT
verdict() { if [ "$1" = 1 ]; then echo "  PASS  $2"; else echo "  FAIL  $2"; fi; }
for t in $THREADS; do
	a=$(kv "$LOG/trainc_t$t.kv" steady_ips) b=$(kv "$LOG/torch_t$t.kv" steady_ips)
	verdict "$(awk -v a="$a" -v b="$b" 'BEGIN { print (a >= 1.5 * b) ? 1 : 0 }')" \
		"images/s >= 1.5x PyTorch, $t thread(s): $a vs $b, x$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", a / b }')$(suspect "$t")"
done
for t in $THREADS; do
	a=$(rss_mib "$LOG/trainc_t$t.time") b=$(rss_mib "$LOG/torch_t$t.time")
	verdict "$(awk -v a="$a" -v b="$b" 'BEGIN { print (a < b / 4) ? 1 : 0 }')" \
		"peak memory < 1/4 of PyTorch's, $t thread(s): $a MiB vs $b MiB (limit $(awk -v b="$b" 'BEGIN { printf "%.1f", b / 4 }') MiB)"
done
for t in $THREADS; do
	a=$(kv "$LOG/trainc_t$t.kv" first_step_s)
	verdict "$(awk -v a="$a" 'BEGIN { print (a <= 0.1) ? 1 : 0 }')" "first step within 0.1 s of launch, $t thread(s): $a s$(suspect "$t")"
done
for f in "$LOG"/trainc_t[0-9]*.kv "$LOG"/torch_t[0-9]*.kv; do
	case $f in *.[0-9].kv) continue ;; esac
	o=$(kv "$f" others)
	if awk -v o="$o" -v q="$QUIET" 'BEGIN { exit !(o > q) }'; then
		echo "note: other work took $o cores during the best $(basename "$f" .kv) run; its figures are suspect"
	fi
done
echo "($(($(date +%s) - start)) s, $waited s of it waiting for a quiet machine)"
