"""The PyTorch side of tests/cli/adaptive_maxpool.sh, run once with
PyTorch 1.13 (CPU) to write the reference values that script holds:

    python3 tests/golden/adaptive_maxpool_torch.py tests/golden

It builds the model of tests/cli/nets/adaptive_maxpool.net (a Conv2d,
AdaptiveMaxPool2d to (5, 3), each map flattened to 15 values and
AdaptiveMaxPool1d to 20) and runs torch_ref.py's reference(): the initial
weights as adaptive_maxpool_init.safetensors, 5 SGD steps (lr 0.5,
momentum 0.5), the losses and test loss printed, the result as
adaptive_maxpool_final.safetensors.
"""
import sys

import torch
import torch.nn as nn

from torch_ref import reference


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    torch.set_num_threads(1)
    torch.manual_seed(13)
    m = nn.Sequential()
    m.add_module("conv", nn.Conv2d(1, 4, 6, stride=2))
    m.add_module("1", nn.ReLU())
    m.add_module("pool", nn.AdaptiveMaxPool2d((5, 3)))
    m.add_module("3", nn.Flatten(2))
    m.add_module("pool2", nn.AdaptiveMaxPool1d(20))
    m.add_module("5", nn.Flatten())
    m.add_module("fc", nn.Linear(80, 10))
    print(m)
    reference(m, out, "adaptive_maxpool", 0.5, shapes=[child for child, _ in m.named_children()])


main()
