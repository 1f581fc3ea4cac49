"""The PyTorch side of tests/cli/plateau.sh, run once with PyTorch 1.13
(CPU) to write the reference values that script holds:

    python3 tests/golden/plateau_torch.py tests/golden

tests/cli/nets/plateau.net's model (flatten, Linear(784, 16), ReLU,
Linear(16, 10)) from the initial weights plateau_init.safetensors, cross
entropy, SGD lr 0.5 momentum 0.5 at batch 8 in the dataset's order
(samples(40, 1), 5 steps an epoch), 8 epochs; after each epoch the test
loss on samples(20, 2) and ReduceLROnPlateau's step, on the test loss
(factor 0.5, patience 1, cooldown 1) or, second, on the epoch's mean
training loss (mode "min", threshold 0.05 absolute, factor 0.2, patience
0, min_lr 0.03).  Prints each step's rate and loss and each epoch's test
loss; the final weights go to plateau_final.safetensors and
plateau_train_final.safetensors.
"""
import sys

import torch

from torch_ref import epoch, evaluate, fresh, report, samples


def run(m, init, out, name, **plateau):
    m.load_state_dict(init)
    xtr, ytr = samples(40, 1)
    xte, yte = samples(20, 2)
    opt = torch.optim.SGD(m.parameters(), lr=0.5, momentum=0.5)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, **plateau)
    lrs, losses, tests = [], [], []
    for _ in range(8):
        total = epoch(m, opt, xtr, ytr, lrs, losses)
        test_loss, _ = evaluate(m, xte, yte)
        tests.append(test_loss)
        sched.step(total / 40 if plateau.get("threshold_mode") == "abs" else test_loss)
    report(out, name, m, lrs, losses, tests)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    m, init = fresh(out, "plateau", 23)
    run(m, init, out, "plateau", factor=0.5, patience=1, cooldown=1)
    run(m, init, out, "plateau_train", mode="min", threshold=0.05, threshold_mode="abs", factor=0.2, patience=0, min_lr=0.03)


main()
