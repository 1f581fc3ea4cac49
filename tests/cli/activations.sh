# leaky_relu, elu, silu and softplus, as PyTorch's LeakyReLU, ELU, SiLU and
# Softplus: tests/cli/nets/activations.net (each with numbers other than
# its defaults; softplus's threshold reached by about a quarter of its
# inputs, the kinks of the others by about half) trained 5 steps from given
# initial weights gives PyTorch 1.13's losses, test set loss and final
# weights within 1e-6, on the CPU and, where CUDA was configured, through
# the GPU library on the host and over its kernel files, as the one-kernel
# step and as a kernel per layer.  The reference
# values and files come from tests/golden/activations_torch.py.  `trainc
# print` shows PyTorch's repr, defaults included; each number is part of
# the model, so a checkpoint resumes with it as written another way and
# not with another value.  test_kern checks the kernels against PyTorch's
# values and gradients at the kinks and far out; the errors are
# tests/errors/layer_{softplus_beta_zero,leaky_relu_float32,silu_arguments,pytorch_leakyrelu}.net.
. "$(dirname "$0")/preamble.inc"
. tests/cli/torch_ref.inc
mnist_files "$tmp/data" 40 20
anet=tests/cli/nets/activations.net

# activations_torch.py's output: the step losses and the test set's loss
want="2.4157979488372803 2.2433764934539795 2.3814826011657715 2.4006505012512207 2.274827241897583"
want_test=2.376753234863281
torch_check acts $anet tests/golden/activations_init.safetensors "$want" $want_test tests/golden/activations_final.safetensors 1e-6

# those GPU runs took the one-kernel step (tiny.h); the kernel per layer too
for where in fakecuda kemu; do
	lib=$(pwd)/build/tests/trainc-$where.so
	[ -f "$lib" ] || continue
	grep -q 'one kernel each' "$tmp/acts-$where.out" || fail "acts-$where did not take the one-kernel step: $(grep '^GPU' "$tmp/acts-$where.out")"
	TRAINC_CUDA_TINY=0 TRAINC_CUDA_LIB=$lib torch_run "layers-$where" $anet tests/golden/activations_init.safetensors --gpus 1 || continue
	! grep -q 'one kernel each' "$tmp/layers-$where.out" || fail "layers-$where took the one-kernel step"
	losses "layers-$where" "$want" $want_test
	weights "layers-$where" tests/golden/activations_final.safetensors 1e-6
done

# PyTorch's repr, the defaults as PyTorch 1.13 keeps them
cat > "$tmp/defaults.net" <<'NET'
model Net {
    input(8)
    leaky_relu
    elu
    silu
    softplus
    leaky_relu(0)
    elu(2)
    softplus(3, 1e-3)
}
NET
prints "$tmp/defaults.net" "(0): LeakyReLU(negative_slope=0.01)" "(1): ELU(alpha=1.0)" "(2): SiLU()" \
	"(3): Softplus(beta=1, threshold=20)" "(4): LeakyReLU(negative_slope=0)" "(5): ELU(alpha=2)" \
	"(6): Softplus(beta=3, threshold=0.001)"

# the numbers are the model's: written otherwise they resume, changed they do not
"$TRAINC" $anet --threads 1 --set train.steps=2 --save "$tmp/ck" --run-dir "$tmp/first" > "$tmp/first.out" 2>&1 ||
	{ fail "the run to checkpoint failed:"; sed 's/^/    /' "$tmp/first.out"; }
sed 's/elu(alpha=0.7)/elu(0.70)/; s/softplus(beta=2, threshold=0.2)/softplus(2.0, 0.2)/' $anet > "$tmp/same.net"
sed 's/threshold=0.2)/threshold=0.25)/' $anet > "$tmp/other.net"
grep -q 'elu(0.70)' "$tmp/same.net" && grep -q 'threshold=0.25' "$tmp/other.net" || fail "the nets were not rewritten"
"$TRAINC" "$tmp/same.net" --resume "$tmp/ck" --set train.steps=3 --run-dir "$tmp/r1" > "$tmp/r1.out" 2>&1 &&
	grep -q 'Resumed from .* at step 2' "$tmp/r1.out" || { fail "the same numbers written otherwise do not resume:"; sed 's/^/    /' "$tmp/r1.out"; }
"$TRAINC" "$tmp/other.net" --resume "$tmp/ck" --set train.steps=3 --run-dir "$tmp/r2" > "$tmp/r2.out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q 'was made by a different model or settings' "$tmp/r2.out" ||
	{ fail "a resume with another softplus threshold: exit $rc, expected 2:"; sed 's/^/    /' "$tmp/r2.out"; }
exit $failed
