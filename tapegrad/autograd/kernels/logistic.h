#pragma once
// The logistic loss's kernels (logistic_loss in ops/nn.cpp), vectorised with xsimd: one pass for
// the loss, one for its gradients, with a scalar tail of the same formulas. Static templates, see
// rows.h.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "tapegrad/autograd/kernels/strided.h"

namespace tapegrad::kernels {

// The logistic loss (binary cross-entropy on logits) and its derivatives, elementwise over
// contiguous buffers of n: x the logits, y the targets, w the weights and p the positive weights
// (w, p null: 1). With sp = softplus(-x) = max(-x, 0) + log(1 + exp(-|x|)) and c = 1 + (p - 1) y:
//   loss = w ((1 - y) x + c sp)
//   dx = g w ((1 - y) - c sigmoid(-x)),   dy = g w ((p - 1) sp - x)
// (dx, dy null: not wanted). sigmoid(-x) = 1 / (1 + exp(x)) is 0, not NaN, where exp(x) overflows.
// x, y, w, p, g, out, dx, dy: (n) contiguous.
template <class T>
struct LogisticLoss {
  const T *x, *y, *w, *p;

  template <class V>
  static V load(const T* a, std::int64_t i) {
    if constexpr (std::is_same_v<V, T>) return a == nullptr ? T(1) : a[i];
    else return a == nullptr ? V(T(1)) : V::load_unaligned(a + i);
  }
  // softplus(-x), with log(1 + a) = log(u) - ((u - 1) - a) / u for u = 1 + a (exact where a is tiny).
  template <class V>
  static V softplus_neg(V xv) {
    using std::abs, std::exp, std::log, std::max;
    using xsimd::abs, xsimd::exp, xsimd::log, xsimd::max;
    const V a = exp(-abs(xv));
    const V u = V(T(1)) + a;
    return max(-xv, V(T(0))) + (log(u) - ((u - V(T(1))) - a) / u);
  }
  template <class V>
  V value(std::int64_t i) const {
    const V xv = load<V>(x, i), yv = load<V>(y, i), pv = load<V>(p, i);
    return load<V>(w, i) * ((V(T(1)) - yv) * xv + (V(T(1)) + (pv - V(T(1))) * yv) * softplus_neg(xv));
  }
  template <class V>
  void gradients(const T* g, std::int64_t i, T* dx, T* dy) const {
    using std::exp;
    using xsimd::exp;
    const V xv = load<V>(x, i), yv = load<V>(y, i), pv = load<V>(p, i);
    const V gw = load<V>(g, i) * load<V>(w, i);
    const auto store = [&](T* out, V v) {
      if constexpr (std::is_same_v<V, T>) out[i] = v;
      else v.store_unaligned(out + i);
    };
    if (dx != nullptr) {
      const V c = V(T(1)) + (pv - V(T(1))) * yv;
      store(dx, gw * ((V(T(1)) - yv) - c / (V(T(1)) + exp(xv))));
    }
    if (dy != nullptr) store(dy, gw * ((pv - V(T(1))) * softplus_neg(xv) - xv));
  }
};

template <class T>
static void logistic_loss_forward(const LogisticLoss<T>& f, std::int64_t n, T* out) {
  using B = xsimd::batch<T>;
  parallel_for_blocks(n, kElementwiseGrain, [&](std::int64_t lo, std::int64_t hi) {
    std::int64_t i = lo;
    for (; i + static_cast<std::int64_t>(B::size) <= hi; i += B::size) f.template value<B>(i).store_unaligned(out + i);
    for (; i < hi; ++i) out[i] = f.template value<T>(i);
  });
}

template <class T>
static void logistic_loss_backward(const LogisticLoss<T>& f, const T* g, std::int64_t n, T* dx, T* dy) {
  using B = xsimd::batch<T>;
  parallel_for_blocks(n, kElementwiseGrain, [&](std::int64_t lo, std::int64_t hi) {
    std::int64_t i = lo;
    for (; i + static_cast<std::int64_t>(B::size) <= hi; i += B::size) f.template gradients<B>(g, i, dx, dy);
    for (; i < hi; ++i) f.template gradients<T>(g, i, dx, dy);
  });
}

}  // namespace tapegrad::kernels
