"""bench/torch_toy_gpu.py: step time of the DDP tutorial's ToyModel in PyTorch on one GPU.

The reference for bench/gpu.sh's step-latency figure: the model of
models/toy.net (Linear(10, 10), ReLU, Linear(10, 5); MSE against a random
target; SGD lr 0.001; batch 20; one fixed batch, like trainc's 20 synthetic
samples), no DDP.  Measured after --warmup untimed steps, over --steps
steps between CUDA events after a synchronize:
  - eager: zero_grad, forward, loss, backward, step, as the tutorial does
    (no .item(), so the host runs ahead of the device as far as it can);
  - graph: the same step captured once as a CUDA graph (torch.cuda.graph,
    as in PyTorch's "whole network capture" recipe) and replayed, when this
    torch has torch.cuda.graphs;
  - floor: replays of a graph of one tiny kernel, the launch cost any
    graph-replayed step pays.
Prints one line at the end:
    RESULT eager_us=<us per step> graph_us=<us or -> floor_us=<us or ->
--device cpu (a smoke test where there is no GPU) times the eager step
with time.perf_counter() and prints "-" for the graph figures.

Needs only torch (and bench/torch_net.py beside it).
"""
import argparse
import os
import sys
import time

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_net import ToyModel  # noqa: E402  (the DDP tutorial's model)


def timed(fn, steps, cuda):
    """Microseconds per call of fn over steps calls."""
    if cuda:
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        a.record()
        for _ in range(steps):
            fn()
        b.record()
        torch.cuda.synchronize()
        return a.elapsed_time(b) * 1000 / steps
    t0 = time.perf_counter()
    for _ in range(steps):
        fn()
    return (time.perf_counter() - t0) * 1e6 / steps


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--limit-batches", type=int, default=0, help="same as --steps N --warmup 1 (a smoke test)")
    a = ap.parse_args()
    if a.limit_batches:
        a.steps, a.warmup = a.limit_batches, 1
    cuda = a.device == "cuda"
    if cuda and not torch.cuda.is_available():
        sys.exit(f"{sys.argv[0]}: torch {torch.__version__} sees no CUDA device; use --device cpu")
    dev = torch.device(a.device)
    torch.manual_seed(0)

    model = ToyModel().to(dev)
    loss_fn = nn.MSELoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.001)
    x = torch.randn(20, 10, device=dev)
    y = torch.randn(20, 5, device=dev)

    def eager():
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()

    for _ in range(a.warmup):
        eager()
    eager_us = timed(eager, a.steps, cuda)
    print(f"eager: {eager_us:.2f} us per step over {a.steps} steps", flush=True)

    graph_us = floor_us = None
    if not cuda:
        print("graph: skipped: CUDA graphs need --device cuda")
    elif not hasattr(torch.cuda, "graphs") or not hasattr(torch.cuda, "CUDAGraph"):
        print(f"graph: skipped: torch {torch.__version__} has no torch.cuda.graphs")
    else:
        try:
            graph_us, floor_us = graphs(model, loss_fn, opt, x, y, dev, a)
        except RuntimeError as e:  # a capture this torch or driver refuses: keep the eager figure
            print(f"graph: failed: {e}")
        print(f"device {torch.cuda.get_device_name(dev)}, torch {torch.__version__}")

    def fmt(v):
        return "-" if v is None else f"{v:.2f}"
    print(f"RESULT eager_us={eager_us:.2f} graph_us={fmt(graph_us)} floor_us={fmt(floor_us)}", flush=True)


def graphs(model, loss_fn, opt, x, y, dev, a):
    """(us per replay of the captured step, us per replay of a one-kernel graph)."""
    # warm up on a side stream before capture, as the recipe requires
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            loss_fn(model(x), y).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        loss_fn(model(x), y).backward()
        opt.step()
    for _ in range(a.warmup):
        g.replay()
    graph_us = timed(g.replay, a.steps, True)
    print(f"graph: {graph_us:.2f} us per step over {a.steps} replays", flush=True)

    z = torch.zeros(1, device=dev)
    tiny = torch.cuda.CUDAGraph()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        z.add_(1)
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(tiny):
        z.add_(1)
    for _ in range(a.warmup):
        tiny.replay()
    floor_us = timed(tiny.replay, a.steps, True)
    print(f"floor: {floor_us:.2f} us per replay of a one-kernel graph", flush=True)
    return graph_us, floor_us


if __name__ == "__main__":
    main()
