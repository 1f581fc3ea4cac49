# The 1-D layers, against PyTorch 1.13: tests/cli/nets/conv1d.net
# (unflatten to 28 channels of 28, conv1d with padding "same" even and odd,
# grouped and strided, maxpool1d with ceil_mode and avgpool1d), trained 5
# steps from the same initial weights on the same MNIST-format samples,
# gives PyTorch's losses, test set loss and final weights within 1e-6, on
# the CPU and, where CUDA was configured, through the GPU library on the
# host; print shows PyTorch's reprs.  The reference values and files come
# from tests/golden/conv1d_torch.py.  Bad sizes are refused with PyTorch's
# reasons.
. "$(dirname "$0")/preamble.inc"
. tests/cli/torch_ref.inc
mnist_files "$tmp/data" 40 20
net=tests/cli/nets/conv1d.net

# conv1d_torch.py's output
torch_check conv1d $net tests/golden/conv1d_init.safetensors \
	"2.356332540512085 2.336754560470581 2.2172775268554688 2.201049327850342 2.3437983989715576" 2.3197282791137694 \
	tests/golden/conv1d_final.safetensors 1e-6

# PyTorch's reprs and output sizes
prints $net '(rows): Unflatten(dim=1, unflattened_size=(28, -1))  ' '# (28, 28)' \
	'(conv): Conv1d(28, 8, kernel_size=(5,), stride=(1,), padding=same, dilation=(2,))         # (8, 28)' \
	'(conv2): Conv1d(8, 6, kernel_size=(4,), stride=(1,), padding=same, groups=2, bias=False)  # (6, 28)' \
	'(conv3): Conv1d(6, 6, kernel_size=(3,), stride=(2,), padding=(1,))                        # (6, 14)' \
	'(max): MaxPool1d(kernel_size=3, stride=2, padding=1, dilation=1, ceil_mode=True)          # (6, 8)' \
	'(avg): AvgPool1d(kernel_size=(2,), stride=(2,), padding=(0,))                             # (6, 4)'

refused product 's/(28, -1)/(28, 27)/' \
	'9:12: error: rows: sizes (28, 27) do not multiply up to the size of the dimension it splits, 784 (of (784,))'
refused holes 's/(28, -1)/(-1, -1)/' '9:30: error: only one of unflatten'"'"'s sizes can be -1 (inferred)'
refused batch 's/unflatten(1,/unflatten(0,/' '9:12: error: rows: cannot split dimension 0 of a batch of (784,) samples: dimension 0 is the batch, which stays whole, and a sample'"'"'s dimension is 1 (or -1)'
refused bare 's/(28, -1)/28/' '9:25: error: unflatten'"'"'s sizes must be a tuple of ints, as (28, 28): nn.Unflatten'"'"'s unflattened_size'
refused pair 's/kernel=5/kernel=(5, 5)/' '10:33: error: conv1d'"'"'s kernel must be an integer or a tuple of one, as (3,)'
refused rank 's/^    rows = .*//' '10:12: error: conv expects (channels, length) input per sample, but the layer before it gives (784,)'
exit $failed
