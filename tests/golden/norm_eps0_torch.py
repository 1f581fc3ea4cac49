"""The PyTorch side of tests/cli/norm_eps0.sh, run once with PyTorch 1.13
(CPU) to write the reference values that script holds:

    python3 tests/golden/norm_eps0_torch.py tests/golden

It builds the model of tests/cli/nets/norm_eps0.net (batchnorm2d,
batchnorm1d and layernorm with eps=0), gives it initial weights where
conv's channel 2 and fc1's feature 3 are zero (zero weights, and neither
layer has a bias), so the batch norms see a variance of 0 in training and,
by PyTorch's InvStd, give their bias there, with batch norm
parameters and running statistics away from their defaults; writes them
as norm_eps0_init.safetensors, trains 5 steps (batch 8, SGD lr 0.02
momentum 0.5, cross entropy, the dataset's order) on torch_ref.py's
samples and writes the result as norm_eps0_final.safetensors.  It prints
each step's loss and the test set's average loss after training.
"""
import sys

import torch
import torch.nn as nn

from torch_ref import reference


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    torch.set_num_threads(1)
    torch.manual_seed(7)
    m = nn.Sequential()
    m.add_module("conv", nn.Conv2d(1, 3, 7, stride=7, bias=False))
    m.add_module("bn2", nn.BatchNorm2d(3, eps=0))
    m.add_module("relu", nn.ReLU())
    m.add_module("flat", nn.Flatten())
    m.add_module("fc1", nn.Linear(48, 8, bias=False))
    m.add_module("bn1", nn.BatchNorm1d(8, eps=0, momentum=0.2))
    m.add_module("ln", nn.LayerNorm(8, eps=0))
    m.add_module("fc2", nn.Linear(8, 10))
    with torch.no_grad():
        m.conv.weight[2].zero_()
        m.fc1.weight[3].zero_()
        for bn in (m.bn2, m.bn1):
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.5, 0.5)
            bn.running_mean.normal_(0, 0.1)
            bn.running_var.uniform_(0.5, 2.0)
        m.ln.weight.uniform_(0.5, 1.5)
        m.ln.bias.uniform_(-0.2, 0.2)
    reference(m, out, "norm_eps0", 0.02)
    print(f"bn2 channel 2: weight {m.bn2.weight[2].item()!r} running_var {m.bn2.running_var[2].item()!r}")
    print(f"conv channel 2: weight max |w| {m.conv.weight[2].abs().max().item()!r}")


main()
