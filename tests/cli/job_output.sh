# A job's output reads in order: every rank's own end-of-run lines (its
# memory, its FSDP waits) come after rank 0's epoch, test and summary
# lines, rank by rank, and before the closing "Run directory".  Before,
# each rank wrote them as soon as it was done, so they fell among rank 0's
# lines ("[rank 1] Rank 1: ..." between an epoch's last step and its
# average, or before "Test set") and in any rank order.
. "$(dirname "$0")/preamble.inc"
# in_order FILE: prints what is out of order in FILE, nothing when it reads in order
in_order() {
	awk '/^\[rank [0-9]+\] / { r = substr($2, 1, length($2) - 1) + 0
			if (r < last) print "rank " r " after rank " last ": " $0
			last = r; next }
		/^(Checkpoint|Saved the weights|Run directory)/ { next }
		last > 0 { print "rank 0 after rank " last ": " $0 }' "$1"
}
sed 's/^parallel ddp$/parallel fsdp { shard = "full" }/' tests/cli/nets/mlp_mse.net > "$tmp/fsdp.net"
sed 's/samples=96) }/samples=96); test = synthetic(input=randn(12), target=randn(4), samples=40) }/' "$tmp/fsdp.net" > "$tmp/m.net"
grep -q 'test = ' "$tmp/m.net" && grep -q 'shard' "$tmp/m.net" || fail "the test's model was not made"
for i in 1 2 3; do
	"$TRAINC" "$tmp/m.net" --cpus 4 --set train.steps=12 --save "$tmp/ck$i" --run-dir "$tmp/r$i" > "$tmp/out" 2>&1 || fail "run $i: $(cat "$tmp/out")"
	[ "$(grep -c '^\[rank [123]\] Rank [123]: ' "$tmp/out")" = 3 ] || fail "run $i: not every rank's summary once"
	tail -1 "$tmp/out" | grep -q '^Run directory' || fail "run $i: the last line is not the run directory"
	in_order "$tmp/out" > "$tmp/bad"
	[ -s "$tmp/bad" ] && { fail "run $i: out of order:"; sed 's/^/    /' "$tmp/bad"; }
done
# an evaluation alone: the other rank's line comes after the test result
"$TRAINC" tests/cli/nets/bn_ddp.net --cpus 2 --set train.steps=0 --run-dir "$tmp/e" > "$tmp/out" 2>&1 || fail "evaluation: $(cat "$tmp/out")"
in_order "$tmp/out" > "$tmp/bad"
[ -s "$tmp/bad" ] && { fail "evaluation: out of order:"; sed 's/^/    /' "$tmp/bad"; }
[ $failed = 0 ] && echo "ok every rank's end-of-run lines come after rank 0's, in rank order"

# a line longer than 1,023 bytes comes through whole, from rank 0 and
# prefixed from another rank (before, the launcher cut it in two lines,
# each prefixed): rank 0's run directory, and a line of 3,000 bytes each
# rank writes as it starts (tests/tools/say_line.c); and a refusal of that
# length, said once for the job (a convolution path 940 bytes long: 1,027
# bytes, what a rank's message holds)
long=$(printf "%0940d" 0)
deep=$tmp/$(printf "%0200d/%0200d/%0200d/%0200d/%0200d/%0200d" 1 2 3 4 5 6)
"$TRAINC" tests/cli/nets/mlp_mse.net --cpus 2 --run-dir "$deep" > "$tmp/out" 2>&1 || fail "a long run directory: $(cat "$tmp/out")"
[ "$(tail -1 "$tmp/out")" = "Run directory: $deep" ] || { fail "the long run directory line is not whole:"; tail -2 "$tmp/out" | cut -c1-80; }
said="a rank's own line, $(printf "%03000d" 7)"
SAY_LINE=$said LD_PRELOAD=$(pwd)/build/tests/say_line.so ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" "$TRAINC" tests/cli/nets/mlp_mse.net --cpus 2 --run-dir "$tmp/sl" > "$tmp/out" 2>&1 ||
	fail "a run whose ranks say a long line: $(cut -c1-80 "$tmp/out")"
[ "$(grep -cx "$said" "$tmp/out")" = 1 ] && [ "$(grep -cx "\[rank 1\] $said" "$tmp/out")" = 1 ] ||
	{ fail "a long line of each rank is not whole:"; cut -c1-80 "$tmp/out"; }
TRAINC_CONV_PATH=$long "$TRAINC" tests/cli/nets/mlp_mse.net --cpus 2 --run-dir "$tmp/lp" > "$tmp/out" 2>&1
said="trainc: TRAINC_CONV_PATH=$long: not a convolution path; use auto, im2col, onednn or winograd"
[ ${#said} -gt 1023 ] || fail "the long line is only ${#said} bytes"
[ "$(grep -cx "$said" "$tmp/out")" = 1 ] && [ "$(grep -c "TRAINC_CONV_PATH" "$tmp/out")" = 1 ] ||
	{ fail "a long refusal is not said once, whole:"; cut -c1-80 "$tmp/out"; }
[ $failed = 0 ] && echo "ok long lines come through whole"
exit $failed
