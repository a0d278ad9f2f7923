#pragma once
// The softmax family's kernels on contiguous buffers seen as (outer, n, inner) around the axis
// (rows.h's AxisSplit): softmax and log_softmax forward and backward, and causal_softmax's
// forward (its backward is softmax's). The ops are in ops/softmax.cpp. Static, see rows.h.
//
// The usual case, the last axis (attention rows, vocabulary logits), has inner == 1: each row
// is contiguous and takes three tight passes (max; exp and its sum; scale) vectorised with
// xsimd, rows split over the thread pool. Other axes sweep the axis one inner-sized row at a
// time with per-column running values, which keeps the reads contiguous too.
//
// Stability: the row max is subtracted before exp, so logits like (1000, 1001) are fine. A row
// that is partly -inf (masked attention) has a finite max, exp(-inf - max) = 0, so the masked
// entries come out exactly 0 (softmax) or -inf (log_softmax) with no NaN. A row that is
// entirely -inf has max -inf and -inf - -inf = NaN: the whole row is NaN, as in PyTorch.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <xsimd/xsimd.hpp>

#include "tapegrad/autograd/kernels/rows.h"
#include "tapegrad/autograd/kernels/strided.h"
#include "tapegrad/autograd/parallel.h"

namespace tapegrad::kernels {

// out[j] = exp(x[j] - shift[j]).
template <class T>
static void exp_shifted(const T* x, const T* shift, T* out, std::int64_t n) {
  std::int64_t j = 0;
  for (; j + kLanes<T> <= n; j += kLanes<T>)
    xsimd::exp(Batch<T>::load_unaligned(x + j) - Batch<T>::load_unaligned(shift + j)).store_unaligned(out + j);
  for (; j < n; ++j) out[j] = std::exp(x[j] - shift[j]);
}

// out[i] = g[i] - exp(y[i]) * s (log_softmax's backward on one row).
template <class T>
static void minus_exp_scaled(const T* g, const T* y, T s, T* out, std::int64_t n) {
  const Batch<T> sb(s);
  std::int64_t i = 0;
  for (; i + kLanes<T> <= n; i += kLanes<T>)
    (Batch<T>::load_unaligned(g + i) - xsimd::exp(Batch<T>::load_unaligned(y + i)) * sb).store_unaligned(out + i);
  for (; i < n; ++i) out[i] = g[i] - std::exp(y[i]) * s;
}

// out[j] = g[j] - exp(y[j]) * s[j] (the same with one sum per column).
template <class T>
static void minus_exp_scaled(const T* g, const T* y, const T* s, T* out, std::int64_t n) {
  std::int64_t j = 0;
  for (; j + kLanes<T> <= n; j += kLanes<T>)
    (Batch<T>::load_unaligned(g + j) - xsimd::exp(Batch<T>::load_unaligned(y + j)) * Batch<T>::load_unaligned(s + j))
        .store_unaligned(out + j);
  for (; j < n; ++j) out[j] = g[j] - std::exp(y[j]) * s[j];
}

// y = softmax(x) (kLog: log_softmax(x)) along the axis.
template <class T, bool kLog>
static void softmax_forward(const T* x, T* y, const AxisSplit& s) {
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
static void softmax_backward(const T* g, const T* y, T* gx, const AxisSplit& s) {
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

// causal_softmax on rows of Tk values, row r being query r % Tq of its (Tq, Tk) matrix: its first
// min(Tk, r % Tq + offset + 1) entries are softmaxed, the rest written as 0.
template <class T>
static void causal_softmax_forward(const T* x, T* y, std::int64_t rows, std::int64_t tq, std::int64_t tk,
                                   std::int64_t offset) {
  // x, y: (rows, Tk) contiguous, rows = ... * Tq
  parallel_for(0, rows, row_grain(tk), [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t r = first; r < last; ++r) {
      const T* xr = x + r * tk;  // xr, yr: (Tk)
      T* yr = y + r * tk;
      const std::int64_t keep = std::min(tk, r % tq + offset + 1);
      const T m = row_max(xr, keep);
      const T inv = T(1) / exp_shifted_sum(xr, m, yr, keep);
      for (std::int64_t j = 0; j < keep; ++j) yr[j] *= inv;
      for (std::int64_t j = keep; j < tk; ++j) yr[j] = T(0);
    }
  });
}

}  // namespace tapegrad::kernels
