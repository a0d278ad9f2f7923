#pragma once
// Reduction kernels over any set of axes (sum, max, min, logsumexp, each into a new tensor of
// the keepdim shape) and along one axis (argmax, argmin), and the running sum along one axis
// (cumsum). The ops, with their argument checks and backward, are in ops/reduce.cpp. Static, see
// rows.h.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include <xsimd/xsimd.hpp>

#include "tapegrad/autograd/kernels/rows.h"
#include "tapegrad/autograd/kernels/strided.h"
#include "tapegrad/autograd/parallel.h"
#include "tapegrad/autograd/tensor.h"

namespace tapegrad::kernels {

// Which axes a reduction covers, and the shapes that follow (ops/reduce.cpp's resolve_axes
// builds it from an op's axes argument).
struct ReducedAxes {
  bool reduced[kMaxRank] = {};
  Shape kept_shape;        // the output shape with keepdim (reduced axes have size 1)
  Shape out_shape;         // the output shape without keepdim
  std::int64_t count = 1;  // elements folded into each output element
};

// The type a sum of T adds in: T's unsigned twin for an integer T (the same bits, with arithmetic
// modulo 2^64, as torch's int64 sums wrap around, where signed overflow would be undefined), T
// otherwise.
template <class T>
using Wrapping = typename std::conditional_t<std::is_integral_v<T>, std::make_unsigned<T>, std::common_type<T>>::type;

// Strides of a keepdim-shaped contiguous output seen from the input's shape (0 on reduced axes).
static inline Dims reduced_strides(const ReducedAxes& r) {
  Dims strides = contiguous_strides(r.kept_shape);
  for (int d = 0; d < strides.size(); ++d)
    if (r.reduced[d]) strides[d] = 0;
  return strides;
}

// Where the reduced axes of x lie, ignoring size-1 axes: all before the kept ones (x seen as
// (count, rest), summed over its rows: a bias gradient), all after them ((rest, count), summed
// along each row), or interleaved.
enum class ReducedBlock { kLeading, kTrailing, kMixed };

static inline ReducedBlock reduced_block(const Shape& shape, const ReducedAxes& r) {
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

// Sum over the reduced axes into a new tensor of the keepdim shape. int64 adds in uint64 (the same
// bits read unsigned), so a sum past 2^63 wraps around as torch's does rather than overflowing.
template <class T>
static Tensor sum_reduced(const Tensor& x, const ReducedAxes& r) {
  using U = Wrapping<T>;
  Tensor out = zeros(r.kept_shape, x.dtype());
  U* po = reinterpret_cast<U*>(out.data_ptr<T>());
  const U* px = reinterpret_cast<const U*>(x.data_ptr<T>());
  // One run of the layout below adds n elements into one output (st[0] == 0) or n inputs into n
  // outputs; the runs come in the input's order.
  auto add_run = [&](Offsets<2> off, std::int64_t n, Offsets<2> st) {
    U* o = po + off[0];
    const U* a = px + off[1];
    if (st[0] == 0) {
      // Eight partial sums: vectorisable, and more accurate than one.
      U partial[8] = {};
      std::int64_t i = 0;
      if (st[1] == 1)
        for (; i + 8 <= n; i += 8)
          for (int k = 0; k < 8; ++k) partial[k] += a[i + k];
      U total = 0;
      for (; i < n; ++i) total += a[i * st[1]];
      for (int k = 0; k < 8; ++k) total += partial[k];
      *o += total;
    } else if (st[0] == 1 && st[1] == 1) {
      for (std::int64_t i = 0; i < n; ++i) o[i] += a[i];
    } else {
      for (std::int64_t i = 0; i < n; ++i) o[i * st[0]] += a[i * st[1]];
    }
  };
  const RunLayout<2> layout = run_layout<2>(x.shape(), {reduced_strides(r), x.strides()});
  const std::int64_t total = layout.numel();
  const std::int64_t count = r.count, outputs = count == 0 ? 0 : total / count;
  // The two common shapes of a large sum go over the pool with the summation order unchanged, so
  // the bits do not depend on the thread count: a contiguous (count, outputs) block split into
  // column blocks, each column summed down the rows; or (outputs, count) split into whole rows.
  if (x.is_contiguous() && total >= 2 * kElementwiseGrain && outputs > 1) {
    const ReducedBlock block = reduced_block(x.shape(), r);
    if (block == ReducedBlock::kLeading) {
      parallel_for(0, outputs, row_grain(count), [&](std::int64_t c0, std::int64_t c1) {
        for (std::int64_t row = 0; row < count; ++row) {
          const U* a = px + row * outputs;  // a: (outputs)
          for (std::int64_t i = c0; i < c1; ++i) po[i] += a[i];
        }
      });
      return out;
    }
    if (block == ReducedBlock::kTrailing) {
      parallel_for(0, outputs, row_grain(count), [&](std::int64_t first, std::int64_t last) {
        for_runs(layout, first * count, last * count, add_run);
      });
      return out;
    }
  }
  for_runs(layout, 0, total, add_run);
  return out;
}

// The sum of a contiguous bfloat16 x whose reduced axes all come first (x seen as (count, outputs):
// a linear's bias gradient under autocast), read in bfloat16 and accumulated in float32 into a
// float32 tensor of the keepdim shape: sum_reduced<float> of the widened x, in the same order, so
// the same bits, without the widened copy.
static inline Tensor sum_leading_bfloat16(const Tensor& x, const ReducedAxes& r) {
  Tensor out = zeros(r.kept_shape, kFloat32);
  float* po = out.data_ptr<float>();
  const BFloat16* px = x.data_ptr<BFloat16>();
  const std::int64_t count = r.count, outputs = count == 0 ? 0 : x.numel() / count;
  parallel_for(0, outputs, row_grain(count), [&](std::int64_t c0, std::int64_t c1) {
    for (std::int64_t row = 0; row < count; ++row) {
      const BFloat16* a = px + row * outputs;  // a: (outputs)
      for (std::int64_t i = c0; i < c1; ++i) po[i] += static_cast<float>(a[i]);
    }
  });
  return out;
}

// The mean over the reduced axes: the sum scaled by 1 / count.
template <class T>
static Tensor mean_reduced(const Tensor& x, const ReducedAxes& r) {
  Tensor s = sum_reduced<T>(x, r);
  const T scale = T(1) / static_cast<T>(r.count);
  T* p = s.data_ptr<T>();
  for (std::int64_t i = 0; i < s.numel(); ++i) p[i] *= scale;
  return s;
}

// max (kMax) or min of a[0..n), NaN if any entry is NaN; n >= 1.
template <class T, bool kMax>
static T row_extremum(const T* a, std::int64_t n) {
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

template <class T>
static bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
  else return false;
}

// Whether v replaces the current best. A NaN wins and then stays, so NaN propagates as in
// PyTorch; strict comparison keeps the first of tied values (argmax's first occurrence).
template <bool kMax, class T>
static bool better(T v, T best) {
  if (is_nan(best)) return false;
  return (kMax ? v > best : v < best) || is_nan(v);
}

// Largest (kMax) or smallest value over the reduced axes, in the keepdim shape.
template <class T, bool kMax>
static Tensor extremum_reduced(const Tensor& x, const ReducedAxes& r) {
  Tensor out = empty(r.kept_shape, x.dtype());
  T* po = out.data_ptr<T>();
  const T start = kMax ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
  const T first = std::numeric_limits<T>::has_infinity
                      ? (kMax ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity())
                      : start;
  for (std::int64_t i = 0; i < out.numel(); ++i) po[i] = first;
  const T* px = x.data_ptr<T>();
  for_each_run<2>(x.shape(), {reduced_strides(r), x.strides()}, [&](Offsets<2> off, std::int64_t n, Offsets<2> st) {
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

// The index of the largest (kMax) or smallest value along the axis of x seen as (outer, n, inner);
// the first one on ties, a NaN's when there is one.
template <class T, bool kMax>
static void arg_extremum(const T* x, std::int64_t* out, const AxisSplit& s) {
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

// log(sum(exp(x))) over the reduced axes, in the keepdim shape.
template <class T>
static Tensor logsumexp_reduced(const Tensor& x, const ReducedAxes& r) {
  Tensor shift = extremum_reduced<T, true>(x, r);  // (kept)
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
  for_each_run<2>(x.shape(), {reduced_strides(r), x.strides()}, [&](Offsets<2> off, std::int64_t n, Offsets<2> st) {
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
      for (std::int64_t i = 0; i < n; ++i) o[i * st[0]] += std::exp(a[i * st[1]] - m[i * st[0]]);
    }
  });
  for (std::int64_t i = 0; i < out.numel(); ++i) po[i] = std::log(po[i]) + pm[i];
  return out;
}

// The gradient of a p-norm, elementwise over n entries of x's shape (all contiguous):
//   gx = g * sign(x) (|x| / norm)^(p-1),  0 where the norm is 0 (PyTorch's subgradient);
//   p = inf: g * sign(x) / ties where |x| equals the norm (ties: how many entries share it), else 0.
// x, norm, g, ties (p = inf only, else null) and gx: (n).
template <class T>
static void norm_backward(const T* x, const T* norm, const T* g, const T* ties, T* gx, std::int64_t n, double p) {
  const bool inf = std::isinf(p);
  for (std::int64_t i = 0; i < n; ++i) {
    const T v = x[i], norm_v = norm[i];
    const T sign = v > T(0) ? T(1) : (v < T(0) ? T(-1) : T(0));
    T d;
    if (norm_v == T(0)) d = T(0);
    else if (inf) d = std::abs(v) == norm_v ? sign / ties[i] : T(0);
    else if (p == 1.0) d = sign;
    else if (p == 2.0) d = v / norm_v;
    else d = sign * static_cast<T>(std::pow(std::abs(v) / norm_v, p - 1.0));
    gx[i] = g[i] * d;
  }
}

// Running sums (or products, with combine = multiplication and identity 1) along the axis:
// out[o, k, j] = x[o, 0, j] + ... + x[o, k, j], or from the end (x[o, k, j] + ... + x[o, n - 1, j])
// when reverse. x and out: (outer, n, inner) contiguous. The running value is carried in Acc and
// rounded to T at each position (torch's CPU cumsum and cumprod carry float in double).
template <class T, class Acc, class Combine>
static void cumulative(const T* x, T* out, const AxisSplit& s, bool reverse, Acc identity, Combine combine) {
  std::vector<Acc> carry(static_cast<std::size_t>(s.inner));
  for (std::int64_t o = 0; o < s.outer; ++o) {
    const T* block = x + o * s.n * s.inner;
    T* out_block = out + o * s.n * s.inner;
    std::fill(carry.begin(), carry.end(), identity);
    for (std::int64_t step = 0; step < s.n; ++step) {
      const std::int64_t k = reverse ? s.n - 1 - step : step;
      const T* row = block + k * s.inner;
      T* out_row = out_block + k * s.inner;
      for (std::int64_t j = 0; j < s.inner; ++j) {
        carry[j] = combine(carry[j], static_cast<Acc>(row[j]));
        out_row[j] = static_cast<T>(carry[j]);
      }
    }
  }
}

// The gradient of cumprod along the axis, exact where x has zeros (no division): with E[i] the
// product of x[0 .. i) and R[i] = g[i] + x[i + 1] R[i + 1] (R[n - 1] = g[n - 1]), that is
// R[i] = sum over k >= i of g[k] x[i + 1] ... x[k], the gradient is
// gx[i] = sum over k >= i of g[k] prod_{j <= k, j != i} x[j] = E[i] R[i].
// x, g and gx: (outer, n, inner) contiguous; carried in Acc.
template <class T, class Acc>
static void cumprod_backward(const T* x, const T* g, T* gx, const AxisSplit& s) {
  std::vector<Acc> r(static_cast<std::size_t>(s.n * s.inner)), e(static_cast<std::size_t>(s.inner));
  for (std::int64_t o = 0; o < s.outer; ++o) {
    const T* xb = x + o * s.n * s.inner;
    const T* gb = g + o * s.n * s.inner;
    T* gxb = gx + o * s.n * s.inner;
    for (std::int64_t k = s.n - 1; k >= 0; --k)  // R, from the end of the axis
      for (std::int64_t j = 0; j < s.inner; ++j) {
        const std::int64_t at = k * s.inner + j;
        r[at] = static_cast<Acc>(gb[at]);
        if (k + 1 < s.n) r[at] += static_cast<Acc>(xb[at + s.inner]) * r[at + s.inner];
      }
    std::fill(e.begin(), e.end(), Acc(1));
    for (std::int64_t k = 0; k < s.n; ++k)  // times E, from the start
      for (std::int64_t j = 0; j < s.inner; ++j) {
        const std::int64_t at = k * s.inner + j;
        gxb[at] = static_cast<T>(e[j] * r[at]);
        e[j] *= static_cast<Acc>(xb[at]);
      }
  }
}

// The product of each row of a contiguous (rows, n): out[r] = x[r, 0] x[r, 1] ... x[r, n - 1] (1 for
// n = 0), carried in Acc.
template <class T, class Acc>
static void row_products(const T* x, T* out, std::int64_t rows, std::int64_t n) {
  for (std::int64_t r = 0; r < rows; ++r) {
    Acc p(1);
    for (std::int64_t i = 0; i < n; ++i) p *= static_cast<Acc>(x[r * n + i]);
    out[r] = static_cast<T>(p);
  }
}

// The gradient of row_products, exact where a row has zeros (no division): gx[r, i] = g[r] times the
// product of the row's other entries, the product of x[r, 0 .. i) (running from the start) times that
// of x[r, i + 1 .. n) (running from the end).
template <class T, class Acc>
static void row_products_backward(const T* x, const T* g, T* gx, std::int64_t rows, std::int64_t n) {
  std::vector<Acc> after(static_cast<std::size_t>(n));  // after[i]: the product of a[i + 1 .. n)
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* a = x + r * n;
    Acc p(1);
    for (std::int64_t i = n - 1; i >= 0; --i) {
      after[i] = p;
      p *= static_cast<Acc>(a[i]);
    }
    Acc before = static_cast<Acc>(g[r]);  // g[r] times the product of a[0 .. i)
    for (std::int64_t i = 0; i < n; ++i) {
      gx[r * n + i] = static_cast<T>(before * after[i]);
      before *= static_cast<Acc>(a[i]);
    }
  }
}

}  // namespace tapegrad::kernels
