# A job's workers find in their environment what torchrun gives its
# workers (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK), and
# the launcher's own variables, a user's OPENBLAS_NUM_THREADS among them,
# as they are.
. "$(dirname "$0")/preamble.inc"
net=tests/cli/nets/mlp_mse.net

# envof VAR=VALUE...: start a 2-rank job under that environment, write
# rank 1's environment to $tmp/env, then stop the job
envof() {
	rm -rf "$tmp/run" "$tmp/env"
	env "$@" "$TRAINC" $net --cpus 2 --set train.steps=100000000 --set train.log_interval=100000000 --run-dir "$tmp/run" \
		> "$tmp/out" 2>&1 &
	job=$!
	for _ in $(seq 200); do
		for c in $(pgrep -P $job); do
			if tr '\0' '\n' < /proc/$c/environ 2>/dev/null | grep -qx 'RANK=1'; then
				tr '\0' '\n' < /proc/$c/environ > "$tmp/env"
				break 2
			fi
		done
		sleep 0.05
	done
	kill -TERM $job 2>/dev/null
	wait $job
}
has() { grep -qx "$1" "$tmp/env" || fail "$what: rank 1's environment lacks $1"; }

what="a job's worker"
envof TRAINC_UNUSED=1
[ -s "$tmp/env" ] || fail "$what: no worker of rank 1 found: $(cat "$tmp/out")"
for v in RANK=1 LOCAL_RANK=1 WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 GROUP_RANK=0 TRAINC_UNUSED=1; do has $v; done
what="OPENBLAS_NUM_THREADS set by the user"
envof OPENBLAS_NUM_THREADS=2
has OPENBLAS_NUM_THREADS=2
[ "$(grep -c '^OPENBLAS_NUM_THREADS=' "$tmp/env")" = 1 ] || fail "$what: set twice"
[ $failed = 0 ] && echo "ok workers: torchrun's variables, and the launcher's"
exit $failed
