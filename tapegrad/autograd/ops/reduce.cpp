// Reductions over any set of axes (sum, prod, mean, max, min, var, std, norm, logsumexp) and along
// one axis (argmax, argmin), and the running sum and product along one axis (cumsum, cumprod): argument checks, the
// call to the kernels of kernels/reduce.h, and each op's backward. The softmax family is in ops/softmax.cpp.

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>

#include "tapegrad/autograd/autocast.h"
#include "tapegrad/autograd/format.h"
#include "tapegrad/autograd/kernels/elementwise.h"
#include "tapegrad/autograd/kernels/reduce.h"
#include "tapegrad/autograd/ops.h"

namespace tapegrad {

namespace {

using kernels::ReducedAxes;

// The axes a reduction covers, checked; an empty list means all of them.
ReducedAxes resolve_axes(const Shape& shape, const Dims& axes, const char* op) {
  ReducedAxes r;
  const int rank = shape.size();
  if (axes.empty()) {
    for (int d = 0; d < rank; ++d) r.reduced[d] = true;
  } else {
    for (std::int64_t axis : axes) {
      const int a = normalize_axis(axis, rank, op);
      if (rank == 0) continue;
      if (r.reduced[a]) throw IndexError(message(op, ": axis ", axis, " appears twice in ", axes.str()));
      r.reduced[a] = true;
    }
  }
  for (int d = 0; d < rank; ++d) {
    r.kept_shape.push_back(r.reduced[d] ? 1 : shape[d]);
    if (r.reduced[d]) r.count *= shape[d];
    else r.out_shape.push_back(shape[d]);
  }
  return r;
}

Tensor finish_shape(const Tensor& kept, const ReducedAxes& r, bool keepdim) {
  if (keepdim) return kept;
  return detail::make_view(kept, r.out_shape, contiguous_strides(r.out_shape), 0);
}

// Gradient of a reduction: g (reduced shape) broadcast back to the input's shape.
Tensor expand_grad(const Tensor& g, const ReducedAxes& r, const Shape& input_shape) {
  return expand(reshape(g, r.kept_shape), input_shape);
}

}  // namespace

Tensor sum(const Tensor& x, const Dims& axes, bool keepdim) {
  if (x.dtype() == kBFloat16) {
    // float32 policy (autocast.h). Sums over leading axes read the bfloat16 values in place; the
    // others sum a widened copy.
    const ReducedAxes r = resolve_axes(x.shape(), axes, "sum");
    if (!x.is_contiguous() || kernels::reduced_block(x.shape(), r) != kernels::ReducedBlock::kLeading)
      return detail::precision_result(sum(x.to(kFloat32), axes, keepdim), kBFloat16);
    Tensor out = finish_shape(kernels::sum_leading_bfloat16(x, r), r, keepdim);
    if (any_requires_grad({&x}))
      record("sum", out, {x},
             [r, in = x.shape()](const Tensor& g) -> TensorList { return {expand_grad(g, r, in).to(kBFloat16)}; });
    return detail::precision_result(out, kBFloat16);
  }
  const ReducedAxes r = resolve_axes(x.shape(), axes, "sum");
  if (x.dtype() == kInt64 || x.dtype() == kBool)  // counts: not differentiable
    return finish_shape(kernels::sum_reduced<std::int64_t>(x.to(kInt64), r), r, keepdim);
  Tensor kept =
      dispatch_floating(x.dtype(), "sum", [&](auto tag) { return kernels::sum_reduced<decltype(tag)>(x, r); });
  Tensor out = finish_shape(kept, r, keepdim);
  if (any_requires_grad({&x}))
    record("sum", out, {x}, [r, in = x.shape()](const Tensor& g) -> TensorList { return {expand_grad(g, r, in)}; });
  return out;
}

Tensor mean(const Tensor& x, const Dims& axes, bool keepdim) {
  if (x.dtype() == kBFloat16)
    return detail::precision_result(mean(x.to(kFloat32), axes, keepdim), kBFloat16);  // float32 policy (autocast.h)
  const ReducedAxes r = resolve_axes(x.shape(), axes, "mean");
  Tensor kept =
      dispatch_floating(x.dtype(), "mean", [&](auto tag) { return kernels::mean_reduced<decltype(tag)>(x, r); });
  Tensor out = finish_shape(kept, r, keepdim);
  if (any_requires_grad({&x}))
    record("mean", out, {x}, [r, in = x.shape()](const Tensor& g) -> TensorList {
      return {expand_grad(g / static_cast<double>(r.count), r, in)};
    });
  return out;
}

// ---------------------------------------------------------------- max, min

namespace {

void check_not_empty(const Shape& shape, const ReducedAxes& r, const char* op) {
  if (r.count == 0 && r.kept_shape.numel() > 0)
    throw ValueError(message(op, ": cannot reduce over an empty axis of a tensor of shape ", shape.str(),
                             " (the result has no identity)"));
}

Tensor extremum(const Tensor& x, const Dims& axes, bool keepdim, const char* op, bool take_max) {
  // bfloat16 values compare exactly in float32, and the extremum is one of them.
  if (x.dtype() == kBFloat16)
    return extremum(x.to(kFloat32), axes, keepdim, op, take_max).to(kBFloat16);  // computed in float32
  const ReducedAxes r = resolve_axes(x.shape(), axes, op);
  Tensor kept = dispatch_numeric(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    check_not_empty(x.shape(), r, op);
    return take_max ? kernels::extremum_reduced<T, true>(x, r) : kernels::extremum_reduced<T, false>(x, r);
  });
  Tensor out = finish_shape(kept, r, keepdim);
  if (any_requires_grad({&x}))
    // kept is saved as an output: with keepdim it is the output itself, which the closure must not own.
    record(op, out, {x},
           [sx = SavedTensor(x), sbest = SavedTensor::output(kept), r, op](const Tensor& g) -> TensorList {
             // Every element equal to the extremum gets an equal share of the gradient (torch.amax). The
             // shares are piecewise constant in x: constants to a gradient of the gradient.
             const Tensor x = sx.unpack().detach(), best = sbest.unpack().detach();
             const Tensor hits = eq(x, best).to(x.dtype());  // hits: x's shape, 1 where x attains the extremum
             const Tensor ties = dispatch_floating(x.dtype(), op, [&](auto tag) {
               return kernels::sum_reduced<decltype(tag)>(hits, r);  // ties: (kept), how many share each extremum
             });
             return {hits * (reshape(g, r.kept_shape) / ties)};
           });
  return out;
}

}  // namespace

