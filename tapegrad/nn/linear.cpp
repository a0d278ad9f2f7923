#include "tapegrad/nn/linear.h"

#include <cmath>
#include <string>

#include "tapegrad/nn/functional.h"
#include "tapegrad/nn/init.h"

namespace tapegrad::nn {

LinearImpl::LinearImpl(const LinearOptions& options) : options_(options) {
  const std::int64_t in_features = options.in_features(), out_features = options.out_features();
  if (in_features <= 0 || out_features <= 0)
    throw ValueError(
        message("Linear: in_features and out_features must be positive, got ", in_features, " and ", out_features));
  Generator& gen = generator_or_default(options.generator());
  options_.generator(nullptr);  // not kept: it need not outlive the construction
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  weight_ = register_parameter("weight", uniform({out_features, in_features}, -bound, bound, gen));
  if (options.bias()) bias_ = register_parameter("bias", uniform({out_features}, -bound, bound, gen));
}

Tensor LinearImpl::forward(const Tensor& x) {
  const std::int64_t in_features = options_.in_features();
  if (x.dim() == 0 || x.shape().back() != in_features)
    throw ShapeError(
        message("Linear: expected input with last dimension ", in_features, ", got shape ", x.shape().str()));
  // x: (..., in) @ W^T: (in, out) + b in one gemm; the transpose is a gemm flag, not a copy.
  return functional::linear(x, weight_, bias_);
}

}  // namespace tapegrad::nn
