#include "tapegrad/optim/rmsprop.h"

#include <string>
#include <vector>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/kernels/optim.h"
#include "tapegrad/autograd/storage.h"
#include "tapegrad/optim/elementwise_update.h"

namespace tapegrad::optim {

namespace {

void check_options(const RMSpropOptions& o) {
  if (!(o.alpha() >= 0.0 && o.alpha() <= 1.0))
    throw ValueError(message("RMSprop: invalid alpha ", o.alpha(), " (must be in [0, 1])"));
  auto check = [](const char* what, double v) {
    if (!(v >= 0.0)) throw ValueError(message("RMSprop: invalid ", what, " ", v, " (must be >= 0)"));
  };
  check("eps", o.eps());
  check("momentum", o.momentum());
}

}  // namespace

RMSprop::RMSprop(const TensorList& params, const RMSpropOptions& options) : RMSprop(single_group(params), options) {}

RMSprop::RMSprop(std::vector<ParamGroup> groups, const RMSpropOptions& options)
    : Optimizer(std::move(groups), GroupDefaults{options.lr(), options.weight_decay()}, "RMSprop"), options_(options) {
  check_options(options_);
}

std::vector<std::string> RMSprop::state_buffer_names() const {
  std::vector<std::string> names;  // sorted, as the Optimizer asks
  if (options_.centered()) names.emplace_back("grad_avg");
  if (options_.momentum() > 0.0) names.emplace_back("momentum_buffer");
  names.emplace_back("square_avg");
  return names;
}

void RMSprop::update(const ParamGroup& group, const Tensor& p, const Tensor& g, ParamState& state) {
  detail::start_buffers(*this, p, state);
  kernels::RmspropStep step;
  step.lr = *group.lr;
  step.alpha = options_.alpha();
  step.eps = options_.eps();
  step.weight_decay = *group.weight_decay;
  step.momentum = options_.momentum();
  dispatch_floating(p.dtype(), name_, [&](auto tag) {
    using T = decltype(tag);
    T* grad_avg = options_.centered() ? state.buffers["grad_avg"].data_ptr<T>() : nullptr;
    T* buf = options_.momentum() > 0.0 ? state.buffers["momentum_buffer"].data_ptr<T>() : nullptr;
    kernels::rmsprop_update<T>(p.data_ptr<T>(), g.data_ptr<T>(), state.buffers["square_avg"].data_ptr<T>(), grad_avg,
                               buf, p.numel(), step);
  });
  detail::mark_written(state);
}

}  // namespace tapegrad::optim
