# adaptive_avgpool1d against PyTorch 1.13: tests/cli/nets/adaptive_avgpool1d.net
# (a conv1d's 26 positions pooled to 5, in windows that overlap, then to
# 7, more than its input), trained 5 steps from the same initial weights
# on the same MNIST-format samples, gives PyTorch's losses, test set loss
# and final weights within 1e-6, on the CPU and, where CUDA was
# configured, through the GPU library on the host stand-in and over the
# CUDA kernel files; print shows PyTorch's reprs. The reference values and
# files come from tests/golden/adaptive_avgpool1d_torch.py. A sample that
# is not (C, L), or a size that is not one integer, is refused.
. "$(dirname "$0")/preamble.inc"
. tests/cli/torch_ref.inc
mnist_files "$tmp/data" 40 20
net=tests/cli/nets/adaptive_avgpool1d.net

# adaptive_avgpool1d_torch.py's output
torch_check adaptive_avgpool1d $net tests/golden/adaptive_avgpool1d_init.safetensors \
	"2.3063414096832275 2.318070888519287 2.288325548171997 2.285884380340576 2.2923319339752197" 2.4113849639892577 \
	tests/golden/adaptive_avgpool1d_final.safetensors 1e-6

prints $net '(pool): AdaptiveAvgPool1d(output_size=5)  ' '# (6, 5)' \
	'(pool2): AdaptiveAvgPool1d(output_size=(7,))  ' '# (6, 7)'

refused image 's/    relu/    unflatten(2, (2, 13))/' \
	"12:12: error: pool expects (channels, length) input per sample, but the layer before it gives (6, 2, 13)"
refused pair 's/adaptive_avgpool1d(5)/adaptive_avgpool1d((5, 5))/' \
	"12:31: error: adaptive_avgpool1d's output size must be an integer or a tuple of one, as (3,)"
refused zero 's/adaptive_avgpool1d(5)/adaptive_avgpool1d(0)/' "12:31: error: output size must be at least 1, not 0"
exit $failed
