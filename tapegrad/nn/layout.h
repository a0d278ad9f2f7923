#pragma once
// Shapes and permutations that keep a tensor's leading (batch) axes and rearrange the ones after
// them: the reshapes of the vision layers (pixel shuffles, adaptive pools).

#include <cstdint>
#include <initializer_list>

#include "tapegrad/autograd/tensor.h"

namespace tapegrad::nn::detail {

// x's axes before its last `trailing`, then `tail`.
inline Shape lead_then_shape(const Tensor& x, int trailing, std::initializer_list<std::int64_t> tail) {
  Shape shape;
  for (int d = 0; d + trailing < x.dim(); ++d) shape.push_back(x.shape()[d]);
  for (const std::int64_t e : tail) shape.push_back(e);
  return shape;
}

// The permutation keeping the first `lead` axes and ordering the ones after them as `tail` (indices
// counted from the first of them).
inline Dims lead_then(int lead, std::initializer_list<int> tail) {
  Dims order;
  for (int d = 0; d < lead; ++d) order.push_back(d);
  for (const int d : tail) order.push_back(lead + d);
  return order;
}

}  // namespace tapegrad::nn::detail
