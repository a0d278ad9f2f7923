#!/usr/bin/env python3
"""Writes the .npy and .npz files in this directory with NumPy itself, and values.json with what each
holds, so that tests/test_npy.cpp checks io::load_npy and io::load_npz against the real writer.

    /usr/bin/python3 tests/data/npy/make_fixtures.py

values.json maps each file to the descr and fortran_order its header has (checked, so that a file
regenerated without its property fails), the tapegrad dtype it loads as, its shape and its elements in
C order (exact: every float is a float32 or float64 that JSON's shortest repr carries unchanged). For an
.npz it lists the members in archive order. The archives' timestamps are those of the run (np.savez
takes the clock), so regenerating changes their bytes but nothing the tests check."""
import json
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def tapegrad_dtype(a):
    if a.dtype.kind == "f":
        return {4: "float32", 8: "float64"}[a.dtype.itemsize]
    if a.dtype.kind in "iu":
        return "int64"
    assert a.dtype.kind == "b"
    return "bool"


def describe(a):
    values = [bool(v) if a.dtype.kind == "b" else int(v) if a.dtype.kind in "iu" else float(v)
              for v in a.ravel(order="C").tolist()]
    return {"dtype": tapegrad_dtype(a), "shape": list(a.shape), "values": values}


def header_of(path):
    with open(path, "rb") as f:
        version = np.lib.format.read_magic(f)
        shape, fortran_order, dtype = np.lib.format._read_array_header(f, version)
    return version, fortran_order, dtype


def main():
    f32 = np.array([[1.5, -2.0, 3.25], [0.0, 0.1, -7.0]], dtype=np.float32)
    arrays = {
        "f32.npy": f32,
        # Column-major data of a (2, 3, 4) array: the reader must reorder it.
        "f64_fortran.npy": np.asfortranarray(np.arange(24, dtype=np.float64).reshape(2, 3, 4) * 0.25 - 3.0),
        "i64.npy": np.array([-3, 0, 9000000000, -2**63, 2**63 - 1], dtype=np.int64),
        "bool.npy": np.array([[True, False], [False, True], [True, True]]),
        "i32_bigendian.npy": np.array([1, -2, 65536, -2**31, 2**31 - 1], dtype=">i4"),
        "f32_bigendian.npy": np.array([0.5, -1e-3, 3.0e38], dtype=">f4"),
        "u8_small.npy": np.array([[0, 1], [128, 255]], dtype=np.uint8),
        "i16.npy": np.array([-32768, -1, 32767], dtype=np.int16),
        "scalar.npy": np.array(2.5),
        "empty.npy": np.zeros((0, 4), dtype=np.float32),
    }
    out = {}
    for name, a in arrays.items():
        path = os.path.join(HERE, name)
        np.save(path, a)
        out[name] = describe(a)
    # The later format versions, forced (NumPy picks them only for headers too large for 1.0).
    for name, version in (("v2.npy", (2, 0)), ("v3.npy", (3, 0))):
        path = os.path.join(HERE, name)
        with open(path, "wb") as f:
            np.lib.format.write_array(f, f32, version=version)
        out[name] = describe(f32)
    for name in out:
        version, fortran_order, dtype = header_of(os.path.join(HERE, name))
        out[name]["descr"] = dtype.str
        out[name]["fortran_order"] = fortran_order
        out[name]["version"] = "%d.%d" % version

    weights = np.array([[0.5, -1.0], [2.0, 4.5]], dtype=np.float32)
    ids = np.array([7, -1, 3], dtype=np.int64)
    np.savez(os.path.join(HERE, "arrays.npz"), weights=weights, ids=ids)
    out["arrays.npz"] = {"members": [dict(name="weights", **describe(weights)), dict(name="ids", **describe(ids))]}
    grid = np.arange(16, dtype=np.float64).reshape(4, 4) / 8
    mask = grid > 0.9
    scale = np.array(-0.75, dtype=np.float32)
    np.savez_compressed(os.path.join(HERE, "arrays_compressed.npz"), grid=grid, mask=mask, scale=scale)
    out["arrays_compressed.npz"] = {"members": [dict(name="grid", **describe(grid)),
                                                dict(name="mask", **describe(mask)),
                                                dict(name="scale", **describe(scale))]}

    # One line per file.
    with open(os.path.join(HERE, "values.json"), "w") as f:
        f.write("{\n" + ",\n".join(" %s: %s" % (json.dumps(k), json.dumps(v)) for k, v in out.items()) + "\n}\n")


if __name__ == "__main__":
    main()
