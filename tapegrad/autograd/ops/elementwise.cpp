// Binary elementwise ops: arithmetic with broadcasting (and with a scalar), floor division and
// remainders, maximum and minimum, comparisons and logical ops, selection (where, masked_fill),
// and the copies (contiguous, clone, to). Each forward is followed by its backward; the loops are
// kernels/elementwise.h's maps. Unary math and activations are in ops/unary.cpp.

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tapegrad/autograd/kernels/convert.h"
#include "tapegrad/autograd/kernels/elementwise.h"
#include "tapegrad/autograd/ops.h"

namespace tapegrad {

namespace {

using kernels::backward_map;
using kernels::floating_map;
using kernels::map;
using kernels::map2;
using kernels::map3;

// torch refuses subtraction with a bool tensor, whatever the other operand.
void check_not_bool_sub(const Tensor& t, const char* op) {
  if (t.dtype() == kBool)
    throw TypeError(message(op, ": subtraction with a bool tensor is not supported; invert a mask with logical_not"));
}

int category(DType dtype) { return dtype == kBool ? 0 : (is_floating(dtype) ? 2 : 1); }

// a and b converted to their result type: recorded to()s, so each gradient returns in its
// operand's dtype.
std::pair<Tensor, Tensor> promoted(const Tensor& a, const Tensor& b) {
  const DType dtype = result_type(a, b);
  return {a.to(dtype), b.to(dtype)};
}

// The binary arithmetic ops share their shape checks and kernels, on operands of one dtype:
// bfloat16 is computed in float32 and rounded, bool and int64 stay in their dtype. int64 wraps
// around on overflow, as torch's does (computed in uint64, so without undefined behaviour), where
// `wraps`; maximum and minimum compare.
template <class F>
Tensor arithmetic(const Tensor& a, const Tensor& b, const char* op, F f, bool wraps = true) {
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
  return dispatch_all(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, std::int64_t>) {
      if (wraps)
        return map2<T, T>(a, b, shape, [f](T x, T y) {
          return static_cast<T>(f(static_cast<std::uint64_t>(x), static_cast<std::uint64_t>(y)));
        });
    }
    return map2<T, T>(a, b, shape, [f](T x, T y) { return static_cast<T>(f(x, y)); });
  });
}

}  // namespace

// ---------------------------------------------------------------- type promotion
DType result_type(const std::vector<Tensor>& tensors) {
  if (tensors.empty()) throw ValueError("result_type: expected at least one tensor");
  // The dimensioned tensors' dtypes and the 0-dim ones' are promoted apart; the 0-dim ones count
  // only when their category is higher.
  std::optional<DType> dimensioned, zero_dim;
  for (const Tensor& t : tensors) {
    std::optional<DType>& tier = t.dim() ? dimensioned : zero_dim;
    tier = tier ? promote_types(*tier, t.dtype()) : t.dtype();
  }
  if (!dimensioned) return *zero_dim;
  if (!zero_dim || category(*zero_dim) <= category(*dimensioned)) return *dimensioned;
  return promote_types(*dimensioned, *zero_dim);
}

DType result_type(const Tensor& a, const Tensor& b) { return result_type(std::vector<Tensor>{a, b}); }

