// Unary math and activations: neg, pow, exp, log, expm1, log1p, sqrt, abs, tanh, sigmoid, sin, cos,
// rsqrt, reciprocal, the roundings (sign, floor, ceil, round, trunc), the tests isnan, isinf and
// isfinite, relu, gelu, silu and clamp, each forward followed by its backward. The loops are
// kernels/elementwise.h's maps and kernels/unary.h's vectorised kernels. As torch's, the ops whose
// results are not whole numbers (exp, log, sqrt, tanh, sigmoid, ...) take int64 and Bool inputs
// as float32, and neg, abs, sign, the roundings and relu keep int64.

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

#include "tapegrad/autograd/autocast.h"
#include "tapegrad/autograd/kernels/elementwise.h"
#include "tapegrad/autograd/kernels/unary.h"
#include "tapegrad/autograd/ops.h"

namespace tapegrad {

namespace {

using kernels::backward_map;
using kernels::floating_map;
using kernels::integer_map;
using kernels::map;

// gelu''(x), written with ops (so that it is differentiable in turn).
Tensor gelu_second_derivative(const Tensor& x, bool use_tanh) {
  constexpr double kSqrt2OverPi = 0.7978845608028654;
  constexpr double kCubic = 0.044715;
  if (use_tanh) {
    // f = x (1 + t) / 2 with t = tanh(u), u = c (x + a x^3):
    // f'' = (1 - t^2) (u' + x (u'' - 2 t u'^2) / 2), u' = c (1 + 3 a x^2), u'' = 6 a c x.
    const Tensor x2 = x * x;
    const Tensor t = tanh((x + x2 * x * kCubic) * kSqrt2OverPi);
    const Tensor du = (x2 * (3.0 * kCubic) + 1.0) * kSqrt2OverPi;
    const Tensor ddu = x * (6.0 * kCubic * kSqrt2OverPi);
    return rsub(1.0, t * t) * (du + x * (ddu - t * du * du * 2.0) * 0.5);
  }
  // f = x Phi(x): f'' = phi(x) (2 - x^2), phi the standard normal density.
  constexpr double kInvSqrt2Pi = 0.3989422804014327;
  const Tensor x2 = x * x;
  return exp(x2 * -0.5) * kInvSqrt2Pi * rsub(2.0, x2);
}

// g * gelu'(x) as an op of its own: the kernel computes it, and its backward (g's part is the
// same op again, x's needs gelu'') keeps every order of derivative taped.
Tensor gelu_backward(const Tensor& g, const Tensor& x, bool use_tanh) {
  Tensor out = kernels::gelu_backward(g, x, use_tanh);
  if (any_requires_grad({&g, &x}))
    record("gelu_backward", out, {g, x},
           [sg = SavedTensor(g), sx = SavedTensor(x), use_tanh](const Tensor& gg) -> TensorList {
             const Tensor& g = sg.unpack();
             const Tensor& x = sx.unpack();
             return {gelu_backward(gg, x, use_tanh), gg * g * gelu_second_derivative(x, use_tanh)};
           });
  return out;
}

}  // namespace

// ---------------------------------------------------------------- unary math
Tensor neg(const Tensor& x) {
  if (x.dtype() == kInt64) return integer_map(x, [](std::uint64_t v) { return 0 - v; });
  Tensor out = floating_map(x, "neg", [](auto v) { return -v; });
  if (any_requires_grad({&x})) record("neg", out, {x}, [](const Tensor& g) -> TensorList { return {neg(g)}; });
  return out;
}

Tensor pow(const Tensor& x, double exponent) {
  if (!is_floating(x.dtype())) return pow(x.to(kFloat32), exponent);
  Tensor out = floating_map(x, "pow", [exponent](auto v) {
    using T = decltype(v);
    if (exponent == 2.0) return static_cast<T>(v * v);
    return static_cast<T>(std::pow(v, static_cast<T>(exponent)));
  });
  if (any_requires_grad({&x}))
    record("pow", out, {x}, [saved = SavedTensor(x), exponent](const Tensor& g) -> TensorList {
      const Tensor& x = saved.unpack();
      if (any_requires_grad({&g, &x})) {
        if (exponent == 0.0) return {zeros_like(g)};
        return {g * pow(x, exponent - 1.0) * exponent};
      }
      return {backward_map(g, x, [exponent](auto gv, auto xv) {
        using T = decltype(xv);
        if (exponent == 0.0) return T(0);
        return static_cast<T>(gv * static_cast<T>(exponent) * std::pow(xv, static_cast<T>(exponent - 1.0)));
      })};
    });
  return out;
}

Tensor exp(const Tensor& x) {
  if (!is_floating(x.dtype())) return exp(x.to(kFloat32));
  if (x.dtype() == kBFloat16) return detail::precision_result(exp(x.to(kFloat32)), kBFloat16);
  Tensor out = dispatch_floating(x.dtype(), "exp", [&](auto tag) {
    return kernels::vector_map<decltype(tag)>(x, [](const auto& e) { return xt::exp(e); });
  });
  if (any_requires_grad({&x}))
    record("exp", out, {x}, [y = SavedTensor::output(out)](const Tensor& g) -> TensorList { return {g * y.unpack()}; });
  return out;
}

Tensor log(const Tensor& x) {
  if (!is_floating(x.dtype())) return log(x.to(kFloat32));
  if (x.dtype() == kBFloat16) return detail::precision_result(log(x.to(kFloat32)), kBFloat16);
  Tensor out = dispatch_floating(x.dtype(), "log", [&](auto tag) {
    return kernels::vector_map<decltype(tag)>(x, [](const auto& e) { return xt::log(e); });
  });
  if (any_requires_grad({&x}))
    record("log", out, {x}, [x = SavedTensor(x)](const Tensor& g) -> TensorList { return {g / x.unpack()}; });
  return out;
}

Tensor sqrt(const Tensor& x) {
  if (!is_floating(x.dtype())) return sqrt(x.to(kFloat32));
  if (x.dtype() == kBFloat16) return sqrt(x.to(kFloat32)).to(kBFloat16);  // computed in float32
  Tensor out = dispatch_floating(x.dtype(), "sqrt", [&](auto tag) {
    return kernels::vector_map<decltype(tag)>(x, [](const auto& e) { return xt::sqrt(e); });
  });
  if (any_requires_grad({&x}))
    record("sqrt", out, {x}, [saved = SavedTensor::output(out)](const Tensor& g) -> TensorList {
      const Tensor& y = saved.unpack();
      if (any_requires_grad({&g, &y})) return {g / (y * 2.0)};
      return {backward_map(g, y, [](auto gv, auto yv) { return gv / (yv + yv); })};
    });
  return out;
}

Tensor abs(const Tensor& x) {
  if (x.dtype() == kInt64)
    return integer_map(x, [](std::uint64_t v) { return static_cast<std::int64_t>(v) < 0 ? 0 - v : v; });
  Tensor out = floating_map(x, "abs", [](auto v) { return std::abs(v); });
  if (any_requires_grad({&x}))
    record("abs", out, {x}, [saved = SavedTensor(x)](const Tensor& g) -> TensorList {
      const Tensor& x = saved.unpack();
      if (any_requires_grad({&g, &x})) {  // sign(x) is piecewise constant: a constant here
        const Tensor zero = scalar_tensor(0.0, g.dtype());
        return {where(gt(x, 0.0), g, where(lt(x, 0.0), neg(g), zero))};
      }
      return {backward_map(g, x, [](auto gv, auto xv) {
        using T = decltype(xv);
        return xv > T(0) ? gv : (xv < T(0) ? static_cast<T>(-gv) : T(0));
      })};
    });
  return out;
}

Tensor tanh(const Tensor& x) {
  if (!is_floating(x.dtype())) return tanh(x.to(kFloat32));
  if (x.dtype() == kBFloat16) return tanh(x.to(kFloat32)).to(kBFloat16);  // computed in float32
  Tensor out = dispatch_floating(x.dtype(), "tanh", [&](auto tag) {
    return kernels::vector_map<decltype(tag)>(x, [](const auto& e) { return xt::tanh(e); });
  });
  if (any_requires_grad({&x}))
    record("tanh", out, {x}, [saved = SavedTensor::output(out)](const Tensor& g) -> TensorList {
      const Tensor& y = saved.unpack();
      if (any_requires_grad({&g, &y})) return {g * rsub(1.0, y * y)};
      return {backward_map(g, y, [](auto gv, auto yv) { return gv * (1 - yv * yv); })};
    });
  return out;
}

Tensor sigmoid(const Tensor& x) {
  if (!is_floating(x.dtype())) return sigmoid(x.to(kFloat32));
  if (x.dtype() == kBFloat16) return sigmoid(x.to(kFloat32)).to(kBFloat16);  // computed in float32
  Tensor out = dispatch_floating(x.dtype(), "sigmoid", [&](auto tag) {
    using T = decltype(tag);
    return kernels::vector_map<T>(x, [](const auto& e) { return T(1) / (T(1) + xt::exp(-e)); });
  });
  if (any_requires_grad({&x}))
    record("sigmoid", out, {x}, [saved = SavedTensor::output(out)](const Tensor& g) -> TensorList {
      const Tensor& y = saved.unpack();
      if (any_requires_grad({&g, &y})) return {g * y * rsub(1.0, y)};
      return {backward_map(g, y, [](auto gv, auto yv) { return gv * yv * (1 - yv); })};
    });
  return out;
}

Tensor softplus(const Tensor& x) {
  if (x.dtype() == kBFloat16) return softplus(x.to(kFloat32)).to(kBFloat16);  // computed in float32
  Tensor out =
      dispatch_floating(x.dtype(), "softplus", [&](auto tag) { return kernels::softplus_forward<decltype(tag)>(x); });
  if (any_requires_grad({&x}))
    record("softplus", out, {x}, [saved = SavedTensor(x)](const Tensor& g) -> TensorList {
      const Tensor& x = saved.unpack();
      if (any_requires_grad({&g, &x})) return {g * sigmoid(x)};
      return {backward_map(g, x, [](auto gv, auto xv) {
        using T = decltype(xv);
        return gv / (T(1) + std::exp(-xv));
      })};
    });
  return out;
}

// expm1 and log1p keep the digits that exp(x) - 1 and log(1 + x) lose for small |x| (float32 gives
// exp(1e-8) - 1 = 0, expm1(1e-8) = 1e-8).
Tensor expm1(const Tensor& x) {
  if (!is_floating(x.dtype())) return expm1(x.to(kFloat32));
  if (x.dtype() == kBFloat16) return detail::precision_result(expm1(x.to(kFloat32)), kBFloat16);
  Tensor out = floating_map(x, "expm1", [](auto v) { return std::expm1(v); });
  if (any_requires_grad({&x}))
    record("expm1", out, {x}, [saved = SavedTensor::output(out)](const Tensor& g) -> TensorList {
      const Tensor& y = saved.unpack();  // the derivative exp(x) is y + 1
      if (any_requires_grad({&g, &y})) return {g * (y + 1.0)};
      return {backward_map(g, y, [](auto gv, auto yv) { return gv * (yv + 1); })};
    });
  return out;
}

Tensor log1p(const Tensor& x) {
  if (!is_floating(x.dtype())) return log1p(x.to(kFloat32));
  if (x.dtype() == kBFloat16) return detail::precision_result(log1p(x.to(kFloat32)), kBFloat16);
  Tensor out = floating_map(x, "log1p", [](auto v) { return std::log1p(v); });
  if (any_requires_grad({&x}))
    record("log1p", out, {x}, [saved = SavedTensor(x)](const Tensor& g) -> TensorList {
      const Tensor& x = saved.unpack();
      if (any_requires_grad({&g, &x})) return {g / (x + 1.0)};
      return {backward_map(g, x, [](auto gv, auto xv) { return gv / (xv + 1); })};
    });
  return out;
}

Tensor sin(const Tensor& x) {
  if (!is_floating(x.dtype())) return sin(x.to(kFloat32));
  if (x.dtype() == kBFloat16) return sin(x.to(kFloat32)).to(kBFloat16);  // computed in float32
  Tensor out = dispatch_floating(x.dtype(), "sin", [&](auto tag) {
    return kernels::vector_map<decltype(tag)>(x, [](const auto& e) { return xt::sin(e); });
  });
  if (any_requires_grad({&x}))
    record("sin", out, {x},
           [saved = SavedTensor(x)](const Tensor& g) -> TensorList { return {g * cos(saved.unpack())}; });
  return out;
}

Tensor cos(const Tensor& x) {
  if (!is_floating(x.dtype())) return cos(x.to(kFloat32));
  if (x.dtype() == kBFloat16) return cos(x.to(kFloat32)).to(kBFloat16);  // computed in float32
  Tensor out = dispatch_floating(x.dtype(), "cos", [&](auto tag) {
    return kernels::vector_map<decltype(tag)>(x, [](const auto& e) { return xt::cos(e); });
  });
  if (any_requires_grad({&x}))
    record("cos", out, {x},
           [saved = SavedTensor(x)](const Tensor& g) -> TensorList { return {neg(g * sin(saved.unpack()))}; });
  return out;
}

Tensor rsqrt(const Tensor& x) {
  if (!is_floating(x.dtype())) return rsqrt(x.to(kFloat32));
  Tensor out = floating_map(x, "rsqrt", [](auto v) { return 1 / std::sqrt(v); });
  if (any_requires_grad({&x}))
    record("rsqrt", out, {x}, [saved = SavedTensor::output(out)](const Tensor& g) -> TensorList {
      const Tensor& y = saved.unpack();  // d/dx x^(-1/2) = -y^3 / 2
      if (any_requires_grad({&g, &y})) return {g * y * y * y * -0.5};
      return {backward_map(g, y, [](auto gv, auto yv) { return static_cast<decltype(yv)>(gv * yv * yv * yv * -0.5); })};
    });
  return out;
}

Tensor reciprocal(const Tensor& x) {
  if (!is_floating(x.dtype())) return reciprocal(x.to(kFloat32));
  Tensor out = floating_map(x, "reciprocal", [](auto v) { return 1 / v; });
  if (any_requires_grad({&x}))
    record("reciprocal", out, {x}, [saved = SavedTensor::output(out)](const Tensor& g) -> TensorList {
      const Tensor& y = saved.unpack();  // d/dx 1/x = -y^2
      if (any_requires_grad({&g, &y})) return {neg(g * y * y)};
      return {backward_map(g, y, [](auto gv, auto yv) { return -(gv * yv * yv); })};
    });
  return out;
}

namespace {

// An op that is constant between its jumps (sign, floor, ...): its gradient is 0 everywhere, as
// torch's, recorded so that the graph stays connected.
Tensor piecewise_constant(const Tensor& x, Tensor out, const char* op) {
  if (any_requires_grad({&x})) record(op, out, {x}, [](const Tensor& g) -> TensorList { return {zeros_like(g)}; });
  return out;
}

}  // namespace

Tensor sign(const Tensor& x) {
  if (x.dtype() == kInt64)
    return map<std::int64_t, std::int64_t>(x,
                                           [](std::int64_t v) { return static_cast<std::int64_t>((v > 0) - (v < 0)); });
  return piecewise_constant(
      x,
      floating_map(x, "sign",
                   [](auto v) {
                     using T = decltype(v);
                     return v > T(0) ? T(1) : (v < T(0) ? T(-1) : T(0));  // NaN and -0 give 0, as torch's
                   }),
      "sign");
}

Tensor floor(const Tensor& x) {
  if (x.dtype() == kInt64) return x.clone();  // already whole
  return piecewise_constant(x, floating_map(x, "floor", [](auto v) { return std::floor(v); }), "floor");
}

Tensor ceil(const Tensor& x) {
  if (x.dtype() == kInt64) return x.clone();  // already whole
  return piecewise_constant(x, floating_map(x, "ceil", [](auto v) { return std::ceil(v); }), "ceil");
}

Tensor round(const Tensor& x) {
  if (x.dtype() == kInt64) return x.clone();  // already whole
  // std::nearbyint under the default rounding mode rounds halves to even, as torch.round.
  return piecewise_constant(x, floating_map(x, "round", [](auto v) { return std::nearbyint(v); }), "round");
}

Tensor trunc(const Tensor& x) {
  if (x.dtype() == kInt64) return x.clone();  // already whole
  return piecewise_constant(x, floating_map(x, "trunc", [](auto v) { return std::trunc(v); }), "trunc");
}

namespace {

template <class Test>
Tensor classify(const Tensor& x, Test test) {
  return dispatch_all(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    return kernels::map<bool, T>(x, [test](T v) {
      if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, BFloat16>) return test(static_cast<double>(v));
      else return test(0.0);  // integers and Bool are finite numbers
    });
  });
}

}  // namespace

