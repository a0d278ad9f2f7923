// Adamax, NAdam and RAdam: Adam's moments with another step, following torch.optim. With t =
// state.step (1 on the first update) and g = grad + weight_decay * p (an L2 penalty, as Adam's):
//
// Adamax (Kingma and Ba 2015, section 7): the second moment replaced by an infinity norm.
//   m = beta1 * m + (1 - beta1) * g
//   u = max(beta2 * u, |g| + eps)
//   p = p - lr / (1 - beta1^t) * m / u
// State buffers: "exp_avg" (m), "exp_inf" (u).
//
// NAdam (Dozat 2016): Nesterov momentum in Adam, with a momentum schedule
// mu_t = beta1 (1 - 0.5 * 0.96^(t * momentum_decay)) and mu_prod_t = mu_1 ... mu_t:
//   m = beta1 * m + (1 - beta1) * g,  v = beta2 * v + (1 - beta2) * g^2
//   denom = sqrt(v / (1 - beta2^t)) + eps
//   p = p - lr (1 - mu_t) / (1 - mu_prod_t) * g / denom
//   p = p - lr mu_{t+1} / (1 - mu_prod_t mu_{t+1}) * m / denom
// This is torch 2's rule; torch 1.13 multiplied the last product by mu_t once more (a bug its
// authors fixed), so its trajectories differ from this one from the first step. The products
// mu_prod_t are kept by the optimiser (one double per step reached), computed in the order torch
// multiplies them, so a resumed run steps exactly as an uninterrupted one.
// State buffers: "exp_avg" (m), "exp_avg_sq" (v).
//
// RAdam (Liu et al. 2020): Adam's adaptive step only once the variance of its estimate is tractable.
// With rho_inf = 2 / (1 - beta2) - 1 and rho_t = rho_inf - 2 t beta2^t / (1 - beta2^t):
//   m, v as NAdam's;  mhat = m / (1 - beta1^t)
//   rho_t > 5:  r = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t))
//               p = p - lr * mhat * r * sqrt(1 - beta2^t) / (sqrt(v) + eps)
//   otherwise:  p = p - lr * mhat   (momentum SGD for the first steps)
// State buffers: "exp_avg" (m), "exp_avg_sq" (v).
//
// lr and weight_decay are per group (ParamGroup); the other options are shared. All three start
// their buffers at zero and refuse sparse gradients, as torch's.
//
//   optim::RAdam opt(model->parameters(), optim::RAdamOptions(1e-3));
#pragma once

#include <vector>

#include "tapegrad/autograd/arg.h"
#include "tapegrad/optim/adam.h"
#include "tapegrad/optim/optimizer.h"

namespace tapegrad::optim {

// torch.optim.Adamax's options and defaults.
struct AdamaxOptions {
  explicit AdamaxOptions(double lr = 2e-3) : lr_(lr) {}
  TAPEGRAD_ARG(double, lr);
  TAPEGRAD_ARG(AdamBetas, betas) = AdamBetas{0.9, 0.999};
  TAPEGRAD_ARG(double, eps) = 1e-8;
  TAPEGRAD_ARG(double, weight_decay) = 0.0;
};

// torch.optim.NAdam's options and defaults.
struct NAdamOptions {
  explicit NAdamOptions(double lr = 2e-3) : lr_(lr) {}
  TAPEGRAD_ARG(double, lr);
  TAPEGRAD_ARG(AdamBetas, betas) = AdamBetas{0.9, 0.999};
  TAPEGRAD_ARG(double, eps) = 1e-8;
  TAPEGRAD_ARG(double, weight_decay) = 0.0;
  TAPEGRAD_ARG(double, momentum_decay) = 4e-3;
};

// torch.optim.RAdam's options and defaults.
struct RAdamOptions {
  explicit RAdamOptions(double lr = 1e-3) : lr_(lr) {}
  TAPEGRAD_ARG(double, lr);
  TAPEGRAD_ARG(AdamBetas, betas) = AdamBetas{0.9, 0.999};
  TAPEGRAD_ARG(double, eps) = 1e-8;
  TAPEGRAD_ARG(double, weight_decay) = 0.0;
};

// Each constructor: ValueError for a beta outside [0, 1), a negative eps (or momentum_decay), and,
// as every optimiser, a negative lr or weight_decay.
class Adamax : public Optimizer {
 public:
  explicit Adamax(const TensorList& params, const AdamaxOptions& options = AdamaxOptions());
  explicit Adamax(std::vector<ParamGroup> groups, const AdamaxOptions& options = AdamaxOptions());
  const AdamaxOptions& options() const { return options_; }
  std::vector<std::string> state_buffer_names() const override { return {"exp_avg", "exp_inf"}; }

 protected:
  void update(const ParamGroup& group, const Tensor& p, const Tensor& g, ParamState& state) override;

 private:
  AdamaxOptions options_;
};

class NAdam : public Optimizer {
 public:
  explicit NAdam(const TensorList& params, const NAdamOptions& options = NAdamOptions());
  explicit NAdam(std::vector<ParamGroup> groups, const NAdamOptions& options = NAdamOptions());
  const NAdamOptions& options() const { return options_; }
  std::vector<std::string> state_buffer_names() const override { return {"exp_avg", "exp_avg_sq"}; }

 protected:
  void update(const ParamGroup& group, const Tensor& p, const Tensor& g, ParamState& state) override;

 private:
  double momentum(std::int64_t t) const;  // mu_t
  // mu_1 ... mu_t, extended as steps reach further.
  double momentum_product(std::int64_t t);

  NAdamOptions options_;
  std::vector<double> momentum_products_{1.0};  // [t] = mu_1 ... mu_t
};

class RAdam : public Optimizer {
 public:
  explicit RAdam(const TensorList& params, const RAdamOptions& options = RAdamOptions());
  explicit RAdam(std::vector<ParamGroup> groups, const RAdamOptions& options = RAdamOptions());
  const RAdamOptions& options() const { return options_; }
  std::vector<std::string> state_buffer_names() const override { return {"exp_avg", "exp_avg_sq"}; }

 protected:
  void update(const ParamGroup& group, const Tensor& p, const Tensor& g, ParamState& state) override;

 private:
  RAdamOptions options_;
};

}  // namespace tapegrad::optim
