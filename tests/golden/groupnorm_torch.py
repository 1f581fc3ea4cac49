"""The PyTorch side of tests/cli/groupnorm.sh, run once with PyTorch 1.13
(CPU) to write the reference values that script holds:

    python3 tests/golden/groupnorm_torch.py tests/golden

It builds the model of tests/cli/nets/groupnorm.net (two Conv2d, each
followed by a GroupNorm and a ReLU, a Linear and a GroupNorm without
affine parameters), draws the group norms' weights and biases away from
their ones and zeros, and runs torch_ref.py's reference(): the initial
weights as groupnorm_init.safetensors, 5 SGD steps (lr 0.1, momentum
0.5), the losses and test loss printed, the result as
groupnorm_final.safetensors.
"""
import sys

import torch
import torch.nn as nn

from torch_ref import reference


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    torch.set_num_threads(1)
    torch.manual_seed(17)
    m = nn.Sequential()
    m.add_module("conv1", nn.Conv2d(1, 8, 5, stride=2))
    m.add_module("gn1", nn.GroupNorm(4, 8))
    m.add_module("2", nn.ReLU())
    m.add_module("conv2", nn.Conv2d(8, 6, 3, stride=2))
    m.add_module("gn2", nn.GroupNorm(3, 6, eps=1e-3))
    m.add_module("5", nn.ReLU())
    m.add_module("6", nn.Flatten())
    m.add_module("fc", nn.Linear(150, 10))
    m.add_module("gn3", nn.GroupNorm(2, 10, affine=False))
    with torch.no_grad():
        for gn in (m.gn1, m.gn2):
            gn.weight.uniform_(0.5, 1.5)
            gn.bias.uniform_(-0.5, 0.5)
    print(m)
    reference(m, out, "groupnorm", 0.1, shapes=[child for child, _ in m.named_children()])


main()
