"""The PyTorch side of tests/cli/groupnorm.sh's instance norms, run once
with PyTorch 1.13 (CPU) to write the reference values that script holds:

    python3 tests/golden/instancenorm_torch.py tests/golden

It builds the model of tests/cli/nets/instancenorm.net (a Conv2d without
bias, an InstanceNorm2d with affine parameters drawn away from ones and
zeros, a ReLU, another Conv2d without bias, each map flattened to a
sequence and an InstanceNorm1d, a Linear)
and runs torch_ref.py's reference(): the initial weights as
instancenorm_init.safetensors, 5 SGD steps (lr 0.02, momentum 0.5), the
losses and test loss printed, the result as
instancenorm_final.safetensors.
"""
import sys

import torch
import torch.nn as nn

from torch_ref import reference


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    torch.set_num_threads(1)
    torch.manual_seed(19)
    m = nn.Sequential()
    m.add_module("conv", nn.Conv2d(1, 6, 5, stride=2, bias=False))
    m.add_module("in2", nn.InstanceNorm2d(6, affine=True))
    m.add_module("2", nn.ReLU())
    m.add_module("conv2", nn.Conv2d(6, 4, 3, stride=2, bias=False))
    m.add_module("4", nn.Flatten(2))
    m.add_module("in1", nn.InstanceNorm1d(4, eps=1e-3))
    m.add_module("6", nn.Flatten())
    m.add_module("fc", nn.Linear(100, 10))
    with torch.no_grad():
        m.in2.weight.uniform_(0.5, 1.5)
        m.in2.bias.uniform_(-0.5, 0.5)
    print(m)
    reference(m, out, "instancenorm", 0.02, shapes=[child for child, _ in m.named_children()])


main()
