"""bench/torch_mnist_gpu.py: the seed CNN in plain PyTorch with the data set on the GPU.

PyTorch's best case for bench/gpu.sh's comparison: the model, loss,
optimizer and schedule of bench/torch_fsdp_mnist.py (the CNN of
models/mnist_cnn.net, NLL sum, Adadelta lr 1.0, StepLR gamma 0.7, batch 64),
without FSDP, process group or DataLoader.  The whole training and test
sets are decoded and normalised once into float tensors on the device
((60000, 1, 28, 28) and (10000, 1, 28, 28)); every epoch draws a permutation
on the device and each batch is gathered from it by index_select, so no
step waits on the host.  The summed loss stays on the device until the end
of the epoch (no .item() per step).  cuDNN's autotuner is on
(--cudnn-benchmark 0 turns it off), and --warmup steps (10, the short last
batch among them) are run first on a throwaway copy of the model, so
context creation, cuBLAS/cuDNN handles and autotuning stay outside the
timed epoch; the trained model starts from the seed's weights all the same.

Prints, like torch_fsdp_mnist.py, one line at the end:
    RESULT epoch_s=<s> images_per_s=<n> images=<n> test_accuracy=<f>
epoch_s covers the training part of each epoch (permutation, all steps),
between CUDA events after a synchronize; the test pass is outside it.
--device cpu runs the same on the CPU (a smoke test), timed with
time.perf_counter(); --limit-batches N stops each pass after N batches.

Needs only torch.
"""
import argparse
import copy
import os
import sys

import torch
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR

sys.dont_write_bytecode = True  # no bench/__pycache__ in the working tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_fsdp_mnist import Clock, Net, add_common_args, read_split  # noqa: E402  (the same model and IDX reading)


def to_device(root, split, mean, std, dev):
    """(images (N, 1, 28, 28) float32, labels (N,) int64), normalised, on dev."""
    x, y = read_split(root, split)
    x = x.to(dev).unsqueeze(1).float().div_(255).sub_(mean).div_(std)
    return x, y.to(dev)


def step(model, optimizer, data, target):
    optimizer.zero_grad()
    loss = F.nll_loss(model(data), target, reduction="sum")
    loss.backward()
    optimizer.step()
    return loss.detach()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(ap)
    ap.add_argument("--warmup", type=int, default=10, help="untimed steps on a copy of the model first")
    ap.add_argument("--cudnn-benchmark", type=int, default=1, choices=(0, 1))
    ap.add_argument("--limit-batches", type=int, default=0, help="at most N batches per train and test pass (0: all)")
    a = ap.parse_args()
    cuda = a.device == "cuda"
    if cuda and not torch.cuda.is_available():
        sys.exit(f"{sys.argv[0]}: torch {torch.__version__} sees no CUDA device; use --device cpu")
    dev = torch.device(a.device)
    torch.backends.cudnn.benchmark = bool(a.cudnn_benchmark)
    torch.manual_seed(a.seed)

    xtr, ytr = to_device(a.data, "train", a.mean, a.std, dev)
    xte, yte = to_device(a.data, "test", a.mean, a.std, dev)
    n, bs = xtr.shape[0], a.batch_size
    model = Net().to(dev)
    if a.warmup > 0:
        # the last batch of an epoch is shorter (60000 = 937 * 64 + 32): its shapes get warmed up too
        tail = n % bs or bs
        spare = copy.deepcopy(model)
        spare_opt = optim.Adadelta(spare.parameters(), lr=a.lr)
        for i in range(a.warmup):
            b = tail if i == a.warmup - 1 else bs
            step(spare, spare_opt, xtr[:b], ytr[:b])
        with torch.no_grad():
            spare.eval()
            spare(xte[:a.test_batch_size])
        del spare, spare_opt
    optimizer = optim.Adadelta(model.parameters(), lr=a.lr)
    scheduler = StepLR(optimizer, step_size=1, gamma=a.gamma)
    gen = torch.Generator(device=dev)
    gen.manual_seed(a.seed)

    clock = Clock(cuda)
    train_s, images, acc = 0.0, 0, float("nan")
    for epoch in range(1, a.epochs + 1):
        model.train()
        clock.start()
        perm = torch.randperm(n, device=dev, generator=gen)
        total = torch.zeros((), device=dev)
        seen = 0
        for b, i in enumerate(range(0, n, bs)):
            if a.limit_batches and b == a.limit_batches:
                break
            idx = perm[i:i + bs]
            total += step(model, optimizer, xtr.index_select(0, idx), ytr.index_select(0, idx))
            seen += idx.shape[0]
        train_s += clock.stop()
        images += seen
        print(f"Train Epoch: {epoch} \tLoss: {total.item() / seen:.6f}", flush=True)

        model.eval()
        loss, correct, tested = 0.0, 0, 0
        with torch.no_grad():
            for b, j in enumerate(range(0, xte.shape[0], a.test_batch_size)):
                if a.limit_batches and b == a.limit_batches:
                    break
                data, target = xte[j:j + a.test_batch_size], yte[j:j + a.test_batch_size]
                out = model(data)
                loss += F.nll_loss(out, target, reduction="sum").item()
                correct += (out.argmax(1) == target).sum().item()
                tested += data.shape[0]
        acc = correct / tested
        print(f"Test set: Average loss: {loss / tested:.4f}, Accuracy: {correct}/{tested} "
              f"({100.0 * acc:.2f}%)\n", flush=True)
        scheduler.step()
    if cuda:
        print(f"device {torch.cuda.get_device_name(dev)}, torch {torch.__version__}, "
              f"cudnn.benchmark {torch.backends.cudnn.benchmark}, cudnn.allow_tf32 {torch.backends.cudnn.allow_tf32}, "
              f"matmul.allow_tf32 {torch.backends.cuda.matmul.allow_tf32}")
    print(f"RESULT epoch_s={train_s / a.epochs:.3f} images_per_s={images / train_s:.1f} images={images} "
          f"test_accuracy={acc:.4f}", flush=True)


if __name__ == "__main__":
    main()
