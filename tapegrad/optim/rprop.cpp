#include "tapegrad/optim/rprop.h"

#include <algorithm>

#include "tapegrad/autograd/error.h"
#include "tapegrad/optim/elementwise_update.h"

namespace tapegrad::optim {

Rprop::Rprop(const TensorList& params, const RpropOptions& options) : Rprop(single_group(params), options) {}

Rprop::Rprop(std::vector<ParamGroup> groups, const RpropOptions& options)
    : Optimizer(std::move(groups), GroupDefaults{options.lr(), 0.0}, "Rprop"), options_(options) {
  const auto [etaminus, etaplus] = options_.etas();
  if (!(0.0 < etaminus && etaminus < 1.0 && 1.0 < etaplus))
    throw ValueError(
        message("Rprop: invalid etas (", etaminus, ", ", etaplus, ") (must be 0 < etaminus < 1 < etaplus)"));
  const auto [smallest, largest] = options_.step_sizes();
  if (!(0.0 <= smallest && smallest <= largest))
    throw ValueError(message("Rprop: invalid step_sizes (", smallest, ", ", largest,
                             ") (must be 0 <= step_size_min <= step_size_max)"));
}

std::string Rprop::dense_refusal(const ParamGroup& group) const {
  if (*group.weight_decay == 0.0) return {};
  return message("Rprop takes no weight_decay (the group has ", *group.weight_decay, ")");
}

void Rprop::update(const ParamGroup& group, const Tensor& p, const Tensor& g, ParamState& state) {
  const bool first = state.buffers.empty();
  detail::start_buffers(*this, p, state);
  if (first) state.buffers["step_size"].fill_(*group.lr);
  const auto [etaminus, etaplus] = options_.etas();
  const auto [smallest, largest] = options_.step_sizes();
  dispatch_floating(p.dtype(), name_, [&](auto tag) {
    using T = decltype(tag);
    T* param = p.data_ptr<T>();
    const T* grad = g.data_ptr<T>();
    T* prev = state.buffers["prev"].data_ptr<T>();
    T* step_size = state.buffers["step_size"].data_ptr<T>();
    detail::for_each_element(p.numel(), [&](std::int64_t i) {
      const T agreement = grad[i] * prev[i];
      T factor = 1;
      T gi = grad[i];
      if (agreement > 0) {
        factor = static_cast<T>(etaplus);
      } else if (agreement < 0) {
        factor = static_cast<T>(etaminus);
        gi = 0;  // the sign flipped: shrink the step, do not move, and forget this gradient
      }
      step_size[i] = std::clamp(step_size[i] * factor, static_cast<T>(smallest), static_cast<T>(largest));
      param[i] -= static_cast<T>((gi > 0) - (gi < 0)) * step_size[i];
      prev[i] = gi;
    });
  });
  detail::mark_written(state);
}

}  // namespace tapegrad::optim
