// Neural-network functions with fused kernels: layer_norm (forward and backward in one pass
// per row each) and dropout.

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>


#include <xsimd/xsimd.hpp>

#include "tapegrad/autograd/kernels/elementwise.h"
#include "tapegrad/autograd/kernels/rows.h"
#include "tapegrad/autograd/ops.h"

namespace tapegrad {

// ---------------------------------------------------------------- layer_norm
//
// x: (..., *normalized_shape) is seen as M rows of D = prod(normalized_shape) contiguous values.
// Forward, per row:  mean = sum(x) / D,  var = sum((x - mean)^2) / D (two passes: no
// cancellation when |mean| >> std),  rstd = 1 / sqrt(var + eps),
//                    xhat = (x - mean) * rstd,  y = xhat * w + b.
// mean and rstd (M values each) are saved, so backward does not recompute the statistics.
// Backward, per row, with gxhat = g * w:
//                    dx = rstd * (gxhat - mean(gxhat) - xhat * mean(gxhat * xhat)),
//                    dw += g * xhat,  db += g  (summed over the M rows).

namespace {

using kernels::Batch;
using kernels::kLanes;
using kernels::row_grain;
using kernels::row_sum;

// sum((x[i] - mean)^2).
template <class T>
T row_squared_deviation(const T* x, T mean, std::int64_t n) {
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
void row_backward_sums(const T* x, const T* g, const T* w, T mean, T rstd, std::int64_t n, T& sum_gxhat,
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

template <class T>
void layer_norm_forward(const T* x, const T* w, const T* b, T eps, std::int64_t rows, std::int64_t d, T* y, T* mean,
                        T* rstd) {
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

template <class T>
void layer_norm_backward(const T* g, const T* x, const T* w, const T* mean, const T* rstd, std::int64_t rows,
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

void check_affine(const Tensor& param, const char* what, const Tensor& x, const Shape& normalized_shape) {
  if (!param.defined()) return;
  if (param.shape() != normalized_shape)
    throw ShapeError(std::string("layer_norm: ") + what + " of shape " + param.shape().str() +
                     " does not match normalized_shape " + normalized_shape.str());
  if (param.dtype() != x.dtype())
    throw TypeError(std::string("layer_norm: ") + what + " is " + dtype_name(param.dtype()) + " but the input is " +
                    dtype_name(x.dtype()));
}

template <class T>
T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  const int k = normalized_shape.size();
  bool trailing_match = k > 0 && k <= x.dim();
  for (int i = 0; i < k && trailing_match; ++i) trailing_match = x.shape()[x.dim() - k + i] == normalized_shape[i];
  if (!trailing_match)
    throw ShapeError("layer_norm: normalized_shape " + normalized_shape.str() +
                     " must be non-empty and equal the trailing axes of the input, which has shape " +
                     x.shape().str());
  check_affine(weight, "weight", x, normalized_shape);
  check_affine(bias, "bias", x, normalized_shape);
  if (!(eps >= 0.0)) throw ValueError("layer_norm: eps must be >= 0, got " + std::to_string(eps));

  const std::int64_t d = normalized_shape.numel();
  std::int64_t rows = 1;
  for (int i = 0; i < x.dim() - k; ++i) rows *= x.shape()[i];
  // Contiguous copies (no-ops for the usual contiguous activations and parameters).
  const Tensor xd = kernels::dense(x).detach();
  const Tensor wd = weight.defined() ? kernels::dense(weight).detach() : Tensor();
  const Tensor bd = bias.defined() ? kernels::dense(bias).detach() : Tensor();
  Tensor out = empty(x.shape(), x.dtype());
  Tensor mean = empty({rows}, x.dtype());  // mean, rstd: (rows)
  Tensor rstd = empty({rows}, x.dtype());
  dispatch_floating(x.dtype(), "layer_norm", [&](auto tag) {
    using T = decltype(tag);
    if (rows * d == 0) return;
    layer_norm_forward<T>(xd.data_ptr<T>(), data_or_null<T>(wd), data_or_null<T>(bd), static_cast<T>(eps), rows, d,
                          out.data_ptr<T>(), mean.data_ptr<T>(), rstd.data_ptr<T>());
  });
  if (any_requires_grad({&x, &weight, &bias}))
    record("layer_norm", out, {x, weight, bias},
           [xd, wd, mean, rstd, rows, d, normalized_shape, need_x = x.requires_grad(),
            need_w = weight.defined() && weight.requires_grad(),
            need_b = bias.defined() && bias.requires_grad()](const Tensor& g) -> TensorList {
             Tensor dx = need_x ? empty(xd.shape(), xd.dtype()) : Tensor();
             Tensor dw = need_w ? zeros(normalized_shape, xd.dtype()) : Tensor();
             Tensor db = need_b ? zeros(normalized_shape, xd.dtype()) : Tensor();
             dispatch_floating(xd.dtype(), "layer_norm backward", [&](auto tag) {
               using T = decltype(tag);
               if (rows * d == 0) return;
               const Tensor gd = kernels::dense(g);
               layer_norm_backward<T>(gd.data_ptr<T>(), xd.data_ptr<T>(), data_or_null<T>(wd), mean.data_ptr<T>(),
                                      rstd.data_ptr<T>(), rows, d, data_or_null<T>(dx), data_or_null<T>(dw),
                                      data_or_null<T>(db));
             });
             return {dx, dw, db};
           });
  return out;
}

// ---------------------------------------------------------------- dropout

namespace {

// y = keep ? x * scale : 0, drawing keep from gen. Each 64-bit draw gives two 32-bit uniforms
// (half the generator calls; 2^-32 resolution is far finer than any p), and element i uses
// the draws in row-major order, so a seed fixes the mask.
template <class T>
void dropout_forward(const T* x, T* y, bool* keep, std::int64_t n, double p, T scale, Generator& gen) {
  // x, y, keep: (n)
  // keep iff u32 / 2^32 >= p, i.e. u32 >= ceil(p 2^32); p == 1 gives 2^32, which no u32 reaches.
  const std::uint64_t threshold = static_cast<std::uint64_t>(std::ceil(p * 4294967296.0));
  std::int64_t i = 0;
  for (; i + 2 <= n; i += 2) {
    const std::uint64_t bits = gen.next_u64();
    keep[i] = (bits & 0xffffffffu) >= threshold;
    keep[i + 1] = (bits >> 32) >= threshold;
    y[i] = keep[i] ? x[i] * scale : T(0);
    y[i + 1] = keep[i + 1] ? x[i + 1] * scale : T(0);
  }
  if (i < n) {
    keep[i] = (gen.next_u64() & 0xffffffffu) >= threshold;
    y[i] = keep[i] ? x[i] * scale : T(0);
  }
}

}  // namespace

Tensor dropout(const Tensor& x, double p, bool training, Generator& gen) {
  if (!(p >= 0.0 && p <= 1.0)) {
    std::ostringstream message;
    message << "dropout: probability p must be in [0, 1], got " << p;
    throw ValueError(message.str());
  }
  dispatch_floating(x.dtype(), "dropout", [](auto) {});
  if (!training || p == 0.0) return x;
  // p == 1 keeps nothing; the scale is then irrelevant, and 0 avoids 1 / 0.
  const double scale = p < 1.0 ? 1.0 / (1.0 - p) : 0.0;
  Tensor keep = empty(x.shape(), kBool);  // keep: (x.shape), saved for backward (1 byte per element)
  Tensor out = empty(x.shape(), x.dtype());
  // Dropped entries are selected to 0 rather than multiplied by 0, so they are exactly 0 even
  // where x is inf or NaN.
  dispatch_floating(x.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    const Tensor xd = kernels::dense(x);
    dropout_forward<T>(xd.data_ptr<T>(), out.data_ptr<T>(), keep.data_ptr<bool>(), x.numel(), p,
                       static_cast<T>(scale), gen);
  });
  if (any_requires_grad({&x}))
    record("dropout", out, {x}, [keep, scale](const Tensor& g) -> TensorList {
      return {dispatch_floating(g.dtype(), "dropout backward", [&](auto tag) {
        using T = decltype(tag);
        const Tensor gd = kernels::dense(g);
        Tensor gx = empty(gd.shape(), gd.dtype());
        const T* pg = gd.data_ptr<T>();
        const bool* pk = keep.data_ptr<bool>();
        T* po = gx.data_ptr<T>();
        const T s = static_cast<T>(scale);
        for (std::int64_t i = 0; i < gx.numel(); ++i) po[i] = pk[i] ? pg[i] * s : T(0);
        return gx;
      })};
    });
  return out;
}

}  // namespace tapegrad
