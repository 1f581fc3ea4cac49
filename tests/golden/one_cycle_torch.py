"""The PyTorch side of tests/cli/one_cycle.sh, run once with PyTorch 1.13
(CPU) to write the reference values that script holds:

    python3 tests/golden/one_cycle_torch.py tests/golden

tests/cli/nets/one_cycle.net's model (flatten, Linear(784, 16), ReLU,
Linear(16, 10)) from the initial weights one_cycle_init.safetensors, cross
entropy at batch 8 in the dataset's order (samples(40, 1), 5 steps an
epoch), 3 epochs, OneCycleLR stepped after every batch over the run's 15
steps: first SGD (lr 0.01, no momentum of its own, which OneCycleLR
cycles between 0.85 and 0.95) with max_lr 0.1; then Adam with max_lr
0.01, three phases, linear annealing, pct_start 0.4 (its beta1 cycled).
Prints each step's rate and loss and each epoch's test loss; the final
weights go to one_cycle_sgd_final.safetensors and
one_cycle_adam_final.safetensors.
"""
import sys

import torch

from torch_ref import epoch, evaluate, fresh, report, samples


def run(m, init, out, name, opt_of, **cycle):
    m.load_state_dict(init)
    xtr, ytr = samples(40, 1)
    xte, yte = samples(20, 2)
    opt = opt_of(m.parameters())
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, epochs=3, steps_per_epoch=5, **cycle)
    lrs, losses, tests = [], [], []
    for _ in range(3):
        epoch(m, opt, xtr, ytr, lrs, losses, sched.step)
        tests.append(evaluate(m, xte, yte)[0])
    report(out, name, m, lrs, losses, tests)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    m, init = fresh(out, "one_cycle", 29)
    run(m, init, out, "one_cycle_sgd", lambda ps: torch.optim.SGD(ps, lr=0.01), max_lr=0.1)
    run(m, init, out, "one_cycle_adam", lambda ps: torch.optim.Adam(ps, lr=0.01), max_lr=0.01, three_phase=True,
        anneal_strategy="linear", pct_start=0.4)


main()
