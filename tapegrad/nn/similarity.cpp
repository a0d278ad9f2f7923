// normalize and cosine_similarity, composed from autograd ops (norm, clamp, division, sum).

#include "tapegrad/nn/similarity.h"

#include "tapegrad/autograd/shape.h"

namespace tapegrad::nn {

Tensor normalize(const Tensor& x, double p, std::int64_t axis, double eps) {
  const Tensor denominator = clamp(norm(x, p, {axis}, /*keepdim=*/true), eps, std::nullopt);  // x's rank, 1 on axis
  return x / denominator;
}

Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, std::int64_t axis, double eps) {
  const Shape shape = broadcast_shapes(x1.shape(), x2.shape(), "cosine_similarity");
  const Tensor a = x1.shape() == shape ? x1 : expand(x1, shape);
  const Tensor b = x2.shape() == shape ? x2 : expand(x2, shape);
  return sum(normalize(a, 2.0, axis, eps) * normalize(b, 2.0, axis, eps), {axis});
}

}  // namespace tapegrad::nn
