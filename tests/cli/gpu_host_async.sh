# gpu_host.sh again with the stand-in's streams asynchronous: work waits in
# a queue per stream until the host waits for it, then runs streams in
# creation order and again in reverse order, each as far as its event
# waits allow, and a plain cudaMemcpy waits for the legacy stream only (as
# CUDA's does beside non-blocking streams).  An event missing between two
# streams (compute and collectives, two GPUs of a rank) then gives wrong
# numbers in one of the two orders; removing the wait of the optimizer on
# the DDP all-reduce fails 3 checks in each.
set -u
cd "$(dirname "$0")/../.." || exit 1
failed=0
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
# the two orders at once: each run is mostly one thread at a time
for order in forward reverse; do
	{ TRAINC_FAKE_ASYNC=$order sh tests/cli/gpu_host.sh > "$tmp/$order.out" 2>&1; echo $? > "$tmp/$order.rc"; } &
done
wait
for order in forward reverse; do
	grep -v '^ok' "$tmp/$order.out" | sed "s/^/[$order] /"
	[ "$(cat "$tmp/$order.rc")" = 0 ] && echo "ok gpu_host.sh with asynchronous streams, $order order: $(grep -c '^ok' "$tmp/$order.out") checks" || failed=1
done
exit $failed
