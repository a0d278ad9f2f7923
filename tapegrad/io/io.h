#pragma once
// Everything in tapegrad::io: safetensors files of named tensors and modules.

#include "tapegrad/io/safetensors.h"
