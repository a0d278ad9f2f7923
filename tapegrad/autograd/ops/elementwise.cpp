// Elementwise ops: arithmetic with broadcasting, unary math and activations, comparisons,
// selection, and the copies (contiguous, clone, to). Each forward is followed by its backward.

#include <cmath>
#include <string>

#include <xtensor/xadapt.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xnoalias.hpp>
#include <xsimd/xsimd.hpp>

#include "tapegrad/autograd/kernels/elementwise.h"
#include "tapegrad/autograd/ops.h"

namespace tapegrad {

namespace kernels {

Tensor dense(const Tensor& x) {
  if (x.is_contiguous()) return x;
  Tensor out = empty(x.shape(), x.dtype());
  dispatch_all(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    copy_strided(x.data_ptr<T>(), x.strides(), out.data_ptr<T>(), out.strides(), x.shape());
  });
  return out;
}

}  // namespace kernels

namespace {

using kernels::map;
using kernels::map2;
using kernels::map3;

void check_same_dtype(const Tensor& a, const Tensor& b, const char* op) {
  if (a.dtype() != b.dtype())
    throw TypeError(std::string(op) + ": dtype mismatch, " + dtype_name(a.dtype()) + " and " + dtype_name(b.dtype()));
}

// Applies a vectorised xtensor expression to a contiguous copy of x: out = fn(x), in chunks
// over the thread pool, cut on vector-block boundaries.
template <class T, class Fn>
Tensor xt_map(const Tensor& x_in, Fn fn) {
  Tensor x = kernels::dense(x_in);
  Tensor out = empty(x.shape(), x.dtype());
  const T* px = x.data_ptr<T>();
  T* po = out.data_ptr<T>();
  kernels::parallel_for_blocks(x.numel(), kernels::kElementwiseGrain, [&](std::int64_t lo, std::int64_t hi) {
    const std::size_t n = static_cast<std::size_t>(hi - lo);
    const std::array<std::size_t, 1> shape{n};
    auto in = xt::adapt(px + lo, n, xt::no_ownership(), shape);
    auto result = xt::adapt(po + lo, n, xt::no_ownership(), shape);
    xt::noalias(result) = fn(in);
  });
  return out;
}

// The binary arithmetic ops share their shape and dtype checks.
template <class F>
Tensor arithmetic(const Tensor& a, const Tensor& b, const char* op, F f) {
  check_same_dtype(a, b, op);
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
  return dispatch_floating(a.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    return map2<T, T>(a, b, shape, [f](T x, T y) { return static_cast<T>(f(x, y)); });
  });
}

// out = f(x) for floating x, with the scalar converted to x's type first.
template <class F>
Tensor floating_map(const Tensor& x, const char* op, F f) {
  return dispatch_floating(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    return map<T, T>(x, [f](T v) { return static_cast<T>(f(v)); });
  });
}

// grad_in = f(g, saved) where g and saved have the same shape (unary backward formulas).
template <class F>
Tensor backward_map(const Tensor& g, const Tensor& saved, F f) {
  return dispatch_floating(g.dtype(), "backward", [&](auto tag) {
    using T = decltype(tag);
    return map2<T, T>(g, saved, g.shape(), [f](T gv, T s) { return static_cast<T>(f(gv, s)); });
  });
}

}  // namespace

// ---------------------------------------------------------------- arithmetic
Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = arithmetic(a, b, "add", [](auto x, auto y) { return x + y; });
  if (any_requires_grad({&a, &b}))
    record("add", out, {a, b}, [sa = a.shape(), sb = b.shape()](const Tensor& g) -> TensorList {
      return {sum_to(g, sa), sum_to(g, sb)};
    });
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = arithmetic(a, b, "sub", [](auto x, auto y) { return x - y; });
  if (any_requires_grad({&a, &b}))
    record("sub", out, {a, b}, [sa = a.shape(), sb = b.shape(), need_b = b.requires_grad()](const Tensor& g) -> TensorList {
      return {sum_to(g, sa), need_b ? sum_to(neg(g), sb) : Tensor()};
    });
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = arithmetic(a, b, "mul", [](auto x, auto y) { return x * y; });
  if (any_requires_grad({&a, &b}))
    record("mul", out, {a, b}, [a = a.detach(), b = b.detach(), need_a = a.requires_grad(),
                                need_b = b.requires_grad()](const Tensor& g) -> TensorList {
      return {need_a ? sum_to(g * b, a.shape()) : Tensor(), need_b ? sum_to(g * a, b.shape()) : Tensor()};
    });
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = arithmetic(a, b, "div", [](auto x, auto y) { return x / y; });
  if (any_requires_grad({&a, &b}))
    record("div", out, {a, b}, [a = a.detach(), b = b.detach(), need_a = a.requires_grad(),
                                need_b = b.requires_grad()](const Tensor& g) -> TensorList {
      // d(a/b)/db = -a / b^2
      return {need_a ? sum_to(g / b, a.shape()) : Tensor(), need_b ? sum_to(neg(g * a) / (b * b), b.shape()) : Tensor()};
    });
  return out;
}

