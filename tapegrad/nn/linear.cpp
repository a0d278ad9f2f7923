#include "tapegrad/nn/linear.h"

#include <cmath>
#include <string>

#include "tapegrad/nn/init.h"

namespace tapegrad::nn {

Linear::Linear(std::int64_t in_features, std::int64_t out_features, Generator& gen, bool bias)
    : in_features_(in_features), out_features_(out_features) {
  if (in_features <= 0 || out_features <= 0)
    throw ValueError("Linear: in_features and out_features must be positive, got " + std::to_string(in_features) +
                     " and " + std::to_string(out_features));
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  weight_ = register_parameter("weight", uniform({out_features, in_features}, -bound, bound, gen));
  if (bias) bias_ = register_parameter("bias", uniform({out_features}, -bound, bound, gen));
}

Tensor Linear::forward(const Tensor& x) {
  if (x.dim() == 0 || x.shape().back() != in_features_)
    throw ShapeError("Linear: expected input with last dimension " + std::to_string(in_features_) + ", got shape " +
                     x.shape().str());
  // x: (..., in) @ W^T: (in, out) + b in one gemm; the transpose is a gemm flag, not a copy.
  return linear(x, weight_, bias_);
}

}  // namespace tapegrad::nn
