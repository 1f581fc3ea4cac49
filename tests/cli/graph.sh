# `trainc graph` writes valid Graphviz dot for every model: checked by dot
# itself when it is installed, else by structure: one digraph, balanced
# braces and quotes, every statement terminated, every edge between
# declared nodes, and one node per layer of the model.
. "$(dirname "$0")/preamble.inc"

check_dot() {
	f=$1 out=$2
	head -1 "$out" | grep -q '^digraph "[^"]*" {$' || fail "$f: dot does not start with 'digraph \"NAME\" {': $(head -1 "$out")"
	[ "$(tail -1 "$out")" = "}" ] || fail "$f: dot does not end with '}'"
	awk -v f="$f" '
		{
			line = $0
			# strip quoted strings (with \" escapes) before counting braces
			gsub(/\\"/, "", line)
			if (gsub(/"/, "\"", line) % 2) { print "FAIL: " f ":" NR ": unbalanced quotes: " $0; bad = 1 }
			gsub(/"[^"]*"/, "S", line)
			n = gsub(/{/, "{", line); m = gsub(/}/, "}", line)
			depth += n - m
			if (depth < 0) { print "FAIL: " f ":" NR ": \"}\" without \"{\""; bad = 1 }
			if (line !~ /^ *$/ && line !~ /[;{}] *$/) { print "FAIL: " f ":" NR ": statement not ended by ; { or }: " $0; bad = 1 }
			if (match(line, /^ *n[0-9]+ \[/)) { split(line, a, " "); for (i = 1; i <= NF; i++) if (a[i] != "") { decl[a[i]] = 1; break } }
			if (line ~ /->/) { e++; edge[e] = line }
			if (depth == 0) closed++
		}
		END {
			if (depth != 0) { print "FAIL: " f ": braces unbalanced by " depth; bad = 1 }
			if (closed != 1) { print "FAIL: " f ": text after the graph closes"; bad = 1 }
			for (k = 1; k <= e; k++) {
				s = edge[k]; gsub(/[;\[].*/, "", s); split(s, p, /->/)
				for (j = 1; j <= 2; j++) { x = p[j]; gsub(/ /, "", x); if (!(x in decl)) { print "FAIL: " f ": edge to undeclared node " x; bad = 1 } }
			}
			exit bad
		}' "$out" || failed=1
	if command -v dot > /dev/null 2>&1; then
		dot -Tsvg "$out" > /dev/null 2> "$tmp/dot.err" || { fail "$f: dot rejects the graph:"; sed 's/^/    /' "$tmp/dot.err"; }
	fi
}

n=0
for f in models/*.net; do
	"$TRAINC" graph "$f" > "$tmp/g.dot" 2> "$tmp/err"
	rc=$?
	[ "$rc" -eq 0 ] || { fail "trainc graph $f: exit $rc"; sed 's/^/    /' "$tmp/err"; continue; }
	check_dot "$f" "$tmp/g.dot"
	n=$((n + 1))
done
[ "$n" -gt 0 ] || fail "no models graphed"

# the seed CNN: 13 layers (input and 12), 12 edges in a chain, fc1 in its own FSDP cluster
"$TRAINC" graph models/mnist_cnn.net > "$tmp/g.dot"
nodes=$(grep -o '^ *n[0-9]* \[' "$tmp/g.dot" | sed 's/^ *//' | sort | uniq | wc -l)
decls=$(grep -c '^ *n[0-9]* \[' "$tmp/g.dot")
[ "$nodes" -eq 13 ] || fail "mnist_cnn: $nodes nodes, expected 13"
[ "$decls" -eq 13 ] || fail "mnist_cnn: $decls node declarations for 13 nodes; each is declared once"
edges=$(grep -c -- '->' "$tmp/g.dot")
[ "$edges" -eq 12 ] || fail "mnist_cnn: $edges edges, expected 12"
grep -q 'subgraph cluster_unit1 {' "$tmp/g.dot" || fail "mnist_cnn: no cluster for FSDP unit 1"
grep -q 'label="FSDP unit 1: fc1 (1,179,776 params)"' "$tmp/g.dot" || fail "mnist_cnn: unit 1 is not fc1 with 1,179,776 params"

exit $failed
