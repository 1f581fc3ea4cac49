# groupnorm(groups, channels, eps, affine) against PyTorch 1.13's
# GroupNorm, and instancenorm1d and instancenorm2d against its
# InstanceNorm1d and InstanceNorm2d (tests/cli/nets/instancenorm.net, from
# tests/golden/instancenorm_torch.py, alike): tests/cli/nets/groupnorm.net (groups of 2 channels over a
# convolution's maps, 3 groups with eps=1e-3 and the channels taken from
# the layer before, 2 groups of a linear's features without affine
# parameters), trained 5 steps from the same initial weights (the norms'
# weights and biases drawn away from ones and zeros) on the same
# MNIST-format samples, gives PyTorch's losses, test set loss and final
# weights within 1e-5, on the CPU and, where CUDA was configured, through
# the GPU library on the host stand-in and over the CUDA kernel files;
# print shows PyTorch's reprs.  The reference values and files come from
# tests/golden/groupnorm_torch.py.  Groups that do not divide the
# channels, channels other than the input's, no groups and 0 groups are
# refused, as are an instance norm's track_running_stats=true and an
# instancenorm2d over a (C, L) sample.
. "$(dirname "$0")/preamble.inc"
. tests/cli/torch_ref.inc
mnist_files "$tmp/data" 40 20
net=tests/cli/nets/groupnorm.net

# groupnorm_torch.py's output
torch_check groupnorm $net tests/golden/groupnorm_init.safetensors \
	"3.379563808441162 3.071486473083496 2.365220785140991 2.103896141052246 2.528073787689209" 2.0624263763427733 \
	tests/golden/groupnorm_final.safetensors 1e-5
test_line groupnorm-cpu 2.0624 6

prints $net '(gn1): GroupNorm(4, 8, eps=1e-05, affine=True)  ' '# (8, 12, 12)  16 params' \
	'(gn2): GroupNorm(3, 6, eps=0.001, affine=True)  ' '(gn3): GroupNorm(2, 10, eps=1e-05, affine=False)  '

# instancenorm_torch.py's output: InstanceNorm2d with affine parameters and
# InstanceNorm1d without, both as a group norm of a group per channel
torch_check instancenorm tests/cli/nets/instancenorm.net tests/golden/instancenorm_init.safetensors \
	"2.614842176437378 2.4892935752868652 2.085879325866699 2.062384605407715 1.7182143926620483" 1.800882911682129 \
	tests/golden/instancenorm_final.safetensors 1e-5
prints tests/cli/nets/instancenorm.net \
	'(in2): InstanceNorm2d(6, eps=1e-05, momentum=0.1, affine=True, track_running_stats=False)  ' '# (6, 12, 12)  12 params' \
	'(in1): InstanceNorm1d(4, eps=0.001, momentum=0.1, affine=False, track_running_stats=False)  # (4, 25)'

net=tests/cli/nets/groupnorm.net # prints() set it
refused groups 's/gn1 = groupnorm(4, 8)/gn1 = groupnorm(3, 8)/' \
	"9:11: error: gn1 splits 8 channels into 3 groups, which does not divide them; give a number of groups that divides the channels"
refused channels 's/gn1 = groupnorm(4, 8)/gn1 = groupnorm(4, 6)/' \
	"9:11: error: gn1 expects 6 channels, but the layer before it gives 8"
refused none 's/gn1 = groupnorm(4, 8)/gn1 = groupnorm()/' \
	"9:11: error: groupnorm needs a number of groups: groupnorm(groups) or groupnorm(groups, channels)"
refused zero 's/gn1 = groupnorm(4, 8)/gn1 = groupnorm(0, 8)/' "9:21: error: groups must be at least 1, not 0"
net=tests/cli/nets/instancenorm.net
refused track 's/instancenorm2d(6, affine=true)/instancenorm2d(6, affine=true, track_running_stats=true)/' \
	"9:62: error: trainc's instancenorm2d keeps no running statistics: it normalises each sample by its own, in training and in evaluation (PyTorch's default, track_running_stats=False); leave track_running_stats out, or use batchnorm2d for statistics kept across batches"
refused rank2 's/in1 = instancenorm1d(eps=1e-3)/in1 = instancenorm2d(eps=1e-3)/' \
	"13:11: error: in1 expects (channels, height, width) input per sample, but the layer before it gives (4, 25); instancenorm1d takes (channels, length)"
exit $failed
