// SGD with momentum, dampening, Nesterov and L2 weight decay, following torch.optim.SGD:
//   g = grad + weight_decay * p
//   if momentum != 0:  buf = g (first step) else buf = momentum * buf + (1 - dampening) * g
//                      g = nesterov ? g + momentum * buf : buf
//   p = p - lr * g
// weight_decay is per group (ParamGroup); momentum, dampening and nesterov are shared.
#pragma once

#include "tapegrad/optim/optimizer.h"

namespace tapegrad::optim {

// Example: SGDOptions o; o.lr = 0.1; o.momentum = 0.9; o.nesterov = true;
struct SGDOptions {
  double lr = 1e-2;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

class SGD : public Optimizer {
 public:
  SGD(const TensorList& params, const SGDOptions& options);
  // Groups keep their own lr and weight_decay; options supply momentum, dampening, nesterov.
  SGD(std::vector<ParamGroup> groups, const SGDOptions& options);
  const SGDOptions& options() const { return options_; }
  // {"momentum_buffer"} with momentum, else none.
  std::vector<std::string> state_buffer_names() const override;

 protected:
  void update(const ParamGroup& group, const Tensor& p, const Tensor& g, ParamState& state) override;

 private:
  SGDOptions options_;
};

}  // namespace tapegrad::optim
