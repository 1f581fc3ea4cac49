"""The PyTorch side of tests/cli/pool_overhang.sh, run once with PyTorch
1.13 (CPU) to write the reference values that script holds:

    python3 tests/golden/pool_overhang_torch.py tests/golden

It builds the model of tests/cli/nets/pool_overhang.net (ceil_mode pools
whose windows overhang the padded input), writes its initial weights as
pool_overhang_init.safetensors, trains it 5 steps (batch 8, SGD lr 0.5
momentum 0.5, cross entropy, the dataset's order) on torch_ref.py's
samples and writes the result as pool_overhang_final.safetensors.  It
prints the pools' output shapes, each step's loss and the test set's
average loss after training.
"""
import sys

import torch
import torch.nn as nn

from torch_ref import reference


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    torch.set_num_threads(1)
    torch.manual_seed(5)
    m = nn.Sequential()
    m.add_module("conv", nn.Conv2d(1, 3, (6, 4), stride=(4, 3)))
    m.add_module("max", nn.MaxPool2d((9, 3), stride=(3, 2), padding=(1, 1), dilation=(1, 2), ceil_mode=True))
    m.add_module("avg", nn.AvgPool2d((2, 10), stride=(1, 4), padding=(1, 2), ceil_mode=True))
    m.add_module("avg_ex", nn.AvgPool2d(4, stride=2, padding=1, ceil_mode=True, count_include_pad=False))
    m.add_module("flat", nn.Flatten())
    m.add_module("fc", nn.Linear(3, 10))
    reference(m, out, "pool_overhang", 0.5, shapes=("conv", "max", "avg", "avg_ex"))


main()
