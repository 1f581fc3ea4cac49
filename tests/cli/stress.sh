# Hostile and oversized inputs end quickly with exit 0 or 2: never a crash
# (a signal), never a hang (20 s limit; a healthy run takes well under
# one second).  Every exit 2 ends with the "N errors" line.
. "$(dirname "$0")/preamble.inc"

model='model Net {
    input(16)
    fc = linear(16, 16)
}'
# settings FILE EXPR: a valid model whose train section sets batch = EXPR
settings() {
	{ echo "$model"; printf 'train {\n    loss = mse\n    optimizer = sgd(lr=0.1)\n    batch = '; cat; printf '\n}\n'; } > "$1"
}
# rep N TEXT: TEXT N times, without newlines
rep() { awk -v n="$1" -v s="$2" 'BEGIN { for (i = 0; i < n; i++) printf "%s", s }'; }

# survive NAME FILE: check FILE within 20 s with exit 0 or 2
survive() {
	name=$1 file=$2
	start=$(date +%s)
	timeout 20 "$TRAINC" check "$file" > "$tmp/out" 2> "$tmp/err"
	rc=$?
	secs=$(($(date +%s) - start))
	case $rc in
	0 | 2) ;;
	124) fail "$name: still running after 20 s"; return ;;
	*) fail "$name: exit $rc$([ "$rc" -gt 128 ] && echo " (signal $((rc - 128)))")"; tail -c 600 "$tmp/err" | sed 's/^/    /'; return ;;
	esac
	if [ "$rc" -eq 2 ] && ! tail -1 "$tmp/err" | grep -Eq '^[0-9]+ errors?$'; then
		fail "$name: exit 2 without the closing 'N errors' line"
		tail -c 300 "$tmp/err" | sed 's/^/    /'
	fi
	echo "ok $name: exit $rc in ${secs}s, $(wc -c < "$tmp/err") bytes of diagnostics"
}

rep 10000 '(' | settings "$tmp/open_parens.net"
survive "10000 unclosed '('" "$tmp/open_parens.net"

{ rep 10000 '('; printf 1; rep 10000 ')'; } | settings "$tmp/parens.net"
survive "1 in 10000 balanced parentheses" "$tmp/parens.net"

{ rep 10000 '['; } | settings "$tmp/brackets.net"
survive "10000 unclosed '['" "$tmp/brackets.net"

{ echo 'model Net {'; rep 10000 '{'; echo; echo '}'; } > "$tmp/braces.net"
survive "10000 '{' in a model" "$tmp/braces.net"

{ printf 1; rep 199999 '+1'; } | settings "$tmp/sum.net"
survive "a 200000-term sum 1+1+...+1" "$tmp/sum.net"

{ rep 200000 '-'; printf 1; } | settings "$tmp/negations.net"
survive "200000 unary minuses" "$tmp/negations.net"

{ rep 100000 '2*('; printf 1; rep 100000 ')'; } | settings "$tmp/products.net"
survive "100000 nested products" "$tmp/products.net"

awk 'BEGIN { for (i = 0; i < 65536; i++) printf "# %077d\n", i }' > "$tmp/comments.net"
echo "$model" >> "$tmp/comments.net"
[ "$(wc -c < "$tmp/comments.net")" -gt 5000000 ] || fail "the comment file is not 5 MB"
survive "5 MB of comments before the model" "$tmp/comments.net"

{ echo "$model"; awk 'BEGIN { for (i = 0; i < 100000; i++) print "" }'; } > "$tmp/blank.net"
survive "100000 blank lines after the model" "$tmp/blank.net"

{ printf 'model Net {\n    input(16)\n    fc = linear(16, "'; rep 1000000 x; printf '")\n}\n'; } > "$tmp/string.net"
survive "a 1 MB string" "$tmp/string.net"
grep -q 'the output size must be an integer, not a string' "$tmp/err" || fail "a 1 MB string is not read as one string"

{ echo "$model" | sed '$d'; rep 50000 '    relu; '; echo; echo '}'; } > "$tmp/wide.net"
survive "50000 layers on one line" "$tmp/wide.net"

printf 'model Net {\n    input(16)\n    repeat 100000 {\n        linear(16, 16)\n    }\n}\n' > "$tmp/repeat.net"
survive "repeat 100000 { linear(16, 16) }" "$tmp/repeat.net"

printf 'model Net {\n    input(16)\n    repeat 100000 {\n        repeat 100000 {\n            relu\n        }\n    }\n}\n' > "$tmp/repeat2.net"
survive "repeat 100000 { repeat 100000 { relu } }" "$tmp/repeat2.net"

# 100 blocks each using the next, and a chain of 40 imports
awk 'BEGIN { for (i = 0; i < 100; i++) printf "block B%d(d) {\n    b = B%d(d)\n}\n", i, i + 1
	print "block B100(d) {\n    relu\n}\nmodel Net {\n    input(16)\n    b = B0(16)\n}" }' > "$tmp/blocks.net"
survive "blocks nested 100 deep" "$tmp/blocks.net"
mkdir "$tmp/imports"
i=0
while [ $i -lt 40 ]; do
	echo "import \"i$((i + 1)).net\"" > "$tmp/imports/i$i.net"
	i=$((i + 1))
done
echo "$model" > "$tmp/imports/i40.net"
survive "a chain of 40 imports" "$tmp/imports/i0.net"

# over the 16 MiB limit on a source
awk 'BEGIN { for (i = 0; i < 17 * 16384; i++) printf "# %061d\n", i }' > "$tmp/huge.net"
survive "a 17 MiB file" "$tmp/huge.net"
grep -q 'larger than 16 MiB' "$tmp/err" || fail "a 17 MiB file is not refused as too large"

exit $failed
