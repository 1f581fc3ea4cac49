# What a job of several ranks cannot start with is said once, by the
# launcher, before any rank starts: --init weights that do not fit the model
# (before, every rank said so, and the launcher again), and a run directory
# that cannot be made (before, rank 0 found it only after the ranks had met,
# and the others added a Gloo "connection reset"); a current directory that
# was deleted is named as such.  The launcher claims the run directory, rank
# 0 trains in it, and one the job left empty is removed.
. "$(dirname "$0")/preamble.inc"
net=$PWD/tests/cli/nets/mlp_mse.net bn=$PWD/tests/cli/nets/bn1d_mlp.net
# once NAME WANT ARGS...: trainc ARGS exits 2 saying WANT once, no rank started
once() {
	name=$1 want=$2
	shift 2
	"$TRAINC" "$@" > "$tmp/out" 2>&1
	rc=$?
	n=$(grep -cF -- "$want" "$tmp/out")
	[ $rc -eq 2 ] && [ "$n" = 1 ] || { fail "$name: exit $rc, '$want' said $n times:"; sed 's/^/    /' "$tmp/out"; }
	grep -q '^\[rank\|Train\|parameters' "$tmp/out" && { fail "$name: ranks started:"; sed 's/^/    /' "$tmp/out"; }
}
"$TRAINC" models/toy.net --save "$tmp/toy.safetensors" --run-dir "$tmp/toy" > /dev/null 2>&1 || fail "the toy run failed"
once "--init of another model's weights" "toy.safetensors: no tensor 'fc1.weight'" $net --cpus 3 --init "$tmp/toy.safetensors" --run-dir "$tmp/i1"
once "--init of a missing file" "nowhere.safetensors: cannot open" $net --cpus 2 --init "$tmp/nowhere.safetensors" --run-dir "$tmp/i2"
: > "$tmp/file"
once "a run directory under a file" "cannot create directory $tmp/file" $net --cpus 2 --run-dir "$tmp/file/run"
mkdir "$tmp/gone"
(cd "$tmp/gone" && rmdir "$tmp/gone" && once "a deleted current directory" "the current directory no longer exists" $net --cpus 2
	exit $failed) || failed=1
[ $failed = 0 ] && echo "ok --init and the run directory are checked once, before the ranks start"

# batches a rank cannot run, found by the launcher for every rank (before,
# each rank refused on its own, and the launcher named one of them again):
# a batch of 1 under a batch norm, an epoch's last batch of 1 (40 samples
# over 3 ranks, batch 13), and no batch at all under drop_last
at="bn1d_mlp.net:9:10: batchnorm1d would normalise over one value per channel"
once "a batch norm's batch of 1" "$at" $bn --cpus 2 --set train.batch=1 --run-dir "$tmp/b1"
once "a batch norm's last batch of 1" "$at: its input is (12,), one value a channel, and the epoch's last" $bn --cpus 3 \
	--set train.batch=13 --run-dir "$tmp/b2"
once "no batch with drop_last" "rank 0's 20 training samples make no batch of 32 with drop_last" $bn --cpus 2 --set train.batch=32 \
	--set train.drop_last=true --run-dir "$tmp/b3"
# the GPU path, over the host stand-in where CUDA was configured
lib=$PWD/build/tests/trainc-fakecuda.so
if [ -f "$lib" ]; then
	(export TRAINC_CUDA_LIB="$lib" TRAINC_FAKE_GPUS=2
		once "a batch norm's batch of 1 on GPUs" "$at" $bn --gpus 2 --set train.batch=1 --run-dir "$tmp/g1"
		exit $failed) || failed=1
fi
[ $failed = 0 ] && echo "ok batches a rank cannot run are said once, before the ranks start"

