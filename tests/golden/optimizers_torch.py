"""The PyTorch side of tests/cli/optimizers.sh, run once with PyTorch 1.13
(CPU) to write the reference values that script holds:

    python3 tests/golden/optimizers_torch.py tests/golden

tests/cli/nets/one_cycle.net's model (flatten, Linear(784, 16), ReLU,
Linear(16, 10)) from the initial weights optimizers_init.safetensors,
cross entropy at batch 8 in the dataset's order (samples(40, 1), 5 steps
an epoch), 3 epochs: Adamax (lr 0.01) under StepLR (step 1, gamma 0.7)
stepped each epoch; RAdam (lr 0.01, betas (0.9, 0.99), weight decay
0.01) at a constant rate, which rectifies from step 6 on; RAdam under
OneCycleLR (max_lr 0.01, stepped after every batch), which cycles its
beta1. Prints each step's rate and loss and each epoch's test loss; the
final weights go to optimizers_<run>_final.safetensors.
"""
import sys

import torch

from torch_ref import epoch, evaluate, fresh, report, samples


def run(m, init, out, name, opt_of, sched_of, per_step):
    m.load_state_dict(init)
    xtr, ytr = samples(40, 1)
    xte, yte = samples(20, 2)
    opt = opt_of(m.parameters())
    sched = sched_of(opt)
    lrs, losses, tests = [], [], []
    for _ in range(3):
        epoch(m, opt, xtr, ytr, lrs, losses, sched.step if per_step else None)
        tests.append(evaluate(m, xte, yte)[0])
        if not per_step:
            sched.step()
    report(out, name, m, lrs, losses, tests)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    m, init = fresh(out, "optimizers", 31)
    L = torch.optim.lr_scheduler
    run(m, init, out, "optimizers_adamax", lambda ps: torch.optim.Adamax(ps, lr=0.01),
        lambda o: L.StepLR(o, step_size=1, gamma=0.7), False)
    run(m, init, out, "optimizers_radam", lambda ps: torch.optim.RAdam(ps, lr=0.01, betas=(0.9, 0.99), weight_decay=0.01),
        lambda o: L.LambdaLR(o, lambda e: 1.0), False)
    run(m, init, out, "optimizers_radam_cycle", lambda ps: torch.optim.RAdam(ps, lr=0.01),
        lambda o: L.OneCycleLR(o, max_lr=0.01, epochs=3, steps_per_epoch=5), True)


main()
