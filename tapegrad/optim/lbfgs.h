// L-BFGS, following torch.optim.LBFGS: a quasi-Newton method for full-batch problems. Each step(closure)
// runs up to max_iter iterations; each iteration turns the current gradient into a direction through the
// last history_size pairs (s, y) of parameter and gradient changes (the two-loop recursion, the initial
// inverse Hessian scaled by y.s / y.y), then moves along it by lr, or by a step a strong-Wolfe line search
// finds (cubic interpolation, c1 = 1e-4, c2 = 0.9, at most 25 evaluations after the first, torch's fixed
// 1e-9 as the narrowest bracket whatever tolerance_change is). A pair enters the history only when
// y.s > 1e-10. The first iteration ever scales its step to min(1, 1 / |g|_1) * lr. Iterations stop at
// max_iter, at max_eval closure calls in this step, when the largest gradient component is at most
// tolerance_grad, or when the step, or the change of loss, is below tolerance_change.
//
// The closure zeroes the gradients, computes the loss, backpropagates it and returns it; it is called with
// gradients enabled, and step() returns the loss of its first call:
//
//   optim::LBFGS opt(model->parameters(), optim::LBFGSOptions(1.0).line_search(optim::LineSearch::StrongWolfe));
//   opt.step([&] { opt.zero_grad(); Tensor loss = criterion(model->forward(x), y); loss.backward(); return loss; });
//
// The parameters are treated as one vector: one group, one floating dtype (float32 or float64), no weight
// decay; a parameter without a gradient counts as a zero gradient, a row-sparse one as its dense form. The
// plain step() (without a closure) is a ValueError; a closure that throws in the line search leaves the
// parameters where the search started. Step sizes, curvatures and dot products are doubles (torch keeps
// them in the parameters' dtype), so float32 runs differ from torch's by rounding; float64 runs agree.
// Memory: 2 * history_size + 3 vectors the size of all parameters together. State (state_tensors /
// load_state): "stepcount", "lbfgs.func_evals", "lbfgs.n_iter", and, once an iteration ran, "lbfgs.d",
// "lbfgs.t", "lbfgs.old_dirs" and "lbfgs.old_steps" ((k, n) for a history of k pairs), "lbfgs.ro" (k),
// "lbfgs.h_diag", "lbfgs.prev_flat_grad", "lbfgs.prev_loss"; a run resumed from them continues
// bit-identically.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tapegrad/autograd/arg.h"
#include "tapegrad/optim/optimizer.h"

namespace tapegrad::optim {

// How LBFGS chooses the step along its direction: lr itself, or a line search satisfying the strong Wolfe
// conditions (torch's line_search_fn=None and "strong_wolfe").
enum class LineSearch { None, StrongWolfe };

// torch.optim.LBFGS's options and defaults.
struct LBFGSOptions {
  explicit LBFGSOptions(double lr = 1.0) : lr_(lr) {}
  TAPEGRAD_ARG(double, lr);
  TAPEGRAD_ARG(std::int64_t, max_iter) = 20;
  TAPEGRAD_ARG(std::optional<std::int64_t>, max_eval);  // max_iter * 5 / 4 when unset
  TAPEGRAD_ARG(double, tolerance_grad) = 1e-7;
  TAPEGRAD_ARG(double, tolerance_change) = 1e-9;
  TAPEGRAD_ARG(std::int64_t, history_size) = 100;
  TAPEGRAD_ARG(LineSearch, line_search) = LineSearch::None;
};

class LBFGS : public Optimizer {
 public:
  // ValueError for max_iter, max_eval or history_size below 1, a negative or NaN tolerance, more than one
  // group, or parameters of more than one dtype (and, as every optimiser, a negative lr).
  explicit LBFGS(const TensorList& params, const LBFGSOptions& options = LBFGSOptions());
  explicit LBFGS(std::vector<ParamGroup> groups, const LBFGSOptions& options = LBFGSOptions());
  const LBFGSOptions& options() const { return options_; }

  // Always a ValueError: L-BFGS evaluates the loss several times per step.
  void step() override;
  Tensor step(const Closure& closure) override;

  // Closure calls made, and iterations run, over all steps.
  std::int64_t func_evals() const { return func_evals_; }
  std::int64_t iterations() const { return n_iter_; }
  // The (s, y) pairs held now.
  std::int64_t history_length() const { return static_cast<std::int64_t>(old_dirs_.size()); }

  NamedTensors state_tensors() const override;
  // ValueError naming the entry for a missing or unknown name, a vector of the wrong length or dtype, or
  // histories of different lengths or longer than history_size; on any error nothing changes.
  void load_state(const NamedTensors& state) override;
  std::vector<std::string> state_buffer_names() const override { return {}; }

 protected:
  void update(const ParamGroup& group, const Tensor& p, const Tensor& g, ParamState& state) override;

 private:
  // Every parameter's gradient, one after the other, as a vector of n_ elements.
  Tensor gather_flat_grad() const;
  // Parameters += step * direction.
  void add_to_params(double step, const Tensor& direction) const;
  // The closure's loss and flat gradient at start + step * direction (the parameters are at start), the
  // parameters set back to start after.
  std::pair<double, Tensor> evaluate_along(const Closure& closure, const std::vector<Tensor>& start, double step,
                                           const Tensor& direction);
  double call_closure(const Closure& closure, Tensor* loss = nullptr);
  void check_before_step() const;

  LBFGSOptions options_;
  std::int64_t n_ = 0;  // elements of all parameters together
  DType dtype_;
  // The state torch keeps (all but the two counts absent until the first iteration).
  std::int64_t func_evals_ = 0;
  std::int64_t n_iter_ = 0;
  Tensor d_;
  double t_ = 0.0;
  std::vector<Tensor> old_dirs_;   // y: gradient changes
  std::vector<Tensor> old_steps_;  // s: parameter changes
  std::vector<double> ro_;         // 1 / (y.s)
  double h_diag_ = 1.0;
  Tensor prev_flat_grad_;
  double prev_loss_ = 0.0;
};

}  // namespace tapegrad::optim
