"""bench/torch_fsdp_mnist.py: PyTorch's FSDP MNIST example, the seed program of bench/gpu.sh.

The program of PyTorch's "Getting Started with Fully Sharded Data Parallel"
tutorial as it is written there: the CNN of models/mnist_cnn.net, NLL (sum),
Adadelta lr 1.0, StepLR(step_size=1, gamma=0.7), batch 64, test batch 1000,
DistributedSampler, a DataLoader with num_workers=2, pin_memory=True,
shuffle=False, FSDP with size_based_auto_wrap_policy(min_num_params=100),
init_process_group("nccl") from MASTER_ADDR/MASTER_PORT, and the
"CUDA event elapsed time" print around the epoch loop (train + test +
scheduler, as the tutorial times it).  One process, world size 1, one epoch
by default.

What it does not do: download MNIST or use torchvision.  The IDX files are
read from --data (train-images-idx3-ubyte[.gz] and the rest, directly or
under MNIST/raw or FashionMNIST/raw, the places trainc looks), and each
sample goes through ToTensor + Normalize's arithmetic one at a time in the
DataLoader workers, as torchvision's MNIST dataset does (without its
PIL.Image round trip, so slightly cheaper than the tutorial).

The last line is machine-readable, for bench/gpu.sh:
    RESULT epoch_s=<s> images_per_s=<n> images=<n> test_accuracy=<f>
epoch_s is the training part of the epoch alone (the tutorial's train():
DataLoader start-up, every step, its loss.item() each step and the loss
all-reduce), between two CUDA events after a synchronize; the test pass is
outside it.  On --device cpu (a smoke test where there is no GPU) it runs
the same loop over gloo without FSDP, timed with time.perf_counter().
--limit-batches N stops training and testing after N batches.

Needs only torch (torch.frombuffer: 1.10 or later); no numpy, no torchvision.
"""
import argparse
import functools
import gzip
import os
import socket
import struct
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_net import Net  # noqa: E402  (the tutorial's model)



def idx_path(root, name):
    """The first of root/name[.gz], root/MNIST/raw/name[.gz], root/FashionMNIST/raw/name[.gz]."""
    tried = []
    for d in (root, os.path.join(root, "MNIST", "raw"), os.path.join(root, "FashionMNIST", "raw")):
        for n in (name, name + ".gz"):
            p = os.path.join(d, n)
            if os.path.isfile(p):
                return p
            tried.append(p)
    sys.exit(f"{sys.argv[0]}: {name}[.gz] not found; tried {', '.join(tried)}; give --data DIR")


def read_idx(root, name):
    """An unsigned-byte IDX file as a uint8 tensor of its dimensions."""
    path = idx_path(root, name)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = bytearray(f.read())
    zero, dtype, ndim = struct.unpack(">HBB", bytes(data[:4]))
    if zero != 0 or dtype != 0x08:
        sys.exit(f"{path}: not an unsigned-byte IDX file")
    dims = struct.unpack(">" + "I" * ndim, bytes(data[4:4 + 4 * ndim]))
    return torch.frombuffer(data, dtype=torch.uint8, offset=4 + 4 * ndim).view(dims)


def read_split(root, split):
    """(images (N, 28, 28) uint8, labels (N,) int64) of the train or test split."""
    prefix = "train" if split == "train" else "t10k"
    x = read_idx(root, f"{prefix}-images-idx3-ubyte")
    y = read_idx(root, f"{prefix}-labels-idx1-ubyte").long()
    if x.shape[0] != y.shape[0]:
        sys.exit(f"{root}: {x.shape[0]} {split} images but {y.shape[0]} labels")
    return x, y


class IdxDataset(Dataset):
    """torchvision's MNIST with ToTensor() and Normalize((mean,), (std,)): one sample at a time."""

    def __init__(self, root, split, mean, std):
        self.images, self.labels = read_split(root, split)  # (N, 28, 28) uint8, (N,)
        self.mean, self.std = mean, std

    def __len__(self):
        return self.images.shape[0]

    def __getitem__(self, i):
        x = self.images[i].unsqueeze(0).float().div(255)  # (1, 28, 28)
        return x.sub_(self.mean).div_(self.std), int(self.labels[i])


def train(model, dev, loader, optimizer, epoch, sampler, limit):
    """The tutorial's train(); returns the number of images trained."""
    model.train()
    ddp_loss = torch.zeros(2).to(dev)
    if sampler:
        sampler.set_epoch(epoch)
    for batch_idx, (data, target) in enumerate(loader):
        if limit and batch_idx == limit:
            break
        data, target = data.to(dev), target.to(dev)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target, reduction="sum")
        loss.backward()
        optimizer.step()
        ddp_loss[0] += loss.item()
        ddp_loss[1] += len(data)
    dist.all_reduce(ddp_loss, op=dist.ReduceOp.SUM)
    print("Train Epoch: {} \tLoss: {:.6f}".format(epoch, ddp_loss[0] / ddp_loss[1]), flush=True)
    return int(ddp_loss[1].item())


