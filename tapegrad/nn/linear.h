#pragma once
// Linear: y = x W^T + b, x: (..., in) -> y: (..., out); W: (out, in), b: (out).
// Initialised like torch.nn.Linear: W and b uniform in +-1/sqrt(in), drawn from the options'
// generator, or the default generator (tapegrad::default_generator()) when none is given.
//
//   nn::Linear fc(64, 10);                                  // with bias
//   nn::Linear proj{nn::LinearOptions(64, 10).bias(false)};
//   Tensor y = fc(x);                                       // x: (B, 64) -> y: (B, 10)

#include <cstdint>

#include "tapegrad/nn/module.h"

namespace tapegrad::nn {

struct LinearOptions {
  LinearOptions(std::int64_t in_features, std::int64_t out_features)
      : in_features_(in_features), out_features_(out_features) {}
  TAPEGRAD_ARG(std::int64_t, in_features);
  TAPEGRAD_ARG(std::int64_t, out_features);
  TAPEGRAD_ARG(bool, bias) = true;
  // Draws the initial weights from *generator instead of the default generator (not owned; used
  // only while the module is constructed).
  TAPEGRAD_ARG(Generator*, generator) = nullptr;
};

class LinearImpl : public UnaryModule {
 public:
  LinearImpl(std::int64_t in_features, std::int64_t out_features)
      : LinearImpl(LinearOptions(in_features, out_features)) {}
  explicit LinearImpl(const LinearOptions& options);
  Tensor forward(const Tensor& x) override;

  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }  // undefined when built without bias
  std::int64_t in_features() const { return options_.in_features(); }
  std::int64_t out_features() const { return options_.out_features(); }
  const LinearOptions& options() const { return options_; }

 private:
  LinearOptions options_;
  Tensor weight_;
  Tensor bias_;
};
TAPEGRAD_MODULE(Linear);

}  // namespace tapegrad::nn
