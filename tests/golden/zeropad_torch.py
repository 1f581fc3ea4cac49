"""The PyTorch side of tests/cli/zeropad.sh, run once with PyTorch 1.13
(CPU) to write the reference values that script holds:

    python3 tests/golden/zeropad_torch.py tests/golden

It builds the model of tests/cli/nets/zeropad.net (ZeroPad2d padding some
sides and cropping others, and Conv2d(padding="same") with even dilated
kernel extents, which pad the right and bottom one more than the left and
top) as an nn.Sequential of unnamed modules, writes its initial weights as
zeropad_init.safetensors, trains it 5 steps (batch 8, SGD lr 0.2 momentum
0.5, cross entropy, the dataset's order) on torch_ref.py's samples and
writes the result as zeropad_final.safetensors.  It prints the modules,
their output shapes, each step's loss and the test set's average loss
after training.
"""
import sys

import torch
import torch.nn as nn

from torch_ref import reference


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    torch.set_num_threads(1)
    torch.manual_seed(7)
    m = nn.Sequential(
        nn.ZeroPad2d((1, 2, -3, 0)),
        nn.Conv2d(1, 4, 4, padding="same"),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(4, 6, (2, 3), padding="same", dilation=(1, 2)),
        nn.ZeroPad2d(-1),
        nn.Tanh(),
        nn.Conv2d(6, 4, (3, 4), padding="same", bias=False),
        nn.AvgPool2d(3),
        nn.Flatten(),
        nn.Linear(48, 10),
    )
    print(m)
    reference(m, out, "zeropad", 0.2)


main()
