// Gradient clipping, as torch.nn.utils.clip_grad_norm_ / clip_grad_value_. Parameters without a grad are skipped;
// a row-sparse gradient (Tensor::sparse_grad) is coalesced and its rows clipped.
#pragma once

#include <limits>

#include "tapegrad/autograd/graph.h"
#include "tapegrad/autograd/tensor.h"

namespace tapegrad::optim {

// total = (sum over all grad elements |g|^norm_type)^(1/norm_type), or max |g| for norm_type = infinity.
// When total > max_norm every grad is scaled in place by max_norm / (total + 1e-6).
// Returns total (before clipping). ValueError for max_norm < 0 or norm_type <= 0.
double clip_grad_norm(const TensorList& params, double max_norm, double norm_type = 2.0);

// Clamps every grad element to [-clip, clip] in place. ValueError for clip < 0.
void clip_grad_value(const TensorList& params, double clip);

}  // namespace tapegrad::optim
