# Exit statuses (docs/language.md, "Exit status"): a run refused before
# training for what the user gave (the .net file, the command line, a file
# or folder the command names) exits 2, at one rank, in a job's launcher
# and in a job's rank alike, and says why once; one refused because the
# system failed (a full disk) exits 1.  Before, every case here but the
# rank count and the --save folder the user may not write in exited 1: a
# batch norm that would see one value per channel, a checkpoint of other
# settings or one whose rank finds it damaged, --init weights in a job, a
# run directory that cannot be made (and, in a job, said three times).
. "$(dirname "$0")/preamble.inc"
toy=models/toy.net bn=tests/cli/nets/bn1d_mlp.net mlp=tests/cli/nets/mlp_mse.net
shim=$PWD/build/tests/fail_mkdir.so
# under AddressSanitizer the shim is preloaded before its runtime, which
# it then must not insist on coming first
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
# status WANT NAME MESSAGE ARGS...: trainc ARGS exits WANT before training, saying MESSAGE once
status() {
	want=$1 name=$2 msg=$3
	shift 3
	"$TRAINC" "$@" > "$tmp/out" 2>&1
	rc=$?
	said=$(grep -cF -- "$msg" "$tmp/out")
	[ $rc -eq "$want" ] && [ "$said" = 1 ] || { fail "$name: exit $rc (expected $want), '$msg' said $said times:"; sed 's/^/    /' "$tmp/out"; }
	grep -q 'Train Epoch\|training samples' "$tmp/out" && { fail "$name: trained:"; sed 's/^/    /' "$tmp/out"; }
}
"$TRAINC" $toy --save "$tmp/ck" --run-dir "$tmp/r0" > /dev/null 2>&1 || fail "the checkpointing run failed"
"$TRAINC" $toy --save "$tmp/toy.safetensors" --run-dir "$tmp/r00" > /dev/null 2>&1 || fail "the weights run failed"
: > "$tmp/file"
cp -R "$tmp/ck" "$tmp/nolatest" && rm "$tmp/nolatest/latest" || fail "the checkpoint was not copied"
for n in 1 2; do
	status 2 "a batch norm's batch of 1 at $n" "bn1d_mlp.net:9:10: batchnorm1d would normalise over one value per channel" \
		$bn --cpus $n --set train.batch=1 --run-dir "$tmp/bn$n"
	status 2 "a checkpoint of other settings at $n" "$tmp/ck/step-00000001 was made by a different model or settings" \
		$toy --cpus $n --resume "$tmp/ck" --set train.batch=10 --run-dir "$tmp/other$n"
	status 2 "--init of another model's weights at $n" "toy.safetensors: no tensor 'fc1.weight'" \
		$mlp --cpus $n --init "$tmp/toy.safetensors" --run-dir "$tmp/init$n"
	status 2 "a run directory under a file at $n" "cannot create directory $tmp/file/run: Not a directory" \
		$toy --cpus $n --run-dir "$tmp/file/run"
	# --resume given what is not a checkpoint says what to give instead
	status 2 "--resume of a weights file at $n" \
		"$tmp/toy.safetensors: is a weights file, not a checkpoint; start from it with --init $tmp/toy.safetensors" \
		$toy --cpus $n --resume "$tmp/toy.safetensors" --run-dir "$tmp/rw$n"
	status 2 "--resume of a run's record at $n" "$tmp/r00: no checkpoint here (no 'latest' file); it is a run's record: start from its weights with --init $tmp/r00/weights.safetensors" \
		$toy --cpus $n --resume "$tmp/r00" --run-dir "$tmp/rr$n"
	status 2 "--resume of checkpoints without 'latest' at $n" "$tmp/nolatest: no checkpoint here (no 'latest' file); $tmp/nolatest/step-00000001 is a whole checkpoint: write step-00000001 into $tmp/nolatest/latest to resume from it" \
		$toy --cpus $n --resume "$tmp/nolatest" --run-dir "$tmp/rl$n"
	# the system's failure where the user's path was fine: a full disk
	(export LD_PRELOAD=$shim FAIL_MKDIR=full-$n FAIL_ERRNO=28
		status 1 "a run directory on a full disk at $n" "cannot create directory $tmp/full-$n: No space left on device" \
			$toy --cpus $n --run-dir "$tmp/full-$n"
		exit $failed) || failed=1