Tensor add(const Tensor& a, double b) {
  Tensor out = floating_map(a, "add", [b](auto x) { return x + b; });
  if (any_requires_grad({&a})) record("add", out, {a}, [](const Tensor& g) -> TensorList { return {g}; });
  return out;
}

Tensor sub(const Tensor& a, double b) { return add(a, -b); }

Tensor rsub(double a, const Tensor& b) {
  Tensor out = floating_map(b, "rsub", [a](auto x) { return a - x; });
  if (any_requires_grad({&b})) record("rsub", out, {b}, [](const Tensor& g) -> TensorList { return {neg(g)}; });
  return out;
}

Tensor mul(const Tensor& a, double b) {
  Tensor out = floating_map(a, "mul", [b](auto x) { return x * b; });
  if (any_requires_grad({&a})) record("mul", out, {a}, [b](const Tensor& g) -> TensorList { return {g * b}; });
  return out;
}

Tensor div(const Tensor& a, double b) {
  Tensor out = floating_map(a, "div", [b](auto x) { return x / b; });
  if (any_requires_grad({&a})) record("div", out, {a}, [b](const Tensor& g) -> TensorList { return {g / b}; });
  return out;
}

Tensor rdiv(double a, const Tensor& b) {
  Tensor out = floating_map(b, "rdiv", [a](auto x) { return a / x; });
  if (any_requires_grad({&b}))
    record("rdiv", out, {b}, [y = out.detach(), b = b.detach()](const Tensor& g) -> TensorList {
      // d(a/b)/db = -(a/b) / b
      return {backward_map(g, y, [](auto gv, auto yv) { return -gv * yv; }) / b};
    });
  return out;
}

Tensor neg(const Tensor& x) {
  Tensor out = floating_map(x, "neg", [](auto v) { return -v; });
  if (any_requires_grad({&x})) record("neg", out, {x}, [](const Tensor& g) -> TensorList { return {neg(g)}; });
  return out;
}

namespace {

// maximum and minimum: the gradient goes to the chosen operand, half to each on a tie.
Tensor extremum(const Tensor& a, const Tensor& b, const char* op, bool take_max) {
  Tensor out = arithmetic(a, b, op, [take_max](auto x, auto y) { return (x > y) == take_max ? x : (x == y ? x : y); });
  if (any_requires_grad({&a, &b}))
    record(op, out, {a, b}, [a = a.detach(), b = b.detach(), take_max](const Tensor& g) -> TensorList {
      const Tensor share_a = dispatch_floating(a.dtype(), "backward", [&](auto tag) {
        using T = decltype(tag);
        return map2<T, T>(a, b, broadcast_shapes(a.shape(), b.shape(), "backward"), [take_max](T x, T y) {
          return x == y ? T(0.5) : ((x > y) == take_max ? T(1) : T(0));
        });
      });
      return {sum_to(g * share_a, a.shape()), sum_to(g * (1.0 - share_a), b.shape())};
    });
  return out;
}

}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) { return extremum(a, b, "maximum", true); }
Tensor minimum(const Tensor& a, const Tensor& b) { return extremum(a, b, "minimum", false); }

// ---------------------------------------------------------------- unary math
Tensor pow(const Tensor& x, double exponent) {
  Tensor out = floating_map(x, "pow", [exponent](auto v) {
    using T = decltype(v);
    if (exponent == 2.0) return v * v;
    return static_cast<T>(std::pow(v, static_cast<T>(exponent)));
  });
  if (any_requires_grad({&x}))
    record("pow", out, {x}, [x = x.detach(), exponent](const Tensor& g) -> TensorList {
      return {backward_map(g, x, [exponent](auto gv, auto xv) {
        using T = decltype(xv);
        if (exponent == 0.0) return T(0);
        return static_cast<T>(gv * static_cast<T>(exponent) * std::pow(xv, static_cast<T>(exponent - 1.0)));
      })};
    });
  return out;
}

