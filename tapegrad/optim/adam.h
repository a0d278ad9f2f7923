// Adam and AdamW, following torch.optim.Adam / torch.optim.AdamW. With t = state.step (1 on the first update):
//   Adam:  g = grad + weight_decay * p                 (L2 penalty added to the gradient)
//   AdamW: p = p * (1 - lr * weight_decay), g = grad   (decoupled decay, applied before the Adam update)
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g^2
//   vhat = amsgrad ? (v_max = max(v_max, v)) : v
//   p = p - (lr / (1 - beta1^t)) * m / (sqrt(vhat) / sqrt(1 - beta2^t) + eps)
// State buffers: "exp_avg" (m), "exp_avg_sq" (v), "max_exp_avg_sq" (amsgrad only).
#pragma once

#include <tuple>

#include "tapegrad/autograd/arg.h"
#include "tapegrad/optim/optimizer.h"

namespace tapegrad::optim {

using AdamBetas = std::tuple<double, double>;

// torch.optim.Adam's options and defaults.
//   optim::AdamOptions(3e-4).betas({0.9, 0.95}).amsgrad(true)
struct AdamOptions {
  explicit AdamOptions(double lr = 1e-3) : lr_(lr) {}
  TAPEGRAD_ARG(double, lr);
  TAPEGRAD_ARG(AdamBetas, betas) = AdamBetas{0.9, 0.999};
  TAPEGRAD_ARG(double, eps) = 1e-8;
  TAPEGRAD_ARG(double, weight_decay) = 0.0;
  TAPEGRAD_ARG(bool, amsgrad) = false;
};

// torch.optim.AdamW's options and defaults: Adam's, but weight_decay 1e-2. A type of its own so that AdamW is never
// built from AdamOptions (whose decay default, 0, would silently turn AdamW's decay off).
//   optim::AdamWOptions(3e-4).weight_decay(0.1)
struct AdamWOptions {
  explicit AdamWOptions(double lr = 1e-3) : lr_(lr) {}
  TAPEGRAD_ARG(double, lr);
  TAPEGRAD_ARG(AdamBetas, betas) = AdamBetas{0.9, 0.999};
  TAPEGRAD_ARG(double, eps) = 1e-8;
  TAPEGRAD_ARG(double, weight_decay) = 1e-2;
  TAPEGRAD_ARG(bool, amsgrad) = false;
};

namespace detail {

// The update Adam and AdamW share; they differ in how weight_decay enters (`decoupled`).
class AdamUpdate : public Optimizer {
 public:
  struct Rule {
    double beta1, beta2, eps;
    bool amsgrad, decoupled;
  };
  // {"exp_avg", "exp_avg_sq"}, and "max_exp_avg_sq" with amsgrad.
  std::vector<std::string> state_buffer_names() const override;

 protected:
  AdamUpdate(std::vector<ParamGroup> groups, const GroupDefaults& defaults, const Rule& rule, const char* name);
  void update(const ParamGroup& group, const Tensor& p, const Tensor& g, ParamState& state) override;

 private:
  Rule rule_;
};

}  // namespace detail

// A group's unset lr / weight_decay take options.lr() / options.weight_decay(); options supply betas, eps, amsgrad.
class Adam : public detail::AdamUpdate {
 public:
  explicit Adam(const TensorList& params, const AdamOptions& options = AdamOptions());
  explicit Adam(std::vector<ParamGroup> groups, const AdamOptions& options = AdamOptions());
  const AdamOptions& options() const { return options_; }

 private:
  AdamOptions options_;
};

// Adam with decoupled weight decay (Loshchilov & Hutter), as torch.optim.AdamW (weight_decay 1e-2 by default).
class AdamW : public detail::AdamUpdate {
 public:
  explicit AdamW(const TensorList& params, const AdamWOptions& options = AdamWOptions());
  explicit AdamW(std::vector<ParamGroup> groups, const AdamWOptions& options = AdamWOptions());
  const AdamWOptions& options() const { return options_; }

 private:
  AdamWOptions options_;
};

}  // namespace tapegrad::optim
