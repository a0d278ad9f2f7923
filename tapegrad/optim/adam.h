// Adam and AdamW, following torch.optim.Adam / torch.optim.AdamW. With t = state.step (1 on the first update):
//   Adam:  g = grad + weight_decay * p                 (L2 penalty added to the gradient)
//   AdamW: p = p * (1 - lr * weight_decay), g = grad   (decoupled decay, applied before the Adam update)
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g^2
//   vhat = amsgrad ? (v_max = max(v_max, v)) : v
//   p = p - (lr / (1 - beta1^t)) * m / (sqrt(vhat) / sqrt(1 - beta2^t) + eps)
// State buffers: "exp_avg" (m), "exp_avg_sq" (v), "max_exp_avg_sq" (amsgrad only).
#pragma once

#include "tapegrad/optim/optimizer.h"

namespace tapegrad::optim {

// Example: AdamOptions o; o.lr = 3e-4; o.beta2 = 0.95; o.weight_decay = 0.1;
struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;  // AdamW's default is 1e-2, see AdamW::defaults()
  bool amsgrad = false;
};

class Adam : public Optimizer {
 public:
  Adam(const TensorList& params, const AdamOptions& options = {});
  // Groups keep their own lr and weight_decay; options supply betas, eps, amsgrad.
  Adam(std::vector<ParamGroup> groups, const AdamOptions& options = {});
  const AdamOptions& options() const { return options_; }
  // {"exp_avg", "exp_avg_sq"}, and "max_exp_avg_sq" with amsgrad.
  std::vector<std::string> state_buffer_names() const override;

 protected:
  Adam(std::vector<ParamGroup> groups, const AdamOptions& options, bool decoupled, const char* name);
  void update(const ParamGroup& group, const Tensor& p, const Tensor& g, ParamState& state) override;

 private:
  AdamOptions options_;
  bool decoupled_;
};

// Adam with decoupled weight decay (Loshchilov & Hutter); weight_decay defaults to 1e-2 as in torch.optim.AdamW.
class AdamW : public Adam {
 public:
  static AdamOptions defaults() {
    AdamOptions o;
    o.weight_decay = 1e-2;
    return o;
  }
  AdamW(const TensorList& params, const AdamOptions& options = defaults());
  AdamW(std::vector<ParamGroup> groups, const AdamOptions& options = defaults());
};

}  // namespace tapegrad::optim
