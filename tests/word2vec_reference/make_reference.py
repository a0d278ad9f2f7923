#!/usr/bin/python3
"""Word vectors written by gensim (Debian's python3-gensim), for tests/test_word2vec_format.cpp.

Writes, into tests/data/word2vec/:
  gensim.txt, gensim.bin   the same KeyedVectors saved by save_word2vec_format, text and binary
  reference.json           their words and float32 values (each written as the exact double)

    /usr/bin/python3 tests/word2vec_reference/make_reference.py

With --check FILE text|binary it instead loads FILE with gensim and compares it with
reference.json. tests/test_word2vec_format.cpp writes tapegrad's own files of the same vectors
(tapegrad.txt, tapegrad.bin) into the directory $TAPEGRAD_WORD2VEC_OUT when it is set; checking
them shows that gensim reads what save_word2vec writes.
"""

import json
import os
import sys

import numpy as np
from gensim.models import KeyedVectors

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "word2vec")

WORDS = ["the", "lord", "café", "naïve", "x", "in_the_beginning"]
DIM = 5


def vectors():
    rng = np.random.default_rng(20261125)
    v = rng.normal(size=(len(WORDS), DIM)).astype(np.float32)
    # Values whose printing is awkward: tiny, large, negative zero, exact, subnormal.
    v[0, :] = [1e-5, -123456.78, -0.0, 0.5, 1.4e-45]
    return v


def check(path, fmt):
    ref = json.load(open(os.path.join(OUT, "reference.json")))
    kv = KeyedVectors.load_word2vec_format(path, binary=(fmt == "binary"))
    assert list(kv.index_to_key) == ref["words"], (kv.index_to_key, ref["words"])
    want = np.array(ref["vectors"], dtype=np.float32)
    assert np.array_equal(kv.vectors.view(np.uint32), want.view(np.uint32)), (kv.vectors, want)
    print(f"gensim {fmt}: {path}: {len(kv.index_to_key)} words x {kv.vector_size}, every float32 bit-identical")


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--check":
        check(sys.argv[2], sys.argv[3])
        return
    os.makedirs(OUT, exist_ok=True)
    v = vectors()
    kv = KeyedVectors(vector_size=DIM)
    kv.add_vectors(WORDS, v)
    kv.save_word2vec_format(os.path.join(OUT, "gensim.txt"), binary=False)
    kv.save_word2vec_format(os.path.join(OUT, "gensim.bin"), binary=True)
    with open(os.path.join(OUT, "reference.json"), "w") as f:
        json.dump({"words": WORDS, "vectors": [[float(x) for x in row] for row in v]}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