Tensor isnan(const Tensor& x) {
  return classify(x, [](double v) { return std::isnan(v); });
}

Tensor isinf(const Tensor& x) {
  return classify(x, [](double v) { return std::isinf(v); });
}

Tensor isfinite(const Tensor& x) {
  return classify(x, [](double v) { return std::isfinite(v); });
}

Tensor erf(const Tensor& x) {
  if (!is_floating(x.dtype())) return erf(x.to(kFloat32));
  if (x.dtype() == kBFloat16) return erf(x.to(kFloat32)).to(kBFloat16);  // computed in float32
  Tensor out = floating_map(x, "erf", [](auto v) { return std::erf(v); });
  if (any_requires_grad({&x}))
    record("erf", out, {x}, [saved = SavedTensor(x)](const Tensor& g) -> TensorList {
      constexpr double kTwoOverSqrtPi = 1.1283791670955126;  // 2 / sqrt(pi)
      const Tensor& x = saved.unpack();
      if (any_requires_grad({&g, &x})) return {g * exp(-(x * x)) * kTwoOverSqrtPi};
      return {backward_map(g, x, [](auto gv, auto xv) {
        using T = decltype(xv);
        return static_cast<T>(gv * T(kTwoOverSqrtPi) * std::exp(-xv * xv));
      })};
    });
  return out;
}

