"""The PyTorch side of tests/cli/activations.sh, run once with PyTorch 1.13
(CPU) to write the reference values that script holds:

    python3 tests/golden/activations_torch.py tests/golden

It builds the models of tests/cli/nets/activations.net (flatten,
Linear(784, 32), LeakyReLU(0.2), Linear(32, 24), ELU(alpha=0.7),
Linear(24, 24), SiLU, Linear(24, 16), Softplus(beta=2, threshold=0.2),
Linear(16, 10)) and tests/cli/nets/activations_hard.net (flatten,
Linear(784, 32), Hardtanh(-0.5, 0.3), Linear(32, 24), ReLU6,
Linear(24, 24), Hardswish, Linear(24, 24), Hardsigmoid, Linear(24, 16),
Mish, Linear(16, 16), SELU, Linear(16, 10); the weights before ReLU6
scaled by 40 and before Hardswish and Hardsigmoid by 3 so that their
upper kinks are reached) and tests/cli/nets/activations_shrink.net
(flatten, Linear(784, 32), CELU(0.5), Linear(32, 24), Softshrink(0.3),
Linear(24, 24), LogSigmoid, Linear(24, 24), Hardshrink(0.2),
Linear(24, 16), Softsign, Linear(16, 16), Threshold(0.1, -0.5),
Linear(16, 16), Tanhshrink, Linear(16, 10); the weights before the
shrinks and Tanhshrink scaled by 2 or 3), writes each one's initial weights as
NAME_init.safetensors, trains 5 steps (batch 8, SGD with momentum 0.5,
CrossEntropyLoss, the dataset's order) on torch_ref.py's samples and
writes the result as NAME_final.safetensors.  It prints each step's loss,
the test set's average loss after training, and how many of the inputs
to each activation fell below, between and above its kinks over the run
(so the test is known to reach every branch).
"""
import sys

import torch
import torch.nn as nn

from torch_ref import evaluate, samples, save, train


def build(layers):
    m = nn.Sequential()
    m.add_module("flat", nn.Flatten())
    for name, layer in layers:
        m.add_module(name, layer)
    return m


def run(out, name, m, lr, kinks, scale):
    torch.manual_seed(11)
    for layer in m:
        if hasattr(layer, "reset_parameters"):
            layer.reset_parameters()
    with torch.no_grad():
        for layer, s in scale.items():
            getattr(m, layer).weight.mul_(s)
    sides = {}

    def count(key, lo, hi):
        def hook(_, inp, __):
            v = inp[0]
            n = [(v < lo).sum().item(), ((v >= lo) & (v <= hi)).sum().item(), (v > hi).sum().item()]
            sides[key] = [a + b for a, b in zip(sides.get(key, [0, 0, 0]), n)]
        return hook

    for key, (lo, hi) in kinks.items():
        m._modules[key].register_forward_hook(count(f"{m._modules[key]}", lo, hi))
    xtr, ytr = samples(40, 1)
    xte, yte = samples(20, 2)
    save(f"{out}/{name}_init.safetensors", m.state_dict())
    losses = train(m, torch.optim.SGD(m.parameters(), lr=lr, momentum=0.5), xtr, ytr, 5, 8)
    print(f"{name} losses: {' '.join(repr(v) for v in losses)}")
    loss, correct = evaluate(m, xte, yte)
    print(f"{name} after: test loss {loss!r} accuracy {correct}/20")
    for key, n in sides.items():
        print(f"    {key}: {n[0]} below, {n[1]} between, {n[2]} above its kinks")
    save(f"{out}/{name}_final.safetensors", m.state_dict())


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    torch.set_num_threads(1)
    soft = build([("fc1", nn.Linear(784, 32)), ("2", nn.LeakyReLU(0.2)), ("fc2", nn.Linear(32, 24)),
                  ("4", nn.ELU(alpha=0.7)), ("fc3", nn.Linear(24, 24)), ("6", nn.SiLU()),
                  ("fc4", nn.Linear(24, 16)), ("8", nn.Softplus(beta=2, threshold=0.2)), ("fc5", nn.Linear(16, 10))])
    run(out, "activations", soft, 0.2, {"2": (0, 0), "4": (0, 0), "8": (0.1, 0.1)}, {})
    hard = build([("fc1", nn.Linear(784, 32)), ("2", nn.Hardtanh(-0.5, 0.3)), ("fc2", nn.Linear(32, 24)),
                  ("4", nn.ReLU6()), ("fc3", nn.Linear(24, 24)), ("6", nn.Hardswish()),
                  ("fc4", nn.Linear(24, 24)), ("8", nn.Hardsigmoid()), ("fc5", nn.Linear(24, 16)),
                  ("10", nn.Mish()), ("fc6", nn.Linear(16, 16)), ("12", nn.SELU()), ("fc7", nn.Linear(16, 10))])
    run(out, "activations_hard", hard, 0.05, {"2": (-0.5, 0.3), "4": (0, 6), "6": (-3, 3), "8": (-3, 3), "12": (0, 0)},
        {"fc2": 40, "fc3": 3, "fc4": 3})
    shrink = build([("fc1", nn.Linear(784, 32)), ("2", nn.CELU(0.5)), ("fc2", nn.Linear(32, 24)),
                    ("4", nn.Softshrink(0.3)), ("fc3", nn.Linear(24, 24)), ("6", nn.LogSigmoid()),
                    ("fc4", nn.Linear(24, 24)), ("8", nn.Hardshrink(lambd=0.2)), ("fc5", nn.Linear(24, 16)),
                    ("10", nn.Softsign()), ("fc6", nn.Linear(16, 16)), ("12", nn.Threshold(0.1, -0.5)),
                    ("fc7", nn.Linear(16, 16)), ("14", nn.Tanhshrink()), ("fc8", nn.Linear(16, 10))])
    run(out, "activations_shrink", shrink, 0.05,
        {"2": (0, 0), "4": (-0.3, 0.3), "6": (0, 0), "8": (-0.2, 0.2), "10": (0, 0), "12": (0.1, 0.1), "14": (0, 0)},
        {"fc2": 3, "fc4": 2, "fc7": 3})


main()