def test(model, dev, loader, limit):
    """The tutorial's test(); returns the accuracy."""
    model.eval()
    ddp_loss = torch.zeros(3).to(dev)
    with torch.no_grad():
        for batch_idx, (data, target) in enumerate(loader):
            if limit and batch_idx == limit:
                break
            data, target = data.to(dev), target.to(dev)
            output = model(data)
            ddp_loss[0] += F.nll_loss(output, target, reduction="sum").item()
            pred = output.argmax(dim=1, keepdim=True)
            ddp_loss[1] += pred.eq(target.view_as(pred)).sum().item()
            ddp_loss[2] += len(data)
    dist.all_reduce(ddp_loss, op=dist.ReduceOp.SUM)
    test_loss = ddp_loss[0] / ddp_loss[2]
    print("Test set: Average loss: {:.4f}, Accuracy: {}/{} ({:.2f}%)\n".format(
        test_loss, int(ddp_loss[1]), int(ddp_loss[2]), 100. * ddp_loss[1] / ddp_loss[2]), flush=True)
    return (ddp_loss[1] / ddp_loss[2]).item()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Clock:
    """Elapsed seconds between start() and stop(): CUDA events on a GPU, perf_counter on the CPU."""

    def __init__(self, cuda):
        self.cuda = cuda
        if cuda:
            self.a = torch.cuda.Event(enable_timing=True)
            self.b = torch.cuda.Event(enable_timing=True)

    def start(self):
        if self.cuda:
            torch.cuda.synchronize()
            self.a.record()
        else:
            self.t0 = time.perf_counter()

    def stop(self):
        if self.cuda:
            self.b.record()
            torch.cuda.synchronize()
            return self.a.elapsed_time(self.b) / 1000
        return time.perf_counter() - self.t0


def add_common_args(ap):
    """The options both GPU programs take, with the seed's defaults."""
    ap.add_argument("--data", default="data/mnist", help="folder of the MNIST IDX files")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--test-batch-size", type=int, default=1000)
    ap.add_argument("--lr", type=float, default=1.0)
    ap.add_argument("--gamma", type=float, default=0.7)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--mean", type=float, default=0.1307)
    ap.add_argument("--std", type=float, default=0.3081)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(ap)
    ap.add_argument("--min-num-params", type=int, default=100, help="size_based_auto_wrap_policy's threshold")
    ap.add_argument("--limit-batches", type=int, default=0, help="at most N batches per train and test pass (0: all)")
    a = ap.parse_args()
    cuda = a.device == "cuda"
    if cuda and not torch.cuda.is_available():
        sys.exit(f"{sys.argv[0]}: torch {torch.__version__} sees no CUDA device; use --device cpu")

    rank, world_size = 0, 1
    os.environ.setdefault("MASTER_ADDR", "localhost")
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world_size)
    torch.manual_seed(a.seed)

    dataset1 = IdxDataset(a.data, "train", a.mean, a.std)
    dataset2 = IdxDataset(a.data, "test", a.mean, a.std)
    sampler1 = DistributedSampler(dataset1, rank=rank, num_replicas=world_size, shuffle=True)
    sampler2 = DistributedSampler(dataset2, rank=rank, num_replicas=world_size)
    train_kwargs = {"batch_size": a.batch_size, "sampler": sampler1}
    test_kwargs = {"batch_size": a.test_batch_size, "sampler": sampler2}
    cuda_kwargs = {"num_workers": 2, "pin_memory": cuda, "shuffle": False}
    train_kwargs.update(cuda_kwargs)
    test_kwargs.update(cuda_kwargs)
    train_loader = DataLoader(dataset1, **train_kwargs)
    test_loader = DataLoader(dataset2, **test_kwargs)

    if cuda:
        # imported here: a CPU-only torch may lack a working FSDP
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        from torch.distributed.fsdp.wrap import size_based_auto_wrap_policy
        torch.cuda.set_device(rank)
        dev = torch.device("cuda", rank)
        policy = functools.partial(size_based_auto_wrap_policy, min_num_params=a.min_num_params)
        model = FSDP(Net().to(dev), auto_wrap_policy=policy)
    else:
        dev = torch.device("cpu")
        model = Net()
    optimizer = optim.Adadelta(model.parameters(), lr=a.lr)
    scheduler = StepLR(optimizer, step_size=1, gamma=a.gamma)

    whole, epoch_clock = Clock(cuda), Clock(cuda)
    train_s, images, acc = 0.0, 0, float("nan")
    whole.start()
    for epoch in range(1, a.epochs + 1):
        epoch_clock.start()
        images += train(model, dev, train_loader, optimizer, epoch, sampler1, a.limit_batches)
        train_s += epoch_clock.stop()
        acc = test(model, dev, test_loader, a.limit_batches)
        scheduler.step()
    elapsed = whole.stop()
    print(f"{'CUDA event' if cuda else 'CPU clock'} elapsed time: {elapsed:.3f} sec")
    if cuda:
        print(model)
    epoch_s = train_s / a.epochs
    print(f"RESULT epoch_s={epoch_s:.3f} images_per_s={images / train_s:.1f} images={images} "
          f"test_accuracy={acc:.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
