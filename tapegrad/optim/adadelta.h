// Adadelta (Zeiler 2012), following torch.optim.Adadelta: each coordinate's step is the root of a
// running mean of its past squared steps over the root of a running mean of its squared gradients,
// so the step has the parameter's units and lr is only a scale (1 by default):
//   g = grad + weight_decay * p
//   square_avg = rho * square_avg + (1 - rho) * g^2
//   delta = sqrt(acc_delta + eps) / sqrt(square_avg + eps) * g
//   acc_delta = rho * acc_delta + (1 - rho) * delta^2
//   p = p - lr * delta
// Both buffers start at zero. lr and weight_decay are per group (ParamGroup); rho and eps are shared.
// State buffers: "acc_delta", "square_avg".
//
//   optim::Adadelta opt(model->parameters(), optim::AdadeltaOptions().rho(0.95));
#pragma once

#include "tapegrad/autograd/arg.h"
#include "tapegrad/optim/optimizer.h"

namespace tapegrad::optim {

// torch.optim.Adadelta's options and defaults.
struct AdadeltaOptions {
  explicit AdadeltaOptions(double lr = 1.0) : lr_(lr) {}
  TAPEGRAD_ARG(double, lr);
  TAPEGRAD_ARG(double, rho) = 0.9;
  TAPEGRAD_ARG(double, eps) = 1e-6;
  TAPEGRAD_ARG(double, weight_decay) = 0.0;
};

class Adadelta : public Optimizer {
 public:
  // ValueError for a rho outside [0, 1] or a negative eps (and, as every optimiser, a negative lr or
  // weight_decay).
  explicit Adadelta(const TensorList& params, const AdadeltaOptions& options = AdadeltaOptions());
  explicit Adadelta(std::vector<ParamGroup> groups, const AdadeltaOptions& options = AdadeltaOptions());
  const AdadeltaOptions& options() const { return options_; }
  std::vector<std::string> state_buffer_names() const override { return {"acc_delta", "square_avg"}; }

 protected:
  void update(const ParamGroup& group, const Tensor& p, const Tensor& g, ParamState& state) override;

 private:
  AdadeltaOptions options_;
};

}  // namespace tapegrad::optim
