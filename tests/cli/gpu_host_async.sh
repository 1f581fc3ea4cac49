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
for order in forward reverse; do
	out=$(TRAINC_FAKE_ASYNC=$order sh tests/cli/gpu_host.sh 2>&1)
	rc=$?
	echo "$out" | grep -v '^ok' | sed "s/^/[$order] /"
	[ $rc = 0 ] && echo "ok gpu_host.sh with asynchronous streams, $order order: $(echo "$out" | grep -c '^ok') checks" || failed=1
done
exit $failed
