"""What the PyTorch sides of the tests that check trainc against numbers
computed once share: the MNIST-format samples tests/cli/torch_ref.inc draws
with awk, synthetic rand() sets drawn as trainc draws them (Philox4x32-10,
runtime/philox.h), and a safetensors writer.  Imported by the *_torch.py scripts
beside it; run with PyTorch 1.13 (CPU), never by the tests.
"""
import json
import struct

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


M32 = 0xFFFFFFFF


def u32(seed, purpose, rank, step, i):
    """Word i of trainc's stream (seed, purpose, rank, step)."""
    block = i >> 2
    c = [block & M32, block >> 32, (purpose << 24) | rank, step]
    k0, k1 = seed & M32, seed >> 32
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k0, p1 & M32, (p0 >> 32) ^ c[3] ^ k1, p0 & M32]
        k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
    return c[i & 3]


def rand_set(n, split, seed=1, inputs=6, targets=3):
    """synthetic(input=rand(inputs), target=rand(targets), samples=n) as
    trainc draws it at train.seed `seed` (rand() is 24 of the 32 bits,
    exactly a float); split 1 is a test set."""
    x = [(u32(seed, 4, 0, split, i) >> 8) / 16777216.0 for i in range(n * inputs)]
    t = [(u32(seed, 4, 1, split, i) >> 8) / 16777216.0 for i in range(n * targets)]
    return torch.tensor(x).view(n, inputs), torch.tensor(t).view(n, targets)


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


def criterion(out, y, reduction="mean", label_smoothing=0.0, ignore_index=-100, weight=None, nll=False):
    """nll_loss, or cross_entropy (with label_smoothing), each with
    ignore_index and class weights (a list, or None)."""
    w = None if weight is None else torch.tensor(weight, dtype=torch.float32)
    if nll:
        return F.nll_loss(out, y, weight=w, reduction=reduction, ignore_index=ignore_index)
    return F.cross_entropy(out, y, weight=w, reduction=reduction, label_smoothing=label_smoothing, ignore_index=ignore_index)


def train(m, opt, x, y, steps, batch, **loss):
    """steps steps of the criterion (cross entropy unless loss says nll,
    with its label_smoothing and ignore_index) over consecutive batches of
    x, y (the dataset's order, as trainc's shuffle=false); returns each
    step's loss."""
    losses = []
    m.train()
    for step in range(steps):
        opt.zero_grad()
        loss_v = criterion(m(x[step * batch:(step + 1) * batch]), y[step * batch:(step + 1) * batch], **loss)
        loss_v.backward()
        opt.step()
        losses.append(loss_v.item())
    return losses


def evaluate(m, x, y, **loss):
    """The summed criterion over x, y in evaluation mode divided by the
    samples (the seed's test loss), and how many samples the model gets
    right."""
    m.eval()
    with torch.no_grad():
        out = m(x)
        loss_v = criterion(out, y, reduction="sum", **loss).item() / len(y)
        correct = (out.argmax(1) == y).sum().item()
    return loss_v, correct


def reference(m, out, name, lr, shapes=(), **loss):
    """The run each script makes of its model m: the output shape of each
    child named in shapes for one training sample, the initial weights
    as OUT/NAME_init.safetensors, 5 steps of SGD (lr, momentum 0.5,
    batch 8, the criterion of loss: cross entropy unless nll=True, with
    label_smoothing, ignore_index and weight) on samples(40, 1) with their losses,
    the test loss and accuracy on samples(20, 2) after, and the trained
    weights as OUT/NAME_final.safetensors."""
    xtr, ytr = samples(40, 1)
    xte, yte = samples(20, 2)
    x = xtr[:1]
    for child in shapes:
        x = getattr(m, child)(x)
        print(f"{child}: {tuple(x.shape[1:])}")
    save(f"{out}/{name}_init.safetensors", m.state_dict())
    losses = train(m, torch.optim.SGD(m.parameters(), lr=lr, momentum=0.5), xtr, ytr, 5, 8, **loss)
    print(f"losses: {' '.join(repr(v) for v in losses)}")
    loss_v, correct = evaluate(m, xte, yte, **loss)
    print(f"after: test loss {loss_v!r} accuracy {correct}/20")
    save(f"{out}/{name}_final.safetensors", m.state_dict())


def mlp(act, log_softmax=False):
    """flatten, Linear(784, 16), act, Linear(16, 10) (children flat, fc1,
    act, fc2, as the .net files name their layers), then LogSoftmax where
    log_softmax is set."""
    m = nn.Sequential()
    m.add_module("flat", nn.Flatten())
    m.add_module("fc1", nn.Linear(784, 16))
    m.add_module("act", act)
    m.add_module("fc2", nn.Linear(16, 10))
    if log_softmax:
        m.add_module("logsm", nn.LogSoftmax(dim=1))
    return m


def epoch(m, opt, x, y, lrs, losses, after_step=None):
    """One epoch of cross entropy over consecutive batches of 8 of x, y,
    each step's rate (before it) and loss appended to lrs and losses,
    after_step() called after each optimizer step; returns the epoch's
    summed per-sample loss."""
    m.train()
    total = 0.0
    for step in range(len(y) // 8):
        lrs.append(opt.param_groups[0]["lr"])
        opt.zero_grad()
        loss = F.cross_entropy(m(x[step * 8:(step + 1) * 8]), y[step * 8:(step + 1) * 8])
        loss.backward()
        opt.step()
        if after_step:
            after_step()
        losses.append(loss.item())
        total += loss.item() * 8
    return total


def report(out, name, m, lrs, losses, tests):
    """The lines a scheduler's script prints of run NAME (each step's rate
    and loss, each epoch's test loss), and m's weights as
    OUT/NAME_final.safetensors."""
    print(f"{name} lrs: {' '.join(repr(v) for v in lrs)}")
    print(f"{name} losses: {' '.join(repr(v) for v in losses)}")
    print(f"{name} tests: {' '.join(repr(v) for v in tests)}")
    save(f"{out}/{name}_final.safetensors", m.state_dict())


def fresh(out, name, seed):
    """torch_ref's MLP (ReLU) from seed, its weights saved as
    OUT/NAME_init.safetensors; returns it and a copy of its state."""
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    m = mlp(nn.ReLU())
    save(f"{out}/{name}_init.safetensors", m.state_dict())
    return m, {k: v.clone() for k, v in m.state_dict().items()}
