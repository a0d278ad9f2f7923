// Adagrad, following torch.optim.Adagrad: each coordinate's step shrinks with the square root of
// the sum of its squared gradients. With t = state.step (the steps this parameter took):
//   g = grad + weight_decay * p
//   clr = lr / (1 + (t - 1) * lr_decay)
//   sum = sum + g^2
//   p = p - clr * g / (sqrt(sum) + eps)
// sum starts at initial_accumulator_value. lr and weight_decay are per group (ParamGroup);
// lr_decay, initial_accumulator_value and eps are shared. A row-sparse gradient (an embedding with
// sparse gradients, as GloVe's tables) is coalesced and applied to its rows only: the other rows of
// p and of sum stay as they were, bit for bit; it needs weight_decay 0, as in torch.
// State buffer: "sum", dense like the parameter.
//
//   optim::Adagrad opt(model->parameters(), optim::AdagradOptions(0.05));
#pragma once

#include "tapegrad/autograd/arg.h"
#include "tapegrad/optim/optimizer.h"

namespace tapegrad::optim {

// torch.optim.Adagrad's options and defaults.
struct AdagradOptions {
  explicit AdagradOptions(double lr = 1e-2) : lr_(lr) {}
  TAPEGRAD_ARG(double, lr);
  TAPEGRAD_ARG(double, lr_decay) = 0.0;
  TAPEGRAD_ARG(double, weight_decay) = 0.0;
  TAPEGRAD_ARG(double, initial_accumulator_value) = 0.0;
  TAPEGRAD_ARG(double, eps) = 1e-10;
};

class Adagrad : public Optimizer {
 public:
  // ValueError for a negative lr_decay, initial_accumulator_value or eps (and, as every optimiser,
  // a negative lr or weight_decay).
  Adagrad(const TensorList& params, const AdagradOptions& options);
  Adagrad(std::vector<ParamGroup> groups, const AdagradOptions& options);
  const AdagradOptions& options() const { return options_; }
  std::vector<std::string> state_buffer_names() const override { return {"sum"}; }

 protected:
  void update(const ParamGroup& group, const Tensor& p, const Tensor& g, ParamState& state) override;
  void update_sparse(const ParamGroup& group, const Tensor& p, const SparseRows& g, ParamState& state) override;
  std::string sparse_refusal(const ParamGroup& group) const override;

 private:
  // The step's learning rate, lr / (1 + (t - 1) lr_decay), in double as torch computes it.
  double step_lr(const ParamGroup& group, const ParamState& state) const;
  // "sum" of p's state, created at initial_accumulator_value on p's first step.
  Tensor& accumulator(const Tensor& p, ParamState& state) const;

  AdagradOptions options_;
};

}  // namespace tapegrad::optim
