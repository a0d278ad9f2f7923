#pragma once
// Everything in tapegrad::io: durable file writes, safetensors files of named tensors and modules,
// NumPy's .npy and .npz files, and word vectors in the word2vec formats.

#include "tapegrad/io/file.h"
#include "tapegrad/io/hash.h"
#include "tapegrad/io/npy.h"
#include "tapegrad/io/safetensors.h"
#include "tapegrad/io/svg.h"
#include "tapegrad/io/word2vec.h"
