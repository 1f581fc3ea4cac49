# Faults of a multi-process job: a worker killed with SIGKILL, SIGINT to
# the launcher, a hung worker, and bad rank counts.  Each must end the whole
# job within seconds, name the cause, and leave no process behind.
# FAULT_RANKS (default "--cpus 2") is how the first three start their two
# ranks, FAULT_HANG_NET the hung job's model (tests/cli/gpu_faults.sh:
# "--gpus 2" over the host stand-in, whose convolutions are slow).
set -e
ranks=${FAULT_RANKS:---cpus 2}
hang_net=${FAULT_HANG_NET:-models/fashion_mnist_ddp.net}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
net=tests/cli/nets/mlp_mse.net
# runs that last until stopped: 10^7 steps (the GPU trainer's per-step rate
# and loss tables are 160 MB a rank at that, set up in well under the
# hung job's 3 s timeout even on a loaded machine; 10^8 took 2 s a rank)
long="--set train.steps=10000000 --set train.log_interval=100000"

rank_pid() { # rank_pid LAUNCHER RANK
	for c in $(pgrep -P "$1"); do
		if tr '\0' '\n' < /proc/$c/environ 2>/dev/null | grep -qx "RANK=$2"; then echo $c; return; fi
	done
}
wait_ranks() { # wait_ranks LAUNCHER N: until N workers exist and have started training
	for i in $(seq 100); do
		[ "$(pgrep -P "$1" | wc -l)" -ge "$2" ] && grep -q 'Train\|parameters' "$dir/out" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "workers did not start"; return 1
}
gone() { # gone PID...: none of them exists any more
	for p in "$@"; do [ -n "$p" ] && kill -0 "$p" 2>/dev/null && { echo "process $p survived"; return 1; }; done
	return 0
}
finish_within() { # finish_within SECONDS PID: wait for the launcher to exit, return its status
	for i in $(seq $(($1 * 10))); do kill -0 "$2" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$2" 2>/dev/null; then echo "launcher still running after $1 s"; kill -9 "$2"; return 99; fi
	wait "$2"
}

# 1. kill -9 of one worker mid-training, once it has saved a checkpoint:
# the job says the checkpoints are intact and how to go on from them
"$TRAINC" $net $ranks $long --set train.checkpoint_every=1 --save "$dir/ck" --run-dir "$dir/a" > "$dir/out" 2> "$dir/err" &
L=$!
wait_ranks $L 2
for i in $(seq 100); do [ -e "$dir/ck/latest" ] && break; sleep 0.1; done
r0=$(rank_pid $L 0); r1=$(rank_pid $L 1)
kill -9 "$r1"
set +e; finish_within 10 $L; rc=$?; set -e
[ $rc -ne 0 ] && [ $rc -ne 99 ] || { echo "kill -9: launcher exit $rc"; exit 1; }
grep -q 'rank 1 failed with signal SIGKILL' "$dir/err" || { echo "kill -9: cause not named"; cat "$dir/err"; exit 1; }
# rank 0's collective broke as a consequence: trainc does not say it
# beside the cause (the GPU stand-in's own "fake NCCL:" lines aside)
! grep -q '^trainc: .*another rank died or stalled' "$dir/err" || { echo "kill -9: rank 0's broken collective said too"; cat "$dir/err"; exit 1; }
sleep 0.2; gone "$r0" "$r1"
grep -qx "trainc: the checkpoints in $dir/ck are intact: --resume $dir/ck continues from the latest" "$dir/err" ||
	{ echo "kill -9: no word on the checkpoints"; cat "$dir/err"; exit 1; }
echo "ok kill -9 of rank 1: exit $rc, named alone, resumable, nothing left"

# 2. SIGINT to the launcher (Ctrl-C: a job started by a shell without job
# control, as this one is, ignores SIGINT, and trainc keeps that ignore)
env --default-signal=INT "$TRAINC" $net $ranks $long --run-dir "$dir/b" > "$dir/out" 2> "$dir/err" &
L=$!
wait_ranks $L 2
r0=$(rank_pid $L 0); r1=$(rank_pid $L 1)
kill -INT $L
set +e; finish_within 10 $L; rc=$?; set -e
[ $rc -eq 130 ] || { echo "SIGINT: exit $rc, expected 130"; cat "$dir/err"; exit 1; }
sleep 0.2; gone "$r0" "$r1"
echo "ok SIGINT: exit 130, nothing left"

