// ASGD: averaged stochastic gradient descent (Polyak and Juditsky 1992), following torch.optim.ASGD. With
// t the parameter's step (1 for its first) and lr, lambd, alpha, t0 the options:
//   eta = lr / (1 + lambd * lr * (t - 1))^alpha,   mu = 1 / max(1, t - 1 - t0)
//   g = grad + weight_decay * p
//   p = p * (1 - lambd * eta) - eta * g
//   ax = p while mu is 1, then ax + mu * (p - ax): from step t0 + 2 on, the running mean of the
//   iterates.
// The averaged parameters are the result: averaged() hands them out (state buffer "ax"). torch keeps eta
// and mu as tensors of its default dtype (float32 unless changed) and computes eta from the lr of the step
// before; here they are doubles from the step count and the current lr (the same numbers when the default
// dtype is float64 and the lr does not change). No sparse gradients.
//
//   optim::ASGD opt(model->parameters(), optim::ASGDOptions(0.01).t0(1000));
//   ... train ...
//   for (const Tensor& p : model->parameters()) p.detach().copy_(opt.averaged(p));  // evaluate the average
#pragma once

#include <string>
#include <vector>

#include "tapegrad/autograd/arg.h"
#include "tapegrad/optim/optimizer.h"

namespace tapegrad::optim {

// torch.optim.ASGD's options and defaults.
struct ASGDOptions {
  explicit ASGDOptions(double lr = 1e-2) : lr_(lr) {}
  TAPEGRAD_ARG(double, lr);
  TAPEGRAD_ARG(double, lambd) = 1e-4;
  TAPEGRAD_ARG(double, alpha) = 0.75;
  TAPEGRAD_ARG(double, t0) = 1e6;
  TAPEGRAD_ARG(double, weight_decay) = 0.0;
};

class ASGD : public Optimizer {
 public:
  // ValueError for a negative or NaN lambd, alpha or t0 (and, as every optimiser, a negative lr or
  // weight_decay).
  explicit ASGD(const TensorList& params, const ASGDOptions& options = ASGDOptions());
  explicit ASGD(std::vector<ParamGroup> groups, const ASGDOptions& options = ASGDOptions());
  const ASGDOptions& options() const { return options_; }
  std::vector<std::string> state_buffer_names() const override { return {"ax"}; }

  // A copy of the average of parameter p's iterates (its state's "ax"); of p before its first step. ValueError
  // for a tensor that is not one of this optimiser's parameters.
  Tensor averaged(const Tensor& p) const;

 protected:
  void update(const ParamGroup& group, const Tensor& p, const Tensor& g, ParamState& state) override;

 private:
  ASGDOptions options_;
};

}  // namespace tapegrad::optim