Tensor max(const Tensor& x, const Dims& axes, bool keepdim) { return extremum(x, axes, keepdim, "max", true); }
Tensor min(const Tensor& x, const Dims& axes, bool keepdim) { return extremum(x, axes, keepdim, "min", false); }

// ---------------------------------------------------------------- var

Tensor var(const Tensor& x, const Dims& axes, std::int64_t correction, bool keepdim) {
  dispatch_floating(x.dtype(), "var", [](auto) {});
  const ReducedAxes r = resolve_axes(x.shape(), axes, "var");  // checks the axes under var's name
  // Not on a hot path (layer_norm has its own fused statistics), so composed from primitives,
  // which also gives the backward 2 (x - mean) / (N - correction) for free. Like PyTorch, a
  // non-positive N - correction divides by zero (inf or NaN) rather than raising.
  const Tensor centered = x - mean(x, axes, /*keepdim=*/true);
  const double divisor = static_cast<double>(std::max<std::int64_t>(r.count - correction, 0));
  return sum(centered * centered, axes, keepdim) / divisor;
}

Tensor std(const Tensor& x, const Dims& axes, std::int64_t correction, bool keepdim) {
  dispatch_floating(x.dtype(), "std", [](auto) {});
  resolve_axes(x.shape(), axes, "std");  // checks the axes under std's name
  const Tensor v = var(x, axes, correction, keepdim);
  // sqrt's slope is infinite at 0; where the variance is 0 the gradient is 0 instead, as torch's
  // (sqrt is taken of 1 there, so no infinity reaches the backward). NaN stays NaN.
  const Tensor nonzero = ne(v.detach(), 0.0);
  return where(nonzero, sqrt(where(nonzero, v, 1.0)), 0.0);
}

// ---------------------------------------------------------------- norm

