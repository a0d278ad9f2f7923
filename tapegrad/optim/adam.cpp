#include "tapegrad/optim/adam.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <tuple>

#include <xsimd/xsimd.hpp>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/kernels/strided.h"
#include "tapegrad/autograd/parallel.h"

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
    const T one_b1 = T(1) - b1, one_b2 = T(1) - b2;
    // One element's update, written once for xsimd batches and for scalars so the vector body
    // and the scalar tail apply the same operations in the same order.
    auto apply = [&](auto pk, auto gk, auto mk, auto vk, auto* vmaxk) {
      using V = decltype(pk);
      auto d = gk;
      if (decoupled_) {
        pk = pk * V(decay);
      } else if (wd != T(0)) {
        d = d + V(wd) * pk;
      }
      mk = V(b1) * mk + V(one_b1) * d;
      vk = V(b2) * vk + V(one_b2) * d * d;
      auto second = vk;
      if (vmaxk != nullptr) {
        *vmaxk = xsimd::max(*vmaxk, vk);
        second = *vmaxk;
      }
      pk = pk - V(lr_t) * mk / (xsimd::sqrt(second) / V(bc2) + V(eps));
      return std::make_tuple(pk, mk, vk);
    };
    using B = xsimd::batch<T>;
    constexpr std::int64_t lanes = static_cast<std::int64_t>(B::size);
    // Whole batches go over the thread pool, the tail stays here: which elements take the vector
    // body does not depend on the thread count, so neither do the bits.
    const std::int64_t batches = n / lanes;
    parallel_for(0, batches, kernels::kElementwiseGrain / lanes, [&](std::int64_t first, std::int64_t last) {
      for (std::int64_t k = first * lanes; k < last * lanes; k += lanes) {
        B vm = amsgrad ? B::load_unaligned(vmax + k) : B(T(0));
        auto [pk, mk, vk] = apply(B::load_unaligned(param + k), B::load_unaligned(grad + k),
                                  B::load_unaligned(m + k), B::load_unaligned(v + k),
                                  amsgrad ? &vm : static_cast<B*>(nullptr));
        pk.store_unaligned(param + k);
        mk.store_unaligned(m + k);
        vk.store_unaligned(v + k);
        if (amsgrad) vm.store_unaligned(vmax + k);
      }
    });
    for (std::int64_t k = batches * lanes; k < n; ++k) {
      auto [pk, mk, vk] = apply(param[k], grad[k], m[k], v[k], amsgrad ? vmax + k : nullptr);
      param[k] = pk;
      m[k] = mk;
      v[k] = vk;
    }
  });
}

}  // namespace tapegrad::optim
