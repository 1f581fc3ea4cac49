"""The PyTorch side of tests/cli/class_weight.sh, run once with PyTorch
1.13 (CPU) to write the reference values that script holds:

    python3 tests/golden/class_weight_torch.py tests/golden

Two models, each run as torch_ref.py's reference() runs one (initial
weights, 5 steps of SGD lr 0.1 momentum 0.5 at batch 8 in the dataset's
order, the test set's loss and accuracy, the final weights):
tests/cli/nets/class_weight.net (flatten, Linear(784, 16), Tanh,
Linear(16, 10)) with CrossEntropyLoss(weight=W, label_smoothing=0.1), as
class_weight_*.safetensors, and tests/cli/nets/class_weight_nll.net
(flatten, Linear(784, 16), ReLU, Linear(16, 10), LogSoftmax) with
NLLLoss(weight=W, ignore_index=3), as class_weight_nll_*.safetensors;
W weighs class 8 at 0.
"""
import sys

import torch
import torch.nn as nn

from torch_ref import mlp, reference

W = [0.5, 1.0, 2.0, 1.0, 0.25, 3.0, 1.0, 1.5, 0.0, 2.0]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    torch.set_num_threads(1)
    torch.manual_seed(17)
    reference(mlp(nn.Tanh()), out, "class_weight", 0.1, weight=W, label_smoothing=0.1)
    reference(mlp(nn.ReLU(), True), out, "class_weight_nll", 0.1, weight=W, ignore_index=3, nll=True)


main()
