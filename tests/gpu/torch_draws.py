"""tests/gpu/torch_draws.py: does this machine's PyTorch draw what trainc draws?

trainc shuffles as torch.randperm and initialises as torch.nn's constructors
after torch.manual_seed, checked against PyTorch 1.13 by the test suite
(tests/test_data.c, tests/test_optim.c, tests/cli/state_dict.sh).  This
compares the same values with the PyTorch installed here, so a newer
version that draws differently is noticed.  Prints one line,
"order: same|differs; initial weights: same|differs", and exits 0 if both
are the same, 1 if not, 2 without torch.
"""
import json
import os
import struct
import sys

try:
    import torch
except ImportError:
    print("no torch")
    sys.exit(2)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
from torch_net import Net, ToyModel  # noqa: E402


def golden(path):
    """name -> float32 tensor of a safetensors file."""
    with open(path, "rb") as f:
        b = f.read()
    n = struct.unpack("<Q", b[:8])[0]
    out = {}
    for k, v in json.loads(b[8:8 + n]).items():
        if k != "__metadata__":
            s, e = v["data_offsets"]
            out[k] = torch.frombuffer(bytearray(b[8 + n + s:8 + n + e]), dtype=torch.float32).view(v["shape"])
    return out


g = torch.Generator()
order = torch.randperm(10, generator=g.manual_seed(1)).tolist() == [5, 6, 1, 2, 0, 8, 9, 3, 7, 4]
p = torch.randperm(60000, generator=g.manual_seed(2))
order = order and p[:2].tolist() == [43848, 54736] and p[30000].item() == 50644 and p[59999].item() == 43029

torch.manual_seed(1)
net = Net().state_dict()
init = (net["conv1.weight"].flatten()[0].item() == torch.tensor(0.171754405).item()
        and net["fc1.weight"].flatten()[-1].item() == torch.tensor(0.000659355312).item()
        and net["fc2.bias"][-1].item() == torch.tensor(0.0502154492).item())
torch.manual_seed(1)
toy, want = ToyModel().state_dict(), golden(os.path.join(HERE, "..", "golden", "toy_seed1.safetensors"))
init = init and all(torch.equal(toy[k], want[k]) for k in want)

print(f"order: {'same' if order else 'differs'}; initial weights: {'same' if init else 'differs'} (torch {torch.__version__})")
sys.exit(0 if order and init else 1)