namespace {

// norm's backward written with ops, for a taped backward. sign(x), the p = inf shares and the
// zero-norm mask are piecewise constant in x; the norm itself is recomputed from x.
Tensor norm_backward_taped(const Tensor& g, const Tensor& x, const Tensor& kept, const ReducedAxes& r, const Dims& axes,
                           double p) {
  const Tensor xd = x.detach();
  const Tensor zero = scalar_tensor(0.0, x.dtype());
  const Tensor sign = gt(xd, 0.0).to(x.dtype()) - lt(xd, 0.0).to(x.dtype());
  const Tensor gb = expand(reshape(g, r.kept_shape), x.shape());
  if (std::isinf(p)) {
    const Tensor at_max = eq(abs(xd), expand(kept, x.shape())).to(x.dtype());
    const Tensor ties = expand(sum(at_max, axes, /*keepdim=*/true), x.shape());
    return gb * sign * (at_max / ties);
  }
  if (p == 1.0) return gb * sign;
  const Tensor zero_norm = eq(expand(kept, x.shape()), 0.0);
  const Tensor n = expand(norm(x, p, axes, /*keepdim=*/true), x.shape());
  // Where the norm is 0 the division below is 0/0; the where() keeps that NaN out of both paths.
  const Tensor safe_n = where(zero_norm, ones_like(xd), n);
  const Tensor share = p == 2.0 ? x / safe_n : sign * pow(abs(x), p - 1.0) / pow(safe_n, p - 1.0);
  return where(zero_norm, zero, gb * share);
}

}  // namespace

Tensor norm(const Tensor& x, double p, const Dims& axes, bool keepdim) {
  dispatch_floating(x.dtype(), "norm", [](auto) {});
  if (!(p > 0.0)) throw ValueError(message("norm: p must be positive (or infinity), got ", p));
  const ReducedAxes r = resolve_axes(x.shape(), axes, "norm");
  const bool inf = std::isinf(p);
  Tensor kept;  // kept: the norm with keepdim
  {
    // The value composed from primitives; the backward below is written out so that it is 0, not NaN, where the
    // norm is 0 (the subgradient PyTorch uses), which the chain rule through sqrt or pow would not give.
    NoGradGuard untaped;
    if (inf) kept = max(abs(x), axes, /*keepdim=*/true);
    else if (p == 1.0) kept = sum(abs(x), axes, /*keepdim=*/true);
    else if (p == 2.0) kept = sqrt(sum(x * x, axes, /*keepdim=*/true));
    else kept = pow(sum(pow(abs(x), p), axes, /*keepdim=*/true), 1.0 / p);
    if (!kept.is_contiguous()) kept = kept.contiguous();
  }
  Tensor out = finish_shape(kept, r, keepdim);
  if (any_requires_grad({&x}))
    // kept is saved as an output: with keepdim it is out itself, and a closure holding its own output leaks.
    record("norm", out, {x},
           [sx = SavedTensor(x), skept = SavedTensor::output(kept), r, axes, p, inf](const Tensor& g) -> TensorList {
             // d|x|_p / dx = sign(x) |x|^(p-1) / |x|_p^(p-1); for p = inf the gradient is shared among the entries
             // with |x| = max, as PyTorch does.
             const Tensor& x = sx.unpack();
             const Tensor kept = skept.unpack().detach();
             if (any_requires_grad({&g, &x})) return {norm_backward_taped(g, x, kept, r, axes, p)};
             const Tensor xc = x.contiguous();
             const Tensor nb = expand(kept, x.shape()).contiguous();                      // nb: x's shape
             const Tensor gb = expand(reshape(g, r.kept_shape), x.shape()).contiguous();  // gb: x's shape
             Tensor ties;  // for p = inf: how many entries share each maximum, x's shape
             if (inf) {
               const Tensor at_max = eq(abs(x), expand(kept, x.shape())).to(x.dtype());
               ties = expand(sum(at_max, axes, /*keepdim=*/true), x.shape()).contiguous();
             }
             Tensor gx = empty(x.shape(), x.dtype());
             dispatch_floating(x.dtype(), "norm backward", [&](auto tag) {
               using T = decltype(tag);
               kernels::norm_backward(xc.data_ptr<T>(), nb.data_ptr<T>(), gb.data_ptr<T>(),
                                      inf ? ties.data_ptr<T>() : nullptr, gx.data_ptr<T>(), x.numel(), p);
             });
             return {gx};
           });
  return out;
}

// ---------------------------------------------------------------- argmax, argmin

