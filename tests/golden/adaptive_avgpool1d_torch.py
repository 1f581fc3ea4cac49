"""The PyTorch side of tests/cli/adaptive_avgpool1d.sh, run once with
PyTorch 1.13 (CPU) to write the reference values that script holds:

    python3 tests/golden/adaptive_avgpool1d_torch.py tests/golden

It builds the model of tests/cli/nets/adaptive_avgpool1d.net (each image
unflattened to 28 channels of 28, a Conv1d, then AdaptiveAvgPool1d to 5
and to (7,)), writes its initial weights as
adaptive_avgpool1d_init.safetensors, trains it 5 steps (batch 8, SGD lr
0.5 momentum 0.5, cross entropy, the dataset's order) on torch_ref.py's
samples and writes the result as adaptive_avgpool1d_final.safetensors.
It prints the layers' output shapes and reprs, each step's loss and the
test set's average loss after training.
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
    m.add_module("0", nn.Flatten())
    m.add_module("rows", nn.Unflatten(1, (28, -1)))
    m.add_module("conv", nn.Conv1d(28, 6, 3))
    m.add_module("3", nn.ReLU())
    m.add_module("pool", nn.AdaptiveAvgPool1d(5))
    m.add_module("pool2", nn.AdaptiveAvgPool1d((7,)))
    m.add_module("6", nn.Flatten())
    m.add_module("fc", nn.Linear(42, 10))
    print(m)
    reference(m, out, "adaptive_avgpool1d", 0.5, shapes=[child for child, _ in m.named_children()])


main()
