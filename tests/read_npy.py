#!/usr/bin/env python3
"""Loads with NumPy the files the doctest case "npy: write the files for numpy" wrote, and checks them
against the fixtures NumPy wrote (tests/data/npy): every .npy fixture as tapegrad loaded and saved it
again (same values, the tapegrad dtype values.json names, C order, and the very bytes np.save writes for
that array), a transposed view, a large array, the two archives saved again stored and deflated (the
same members in the same order, intact by zipfile's CRC check), and an archive with a non-ASCII name.
Usage: read_npy.py OUT_DIR FIXTURE_DIR"""
import io
import json
import os
import sys
import zipfile

import numpy as np


def main():
    out_dir, fixture_dir = sys.argv[1], sys.argv[2]
    with open(os.path.join(fixture_dir, "values.json")) as f:
        values = json.load(f)
    failures = []
    checked = 0

    def check(name, got, want):
        nonlocal checked
        checked += 1
        if got.dtype != want.dtype or got.shape != want.shape or not np.array_equal(got, want):
            failures.append("%s: got %s %s %r, expected %s %s %r" % (
                name, got.dtype, got.shape, got.ravel()[:8], want.dtype, want.shape, want.ravel()[:8]))

    def check_npy(name, want):
        path = os.path.join(out_dir, name)
        got = np.load(path)
        check(name, got, want)
        buffer = io.BytesIO()
        np.save(buffer, got)
        with open(path, "rb") as f:
            if f.read() != buffer.getvalue():
                failures.append("%s: not the bytes np.save writes for the same array" % name)

    for name, entry in values.items():
        if name.endswith(".npy"):
            want = np.load(os.path.join(fixture_dir, name)).astype(entry["dtype"])
            check_npy(name, np.array(want, order="C"))  # (ascontiguousarray makes 0-d arrays 1-d)
    f32 = np.load(os.path.join(fixture_dir, "f32.npy"))
    check_npy("f32_transposed.npy", np.ascontiguousarray(f32.T))
    check_npy("large.npy", np.arange(37000, dtype=np.float64).reshape(1000, 37) / 8)

    for name, method in (("arrays.npz", zipfile.ZIP_STORED), ("arrays_compressed.npz", zipfile.ZIP_DEFLATED)):
        path = os.path.join(out_dir, name)
        with zipfile.ZipFile(path) as z:
            bad = z.testzip()
            if bad is not None:
                failures.append("%s: member %s fails its CRC check" % (name, bad))
            kinds = {info.compress_type for info in z.infolist()}
            if kinds != {method}:
                failures.append("%s: compression %s, expected %s" % (name, kinds, method))
        got, want = np.load(path), np.load(os.path.join(fixture_dir, name))
        if got.files != want.files:
            failures.append("%s: members %s, expected %s" % (name, got.files, want.files))
        for key in want.files:
            check("%s[%s]" % (name, key), got[key], want[key])
    names = np.load(os.path.join(out_dir, "names.npz"))
    if names.files != ["gewicht_ä", "ids"]:
        failures.append("names.npz: members %s" % names.files)
    else:
        check("names.npz[gewicht_ä]", names["gewicht_ä"], np.ascontiguousarray(f32.T))
        check("names.npz[ids]", names["ids"], np.array([1, 2], dtype=np.int64))

    if failures or checked < 20:
        print("\n".join(failures) or "only %d arrays checked" % checked)
        sys.exit(1)
    print("read_npy: %d arrays loaded by NumPy %s match" % (checked, np.__version__))


if __name__ == "__main__":
    main()
