# l1, smooth_l1(beta) and huber(delta), as PyTorch's L1Loss, SmoothL1Loss
# and HuberLoss (test_kern holds PyTorch's losses and gradients at and
# beside the kinks; test_cuda_body and gpu_ops the GPU's against the
# CPU's), through whole runs of tests/cli/nets/regression.net, by the
# identities between them, which hold bit for bit as each scales by a
# power of two: huber(delta=0.5) is half smooth_l1(beta=0.5), so SGD at lr
# 0.1 on one takes the steps of lr 0.05 on the other (the same weights,
# the loss doubled); huber with a delta no error reaches is half mse (the
# same weights at twice mse's lr); l1 is smooth_l1 at beta 0.  On the CPU
# and, where CUDA was configured, over the GPU library's kernel files,
# which also train as the CPU does (within 1e-5).  A checkpoint resumes
# with the same delta only.
. "$(dirname "$0")/preamble.inc"
net=tests/cli/nets/regression.net

# train NAME LOSS LR [ARGS...]: the net with that loss and rate, one thread,
# every step logged, the weights in $tmp/NAME.safetensors
train() {
	name=$1 loss=$2 lr=$3
	shift 3
	"$TRAINC" $net --threads 1 --set "train.loss=$loss" --set "train.optimizer=sgd(lr=$lr, momentum=0.9)" \
		--set train.log_interval=1 --save "$tmp/$name.safetensors" --run-dir "$tmp/$name" "$@" > "$tmp/$name.out" 2>&1 ||
		{ fail "$name: the run failed:"; sed 's/^/    /' "$tmp/$name.out"; }
}
losses() { sed -n 's/.*"kind": "step".*"loss": \([^,]*\),.*/\1/p' "$tmp/$1/metrics.jsonl"; }
# ratio A B R TOL: every step loss of run B is R times A's (within TOL relative)
ratio() {
	paste "$tmp/$1.losses" "$tmp/$2.losses" > "$tmp/pair"
	[ "$(wc -l < "$tmp/pair")" -eq 12 ] || { fail "$1, $2: $(wc -l < "$tmp/pair") step losses, expected 12"; return; }
	awk -v r="$3" -v tol="$4" '{ d = $2 - r * $1; if (d < 0) d = -d; if (!(d <= tol * $2)) { print "step " NR ": " $1 " and " $2; exit 1 } }' \
		"$tmp/pair" > "$tmp/bad" || fail "$2's losses are not $3 times $1's: $(cat "$tmp/bad")"
}
same() { # A B: the same weights bit for bit
	build/tests/stcmp "$tmp/$1.safetensors" "$tmp/$2.safetensors" 0 > "$tmp/cmp" 2>&1 ||
		fail "$1 and $2 end in other weights: $(cat "$tmp/cmp")"
}

for where in cpu kemu; do
	gpu_lib $where || continue
	# shellcheck disable=SC2086 # $gpu is one option and its value, or nothing
	set -- $gpu
	train huber-$where 'huber(delta=0.5)' 0.1 "$@"
	train smooth-$where 'smooth_l1(beta=0.5)' 0.05 "$@"
	train wide-$where 'huber(delta=1e6)' 0.1 "$@"
	train mse-$where mse 0.05 "$@"
	train l1-$where l1 0.05 "$@"
	train beta0-$where 'smooth_l1(beta=0)' 0.05 "$@"
	for r in huber smooth wide mse l1 beta0; do losses $r-$where > "$tmp/$r-$where.losses"; done
	ratio huber-$where smooth-$where 2 0
	same huber-$where smooth-$where
	ratio wide-$where mse-$where 2 1e-6
	same wide-$where mse-$where
	ratio l1-$where beta0-$where 1 0
	same l1-$where beta0-$where
	# the losses differ from one another: each loss is its own
	[ "$(cat "$tmp/l1-$where.losses")" != "$(cat "$tmp/huber-$where.losses")" ] || fail "$where: l1 and huber log the same losses"
	[ "$(sed -n 1p "$tmp/huber-$where.losses")" != "$(sed -n 1p "$tmp/mse-$where.losses")" ] || fail "$where: huber's first loss is mse's"
done
gpu_lib cpu
if [ -f build/tests/trainc-kemu.so ]; then
	for r in huber l1; do
		build/tests/stcmp "$tmp/$r-cpu.safetensors" "$tmp/$r-kemu.safetensors" 1e-5 > "$tmp/cmp" 2>&1 ||
			fail "$r: the GPU's kernel files do not train as the CPU: $(cat "$tmp/cmp")"
	done
fi
# delta is part of how the run trains: a checkpoint resumes with delta
# written as its default or not, and not with another
"$TRAINC" $net --set train.loss=huber --set train.epochs=1 --save "$tmp/ck" --run-dir "$tmp/ck-run" > "$tmp/ck.out" 2>&1 ||
	{ fail "the checkpointed run failed:"; sed 's/^/    /' "$tmp/ck.out"; }
"$TRAINC" $net --set 'train.loss=huber(delta=1.0)' --set train.epochs=2 --resume "$tmp/ck" --run-dir "$tmp/r1" > "$tmp/r1.out" 2>&1 &&
	grep -q 'Resumed from .* at step 4' "$tmp/r1.out" || { fail "huber's checkpoint does not resume with delta=1.0:"; sed 's/^/    /' "$tmp/r1.out"; }
"$TRAINC" $net --set train.epochs=2 --resume "$tmp/ck" --run-dir "$tmp/r2" > "$tmp/r2.out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q 'was made by a different model or settings' "$tmp/r2.out" ||
	{ fail "huber's checkpoint resumed with delta=0.5: exit $rc, expected 2:"; sed 's/^/    /' "$tmp/r2.out"; }
exit $failed
