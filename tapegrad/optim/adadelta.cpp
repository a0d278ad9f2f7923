#include "tapegrad/optim/adadelta.h"

#include <cmath>

#include "tapegrad/autograd/error.h"
#include "tapegrad/optim/elementwise_update.h"

namespace tapegrad::optim {

Adadelta::Adadelta(const TensorList& params, const AdadeltaOptions& options)
    : Adadelta(single_group(params), options) {}

Adadelta::Adadelta(std::vector<ParamGroup> groups, const AdadeltaOptions& options)
    : Optimizer(std::move(groups), GroupDefaults{options.lr(), options.weight_decay()}, "Adadelta"), options_(options) {
  if (!(options_.rho() >= 0.0 && options_.rho() <= 1.0))
    throw ValueError(message("Adadelta: invalid rho ", options_.rho(), " (must be in [0, 1])"));
  if (!(options_.eps() >= 0.0)) throw ValueError(message("Adadelta: invalid eps ", options_.eps(), " (must be >= 0)"));
}

void Adadelta::update(const ParamGroup& group, const Tensor& p, const Tensor& g, ParamState& state) {
  detail::start_buffers(*this, p, state);
  const double lr = *group.lr, weight_decay = *group.weight_decay;
  const double rho = options_.rho(), eps = options_.eps();
  dispatch_floating(p.dtype(), name_, [&](auto tag) {
    using T = decltype(tag);
    T* param = p.data_ptr<T>();
    const T* grad = g.data_ptr<T>();
    T* square_avg = state.buffers["square_avg"].data_ptr<T>();
    T* acc_delta = state.buffers["acc_delta"].data_ptr<T>();
    detail::for_each_element(p.numel(), [&](std::int64_t i) {
      const T gi = grad[i] + static_cast<T>(weight_decay) * param[i];
      square_avg[i] = square_avg[i] * static_cast<T>(rho) + static_cast<T>(1.0 - rho) * gi * gi;
      const T delta =
          std::sqrt(acc_delta[i] + static_cast<T>(eps)) / std::sqrt(square_avg[i] + static_cast<T>(eps)) * gi;
      acc_delta[i] = acc_delta[i] * static_cast<T>(rho) + static_cast<T>(1.0 - rho) * delta * delta;
      param[i] -= static_cast<T>(lr) * delta;
    });
  });
  detail::mark_written(state);
}

}  // namespace tapegrad::optim
