# Evaluation runs a short last test chunk at its own size.  With batch
# statistics in evaluation (batchnorm2d(track_running_stats=false)) a chunk's
# loss depends on exactly its samples, so the loss of the chunk of test
# samples 4 and 5 must come out the same however it is reached: from a test
# set of 6 at test_batch 4 (chunks 0-3, 4-5) less one of 4 at test_batch 4,
# and from a test set of 6 at test_batch 2 less one of 4 at test_batch 2.
# Padding the short chunk with copies of a sample, as before, breaks this.
. "$(dirname "$0")/preamble.inc"
# loss N B [ARGS]: the test loss with N test samples at test_batch B
loss() {
	n=$1 b=$2
	shift 2
	"$TRAINC" tests/cli/nets/bn_eval.net --set "data.test=synthetic(input=randn(2, 3, 3), target=classes(3), samples=$n)" \
		--set train.test_batch="$b" --run-dir "$tmp/r$n-$b$*" "$@" > "$tmp/out" 2>&1 || { cat "$tmp/out"; echo "run failed" >&2; exit 1; }
	sed -n 's/.*"kind": "eval".*"loss": \([^,]*\),.*/\1/p' "$tmp/r$n-$b$*/metrics.jsonl" | tail -n 1 # the last epoch's
}
# same X Y WHAT: X and Y, twice a chunk's summed loss, agree
same() {
	awk -v x="$1" -v y="$2" -v what="$3" 'BEGIN { diff = x - y; if (diff < 0) diff = -diff
		printf "%s: %.12f and %.12f\n", what, x / 2, y / 2
		exit !(diff <= 1e-9 * (1 + (x < 0 ? -x : x))) }' || { echo "FAIL: the short last test chunk is not evaluated on its own"; exit 1; }
}
a=$(loss 6 4 --threads 1) c=$(loss 4 4 --threads 1) d=$(loss 6 2 --threads 1) e=$(loss 4 2 --threads 1)
same "$(echo "$a $c" | awk '{ printf "%.17g", 6 * $1 - 4 * $2 }')" "$(echo "$d $e" | awk '{ printf "%.17g", 6 * $1 - 4 * $2 }')" \
	"samples 4-5 as one chunk, reached at test_batch 4 and 2"
# at 2 ranks rank 0 takes samples 0, 2, 4 and rank 1 1, 3, 5: at test_batch 2
# samples 4 and 5 are each a short chunk of one, as a full one at test_batch 1
f=$(loss 6 2 --cpus 2) g=$(loss 4 2 --cpus 2) h=$(loss 6 1 --cpus 2) k=$(loss 4 1 --cpus 2)
same "$(echo "$f $g" | awk '{ printf "%.17g", 6 * $1 - 4 * $2 }')" "$(echo "$h $k" | awk '{ printf "%.17g", 6 * $1 - 4 * $2 }')" \
	"samples 4 and 5 alone at 2 ranks, reached at test_batch 2 and 1"
