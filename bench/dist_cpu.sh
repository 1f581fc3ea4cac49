#!/bin/sh
# bench/dist_cpu.sh: distributed training on the CPU, measured.
#   1. DDP (issue "launcher/DDP"): the seed CNN at --cpus 2 (one thread per
#      rank) against --cpus 1 (two threads), the share of training time spent
#      waiting for the gradient all-reduce and how much of it the backward
#      pass hid, and PyTorch DDP over gloo with the same model, batch, data
#      and threads; also the wall time of the DDP tutorial's basic demo
#      (2 ranks, one step of ToyModel), launch to exit, trainc vs PyTorch;
#      and the --cpus 2 run as a job of two nodes (--nnodes 2, both here).
#   2. FSDP: planned and measured per-rank memory of a 50M-parameter MLP at
#      1, 2 and 4 ranks; step time of FSDP against DDP on the seed CNN at 2
#      ranks; the share of all-gather/reduce-scatter time hidden by compute.
#   3. Pipeline: per-device idle share of a two-device model without and with
#      micro-batches.
# Usage: bench/dist_cpu.sh   (from the repository root; about a minute on a
#        quiet 2-core machine)
# Environment: TRAINC (build/trainc), PYTHON (/usr/bin/python3), STEPS (200),
#   BENCH_LOG (a folder for the raw logs; default a new one under /tmp).
set -eu
case ${1:-} in
-h|--help) sed -n '2,/^set /p' "$0" | sed '$d; /^# shellcheck/d; s/^# \{0,1\}//'; exit 0 ;;
'') ;;
*) echo "$0: takes no arguments; its settings come from the environment (--help)" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
TRAINC=${TRAINC:-build/trainc}
PYTHON=${PYTHON:-/usr/bin/python3}
STEPS=${STEPS:-200}
[ -x "$TRAINC" ] || { echo "bench/dist_cpu.sh: no $TRAINC; build it first (./configure && ninja) or set TRAINC" >&2; exit 1; }
log=${BENCH_LOG:-$(mktemp -d /tmp/dist_cpu.XXXXXX)}
mkdir -p "$log"
echo "raw logs: $log"
calc() { awk "BEGIN { printf \"%.6f\", $1 }" 2> /dev/null || echo 0; } # 0 where a figure is missing
run() { # run NAME ARGS...
	name=$1; shift
	"$TRAINC" "$@" --run-dir "$log/run-$name" > "$log/$name.log" 2>&1
}
field() { sed -n "s/$2/\1/p" "$log/$1.log" | head -1; }
steps="--set train.steps=$STEPS --set train.log_interval=100000"

echo "== 1. DDP, seed CNN, batch 64 per rank, $STEPS steps"
run ddp1 models/fashion_mnist_ddp.net --cpus 1 --threads 2 $steps
run ddp2 models/fashion_mnist_ddp.net --cpus 2 $steps
r1=$(field ddp1 '.*(\([0-9.]*\) images\/s while training).*')
r2=$(field ddp2 '.*(\([0-9.]*\) images\/s while training).*')
wait=$(field ddp2 '^DDP: \([0-9.]*\)% of the training time waiting.*')
hid=$(field ddp2 '^DDP: .*; \([0-9]*\)% of the all-reduce time hidden.*')
pt=$($PYTHON bench/torch_ddp.py cnn "$STEPS" 1 2>/dev/null | sed -n 's/pytorch ddp images\/s //p')
printf "  trainc --cpus 1 (2 threads)   %8.0f images/s\n" "$r1"
printf "  trainc --cpus 2 (1 thread)    %8.0f images/s   (%.2fx of --cpus 1)\n" "$r2" "$(calc "$r2 / $r1")"
printf "  waiting on all-reduce         %8s%% of training time; %s%% of all-reduce time hidden\n" "$wait" "$hid"
printf "  PyTorch DDP gloo, 2 ranks     %8.0f images/s   (trainc %.2fx)\n" "$pt" "$(calc "$r2 / $pt")"
# the same two ranks as a job of two nodes (--nnodes 2), both on this
# machine, meeting over TCP at node 0's store: what the rendezvous over the
# network costs (the nodes find they share this machine's CPUs and take
# half each, as --cpus 2's ranks do)
port=$((20000 + $$ % 20000))
"$TRAINC" models/fashion_mnist_ddp.net --cpus 1 $steps --nnodes 2 --node-rank 1 --master-port $port \
	> "$log/nodes1.log" 2>&1 &
