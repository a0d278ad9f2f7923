#pragma once
// Everything in tapegrad::data: vocabularies, tokenizers, datasets and loaders, splits.

#include "tapegrad/data/bpe.h"
#include "tapegrad/data/dataset.h"
#include "tapegrad/data/prefetch.h"
#include "tapegrad/data/split.h"
#include "tapegrad/data/subwords.h"
#include "tapegrad/data/token_stream.h"
#include "tapegrad/data/tokenizer.h"
#include "tapegrad/data/vocab.h"
