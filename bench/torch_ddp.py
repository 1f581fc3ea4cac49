"""bench/torch_ddp.py: the PyTorch peers of bench/dist_cpu.sh.

    torch_ddp.py toy            the DDP tutorial's basic demo: 2 processes,
                                ToyModel, one SGD step over gloo (wall time is
                                taken from outside, launch to exit)
    torch_ddp.py cnn STEPS T    the seed CNN under DDP over gloo at 2 ranks,
                                T threads each, Fashion-MNIST, batch 64 per
                                rank; prints images/s over steps 20..STEPS

Written for Debian's python3-torch (1.13, CPU); no torchvision.
"""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_cnn import load  # noqa: E402  (the same IDX reading and normalisation)
from torch_net import Net, ToyModel  # noqa: E402  (the seed's CNN, the DDP tutorial's model)

FASHION = "/usr/share/datasets/fashion-mnist"


def setup(rank, world, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)


def toy(rank, world, port):
    setup(rank, world, port)
    model = DDP(ToyModel())
    opt = torch.optim.SGD(model.parameters(), lr=0.001)
    opt.zero_grad()
    out = model(torch.randn(20, 10))
    nn.MSELoss()(out, torch.randn(20, 5)).backward()
    opt.step()
    dist.destroy_process_group()


def cnn(rank, world, port, steps, threads):
    torch.set_num_threads(threads)
    setup(rank, world, port)
    x, y = load(FASHION, "train", 0.2860, 0.3530)
    torch.manual_seed(1)
    model = DDP(Net())
    opt = torch.optim.Adadelta(model.parameters(), lr=1.0)
    perm = torch.randperm(len(x))[rank::world]
    t0 = None
    for step in range(steps):
        if step == 20:
            t0 = time.time()
        idx = perm[step * 64:(step + 1) * 64]
        opt.zero_grad()
        loss = F.nll_loss(model(x[idx]), y[idx], reduction="sum")
        loss.backward()
        opt.step()
    dt = time.time() - t0
    if rank == 0:
        print("pytorch ddp images/s %.1f" % ((steps - 20) * 64 * world / dt), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    port = 29500 + os.getpid() % 1000
    if sys.argv[1] == "toy":
        mp.spawn(toy, args=(2, port), nprocs=2, join=True)
    else:
        mp.spawn(cnn, args=(2, port, int(sys.argv[2]), int(sys.argv[3])), nprocs=2, join=True)
