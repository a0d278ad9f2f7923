#pragma once
// The whole autograd layer: tensors, the tape, every op, and gradcheck.

#include "tapegrad/autograd/alias_table.h"
#include "tapegrad/autograd/autocast.h"
#include "tapegrad/autograd/checkpoint.h"
#include "tapegrad/autograd/custom_op.h"
#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/format.h"
#include "tapegrad/autograd/generator.h"
#include "tapegrad/autograd/gradcheck.h"
#include "tapegrad/autograd/graph.h"
#include "tapegrad/autograd/hooks.h"
#include "tapegrad/autograd/ops.h"
#include "tapegrad/autograd/parallel.h"
#include "tapegrad/autograd/sparse_rows.h"
#include "tapegrad/autograd/tensor.h"