namespace {

Tensor arg_extremum(const Tensor& x, std::int64_t axis, bool keepdim, const char* op, bool take_max) {
  if (x.dtype() == kBFloat16) return arg_extremum(x.to(kFloat32), axis, keepdim, op, take_max);  // exact
  const int a = normalize_axis(axis, x.dim(), op);
  Shape kept_shape = x.shape();
  if (x.dim() > 0) kept_shape[a] = 1;
  Shape out_shape = x.shape();
  if (x.dim() > 0) out_shape.erase(a);
  return dispatch_numeric(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const kernels::AxisSplit s = kernels::split_at(x.shape(), a);
    if (s.n == 0)
      throw ValueError(message(op, ": axis ", axis, " of a tensor of shape ", x.shape().str(),
                               " is empty, so there is no ", (take_max ? "largest" : "smallest"), " value"));
    Tensor out = empty(keepdim ? kept_shape : out_shape, kInt64);
    if (out.numel() == 0) return out;
    const Tensor xd = kernels::dense(x);
    if (take_max) kernels::arg_extremum<T, true>(xd.data_ptr<T>(), out.data_ptr<std::int64_t>(), s);
    else kernels::arg_extremum<T, false>(xd.data_ptr<T>(), out.data_ptr<std::int64_t>(), s);
    return out;
  });
}

}  // namespace

Tensor argmax(const Tensor& x, std::int64_t axis, bool keepdim) {
  return arg_extremum(x, axis, keepdim, "argmax", true);
}
Tensor argmin(const Tensor& x, std::int64_t axis, bool keepdim) {
  return arg_extremum(x, axis, keepdim, "argmin", false);
}

// ---------------------------------------------------------------- logsumexp

Tensor logsumexp(const Tensor& x, const Dims& axes, bool keepdim) {
  if (x.dtype() == kBFloat16)
    return detail::precision_result(logsumexp(x.to(kFloat32), axes, keepdim),
                                    kBFloat16);  // float32 policy (autocast.h)
  const ReducedAxes r = resolve_axes(x.shape(), axes, "logsumexp");
  Tensor kept = dispatch_floating(x.dtype(), "logsumexp", [&](auto tag) {
    using T = decltype(tag);
    check_not_empty(x.shape(), r, "logsumexp");
    return kernels::logsumexp_reduced<T>(x, r);
  });
  Tensor out = finish_shape(kept, r, keepdim);
  if (any_requires_grad({&x}))
    record("logsumexp", out, {x},
           [sx = SavedTensor(x), slse = SavedTensor::output(kept), r, axes](const Tensor& g) -> TensorList {
             // d lse / dx = exp(x - lse) = softmax(x); an entry of -inf gets 0 even when the whole row
             // is -inf (where exp(-inf - -inf) would be NaN).
             const Tensor& x = sx.unpack();
             const Tensor lse = slse.unpack().detach();
             if (any_requires_grad({&g, &x})) {
               // Taped: lse recomputed from x, so that its own dependence on x is differentiated too.
               const Tensor share = exp(x - expand(logsumexp(x, axes, /*keepdim=*/true), x.shape()));
               const Tensor zero = scalar_tensor(0.0, x.dtype());
               return {where(eq(x.detach(), -INFINITY), zero, expand(reshape(g, r.kept_shape), x.shape()) * share)};
             }
             return {dispatch_floating(x.dtype(), "logsumexp backward", [&](auto tag) {
               using T = decltype(tag);
               return kernels::map3<T, T, T, T>(reshape(g, r.kept_shape), x, lse, x.shape(), [](T gv, T xv, T lv) {
                 return xv == -std::numeric_limits<T>::infinity() ? T(0) : gv * std::exp(xv - lv);
               });
             })};
           });
  return out;
}

// ---------------------------------------------------------------- cumsum

namespace {

// What cumsum, cumprod and prod carry their running value in: double for floating point, uint64
// for int64 (wrapping around as torch's).
template <class T>
using Carry = std::conditional_t<std::is_floating_point_v<T>, double, kernels::Wrapping<T>>;

// cumsum, or the running sum from the end of the axis (reverse): the gradient of each is the other
// applied to the incoming gradient.
Tensor cumulative_sum(const Tensor& x, std::int64_t axis, bool reverse) {
  const char* op = "cumsum";
  if (x.dtype() == kBFloat16)  // float32 policy (autocast.h), as sum
    return detail::precision_result(cumulative_sum(x.to(kFloat32), axis, reverse), kBFloat16);
  if (x.dtype() == kBool) return cumulative_sum(x.to(kInt64), axis, reverse);  // counts, as torch's
  const int a = normalize_axis(axis, x.dim(), op);
  Tensor out = dispatch_numeric(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    using Acc = Carry<T>;
    Tensor result = empty(x.shape(), x.dtype());
    if (result.numel() == 0) return result;
    const Tensor xd = kernels::dense(x);
    kernels::cumulative<T, Acc>(xd.data_ptr<T>(), result.data_ptr<T>(), kernels::split_at(x.shape(), a), reverse,
                                Acc(0), std::plus<Acc>());
    return result;
  });
  if (any_requires_grad({&x}))
    record(op, out, {x},
           [axis, reverse](const Tensor& g) -> TensorList { return {cumulative_sum(g, axis, !reverse)}; });
  return out;
}

}  // namespace

