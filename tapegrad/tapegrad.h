#pragma once
// All of tapegrad, layer by layer: autograd -> nn -> optim -> io, train; data beside them.

#include "tapegrad/autograd/autograd.h"
#include "tapegrad/data/data.h"
#include "tapegrad/io/io.h"
#include "tapegrad/nn/nn.h"
#include "tapegrad/optim/optim.h"
#include "tapegrad/train/train.h"