// ---------------------------------------------------------------- arithmetic
Tensor add(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype()) {
    const auto [x, y] = promoted(a, b);
    return add(x, y);
  }
  Tensor out = arithmetic(a, b, "add", [](auto x, auto y) { return x + y; });
  if (any_requires_grad({&a, &b}))
    record("add", out, {a, b}, [sa = a.shape(), sb = b.shape()](const Tensor& g) -> TensorList {
      return {sum_to(g, sa), sum_to(g, sb)};
    });
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  check_not_bool_sub(a, "sub");
  check_not_bool_sub(b, "sub");
  if (a.dtype() != b.dtype()) {
    const auto [x, y] = promoted(a, b);
    return sub(x, y);
  }
  Tensor out = arithmetic(a, b, "sub", [](auto x, auto y) { return x - y; });
  if (any_requires_grad({&a, &b}))
    record("sub", out, {a, b},
           [sa = a.shape(), sb = b.shape(), need_b = b.requires_grad()](const Tensor& g) -> TensorList {
             return {sum_to(g, sa), need_b ? sum_to(neg(g), sb) : Tensor()};
           });
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype()) {
    const auto [x, y] = promoted(a, b);
    return mul(x, y);
  }
  Tensor out = arithmetic(a, b, "mul", [](auto x, auto y) { return x * y; });
  if (any_requires_grad({&a, &b}))
    record("mul", out, {a, b},
           [sa = SavedTensor(a), sb = SavedTensor(b), need_a = a.requires_grad(),
            need_b = b.requires_grad()](const Tensor& g) -> TensorList {
             const Tensor& a = sa.unpack();
             const Tensor& b = sb.unpack();
             return {need_a ? sum_to(g * b, a.shape()) : Tensor(), need_b ? sum_to(g * a, b.shape()) : Tensor()};
           });
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype()) {
    const auto [x, y] = promoted(a, b);
    return div(x, y);
  }
  if (!is_floating(a.dtype())) return div(a.to(kFloat32), b.to(kFloat32));  // true division, as torch's
  Tensor out = arithmetic(a, b, "div", [](auto x, auto y) { return x / y; });
  if (any_requires_grad({&a, &b}))
    record("div", out, {a, b},
           [sa = SavedTensor(a), sb = SavedTensor(b), need_a = a.requires_grad(),
            need_b = b.requires_grad()](const Tensor& g) -> TensorList {
             const Tensor& a = sa.unpack();
             const Tensor& b = sb.unpack();
             // d(a/b)/db = -a / b^2
             return {need_a ? sum_to(g / b, a.shape()) : Tensor(),
                     need_b ? sum_to(neg(g * a) / (b * b), b.shape()) : Tensor()};
           });
  return out;
}

// ---------------------------------------------------------------- floor division and remainders
namespace {

enum class Division { kFloor, kRemainder, kFmod };

const char* division_name(Division kind) {
  switch (kind) {
    case Division::kFloor:
      return "floor_divide";
    case Division::kRemainder:
      return "remainder";
    case Division::kFmod:
      return "fmod";
  }
  return "";
}

// One element of the three ops on int64. The divisor is not 0 (checked before); -1 is apart,
// since INT64_MIN / -1 overflows: the quotient wraps around (as int64 arithmetic does here) and
// both remainders are 0.
std::int64_t divide_integer(std::int64_t a, std::int64_t b, Division kind) {
  if (b == -1) return kind == Division::kFloor ? static_cast<std::int64_t>(0 - static_cast<std::uint64_t>(a)) : 0;
  std::int64_t q = a / b, r = a % b;  // truncated: r takes a's sign
  if (kind == Division::kFmod) return r;
  if (r != 0 && ((r < 0) != (b < 0))) {  // floored: r takes b's sign
    q -= 1;
    r += b;
  }
  return kind == Division::kFloor ? q : r;
}

// The same on floating point, as torch's CPU kernels (Python's rules): fmod is C's; remainder is
// fmod moved to b's sign; the floored quotient comes from (a - fmod(a, b)) / b, rounded to the
// nearest whole number, and is a / b (inf or NaN) for b == 0.
template <class T>
T divide_floating(T a, T b, Division kind) {
  const T mod = std::fmod(a, b);
  const bool moved = mod != T(0) && ((b < T(0)) != (mod < T(0)));
  if (kind == Division::kFmod) return mod;
  if (kind == Division::kRemainder) return moved ? mod + b : mod;
  if (b == T(0)) return a / b;
  T quotient = (a - mod) / b;
  if (moved) quotient -= T(1);
  if (quotient == T(0)) return std::copysign(T(0), a / b);
  T floored = std::floor(quotient);
  if (quotient - floored > T(0.5)) floored += T(1);
  return floored;
}

Tensor divide(const Tensor& a, const Tensor& b, Division kind) {
  const char* op = division_name(kind);
  if (a.dtype() != b.dtype()) {
    const auto [x, y] = promoted(a, b);
    return divide(x, y, kind);
  }
  if (a.dtype() == kBool)
    throw TypeError(message(op, ": not implemented for bool tensors (convert them with to(kInt64))"));
  if (a.dtype() == kBFloat16)  // computed in float32 and rounded, as the arithmetic ops
    return divide(a.to(kFloat32), b.to(kFloat32), kind).to(kBFloat16);
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
  if (a.dtype() == kInt64) {
    if (sum(eq(b, 0.0)).item() > 0)
      throw ValueError(
          message(op, ": integer division by zero (the divisor of shape ", b.shape().str(), " holds a 0)"));
    return map2<std::int64_t, std::int64_t>(
        a, b, shape, [kind](std::int64_t x, std::int64_t y) { return divide_integer(x, y, kind); });
  }
  Tensor out = dispatch_floating(a.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    return map2<T, T>(a, b, shape, [kind](T x, T y) { return divide_floating(x, y, kind); });
  });
  // floor_divide is piecewise constant: not differentiable (torch has no derivative for it), so its
  // result does not require grad. The remainders' gradients: 1 for a, and for b minus the floored
  // (remainder) or truncated (fmod) quotient, taken as a constant.
  if (kind != Division::kFloor && any_requires_grad({&a, &b}))
    record(op, out, {a, b},
           [sa = SavedTensor(a), sb = SavedTensor(b), need_b = b.requires_grad(), kind](const Tensor& g) -> TensorList {
             const Tensor& a = sa.unpack();
             const Tensor& b = sb.unpack();
             Tensor gb;
             if (need_b) {
               const Tensor quotient = kind == Division::kRemainder ? floor_divide(a.detach(), b.detach())
                                                                    : trunc(div(a.detach(), b.detach()));
               gb = sum_to(neg(g) * quotient, b.shape());
             }
             return {sum_to(g, a.shape()), gb};
           });
  return out;
}

