# Imports nested 16 deep compile, as the documented limit says; the 17th
# nested import is an error at its import line.  A chain d0 -> d1 -> ... ->
# dN where dN holds the model makes N nested imports.
. "$(dirname "$0")/preamble.inc"

# chain N: files $tmp/N/d0.net .. dN.net
chain() {
	mkdir -p "$tmp/$1"
	i=0
	while [ "$i" -lt "$1" ]; do
		printf 'import "d%d.net"\n' $((i + 1)) > "$tmp/$1/d$i.net"
		i=$((i + 1))
	done
	printf 'model M {\n    input(4)\n    relu\n}\n' > "$tmp/$1/d$1.net"
}
chain 16
chain 17
"$TRAINC" check "$tmp/16/d0.net" > "$tmp/out" 2>&1 || { fail "16 nested imports: exit $?"; sed 's/^/    /' "$tmp/out" | tail -5; }
"$TRAINC" check "$tmp/17/d0.net" > "$tmp/out" 2>&1
rc=$?
[ "$rc" -eq 2 ] || fail "17 nested imports: exit $rc, expected 2"
grep -q "^$tmp/17/d16.net:1:8: error: imports nested more than 16 deep$" "$tmp/out" || { fail "17 nested imports:"; sed 's/^/    /' "$tmp/out" | tail -5; }
exit $failed
