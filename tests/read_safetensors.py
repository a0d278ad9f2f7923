#!/usr/bin/env python3
"""Independent safetensors reader (json + struct only) for the file written by the doctest case
"checkpoint: write the file for the independent Python reader". Parses the layout from the format
description (u64 LE header length, JSON header, raw little-endian C-order data) and checks names,
dtypes, shapes and values, and recomputes each tensor's checksum (the "tapegrad.crc32.<name>"
metadata entries) with Python's zlib. Usage: read_safetensors.py FILE"""
import json
import struct
import sys
import zlib

CHECKSUM_PREFIX = "tapegrad.crc32."

FORMATS = {"F32": ("<f", 4), "F64": ("<d", 8), "I64": ("<q", 8), "BOOL": ("<?", 1), "BF16": (None, 2)}


def read(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    assert n % 8 == 0, "header length %d not a multiple of 8" % n
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = raw[8 + n:]
    meta = header.pop("__metadata__", {})
    tensors = {}
    checksums = {}
    end_max = 0
    for name, e in header.items():
        fmt, size = FORMATS[e["dtype"]]
        begin, end = e["data_offsets"]
        count = 1
        for d in e["shape"]:
            count *= d
        assert end - begin == count * size, name
        if e["dtype"] == "BF16":  # the upper half of a float32
            halves = [struct.unpack_from("<H", data, begin + i * 2)[0] for i in range(count)]
            values = [struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in halves]
        else:
            values = [struct.unpack_from(fmt, data, begin + i * size)[0] for i in range(count)]
        tensors[name] = (e["dtype"], e["shape"], values)
        checksums[name] = "%08x" % zlib.crc32(data[begin:end])
        end_max = max(end_max, end)
    assert end_max == len(data), "data buffer %d bytes, tensors cover %d" % (len(data), end_max)
    for name, crc in checksums.items():
        stored = meta.pop(CHECKSUM_PREFIX + name, None)
        assert stored == crc, "%s: stored checksum %s, computed %s" % (name, stored, crc)
    assert not any(k.startswith(CHECKSUM_PREFIX) for k in meta), "checksums of absent tensors: %s" % meta
    return tensors, meta


def main():
    tensors, meta = read(sys.argv[1])
    expected = {
        "weight": ("F32", [3, 2], [1.5, 0.0, -2.0, 0.5, 3.25, -7.0]),
        "bias": ("F64", [2], [0.25, -0.125]),
        "steps": ("I64", [2], [-3, 9000000000]),
        "mask": ("BOOL", [3], [True, False, True]),
        "scale": ("F32", [], [2.0]),
        "nothing": ("F32", [0, 4], []),
        # 1/3 rounds to the nearest bfloat16, 0.333984375
        "half": ("BF16", [4], [1.0, -2.5, 3.140625, 0.333984375]),
    }
    failures = []
    if sorted(tensors) != sorted(expected):
        failures.append("names %s != %s" % (sorted(tensors), sorted(expected)))
    for name, want in expected.items():
        if name in tensors and tensors[name] != want:
            failures.append("%s: got %s, expected %s" % (name, tensors[name], want))
    if meta != {"format": "pt", "step": "42"}:
        failures.append("metadata %s" % meta)
    if failures:
        print("\n".join(failures))
        return 1
    print("read_safetensors: %d tensors OK" % len(tensors))
    return 0


if __name__ == "__main__":
    sys.exit(main())
