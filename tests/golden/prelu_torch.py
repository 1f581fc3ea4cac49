"""The PyTorch side of tests/cli/prelu.sh, run once with PyTorch 1.13
(CPU) to write the reference values that script holds:

    python3 tests/golden/prelu_torch.py tests/golden

It builds the model of tests/cli/nets/prelu.net (PReLU with a weight per
channel after a conv, and with one shared weight after a linear layer),
writes its initial weights as prelu_init.safetensors, trains it 5 steps
(batch 8, SGD lr 0.5 momentum 0.5, cross entropy, the dataset's order) on
torch_ref.py's samples and writes the result as prelu_final.safetensors.
It prints the model, each step's loss, the test set's average loss after
training and the PReLU weights then.
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
    m.add_module("conv", nn.Conv2d(1, 4, 5, stride=3))
    m.add_module("act", nn.PReLU(4, init=0.1))
    m.add_module("pool", nn.MaxPool2d(2))
    m.add_module("3", nn.Flatten())
    m.add_module("fc1", nn.Linear(64, 16))
    m.add_module("act2", nn.PReLU())
    m.add_module("fc2", nn.Linear(16, 10))
    print(m)
    reference(m, out, "prelu", 0.5)
    print(f"act.weight {m.act.weight.tolist()} act2.weight {m.act2.weight.tolist()}")


main()