run nodes0 models/fashion_mnist_ddp.net --cpus 1 $steps --nnodes 2 --node-rank 0 --master-port $port
wait
rn=$(field nodes0 '.*(\([0-9.]*\) images\/s while training).*')
printf "  2 nodes x 1 rank (TCP)        %8.0f images/s   (%.2fx of --cpus 2)\n" "$rn" "$(calc "$rn / $r2")"
t0=$(date +%s.%N); "$TRAINC" models/toy.net --cpus 2 --run-dir "$log/toy" > /dev/null; t1=$(date +%s.%N)
$PYTHON bench/torch_ddp.py toy > /dev/null 2>&1; t2=$(date +%s.%N)
printf "  DDP tutorial demo (2 ranks, 1 step), launch to exit: trainc %.3f s, PyTorch %.3f s (%.0fx)\n" \
	"$(calc "$t1 - $t0")" "$(calc "$t2 - $t1")" "$(calc "($t2 - $t1) / ($t1 - $t0)")"

echo "== 2. FSDP"
for w in 1 2 4; do
	planned=$("$TRAINC" print tests/cli/nets/mlp_50m.net --cpus $w | awk '$1 == "0" && NF == 7 { print $2 + $3 + $4 }')
	run m$w tests/cli/nets/mlp_50m.net --cpus $w
	got=$(field m$w '^Rank 0: parameters, gradients and optimizer state \([0-9.]*\) MiB.*')
	rss=$(field m$w '.*peak resident memory \([0-9.]*\) MiB.*')
	printf "  50M-parameter MLP, %d rank(s): parameters+gradients+optimizer planned %8.2f MiB, measured %8.2f MiB; peak RSS %s MiB\n" \
		$w "$planned" "$got" "$rss"
done
run fsdp2 models/fashion_mnist_cnn.net --cpus 2 $steps
rf=$(field fsdp2 '.*(\([0-9.]*\) images\/s while training).*')
fw=$(field fsdp2 '^FSDP rank 0: \([0-9.]*\)% of the training time waiting.*')
fh=$(field fsdp2 '^FSDP rank 0: .*(\([0-9]*\)% of their time hidden.*')
printf "  seed CNN at 2 ranks: FSDP %.0f images/s (step %.1f ms), DDP %.0f images/s (step %.1f ms)\n" \
	"$rf" "$(calc "128000 / $rf")" "$r2" "$(calc "128000 / $r2")"
printf "  FSDP waits on all-gather/reduce-scatter %s%% of training time; %s%% of their time hidden behind compute\n" "$fw" "$fh"

echo "== 3. Pipeline, two devices per rank"
cat > "$log/pipe.net" <<'NET'
model Pipe2 {
    input(512)
    a1 = linear(512, 1024) @device(0)
    relu
    a2 = linear(1024, 1024)
    relu
    b1 = linear(1024, 1024) @device(1)
    relu
    b2 = linear(1024, 1024)
    relu
    out = linear(1024, 10)
}
data  { train = synthetic(input=randn(512), target=classes(10), samples=4096) }
train { loss = cross_entropy; optimizer = sgd(lr=0.01); batch = 256; epochs = 1 }
parallel ddp
NET
for m in 1 2 4 8; do
	run pipe$m "$log/pipe.net" --cpus 2 --set parallel.microbatches=$m
	printf "  %d micro-batch(es): %s; %s images/s\n" $m "$(field pipe$m '^Pipeline: .*idle share: \(.*\)$')" \
		"$(field pipe$m '.*(\([0-9.]*\) images\/s while training).*')"
done
