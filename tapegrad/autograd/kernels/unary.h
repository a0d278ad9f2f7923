#pragma once
// Unary kernels vectorised with xsimd: vector_map evaluates an xtensor expression (exp, log,
// tanh ...) over a contiguous buffer, and GELU's forward and backward are written with xsimd
// batches and a scalar tail with the same formulas. Static templates, so that they are compiled,
// and their xsimd math inlined, in the ops' translation unit (ops/unary.cpp; see rows.h).

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

#include <xsimd/xsimd.hpp>
#include <xtensor/xadapt.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xnoalias.hpp>

#include "tapegrad/autograd/kernels/convert.h"
#include "tapegrad/autograd/kernels/elementwise.h"
#include "tapegrad/autograd/kernels/strided.h"

namespace tapegrad::kernels {

// out = fn(x) for x of dtype T, fn an xtensor expression of its argument (xt::exp(e), say) that
// xtensor evaluates with xsimd batches, on a contiguous copy of x, in chunks over the thread pool
// cut on vector-block boundaries. The chunk body is flattened: everything it calls, xsimd's
// exp and tanh included, is inlined into it whatever the size of the translation unit (GCC
// otherwise left them out of line in a smaller one, a call per batch: 40% slower).
template <class T, class Fn>
static Tensor vector_map(const Tensor& x_in, Fn fn) {
  Tensor x = dense(x_in);
  Tensor out = empty(x.shape(), x.dtype());
  const T* px = x.data_ptr<T>();
  T* po = out.data_ptr<T>();
  parallel_for_blocks(
      x.numel(), kElementwiseGrain, [&](std::int64_t lo, std::int64_t hi) __attribute__((flatten)) {
        const std::size_t n = static_cast<std::size_t>(hi - lo);
        const std::array<std::size_t, 1> shape{n};
        auto in = xt::adapt(px + lo, n, xt::no_ownership(), shape);
        auto result = xt::adapt(po + lo, n, xt::no_ownership(), shape);
        xt::noalias(result) = fn(in);
      });
  return out;
}

constexpr double kSqrt2 = 1.4142135623730950488;
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2 / pi)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;   // 1 / sqrt(2 pi)
constexpr double kGeluCubic = 0.044715;

// gelu on contiguous buffers, vectorised with xsimd, and a scalar tail with the same formulas:
//   exact: 0.5 x (1 + erf(x / sqrt(2)));  tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + c x^3)))
template <class T>
static void gelu_forward_contiguous(const T* x, T* out, std::int64_t n, bool use_tanh) {
  // x, out: (n)
  using B = xsimd::batch<T>;
  constexpr std::int64_t lanes = static_cast<std::int64_t>(B::size);
  std::int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const B xv = B::load_unaligned(x + i);
    const B inner = use_tanh ? xsimd::tanh(B(T(kSqrt2OverPi)) * (xv + B(T(kGeluCubic)) * xv * xv * xv))
                             : xsimd::erf(xv * B(T(1 / kSqrt2)));
    (B(T(0.5)) * xv * (B(T(1)) + inner)).store_unaligned(out + i);
  }
  for (; i < n; ++i) {
    const T xv = x[i];
    const T inner =
        use_tanh ? std::tanh(T(kSqrt2OverPi) * (xv + T(kGeluCubic) * xv * xv * xv)) : std::erf(xv * T(1 / kSqrt2));
    out[i] = T(0.5) * xv * (T(1) + inner);
  }
}

// softplus(x) = max(x, 0) + log1p(exp(-|x|)) on contiguous buffers. The batches take log1p(a) as
// log(u) - ((u - 1) - a) / u with u = 1 + a (xsimd has no vectorised log1p; the correction
// restores what rounding 1 + a lost, so a tiny a still gives a); the tail calls std::log1p.
template <class T>
static void softplus_contiguous(const T* x, T* out, std::int64_t n) {
  // x, out: (n)
  using B = xsimd::batch<T>;
  constexpr std::int64_t lanes = static_cast<std::int64_t>(B::size);
  std::int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const B xv = B::load_unaligned(x + i);
    const B a = xsimd::exp(-xsimd::abs(xv));
    const B u = B(T(1)) + a;
    (xsimd::max(xv, B(T(0))) + (xsimd::log(u) - ((u - B(T(1))) - a) / u)).store_unaligned(out + i);
  }
  for (; i < n; ++i) out[i] = std::max(x[i], T(0)) + std::log1p(std::exp(-std::abs(x[i])));
}

