# The documentation's examples are what trainc does: every fenced block of
# every markdown file in the repository (docs/language.md, the READMEs) is
# taken out and checked, so an example cannot go stale unnoticed.
#
# ```net blocks are complete .net files unless the line just above the
# block is one of these HTML comments (invisible where the markdown is
# rendered):
#   (none)          `trainc check` accepts the block and prints nothing (a
#                   model alone is a complete file: no data or train section
#                   is needed). When its first line names a file of the
#                   repository, `# models/NAME.net: ...`, it is a copy of
#                   that file and compiles to the same plan (`trainc print`
#                   prints the same; the plan hash covers every section in
#                   force), its comments aside.
#   <!-- errors --> wrong on purpose: `trainc check` exits 2, and the next
#                   block is the transcript of `trainc check m.net` that
#                   shows its diagnostic.
#   <!-- excerpt: FILE -->  lines cut from FILE, `...` where some are left
#                   out: each line but `...`, without its comment and
#                   indentation, is a line of FILE, in the same order.
# Any other comment above a ```net block, a marker above anything else, a
# block that checks otherwise than its marker says, a fence of another
# language than net, text or none, and a `$ ` command outside a fence fail.
#
# Transcripts are the ```text and plain ``` blocks whose first line starts
# with `$ `: each `$ ` line is a command (`trainc` and `build/trainc` are
# the trainc under test), the lines up to the next one its output, standard
# output and error together, with NO_COLOR set. The transcripts of one
# markdown file run in order in one scratch folder that holds models/ and
# examples/, so a later one sees what an earlier one wrote (a checkpoint);
# m.net there is the last ```net block above, and /tmp/ a folder of its own.
# A line `...` in an output stands for any lines, and what the walk-throughs
# say varies between runs and machines is compared as N: images/s, elapsed
# times, the DDP, FSDP and pipeline shares, peak resident memory, the time
# in a run directory's name, the CRCs of a checkpoint's manifest, and a
# loss past its fourth decimal ("on another CPU the last digits may
# differ"). Other text blocks (the grammar, a synopsis, a diagnostic or a
# log excerpt without its command) are not run.
. "$(dirname "$0")/preamble.inc"
root=$(pwd)

# The transcripts not run, by markdown file and first command, and why. An
# entry that names no transcript fails, so the list stays true.
cat > "$tmp/skips" <<'EOF'
# A GPU: with one, this command trains instead of printing the message.
examples/ddp_tutorial/README.md: build/trainc models/toy.net --gpus 2
# Its last command builds build/tests/stcmp with ninja, which the scratch folder has no build.ninja for.
examples/ddp_tutorial/README.md: build/trainc models/toy.net --save /tmp/toy_1rank.safetensors
# Python with torch (and the safetensors package, a network install).
examples/ddp_tutorial/README.md: /usr/bin/python3 -m venv --system-site-packages /tmp/trainc-venv && /tmp/trainc-venv/bin/pip install -q safetensors
examples/fsdp_mnist/README.md: /usr/bin/python3 - <<'EOF'
examples/fsdp_mnist/README.md: PYTHON=/usr/bin/python3 sh examples/fsdp_mnist/match_pytorch.sh
# Kills a rank of a job in the background, and interrupts one with Ctrl-C: signals and timing.
examples/ddp_tutorial/README.md: build/trainc tests/cli/nets/mlp_mse.net --cpus 2 --set train.steps=100000000 > /tmp/mlp.log 2>&1 &
examples/ddp_tutorial/README.md: build/trainc tests/cli/nets/mlp_mse.net --cpus 2 --set train.steps=100000000
# The Fashion-MNIST dataset and 150 steps of the CNN (10 s and more each);
# the --init one also needs the DDP walk-through's checkpoint.
examples/fsdp_mnist/README.md: build/trainc models/fashion_mnist_cnn.net --cpus 2 --set train.steps=150
examples/fsdp_mnist/README.md: build/trainc models/fashion_mnist_cnn.net --cpus 2 --set train.steps=150 --set "parallel.wrap=size(min_params=100)"
examples/fsdp_mnist/README.md: build/trainc models/fashion_mnist_cnn.net --cpus 2 --set train.steps=150 --save /tmp/mnist_cnn.pt
examples/fsdp_mnist/README.md: build/trainc models/fashion_mnist_cnn.net --cpus 2 --init /tmp/mnist_cnn.pt --set train.steps=50
examples/fsdp_mnist/README.md: build/trainc models/fashion_mnist_cnn.net --init /tmp/toy_ckpt/step-00000003/weights.safetensors
# Graphviz's dot, which prints nothing to compare.
examples/fsdp_mnist/README.md: build/trainc graph models/mnist_cnn.net --cpus 2 | dot -Tsvg > /tmp/mnist_cnn.svg
EOF
grep -v '^#' "$tmp/skips" > "$tmp/skiplist"
: > "$tmp/used"

