"""The PyTorch side of tests/cli/batchnorm1d.sh, run once with PyTorch 1.13
(CPU) to write the reference values that script holds:

    python3 tests/golden/batchnorm1d_torch.py tests/golden

It draws the same MNIST-format samples the script writes (torch_ref.py's
samples(), which tests/cli/torch_ref.inc draws with awk), builds the
two models of tests/cli/nets/bn1d_mlp.net and bn1d_seq.net, gives them
initial weights with batch norm parameters and running statistics away
from their defaults, writes those as bn1d_*_init.safetensors, trains one
epoch of 5 steps (batch 8, SGD lr 0.05 momentum 0.5, cross entropy, the
dataset's order) and writes the result as bn1d_*_final.safetensors.  It
prints each step's loss and the test set's average loss and accuracy in
evaluation mode, before training and after.
"""
import sys

import torch
import torch.nn as nn

from torch_ref import evaluate, samples, save, train


def models():
    torch.manual_seed(3)
    mlp = nn.Sequential()
    mlp.add_module("pool", nn.AvgPool2d(7))
    mlp.add_module("flat", nn.Flatten())
    mlp.add_module("fc1", nn.Linear(16, 12, bias=False))
    mlp.add_module("bn", nn.BatchNorm1d(12))
    mlp.add_module("relu", nn.ReLU())
    mlp.add_module("fc2", nn.Linear(12, 10))
    seq = nn.Sequential()
    seq.add_module("pool", nn.AvgPool2d(4))
    seq.add_module("flat", nn.Flatten(1, 2))
    seq.add_module("fc1", nn.Linear(7, 5))
    seq.add_module("bn", nn.BatchNorm1d(7, eps=0.001, momentum=0.2))
    seq.add_module("relu", nn.ReLU())
    seq.add_module("flat2", nn.Flatten())
    seq.add_module("fc2", nn.Linear(35, 10))
    for m in (mlp, seq):
        bn = m.bn
        with torch.no_grad():
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.2, 0.2)
            bn.running_mean.normal_(0, 0.1)
            bn.running_var.uniform_(0.5, 2.0)
            bn.num_batches_tracked.fill_(7)
    return {"mlp": mlp, "seq": seq}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    torch.set_num_threads(1)
    xtr, ytr = samples(40, 1)
    xte, yte = samples(20, 2)
    for name, m in models().items():
        sd = {k: v for k, v in m.state_dict().items()}
        save(f"{out}/bn1d_{name}_init.safetensors", sd)
        loss, correct = evaluate(m, xte, yte)
        print(f"{name} before: test loss {loss!r} accuracy {correct}/20")
        losses = train(m, torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.5), xtr, ytr, 5, 8)
        print(f"{name} losses: {' '.join(repr(v) for v in losses)}")
        loss, correct = evaluate(m, xte, yte)
        print(f"{name} after: test loss {loss!r} accuracy {correct}/20")
        print(f"{name} num_batches_tracked {m.bn.num_batches_tracked.item()}")
        save(f"{out}/bn1d_{name}_final.safetensors", m.state_dict())


main()
