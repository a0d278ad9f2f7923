#include "tapegrad/optim/adam.h"

#include <cmath>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/kernels/optim.h"
#include "tapegrad/autograd/storage.h"
#include "tapegrad/optim/elementwise_update.h"

namespace tapegrad::optim {

namespace {

template <class Options>
detail::AdamUpdate::Rule checked_rule(const Options& o, bool decoupled, const char* name) {
  detail::check_betas(o.betas(), name);
  if (!(o.eps() > 0.0)) throw ValueError(message(name, ": invalid eps ", o.eps(), " (must be > 0)"));
  const auto [beta1, beta2] = o.betas();
  return {beta1, beta2, o.eps(), o.amsgrad(), decoupled};
}

}  // namespace

namespace detail {

AdamUpdate::AdamUpdate(std::vector<ParamGroup> groups, const GroupDefaults& defaults, const Rule& rule,
                       const char* name)
    : Optimizer(std::move(groups), defaults, name), rule_(rule) {}

std::vector<std::string> AdamUpdate::state_buffer_names() const {
  if (rule_.amsgrad) return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  return {"exp_avg", "exp_avg_sq"};
}

void AdamUpdate::update(const ParamGroup& group, const Tensor& p, const Tensor& g, ParamState& state) {
  if (state.buffers.count("exp_avg") == 0) {
    state.buffers["exp_avg"] = zeros_like(p);
    state.buffers["exp_avg_sq"] = zeros_like(p);
    if (rule_.amsgrad) state.buffers["max_exp_avg_sq"] = zeros_like(p);
  }
  // Bias corrections in double, as torch computes them from Python floats.
  const double t = static_cast<double>(state.step);
  const double bias1 = 1.0 - std::pow(rule_.beta1, t);
  const double bias2_sqrt = std::sqrt(1.0 - std::pow(rule_.beta2, t));
  const double lr = *group.lr, weight_decay = *group.weight_decay;
  kernels::AdamStep step;
  step.step_size = lr / bias1;
  step.bias2_sqrt = bias2_sqrt;
  step.beta1 = rule_.beta1;
  step.beta2 = rule_.beta2;
  step.eps = rule_.eps;
  step.weight_decay = weight_decay;
  step.decoupled = rule_.decoupled;
  step.decay = 1.0 - lr * weight_decay;
  dispatch_floating(p.dtype(), name_, [&](auto tag) {
    using T = decltype(tag);
    T* vmax = rule_.amsgrad ? state.buffers["max_exp_avg_sq"].data_ptr<T>() : nullptr;
    kernels::adam_update<T>(p.data_ptr<T>(), g.data_ptr<T>(), state.buffers["exp_avg"].data_ptr<T>(),
                            state.buffers["exp_avg_sq"].data_ptr<T>(), vmax, p.numel(), step);
  });
  detail::mark_written(state);
}

}  // namespace detail

Adam::Adam(const TensorList& params, const AdamOptions& options) : Adam(single_group(params), options) {}

Adam::Adam(std::vector<ParamGroup> groups, const AdamOptions& options)
    : AdamUpdate(std::move(groups), GroupDefaults{options.lr(), options.weight_decay()},
                 checked_rule(options, /*decoupled=*/false, "Adam"), "Adam"),
      options_(options) {}

AdamW::AdamW(const TensorList& params, const AdamWOptions& options) : AdamW(single_group(params), options) {}

AdamW::AdamW(std::vector<ParamGroup> groups, const AdamWOptions& options)
    : AdamUpdate(std::move(groups), GroupDefaults{options.lr(), options.weight_decay()},
                 checked_rule(options, /*decoupled=*/true, "AdamW"), "AdamW"),
      options_(options) {}

}  // namespace tapegrad::optim