// The divisor as a 0-dim tensor: an integer keeps an integral x integral, a double makes it float32
// (as a Python float does in torch); with a floating x, either takes x's dtype.
Tensor divisor_tensor(const Tensor& x, std::int64_t b) {
  if (is_floating(x.dtype())) return scalar_tensor(static_cast<double>(b), x.dtype());
  return from_vector(std::vector<std::int64_t>{b}, {});
}

Tensor divide(const Tensor& a, double b, Division kind) {
  const Tensor x = is_floating(a.dtype()) ? a : a.to(kFloat32);
  return divide(x, scalar_tensor(b, x.dtype()), kind);
}

}  // namespace

Tensor floor_divide(const Tensor& a, const Tensor& b) { return divide(a, b, Division::kFloor); }
Tensor remainder(const Tensor& a, const Tensor& b) { return divide(a, b, Division::kRemainder); }
Tensor fmod(const Tensor& a, const Tensor& b) { return divide(a, b, Division::kFmod); }

Tensor floor_divide(const Tensor& a, double b) { return divide(a, b, Division::kFloor); }
Tensor remainder(const Tensor& a, double b) { return divide(a, b, Division::kRemainder); }
Tensor fmod(const Tensor& a, double b) { return divide(a, b, Division::kFmod); }

namespace detail {
Tensor floor_divide_integer(const Tensor& a, std::int64_t b) { return floor_divide(a, divisor_tensor(a, b)); }
Tensor remainder_integer(const Tensor& a, std::int64_t b) { return remainder(a, divisor_tensor(a, b)); }
Tensor fmod_integer(const Tensor& a, std::int64_t b) { return fmod(a, divisor_tensor(a, b)); }
}  // namespace detail

// An int64 or Bool tensor with a C++ double is float32, as torch's with a Python float.
Tensor add(const Tensor& a, double b) {
  if (!is_floating(a.dtype())) return add(a.to(kFloat32), b);
  Tensor out = floating_map(a, "add", [b](auto x) { return x + b; });
  if (any_requires_grad({&a})) record("add", out, {a}, [](const Tensor& g) -> TensorList { return {g}; });
  return out;
}

Tensor sub(const Tensor& a, double b) {
  check_not_bool_sub(a, "sub");
  return add(a, -b);
}

Tensor rsub(double a, const Tensor& b) {
  check_not_bool_sub(b, "rsub");
  if (!is_floating(b.dtype())) return rsub(a, b.to(kFloat32));
  Tensor out = floating_map(b, "rsub", [a](auto x) { return a - x; });
  if (any_requires_grad({&b})) record("rsub", out, {b}, [](const Tensor& g) -> TensorList { return {neg(g)}; });
  return out;
}

Tensor mul(const Tensor& a, double b) {
  if (!is_floating(a.dtype())) return mul(a.to(kFloat32), b);
  Tensor out = floating_map(a, "mul", [b](auto x) { return x * b; });
  if (any_requires_grad({&a})) record("mul", out, {a}, [b](const Tensor& g) -> TensorList { return {g * b}; });
  return out;
}

Tensor div(const Tensor& a, double b) {
  if (!is_floating(a.dtype())) return div(a.to(kFloat32), b);
  Tensor out = floating_map(a, "div", [b](auto x) { return x / b; });
  if (any_requires_grad({&a})) record("div", out, {a}, [b](const Tensor& g) -> TensorList { return {g / b}; });
  return out;
}

