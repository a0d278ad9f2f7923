#include "tapegrad/optim/adam.h"

#include <cmath>
#include <sstream>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/kernels/optim.h"

namespace tapegrad::optim {

namespace {

void check_options(const AdamOptions& o, const char* name) {
  auto fail = [name](const std::string& what, double v) {
    std::ostringstream out;
    out << name << ": invalid " << what << " " << v;
    throw ValueError(out.str());
  };
  if (!(o.lr >= 0.0)) fail("learning rate", o.lr);
  if (!(o.beta1 >= 0.0 && o.beta1 < 1.0)) fail("beta1 (must be in [0, 1))", o.beta1);
  if (!(o.beta2 >= 0.0 && o.beta2 < 1.0)) fail("beta2 (must be in [0, 1))", o.beta2);
  if (!(o.eps > 0.0)) fail("eps (must be > 0)", o.eps);
  if (!(o.weight_decay >= 0.0)) fail("weight_decay", o.weight_decay);
}

}  // namespace

Adam::Adam(const TensorList& params, const AdamOptions& options)
    : Adam(single_group(params, options.lr, options.weight_decay), options, false, "Adam") {}

Adam::Adam(std::vector<ParamGroup> groups, const AdamOptions& options)
    : Adam(std::move(groups), options, false, "Adam") {}

Adam::Adam(std::vector<ParamGroup> groups, const AdamOptions& options, bool decoupled, const char* name)
    : Optimizer(std::move(groups), name), options_(options), decoupled_(decoupled) {
  check_options(options_, name);
}

AdamW::AdamW(const TensorList& params, const AdamOptions& options)
    : Adam(single_group(params, options.lr, options.weight_decay), options, true, "AdamW") {}

AdamW::AdamW(std::vector<ParamGroup> groups, const AdamOptions& options)
    : Adam(std::move(groups), options, true, "AdamW") {}

std::vector<std::string> Adam::state_buffer_names() const {
  if (options_.amsgrad) return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  return {"exp_avg", "exp_avg_sq"};
}

void Adam::update(const ParamGroup& group, const Tensor& p, const Tensor& g, ParamState& state) {
  if (state.buffers.count("exp_avg") == 0) {
    state.buffers["exp_avg"] = zeros_like(p);
    state.buffers["exp_avg_sq"] = zeros_like(p);
    if (options_.amsgrad) state.buffers["max_exp_avg_sq"] = zeros_like(p);
  }
  // Bias corrections in double, as torch computes them from Python floats.
  const double t = static_cast<double>(state.step);
  const double bias1 = 1.0 - std::pow(options_.beta1, t);
  const double bias2_sqrt = std::sqrt(1.0 - std::pow(options_.beta2, t));
  const double step_size = group.lr / bias1;
  kernels::AdamStep step;
  step.step_size = step_size;
  step.bias2_sqrt = bias2_sqrt;
  step.beta1 = options_.beta1;
  step.beta2 = options_.beta2;
  step.eps = options_.eps;
  step.weight_decay = group.weight_decay;
  step.decoupled = decoupled_;
  step.decay = 1.0 - group.lr * group.weight_decay;
  dispatch_floating(p.dtype(), name_, [&](auto tag) {
    using T = decltype(tag);
    T* vmax = options_.amsgrad ? state.buffers["max_exp_avg_sq"].data_ptr<T>() : nullptr;
    kernels::adam_update<T>(p.data_ptr<T>(), g.data_ptr<T>(), state.buffers["exp_avg"].data_ptr<T>(),
                            state.buffers["exp_avg_sq"].data_ptr<T>(), vmax, p.numel(), step);
  });
}

}  // namespace tapegrad::optim
