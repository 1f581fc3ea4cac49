# The plan hash on the first line of `trainc print` is a pure function of
# the plan: the same file gives the same hash every time, comments and
# layout do not change it, a setting that changes the plan does
# (--set train.epochs=1), and so does the world size.
. "$(dirname "$0")/preamble.inc"
# hash ARGS...: the plan hash of `trainc print ARGS...`; runs in $(...), so
# it reports a missing hash on stderr and prints nothing (callers compare)
hash() {
	h=$("$TRAINC" print "$@" 2> "$tmp/err" | sed -n '1s/.*, plan \([0-9a-f]\{16\}\)$/\1/p')
	[ -n "$h" ] || { echo "FAIL: trainc print $* shows no 16-digit plan hash" >&2; sed 's/^/    /' "$tmp/err" >&2; }
	echo "$h"
}

f=models/mnist_cnn.net
h1=$(hash "$f")
h2=$(hash "$f")
[ -n "$h1" ] && [ "$h1" = "$h2" ] || fail "two prints of $f give $h1 and $h2"

e1=$(hash "$f" --set train.epochs=1)
[ -n "$e1" ] && [ "$e1" != "$h1" ] || fail "--set train.epochs=1 leaves the hash at $h1"
[ "$(hash "$f" --set train.epochs=1)" = "$e1" ] || fail "--set train.epochs=1 is not reproducible"
# the file says epochs = 10: setting it again is the same plan
[ "$(hash "$f" --set train.epochs=10)" = "$h1" ] || fail "--set train.epochs=10 (the file's own value) changes the hash"
[ "$(hash "$f" --set train.batch=32)" != "$h1" ] || fail "--set train.batch=32 leaves the hash unchanged"

# comments, blank lines and indentation are not part of the plan
{ echo "# a comment that changes nothing"; echo; sed 's/^    /\t/; s/$/   # note/' "$f"; } > "$tmp/layout.net"
[ "$(hash "$tmp/layout.net")" = "$h1" ] || fail "comments and indentation change the plan hash"
# a different model is a different plan
sed 's/linear(128, 10)/linear(128, 10, bias=false)/' "$f" > "$tmp/nobias.net"
[ "$(hash "$tmp/nobias.net")" != "$h1" ] || fail "fc2 without bias has the same hash"

# the world size is part of the plan every rank checks at rendezvous
g2=$(hash "$f" --gpus 2)
[ -n "$g2" ] && [ "$g2" != "$h1" ] || fail "--gpus 2 gives the same hash as one rank"
[ "$(hash "$f" --gpus 2)" = "$g2" ] || fail "--gpus 2 is not reproducible"

exit $failed