Tensor rdiv(double a, const Tensor& b) {
  if (!is_floating(b.dtype())) return rdiv(a, b.to(kFloat32));
  Tensor out = floating_map(b, "rdiv", [a](auto x) { return a / x; });
  if (any_requires_grad({&b}))
    record("rdiv", out, {b}, [sy = SavedTensor::output(out), sb = SavedTensor(b)](const Tensor& g) -> TensorList {
      // d(a/b)/db = -(a/b) / b
      const Tensor& y = sy.unpack();
      const Tensor& b = sb.unpack();
      if (any_requires_grad({&g, &y, &b})) return {neg(g * y) / b};
      return {backward_map(g, y, [](auto gv, auto yv) { return -gv * yv; }) / b};
    });
  return out;
}

namespace {

// maximum and minimum: the gradient goes to the chosen operand, half to each on a tie.
Tensor extremum(const Tensor& a, const Tensor& b, const char* op, bool take_max) {
  if (a.dtype() != b.dtype()) {
    const auto [x, y] = promoted(a, b);
    return extremum(x, y, op, take_max);
  }
  Tensor out = arithmetic(
      a, b, op, [take_max](auto x, auto y) { return (x > y) == take_max ? x : (x == y ? x : y); }, false);
  if (any_requires_grad({&a, &b}))
    record(op, out, {a, b}, [sa = SavedTensor(a), sb = SavedTensor(b), take_max](const Tensor& g) -> TensorList {
      // The shares are piecewise constant in a and b: constants to a gradient of the gradient.
      const Tensor a = sa.unpack().detach(), b = sb.unpack().detach();
      const Tensor share_a = dispatch_floating(a.dtype(), "backward", [&](auto tag) {
        using T = decltype(tag);
        return map2<T, T>(a, b, broadcast_shapes(a.shape(), b.shape(), "backward"),
                          [take_max](T x, T y) { return x == y ? T(0.5) : ((x > y) == take_max ? T(1) : T(0)); });
      });
      return {sum_to(g * share_a, a.shape()), sum_to(g * (1.0 - share_a), b.shape())};
    });
  return out;
}

}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) { return extremum(a, b, "maximum", true); }
Tensor minimum(const Tensor& a, const Tensor& b) { return extremum(a, b, "minimum", false); }

