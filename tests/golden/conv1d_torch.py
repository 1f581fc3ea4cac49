"""The PyTorch side of tests/cli/conv1d.sh, run once with PyTorch 1.13
(CPU) to write the reference values that script holds:

    python3 tests/golden/conv1d_torch.py tests/golden

It builds the model of tests/cli/nets/conv1d.net (each image unflattened
to 28 channels of 28, then Conv1d, MaxPool1d and AvgPool1d), writes its
initial weights as conv1d_init.safetensors, trains it 5 steps (batch 8,
SGD lr 0.5 momentum 0.5, cross entropy, the dataset's order) on
torch_ref.py's samples and writes the result as conv1d_final.safetensors.
It prints the layers' output shapes, each step's loss and the test set's
average loss after training.
"""
import sys

import torch
import torch.nn as nn

from torch_ref import reference


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    torch.set_num_threads(1)
    torch.manual_seed(6)
    m = nn.Sequential()
    m.add_module("0", nn.Flatten())
    m.add_module("rows", nn.Unflatten(1, (28, -1)))
    m.add_module("conv", nn.Conv1d(28, 8, 5, padding="same", dilation=2))
    m.add_module("3", nn.ReLU())
    m.add_module("conv2", nn.Conv1d(8, 6, 4, padding="same", groups=2, bias=False))
    m.add_module("5", nn.Tanh())
    m.add_module("conv3", nn.Conv1d(6, 6, (3,), stride=2, padding=1))
    m.add_module("max", nn.MaxPool1d(3, stride=2, padding=1, ceil_mode=True))
    m.add_module("avg", nn.AvgPool1d(2))
    m.add_module("9", nn.Flatten())
    m.add_module("fc", nn.Linear(24, 10))
    print(m)
    reference(m, out, "conv1d", 0.5, shapes=[child for child, _ in m.named_children()])


main()
