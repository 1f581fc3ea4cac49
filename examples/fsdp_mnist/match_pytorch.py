"""examples/fsdp_mnist/match_pytorch.py: the PyTorch side of match_pytorch.sh.

The FSDP MNIST example's training at world size 2, step by step, in one
process: the example's Net without its two dropouts (dropout's masks come
from each program's own random numbers, so no two programs share them),
torch.manual_seed(1) for the initial weights, DistributedSampler(
num_replicas=2, rank=r, shuffle=True) after set_epoch(1) for each rank's
samples, NLL with reduction="sum" on each rank's 64 samples, gradients
averaged over the two ranks (what FSDP's reduce-scatter and DDP's
all-reduce compute), Adadelta(lr=1.0).  Prints one line per step: "step N loss L", L the summed loss of both ranks' samples divided by
their number, the figure trainc logs.

Usage: match_pytorch.py --data DIR --mean M --std S [--steps N] [--threads T]
         [--weights OUT]   (OUT: the initial weights, as safetensors)
Needs only torch (1.10 or later): no torchvision, no safetensors package.
"""
import argparse
import json
import os
import struct
import sys

import torch
import torch.nn.functional as F
from torch.utils.data.distributed import DistributedSampler

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
from torch_fsdp_mnist import read_split  # noqa: E402  (IDX files, as trainc reads them)
from torch_net import Net  # noqa: E402  (the example's model)


def save_safetensors(path, tensors):
    """name -> float32 tensor, in the safetensors layout (header, then the data)."""
    header, blobs, at = {}, [], 0
    for name, t in tensors.items():
        b = t.detach().contiguous().float().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for b in blobs:
            f.write(b)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--mean", type=float, required=True)
    ap.add_argument("--std", type=float, required=True)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--weights")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    images, labels = read_split(a.data, "train")
    torch.manual_seed(1)
    model = Net()
    model.dropout1.p = model.dropout2.p = 0.0
    if a.weights:
        save_safetensors(a.weights, model.state_dict())
    world, batch = 2, 64
    orders = []
    for r in range(world):
        s = DistributedSampler(range(len(images)), num_replicas=world, rank=r, shuffle=True)
        s.set_epoch(1)  # the example's first epoch
        orders.append(list(s))
    if a.steps * batch > len(orders[0]):
        sys.exit(f"{sys.argv[0]}: --steps {a.steps}: at most {len(orders[0]) // batch}, the whole batches of the first epoch")
    opt = torch.optim.Adadelta(model.parameters(), lr=1.0)
    model.train()
    for step in range(a.steps):
        idx = torch.tensor([i for o in orders for i in o[step * batch:(step + 1) * batch]])
        x = images[idx].unsqueeze(1).float().div(255).sub(a.mean).div(a.std)
        opt.zero_grad()
        loss = F.nll_loss(model(x), labels[idx], reduction="sum")
        (loss / world).backward()  # each rank's sum, averaged over the ranks
        opt.step()
        print(f"step {step + 1} loss {loss.item() / len(idx):.9g}", flush=True)


if __name__ == "__main__":
    main()
