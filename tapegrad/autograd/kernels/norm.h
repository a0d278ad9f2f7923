#pragma once
// layer_norm's kernels: forward and backward over rows of contiguous values, one pass per row
// each, vectorised with xsimd and split over the thread pool. The op is in ops/nn.cpp. Static,
// see rows.h.
//
// x: (..., *normalized_shape) is seen as M rows of D = prod(normalized_shape) contiguous values.
// Forward, per row:  mean = sum(x) / D,  var = sum((x - mean)^2) / D (two passes: no
// cancellation when |mean| >> std),  rstd = 1 / sqrt(var + eps),
//                    xhat = (x - mean) * rstd,  y = xhat * w + b.
// mean and rstd (M values each) are saved, so backward does not recompute the statistics.
// Backward, per row, with gxhat = g * w:
//                    dx = rstd * (gxhat - mean(gxhat) - xhat * mean(gxhat * xhat)),
//                    dw += g * xhat,  db += g  (summed over the M rows).

#include <cmath>
#include <cstdint>

#include <xsimd/xsimd.hpp>

#include "tapegrad/autograd/kernels/rows.h"
#include "tapegrad/autograd/kernels/strided.h"
#include "tapegrad/autograd/parallel.h"

namespace tapegrad::kernels {

// sum((x[i] - mean)^2).
template <class T>
static T row_squared_deviation(const T* x, T mean, std::int64_t n) {
  const Batch<T> mb(mean);
  Batch<T> acc(T(0));
  std::int64_t i = 0;
  for (; i + kLanes<T> <= n; i += kLanes<T>) {
    const Batch<T> d = Batch<T>::load_unaligned(x + i) - mb;
    acc += d * d;
  }
  T total = xsimd::hadd(acc);
  for (; i < n; ++i) total += (x[i] - mean) * (x[i] - mean);
  return total;
}

// The two row sums of the backward: sum(gxhat) and sum(gxhat * xhat), with gxhat = g * w
// (w null: gxhat = g) and xhat = (x - mean) * rstd.
template <class T>
static void row_backward_sums(const T* x, const T* g, const T* w, T mean, T rstd, std::int64_t n, T& sum_gxhat,
                              T& sum_gxhat_xhat) {
  const Batch<T> mb(mean);
  const Batch<T> rb(rstd);
  Batch<T> acc_g(T(0));
  Batch<T> acc_gx(T(0));
  std::int64_t i = 0;
  for (; i + kLanes<T> <= n; i += kLanes<T>) {
    Batch<T> gxhat = Batch<T>::load_unaligned(g + i);
    if (w) gxhat *= Batch<T>::load_unaligned(w + i);
    const Batch<T> xhat = (Batch<T>::load_unaligned(x + i) - mb) * rb;
    acc_g += gxhat;
    acc_gx += gxhat * xhat;
  }
  sum_gxhat = xsimd::hadd(acc_g);
  sum_gxhat_xhat = xsimd::hadd(acc_gx);
  for (; i < n; ++i) {
    const T gxhat = w ? g[i] * w[i] : g[i];
    sum_gxhat += gxhat;
    sum_gxhat_xhat += gxhat * (x[i] - mean) * rstd;
  }
}

// y, mean and rstd of each row; w and b may be null (no scale, no shift).
template <class T>
static void layer_norm_forward(const T* x, const T* w, const T* b, T eps, std::int64_t rows, std::int64_t d, T* y,
                               T* mean, T* rstd) {
  // x, y: (rows, d); w, b: (d) or null; mean, rstd: (rows)
  const T inv_d = T(1) / static_cast<T>(d);
  parallel_for(0, rows, row_grain(d), [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t r = first; r < last; ++r) {
      const T* xr = x + r * d;  // xr, yr: (d)
      T* yr = y + r * d;
      const T mu = row_sum(xr, d) * inv_d;
      const T rs = T(1) / std::sqrt(row_squared_deviation(xr, mu, d) * inv_d + eps);
      mean[r] = mu;
      rstd[r] = rs;
      // Four loops rather than branches inside one, so each stays a plain vectorisable loop.
      if (w && b)
        for (std::int64_t i = 0; i < d; ++i) yr[i] = (xr[i] - mu) * rs * w[i] + b[i];
      else if (w)
        for (std::int64_t i = 0; i < d; ++i) yr[i] = (xr[i] - mu) * rs * w[i];
      else if (b)
        for (std::int64_t i = 0; i < d; ++i) yr[i] = (xr[i] - mu) * rs + b[i];
      else
        for (std::int64_t i = 0; i < d; ++i) yr[i] = (xr[i] - mu) * rs;
    }
  });
}

// dx of each row, and dw, db summed over the rows (added into zeroed buffers); any of the three
// may be null (not needed).
template <class T>
static void layer_norm_backward(const T* g, const T* x, const T* w, const T* mean, const T* rstd, std::int64_t rows,
                                std::int64_t d, T* dx, T* dw, T* db) {
  // g, x, dx: (rows, d); w: (d) or null; mean, rstd: (rows); dw, db: (d), zeroed, or null
  const T inv_d = T(1) / static_cast<T>(d);
  if (dx)
    parallel_for(0, rows, row_grain(d), [&](std::int64_t first, std::int64_t last) {
      for (std::int64_t r = first; r < last; ++r) {
        const T* gr = g + r * d;  // gr, xr, out: (d)
        const T* xr = x + r * d;
        const T mu = mean[r];
        const T rs = rstd[r];
        T sum_gxhat = 0;
        T sum_gxhat_xhat = 0;
        row_backward_sums(xr, gr, w, mu, rs, d, sum_gxhat, sum_gxhat_xhat);
        const T mean_gxhat = sum_gxhat * inv_d;
        const T mean_gxhat_xhat = sum_gxhat_xhat * inv_d;
        T* out = dx + r * d;
        if (w)
          for (std::int64_t i = 0; i < d; ++i)
            out[i] = rs * (gr[i] * w[i] - mean_gxhat - (xr[i] - mu) * rs * mean_gxhat_xhat);
        else
          for (std::int64_t i = 0; i < d; ++i) out[i] = rs * (gr[i] - mean_gxhat - (xr[i] - mu) * rs * mean_gxhat_xhat);
      }
    });
  if (!dw && !db) return;
  // The parameter gradients sum over rows: the threads take column blocks, and each column is
  // summed in row order, so the result does not depend on the number of threads.
  parallel_for(0, d, row_grain(rows), [&](std::int64_t c0, std::int64_t c1) {
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* gr = g + r * d;
      const T* xr = x + r * d;
      const T mu = mean[r];
      const T rs = rstd[r];
      if (dw)
        for (std::int64_t i = c0; i < c1; ++i) dw[i] += gr[i] * (xr[i] - mu) * rs;
      if (db)
        for (std::int64_t i = c0; i < c1; ++i) db[i] += gr[i];
    }
  });
}

}  // namespace tapegrad::kernels