// ---------------------------------------------------------------- comparisons
namespace {

template <class F>
Tensor compare(const Tensor& a, const Tensor& b, const char* op, F f) {
  if (a.dtype() != b.dtype()) {
    const DType dtype = result_type(a, b);
    return compare(a.detach().to(dtype), b.detach().to(dtype), op, f);
  }
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

Tensor eq(const Tensor& a, const Tensor& b) {
  return compare(a, b, "eq", [](auto x, auto y) { return x == y; });
}
Tensor ne(const Tensor& a, const Tensor& b) {
  return compare(a, b, "ne", [](auto x, auto y) { return x != y; });
}
Tensor lt(const Tensor& a, const Tensor& b) {
  return compare(a, b, "lt", [](auto x, auto y) { return x < y; });
}
Tensor le(const Tensor& a, const Tensor& b) {
  return compare(a, b, "le", [](auto x, auto y) { return x <= y; });
}
Tensor gt(const Tensor& a, const Tensor& b) {
  return compare(a, b, "gt", [](auto x, auto y) { return x > y; });
}
Tensor ge(const Tensor& a, const Tensor& b) {
  return compare(a, b, "ge", [](auto x, auto y) { return x >= y; });
}
Tensor eq(const Tensor& a, double b) {
  return compare_scalar(a, b, [](double x, double y) { return x == y; });
}
Tensor ne(const Tensor& a, double b) {
  return compare_scalar(a, b, [](double x, double y) { return x != y; });
}
Tensor lt(const Tensor& a, double b) {
  return compare_scalar(a, b, [](double x, double y) { return x < y; });
}
Tensor le(const Tensor& a, double b) {
  return compare_scalar(a, b, [](double x, double y) { return x <= y; });
}
Tensor gt(const Tensor& a, double b) {
  return compare_scalar(a, b, [](double x, double y) { return x > y; });
}
Tensor ge(const Tensor& a, double b) {
  return compare_scalar(a, b, [](double x, double y) { return x >= y; });
}

namespace {

void check_bool(const Tensor& t, const char* op, const char* what) {
  if (t.dtype() != kBool)
    throw TypeError(message(op, ": ", what, " must be a bool tensor, got ", dtype_name(t.dtype())));
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
  if (a.dtype() != b.dtype()) {
    const auto [x, y] = promoted(a, b);
    return where(condition, x, y);
  }
  const Shape shape = broadcast_shapes(broadcast_shapes(condition.shape(), a.shape(), "where"), b.shape(), "where");
  Tensor out = dispatch_all(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    return map3<T, bool, T, T>(condition, a, b, shape, [](bool c, T x, T y) { return c ? x : y; });
  });
  if (any_requires_grad({&a, &b}))
    record(
        "where", out, {a, b},
        [saved_c = SavedTensor(condition), sa = a.shape(), sb = b.shape(), need_a = a.requires_grad(),
         need_b = b.requires_grad()](const Tensor& g) -> TensorList {
          const Tensor& c = saved_c.unpack();
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
    record("masked_fill", out, {x},
           [mask = SavedTensor(mask)](const Tensor& g) -> TensorList { return {masked_fill(g, mask.unpack(), 0.0)}; });
  return out;
}

// ---------------------------------------------------------------- integer operands
namespace detail {

using kernels::integer_map;

Tensor add_integer(const Tensor& a, std::int64_t b) {
  if (is_floating(a.dtype())) return add(a, static_cast<double>(b));
  return integer_map(a, [u = static_cast<std::uint64_t>(b)](std::uint64_t x) { return x + u; });
}

Tensor sub_integer(const Tensor& a, std::int64_t b) {
  check_not_bool_sub(a, "sub");
  if (is_floating(a.dtype())) return sub(a, static_cast<double>(b));
  return integer_map(a, [u = static_cast<std::uint64_t>(b)](std::uint64_t x) { return x - u; });
}

Tensor rsub_integer(std::int64_t a, const Tensor& b) {
  check_not_bool_sub(b, "rsub");
  if (is_floating(b.dtype())) return rsub(static_cast<double>(a), b);
  return integer_map(b, [u = static_cast<std::uint64_t>(a)](std::uint64_t x) { return u - x; });
}

Tensor mul_integer(const Tensor& a, std::int64_t b) {
  if (is_floating(a.dtype())) return mul(a, static_cast<double>(b));
  return integer_map(a, [u = static_cast<std::uint64_t>(b)](std::uint64_t x) { return x * u; });
}

}  // namespace detail

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

namespace {

// out (contiguous) = src converted between float32 and bfloat16, src of any strides: its contiguous
// runs (the whole tensor when it is contiguous, a head's row of a transposed view) through
// convert.h's loops, in chunks over the pool, the rest element by element with the same bits.
template <class S, class T>
void convert_strided(const Tensor& src, const Tensor& out, void (*convert)(const S*, T*, std::int64_t)) {
  const S* from = src.data_ptr<S>();
  T* to = out.data_ptr<T>();
  kernels::parallel_for_each_run<2>(src.shape(), {out.strides(), src.strides()},
                                    [&](kernels::Offsets<2> off, std::int64_t n, kernels::Offsets<2> step) {
                                      if (step[0] == 1 && step[1] == 1) {
                                        convert(from + off[1], to + off[0], n);
                                      } else {
                                        for (std::int64_t i = 0; i < n; ++i)
                                          to[off[0] + i * step[0]] = static_cast<T>(from[off[1] + i * step[1]]);
                                      }
                                    });
}

}  // namespace

Tensor Tensor::to(DType target) const {
  if (target == dtype()) return *this;
  const DType source = dtype();
  Tensor out;
  if (source == kFloat32 && target == kBFloat16) {
    out = empty(shape(), target);
    convert_strided<float, BFloat16>(*this, out, kernels::round_to_bfloat16_serial);
  } else if (source == kBFloat16 && target == kFloat32) {
    out = empty(shape(), target);
    convert_strided<BFloat16, float>(*this, out, kernels::widen_bfloat16_serial);
  } else {
    out = dispatch_all(source, [&](auto from) {
      using S = decltype(from);
      return dispatch_all(target, [&](auto to) {
        using T = decltype(to);
        return map<T, S>(*this, [](S v) {
          if constexpr (std::is_same_v<T, bool>) return v != S(0);
          else return static_cast<T>(v);
        });
      });
    });
  }
  // Only conversions between floating types carry a gradient.
  if (is_floating(source) && is_floating(target) && any_requires_grad({this}))
    record("to", out, {*this}, [source](const Tensor& g) -> TensorList { return {g.to(source)}; });
  return out;
}

}  // namespace tapegrad
