"""The PyTorch side of tests/cli/kl_div.sh, run once with PyTorch 1.13
(CPU) to write the reference values that script holds:

    python3 tests/golden/kl_div_torch.py tests/golden

It draws the synthetic sets of tests/cli/nets/kl_div.net as trainc draws
them, builds its model, writes the initial weights as
kl_div_init.safetensors and trains twelve steps (batch 16, SGD momentum
0.9, the dataset's order) from them three times: KLDivLoss with
reduction="batchmean" (lr 0.5), with "mean" (lr 2) and with "sum" and
log_target=True (lr 1/512).  Each run prints its step losses and the test
set's loss as trainc logs them (with "sum", per sample), and writes its
weights as kl_div_NAME_final.safetensors.
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_ref import rand_set, save


def run(out, name, m, init, reduction, log_target, lr, sets):
    x, t, xte, tte = sets
    m.load_state_dict(init)
    opt = torch.optim.SGD(m.parameters(), lr=lr, momentum=0.9)
    losses = []
    for _ in range(3):
        for b in range(4):
            opt.zero_grad()
            loss = F.kl_div(m(x[b * 16:(b + 1) * 16]), t[b * 16:(b + 1) * 16], reduction=reduction, log_target=log_target)
            loss.backward()
            opt.step()
            losses.append(loss.item() / (16 if reduction == "sum" else 1))
    with torch.no_grad():
        test = F.kl_div(m(xte), tte, reduction=reduction, log_target=log_target).item()
    if reduction == "sum":
        test /= len(xte)
    print(f"{name} losses: {' '.join(repr(v) for v in losses)}")
    print(f"{name} test loss {test!r}")
    save(f"{out}/kl_div_{name}_final.safetensors", m.state_dict())


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    torch.set_num_threads(1)
    torch.manual_seed(3)
    x, t = rand_set(64, 0, targets=4)
    xte, tte = rand_set(32, 1, targets=4)
    m = nn.Sequential()
    m.add_module("fc1", nn.Linear(6, 16))
    m.add_module("1", nn.Tanh())
    m.add_module("fc2", nn.Linear(16, 4))
    m.add_module("3", nn.LogSoftmax(dim=1))
    save(f"{out}/kl_div_init.safetensors", m.state_dict())
    init = {k: v.clone() for k, v in m.state_dict().items()}
    sets = (x, t, xte, tte)
    run(out, "batchmean", m, init, "batchmean", False, 0.5, sets)
    run(out, "mean", m, init, "mean", False, 2.0, sets)
    run(out, "log_sum", m, init, "sum", True, 1 / 512, sets)


main()