Tensor cumsum(const Tensor& x, std::int64_t axis) { return cumulative_sum(x, axis, /*reverse=*/false); }

// ---------------------------------------------------------------- cumprod

namespace {

// The gradient of cumprod as taped ops, for a gradient of the gradient; quadratic in the axis'
// length, so only taken then. With the axis last, Y[..., i, j] = x[..., j] but 1 where j == i: its
// running products along j are C[..., i, k] = the product of x[..., j] over j <= k but i, and
// gx[..., i] = sum over k >= i of g[..., k] C[..., i, k].
Tensor cumprod_grad_taped(const Tensor& x, const Tensor& g, int axis) {
  if (x.dim() == 0) return g;
  const Tensor xt = transpose(x, axis, -1), gt = transpose(g, axis, -1);
  const std::int64_t n = xt.shape()[xt.dim() - 1];
  Shape square = xt.shape();
  square.push_back(n);
  const Tensor off_diagonal = eq(eye(n, std::nullopt, x.dtype()), 0.0);
  const Tensor y = where(off_diagonal, expand(unsqueeze(xt, -2), square), 1.0);
  const Tensor gxt = sum(triu(cumprod(y, -1)) * unsqueeze(gt, -2), {-1});
  return transpose(gxt, axis, -1);
}

}  // namespace

Tensor cumprod(const Tensor& x, std::int64_t axis) {
  const char* op = "cumprod";
  if (x.dtype() == kBFloat16)  // float32 policy (autocast.h), as cumsum
    return detail::precision_result(cumprod(x.to(kFloat32), axis), kBFloat16);
  if (x.dtype() == kBool) return cumprod(x.to(kInt64), axis);  // as torch's
  const int a = normalize_axis(axis, x.dim(), op);
  const Tensor xd = kernels::dense(x.detach());
  Tensor out = dispatch_numeric(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    using Acc = Carry<T>;
    Tensor result = empty(x.shape(), x.dtype());
    if (result.numel() > 0)
      kernels::cumulative<T, Acc>(xd.data_ptr<T>(), result.data_ptr<T>(), kernels::split_at(x.shape(), a),
                                  /*reverse=*/false, Acc(1), std::multiplies<Acc>());
    return result;
  });
  if (any_requires_grad({&x}))
    record(op, out, {x}, [sx = SavedTensor(x), a](const Tensor& g) -> TensorList {
      const Tensor& x = sx.unpack();
      if (any_requires_grad({&g, &x})) return {cumprod_grad_taped(x, g, a)};
      return {dispatch_floating(x.dtype(), "cumprod backward", [&](auto tag) {
        using T = decltype(tag);
        const Tensor xd = kernels::dense(x), gd = kernels::dense(g);
        Tensor gx = empty(x.shape(), x.dtype());
        if (gx.numel() > 0)
          kernels::cumprod_backward<T, Carry<T>>(xd.data_ptr<T>(), gd.data_ptr<T>(), gx.data_ptr<T>(),
                                                 kernels::split_at(x.shape(), a));
        return gx;
      })};
    });
  return out;
}

// ---------------------------------------------------------------- logcumsumexp

namespace {

// log(exp(a) + exp(b)), stable; -inf and -inf give -inf, inf and inf give inf, a NaN gives NaN.
double log_add_exp(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return a + b;
  const double lo = std::min(a, b), hi = std::max(a, b);
  if (lo == hi && !std::isfinite(lo)) return a;
  return hi + std::log1p(std::exp(lo - hi));
}

// logcumsumexp from the end of the axis.
Tensor reverse_logcumsumexp(const Tensor& x, std::int64_t axis) {
  return flip(logcumsumexp(flip(x, {axis}), axis), {axis});
}

}  // namespace

