# The CUDA kernel files over kemu (tests/fakecuda/kemu.h) in the orders a
# GPU may run their threads in: a GPU runs a block's threads, and since
# Volta a warp's lanes, in any order between barriers, and blocks in any
# order, so a kernel that reads what another thread writes without a
# barrier between answers differently in some order.  kemu runs blocks and
# threads in reverse order (TRAINC_KEMU_ORDER=reverse) and in
# pseudo-random orders (shuffle, TRAINC_KEMU_SEED), every block as
# fibers, with shared memory filled with NaN bytes at each block's start,
# and stops on divergent barriers and misaligned loads; gpu_kemu.sh runs
# the forward order.  Here: kemu's own checks in each order; every op
# (tests/gpu_ops.c) in reverse and in shuffled orders of two seeds (the
# 50M-parameter MLP, the one with thousands of blocks per launch, in the
# first shuffled run; nets whose layers, loss and batches another's are
# checked once a run, as gpu_ops says); the one-kernel steps of the ToyModel and of
# norm_mlp.net (batch, layer, group and instance norms), and the
# layer-by-layer step of an MLP, of a batch-norm net and of an embedding
# net (its gradient sorted by id, no atomics), whose sums run in a fixed
# order: bit for bit the same in every order, and the one-kernel step =
# CPU; and a classifier of 12000 classes on two GPUs, whose losses are
# grids of blocks: the same in every order, and the CPU's loss for loss.
# Skipped where CUDA was not configured.
. "$(dirname "$0")/preamble.inc"
lib=$(pwd)/build/tests/trainc-kemu.so
if [ ! -f "$lib" ]; then
	echo "gpu_kemu_order: skipped: trainc was configured without CUDA"
	exit 0
fi
export TRAINC_PLAIN=1

# kemu itself (tests/fakecuda/kemu_check.cu): barriers and warp exchanges
# as on a GPU in every order, and the races and misuses it must expose
[ -x build/tests/kemu_check ] || fail "build/tests/kemu_check is not built (a build/gpu.ninja from before it: rerun ./configure)"
for o in forward reverse shuffle; do
	[ -x build/tests/kemu_check ] || break
	TRAINC_KEMU_ORDER=$o build/tests/kemu_check > "$tmp/check-$o.log" 2>&1 &&
		echo "ok kemu's own checks in $o order: $(grep -c '^ok' "$tmp/check-$o.log") passed" ||
		{ fail "kemu's own checks in $o order:"; grep -v '^ok' "$tmp/check-$o.log" | head -20; }
done

