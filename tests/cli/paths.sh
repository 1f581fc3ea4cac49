# Paths with spaces and non-ASCII letters, relative to another directory:
# a job of two ranks trains, checkpoints and resumes with them, and the
# commands messages suggest (mkdir -p DIR, --resume DIR --save DIR,
# --init FILE, --resume DIR after a stop) work when pasted into a shell.
# Before, such paths were written bare: "mkdir -p ck ä" made two folders.
. "$(dirname "$0")/preamble.inc"
root=$PWD
mkdir -p "$tmp/a b/ü dir" "$tmp/a b/wd"
cp tests/cli/nets/mlp_mse.net "$tmp/a b/ü dir/m ö.net"
cd "$tmp/a b/wd" || exit 1
net="../ü dir/m ö.net"
ck="ck é's"
"$TRAINC" "$net" --cpus 2 --set train.checkpoint_every=2 --save "$ck" --run-dir "run 1" > "$tmp/out" 2>&1 ||
	fail "a run with such paths: $(cat "$tmp/out")"
[ -s "run 1/weights.safetensors" ] && [ "$(cat "$ck/latest")" = step-00000006 ] || fail "the run's files: $(ls -R)"
"$TRAINC" "$net" --cpus 2 --set train.steps=8 --resume "$ck" --save "$ck" --run-dir "run 2" > "$tmp/out" 2>&1 &&
	grep -q "Resumed from $ck at step 6" "$tmp/out" || fail "a resume with such paths: $(cat "$tmp/out")"

# suggested COMMAND-PREFIX: the command a message in $tmp/out suggests
suggested() { grep -o -e "$1.*" "$tmp/out" | sed 's/ continues.*//; s/, or save.*//; s/)$//' | head -1; }
# arg COMMAND N: the Nth word of COMMAND as a shell reads it
arg() { (n=$2 && eval "set -- $1" && eval "printf '%s' \"\${$n}\"") 2> /dev/null; }
"$TRAINC" "$net" --save "no such/ck" --run-dir "run 3" > "$tmp/out" 2>&1
cmd=$(suggested "mkdir -p ")
(eval "$cmd") && [ -d "no such" ] && [ ! -e no ] || fail "'$cmd' did not make 'no such'"
"$TRAINC" "$net" --save "$ck" --run-dir "run 4" > "$tmp/out" 2>&1
cmd=$(suggested "--resume ")
[ "$(arg "$cmd" 2)" = "$ck" ] && [ "$(arg "$cmd" 4)" = "$ck" ] && [ -z "$(arg "$cmd" 5)" ] || fail "'$cmd' does not name '$ck'"
"$TRAINC" "$net" --set train.seed=2 --resume "$ck" --run-dir "run 5" > "$tmp/out" 2>&1
cmd=$(suggested "--init ")
[ -s "$(arg "$cmd" 2)" ] || fail "'$cmd' does not name the checkpoint's weights"
"$TRAINC" "$net" --cpus 2 --set train.steps=100000 --set train.checkpoint_every=50 --save "$ck 2" --run-dir "run 6" > /dev/null 2> "$tmp/out" &
pid=$!
for i in $(seq 100); do [ -e "$ck 2/latest" ] && break; sleep 0.1; done
kill -TERM $pid
wait $pid
cmd=$(suggested "--resume ")
[ "$(arg "$cmd" 2)" = "$ck 2" ] || fail "the stop note's '$cmd' does not name '$ck 2'"
cd "$root" || exit 1
[ $failed = 0 ] && echo "ok paths with spaces, quotes and non-ASCII letters train, resume, and are quoted in suggested commands"

# a folder 1,200 bytes deep, as the kernel allows: the run's weights and
# checkpoints are written and read back (before, a path past 1,023 bytes
# trained to the end, then lost the weights: "path too long")
deep=$tmp/$(printf '%0240d/%0240d/%0240d/%0240d/%0240d' 1 2 3 4 5)
mkdir -p "$deep"
"$TRAINC" tests/cli/nets/mlp_mse.net --cpus 2 --set train.checkpoint_every=2 --save "$deep/ck" --run-dir "$deep/r1" > "$tmp/out" 2>&1 ||
	{ fail "a run 1,200 bytes deep: $(cut -c1-300 "$tmp/out")"; }
"$TRAINC" tests/cli/nets/mlp_mse.net --cpus 2 --set train.steps=8 --resume "$deep/ck" --run-dir "$deep/r2" > "$tmp/out" 2>&1 ||
	{ fail "a resume 1,200 bytes deep: $(cut -c1-300 "$tmp/out")"; }
[ -s "$deep/r1/weights.safetensors" ] && [ -s "$deep/r2/weights.safetensors" ] || fail "no weights 1,200 bytes deep"
[ $failed = 0 ] && echo "ok a run directory and checkpoints 1,200 bytes deep are written and resumed"
exit $failed
