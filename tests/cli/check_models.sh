# Every model in models/ checks clean: exit 0 and no output at all.  The
# same files with CRLF line ends, and with UTF-8 in comments and strings,
# compile to the same plan.
. "$(dirname "$0")/preamble.inc"

# clean FILE: `trainc check FILE` exits 0 and prints nothing
clean() {
	"$TRAINC" check "$1" > "$tmp/out" 2>&1
	rc=$?
	[ "$rc" -eq 0 ] || fail "trainc check $1: exit $rc"
	[ -s "$tmp/out" ] && { fail "trainc check $1 printed:"; sed 's/^/    /' "$tmp/out" | head -20; }
}
# hash FILE: the plan hash from the first line of `trainc print`
hash() {
	"$TRAINC" print "$1" 2> /dev/null | sed -n '1s/.*plan \([0-9a-f]*\)$/\1/p'
}

n=0
for f in models/*.net; do
	clean "$f"
	n=$((n + 1))
done
[ "$n" -gt 0 ] || fail "no models/*.net found"

# CRLF line ends: no error, and the very same plan
for f in models/mnist_cnn.net models/mlp_blocks.net models/resnet_mini.net; do
	[ -e "$f" ] || continue
	crlf=$tmp/crlf_$(basename "$f")
	sed 's/$/\r/' "$f" > "$crlf"
	grep -q "$(printf '\r')" "$crlf" || fail "could not write a CRLF copy of $f"
	clean "$crlf"
	h=$(hash "$f")
	[ -n "$h" ] || fail "trainc print $f shows no plan hash"
	[ "$(hash "$crlf")" = "$h" ] || fail "$f with CRLF line ends gives another plan hash"
done

# a CRLF file whose body opens on the next line
printf 'model Net\r\n{\r\n    input(4)\r\n    relu\r\n}\r\n' > "$tmp/brace.net"
clean "$tmp/brace.net"
# no newline at the end of the file
printf 'model Net { input(4); relu }' > "$tmp/noeol.net"
clean "$tmp/noeol.net"

# UTF-8 in comments and strings is text like any other
{
	echo "# Modèle d'exemple — ein kleines Netz für MNIST, 手書き数字 ✓"
	sed 's|^\(model Net {\)$|\1  # 模型 ✓|; s|"data/mnist"|"data/mnist-ü"|' models/mnist_cnn.net
} > "$tmp/utf8.net"
grep -q 'mnist-ü' "$tmp/utf8.net" || fail "could not write the UTF-8 test file"
clean "$tmp/utf8.net"
h=$(hash "$tmp/utf8.net")
[ -n "$h" ] || fail "trainc print of a file with UTF-8 comments failed"

# a caret after UTF-8 text sits under the right character: one column per character
printf 'model Net {\n    input(4)\n    fc = linear(4, "zwölf") # ü\n}\n' > "$tmp/caret2.net"
"$TRAINC" check "$tmp/caret2.net" > /dev/null 2> "$tmp/err"
# the string starts at column 20 (characters, not bytes)
grep -q 'caret2.net:3:20: error: ' "$tmp/err" || { fail "wrong column after UTF-8 text:"; sed 's/^/    /' "$tmp/err"; }
grep -qx '                   ^~~~~~~' "$tmp/err" || { fail "the underline of a UTF-8 string is misplaced:"; sed 's/^/    /' "$tmp/err"; }

exit $failed