# ops N ORDER SEED TAG NETS...: every op of NETS in that order, in the
# background (each run is one thread and takes a minute or more: they share
# the machine's cores); ops_report N says how run N went, after wait
ops() {
	n=$1 o=$2 seed=$3
	printf '%s\n' "$4" > "$tmp/ops-$n.tag"
	shift 4
	{ TRAINC_KEMU_ORDER=$o TRAINC_KEMU_SEED=$seed TRAINC_FAKE_GPUS=3 build/tests/gpu_ops_kemu "$@" > "$tmp/ops-$n.log" 2>&1
	  echo $? > "$tmp/ops-$n.rc"; } &
}
ops_report() {
	tag=$(cat "$tmp/ops-$1.tag")
	[ "$(cat "$tmp/ops-$1.rc" 2> /dev/null)" = 0 ] &&
		echo "ok every op, $tag: $(tail -n 1 "$tmp/ops-$1.log")" ||
		{ fail "ops, $tag:"; grep -v '^ok' "$tmp/ops-$1.log" | head -20; }
}
small=
for f in models/*.net tests/cli/nets/*.net; do
	case $f in *mlp_50m.net) ;; *) small="$small $f" ;; esac
done
# shellcheck disable=SC2086
ops 1 reverse 1 "threads and blocks in reverse order" $small
ops 2 shuffle 1 "threads and blocks shuffled (seed 1)" models/*.net tests/cli/nets/*.net
# shellcheck disable=SC2086
ops 3 shuffle 2 "threads and blocks shuffled (seed 2)" $small
wait
for n in 1 2 3; do ops_report $n; done
# run TAG ORDER ARGS...: trainc over the kernel files in that order (or --cpus in ARGS)
run() {
	run_tag=$1 run_order=$2
	shift 2
	TRAINC_KEMU_ORDER=$run_order TRAINC_KEMU_SEED=3 TRAINC_CUDA_LIB=$lib "$TRAINC" "$@" --run-dir "$tmp/run-$run_tag" \
		--save "$tmp/$run_tag.safetensors" > "$tmp/$run_tag.log" 2>&1 || { fail "$run_tag: trainc $* exited $?:"; tail -n 5 "$tmp/$run_tag.log"; }
}
# same A B TOL WHAT
same() {
	build/tests/stcmp "$tmp/$1.safetensors" "$tmp/$2.safetensors" "$3" > "$tmp/cmp" 2>&1 || { fail "$4: $(cat "$tmp/cmp")"; return; }
	echo "ok $4 ($(cat "$tmp/cmp"))"
}

for o in forward reverse shuffle; do
	run toy-$o $o models/toy.net --gpus 1 --set train.steps=30
done
run toy-cpu forward models/toy.net --cpus 1 --threads 1 --set train.steps=30
grep -q 'one kernel each' "$tmp/toy-shuffle.log" || fail "the ToyModel did not take the one-kernel step"
same toy-reverse toy-forward 0 "toy: one-kernel step, threads in reverse order = forward"
same toy-shuffle toy-forward 0 "toy: one-kernel step, threads shuffled = forward"
same toy-shuffle toy-cpu 1e-5 "toy: one-kernel step, threads shuffled = CPU"
# the norms' rows and channels in the one-kernel step
for o in forward reverse shuffle; do
	run norm-$o $o tests/cli/nets/norm_mlp.net --gpus 1
done
grep -q 'one kernel each' "$tmp/norm-shuffle.log" || fail "norm_mlp.net did not take the one-kernel step"
same norm-reverse norm-forward 0 "norms: one-kernel step, threads in reverse order = forward"
same norm-shuffle norm-forward 0 "norms: one-kernel step, threads shuffled = forward"
for net in tests/cli/nets/mlp_mse.net tests/cli/nets/bn1d_mlp.net models/token_mlp.net; do
	name=$(basename "$net" .net)
	for o in forward shuffle; do
		TRAINC_CUDA_TINY=0 run "$name-$o" $o "$net" --gpus 1 --set train.steps=6
	done
	same "$name-shuffle" "$name-forward" 0 "$name: layer by layer, threads and blocks shuffled = forward"
done
# 12000 classes on two GPUs of a rank: its losses are grids of blocks on
# the second GPU, whose sums must be the CPU's loss for loss
for o in forward shuffle; do
	TRAINC_FAKE_GPUS=2 run "wide-$o" $o tests/cli/nets/wide_classes.net --gpus 2
done
run wide-cpu forward tests/cli/nets/wide_classes.net --cpus 2 --threads 1
same wide-shuffle wide-forward 0 "wide_classes: threads and blocks shuffled = forward"
same wide-forward wide-cpu 1e-5 "wide_classes: GPUs = CPU"
losses() { grep -o '"loss": [^,}]*' "$tmp/run-$1/metrics.jsonl" | cut -d' ' -f2; }
losses wide-forward > "$tmp/wide-gpu.loss"
losses wide-cpu > "$tmp/wide-cpu.loss"
if [ "$(wc -l < "$tmp/wide-cpu.loss")" -eq 9 ] && [ "$(wc -l < "$tmp/wide-gpu.loss")" -eq 9 ] &&
	paste "$tmp/wide-gpu.loss" "$tmp/wide-cpu.loss" | awk '{ d = $1 - $2; if (d < 0) d = -d; if (!(d <= 1e-9 * $2)) exit 1 }'; then
	echo "ok wide_classes: 9 losses (steps, epochs, evaluations) within 1e-9 of the CPU's"
else
	fail "wide_classes: the GPU's losses are not the CPU's: $(paste "$tmp/wide-gpu.loss" "$tmp/wide-cpu.loss" | tr '\n' ' ')"
fi
exit $failed
