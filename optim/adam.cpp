#include "optim/adam.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "autograd/error.h"

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
  const bool amsgrad = options_.amsgrad;
  dispatch_floating(p.dtype(), name_, [&](auto tag) {
    using T = decltype(tag);
    const std::int64_t n = p.numel();
    T* param = p.data_ptr<T>();                                 // p: (n,)
    const T* grad = g.data_ptr<T>();                            // g: (n,)
    T* m = state.buffers["exp_avg"].data_ptr<T>();              // m: (n,)
    T* v = state.buffers["exp_avg_sq"].data_ptr<T>();           // v: (n,)
    T* vmax = amsgrad ? state.buffers["max_exp_avg_sq"].data_ptr<T>() : nullptr;  // vmax: (n,)
    const T b1 = static_cast<T>(options_.beta1), b2 = static_cast<T>(options_.beta2);
    const T eps = static_cast<T>(options_.eps), wd = static_cast<T>(group.weight_decay);
    const T decay = static_cast<T>(1.0 - group.lr * group.weight_decay);
    const T bc2 = static_cast<T>(bias2_sqrt), lr_t = static_cast<T>(step_size);
    for (std::int64_t k = 0; k < n; ++k) {
      T d = grad[k];
      if (decoupled_) {
        param[k] *= decay;
      } else if (wd != T(0)) {
        d += wd * param[k];
      }
      m[k] = b1 * m[k] + (T(1) - b1) * d;
      v[k] = b2 * v[k] + (T(1) - b2) * d * d;
      T second = v[k];
      if (amsgrad) {
        vmax[k] = std::max(vmax[k], v[k]);
        second = vmax[k];
      }
      param[k] -= lr_t * m[k] / (std::sqrt(second) / bc2 + eps);
    }
  });
}

}  // namespace tapegrad::optim
