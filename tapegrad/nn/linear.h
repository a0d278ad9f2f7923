#pragma once
// Linear: y = x W^T + b, x: (..., in) -> y: (..., out); W: (out, in), b: (out).
// Initialised like torch.nn.Linear: W and b uniform in +-1/sqrt(in).

#include <cstdint>

#include "tapegrad/nn/module.h"

namespace tapegrad::nn {

class Linear : public UnaryModule {
 public:
  Linear(std::int64_t in_features, std::int64_t out_features, Generator& gen, bool bias = true);
  Tensor forward(const Tensor& x) override;

  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }  // undefined when built without bias
  std::int64_t in_features() const { return in_features_; }
  std::int64_t out_features() const { return out_features_; }

 private:
  std::int64_t in_features_;
  std::int64_t out_features_;
  Tensor weight_;
  Tensor bias_;
};

}  // namespace tapegrad::nn