Tensor exp(const Tensor& x) {
  Tensor out = dispatch_floating(x.dtype(), "exp", [&](auto tag) {
    return xt_map<decltype(tag)>(x, [](const auto& e) { return xt::exp(e); });
  });
  if (any_requires_grad({&x}))
    record("exp", out, {x}, [y = out.detach()](const Tensor& g) -> TensorList { return {g * y}; });
  return out;
}

Tensor log(const Tensor& x) {
  Tensor out = dispatch_floating(x.dtype(), "log", [&](auto tag) {
    return xt_map<decltype(tag)>(x, [](const auto& e) { return xt::log(e); });
  });
  if (any_requires_grad({&x}))
    record("log", out, {x}, [x = x.detach()](const Tensor& g) -> TensorList { return {g / x}; });
  return out;
}

Tensor sqrt(const Tensor& x) {
  Tensor out = dispatch_floating(x.dtype(), "sqrt", [&](auto tag) {
    return xt_map<decltype(tag)>(x, [](const auto& e) { return xt::sqrt(e); });
  });
  if (any_requires_grad({&x}))
    record("sqrt", out, {x}, [y = out.detach()](const Tensor& g) -> TensorList {
      return {backward_map(g, y, [](auto gv, auto yv) { return gv / (yv + yv); })};
    });
  return out;
}

Tensor abs(const Tensor& x) {
  Tensor out = floating_map(x, "abs", [](auto v) { return std::abs(v); });
  if (any_requires_grad({&x}))
    record("abs", out, {x}, [x = x.detach()](const Tensor& g) -> TensorList {
      return {backward_map(g, x, [](auto gv, auto xv) {
        using T = decltype(xv);
        return xv > T(0) ? gv : (xv < T(0) ? -gv : T(0));
      })};
    });
  return out;
}

Tensor tanh(const Tensor& x) {
  Tensor out = dispatch_floating(x.dtype(), "tanh", [&](auto tag) {
    return xt_map<decltype(tag)>(x, [](const auto& e) { return xt::tanh(e); });
  });
  if (any_requires_grad({&x}))
    record("tanh", out, {x}, [y = out.detach()](const Tensor& g) -> TensorList {
      return {backward_map(g, y, [](auto gv, auto yv) { return gv * (1 - yv * yv); })};
    });
  return out;
}

Tensor sigmoid(const Tensor& x) {
  Tensor out = dispatch_floating(x.dtype(), "sigmoid", [&](auto tag) {
    using T = decltype(tag);
    return xt_map<T>(x, [](const auto& e) { return T(1) / (T(1) + xt::exp(-e)); });
  });
  if (any_requires_grad({&x}))
    record("sigmoid", out, {x}, [y = out.detach()](const Tensor& g) -> TensorList {
      return {backward_map(g, y, [](auto gv, auto yv) { return gv * yv * (1 - yv); })};
    });
  return out;
}

Tensor relu(const Tensor& x) {
  Tensor out = floating_map(x, "relu", [](auto v) { return v > 0 ? v : decltype(v)(0); });
  if (any_requires_grad({&x}))
    record("relu", out, {x}, [y = out.detach()](const Tensor& g) -> TensorList {
      return {backward_map(g, y, [](auto gv, auto yv) { return yv > 0 ? gv : decltype(gv)(0); })};
    });
  return out;
}

namespace {

constexpr double kSqrt2 = 1.4142135623730950488;
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2 / pi)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;   // 1 / sqrt(2 pi)
constexpr double kGeluCubic = 0.044715;

// gelu on contiguous buffers, vectorised with xsimd, and a scalar tail with the same formulas:
//   exact: 0.5 x (1 + erf(x / sqrt(2)));  tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + c x^3)))
template <class T>
void gelu_forward_contiguous(const T* x, T* out, std::int64_t n, bool use_tanh) {
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
    const T inner = use_tanh ? std::tanh(T(kSqrt2OverPi) * (xv + T(kGeluCubic) * xv * xv * xv))
                             : std::erf(xv * T(1 / kSqrt2));
    out[i] = T(0.5) * xv * (T(1) + inner);
  }
}

// gelu's backward on contiguous buffers, vectorised with xsimd (std::erf and std::exp per
// element made it a tenth of a transformer step); the scalar tail and strided inputs use the
// same formulas through backward_map:
//   exact: g (Phi(x) + x phi(x));  tanh: g (0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3c x^2))
template <class T>
void gelu_backward_contiguous(const T* g, const T* x, T* out, std::int64_t n, bool use_tanh) {
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

}  // namespace

