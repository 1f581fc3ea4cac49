# On a terminal the progress bar redraws in place, in one process and with
# several ranks (the launcher passes rank 0's output through as it comes;
# before, a worker's stdout was a pipe and no bar was drawn); piped, the
# seed's plain lines.  Needs script(1) for a terminal; skipped without it.
. "$(dirname "$0")/preamble.inc"
command -v script > /dev/null || { echo "progress_tty: skipped: no script(1)"; exit 0; }
for ranks in 1 2; do
	script -qc "'$TRAINC' tests/cli/nets/mlp_mse.net --cpus $ranks --set train.steps=12 --set train.log_interval=1000 --run-dir '$tmp/t$ranks'" \
		/dev/null > "$tmp/tty$ranks.out" 2>&1 < /dev/null
	tr '\r' '\n' < "$tmp/tty$ranks.out" > "$tmp/tty$ranks.lines"
	grep -q '^Epoch 1 \[#*\.*\] [0-9]*/[0-9]*  loss [0-9.]*  [0-9]* images/s' "$tmp/tty$ranks.lines" ||
		{ fail "$ranks rank(s) on a terminal: no progress bar:"; head -c 600 "$tmp/tty$ranks.out"; }
	grep -q "Train Epoch: 1	Average loss" "$tmp/tty$ranks.lines" || fail "$ranks rank(s) on a terminal: no epoch line"
	"$TRAINC" tests/cli/nets/mlp_mse.net --cpus $ranks --set train.steps=12 --set train.log_interval=1000 --run-dir "$tmp/p$ranks" \
		> "$tmp/pipe$ranks.out" 2>&1
	grep -q "$(printf '\r')" "$tmp/pipe$ranks.out" && fail "$ranks rank(s) piped: carriage returns in the output"
	grep -q "Train Epoch: 1	Average loss" "$tmp/pipe$ranks.out" || fail "$ranks rank(s) piped: no epoch line"
done
exit $failed