# extract: awk over one markdown file, writing to the folder x: LINE.net for
# the ```net block that opens at LINE; LINE.K.cmd, LINE.K.line and
# LINE.K.exp for the K-th command of a transcript, its line and its
# output; and on stdout one tab-separated record per item, in order:
# "net LINE MARKER", "run LINE COMMANDS" or "bad LINE MESSAGE".
extract='
function bad(line, msg) { printf "bad\t%d\t%s\n", line, msg }
function known(m) { return m == "errors" || m ~ /^excerpt:/ }
function fenced(   f, i, k) {
	if (lang == "net") {
		f = x "/" start ".net"
		for (i = 1; i <= nl; i++) print body[i] > f
		close(f)
		printf "net\t%d\t%s\n", start, mark
		if (mark == "errors") wanterr = start
		return
	}
	if (body[1] !~ /^\$ /) {
		if (wanterr) bad(wanterr, "<!-- errors --> block without the transcript of `trainc check m.net` after it")
		wanterr = 0
		return
	}
	if (wanterr && body[1] !~ /^\$ trainc check m\.net( |$)/)
		bad(wanterr, "<!-- errors --> block followed by a transcript of another command than `trainc check m.net`")
	wanterr = 0
	k = 0
	for (i = 1; i <= nl; i++) {
		if (body[i] ~ /^\$ /) {
			if (k) close(f ".exp")
			f = x "/" start "." ++k
			print substr(body[i], 3) > (f ".cmd"); close(f ".cmd")
			print bline[i] > (f ".line"); close(f ".line")
			printf "" > (f ".exp")
		} else
			print body[i] > (f ".exp")
	}
	close(f ".exp")
	printf "run\t%d\t%d\n", start, k
}
infence && $0 ~ ("^" ind "```[ \t]*$") { fenced(); infence = 0; next }
infence {
	s = $0
	if (substr(s, 1, length(ind)) == ind) s = substr(s, length(ind) + 1)
	body[++nl] = s; bline[nl] = FNR
	next
}
/^[ \t]*$/ { next }
/^ *```/ {
	match($0, /^ */); ind = substr($0, 1, RLENGTH)
	lang = substr($0, RLENGTH + 4); gsub(/^[ \t]+|[ \t]+$/, "", lang)
	if (lang != "net" && lang != "text" && lang != "")
		bad(FNR, "a ```" lang " block: the doc test knows ```net, ```text and plain ``` blocks")
	if (mk != "" && lang != "net" && known(mk))
		bad(mkline, "<!-- " mk " --> is not just above a ```net block")
	if (mk != "" && lang == "net" && !known(mk))
		bad(mkline, "<!-- " mk " --> above a ```net block: the markers are <!-- errors --> and <!-- excerpt: FILE -->")
	mark = lang == "net" && known(mk) ? mk : ""
	mk = ""; infence = 1; start = FNR; nl = 0
	next
}
{
	if (mk != "" && known(mk)) bad(mkline, "<!-- " mk " --> is not just above a ```net block")
	mk = ""
	if ($0 ~ /^[ \t]*<!--.*-->[ \t]*$/) {
		mk = $0; sub(/^[ \t]*<!--[ \t]*/, "", mk); sub(/[ \t]*-->[ \t]*$/, "", mk)
		mkline = FNR
	} else if ($0 ~ /^    +\$ /)
		bad(FNR, "a command outside a fenced block: fence its transcript with ```text")
}
END {
	if (infence) bad(start, "a block that is not closed")
	if (wanterr) bad(wanterr, "<!-- errors --> block without the transcript of `trainc check m.net` after it")
	if (mk != "" && known(mk)) bad(mkline, "<!-- " mk " --> is not just above a ```net block")
}'