# 3. a hung worker (stopped): the job timeout names it
"$TRAINC" $hang_net $ranks $long --set parallel.timeout=3 --run-dir "$dir/c" > "$dir/out" 2> "$dir/err" &
L=$!
wait_ranks $L 2
r0=$(rank_pid $L 0); r1=$(rank_pid $L 1)
kill -STOP "$r1"
stopped_at=$(date +%s)
set +e; finish_within 20 $L; rc=$?; set -e
[ $rc -ne 0 ] && [ $rc -ne 99 ] || { echo "hang: launcher exit $rc"; exit 1; }
grep -q 'rank 1 made no progress' "$dir/err" || { echo "hang: rank 1 not named"; cat "$dir/err"; exit 1; }
# the stopped rank is ended at once, not after the 5 s SIGTERM grace it cannot take
[ $(($(date +%s) - stopped_at)) -le 6 ] || { echo "hang: the job ended $(($(date +%s) - stopped_at)) s after the stop (timeout 3 s)"; exit 1; }
sleep 0.2; gone "$r0" "$r1"
echo "ok hung rank 1: named after the timeout, nothing left"

[ -n "${FAULT_RANKS:-}" ] || {
	# 3b. the whole job suspended (Ctrl-Z) for longer than the timeout, then
	# resumed (fg): it trains on; its silence was not a hang
	setsid env --default-signal=INT "$TRAINC" $net --cpus 2 $long --set parallel.timeout=2 --run-dir "$dir/z" > "$dir/out" 2> "$dir/err" &
	L=$!
	# its own session: if this part fails, the job must not outlive the script
	trap 'env kill -KILL -- -$L 2>/dev/null; rm -rf "$dir"' EXIT
	wait_ranks $L 2
	env kill -TSTP -- -$L
	sleep 4
	env kill -CONT -- -$L
	sleep 3
	kill -0 $L 2>/dev/null || { echo "suspended and resumed: the job ended"; cat "$dir/err"; exit 1; }
	env kill -INT -- -$L
	set +e; finish_within 10 $L; rc=$?; set -e
	[ $rc -eq 130 ] && ! grep -q 'made no progress' "$dir/err" || { echo "suspended and resumed: exit $rc"; cat "$dir/err"; exit 1; }
	trap 'rm -rf "$dir"' EXIT
	echo "ok a job suspended past the timeout and resumed trains on"
}

[ -z "${FAULT_RANKS:-}" ] || exit 0 # the rest does not depend on the device
# 4. bad rank counts, before anything starts
for n in 0 -1; do
	if "$TRAINC" $net --cpus $n > "$dir/out" 2> "$dir/err"; then echo "--cpus $n accepted"; exit 1; fi
	grep -q 'at least 1' "$dir/err"
done
sed 's/samples=96/samples=3/' $net > "$dir/few.net"
set +e; "$TRAINC" "$dir/few.net" --cpus 4 > "$dir/out" 2> "$dir/err"; rc=$?; set -e
[ $rc -eq 2 ] && grep -q '3 training samples cannot feed 4 ranks' "$dir/err" || { echo "more ranks than samples: exit $rc"; cat "$dir/err"; exit 1; }
! grep -q 'parameters' "$dir/out"
# check sees it too, at the samples= that is short
set +e; "$TRAINC" check "$dir/few.net" --cpus 4 > "$dir/out" 2> "$dir/err"; rc=$?; set -e
[ $rc -eq 2 ] && grep -q 'few.net:[0-9]*:[0-9]*: error: 3 training samples cannot feed 4 ranks' "$dir/err" || { echo "check: more ranks than samples: exit $rc"; cat "$dir/err"; exit 1; }
echo "ok bad rank counts refused before spawning"
