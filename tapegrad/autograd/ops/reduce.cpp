// Reductions over any set of axes (sum, mean, max, min, var, argmax, argmin, logsumexp) and
// the softmax family along one axis.

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>


#include <xsimd/xsimd.hpp>

#include "tapegrad/autograd/kernels/elementwise.h"
#include "tapegrad/autograd/kernels/strided.h"
#include "tapegrad/autograd/kernels/rows.h"
#include "tapegrad/autograd/ops.h"

namespace tapegrad {

namespace {

// Which axes a reduction covers; an empty list means all of them.
struct ReducedAxes {
  bool reduced[kMaxRank] = {};
  Shape kept_shape;  // the output shape with keepdim (reduced axes have size 1)
  Shape out_shape;   // the output shape without keepdim
  std::int64_t count = 1;  // elements folded into each output element
};

ReducedAxes resolve_axes(const Shape& shape, const Dims& axes, const char* op) {
  ReducedAxes r;
  const int rank = shape.size();
  if (axes.empty()) {
    for (int d = 0; d < rank; ++d) r.reduced[d] = true;
  } else {
    for (std::int64_t axis : axes) {
      const int a = normalize_axis(axis, rank, op);
      if (rank == 0) continue;
      if (r.reduced[a]) throw IndexError(std::string(op) + ": axis " + std::to_string(axis) + " appears twice in " + axes.str());
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

// Strides of a keepdim-shaped contiguous output seen from the input's shape (0 on reduced axes).
Dims reduced_strides(const ReducedAxes& r) {
  Dims strides = contiguous_strides(r.kept_shape);
  for (int d = 0; d < strides.size(); ++d)
    if (r.reduced[d]) strides[d] = 0;
  return strides;
}

Tensor finish_shape(const Tensor& kept, const ReducedAxes& r, bool keepdim) {
  if (keepdim) return kept;
  return detail::make_view(kept, r.out_shape, contiguous_strides(r.out_shape), 0);
}

// Where the reduced axes of x lie, ignoring size-1 axes: all before the kept ones (x seen as
// (count, rest), summed over its rows: a bias gradient), all after them ((rest, count), summed
// along each row), or interleaved.
enum class ReducedBlock { kLeading, kTrailing, kMixed };

ReducedBlock reduced_block(const Shape& shape, const ReducedAxes& r) {
  bool seen_kept = false, seen_reduced = false, leading = true, trailing = true;
  for (int d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (r.reduced[d]) {
      if (seen_kept) leading = false;
      seen_reduced = true;
    } else {
      if (seen_reduced) trailing = false;
      seen_kept = true;
    }
  }
  if (leading) return ReducedBlock::kLeading;
  if (trailing) return ReducedBlock::kTrailing;
  return ReducedBlock::kMixed;
}

// Sum over the reduced axes into a new tensor of the keepdim shape.
template <class T>
Tensor sum_kernel(const Tensor& x, const ReducedAxes& r) {
  Tensor out = zeros(r.kept_shape, x.dtype());
  T* po = out.data_ptr<T>();
  const T* px = x.data_ptr<T>();
  // One run of the layout below adds n elements into one output (st[0] == 0) or n inputs into n
  // outputs; the runs come in the input's order.
  auto add_run = [&](kernels::Offsets<2> off, std::int64_t n, kernels::Offsets<2> st) {
    T* o = po + off[0];
    const T* a = px + off[1];
    if (st[0] == 0) {
      // Eight partial sums: vectorisable, and more accurate than one.
      T partial[8] = {};
      std::int64_t i = 0;
      if (st[1] == 1)
        for (; i + 8 <= n; i += 8)
          for (int k = 0; k < 8; ++k) partial[k] += a[i + k];
      T total = 0;
      for (; i < n; ++i) total += a[i * st[1]];
      for (int k = 0; k < 8; ++k) total += partial[k];
      *o += total;
    } else if (st[0] == 1 && st[1] == 1) {
      for (std::int64_t i = 0; i < n; ++i) o[i] += a[i];
    } else {
      for (std::int64_t i = 0; i < n; ++i) o[i * st[0]] += a[i * st[1]];
    }
  };
  const kernels::RunLayout<2> layout = kernels::run_layout<2>(x.shape(), {reduced_strides(r), x.strides()});
  const std::int64_t total = layout.numel();
  const std::int64_t count = r.count, outputs = count == 0 ? 0 : total / count;
  // The two common shapes of a large sum go over the pool with the summation order unchanged, so
  // the bits do not depend on the thread count: a contiguous (count, outputs) block split into
  // column blocks, each column summed down the rows; or (outputs, count) split into whole rows.
  if (x.is_contiguous() && total >= 2 * kernels::kElementwiseGrain && outputs > 1) {
    const ReducedBlock block = reduced_block(x.shape(), r);
    if (block == ReducedBlock::kLeading) {
      parallel_for(0, outputs, kernels::row_grain(count), [&](std::int64_t c0, std::int64_t c1) {
        for (std::int64_t row = 0; row < count; ++row) {
          const T* a = px + row * outputs;  // a: (outputs)
          for (std::int64_t i = c0; i < c1; ++i) po[i] += a[i];
        }
      });
      return out;
    }
    if (block == ReducedBlock::kTrailing) {
      parallel_for(0, outputs, kernels::row_grain(count), [&](std::int64_t first, std::int64_t last) {
        kernels::for_runs(layout, first * count, last * count, add_run);
      });
      return out;
    }
  }
  kernels::for_runs(layout, 0, total, add_run);
  return out;
}

// Gradient of a reduction: g (reduced shape) broadcast back to the input's shape.
Tensor expand_grad(const Tensor& g, const ReducedAxes& r, const Shape& input_shape) {
  return expand(reshape(g, r.kept_shape), input_shape);
}

}  // namespace

Tensor sum(const Tensor& x, const Dims& axes, bool keepdim) {
  const ReducedAxes r = resolve_axes(x.shape(), axes, "sum");
  Tensor kept = dispatch_floating(x.dtype(), "sum", [&](auto tag) { return sum_kernel<decltype(tag)>(x, r); });
  Tensor out = finish_shape(kept, r, keepdim);
  if (any_requires_grad({&x}))
    record("sum", out, {x}, [r, in = x.shape()](const Tensor& g) -> TensorList { return {expand_grad(g, r, in)}; });
  return out;
}

Tensor mean(const Tensor& x, const Dims& axes, bool keepdim) {
  const ReducedAxes r = resolve_axes(x.shape(), axes, "mean");
  Tensor kept = dispatch_floating(x.dtype(), "mean", [&](auto tag) {
    using T = decltype(tag);
    Tensor s = sum_kernel<T>(x, r);
    const T scale = T(1) / static_cast<T>(r.count);
    T* p = s.data_ptr<T>();
    for (std::int64_t i = 0; i < s.numel(); ++i) p[i] *= scale;
    return s;
  });
  Tensor out = finish_shape(kept, r, keepdim);
  if (any_requires_grad({&x}))
    record("mean", out, {x}, [r, in = x.shape()](const Tensor& g) -> TensorList {
      return {expand_grad(g / static_cast<double>(r.count), r, in)};
    });
  return out;
}

// ---------------------------------------------------------------- row kernels
//
// Reductions and maps over one contiguous row, vectorised with xsimd (the compiler does not
// vectorise float reductions or std::exp by itself). Each handles the scalar tail after the
// last full vector.

namespace {

using kernels::Batch;
using kernels::kLanes;
using kernels::row_grain;
using kernels::row_sum;

// max(x[0..n)); -inf for an empty row.
template <class T>
T row_max(const T* x, std::int64_t n) {
  T best = -std::numeric_limits<T>::infinity();
  std::int64_t i = 0;
  if (n >= kLanes<T>) {
    Batch<T> acc = Batch<T>::load_unaligned(x);
    for (i = kLanes<T>; i + kLanes<T> <= n; i += kLanes<T>) acc = xsimd::max(acc, Batch<T>::load_unaligned(x + i));
    T lanes[kLanes<T>];
    acc.store_unaligned(lanes);
    for (T v : lanes) best = v > best ? v : best;
  }
  for (; i < n; ++i) best = x[i] > best ? x[i] : best;
  return best;
}

// out[i] = exp(x[i] - shift); returns the sum of the out[i]. out may be null (sum only).
template <class T>
T exp_shifted_sum(const T* x, T shift, T* out, std::int64_t n) {
  const Batch<T> s(shift);
  Batch<T> acc(T(0));
  std::int64_t i = 0;
  for (; i + kLanes<T> <= n; i += kLanes<T>) {
    const Batch<T> e = xsimd::exp(Batch<T>::load_unaligned(x + i) - s);
    if (out) e.store_unaligned(out + i);
    acc += e;
  }
  T total = xsimd::hadd(acc);
  for (; i < n; ++i) {
    const T e = std::exp(x[i] - shift);
    if (out) out[i] = e;
    total += e;
  }
  return total;
}

// out[j] = exp(x[j] - shift[j]).
template <class T>
void exp_shifted(const T* x, const T* shift, T* out, std::int64_t n) {
  std::int64_t j = 0;
  for (; j + kLanes<T> <= n; j += kLanes<T>)
    xsimd::exp(Batch<T>::load_unaligned(x + j) - Batch<T>::load_unaligned(shift + j)).store_unaligned(out + j);
  for (; j < n; ++j) out[j] = std::exp(x[j] - shift[j]);
}

// sum(a[i] * b[i]).
template <class T>
T row_dot(const T* a, const T* b, std::int64_t n) {
  Batch<T> acc(T(0));
  std::int64_t i = 0;
  for (; i + kLanes<T> <= n; i += kLanes<T>) acc += Batch<T>::load_unaligned(a + i) * Batch<T>::load_unaligned(b + i);
  T total = xsimd::hadd(acc);
  for (; i < n; ++i) total += a[i] * b[i];
  return total;
}

// out[i] = g[i] - exp(y[i]) * s (log_softmax's backward on one row).
template <class T>
void minus_exp_scaled(const T* g, const T* y, T s, T* out, std::int64_t n) {
  const Batch<T> sb(s);
  std::int64_t i = 0;
  for (; i + kLanes<T> <= n; i += kLanes<T>)
    (Batch<T>::load_unaligned(g + i) - xsimd::exp(Batch<T>::load_unaligned(y + i)) * sb).store_unaligned(out + i);
  for (; i < n; ++i) out[i] = g[i] - std::exp(y[i]) * s;
}

// out[j] = g[j] - exp(y[j]) * s[j] (the same with one sum per column).
template <class T>
void minus_exp_scaled(const T* g, const T* y, const T* s, T* out, std::int64_t n) {
  std::int64_t j = 0;
  for (; j + kLanes<T> <= n; j += kLanes<T>)
    (Batch<T>::load_unaligned(g + j) - xsimd::exp(Batch<T>::load_unaligned(y + j)) * Batch<T>::load_unaligned(s + j))
        .store_unaligned(out + j);
  for (; j < n; ++j) out[j] = g[j] - std::exp(y[j]) * s[j];
}

// max (kMax) or min of a[0..n), NaN if any entry is NaN; n >= 1.
template <class T, bool kMax>
T row_extremum(const T* a, std::int64_t n) {
  std::int64_t i = 0;
  T best = a[0];
  bool saw_nan = std::isnan(best);
  if (n >= kLanes<T>) {
    // xsimd's max/min do not propagate NaN, so NaNs are tracked on the side.
    Batch<T> acc = Batch<T>::load_unaligned(a);
    auto nan = xsimd::isnan(acc);
    for (i = kLanes<T>; i + kLanes<T> <= n; i += kLanes<T>) {
      const Batch<T> v = Batch<T>::load_unaligned(a + i);
      acc = kMax ? xsimd::max(acc, v) : xsimd::min(acc, v);
      nan = nan | xsimd::isnan(v);
    }
    saw_nan = saw_nan || xsimd::any(nan);
    T lanes[kLanes<T>];
    acc.store_unaligned(lanes);
    for (T v : lanes) best = (kMax ? v > best : v < best) ? v : best;
  }
  for (; i < n; ++i) {
    best = (kMax ? a[i] > best : a[i] < best) ? a[i] : best;
    saw_nan = saw_nan || std::isnan(a[i]);
  }
  return saw_nan ? std::numeric_limits<T>::quiet_NaN() : best;
}

}  // namespace

// ---------------------------------------------------------------- max, min

namespace {

template <class T>
bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
  else return false;
}

// Whether v replaces the current best. A NaN wins and then stays, so NaN propagates as in
// PyTorch; strict comparison keeps the first of tied values (argmax's first occurrence).
template <bool kMax, class T>
bool better(T v, T best) {
  if (is_nan(best)) return false;
  return (kMax ? v > best : v < best) || is_nan(v);
}

void check_not_empty(const Shape& shape, const ReducedAxes& r, const char* op) {
  if (r.count == 0 && r.kept_shape.numel() > 0)
    throw ValueError(std::string(op) + ": cannot reduce over an empty axis of a tensor of shape " + shape.str() +
                     " (the result has no identity)");
}

// Largest (kMax) or smallest value over the reduced axes, in the keepdim shape.
template <class T, bool kMax>
Tensor extremum_kernel(const Tensor& x, const ReducedAxes& r) {
  Tensor out = empty(r.kept_shape, x.dtype());
  T* po = out.data_ptr<T>();
  const T start = kMax ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
  const T first = std::numeric_limits<T>::has_infinity ? (kMax ? -std::numeric_limits<T>::infinity()
                                                               : std::numeric_limits<T>::infinity())
                                                        : start;
  for (std::int64_t i = 0; i < out.numel(); ++i) po[i] = first;
  const T* px = x.data_ptr<T>();
  kernels::for_each_run<2>(x.shape(), {reduced_strides(r), x.strides()},
                           [&](kernels::Offsets<2> off, std::int64_t n, kernels::Offsets<2> st) {
                             T* o = po + off[0];
                             const T* a = px + off[1];
                             if (st[0] == 0) {
                               T best = *o;
                               if constexpr (std::is_floating_point_v<T>) {
                                 if (st[1] == 1) {  // a contiguous run reduced to one value
                                   const T run = row_extremum<T, kMax>(a, n);
                                   if (better<kMax>(run, best)) best = run;
                                   *o = best;
                                   return;
                                 }
                               }
                               for (std::int64_t i = 0; i < n; ++i)
                                 if (better<kMax>(a[i * st[1]], best)) best = a[i * st[1]];
                               *o = best;
                             } else {
                               for (std::int64_t i = 0; i < n; ++i)
                                 if (better<kMax>(a[i * st[1]], o[i * st[0]])) o[i * st[0]] = a[i * st[1]];
                             }
                           });
  return out;
}

Tensor extremum(const Tensor& x, const Dims& axes, bool keepdim, const char* op, bool take_max) {
  const ReducedAxes r = resolve_axes(x.shape(), axes, op);
  Tensor kept = dispatch_numeric(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    check_not_empty(x.shape(), r, op);
    return take_max ? extremum_kernel<T, true>(x, r) : extremum_kernel<T, false>(x, r);
  });
  Tensor out = finish_shape(kept, r, keepdim);
  if (any_requires_grad({&x}))
    // kept.detach(): with keepdim, kept is the output itself, which the closure must not own.
    record(op, out, {x}, [x = x.detach(), best = kept.detach(), r, op](const Tensor& g) -> TensorList {
      // Every element equal to the extremum gets an equal share of the gradient (torch.amax).
      const Tensor hits = eq(x, best).to(x.dtype());  // hits: x's shape, 1 where x attains the extremum
      const Tensor ties = dispatch_floating(x.dtype(), op, [&](auto tag) {
        return sum_kernel<decltype(tag)>(hits, r);  // ties: (kept), how many share each extremum
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

// ---------------------------------------------------------------- argmax, argmin

namespace {

// A tensor seen as (outer, n, inner) around one axis, for a contiguous buffer.
struct AxisSplit {
  std::int64_t outer = 1;
  std::int64_t n = 1;  // the axis' length
  std::int64_t inner = 1;
};

AxisSplit split_at(const Shape& shape, int axis) {
  AxisSplit s;
  if (shape.size() == 0) return s;  // a scalar is one row of length 1
  for (int d = 0; d < axis; ++d) s.outer *= shape[d];
  s.n = shape[axis];
  for (int d = axis + 1; d < shape.size(); ++d) s.inner *= shape[d];
  return s;
}

template <class T, bool kMax>
void arg_extremum_kernel(const T* x, std::int64_t* out, const AxisSplit& s) {
  // x: (outer, n, inner) contiguous; out: (outer, inner)
  if (s.inner == 1) {
    for (std::int64_t o = 0; o < s.outer; ++o) {
      const T* row = x + o * s.n;
      std::int64_t best = 0;
      for (std::int64_t k = 1; k < s.n; ++k)
        if (better<kMax>(row[k], row[best])) best = k;
      out[o] = best;
    }
    return;
  }
  // The axis is strided: sweep it row by row so each pass reads inner contiguous values.
  std::vector<T> best_value(static_cast<std::size_t>(s.inner));
  for (std::int64_t o = 0; o < s.outer; ++o) {
    const T* block = x + o * s.n * s.inner;
    std::int64_t* idx = out + o * s.inner;
    for (std::int64_t j = 0; j < s.inner; ++j) {
      best_value[j] = block[j];
      idx[j] = 0;
    }
    for (std::int64_t k = 1; k < s.n; ++k) {
      const T* row = block + k * s.inner;
      for (std::int64_t j = 0; j < s.inner; ++j)
        if (better<kMax>(row[j], best_value[j])) {
          best_value[j] = row[j];
          idx[j] = k;
        }
    }
  }
}

Tensor arg_extremum(const Tensor& x, std::int64_t axis, bool keepdim, const char* op, bool take_max) {
  const int a = normalize_axis(axis, x.dim(), op);
  Shape kept_shape = x.shape();
  if (x.dim() > 0) kept_shape[a] = 1;
  Shape out_shape = x.shape();
  if (x.dim() > 0) out_shape.erase(a);
  return dispatch_numeric(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const AxisSplit s = split_at(x.shape(), a);
    if (s.n == 0)
      throw ValueError(std::string(op) + ": axis " + std::to_string(axis) + " of a tensor of shape " +
                       x.shape().str() + " is empty, so there is no " + (take_max ? "largest" : "smallest") +
                       " value");
    Tensor out = empty(keepdim ? kept_shape : out_shape, kInt64);
    if (out.numel() == 0) return out;
    const Tensor xd = kernels::dense(x);
    if (take_max) arg_extremum_kernel<T, true>(xd.data_ptr<T>(), out.data_ptr<std::int64_t>(), s);
    else arg_extremum_kernel<T, false>(xd.data_ptr<T>(), out.data_ptr<std::int64_t>(), s);
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

namespace {

// log(sum(exp(x))) over the reduced axes, in the keepdim shape.
template <class T>
Tensor logsumexp_kernel(const Tensor& x, const ReducedAxes& r) {
  Tensor shift = extremum_kernel<T, true>(x, r);  // (kept)
  T* pm = shift.data_ptr<T>();
  // Subtracting the max keeps exp from overflowing. An infinite max shifts by 0 instead: a
  // row of -inf then sums exp(-inf) = 0 and gives log(0) = -inf rather than -inf - -inf = NaN,
  // and a +inf entry gives +inf.
  for (std::int64_t i = 0; i < shift.numel(); ++i)
    if (std::isinf(pm[i])) pm[i] = 0;
  Tensor out = zeros(r.kept_shape, x.dtype());  // (kept), the sums of exp first
  T* po = out.data_ptr<T>();
  const T* px = x.data_ptr<T>();
  // out and shift are both contiguous in the kept shape, so one offset serves both.
  kernels::for_each_run<2>(x.shape(), {reduced_strides(r), x.strides()},
                           [&](kernels::Offsets<2> off, std::int64_t n, kernels::Offsets<2> st) {
                             T* o = po + off[0];
                             const T* m = pm + off[0];
                             const T* a = px + off[1];
                             if (st[0] == 0 && st[1] == 1) {
                               *o += exp_shifted_sum<T>(a, *m, nullptr, n);
                             } else if (st[0] == 0) {
                               T total = 0;
                               for (std::int64_t i = 0; i < n; ++i) total += std::exp(a[i * st[1]] - *m);
                               *o += total;
                             } else {
                               for (std::int64_t i = 0; i < n; ++i)
                                 o[i * st[0]] += std::exp(a[i * st[1]] - m[i * st[0]]);
                             }
                           });
  for (std::int64_t i = 0; i < out.numel(); ++i) po[i] = std::log(po[i]) + pm[i];
  return out;
}

}  // namespace

Tensor logsumexp(const Tensor& x, const Dims& axes, bool keepdim) {
  const ReducedAxes r = resolve_axes(x.shape(), axes, "logsumexp");
  Tensor kept = dispatch_floating(x.dtype(), "logsumexp", [&](auto tag) {
    using T = decltype(tag);
    check_not_empty(x.shape(), r, "logsumexp");
    return logsumexp_kernel<T>(x, r);
  });
  Tensor out = finish_shape(kept, r, keepdim);
  if (any_requires_grad({&x}))
    record("logsumexp", out, {x}, [x = x.detach(), lse = kept.detach(), r](const Tensor& g) -> TensorList {
      // d lse / dx = exp(x - lse) = softmax(x); an entry of -inf gets 0 even when the whole row
      // is -inf (where exp(-inf - -inf) would be NaN).
      return {dispatch_floating(x.dtype(), "logsumexp backward", [&](auto tag) {
        using T = decltype(tag);
        return kernels::map3<T, T, T, T>(reshape(g, r.kept_shape), x, lse, x.shape(), [](T gv, T xv, T lv) {
          return xv == -std::numeric_limits<T>::infinity() ? T(0) : gv * std::exp(xv - lv);
        });
      })};
    });
  return out;
}

// ---------------------------------------------------------------- softmax, log_softmax
//
// Both run on a contiguous copy seen as (outer, n, inner) around the axis. The usual case, the
// last axis (attention rows, vocabulary logits), has inner == 1: each row is contiguous and
// takes three tight passes (max; exp and its sum; scale) vectorised with xsimd. Other axes
// sweep the axis one inner-sized row at a time with per-column running values, which keeps
// the reads contiguous too.
//
// Stability: the row max is subtracted before exp, so logits like (1000, 1001) are fine. A row
// that is partly -inf (masked attention) has a finite max, exp(-inf - max) = 0, so the masked
// entries come out exactly 0 (softmax) or -inf (log_softmax) with no NaN. A row that is
// entirely -inf has max -inf and -inf - -inf = NaN: the whole row is NaN, as in PyTorch.

namespace {

template <class T, bool kLog>
void softmax_forward(const T* x, T* y, const AxisSplit& s) {
  // x, y: (outer, n, inner) contiguous
  if (s.inner == 1) {
    parallel_for(0, s.outer, row_grain(s.n), [&](std::int64_t first, std::int64_t last) {
      for (std::int64_t o = first; o < last; ++o) {
        const T* xr = x + o * s.n;  // xr, yr: (n)
        T* yr = y + o * s.n;
        const T m = row_max(xr, s.n);
        if constexpr (kLog) {
          // (x - m) - log(sum) rather than x - (m + log(sum)): x - m is exact near the max, so
          // float32 keeps full precision even for logits around 1000.
          const T log_total = std::log(exp_shifted_sum<T>(xr, m, nullptr, s.n));
          for (std::int64_t i = 0; i < s.n; ++i) yr[i] = (xr[i] - m) - log_total;
        } else {
          const T inv = T(1) / exp_shifted_sum(xr, m, yr, s.n);
          for (std::int64_t i = 0; i < s.n; ++i) yr[i] *= inv;
        }
      }
    });
    return;
  }
  std::vector<T> m(static_cast<std::size_t>(s.inner));      // m: (inner), running max per column
  std::vector<T> total(static_cast<std::size_t>(s.inner));  // total: (inner), sum of exp per column
  std::vector<T> e(kLog ? static_cast<std::size_t>(s.inner) : 0);
  for (std::int64_t o = 0; o < s.outer; ++o) {
    const T* xb = x + o * s.n * s.inner;  // xb, yb: (n, inner)
    T* yb = y + o * s.n * s.inner;
    std::fill(m.begin(), m.end(), -std::numeric_limits<T>::infinity());
    std::fill(total.begin(), total.end(), T(0));
    for (std::int64_t k = 0; k < s.n; ++k) {
      const T* row = xb + k * s.inner;
      for (std::int64_t j = 0; j < s.inner; ++j) m[j] = row[j] > m[j] ? row[j] : m[j];
    }
    for (std::int64_t k = 0; k < s.n; ++k) {
      // softmax keeps exp(x - m) in y to scale later; log_softmax needs only the sums.
      T* ek = kLog ? e.data() : yb + k * s.inner;
      exp_shifted(xb + k * s.inner, m.data(), ek, s.inner);
      for (std::int64_t j = 0; j < s.inner; ++j) total[j] += ek[j];
    }
    if constexpr (kLog) {
      for (std::int64_t j = 0; j < s.inner; ++j) total[j] = std::log(total[j]);
      for (std::int64_t k = 0; k < s.n; ++k) {
        const T* row = xb + k * s.inner;
        T* out = yb + k * s.inner;
        for (std::int64_t j = 0; j < s.inner; ++j) out[j] = (row[j] - m[j]) - total[j];
      }
    } else {
      for (std::int64_t j = 0; j < s.inner; ++j) total[j] = T(1) / total[j];
      for (std::int64_t k = 0; k < s.n; ++k) {
        T* out = yb + k * s.inner;
        for (std::int64_t j = 0; j < s.inner; ++j) out[j] *= total[j];
      }
    }
  }
}

// softmax: gx = y * (g - sum(g * y));  log_softmax: gx = g - exp(y) * sum(g), sums along the axis.
template <class T, bool kLog>
void softmax_backward(const T* g, const T* y, T* gx, const AxisSplit& s) {
  // g, y, gx: (outer, n, inner) contiguous
  if (s.inner == 1) {
    parallel_for(0, s.outer, row_grain(s.n), [&](std::int64_t first, std::int64_t last) {
      for (std::int64_t o = first; o < last; ++o) {
        const T* gr = g + o * s.n;  // gr, yr, out: (n)
        const T* yr = y + o * s.n;
        T* out = gx + o * s.n;
        if constexpr (kLog) {
          minus_exp_scaled(gr, yr, row_sum(gr, s.n), out, s.n);
        } else {
          const T dot = row_dot(gr, yr, s.n);
          for (std::int64_t i = 0; i < s.n; ++i) out[i] = yr[i] * (gr[i] - dot);
        }
      }
    });
    return;
  }
  std::vector<T> total(static_cast<std::size_t>(s.inner));  // total: (inner)
  for (std::int64_t o = 0; o < s.outer; ++o) {
    const T* gb = g + o * s.n * s.inner;  // gb, yb, ob: (n, inner)
    const T* yb = y + o * s.n * s.inner;
    T* ob = gx + o * s.n * s.inner;
    std::fill(total.begin(), total.end(), T(0));
    for (std::int64_t k = 0; k < s.n; ++k) {
      const T* gr = gb + k * s.inner;
      const T* yr = yb + k * s.inner;
      if constexpr (kLog)
        for (std::int64_t j = 0; j < s.inner; ++j) total[j] += gr[j];
      else
        for (std::int64_t j = 0; j < s.inner; ++j) total[j] += gr[j] * yr[j];
    }
    for (std::int64_t k = 0; k < s.n; ++k) {
      const T* gr = gb + k * s.inner;
      const T* yr = yb + k * s.inner;
      T* out = ob + k * s.inner;
      if constexpr (kLog) {
        minus_exp_scaled(gr, yr, total.data(), out, s.inner);
      } else {
        for (std::int64_t j = 0; j < s.inner; ++j) out[j] = yr[j] * (gr[j] - total[j]);
      }
    }
  }
}

template <bool kLog>
Tensor softmax_family(const Tensor& x, std::int64_t axis, const char* op) {
  const int a = normalize_axis(axis, x.dim(), op);
  const AxisSplit split = split_at(x.shape(), a);
  Tensor out = dispatch_floating(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    Tensor y = empty(x.shape(), x.dtype());
    if (y.numel() > 0) softmax_forward<T, kLog>(kernels::dense(x).data_ptr<T>(), y.data_ptr<T>(), split);
    return y;
  });
  if (any_requires_grad({&x}))
    record(op, out, {x}, [y = out.detach(), split](const Tensor& g) -> TensorList {
      return {dispatch_floating(y.dtype(), "softmax backward", [&](auto tag) {
        using T = decltype(tag);
        Tensor gx = empty(y.shape(), y.dtype());
        if (gx.numel() > 0)
          softmax_backward<T, kLog>(kernels::dense(g).data_ptr<T>(), y.data_ptr<T>(), gx.data_ptr<T>(), split);
        return gx;
      })};
    });
  return out;
}

}  // namespace

Tensor softmax(const Tensor& x, std::int64_t axis) { return softmax_family<false>(x, axis, "softmax"); }

// causal_softmax: each row i of the trailing (Tq, Tk) matrices is softmaxed over its first
// min(Tk, i + offset + 1) entries and the rest are written as 0, in one pass per row. The
// same values as softmax(masked_fill(x, key > query + offset, -inf)), without building the
// mask, filling the scores or exponentiating the masked entries. The backward is softmax's:
// y = 0 at the excluded entries makes their gradient 0.
Tensor causal_softmax(const Tensor& x, std::int64_t offset) {
  if (x.dim() < 2)
    throw ShapeError("causal_softmax: expected (..., Tq, Tk) scores, got shape " + x.shape().str());
  const std::int64_t tq = x.shape()[x.dim() - 2], tk = x.shape()[x.dim() - 1];
  if (offset < 0)
    throw ValueError("causal_softmax: offset must be >= 0 (every query sees at least its own key), got " +
                     std::to_string(offset));
  const AxisSplit split = split_at(x.shape(), x.dim() - 1);  // rows: (outer = ... * Tq, n = Tk)
  Tensor out = dispatch_floating(x.dtype(), "causal_softmax", [&](auto tag) {
    using T = decltype(tag);
    Tensor y = empty(x.shape(), x.dtype());
    if (y.numel() == 0) return y;
    const Tensor xd = kernels::dense(x);
    const T* px = xd.data_ptr<T>();
    T* py = y.data_ptr<T>();
    parallel_for(0, split.outer, row_grain(tk), [&](std::int64_t first, std::int64_t last) {
      for (std::int64_t r = first; r < last; ++r) {
        const T* xr = px + r * tk;  // xr, yr: (Tk)
        T* yr = py + r * tk;
        const std::int64_t keep = std::min(tk, r % tq + offset + 1);
        const T m = row_max(xr, keep);
        const T inv = T(1) / exp_shifted_sum(xr, m, yr, keep);
        for (std::int64_t j = 0; j < keep; ++j) yr[j] *= inv;
        for (std::int64_t j = keep; j < tk; ++j) yr[j] = T(0);
      }
    });
    return y;
  });
  if (any_requires_grad({&x}))
    record("causal_softmax", out, {x}, [y = out.detach(), split](const Tensor& g) -> TensorList {
      return {dispatch_floating(y.dtype(), "causal_softmax backward", [&](auto tag) {
        using T = decltype(tag);
        Tensor gx = empty(y.shape(), y.dtype());
        if (gx.numel() > 0)
          softmax_backward<T, false>(kernels::dense(g).data_ptr<T>(), y.data_ptr<T>(), gx.data_ptr<T>(), split);
        return gx;
      })};
    });
  return out;
}
Tensor log_softmax(const Tensor& x, std::int64_t axis) { return softmax_family<true>(x, axis, "log_softmax"); }

}  // namespace tapegrad