Tensor relu(const Tensor& x) {
  if (x.dtype() == kInt64) return map<std::int64_t, std::int64_t>(x, [](std::int64_t v) { return v > 0 ? v : 0; });
  Tensor out = floating_map(x, "relu", [](auto v) { return v > 0 ? v : decltype(v)(0); });
  if (any_requires_grad({&x}))
    record("relu", out, {x}, [saved = SavedTensor::output(out)](const Tensor& g) -> TensorList {
      const Tensor& y = saved.unpack();
      if (any_requires_grad({&g, &y})) return {where(gt(y, 0.0), g, scalar_tensor(0.0, g.dtype()))};
      return {backward_map(g, y, [](auto gv, auto yv) { return yv > 0 ? gv : decltype(gv)(0); })};
    });
  return out;
}
Tensor gelu(const Tensor& x, GeluApproximation approximate) {
  const bool use_tanh = approximate == GeluApproximation::Tanh;
  // bfloat16 runs the float32 kernel on widened chunks and saves its bfloat16 input (a
  // transformer's largest activation), so the tape holds half the bytes.
  Tensor out = x.dtype() == kBFloat16 ? kernels::gelu_forward_bfloat16(x, use_tanh)
                                      : dispatch_floating(x.dtype(), "gelu", [&](auto tag) {
                                          return kernels::gelu_forward<decltype(tag)>(x, use_tanh);
                                        });
  if (any_requires_grad({&x}))
    record("gelu", out, {x}, [x = SavedTensor(x), use_tanh](const Tensor& g) -> TensorList {
      const Tensor& input = x.unpack();
      if (input.dtype() != kBFloat16) return {gelu_backward(g, input, use_tanh)};
      // The fused kernel when no graph of the gradient is wanted; differentiable ops in float32 otherwise.
      if (g.dtype() == kBFloat16 && !any_requires_grad({&g, &input}))
        return {kernels::gelu_backward_bfloat16(g, input, use_tanh)};
      return {gelu_backward(detail::widen_bf16(g), input.to(kFloat32), use_tanh).to(kBFloat16)};
    });
  return out;
}

