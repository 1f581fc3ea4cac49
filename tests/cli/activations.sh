# The activations of runtime/act_elem.h, as PyTorch's: tests/cli/nets/
# activations.net (LeakyReLU, ELU, SiLU, Softplus, each at numbers other
# than its defaults) and activations_hard.net (Hardtanh, ReLU6, Hardswish,
# Hardsigmoid, Mish, SELU, from weights scaled so that about a third of
# the inputs fall past each bound and kink) and activations_shrink.net
# (CELU, Softshrink, LogSigmoid, Hardshrink, Softsign, Threshold,
# Tanhshrink, each shrink's inputs on all three sides) trained 5 steps from given
# initial weights give PyTorch 1.13's losses, test set loss and final
# weights within 1e-6, on the CPU and, where CUDA was configured, through
# the GPU library on the host and over its kernel files, as the one-kernel
# step and as a kernel per layer.  The reference values and files come
# from tests/golden/activations_torch.py.  `trainc print` shows PyTorch's
# repr, defaults included; each number is part of the model, so a
# checkpoint resumes with it as written another way and not with another
# value.  test_kern checks the kernels against PyTorch's values and
# gradients at the kinks and far out, test_exec a network's gradients;
# the errors are tests/errors/layer_{softplus_beta_zero,leaky_relu_float32,
# silu_arguments,pytorch_leakyrelu,hardtanh_bounds}.net.
. "$(dirname "$0")/preamble.inc"
. tests/cli/torch_ref.inc
mnist_files "$tmp/data" 40 20

# check NAME LOSSES TEST_LOSS: tests/cli/nets/NAME.net against
# activations_torch.py's output for it (its step losses, its test loss)
check() {
	anet=tests/cli/nets/$1.net init=tests/golden/$1_init.safetensors final=tests/golden/$1_final.safetensors
	torch_check "$1" $anet $init "$2" "$3" $final 1e-6
	# those GPU runs took the one-kernel step (tiny.h); the kernel per layer too
	for where in fakecuda kemu; do
		lib=$(pwd)/build/tests/trainc-$where.so
		[ -f "$lib" ] || continue
		grep -q 'one kernel each' "$tmp/$1-$where.out" || fail "$1-$where did not take the one-kernel step: $(grep '^GPU' "$tmp/$1-$where.out")"
		TRAINC_CUDA_TINY=0 TRAINC_CUDA_LIB=$lib torch_run "$1-layers-$where" $anet $init --gpus 1 || continue
		! grep -q 'one kernel each' "$tmp/$1-layers-$where.out" || fail "$1-layers-$where took the one-kernel step"
		losses "$1-layers-$where" "$2" "$3"
		weights "$1-layers-$where" $final 1e-6
	done
}
check activations "2.4157979488372803 2.2433764934539795 2.3814826011657715 2.4006505012512207 2.274827241897583" 2.376753234863281
check activations_hard "2.2850804328918457 2.407144069671631 2.3658907413482666 2.353055238723755 2.215695858001709" 2.301672172546387
check activations_shrink "2.298691749572754 2.3504698276519775 2.2461037635803223 2.3181076049804688 2.333547592163086" 2.3352331161499023

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
    hardtanh
    hardtanh(-2, 2)
    relu6
    hardsigmoid
    hardswish
    mish
    selu
    celu
    celu(alpha=2)
    logsigmoid
    softsign
    tanhshrink
    softshrink
    hardshrink(1)
    threshold(threshold=0, value=1.5)
}
NET
prints "$tmp/defaults.net" "(0): LeakyReLU(negative_slope=0.01)" "(1): ELU(alpha=1.0)" "(2): SiLU()" \
	"(3): Softplus(beta=1, threshold=20)" "(4): LeakyReLU(negative_slope=0)" "(5): ELU(alpha=2)" \
	"(6): Softplus(beta=3, threshold=0.001)" "(7): Hardtanh(min_val=-1.0, max_val=1.0)" "(8): Hardtanh(min_val=-2, max_val=2)" \
	"(9): ReLU6()" "(10): Hardsigmoid()" "(11): Hardswish()" "(12): Mish()" "(13): SELU()" \
	"(14): CELU(alpha=1.0)" "(15): CELU(alpha=2)" "(16): LogSigmoid()" "(17): Softsign()" "(18): Tanhshrink()" \
	"(19): Softshrink(0.5)" "(20): Hardshrink(1)" "(21): Threshold(threshold=0, value=1.5)"

# the numbers are the model's: written otherwise they resume, changed they do not
anet=tests/cli/nets/activations.net
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
