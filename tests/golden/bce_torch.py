"""The PyTorch side of tests/cli/bce.sh, run once with PyTorch 1.13 (CPU)
to write the reference values that script holds:

    python3 tests/golden/bce_torch.py tests/golden

It draws the synthetic sets of tests/cli/nets/bce.net as trainc draws
them (Philox4x32-10, runtime/philox.h, at train.seed 1: rand() is 24 of
the 32 bits, exactly a float), builds its model (and the same without the
sigmoid), writes the initial weights as bce_init.safetensors and trains
twelve steps (batch 16, SGD lr 0.5 momentum 0.9, the dataset's order):
BCELoss after the sigmoid, then BCEWithLogitsLoss on the scores before
it with pos_weight 3 and with a weight per output (1, 4, 0.5), each from
the same weights. It prints each step's loss
and the test set's after each run, and writes the results as
bce_final.safetensors, bce_pw3_final.safetensors and
bce_pw_list_final.safetensors.
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_ref import rand_set, save

def run(m, loss_fn, x, t, xte, tte):
    opt = torch.optim.SGD(m.parameters(), lr=0.5, momentum=0.9)
    losses = []
    for epoch in range(3):
        for b in range(4):
            opt.zero_grad()
            loss = loss_fn(m(x[b * 16:(b + 1) * 16]), t[b * 16:(b + 1) * 16])
            loss.backward()
            opt.step()
            losses.append(loss.item())
    with torch.no_grad():
        test = loss_fn(m(xte), tte).item()
    print(f"losses: {' '.join(repr(v) for v in losses)}")
    print(f"test loss {test!r}")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    torch.set_num_threads(1)
    torch.manual_seed(3)
    x, t = rand_set(64, 0)
    xte, tte = rand_set(32, 1)
    m = nn.Sequential()
    m.add_module("fc1", nn.Linear(6, 16))
    m.add_module("1", nn.Tanh())
    m.add_module("fc2", nn.Linear(16, 3))
    m.add_module("3", nn.Sigmoid())
    save(f"{out}/bce_init.safetensors", m.state_dict())
    init = {k: v.clone() for k, v in m.state_dict().items()}
    print(f"first input {x[0].tolist()} target {t[0].tolist()}")
    run(m, F.binary_cross_entropy, x, t, xte, tte)
    save(f"{out}/bce_final.safetensors", m.state_dict())
    m.load_state_dict(init)
    logits = m[:3]
    run(logits, lambda o, y: F.binary_cross_entropy_with_logits(o, y, pos_weight=torch.tensor([3.0])), x, t, xte, tte)
    save(f"{out}/bce_pw3_final.safetensors", logits.state_dict())
    m.load_state_dict(init)
    pw = torch.tensor([1.0, 4.0, 0.5])
    run(logits, lambda o, y: F.binary_cross_entropy_with_logits(o, y, pos_weight=pw), x, t, xte, tte)
    save(f"{out}/bce_pw_list_final.safetensors", logits.state_dict())


main()