template <class T>
static Tensor softplus_forward(const Tensor& x) {
  const Tensor xd = dense(x);
  Tensor y = empty(x.shape(), x.dtype());
  const T* px = xd.data_ptr<T>();
  T* py = y.data_ptr<T>();
  parallel_for_blocks(x.numel(), kElementwiseGrain,
                      [&](std::int64_t lo, std::int64_t hi) { softplus_contiguous<T>(px + lo, py + lo, hi - lo); });
  return y;
}

// gelu's backward on contiguous buffers, vectorised with xsimd (std::erf and std::exp per
// element made it a tenth of a transformer step); the scalar tail and strided inputs use the

//   exact: g (Phi(x) + x phi(x));  tanh: g (0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3c x^2))
template <class T>
static void gelu_backward_contiguous(const T* g, const T* x, T* out, std::int64_t n, bool use_tanh) {
  // g, x, out: (n)
  using B = xsimd::batch<T>;
  constexpr std::int64_t lanes = static_cast<std::int64_t>(B::size);
  std::int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const B xv = B::load_unaligned(x + i);
    const B gv = B::load_unaligned(g + i);
    B d;
    if (use_tanh) {
      const B x2 = xv * xv;
      const B t = xsimd::tanh(B(T(kSqrt2OverPi)) * (xv + B(T(kGeluCubic)) * x2 * xv));
      const B d_inner = B(T(kSqrt2OverPi)) * (B(T(1)) + B(T(3 * kGeluCubic)) * x2);
      d = B(T(0.5)) * (B(T(1)) + t) + B(T(0.5)) * xv * (B(T(1)) - t * t) * d_inner;
    } else {
      const B cdf = B(T(0.5)) * (B(T(1)) + xsimd::erf(xv * B(T(1 / kSqrt2))));
      const B pdf = B(T(kInvSqrt2Pi)) * xsimd::exp(B(T(-0.5)) * xv * xv);
      d = cdf + xv * pdf;
    }
    (gv * d).store_unaligned(out + i);
  }
  for (; i < n; ++i) {
    const T xv = x[i];
    if (use_tanh) {
      const T t = std::tanh(T(kSqrt2OverPi) * (xv + T(kGeluCubic) * xv * xv * xv));
      const T d_inner = T(kSqrt2OverPi) * (1 + 3 * T(kGeluCubic) * xv * xv);
      out[i] = g[i] * (T(0.5) * (1 + t) + T(0.5) * xv * (1 - t * t) * d_inner);
    } else {
      const T cdf = T(0.5) * (1 + std::erf(xv * T(1 / kSqrt2)));
      const T pdf = T(kInvSqrt2Pi) * std::exp(T(-0.5) * xv * xv);
      out[i] = g[i] * (cdf + xv * pdf);
    }
  }
}

// gelu(x) for x of dtype T:
//   exact: 0.5 x (1 + erf(x / sqrt(2)));  tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
template <class T>
static Tensor gelu_forward(const Tensor& x, bool use_tanh) {
  const Tensor xd = dense(x);
  Tensor y = empty(x.shape(), x.dtype());
  const T* px = xd.data_ptr<T>();
  T* py = y.data_ptr<T>();
  parallel_for_blocks(x.numel(), kElementwiseGrain, [&](std::int64_t lo, std::int64_t hi) {
    gelu_forward_contiguous<T>(px + lo, py + lo, hi - lo, use_tanh);
  });
  return y;
}

// gelu on bfloat16 x, and g * gelu'(x) on bfloat16 g and x, with the bits of widening to float32,
// running the float32 kernel and rounding the result, but without float32 copies of the tensors:
// each pool block converts kBfloat16Chunk elements at a time into buffers on its stack around the
// float32 kernel. Blocks and chunks start on vector-block boundaries, so the same elements take the
// scalar tail as in the float32 kernel on the whole tensor.
constexpr std::int64_t kBfloat16Chunk = 512;