Tensor gelu(const Tensor& x, GeluApproximation approximate) {
  const bool use_tanh = approximate == GeluApproximation::Tanh;
  Tensor out = dispatch_floating(x.dtype(), "gelu", [&](auto tag) {
    using T = decltype(tag);
    const Tensor xd = kernels::dense(x);
    Tensor y = empty(x.shape(), x.dtype());
    const T* px = xd.data_ptr<T>();
    T* py = y.data_ptr<T>();
    kernels::parallel_for_blocks(x.numel(), kernels::kElementwiseGrain, [&](std::int64_t lo, std::int64_t hi) {
      gelu_forward_contiguous<T>(px + lo, py + lo, hi - lo, use_tanh);
    });
    return y;
  });
  if (any_requires_grad({&x}))
    record("gelu", out, {x}, [x = x.detach(), use_tanh](const Tensor& g) -> TensorList {
      if (g.is_contiguous() && x.is_contiguous() && g.dtype() == x.dtype())
        return {dispatch_floating(x.dtype(), "gelu backward", [&](auto tag) {
          using T = decltype(tag);
          Tensor gx = empty(x.shape(), x.dtype());
          const T* pg = g.data_ptr<T>();
          const T* px = x.data_ptr<T>();
          T* out = gx.data_ptr<T>();
          kernels::parallel_for_blocks(x.numel(), kernels::kElementwiseGrain, [&](std::int64_t lo, std::int64_t hi) {
            gelu_backward_contiguous<T>(pg + lo, px + lo, out + lo, hi - lo, use_tanh);
          });
          return gx;
        })};
      return {backward_map(g, x, [use_tanh](auto gv, auto xv) {
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
      })};
    });
  return out;
}

Tensor silu(const Tensor& x) {
  Tensor out = dispatch_floating(x.dtype(), "silu", [&](auto tag) {
    using T = decltype(tag);
    return xt_map<T>(x, [](const auto& e) { return e / (T(1) + xt::exp(-e)); });
  });
  if (any_requires_grad({&x}))
    record("silu", out, {x}, [x = x.detach()](const Tensor& g) -> TensorList {
      return {backward_map(g, x, [](auto gv, auto xv) {
        using T = decltype(xv);
        const T s = T(1) / (T(1) + std::exp(-xv));
        return gv * s * (1 + xv * (1 - s));
      })};
    });
  return out;
}

Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max) {
  const double lo = min.value_or(-INFINITY);
  const double hi = max.value_or(INFINITY);
  if (std::isnan(lo) || std::isnan(hi)) throw ValueError("clamp: bounds must not be NaN");
  if (lo > hi)
    throw ValueError("clamp: min must not exceed max, got min " + std::to_string(lo) + ", max " + std::to_string(hi));
  Tensor out = floating_map(x, "clamp", [lo, hi](auto v) {
    using T = decltype(v);
    return v < T(lo) ? T(lo) : (v > T(hi) ? T(hi) : v);
  });
  if (any_requires_grad({&x}))
    record("clamp", out, {x}, [x = x.detach(), lo, hi](const Tensor& g) -> TensorList {
      return {backward_map(g, x, [lo, hi](auto gv, auto xv) {
        using T = decltype(xv);
        return xv >= T(lo) && xv <= T(hi) ? gv : T(0);
      })};
    });
  return out;
}

// ---------------------------------------------------------------- comparisons
namespace {

template <class F>
Tensor compare(const Tensor& a, const Tensor& b, const char* op, F f) {
  check_same_dtype(a, b, op);
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
  return dispatch_all(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    return map2<bool, T>(a, b, shape, [f](T x, T y) { return static_cast<bool>(f(x, y)); });
  });
}

template <class F>
Tensor compare_scalar(const Tensor& a, double b, F f) {
  return dispatch_all(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    return map<bool, T>(a, [f, b](T x) { return static_cast<bool>(f(static_cast<double>(x), b)); });
  });
}

}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) { return compare(a, b, "eq", [](auto x, auto y) { return x == y; }); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare(a, b, "ne", [](auto x, auto y) { return x != y; }); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare(a, b, "lt", [](auto x, auto y) { return x < y; }); }
Tensor le(const Tensor& a, const Tensor& b) { return compare(a, b, "le", [](auto x, auto y) { return x <= y; }); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare(a, b, "gt", [](auto x, auto y) { return x > y; }); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare(a, b, "ge", [](auto x, auto y) { return x >= y; }); }
Tensor eq(const Tensor& a, double b) { return compare_scalar(a, b, [](double x, double y) { return x == y; }); }
Tensor ne(const Tensor& a, double b) { return compare_scalar(a, b, [](double x, double y) { return x != y; }); }
Tensor lt(const Tensor& a, double b) { return compare_scalar(a, b, [](double x, double y) { return x < y; }); }
Tensor le(const Tensor& a, double b) { return compare_scalar(a, b, [](double x, double y) { return x <= y; }); }
Tensor gt(const Tensor& a, double b) { return compare_scalar(a, b, [](double x, double y) { return x > y; }); }
Tensor ge(const Tensor& a, double b) { return compare_scalar(a, b, [](double x, double y) { return x >= y; }); }

