# adaptive_maxpool2d and adaptive_maxpool1d against PyTorch 1.13:
# tests/cli/nets/adaptive_maxpool.net (windows that overlap over a relu's
# output, whose zeros tie, then more outputs than inputs), trained 5 steps
# from the same initial weights on the same MNIST-format samples, gives
# PyTorch's losses, test set loss and final weights within 1e-6, on the
# CPU and, where CUDA was configured, through the GPU library on the host
# stand-in and over the CUDA kernel files; print shows PyTorch's reprs.
# The reference values and files come from
# tests/golden/adaptive_maxpool_torch.py. PyTorch's return_indices is
# refused, as is a sample of the other rank.
. "$(dirname "$0")/preamble.inc"
. tests/cli/torch_ref.inc
mnist_files "$tmp/data" 40 20
net=tests/cli/nets/adaptive_maxpool.net

# adaptive_maxpool_torch.py's output
torch_check adaptive_maxpool $net tests/golden/adaptive_maxpool_init.safetensors \
	"2.1854140758514404 2.812178611755371 2.2874815464019775 2.3527512550354004 2.332021713256836" 2.3293012619018554 \
	tests/golden/adaptive_maxpool_final.safetensors 1e-6

prints $net '(pool): AdaptiveMaxPool2d(output_size=(5, 3))  ' '# (4, 5, 3)' \
	'(pool2): AdaptiveMaxPool1d(output_size=20)  ' '# (4, 20)'

refused indices 's/adaptive_maxpool1d(20)/adaptive_maxpool1d(20, return_indices=true)/' \
	"12:36: error: adaptive_maxpool1d has no argument 'return_indices'; it takes output"
refused rank 's/    flatten(2)/    relu/' \
	"12:13: error: pool2 expects (channels, length) input per sample, but the layer before it gives (4, 5, 3)"
exit $failed
