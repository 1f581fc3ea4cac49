"""The PyTorch side of tests/cli/batchnorm1d.sh, run once with PyTorch 1.13
(CPU) to write the reference values that script holds:

    python3 tests/golden/batchnorm1d_torch.py tests/golden

It draws the same MNIST-format samples the script writes (a small linear
congruential generator, so the shell can draw them with awk), builds the
two models of tests/cli/nets/bn1d_mlp.net and bn1d_seq.net, gives them
initial weights with batch norm parameters and running statistics away
from their defaults, writes those as bn1d_*_init.safetensors, trains one
epoch of 5 steps (batch 8, SGD lr 0.05 momentum 0.5, cross entropy, the
dataset's order) and writes the result as bn1d_*_final.safetensors.  It
prints each step's loss and the test set's average loss and accuracy in
evaluation mode, before training and after.
"""
import json
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


def samples(n, x):
    """n images (uint8, 28 x 28) and labels: per sample a label draw, then
    784 pixel draws, each of 16 7 x 7 regions bright for a third of the
    classes so the pooled features carry the label."""
    img, lab = bytearray(), bytearray()
    for _ in range(n):
        x = (x * 75 + 74) % 65537
        label = x % 10
        lab.append(label)
        for p in range(784):
            x = (x * 75 + 74) % 65537
            r = (p // 28) // 7 * 4 + (p % 28) // 7
            img.append(x % 128 + (127 if (r + label) % 3 == 0 else 0))
    images = torch.tensor(list(img), dtype=torch.uint8).view(n, 1, 28, 28)
    return images.float().div(255), torch.tensor(list(lab), dtype=torch.long)


def save(path, sd):
    header, blobs, at = {}, [], 0
    for k, t in sd.items():
        t = t.detach().contiguous()
        dtype = {torch.float32: "F32", torch.int64: "I64"}[t.dtype]
        b = t.numpy().tobytes()
        header[k] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


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


def evaluate(m, x, y):
    m.eval()
    with torch.no_grad():
        out = m(x)
        loss = F.cross_entropy(out, y, reduction="sum").item() / len(y)
        correct = (out.argmax(1) == y).sum().item()
    return loss, correct


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
        opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.5)
        losses = []
        m.train()
        for step in range(5):
            opt.zero_grad()
            loss = F.cross_entropy(m(xtr[step * 8:(step + 1) * 8]), ytr[step * 8:(step + 1) * 8])
            loss.backward()
            opt.step()
            losses.append(loss.item())
        print(f"{name} losses: {' '.join(repr(v) for v in losses)}")
        loss, correct = evaluate(m, xte, yte)
        print(f"{name} after: test loss {loss!r} accuracy {correct}/20")
        print(f"{name} num_batches_tracked {m.bn.num_batches_tracked.item()}")
        save(f"{out}/bn1d_{name}_final.safetensors", m.state_dict())


main()
