#pragma once
// Everything in tapegrad::io: durable file writes and safetensors files of named tensors and modules.

#include "tapegrad/io/file.h"
#include "tapegrad/io/safetensors.h"
