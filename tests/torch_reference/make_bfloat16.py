#!/usr/bin/python3
"""Writes tests/data/bfloat16_rounding.json: how PyTorch 1.13 rounds float32 and float64 values to
bfloat16, for tests/test_bfloat16.cpp.

The float32 cases are bit patterns: every class by hand (signed zeros, subnormals, the smallest and
largest normals, values that round to infinity, infinities, quiet and signalling NaNs of both signs,
exact ties that round down or up to the even neighbour, and the patterns one below and above each
tie), then 4,000 patterns drawn uniformly from all 2^32. The float64 cases are values whose
conversion shows whether a double is rounded once or twice. Each case holds the input and the bits
of `torch.tensor(x).to(torch.bfloat16)`.

Run with the interpreter that has torch:  /usr/bin/python3 tests/torch_reference/make_bfloat16.py
"""

import json
import os

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_PATH = os.path.join(HERE, "..", "data", "bfloat16_rounding.json")

CLASSES = [
    0x00000000, 0x80000000,                      # +-0
    0x00000001, 0x80000001, 0x00007FFF,          # subnormals rounding to zero or up
    0x00008000, 0x00018000, 0x00008001,          # subnormal ties (down to even, up to even) and above
    0x007FFFFF, 0x00800000, 0x80800000,          # largest subnormal, smallest normals
    0x3F800000, 0xBF800000, 0x40490FDB,          # 1, -1, pi
    0x3F807FFF, 0x3F808000, 0x3F808001,          # below, at, above a tie that rounds down to even
    0x3F817FFF, 0x3F818000, 0x3F818001,          # below, at, above a tie that rounds up to even
    0x7F7F7FFF, 0x7F7F8000, 0x7F7FFFFF,          # the largest floats: kept, or rounded to infinity
    0xFF7FFFFF,
    0x7F800000, 0xFF800000,                      # +-inf
    0x7FC00000, 0xFFC00000,                      # quiet NaNs
    0x7F800001, 0xFF800001, 0x7FBFFFFF,          # signalling NaNs whose payload is in the low half only
    0x7FFFFFFF, 0x7F810000,
]

DOUBLES = [
    0.0, -0.0, 1.0, 1.00390625, 1.0039062500000002, 1.0117187499999998, 1.01171875,
    3.4e38, 3.3961e38, 1e-40, -1e-45, 1e300, -1e300, 1e-300, float("inf"), float("-inf"),
    float("nan"), 0.1, -0.3, 65504.0, 12345.678,
]


def bf16_bits(t):
    return t.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16).astype(int).tolist()


def main():
    rng = np.random.default_rng(20261126)
    patterns = CLASSES + rng.integers(0, 2**32, size=4000, dtype=np.uint64).astype(int).tolist()
    floats = torch.from_numpy(np.array(patterns, dtype=np.uint32).view(np.float32).copy())
    doubles = torch.tensor(DOUBLES, dtype=torch.float64)
    out = {
        "float32": [[p, b] for p, b in zip(patterns, bf16_bits(floats))],
        "float64": [[repr(d), b] for d, b in zip(DOUBLES, bf16_bits(doubles))],
        "torch": torch.__version__,
    }
    with open(OUT_PATH, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
