# ceil_mode pools whose windows overhang the padded input, against PyTorch
# 1.13: tests/cli/nets/pool_overhang.net (a dilated max pool and an average
# pool with kernels larger than their padded inputs, and an average pool
# without the padding in its divisor), trained 5 steps from the same
# initial weights on the same MNIST-format samples, gives PyTorch's output
# sizes, losses, test set loss and final weights (so the pools' gradients)
# within 1e-6, on the CPU and, where CUDA was configured, through the GPU
# library on the host.  The reference values and files come from
# tests/golden/pool_overhang_torch.py.  Beyond stride - 1 of overhang there
# is no window, and the pool is refused as PyTorch refuses it.
. "$(dirname "$0")/preamble.inc"
. tests/cli/torch_ref.inc
mnist_files "$tmp/data" 40 20
net=tests/cli/nets/pool_overhang.net

# pool_overhang_torch.py's output
torch_check pools $net tests/golden/pool_overhang_init.safetensors \
	"2.3418595790863037 2.2169861793518066 2.3242337703704834 2.230894088745117 2.3077826499938965" 2.3695655822753907 \
	tests/golden/pool_overhang_final.safetensors 1e-6

# PyTorch's output sizes and reprs
prints $net '(max): MaxPool2d(kernel_size=(9, 3), stride=(3, 2), padding=(1, 1), dilation=(1, 2), ceil_mode=True)  # (3, 1, 4)' \
	'(avg): AvgPool2d(kernel_size=(2, 10), stride=(1, 4), padding=(1, 2))                      # (3, 2, 1)' \
	'(avg_ex): AvgPool2d(kernel_size=4, stride=2, padding=1)                                   # (3, 1, 1)'

# the average pool's stride 2 wide lets its window overhang by 1, not the 2
# it needs: PyTorch's "Output size is too small"
refused small 's/avgpool2d((2, 10), stride=(1, 4)/avgpool2d((2, 10), stride=(1, 2)/' \
	"11:11: error: avg: kernel 10 is larger than its padded input 8 by 2, more than the stride - 1 = 1 that ceil_mode lets the last window overhang; use a kernel of at most 9 or a stride of at least 3"
exit $failed