Tensor silu(const Tensor& x) {
  if (x.dtype() == kBFloat16) return silu(x.to(kFloat32)).to(kBFloat16);  // computed in float32
  Tensor out = dispatch_floating(x.dtype(), "silu", [&](auto tag) {
    using T = decltype(tag);
    return kernels::vector_map<T>(x, [](const auto& e) { return e / (T(1) + xt::exp(-e)); });
  });
  if (any_requires_grad({&x}))
    record("silu", out, {x}, [saved = SavedTensor(x)](const Tensor& g) -> TensorList {
      const Tensor& x = saved.unpack();
      if (any_requires_grad({&g, &x})) {
        const Tensor s = sigmoid(x);
        return {g * s * (x * rsub(1.0, s) + 1.0)};
      }
      return {backward_map(g, x, [](auto gv, auto xv) {
        using T = decltype(xv);
        const T s = T(1) / (T(1) + std::exp(-xv));
        return gv * s * (1 + xv * (1 - s));
      })};
    });
  return out;
}

Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max) {
  if (!is_floating(x.dtype())) return clamp(x.to(kFloat32), min, max);
  const double lo = min.value_or(-INFINITY);
  const double hi = max.value_or(INFINITY);
  if (std::isnan(lo) || std::isnan(hi)) throw ValueError("clamp: bounds must not be NaN");
  if (lo > hi) throw ValueError(message("clamp: min must not exceed max, got min ", lo, ", max ", hi));
  Tensor out = floating_map(x, "clamp", [lo, hi](auto v) {
    using T = decltype(v);
    return v < T(lo) ? T(lo) : (v > T(hi) ? T(hi) : v);
  });
  if (any_requires_grad({&x}))
    record("clamp", out, {x}, [saved = SavedTensor(x), lo, hi](const Tensor& g) -> TensorList {
      const Tensor& x = saved.unpack();
      if (any_requires_grad({&g, &x}))
        return {where(logical_and(ge(x, lo), le(x, hi)), g, scalar_tensor(0.0, g.dtype()))};
      return {backward_map(g, x, [lo, hi](auto gv, auto xv) {
        using T = decltype(xv);
        return xv >= T(lo) && xv <= T(hi) ? gv : T(0);
      })};
    });
  return out;
}

}  // namespace tapegrad

namespace tapegrad::detail {

Tensor pow_integer(const Tensor& x, std::int64_t exponent) {
  if (is_floating(x.dtype())) return pow(x, static_cast<double>(exponent));
  if (exponent < 0)
    throw ValueError(message("pow: an integer tensor to a negative integer power (", exponent,
                             ") is not allowed; convert it with to(kFloat32) first"));
  // Squaring and multiplying in uint64: wraps around as int64 arithmetic does.
  return integer_map(x, [exponent](std::uint64_t base) {
    std::uint64_t result = 1;
    for (std::uint64_t e = static_cast<std::uint64_t>(exponent); e != 0; e >>= 1) {
      if (e & 1) result *= base;
      base *= base;
    }
    return result;
  });
}

Tensor clamp_integer(const Tensor& x, std::int64_t min, std::int64_t max) {
  if (is_floating(x.dtype())) return clamp(x, static_cast<double>(min), static_cast<double>(max));
  if (min > max) throw ValueError(message("clamp: min must not exceed max, got min ", min, ", max ", max));
  return map<std::int64_t, std::int64_t>(x.to(kInt64),
                                         [min, max](std::int64_t v) { return v < min ? min : (v > max ? max : v); });
}

}  // namespace tapegrad::detail
