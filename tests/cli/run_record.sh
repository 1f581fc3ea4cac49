# The run directory: run.json's git state covers the files a .net imports,
# in its directory or another (an edited import made a run look clean), and metrics.jsonl has a line
# per logged step, per epoch (the average loss) and per evaluation, each
# with its step and epoch; model.net writes floats as they were written
# (0.01, not 0.01000000000000000021) and reruns the same plan.
. "$(dirname "$0")/preamble.inc"

repo=$tmp/repo
mkdir "$repo"
printf 'model ToyModel {\n    input(10)\n    net1 = linear(10, 10)\n    relu\n    net2 = linear(10, 5)\n}\n' > "$repo/sub.net"
printf 'import "sub.net"\ndata {\n    train = synthetic(input=randn(10), target=randn(5), samples=40)\n    test = synthetic(input=randn(10), target=randn(5), samples=10)\n}\ntrain { loss = mse; optimizer = sgd(lr=0.01); batch = 10; epochs = 2; log_interval = 2 }\n' > "$repo/main.net"
git -C "$repo" init -q && git -C "$repo" add . &&
	git -C "$repo" -c user.name=t -c user.email=t@example.com commit -qm models || { echo "git failed"; exit 1; }

# dirty RUN WANT: run.json of run RUN says git_dirty WANT
dirty() {
	"$TRAINC" "$repo/main.net" --run-dir "$tmp/$1" > "$tmp/$1.log" 2>&1 || { fail "run $1: $(cat "$tmp/$1.log")"; return; }
	grep -q "\"git_dirty\": $2" "$tmp/$1/run.json" || fail "run $1: git_dirty is not $2: $(grep git_ "$tmp/$1/run.json")"
}
dirty clean false
grep -Eq '"git_commit": "[0-9a-f]{40}"' "$tmp/clean/run.json" || fail "no commit in run.json"
sed -i 's/net2 = linear(10, 5)/net2 = linear(10, 5, bias=false)/' "$repo/sub.net"
dirty import-edited true
git -C "$repo" checkout -q sub.net
printf '# edited\n' >> "$repo/main.net"
dirty main-edited true
git -C "$repo" checkout -q main.net
# an import in another directory of the work tree is asked about too (git
# is asked once per directory, for all the files there)
mkdir "$repo/lib"
git -C "$repo" mv sub.net lib/sub.net
sed -i 's|import "sub.net"|import "lib/sub.net"|' "$repo/main.net"
git -C "$repo" -c user.name=t -c user.email=t@example.com commit -qam lib || { echo "git failed"; exit 1; }
dirty lib-clean false
sed -i 's/net2 = linear(10, 5)/net2 = linear(10, 5, bias=false)/' "$repo/lib/sub.net"
dirty lib-edited true
git -C "$repo" checkout -q lib/sub.net
dirty lib-restored false
"$TRAINC" "$repo/main.net" --set "train.optimizer=sgd(lr=0.01, momentum=0.9)" --run-dir "$tmp/floats" > "$tmp/floats.log" 2>&1 ||
	fail "run floats: $(cat "$tmp/floats.log")"

# metrics.jsonl of the clean run: 4 batches an epoch, logged at 2 and 4
m=$tmp/clean/metrics.jsonl
kinds=$(sed 's/.*"kind": "\([a-z]*\)".*/\1/' "$m" | tr '\n' ' ')
[ "$kinds" = "step step epoch eval step step epoch eval " ] || fail "metrics.jsonl kinds: $kinds"
grep '"kind": "epoch"' "$m" | sed -n '2p' | grep -Eq '"step": 8, "epoch": 2, "loss": [0-9.e-]+, "images_per_s": ' ||
	fail "the second epoch line: $(grep '"kind": "epoch"' "$m" | sed -n 2p)"
grep '"kind": "eval"' "$m" | head -n 1 | grep -Eq '"step": 4, "epoch": 1, "loss": [0-9.e-]+, "accuracy": null' ||
	fail "the first eval line: $(grep '"kind": "eval"' "$m" | head -n 1)"
# the epoch line's loss is the printed average
avg=$(sed -n 's/^Train Epoch: 2	Average loss: \([0-9.]*\).*/\1/p' "$tmp/clean.log")
rec=$(grep '"kind": "epoch"' "$m" | sed -n '2s/.*"loss": \([^,]*\),.*/\1/p')
awk -v a="$avg" -v r="$rec" 'BEGIN { d = a - r; if (d < 0) d = -d; exit !(a != "" && d < 1e-6) }' ||
	fail "epoch 2's average: printed $avg, recorded $rec"
# model.net: floats in their fewest exact digits, the same plan when rerun
grep -q 'optimizer = sgd(lr=0.01, momentum=0.9)$' "$tmp/floats/model.net" ||
	fail "model.net's floats: $(grep optimizer "$tmp/floats/model.net")"
"$TRAINC" "$tmp/floats/model.net" --run-dir "$tmp/rerun" > "$tmp/rerun.log" 2>&1 || fail "model.net rerun: $(cat "$tmp/rerun.log")"
h1=$(grep plan_hash "$tmp/floats/run.json") h2=$(grep plan_hash "$tmp/rerun/run.json")
[ -n "$h1" ] && [ "$h1" = "$h2" ] || fail "model.net reran another plan: $h1 / $h2"
cmp -s "$tmp/floats/weights.safetensors" "$tmp/rerun/weights.safetensors" || fail "model.net reran to other weights"
exit $failed
