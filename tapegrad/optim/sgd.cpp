#include "tapegrad/optim/sgd.h"

#include <sstream>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/kernels/strided.h"

namespace tapegrad::optim {

namespace {

void check_options(const SGDOptions& o) {
  auto fail = [](const std::string& what, double v) {
    std::ostringstream out;
    out << "SGD: invalid " << what << " " << v;
    throw ValueError(out.str());
  };
  if (!(o.lr >= 0.0)) fail("learning rate", o.lr);
  if (!(o.momentum >= 0.0)) fail("momentum", o.momentum);
  if (!(o.dampening >= 0.0 && o.dampening <= 1.0)) fail("dampening", o.dampening);
  if (!(o.weight_decay >= 0.0)) fail("weight_decay", o.weight_decay);
  if (o.nesterov && (o.momentum <= 0.0 || o.dampening != 0.0))
    throw ValueError("SGD: nesterov requires momentum > 0 and dampening 0 (got momentum " +
                     std::to_string(o.momentum) + ", dampening " + std::to_string(o.dampening) + ")");
}

}  // namespace

SGD::SGD(const TensorList& params, const SGDOptions& options)
    : SGD(single_group(params, options.lr, options.weight_decay), options) {}

SGD::SGD(std::vector<ParamGroup> groups, const SGDOptions& options)
    : Optimizer(std::move(groups), "SGD"), options_(options) {
  check_options(options_);
}

std::vector<std::string> SGD::state_buffer_names() const {
  if (options_.momentum == 0.0) return {};
  return {"momentum_buffer"};
}

void SGD::update(const ParamGroup& group, const Tensor& p, const Tensor& g, ParamState& state) {
  const bool use_momentum = options_.momentum != 0.0;
  const bool first = use_momentum && state.buffers.count("momentum_buffer") == 0;
  if (first) state.buffers["momentum_buffer"] = zeros_like(p);
  dispatch_floating(p.dtype(), "SGD", [&](auto tag) {
    using T = decltype(tag);
    const std::int64_t n = p.numel();
    T* param = p.data_ptr<T>();       // p: (n,)
    const T* grad = g.data_ptr<T>();  // g: (n,)
    T* buf = use_momentum ? state.buffers["momentum_buffer"].data_ptr<T>() : nullptr;  // buf: (n,)
    const T lr = static_cast<T>(group.lr), wd = static_cast<T>(group.weight_decay);
    const T momentum = static_cast<T>(options_.momentum), keep = static_cast<T>(1.0 - options_.dampening);
    const bool nesterov = options_.nesterov;
    kernels::parallel_for_blocks(n, kernels::kElementwiseGrain, [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t k = lo; k < hi; ++k) {
        T d = grad[k];
        if (wd != T(0)) d += wd * param[k];
        if (use_momentum) {
          // torch initialises the buffer with the gradient itself (no dampening on the first step).
          buf[k] = first ? d : momentum * buf[k] + keep * d;
          d = nesterov ? d + momentum * buf[k] : buf[k];
        }
        param[k] -= lr * d;
      }
    });
  });
}

}  // namespace tapegrad::optim