done
# the rank count a checkpoint can go on at (2 before as after)
status 2 "a checkpoint of 1 rank at 2" "$tmp/ck was made by 1 rank, this run has 2" $toy --cpus 2 --resume "$tmp/ck" --run-dir "$tmp/w2"
[ $failed = 0 ] && echo "ok what the user gave is refused with exit 2, at one rank and in a job's launcher"

# a refusal that only the ranks find, said once by the launcher, rank 0's
# words, and the job's status: a checkpoint whose state.json names a batch
# past the end of an epoch (its manifest line made to match)
"$TRAINC" $mlp --cpus 2 --set train.checkpoint_every=2 --save "$tmp/ck2" --run-dir "$tmp/r2" > /dev/null 2>&1 || fail "the job's checkpointing run failed"
st=$tmp/ck2/step-00000006/state.json
sed 's/"batch": 6,/"batch": 13,/' "$st" > "$tmp/state" && mv "$tmp/state" "$st"
crc=$(gzip -c "$st" | tail -c 8 | head -c 4 | od -An -tx4 | tr -d ' ')
sed -i "s/^state.json .*/state.json $(wc -c < "$st") $crc/" "$tmp/ck2/step-00000006/manifest.txt"
status 2 "a checkpoint the ranks find damaged" "says \"batch\": 13, past the end of an epoch (6 batches at this run's 2 ranks)" \
	$mlp --cpus 2 --resume "$tmp/ck2" --run-dir "$tmp/r3"
grep -q 'failed with\|^\[rank' "$tmp/out" && { fail "a rank's refusal was not said once:"; sed 's/^/    /' "$tmp/out"; }
# ranks that disagree: rank 0 alone cannot make the run directory the
# launcher claimed, which the user may not write in (root is never
# refused, so the failure is made: EACCES, then ENOSPC), while rank 1
# fails waiting for it; the job ends as rank 0 refused
(export LD_PRELOAD=$shim FAIL_MKDIR=rank0 FAIL_RANK=0 FAIL_ERRNO=13
	status 2 "rank 0's run directory it may not write in" "trainc: rank 0: $tmp/rank0: cannot create directory $tmp/rank0: Permission denied" \
		$toy --cpus 2 --run-dir "$tmp/rank0"
	export FAIL_ERRNO=28
	status 1 "rank 0's run directory on a full disk" "trainc: rank 0: $tmp/rank0: cannot create directory $tmp/rank0: No space left on device" \
		$toy --cpus 2 --run-dir "$tmp/rank0"
	exit $failed) || failed=1
# a --save folder: one the user may not write in is theirs to change (2, as
# before), a full disk is not
(export LD_PRELOAD=$shim FAIL_MKDIR=ck-no FAIL_ERRNO=13
	status 2 "a --save folder it may not make" "--save $tmp/ck-no: cannot create the folder: Permission denied" \
		$toy --save "$tmp/ck-no" --run-dir "$tmp/s1"
	export FAIL_ERRNO=28
	status 1 "a --save folder on a full disk" "--save $tmp/ck-no: cannot create the folder: No space left on device" \
		$toy --save "$tmp/ck-no" --run-dir "$tmp/s2"
	exit $failed) || failed=1
[ $failed = 0 ] && echo "ok a rank's refusal is the job's, said once; the system's failures exit 1"

# the GPU trainer, over the host stand-in where CUDA was configured
lib=$PWD/build/tests/trainc-fakecuda.so
if [ -f "$lib" ]; then
	(export TRAINC_CUDA_LIB="$lib" TRAINC_FAKE_GPUS=2
		for n in 1 2; do
			status 2 "a batch norm's batch of 1 on $n GPUs" "bn1d_mlp.net:9:10: batchnorm1d would normalise over one value per channel" \
				$bn --gpus $n --set train.batch=1 --run-dir "$tmp/g$n"
			status 2 "--init of another model's weights on $n GPUs" "toy.safetensors: no tensor 'fc1.weight'" \
				$mlp --gpus $n --init "$tmp/toy.safetensors" --run-dir "$tmp/gi$n"
		done
		status 2 "a checkpoint the ranks find damaged, on GPUs" "says \"batch\": 13, past the end of an epoch" \
			$mlp --gpus 2 --resume "$tmp/ck2" --run-dir "$tmp/g3"
		exit $failed) || failed=1
	[ $failed = 0 ] && echo "ok the GPU trainer refuses with exit 2 too"
fi
exit $failed
