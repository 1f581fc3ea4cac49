#!/usr/bin/python3
"""torch_cnn.py: the PyTorch side of bench/cpu_cnn.sh.

Trains the seed CNN of PyTorch's FSDP MNIST example (the model of
models/mnist_cnn.net) on Fashion-MNIST on the CPU, one process, with the
same batch, optimizer and loss as models/fashion_mnist_cnn.net:
Adadelta(lr=1.0), F.nll_loss(reduction='sum'), batch 64.  This is the best
case for PyTorch: the whole training set is decoded and normalized into one
float tensor before training, and batches are index_select'ed from a random
permutation (no DataLoader, no worker processes, no per-sample transforms).

After every step it prints a line in trainc's log format,
    Train Epoch: 1 [640/60000 (1%)]\tLoss: 0.123456
flushed, so bench/steptime.py times both programs the same way from outside.
It also times itself:
  - first step: from the process start (/proc/self/stat field 22, in clock
    ticks since boot, against CLOCK_BOOTTIME; 10 ms resolution) to the end of
    the first optimizer step;
  - steady state: images/s between the end of step --skip and the end of step
    --steps, by time.perf_counter().
Then, like the FSDP example and like trainc at the end of an epoch, it runs
one pass over the test set at batch --test-batch (1000) under no_grad, so
peak memory covers evaluation too (--test-batch 0 skips it).

Needs only numpy and torch (Debian's python3-torch); no torchvision.
"""
import argparse
import gzip
import json
import os
import struct
import sys
import time


def process_age():
    """Seconds since this process was started, from /proc/self/stat."""
    with open("/proc/self/stat", "rb") as f:
        stat = f.read().decode()
    # the command name may hold spaces and parentheses: split after the last ')'
    fields = stat[stat.rindex(")") + 2:].split()
    start_ticks = int(fields[19])  # field 22 of the whole line
    hz = os.sysconf("SC_CLK_TCK")
    return time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / hz


def read_idx(path):
    import numpy as np
    with gzip.open(path, "rb") as f:
        data = f.read()
    zero, dtype, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != 0x08:
        sys.exit(f"{path}: not an unsigned-byte IDX file")
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(root, split, mean, std):
    import numpy as np
    import torch
    prefix = "train" if split == "train" else "t10k"
    x = read_idx(os.path.join(root, f"{prefix}-images-idx3-ubyte.gz"))
    y = read_idx(os.path.join(root, f"{prefix}-labels-idx1-ubyte.gz"))
    # ToTensor then Normalize, in float32 as torchvision does them
    xf = x.astype(np.float32) / np.float32(255.0)
    xf = (xf - np.float32(mean)) / np.float32(std)
    return (torch.from_numpy(np.ascontiguousarray(xf)).unsqueeze(1),
            torch.from_numpy(y.astype(np.int64)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--skip", type=int, default=50)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--test-batch", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()

    import torch
    import torch.nn.functional as F
    import torch.optim as optim

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from torch_net import Net  # as in PyTorch's FSDP MNIST example

    mean, std = 0.2860, 0.3530
    xtr, ytr = load(a.data, "train", mean, std)
    xte, yte = (load(a.data, "test", mean, std) if a.test_batch > 0 else (None, None))
    n = xtr.shape[0]
    model = Net()
    opt = optim.Adadelta(model.parameters(), lr=1.0)
    model.train()

    g = torch.Generator().manual_seed(a.seed)
    perm = torch.randperm(n, generator=g)
    steps_per_epoch = n // a.batch + (n % a.batch != 0)
    ends = []
    first_step_age = None
    step = 0
    while step < a.steps:
        if step and step % steps_per_epoch == 0:
            perm = torch.randperm(n, generator=g)
        i = step % steps_per_epoch
        idx = perm[i * a.batch:(i + 1) * a.batch]
        data = xtr.index_select(0, idx)
        target = ytr.index_select(0, idx)
        opt.zero_grad()
        out = model(data)
        loss = F.nll_loss(out, target, reduction="sum")
        loss.backward()
        opt.step()
        lv = loss.item()
        step += 1
        ends.append(time.perf_counter())
        if step == 1:
            first_step_age = process_age()
        seen_in_epoch = (step - 1) % steps_per_epoch * a.batch + data.shape[0]
        print(f"Train Epoch: {1 + (step - 1) // steps_per_epoch} [{seen_in_epoch}/{n} "
              f"({100.0 * seen_in_epoch / n:.0f}%)]\tLoss: {lv / data.shape[0]:.6f}", flush=True)

    result = {"threads": a.threads, "steps": a.steps, "skip": a.skip, "batch": a.batch,
              "first_step_s": round(first_step_age, 3)}
    if a.steps > a.skip:
        dt = ends[a.steps - 1] - ends[a.skip - 1] if a.skip > 0 else None
        if dt:
            result["steady_images_per_s"] = round((a.steps - a.skip) * a.batch / dt, 1)

    if a.test_batch > 0:
        model.eval()
        correct, total_loss = 0, 0.0
        with torch.no_grad():
            for j in range(0, xte.shape[0], a.test_batch):
                out = model(xte[j:j + a.test_batch])
                total_loss += F.nll_loss(out, yte[j:j + a.test_batch], reduction="sum").item()
                correct += (out.argmax(1) == yte[j:j + a.test_batch]).sum().item()
        result["test_loss"] = round(total_loss / xte.shape[0], 4)
        result["test_accuracy"] = correct / xte.shape[0]
    print("torch_cnn: " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
