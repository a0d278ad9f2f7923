#include "tapegrad/optim/asgd.h"

#include <algorithm>
#include <cmath>

#include "tapegrad/autograd/error.h"
#include "tapegrad/optim/elementwise_update.h"

namespace tapegrad::optim {

ASGD::ASGD(const TensorList& params, const ASGDOptions& options) : ASGD(single_group(params), options) {}

ASGD::ASGD(std::vector<ParamGroup> groups, const ASGDOptions& options)
    : Optimizer(std::move(groups), GroupDefaults{options.lr(), options.weight_decay()}, "ASGD"), options_(options) {
  if (!(options_.lambd() >= 0.0))
    throw ValueError(message("ASGD: invalid lambd ", options_.lambd(), " (must be >= 0)"));
  if (!(options_.alpha() >= 0.0))
    throw ValueError(message("ASGD: invalid alpha ", options_.alpha(), " (must be >= 0)"));
  if (!(options_.t0() >= 0.0)) throw ValueError(message("ASGD: invalid t0 ", options_.t0(), " (must be >= 0)"));
}

Tensor ASGD::averaged(const Tensor& p) const {
  for (std::size_t g = 0; g < param_groups().size(); ++g) {
    const TensorList& params = param_groups()[g].params;
    for (std::size_t i = 0; i < params.size(); ++i) {
      if (params[i].impl() != p.impl()) continue;
      const ParamState& state = param_state(g, i);
      const auto ax = state.buffers.find("ax");
      return (ax == state.buffers.end() ? p : ax->second).detach().clone();
    }
  }
  throw ValueError(
      message("ASGD: averaged: the ", p.shape().str(), " tensor is not one of this optimiser's parameters"));
}

void ASGD::update(const ParamGroup& group, const Tensor& p, const Tensor& g, ParamState& state) {
  detail::start_buffers(*this, p, state);
  const double lr = *group.lr, weight_decay = *group.weight_decay, lambd = options_.lambd();
  const auto before = static_cast<double>(state.step - 1);  // steps this parameter took before this one
  const double eta = lr / std::pow(1.0 + lambd * lr * before, options_.alpha());
  const double mu = 1.0 / std::max(1.0, before - options_.t0());
  dispatch_floating(p.dtype(), name_, [&](auto tag) {
    using T = decltype(tag);
    T* param = p.data_ptr<T>();
    const T* grad = g.data_ptr<T>();
    T* ax = state.buffers["ax"].data_ptr<T>();
    detail::for_each_element(p.numel(), [&](std::int64_t i) {
      const T gi = grad[i] + static_cast<T>(weight_decay) * param[i];
      param[i] = param[i] * static_cast<T>(1.0 - lambd * eta) + static_cast<T>(-eta) * gi;
      ax[i] = mu == 1.0 ? param[i] : ax[i] + (param[i] - ax[i]) * static_cast<T>(mu);
    });
  });
  detail::mark_written(state);
}

}  // namespace tapegrad::optim
