"""The archives tests/cli/npz.sh reads as numpy itself writes them, made
once with NumPy (1.24):

    python3 tests/golden/npz_numpy.py tests/golden

toy_savez.npz (numpy.savez, stored) and toy_savez_compressed.npz
(numpy.savez_compressed, deflated), each holding x, 40 x 10 float32, and
y, 40 x 5 float32: the values tests/tools/npy_write gives with --values
0.5,-1.25,2,0.75,-0.5,1,3 and --values 1.5,-0.25,0.125, element by
element in C order, repeated.
"""
import sys

import numpy as np


def ramp(values, shape):
    n = int(np.prod(shape))
    return np.array([values[i % len(values)] for i in range(n)], dtype=np.float32).reshape(shape)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    x = ramp([0.5, -1.25, 2, 0.75, -0.5, 1, 3], (40, 10))
    y = ramp([1.5, -0.25, 0.125], (40, 5))
    np.savez(f"{out}/toy_savez.npz", x=x, y=y)
    np.savez_compressed(f"{out}/toy_savez_compressed.npz", x=x, y=y)


main()