# matches EXPECTED ACTUAL: the lines are the same, a line `...` in EXPECTED
# standing for any number of lines of ACTUAL
match='
function dots(i) { return e[i] ~ /^ *\.\.\. *$/ }
function at(p, i, l,   j) {
	if (p + l - 1 > na) return 0
	for (j = 0; j < l; j++) if (e[i + j] != a[p + j]) return 0
	return 1
}
FILENAME == ARGV[1] { e[++ne] = $0; next }
{ a[++na] = $0 }
END {
	p = 1; free = 0
	for (i = 1; i <= ne; i += l) {
		if (dots(i)) { free = 1; l = 1; continue }
		for (l = 0; i + l <= ne && !dots(i + l); l++) ;
		if (free && i + l > ne) q = na - l + 1
		else if (free) for (q = p; q + l - 1 <= na && !at(q, i, l); q++) ;
		else q = p
		if (q < p || !at(q, i, l)) exit 1
		p = q + l; free = 0
	}
	exit !(free || p == na + 1)
}'

# what varies between runs and machines, compared as N
masks='
s/[0-9][0-9]* images\/s/N images\/s/g
s/elapsed time: [0-9.]* sec/elapsed time: N sec/
/^\(\[rank [0-9]*\] \)\{0,1\}DDP:/s/[0-9.]*%/N%/g
/^\(\[rank [0-9]*\] \)\{0,1\}FSDP rank/s/[0-9.]*%/N%/g
/^Pipeline:/s/[0-9.]*%/N%/g
s/peak resident memory [0-9.]* MiB/peak resident memory N MiB/
s/runs\/\([A-Za-z0-9_]*\)-[0-9]\{8\}-[0-9]\{6\}\(-[0-9][0-9]*\)\{0,1\}/runs\/\1-TIME/g
/[Ll]oss/s/\([0-9]\.[0-9][0-9][0-9][0-9]\)[0-9]*/\1/g
s/^\([a-z_.]* [0-9]*\) [0-9a-f]\{8\}$/\1 CRC/'

# net_block LINE MARKER: check the ```net block that opens at LINE of $md
net_block() {
	src=$x/$1.net where=$md:$1
	case $2 in
	'')
		copy=$(sed -n '1s/^# \(models\/[A-Za-z0-9_]*\.net\):.*/\1/p' "$src")
		if [ -n "$copy" ]; then
			[ -f "$copy" ] || { fail "$where: the example is a copy of $copy, which does not exist"; return; }
			rm -rf "$tmp/copy" && mkdir "$tmp/copy" && cp -R models "$tmp/copy/" && cp "$src" "$tmp/copy/$copy"
			NO_COLOR=1 "$TRAINC" print "$copy" > "$tmp/want" 2>&1 < /dev/null
			(cd "$tmp/copy" && NO_COLOR=1 "$TRAINC" print "$copy") > "$tmp/out" 2>&1 < /dev/null
			cmp -s "$tmp/want" "$tmp/out" || {
				fail "$where: the example is not $copy: trainc print differs:"
				diff "$tmp/want" "$tmp/out" | head -20 | sed 's/^/    /'
			}
			return
		fi
		cp "$src" "$work/m.net"
		(cd "$work" && NO_COLOR=1 "$TRAINC" check m.net) > "$tmp/out" 2>&1 < /dev/null
		rc=$?
		[ "$rc" -eq 0 ] && [ ! -s "$tmp/out" ] || {
			fail "$where: trainc check exits $rc on the example (mark it <!-- errors --> if it is wrong on purpose):"
			sed 's/^/    /' "$tmp/out" | head -20
		}
		;;
	errors)
		cp "$src" "$work/m.net"
		(cd "$work" && NO_COLOR=1 "$TRAINC" check m.net) > "$tmp/out" 2>&1 < /dev/null
		rc=$?
		[ "$rc" -eq 2 ] || fail "$where: the example is marked <!-- errors --> but trainc check exits $rc"
		;;
	excerpt:*)
		file=$(echo "${2#excerpt:}" | sed 's/^ *//;s/ *$//')
		[ -f "$file" ] || { fail "$where: the example is an excerpt of $file, which does not exist"; return; }
		miss=$(awk 'function norm(s) { sub(/#.*/, "", s); gsub(/^[ \t]+|[ \t]+$/, "", s); return s }
			FILENAME == ARGV[1] { if ((l = norm($0)) != "") f[++nf] = l; next }
			{ l = norm($0); if (l == "" || l == "...") next
			  while (++i <= nf && f[i] != l) ;
			  if (i > nf) { print FNR; exit } }' "$file" "$src")
		[ -z "$miss" ] || fail "$md:$(($1 + miss)): the excerpt's line is not in $file (in this order): $(sed -n "${miss}p" "$src")"
		;;
	esac
}