static Tensor gelu_forward_bfloat16(const Tensor& x, bool use_tanh) {
  const Tensor xd = dense(x);
  Tensor y = empty(x.shape(), kBFloat16);
  const BFloat16* px = xd.data_ptr<BFloat16>();
  BFloat16* py = y.data_ptr<BFloat16>();
  parallel_for_blocks(x.numel(), kElementwiseGrain, [&](std::int64_t lo, std::int64_t hi) {
    float buffer[kBfloat16Chunk];
    for (std::int64_t c = lo; c < hi; c += kBfloat16Chunk) {
      const std::int64_t n = std::min(kBfloat16Chunk, hi - c);
      widen_bfloat16_serial(px + c, buffer, n);
      gelu_forward_contiguous<float>(buffer, buffer, n, use_tanh);
      round_to_bfloat16_serial(buffer, py + c, n);
    }
  });
  return y;
}

static Tensor gelu_backward_bfloat16(const Tensor& g, const Tensor& x, bool use_tanh) {
  const Tensor gd = dense(g), xd = dense(x);
  Tensor gx = empty(x.shape(), kBFloat16);
  const BFloat16* pg = gd.data_ptr<BFloat16>();
  const BFloat16* px = xd.data_ptr<BFloat16>();
  BFloat16* out = gx.data_ptr<BFloat16>();
  parallel_for_blocks(x.numel(), kElementwiseGrain, [&](std::int64_t lo, std::int64_t hi) {
    float g_buffer[kBfloat16Chunk], x_buffer[kBfloat16Chunk];
    for (std::int64_t c = lo; c < hi; c += kBfloat16Chunk) {
      const std::int64_t n = std::min(kBfloat16Chunk, hi - c);
      widen_bfloat16_serial(pg + c, g_buffer, n);
      widen_bfloat16_serial(px + c, x_buffer, n);
      gelu_backward_contiguous<float>(g_buffer, x_buffer, g_buffer, n, use_tanh);
      round_to_bfloat16_serial(g_buffer, out + c, n);
    }
  });
  return gx;
}

// g * gelu'(x): vectorised when g and x are contiguous and of one dtype, through backward_map
// otherwise.
static inline Tensor gelu_backward(const Tensor& g, const Tensor& x, bool use_tanh) {
  if (g.is_contiguous() && x.is_contiguous() && g.dtype() == x.dtype())
    return dispatch_floating(x.dtype(), "gelu backward", [&](auto tag) {
      using T = decltype(tag);
      Tensor gx = empty(x.shape(), x.dtype());
      const T* pg = g.data_ptr<T>();
      const T* px = x.data_ptr<T>();
      T* out = gx.data_ptr<T>();
      parallel_for_blocks(x.numel(), kElementwiseGrain, [&](std::int64_t lo, std::int64_t hi) {
        gelu_backward_contiguous<T>(pg + lo, px + lo, out + lo, hi - lo, use_tanh);
      });
      return gx;
    });
  return backward_map(g, x, [use_tanh](auto gv, auto xv) {
    using T = decltype(xv);
    if (use_tanh) {
      const T inner = T(kSqrt2OverPi) * (xv + T(kGeluCubic) * xv * xv * xv);
      const T t = std::tanh(inner);
      const T d_inner = T(kSqrt2OverPi) * (1 + 3 * T(kGeluCubic) * xv * xv);
      return gv * (T(0.5) * (1 + t) + T(0.5) * xv * (1 - t * t) * d_inner);
    }
    // d/dx x Phi(x) = Phi(x) + x phi(x)
    const T cdf = T(0.5) * (1 + std::erf(xv * T(1 / kSqrt2)));
    const T pdf = T(kInvSqrt2Pi) * std::exp(T(-0.5) * xv * xv);
    return gv * (cdf + xv * pdf);
  });
}

}  // namespace tapegrad::kernels
