// SGD with momentum, dampening, Nesterov and L2 weight decay, following torch.optim.SGD:
//   g = grad + weight_decay * p
//   if momentum != 0:  buf = g (first step) else buf = momentum * buf + (1 - dampening) * g
//                      g = nesterov ? g + momentum * buf : buf
//   p = p - lr * g
// lr and weight_decay are per group (ParamGroup, defaulting to these options'); momentum, dampening and nesterov
// are shared. A row-sparse gradient (an embedding with sparse gradients) is taken without momentum or weight
// decay, as torch's: only its rows change, each row of g applied in the order the rows were added
// (p[i] = p[i] - lr * g_k for every row k at index i, uncoalesced: no sort), which equals the dense step on those
// rows up to rounding.
#pragma once

#include "tapegrad/autograd/arg.h"
#include "tapegrad/optim/optimizer.h"

namespace tapegrad::optim {

// torch.optim.SGD's options and defaults; lr has no default, as in torch.
//   optim::SGDOptions(0.1).momentum(0.9).nesterov(true)
struct SGDOptions {
  explicit SGDOptions(double lr) : lr_(lr) {}
  TAPEGRAD_ARG(double, lr);
  TAPEGRAD_ARG(double, momentum) = 0.0;
  TAPEGRAD_ARG(double, dampening) = 0.0;
  TAPEGRAD_ARG(double, weight_decay) = 0.0;
  TAPEGRAD_ARG(bool, nesterov) = false;
};

class SGD : public Optimizer {
 public:
  SGD(const TensorList& params, const SGDOptions& options);
  // A group's unset lr / weight_decay take options.lr() / options.weight_decay(); options supply momentum,
  // dampening, nesterov.
  SGD(std::vector<ParamGroup> groups, const SGDOptions& options);
  const SGDOptions& options() const { return options_; }
  // {"momentum_buffer"} with momentum, else none.
  std::vector<std::string> state_buffer_names() const override;

 protected:
  void update(const ParamGroup& group, const Tensor& p, const Tensor& g, ParamState& state) override;
  void update_sparse(const ParamGroup& group, const Tensor& p, const SparseRows& g, ParamState& state) override;
  std::string sparse_refusal(const ParamGroup& group) const override;

 private:
  SGDOptions options_;
};

}  // namespace tapegrad::optim