# transcript LINE COMMANDS: run the transcript that opens at LINE of $md
# and compare each command's output with the one shown
transcript() {
	first=$(cat "$x/$1.1.cmd")
	if grep -Fxq -- "$md: $first" "$tmp/skiplist"; then
		echo "$md: $first" >> "$tmp/used"
		return
	fi
	script=$tmp/script
	echo 'cd "$1" || exit 1' > "$script"
	i=1
	while [ "$i" -le "$2" ]; do
		sed "s| /tmp/| $work/tmp/|g" "$x/$1.$i.cmd" > "$tmp/cmd"
		printf '{ %s\n} > "%s" 2>&1\n' "$(cat "$tmp/cmd")" "$x/$1.$i.out" >> "$script"
		i=$((i + 1))
	done
	PATH=$work/bin:$PATH NO_COLOR=1 LC_ALL=C timeout 60 sh "$script" "$work" < /dev/null > /dev/null 2>&1
	[ $? -eq 124 ] && fail "$md:$1: the transcript ran for more than 60 s; stopped"
	i=1
	while [ "$i" -le "$2" ]; do
		sed "s|$work/tmp/|/tmp/|g" "$x/$1.$i.out" 2> /dev/null | sed "$masks" > "$tmp/act"
		sed "$masks" "$x/$1.$i.exp" > "$tmp/exp"
		awk "$match" "$tmp/exp" "$tmp/act" || {
			fail "$md:$(cat "$x/$1.$i.line"): \`$(cat "$x/$1.$i.cmd")\` prints otherwise than shown (- shown, + printed; \`...\` stands for any lines):"
			diff "$tmp/exp" "$tmp/act" | head -30 | sed 's/^/    /'
		}
		i=$((i + 1))
	done
}

tab=$(printf '\t')
x=$tmp/x work=$tmp/work
mds=$(find . -name build -prune -o -name .git -prune -o -name '*.md' -print | sed 's|^\./||' | sort)
[ -n "$mds" ] || fail "no markdown files found"
blocks=0
for md in $mds; do
	rm -rf "$x" "$work" && mkdir -p "$x" "$work/bin" "$work/build/tests" "$work/tmp" || exit 1
	ln -s "$root/models" "$root/examples" "$work/" &&
	ln -s "$TRAINC" "$work/bin/trainc" && ln -s "$TRAINC" "$work/build/trainc" &&
	ln -s "$root/build/tests/stcmp" "$work/build/tests/stcmp" || exit 1
	awk -v x="$x" "$extract" "$md" > "$x/index" || { fail "$md: cannot read its blocks"; continue; }
	while IFS=$tab read -r kind line arg; do
		case $kind in
		bad) fail "$md:$line: $arg" ;;
		net) net_block "$line" "$arg"; blocks=$((blocks + 1)) ;;
		run) transcript "$line" "$arg"; blocks=$((blocks + 1)) ;;
		esac
	done < "$x/index"
done
[ "$blocks" -ge 40 ] || fail "only $blocks examples found in the markdown files"

while IFS= read -r s; do
	grep -Fxq -- "$s" "$tmp/used" || fail "the skipped transcript '$s' is not in the docs; take it off the list"
done < "$tmp/skiplist"

exit $failed