# a --run-dir another job has claimed but not yet written in is refused
# by the launcher at once, as one that is not empty (before, the job
# started, and its rank 0 stopped it after the ranks had met): here the
# claim is held by flock(1), as a job's launcher holds it; two jobs
# started together into one folder: one runs, the other is refused so
taken="the run directory is not empty; pick another one or remove it"
refused_taken() { # NAME OUT RC
	[ "$3" -eq 2 ] && [ "$(grep -c "^trainc: $tmp/same: $taken\$" "$2")" = 1 ] && ! grep -q '^\[rank\|Train\|parameters' "$2" ||
		{ fail "$1: exit $3:"; sed 's/^/    /' "$2"; }
}
mkdir "$tmp/same"
if command -v flock > /dev/null; then
	flock "$tmp/same" "$TRAINC" "$net" --cpus 2 --run-dir "$tmp/same" > "$tmp/out" 2>&1
	refused_taken "a run directory another job claimed" "$tmp/out" $?
	[ -z "$(ls -A "$tmp/same")" ] || fail "the refused job wrote in the other's run directory: $(ls -A "$tmp/same")"
fi
"$TRAINC" "$net" --cpus 2 --run-dir "$tmp/same" > "$tmp/a.out" 2>&1 &
a=$!
"$TRAINC" "$net" --cpus 2 --run-dir "$tmp/same" > "$tmp/b.out" 2>&1
b=$?
wait $a
a=$?
if [ $a -eq 0 ]; then refused_taken "the second of two jobs into one run directory" "$tmp/b.out" $b; else
	refused_taken "the first of two jobs into one run directory" "$tmp/a.out" $a; [ $b -eq 0 ] || fail "neither job ran: exit $b"; fi
[ -s "$tmp/same/weights.safetensors" ] || fail "no job's weights in the run directory: $(ls -A "$tmp/same")"
# one rank alone claims a named run directory as a launcher does (before,
# it only checked that it was empty, and two runs started together could
# both find it so); one that stops before writing anything leaves no folder
rm -r "$tmp/same"
mkdir "$tmp/same"
if command -v flock > /dev/null; then
	flock "$tmp/same" "$TRAINC" "$net" --run-dir "$tmp/same" > "$tmp/out" 2>&1
	refused_taken "a run directory another run claimed, at one rank" "$tmp/out" $?
fi
TRAINC_CONV_PATH=none "$TRAINC" "$bn" --run-dir "$tmp/new1" > "$tmp/out" 2>&1
[ ! -e "$tmp/new1" ] || fail "a run that stopped before training left its run directory: $(ls -A "$tmp/new1")"
"$TRAINC" "$net" --run-dir "$tmp/new2" > "$tmp/out" 2>&1 && [ -s "$tmp/new2/weights.safetensors" ] ||
	fail "a run into a new named directory: $(cat "$tmp/out")"
# the --save folder may be the run directory too, at one rank and at two
for ranks in 1 2; do
	"$TRAINC" "$net" --cpus $ranks --save "$tmp/both$ranks" --run-dir "$tmp/both$ranks" > "$tmp/out" 2>&1 &&
		[ -s "$tmp/both$ranks/weights.safetensors" ] && [ -s "$tmp/both$ranks/latest" ] ||
		fail "--save and --run-dir one folder at $ranks rank(s): $(cat "$tmp/out")"
done
[ $failed = 0 ] && echo "ok a run directory another job claimed is refused by the launcher, before any rank starts"

# the default run directory, claimed by the launcher, holds the run; one
# the job failed to write anything in is gone again (a convolution path
# that does not exist stops both ranks before they train)
mkdir "$tmp/cwd"
(cd "$tmp/cwd" && "$TRAINC" "$net" --cpus 2 > "$tmp/out" 2>&1) || fail "a run into runs/: $(cat "$tmp/out")"
run=$(sed -n 's/^Run directory: //p' "$tmp/out")
case $run in runs/MLP-*) ;; *) fail "run directory '$run'" ;; esac
[ -s "$tmp/cwd/$run/weights.safetensors" ] && [ -s "$tmp/cwd/$run/model.net" ] || fail "$run lacks the run's files: $(ls "$tmp/cwd/$run")"
rm -r "$tmp/cwd/runs"
(cd "$tmp/cwd" && TRAINC_CONV_PATH=none "$TRAINC" "$bn" --cpus 2 > "$tmp/out" 2>&1)
rc=$?
[ $rc -eq 2 ] || fail "a job refused before training: exit $rc"
[ -z "$(ls "$tmp/cwd/runs")" ] || fail "a job that stopped before training left $(ls "$tmp/cwd/runs")"
[ $failed = 0 ] && echo "ok the launcher's run directory holds the run, and is removed when left empty"
exit $failed
