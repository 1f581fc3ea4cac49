# constant_lr, linear_lr, polynomial_lr and cosine_warm_restarts through a
# run: models/toy.net in batches of 5 (4 steps an epoch) for 12 steps
# gives at every step the rate PyTorch 1.13's ConstantLR, LinearLR,
# PolynomialLR and CosineAnnealingWarmRestarts give at base lr 0.001
# (the values below, read from param_groups[0]['lr'] before each
# scheduler.step(), once an epoch or once a step as `every` says), within
# 1e-12 relative.  A run resumed from a checkpoint inside a restart
# period goes on at the uninterrupted run's rates (and with another
# t_mult is refused), and the GPU library
# (over the host stand-in, its steps replayed as a CUDA graph from a rate
# table) steps at the CPU's.  test_optim checks the schedules' closed
# forms at other numbers and their refusals.
. "$(dirname "$0")/preamble.inc"
net=models/toy.net
lrs() { sed -n 's/.*"kind": "step".*"lr": \([^,]*\),.*/\1/p' "$tmp/$1/metrics.jsonl" | tr '\n' ' '; }
# run NAME SCHEDULER [ARGS...]
run() {
	name=$1 sched=$2
	shift 2
	"$TRAINC" $net --threads 1 --set train.batch=5 --set train.steps=12 --set train.log_interval=1 \
		--set "train.scheduler=$sched" --run-dir "$tmp/$name" "$@" > "$tmp/$name.out" 2>&1 ||
		{ fail "$name: the run failed:"; sed 's/^/    /' "$tmp/$name.out"; }
}
# same NAME WANT: run NAME's 12 rates are WANT's within 1e-12 relative
same() {
	got=$(lrs "$1")
	echo "$got | $2" | awk '{ n = 0; for (i = 1; $i != "|"; i++) n++; if (NF != 2 * n + 1 || n != 12) exit 1
		for (i = 1; i <= n; i++) { g = $i; w = $(i + n + 1); d = g - w; if (d < 0) d = -d
			if (d > 1e-12 * (w < 0 ? -w : w) + 1e-18) exit 1 } }' ||
		fail "$1: the rates are $got; PyTorch's $2"
}

run linear 'linear_lr(every="step")'
same linear "0.0003333333333333333 0.0004666666666666667 0.0006000000000000001 0.0007333333333333334 0.0008666666666666668 0.001 0.001 0.001 0.001 0.001 0.001 0.001"
run constant 'constant_lr(factor=0.5, total_iters=2)'
same constant "0.0005 0.0005 0.0005 0.0005 0.0005 0.0005 0.0005 0.0005 0.001 0.001 0.001 0.001"
run poly 'polynomial_lr(total_iters=8, power=2.0, every="step")'
same poly "0.001 0.000765625 0.0005625 0.000390625 0.00025000000000000006 0.00014062500000000004 6.250000000000001e-05 1.5625000000000004e-05 0.0 0.0 0.0 0.0"
restarts="0.001 0.00055 0.001 0.0008681980515339464 0.00055 0.00023180194846605365 0.001 0.000965745789630079 0.0008681980515339464 0.0007222075445642905 0.00055 0.0003777924554357096"
warm='cosine_warm_restarts(t_0=2, t_mult=2, eta_min=1e-4, every="step")'
run restarts "$warm"
same restarts "$restarts"

# resumed at step 5, inside the second period (steps 3 to 6)
run first "$warm" --set train.steps=5 --save "$tmp/ck"
run rest "$warm" --resume "$tmp/ck"
grep -q 'Resumed from .* at step 5' "$tmp/rest.out" || fail "the resume did not start at step 5: $(head -3 "$tmp/rest.out")"
want_rest=$(echo "$restarts" | cut -d' ' -f6-)
[ "$(lrs rest)" = "$want_rest " ] || fail "the resumed run's rates are $(lrs rest); the uninterrupted run's $want_rest"

# the schedule is part of the run: another t_mult does not resume it
"$TRAINC" $net --set train.batch=5 --set train.steps=12 --resume "$tmp/ck" --run-dir "$tmp/other" \
	--set 'train.scheduler=cosine_warm_restarts(t_0=2, t_mult=3, eta_min=1e-4, every="step")' > "$tmp/other.out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q 'was made by a different model or settings' "$tmp/other.out" ||
	{ fail "a resume with another t_mult: exit $rc, expected 2:"; sed 's/^/    /' "$tmp/other.out"; }

# the GPU library's rate table
lib=$(pwd)/build/tests/trainc-fakecuda.so
if [ -f "$lib" ]; then
	TRAINC_CUDA_LIB=$lib run gpu "$warm" --gpus 1
	same gpu "$restarts"
	grep -q 'CUDA graph' "$tmp/gpu.out" || fail "the GPU run's steps were not replayed as a graph: $(grep 'Step time' "$tmp/gpu.out")"
fi
exit $failed
