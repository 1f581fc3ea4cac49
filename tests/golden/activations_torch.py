"""The PyTorch side of tests/cli/activations.sh, run once with PyTorch 1.13
(CPU) to write the reference values that script holds:

    python3 tests/golden/activations_torch.py tests/golden

It builds the model of tests/cli/nets/activations.net (flatten,
Linear(784, 32), LeakyReLU(0.2), Linear(32, 24), ELU(alpha=0.7),
Linear(24, 24), SiLU, Linear(24, 16), Softplus(beta=2, threshold=0.2),
Linear(16, 10)), writes its initial weights as activations_init.safetensors,
trains 5 steps (batch 8, SGD lr 0.2 momentum 0.5, CrossEntropyLoss, the
dataset's order) on torch_ref.py's samples and writes the result as
activations_final.safetensors.  It prints each step's loss, the test set's
average loss after training, and how many of the inputs to each
activation fell on either side of its kink or threshold over the run (so
the test is known to reach both branches).
"""
import sys

import torch
import torch.nn as nn

from torch_ref import evaluate, samples, save, train


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    torch.set_num_threads(1)
    torch.manual_seed(11)
    m = nn.Sequential()
    m.add_module("flat", nn.Flatten())
    m.add_module("fc1", nn.Linear(784, 32))
    m.add_module("2", nn.LeakyReLU(0.2))
    m.add_module("fc2", nn.Linear(32, 24))
    m.add_module("4", nn.ELU(alpha=0.7))
    m.add_module("fc3", nn.Linear(24, 24))
    m.add_module("6", nn.SiLU())
    m.add_module("fc4", nn.Linear(24, 16))
    m.add_module("8", nn.Softplus(beta=2, threshold=0.2))
    m.add_module("fc5", nn.Linear(16, 10))
    sides = {}

    def count(name, cut):
        def hook(_, inp, __):
            above = (inp[0] > cut).sum().item()
            a, b = sides.get(name, (0, 0))
            sides[name] = (a + above, b + inp[0].numel() - above)
        return hook

    m[2].register_forward_hook(count("leaky_relu", 0))
    m[4].register_forward_hook(count("elu", 0))
    m[8].register_forward_hook(count("softplus", 0.2 / 2))
    xtr, ytr = samples(40, 1)
    xte, yte = samples(20, 2)
    save(f"{out}/activations_init.safetensors", m.state_dict())
    losses = train(m, torch.optim.SGD(m.parameters(), lr=0.2, momentum=0.5), xtr, ytr, 5, 8)
    print(f"losses: {' '.join(repr(v) for v in losses)}")
    loss, correct = evaluate(m, xte, yte)
    print(f"after: test loss {loss!r} accuracy {correct}/20")
    print("inputs above / not above the kink:", sides)
    save(f"{out}/activations_final.safetensors", m.state_dict())


main()