namespace {

void check_bool(const Tensor& t, const char* op, const char* what) {
  if (t.dtype() != kBool)
    throw TypeError(std::string(op) + ": " + what + " must be a bool tensor, got " + dtype_name(t.dtype()));
}

}  // namespace

Tensor logical_not(const Tensor& x) {
  check_bool(x, "logical_not", "the input");
  return map<bool, bool>(x, [](bool v) { return !v; });
}

Tensor logical_and(const Tensor& a, const Tensor& b) {
  check_bool(a, "logical_and", "the first input");
  check_bool(b, "logical_and", "the second input");
  return map2<bool, bool>(a, b, broadcast_shapes(a.shape(), b.shape(), "logical_and"),
                          [](bool x, bool y) { return x && y; });
}

Tensor logical_or(const Tensor& a, const Tensor& b) {
  check_bool(a, "logical_or", "the first input");
  check_bool(b, "logical_or", "the second input");
  return map2<bool, bool>(a, b, broadcast_shapes(a.shape(), b.shape(), "logical_or"),
                          [](bool x, bool y) { return x || y; });
}

// ---------------------------------------------------------------- selection
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) {
  check_bool(condition, "where", "the condition");
  check_same_dtype(a, b, "where");
  const Shape shape = broadcast_shapes(broadcast_shapes(condition.shape(), a.shape(), "where"), b.shape(), "where");
  Tensor out = dispatch_all(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    return map3<T, bool, T, T>(condition, a, b, shape, [](bool c, T x, T y) { return c ? x : y; });
  });
  if (any_requires_grad({&a, &b}))
    record("where", out, {a, b}, [c = condition, sa = a.shape(), sb = b.shape(), need_a = a.requires_grad(),
                                  need_b = b.requires_grad()](const Tensor& g) -> TensorList {
      const Tensor zero = scalar_tensor(0.0, g.dtype());
      return {need_a ? sum_to(where(c, g, zero), sa) : Tensor(), need_b ? sum_to(where(c, zero, g), sb) : Tensor()};
    });
  return out;
}

Tensor where(const Tensor& condition, const Tensor& a, double b) {
  return where(condition, a, scalar_tensor(b, a.dtype()));
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  check_bool(mask, "masked_fill", "the mask");
  if (broadcast_shapes(mask.shape(), x.shape(), "masked_fill") != x.shape())
    throw ShapeError("masked_fill: mask of shape " + mask.shape().str() + " does not broadcast to the input's shape " +
                     x.shape().str());
  Tensor out = dispatch_all(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T v = static_cast<T>(value);
    return map2<T, T, bool>(x, mask, x.shape(), [v](T xv, bool m) { return m ? v : xv; });
  });
  if (any_requires_grad({&x}))
    record("masked_fill", out, {x}, [mask](const Tensor& g) -> TensorList { return {masked_fill(g, mask, 0.0)}; });
  return out;
}

// ---------------------------------------------------------------- copies
Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  Tensor out = empty(shape(), dtype());
  dispatch_all(dtype(), [&](auto tag) {
    using T = decltype(tag);
    kernels::copy_strided(data_ptr<T>(), strides(), out.data_ptr<T>(), out.strides(), shape());
  });
  if (any_requires_grad({this})) record("clone", out, {*this}, [](const Tensor& g) -> TensorList { return {g}; });
  return out;
}

Tensor Tensor::to(DType target) const {
  if (target == dtype()) return *this;
  const DType source = dtype();
  Tensor out = dispatch_all(source, [&](auto from) {
    using S = decltype(from);
    return dispatch_all(target, [&](auto to) {
      using T = decltype(to);
      return map<T, S>(*this, [](S v) {
        if constexpr (std::is_same_v<T, bool>) return v != S(0);
        else return static_cast<T>(v);
      });
    });
  });
  // Only conversions between floating types carry a gradient.
  if (is_floating(source) && is_floating(target) && any_requires_grad({this}))
    record("to", out, {*this}, [source](const Tensor& g) -> TensorList { return {g.to(source)}; });
  return out;
}

}  // namespace tapegrad
