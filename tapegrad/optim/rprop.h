// Rprop (Riedmiller and Braun 1993), following torch.optim.Rprop: each coordinate moves by its own
// step size against the sign of its gradient; the size grows by etaplus while the gradient keeps its
// sign and shrinks by etaminus when it flips, within [step_size_min, step_size_max]. Per coordinate,
// with prev the last gradient kept:
//   grad * prev > 0:  step_size = clamp(step_size * etaplus),  prev = grad
//   grad * prev < 0:  step_size = clamp(step_size * etaminus), prev = 0 (this step does not move)
//   otherwise:        step_size = clamp(step_size),            prev = grad
//   p = p - sign(prev) * step_size
// step_size starts at the group's lr on the parameter's first step (a later lr does not change it,
// as in torch); prev starts at zero. Rprop is a full-batch method: the gradient's magnitude is never
// used. It takes no weight decay (a group with one is refused at step()), nor sparse gradients.
// State buffers: "prev", "step_size".
//
//   optim::Rprop opt(model->parameters(), optim::RpropOptions(0.01));
#pragma once

#include <string>
#include <tuple>

#include "tapegrad/autograd/arg.h"
#include "tapegrad/optim/optimizer.h"

namespace tapegrad::optim {

using RpropPair = std::tuple<double, double>;

// torch.optim.Rprop's options and defaults.
struct RpropOptions {
  explicit RpropOptions(double lr = 1e-2) : lr_(lr) {}
  TAPEGRAD_ARG(double, lr);
  TAPEGRAD_ARG(RpropPair, etas) = RpropPair{0.5, 1.2};          // (etaminus, etaplus)
  TAPEGRAD_ARG(RpropPair, step_sizes) = RpropPair{1e-6, 50.0};  // (min, max)
};

class Rprop : public Optimizer {
 public:
  // ValueError unless 0 < etaminus < 1 < etaplus and 0 <= step_size_min <= step_size_max (and, as
  // every optimiser, for a negative lr).
  explicit Rprop(const TensorList& params, const RpropOptions& options = RpropOptions());
  explicit Rprop(std::vector<ParamGroup> groups, const RpropOptions& options = RpropOptions());
  const RpropOptions& options() const { return options_; }
  std::vector<std::string> state_buffer_names() const override { return {"prev", "step_size"}; }

 protected:
  void update(const ParamGroup& group, const Tensor& p, const Tensor& g, ParamState& state) override;
  std::string dense_refusal(const ParamGroup& group) const override;

 private:
  RpropOptions options_;
};

}  // namespace tapegrad::optim
