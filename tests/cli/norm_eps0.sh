# Batch and layer norms with eps=0, as PyTorch 1.13 takes them.
# tests/cli/nets/norm_eps0.net, trained 5 steps from initial weights that
# make a conv channel and a linear feature zero (so batchnorm2d and
# batchnorm1d see a variance of 0 and, by PyTorch's InvStd, give their
# bias there, with no gradient to their input or weight), gives PyTorch's
# losses, test set loss and final weights and buffers within 1e-6, on the
# CPU and, where CUDA was configured, through the GPU library on the host.
# The reference values and files come from tests/golden/norm_eps0_torch.py.
# Where eps=0 gives NaN (a layer or group norm row whose values are all equal; in
# evaluation, a running_var of 0) a training step stops the run saying
# why, and an evaluation prints nan with a warning.  print shows eps (and
# momentum) as written, as PyTorch's repr does; a negative eps is refused
# (tests/errors/layer_layernorm_eps.net).  Constant values that float sums
# do not hold exactly (0.1) are test_kern's and test_cuda_body's.
. "$(dirname "$0")/preamble.inc"
. tests/cli/torch_ref.inc
mnist_files "$tmp/data" 40 20
net=tests/cli/nets/norm_eps0.net

# norm_eps0_torch.py's output
torch_check norms $net tests/golden/norm_eps0_init.safetensors \
	"2.3256661891937256 2.1237735748291016 2.39961576461792 2.328871726989746 2.1414382457733154" 2.7105228424072267 \
	tests/golden/norm_eps0_final.safetensors 1e-6

# PyTorch's repr keeps eps as written: eps=0, or eps=0.0
prints $net '(bn2): BatchNorm2d(3, eps=0, momentum=0.1, affine=True, track_running_stats=True)' \
	'(bn1): BatchNorm1d(8, eps=0, momentum=0.2, affine=True, track_running_stats=True)' \
	'(ln): LayerNorm((8,), eps=0, elementwise_affine=True)'
sed 's/batchnorm2d(eps=0)/batchnorm2d(eps=0.0)/; s/momentum=0.2/momentum=1/' $net > "$tmp/float.net"
prints "$tmp/float.net" '(bn2): BatchNorm2d(3, eps=0.0, momentum=0.1, affine=True, track_running_stats=True)' \
	'(bn1): BatchNorm1d(8, eps=0, momentum=1, affine=True, track_running_stats=True)'

# a layer norm over one feature: every row is constant, NaN in PyTorch;
# the first step stops the run (exit 1), naming the layer and why
printf 'model M {\n    input(1, 28, 28)\n    avgpool2d(28)\n    flatten\n    ln = layernorm(1, eps=0)\n    linear(10)\n}\n' > "$tmp/ln.net"
printf 'train { loss = cross_entropy; optimizer = sgd(lr=0.1); batch = 8; steps = 2 }\n' >> "$tmp/ln.net"
# shellcheck disable=SC2086 # $data is two --set arguments
"$TRAINC" "$tmp/ln.net" $data --run-dir "$tmp/ln" > "$tmp/out" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "a NaN from layernorm(eps=0): exit $rc, expected 1"
grep -qF "trainc: the loss is NaN at step 1 (epoch 1); the first non-finite output is ln's" "$tmp/out" &&
	grep -qF "trainc: ln has eps=0, so a row whose values are all equal normalises to NaN, as in PyTorch; give it an eps above 0" "$tmp/out" ||
	{ fail "a NaN from layernorm(eps=0) is not reported as such:"; sed 's/^/    /' "$tmp/out"; }

# a group norm of one channel of one value per group: NaN alike
printf 'model M {\n    input(1, 28, 28)\n    avgpool2d(28)\n    flatten\n    gn = groupnorm(1, eps=0)\n    linear(10)\n}\n' > "$tmp/gn.net"
printf 'train { loss = cross_entropy; optimizer = sgd(lr=0.1); batch = 8; steps = 2 }\n' >> "$tmp/gn.net"
# shellcheck disable=SC2086 # $data is two --set arguments
"$TRAINC" "$tmp/gn.net" $data --run-dir "$tmp/gn" > "$tmp/out" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -qF "trainc: the loss is NaN at step 1 (epoch 1); the first non-finite output is gn's" "$tmp/out" &&
	grep -qF "trainc: gn has eps=0, so a group of channels whose values are all equal normalises to NaN, as in PyTorch; give it an eps above 0" "$tmp/out" ||
	{ fail "a NaN from groupnorm(eps=0): exit $rc:"; sed 's/^/    /' "$tmp/out"; }

# dropout(p=1) zeroes a batch norm's channel in training: it gives its bias
# and, at momentum 1, a running_var of 0, so evaluation gives NaN (PyTorch
# too); the run trains on, prints nan and warns, once for its three
# evaluations (before, at each of them)
printf 'model M {\n    input(1, 28, 28)\n    avgpool2d(28)\n    flatten\n    dropout(1)\n    bn = batchnorm1d(eps=0, momentum=1)\n    linear(10)\n}\n' > "$tmp/bn.net"
printf 'train { loss = cross_entropy; optimizer = sgd(lr=0.1); batch = 8; epochs = 3 }\n' >> "$tmp/bn.net"
# shellcheck disable=SC2086
"$TRAINC" "$tmp/bn.net" $data --run-dir "$tmp/bn" > "$tmp/out" 2> "$tmp/err"
rc=$?
[ $rc -eq 0 ] || { fail "eval NaN from batchnorm1d(eps=0): exit $rc, expected 0"; sed 's/^/    /' "$tmp/err"; }
grep -q '"kind": "step".*"loss": [0-9]' "$tmp/bn/metrics.jsonl" || fail "the training step's loss is not finite: $(cat "$tmp/bn/metrics.jsonl")"
[ "$(grep -cF 'Test set: Average loss: nan, Accuracy:' "$tmp/out")" = 3 ] || { fail "the test lines do not show nan:"; sed 's/^/    /' "$tmp/out"; }
[ "$(cat "$tmp/err")" = "trainc: warning: the test set's loss is NaN; bn has eps=0, so in evaluation a channel whose running_var is 0 normalises to NaN, as in PyTorch; give it an eps above 0" ] ||
	{ fail "not one warning for the NaN test losses:"; sed 's/^/    /' "$tmp/err"; }
exit $failed
