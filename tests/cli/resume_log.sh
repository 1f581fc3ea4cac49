# A run resumed mid-epoch logs the steps an uninterrupted run logs: every
# log_interval batches counted from the epoch's start, not from the resume.
# Before, a run stopped at batch 3 with log_interval 2 logged batch 5
# instead of batch 4, on the console and in metrics.jsonl.  Checked at 1
# and 2 ranks, and on the GPU trainer over its host stand-in where CUDA was
# configured (tests/cli/gpu_host.sh).  And under micro_batch, where a step
# runs several batches, both trainers log each step whose batches complete a
# multiple of log_interval: the CPU trainer logged only a step ending on one
# (steps 5, 6 and 8 below, where the GPU trainer logged 2 to 6 and 8).
. "$(dirname "$0")/preamble.inc"
net=tests/cli/nets/mlp_mse.net
lib=$(pwd)/build/tests/trainc-fakecuda.so
export TRAINC_PLAIN=1
# steps DIR: metrics.jsonl's step lines without their time and rate
steps() { grep '"kind": "step"' "$1/metrics.jsonl" | sed 's/^{"time": [0-9.]*, //; s/, "images_per_s.*//'; }
for how in "--cpus 1" "--cpus 2" "--gpus 1"; do
	[ "$how" = "--gpus 1" ] && { [ -f "$lib" ] || continue; export TRAINC_CUDA_LIB="$lib"; }
	set -- $how --set train.log_interval=2
	d="$tmp/${how#--}"
	d=$(echo "$d" | tr ' ' _)
	"$TRAINC" $net "$@" --set train.steps=12 --run-dir "$d-full" > "$d-full.out" 2>&1 || fail "$how: the run failed"
	"$TRAINC" $net "$@" --set train.steps=3 --save "$d-ck" --run-dir "$d-half" > /dev/null 2>&1 || fail "$how: the first part failed"
	"$TRAINC" $net "$@" --set train.steps=12 --resume "$d-ck" --run-dir "$d-rest" > "$d-rest.out" 2>&1 ||
		fail "$how: the resumed run failed"
	steps "$d-full" | grep -v '"step": [123],' > "$tmp/a"
	steps "$d-rest" > "$tmp/b"
	[ -s "$tmp/a" ] && cmp -s "$tmp/a" "$tmp/b" || { fail "$how: the resumed run logs other steps:"; diff "$tmp/a" "$tmp/b"; }
	grep '^Train Epoch: 1 \[' "$d-full.out" | tail -n +2 > "$tmp/a"
	grep '^Train Epoch: 1 \[' "$d-rest.out" > "$tmp/b"
	cmp -s "$tmp/a" "$tmp/b" || { fail "$how: the resumed epoch's lines differ:"; diff "$tmp/a" "$tmp/b"; }
	[ $failed = 0 ] && echo "ok $how: a run resumed mid-epoch logs the steps an uninterrupted one logs"
done

# 1 rank, global_batch 16 in micro-batches of 4: steps end at batches 4, 8,
# 12..., so log_interval 5 logs steps 2 to 5 (batches 5, 10, 15 and 20 fall
# in them), the epoch's last (6) and the run's last (8)
for how in "--cpus 1" "--gpus 1"; do
	[ "$how" = "--gpus 1" ] && [ ! -f "$lib" ] && continue
	d=$tmp/micro$(echo "$how" | tr -d ' -')
	"$TRAINC" tests/cli/nets/mlp_fsdp.net $how --set train.micro_batch=4 --set train.log_interval=5 --set train.steps=8 --run-dir "$d" \
		> "$d.out" 2>&1 || fail "$how under micro_batch: the run failed"
	got=$(steps "$d" | sed 's/.*"step": \([0-9]*\),.*/\1/' | tr '\n' ' ')
	[ "$got" = "2 3 4 5 6 8 " ] || fail "$how under micro_batch: logged steps $got, expected 2 3 4 5 6 8"
done
[ $failed = 0 ] && echo "ok under micro_batch each step that completes a multiple of log_interval batches is logged"
exit $failed
