"""The PyTorch side of tests/cli/ignore_index.sh, run once with PyTorch
1.13 (CPU) to write the reference values that script holds:

    python3 tests/golden/ignore_index_torch.py tests/golden

Two models, each run as torch_ref.py's reference() runs one (initial
weights, 5 steps of SGD lr 0.1 momentum 0.5 at batch 8 in the dataset's
order, the test set's loss and accuracy, the final weights):
tests/cli/nets/ignore_index.net (flatten, Linear(784, 16), Tanh,
Linear(16, 10)) with CrossEntropyLoss(label_smoothing=0.1,
ignore_index=3), as ignore_index_*.safetensors, and
tests/cli/nets/ignore_index_nll.net (flatten, Linear(784, 16), ReLU,
Linear(16, 10), LogSoftmax) with NLLLoss(ignore_index=7), as
ignore_index_nll_*.safetensors.
"""
import sys

import torch
import torch.nn as nn

from torch_ref import mlp, reference


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    torch.set_num_threads(1)
    torch.manual_seed(13)
    reference(mlp(nn.Tanh()), out, "ignore_index", 0.1, label_smoothing=0.1, ignore_index=3)
    reference(mlp(nn.ReLU(), True), out, "ignore_index_nll", 0.1, ignore_index=7, nll=True)


main()
