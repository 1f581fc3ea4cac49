# tests/golden/torch_files_torch.py: writes the torch.save files that
# tests/test_weights.c and tests/cli/torch_files.sh read, once, with
# PyTorch: no test runs it.  torch_*.pt with Debian's python3-torch 1.13,
# torch2_net.pt and torch2_toy_slices.pt with PyTorch 2.15 from PyPI
# (whose archives add .format_version, .storage_alignment, byteorder and
# .data/serialization_id records, and align each storage to 64 bytes):
#   python3 tests/golden/torch_files_torch.py tests/golden [PREFIX]
# torch_net.pt: the state_dict of test_weights.c's Net (conv1, bn1, fc1),
#   every float of tensor k (in state_dict order) k + i * 0.001 - 0.5 and
#   bn1.num_batches_tracked 7 + its index, the values filled() gives there.
# torch_toy_*.pt: files of ToyModel's names that trainc refuses: the module
#   pickled whole, a checkpoint dict around the state_dict, a transposed
#   (non-contiguous) weight, the pickle of PyTorch before 1.6.
# torch_toy_slices.pt: ToyModel's state_dict whose tensors are slices of
#   one storage at offsets (torch.save keeps views of a storage as such),
#   with float64 biases, every value i * 0.01 of its place in the storage.
import sys
from collections import OrderedDict
import torch

out = sys.argv[1]
pre = sys.argv[2] if len(sys.argv) > 2 else "torch"


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 4, 3)
        self.bn1 = torch.nn.BatchNorm2d(4)
        self.fc1 = torch.nn.Linear(144, 10)


net = Net()
sd = net.state_dict()
for k, (name, t) in enumerate(sd.items()):
    if t.dtype == torch.int64:
        t.fill_(7 + k)
    else:
        t.copy_((k + torch.arange(t.numel(), dtype=torch.float32) * 0.001 - 0.5).reshape(t.shape))
torch.save(sd, f"{out}/{pre}_net.pt")


class ToyModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net1 = torch.nn.Linear(10, 10)
        self.relu = torch.nn.ReLU()
        self.net2 = torch.nn.Linear(10, 5)


torch.manual_seed(0)
toy = ToyModel()
torch.save(toy, f"{out}/{pre}_toy_module.pt")
torch.save({"model": toy.state_dict(), "epoch": 3}, f"{out}/{pre}_toy_checkpoint.pt")
sd = toy.state_dict()
sd["net1.weight"] = sd["net1.weight"].t()
torch.save(sd, f"{out}/{pre}_toy_transposed.pt")
torch.save(toy.state_dict(), f"{out}/{pre}_toy_legacy.pt", _use_new_zipfile_serialization=False)

flat = torch.arange(200, dtype=torch.float32) * 0.01
flat64 = torch.arange(20, dtype=torch.float64) * 0.01
torch.save(OrderedDict([("net1.weight", flat[50:150].view(10, 10)), ("net1.bias", flat64[5:15]),
                        ("net2.weight", flat[150:200].view(5, 10)), ("net2.bias", flat64[0:5])]),
           f"{out}/{pre}_toy_slices.pt")
