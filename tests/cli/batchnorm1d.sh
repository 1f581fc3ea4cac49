# batchnorm1d against PyTorch's BatchNorm1d: the MLP linear -> batchnorm1d
# -> relu -> linear (input (C,)) and a model whose batch norm sees (C, L),
# trained 5 steps from the same initial weights (--init; batch norm weight,
# bias and running statistics away from their defaults) on the same
# MNIST-format samples, give PyTorch 1.13's losses, final weights and
# buffers (running_mean, running_var, num_batches_tracked) and evaluation
# (running statistics) within 1e-6.  The reference values and files come
# from tests/golden/batchnorm1d_torch.py, which draws the samples as
# tests/cli/torch_ref.inc does.  Also: print shows PyTorch's repr, and a batch of
# 1 in training is refused as PyTorch refuses it.
. "$(dirname "$0")/preamble.inc"

. tests/cli/torch_ref.inc
mnist_files "$tmp/data" 40 20

# i64 FILE NAME: an int64 scalar of a safetensors file
i64() {
	len=$(od -An -tu8 -N8 "$1" | tr -d ' ')
	off=$(head -c $((8 + len)) "$1" | tail -c +9 | tr -d ' ' | sed -n "s/.*\"$2\":{[^}]*\"data_offsets\":\[\([0-9]*\),.*/\1/p")
	[ -n "$off" ] && od -An -td8 -j $((8 + len + off)) -N8 "$1" | tr -d ' '
}

# check NAME LOSSES TEST_LOSS CORRECT: the run of tests/cli/nets/bn1d_NAME.net
check() {
	name=$1
	torch_run "$name" tests/cli/nets/bn1d_$name.net tests/golden/bn1d_${name}_init.safetensors || return
	losses "$name" "$2" "$3"
	grep '"kind": "eval"' "$tmp/$name/metrics.jsonl" | grep -qF "\"accuracy\": $4}" ||
		fail "$name: test accuracy $(grep '"kind": "eval"' "$tmp/$name/metrics.jsonl"), expected $4"
	weights "$name" tests/golden/bn1d_${name}_final.safetensors
	[ "$(i64 "$tmp/$name.safetensors" bn.num_batches_tracked)" = 12 ] ||
		fail "$name: bn.num_batches_tracked is '$(i64 "$tmp/$name.safetensors" bn.num_batches_tracked)', PyTorch's 12 (7 + 5 steps)"
}

# batchnorm1d_torch.py's output
check mlp "2.31669020652771 2.3927905559539795 2.198050022125244 2.26839017868042 2.4868595600128174" 2.3402862548828125 0.05
check seq "2.4538588523864746 2.4754645824432373 2.3574440479278564 2.2374110221862793 2.400237798690796" 2.329839515686035 0

# PyTorch's repr, defaults and given arguments
prints tests/cli/nets/bn1d_mlp.net '(bn): BatchNorm1d(12, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)'
prints tests/cli/nets/bn1d_seq.net '(bn): BatchNorm1d(7, eps=0.001, momentum=0.2, affine=True, track_running_stats=True)'

# a training batch of 1 over (C,): "Expected more than 1 value per channel
# when training" in PyTorch, refused before any step here
"$TRAINC" tests/cli/nets/bn1d_mlp.net --set train.batch=1 --set train.steps=1 --run-dir "$tmp/one" > "$tmp/out" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "batch 1: exit $rc, expected 2"
grep -qF "trainc: tests/cli/nets/bn1d_mlp.net:9:10: batchnorm1d would normalise over one value per channel: its input is (12,), one value a channel, and a training batch (or pipeline micro-batch) holds 1 sample" "$tmp/out" ||
	{ fail "batch 1 is not refused with the layer's place:"; sed 's/^/    /' "$tmp/out"; }
# over (C, L) a sample has L values a channel: a batch of 1 trains, as in PyTorch
"$TRAINC" tests/cli/nets/bn1d_seq.net --set train.batch=1 --set train.steps=2 --run-dir "$tmp/seq1" > "$tmp/out" 2>&1 ||
	{ fail "batch 1 over (C, L) was refused:"; sed 's/^/    /' "$tmp/out"; }
exit $failed
