// RMSprop, following torch.optim.RMSprop: each coordinate's step is divided by the root of a running
// mean of its squared gradients (Hinton's lecture 6e), optionally centred by the running mean of the
// gradients and smoothed by momentum:
//   g = grad + weight_decay * p
//   square_avg = alpha * square_avg + (1 - alpha) * g^2
//   centered:  grad_avg = alpha * grad_avg + (1 - alpha) * g,  avg = sqrt(square_avg - grad_avg^2) + eps
//   otherwise: avg = sqrt(square_avg) + eps
//   momentum > 0: buf = momentum * buf + g / avg,  p = p - lr * buf
//   otherwise:    p = p - lr * g / avg
// The buffers start at zero. lr and weight_decay are per group (ParamGroup); alpha, eps, momentum and
// centered are shared. Sparse gradients are refused, as in torch.
// State buffers: "square_avg", "momentum_buffer" (momentum > 0), "grad_avg" (centered).
//
//   optim::RMSprop opt(model->parameters(), optim::RMSpropOptions(1e-3).momentum(0.9));
#pragma once

#include "tapegrad/autograd/arg.h"
#include "tapegrad/optim/optimizer.h"

namespace tapegrad::optim {

// torch.optim.RMSprop's options and defaults.
struct RMSpropOptions {
  explicit RMSpropOptions(double lr = 1e-2) : lr_(lr) {}
  TAPEGRAD_ARG(double, lr);
  TAPEGRAD_ARG(double, alpha) = 0.99;
  TAPEGRAD_ARG(double, eps) = 1e-8;
  TAPEGRAD_ARG(double, weight_decay) = 0.0;
  TAPEGRAD_ARG(double, momentum) = 0.0;
  TAPEGRAD_ARG(bool, centered) = false;
};

class RMSprop : public Optimizer {
 public:
  // ValueError for an alpha outside [0, 1] or a negative eps or momentum (and, as every optimiser, a
  // negative lr or weight_decay).
  explicit RMSprop(const TensorList& params, const RMSpropOptions& options = RMSpropOptions());
  explicit RMSprop(std::vector<ParamGroup> groups, const RMSpropOptions& options = RMSpropOptions());
  const RMSpropOptions& options() const { return options_; }
  // "square_avg", with "grad_avg" when centered and "momentum_buffer" when momentum > 0, sorted.
  std::vector<std::string> state_buffer_names() const override;

 protected:
  void update(const ParamGroup& group, const Tensor& p, const Tensor& g, ParamState& state) override;

 private:
  RMSpropOptions options_;
};

}  // namespace tapegrad::optim
