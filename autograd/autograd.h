#pragma once
// The whole autograd layer: tensors, the tape, every op, and gradcheck.

#include "autograd/error.h"
#include "autograd/generator.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "autograd/parallel.h"
#include "autograd/tensor.h"
