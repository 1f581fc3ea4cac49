# PReLU against PyTorch 1.13: tests/cli/nets/prelu.net (a weight per
# channel after a conv, initialised to 0.1, and one shared weight after a
# linear layer), trained 5 steps from the same initial weights on the same
# MNIST-format samples, gives PyTorch's losses, test set loss and final
# weights (the PReLU weights' own included) within 1e-6, on the CPU and,
# where CUDA was configured, through the GPU library on the host.  The
# reference values and files come from tests/golden/prelu_torch.py.  A
# fresh run starts from the weights init= gives, and a count of weights
# that is neither 1 nor the channels' is refused.
. "$(dirname "$0")/preamble.inc"
. tests/cli/torch_ref.inc
mnist_files "$tmp/data" 40 20
net=tests/cli/nets/prelu.net

# prelu_torch.py's output
torch_check prelu $net tests/golden/prelu_init.safetensors \
	"2.293665885925293 2.298037528991699 2.265315055847168 2.226649761199951 2.251163959503174" 2.321821594238281 \
	tests/golden/prelu_final.safetensors 1e-6

prints $net '(act): PReLU(num_parameters=4)        ' '# (4, 8, 8)  4 params' \
	'(act2): PReLU(num_parameters=1)                                                     # (16,)  1 param'

# without --init, trainc's seed 7 draws PyTorch's manual_seed(7) weights,
# and PReLU's are init= (0.1 per channel, 0.25 shared), drawing nothing
"$TRAINC" $net $data --threads 1 --set train.seed=7 --set train.steps=0 --save "$tmp/fresh.safetensors" \
	> "$tmp/fresh.out" 2>&1 || fail "a run of no steps failed: $(cat "$tmp/fresh.out")"
build/tests/stcmp tests/golden/prelu_init.safetensors "$tmp/fresh.safetensors" 0 > "$tmp/fresh.cmp" 2>&1 ||
	fail "the initial weights are not PyTorch's: $(cat "$tmp/fresh.cmp")"

refused three 's/prelu(4, init=0.1)/prelu(3, init=0.1)/' \
	"7:11: error: act has 3 weights, one per channel, but its input (4, 8, 8) has 4 channels (its first dimension); use num_parameters=4, or 1 for one weight shared by all"
exit $failed