Tensor logcumsumexp(const Tensor& x, std::int64_t axis) {
  const char* op = "logcumsumexp";
  if (x.dtype() == kBFloat16)  // float32 policy (autocast.h), as cumsum
    return detail::precision_result(logcumsumexp(x.to(kFloat32), axis), kBFloat16);
  const int a = normalize_axis(axis, x.dim(), op);
  Tensor out = dispatch_floating(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    Tensor result = empty(x.shape(), x.dtype());
    if (result.numel() == 0) return result;
    const Tensor xd = kernels::dense(x);
    kernels::cumulative<T, double>(xd.data_ptr<T>(), result.data_ptr<T>(), kernels::split_at(x.shape(), a),
                                   /*reverse=*/false, -std::numeric_limits<double>::infinity(), log_add_exp);
    return result;
  });
  if (any_requires_grad({&x}))
    record(op, out, {x}, [sx = SavedTensor(x), sout = SavedTensor::output(out), axis](const Tensor& g) -> TensorList {
      // gx[j] = sum over k >= j of g[k] exp(x[j] - out[k]), the positive and negative parts of g apart,
      // each in log space: exp(x[j] + reverse_logcumsumexp(log |g| - out)[j]).
      const Tensor &x = sx.unpack(), &out = sout.unpack();
      if (g.dim() == 0 || g.numel() == 0) return {g};
      const double lowest =
          x.dtype() == kFloat32 ? std::numeric_limits<float>::lowest() : std::numeric_limits<double>::lowest();
      auto part = [&](const Tensor& mask, const Tensor& magnitude) {
        const Tensor log_magnitude = where(mask, log(where(mask, magnitude, 1.0)), lowest);
        return exp(reverse_logcumsumexp(log_magnitude - out, axis) + x);
      };
      return {part(gt(g, 0.0), g) - part(lt(g, 0.0), neg(g))};
    });
  return out;
}

// ---------------------------------------------------------------- prod

Tensor prod(const Tensor& x, const Dims& axes, bool keepdim) {
  const char* op = "prod";
  if (x.dtype() == kBFloat16)  // float32 policy (autocast.h), as sum
    return detail::precision_result(prod(x.to(kFloat32), axes, keepdim), kBFloat16);
  if (x.dtype() == kBool) return prod(x.to(kInt64), axes, keepdim);  // as torch's
  const ReducedAxes r = resolve_axes(x.shape(), axes, op);
  // The kept axes first, then the reduced ones: x as (outputs, count) rows.
  Dims order, inverse = Dims::filled(x.dim(), 0);
  for (int d = 0; d < x.dim(); ++d)
    if (!r.reduced[d]) order.push_back(d);
  for (int d = 0; d < x.dim(); ++d)
    if (r.reduced[d]) order.push_back(d);
  for (int i = 0; i < x.dim(); ++i) inverse[order[i]] = i;
  const Tensor rows = kernels::dense(permute(x.detach(), order));
  const std::int64_t outputs = r.kept_shape.numel(), count = r.count;
  Tensor kept = dispatch_numeric(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    Tensor result = empty(r.kept_shape, x.dtype());
    kernels::row_products<T, Carry<T>>(rows.data_ptr<T>(), result.data_ptr<T>(), outputs, count);
    return result;
  });
  Tensor out = finish_shape(kept, r, keepdim);
  if (any_requires_grad({&x}))
    record(op, out, {x},
           [sx = SavedTensor(x), r, order, inverse, permuted = rows.shape()](const Tensor& g) -> TensorList {
             // Each entry's gradient is g times the product of the other entries of its row.
             const Tensor& x = sx.unpack();
             const std::int64_t outputs = r.kept_shape.numel(), count = r.count;
             Tensor others;  // (outputs, count)
             if (any_requires_grad({&g, &x})) {
               // Taped, for a gradient of the gradient: the rows repeated count times with the entry itself
               // replaced by 1, and multiplied out. Quadratic in count, so only taken then.
               const Tensor xr = reshape(permute(x, order), {outputs, count});
               const Tensor off_diagonal = eq(eye(count, std::nullopt, x.dtype()), 0.0);
               const Tensor y = where(off_diagonal, expand(unsqueeze(xr, 1), {outputs, count, count}), 1.0);
               others = prod(y, {-1}) * reshape(g, {outputs, 1});
             } else {
               others = dispatch_floating(x.dtype(), "prod backward", [&](auto tag) {
                 using T = decltype(tag);
                 const Tensor xr = kernels::dense(permute(x, order)), gd = kernels::dense(g);
                 Tensor gx = empty({outputs, count}, x.dtype());
                 kernels::row_products_backward<T, Carry<T>>(xr.data_ptr<T>(), gd.data_ptr<T>(), gx.data_ptr<T>(),
                                                             outputs, count);
                 return gx;
               });
             }
             return {permute(reshape(others, permuted), inverse)};
           });
  return out;
}

}  // namespace tapegrad
