#pragma once
// Everything in tapegrad::data: vocabularies, tokenizers, batching, splits and the spam corpus.

#include "data/dataset.h"
#include "data/spam.h"
#include "data/split.h"
#include "data/tokenizer.h"
#include "data/vocab.h"
