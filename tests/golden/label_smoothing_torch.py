"""The PyTorch side of tests/cli/label_smoothing.sh, run once with PyTorch
1.13 (CPU) to write the reference values that script holds:

    python3 tests/golden/label_smoothing_torch.py tests/golden

It builds the model of tests/cli/nets/label_smoothing.net (flatten,
Linear(784, 16), Tanh, Linear(16, 10)), writes its initial weights as
label_smoothing_init.safetensors, trains 5 steps (batch 8, SGD lr 0.1
momentum 0.5, CrossEntropyLoss(label_smoothing=0.2), the dataset's order)
on torch_ref.py's samples and writes the result as
label_smoothing_final.safetensors.  It prints each step's loss and the
test set's average loss (with the same smoothing) after training.
"""
import sys

import torch
import torch.nn as nn

from torch_ref import reference


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    torch.set_num_threads(1)
    torch.manual_seed(11)
    m = nn.Sequential()
    m.add_module("flat", nn.Flatten())
    m.add_module("fc1", nn.Linear(784, 16))
    m.add_module("tanh", nn.Tanh())
    m.add_module("fc2", nn.Linear(16, 10))
    reference(m, out, "label_smoothing", 0.1, label_smoothing=0.2)


main()
