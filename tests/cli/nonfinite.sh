# A loss that goes non-finite stops the run with exit 1, naming the step
# and the first layer whose output went bad, in one process and at 2 ranks
# (where the launcher names the failing rank and nothing is left running).
set -e
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
sed 's/optimizer = sgd(lr=0.05, momentum=0.9)/optimizer = sgd(lr=1e30)/' tests/cli/nets/mlp_mse.net > "$dir/nan.net"
set +e
"$TRAINC" "$dir/nan.net" --run-dir "$dir/r1" > "$dir/out" 2> "$dir/err"; rc=$?
set -e
[ $rc -eq 1 ] || { echo "exit $rc, expected 1"; cat "$dir/err"; exit 1; }
grep -q 'the loss is NaN at step 3 (epoch 1); the first non-finite output is fc1' "$dir/err" || { cat "$dir/err"; exit 1; }
set +e
"$TRAINC" "$dir/nan.net" --cpus 2 --run-dir "$dir/r2" > "$dir/out" 2> "$dir/err"; rc=$?
set -e
[ $rc -eq 1 ] || { echo "2 ranks: exit $rc, expected 1"; cat "$dir/err"; exit 1; }
grep -q 'the loss is .* at step' "$dir/err" && grep -q 'failed with exit code 1' "$dir/err" || { cat "$dir/err"; exit 1; }
echo "ok a non-finite loss stops the run and names the step and layer"
