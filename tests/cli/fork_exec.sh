# The launcher's workers start with nothing but async-signal-safe calls
# between fork and exec: their environment is built before the fork.  Before,
# each child called setenv (which allocates) after it, and a child forked
# while another thread of the launcher held the allocator's lock waited for
# it forever (seen as a job hung at start-up under the sanitizers'
# allocator).  build/tests/fork_malloc.so, preloaded, stops any child that
# allocates before exec, so the fault shows on every run, not once in many.
# Skipped under AddressSanitizer, whose allocator must come first.
. "$(dirname "$0")/preamble.inc"
lib=$(pwd)/build/tests/fork_malloc.so
[ -f "$lib" ] || { echo "FAIL: $lib is not built"; exit 1; }
if ldd "$TRAINC" 2> /dev/null | grep -q libasan; then
	echo "ok skipped: trainc is built with AddressSanitizer"
	exit 0
fi
net=tests/cli/nets/mlp_mse.net
for ranks in 2 3; do
	LD_PRELOAD=$lib "$TRAINC" $net --cpus $ranks --run-dir "$tmp/r$ranks" > "$tmp/out" 2>&1
	rc=$?
	[ $rc -eq 0 ] && ! grep -q fork_malloc "$tmp/out" || { fail "--cpus $ranks under fork_malloc.so: exit $rc"; sed 's/^/    /' "$tmp/out"; }
done
[ $failed = 0 ] && echo "ok workers start without allocating between fork and exec"
exit $failed
