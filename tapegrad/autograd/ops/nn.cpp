// Neural-network functions with fused kernels: layer_norm (kernels/norm.h), logistic_loss
// (kernels/logistic.h) and dropout (kernels/dropout.h), each op followed by its backward.

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>

#include "tapegrad/autograd/autocast.h"
#include "tapegrad/autograd/kernels/dropout.h"
#include "tapegrad/autograd/kernels/elementwise.h"
#include "tapegrad/autograd/kernels/logistic.h"
#include "tapegrad/autograd/kernels/norm.h"
#include "tapegrad/autograd/ops.h"

namespace tapegrad {

// ---------------------------------------------------------------- layer_norm

namespace {

void check_affine(const Tensor& param, const char* what, const Tensor& x, const Shape& normalized_shape) {
  if (!param.defined()) return;
  if (param.shape() != normalized_shape)
    throw ShapeError(message("layer_norm: ", what, " of shape ", param.shape().str(),
                             " does not match normalized_shape ", normalized_shape.str()));
  if (param.dtype() != x.dtype())
    throw TypeError(
        message("layer_norm: ", what, " is ", dtype_name(param.dtype()), " but the input is ", dtype_name(x.dtype())));
}

template <class T>
T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

// layer_norm's backward written with ops, for a taped backward; the statistics are recomputed
// from x so that their dependence on x is differentiated too. With xhat = (x - mean) * rstd and
// gh = g * weight: dx = rstd (gh - mean(gh) - xhat mean(gh xhat)), dweight = sum(g xhat) and
// dbias = sum(g) over the leading axes.
TensorList layer_norm_backward_taped(const Tensor& g, const Tensor& x, const Tensor& weight,
                                     const Shape& normalized_shape, double eps, bool need_x, bool need_w, bool need_b) {
  Dims axes;
  for (int i = x.dim() - normalized_shape.size(); i < x.dim(); ++i) axes.push_back(i);
  const Tensor centered = x - tapegrad::mean(x, axes, /*keepdim=*/true);
  const Tensor rstd = rdiv(1.0, sqrt(tapegrad::mean(centered * centered, axes, /*keepdim=*/true) + eps));
  const Tensor xhat = centered * rstd;
  Tensor dx, dw, db;
  if (need_x) {
    const Tensor gh = weight.defined() ? g * weight : g;
    dx = rstd *
         (gh - tapegrad::mean(gh, axes, /*keepdim=*/true) - xhat * tapegrad::mean(gh * xhat, axes, /*keepdim=*/true));
  }
  if (need_w) dw = sum_to(g * xhat, normalized_shape);
  if (need_b) db = sum_to(g, normalized_shape);
  return {dx, dw, db};
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  if (detail::is_bf16(x) || detail::is_bf16(weight) || detail::is_bf16(bias))  // float32 policy (autocast.h)
    return detail::precision_result(
        layer_norm(detail::widen_bf16(x), normalized_shape, detail::widen_bf16(weight), detail::widen_bf16(bias), eps),
        x.dtype());
  const int k = normalized_shape.size();
  bool trailing_match = k > 0 && k <= x.dim();
  for (int i = 0; i < k && trailing_match; ++i) trailing_match = x.shape()[x.dim() - k + i] == normalized_shape[i];
  if (!trailing_match)
    throw ShapeError("layer_norm: normalized_shape " + normalized_shape.str() +
                     " must be non-empty and equal the trailing axes of the input, which has shape " + x.shape().str());
  check_affine(weight, "weight", x, normalized_shape);
  check_affine(bias, "bias", x, normalized_shape);
  if (!(eps >= 0.0)) throw ValueError(message("layer_norm: eps must be >= 0, got ", eps));

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
    kernels::layer_norm_forward<T>(xd.data_ptr<T>(), data_or_null<T>(wd), data_or_null<T>(bd), static_cast<T>(eps),
                                   rows, d, out.data_ptr<T>(), mean.data_ptr<T>(), rstd.data_ptr<T>());
  });
  if (any_requires_grad({&x, &weight, &bias}))
    record("layer_norm", out, {x, weight, bias},
           [sx = SavedTensor(x), sw = SavedTensor(weight), mean, rstd, rows, d, eps, normalized_shape,
            need_x = x.requires_grad(), need_w = weight.defined() && weight.requires_grad(),
            need_b = bias.defined() && bias.requires_grad()](const Tensor& g) -> TensorList {
             const Tensor& x = sx.unpack();
             const Tensor& weight = sw.unpack();
             if (any_requires_grad({&g, &x, &weight}))
               return layer_norm_backward_taped(g, x, weight, normalized_shape, eps, need_x, need_w, need_b);
             const Tensor xd = kernels::dense(x).detach();
             const Tensor wd = weight.defined() ? kernels::dense(weight).detach() : Tensor();
             Tensor dx = need_x ? empty(xd.shape(), xd.dtype()) : Tensor();
             Tensor dw = need_w ? zeros(normalized_shape, xd.dtype()) : Tensor();
             Tensor db = need_b ? zeros(normalized_shape, xd.dtype()) : Tensor();
             dispatch_floating(xd.dtype(), "layer_norm backward", [&](auto tag) {
               using T = decltype(tag);
               if (rows * d == 0) return;
               const Tensor gd = kernels::dense(g);
               kernels::layer_norm_backward<T>(gd.data_ptr<T>(), xd.data_ptr<T>(), data_or_null<T>(wd),
                                               mean.data_ptr<T>(), rstd.data_ptr<T>(), rows, d, data_or_null<T>(dx),
                                               data_or_null<T>(dw), data_or_null<T>(db));
             });
             return {dx, dw, db};
           });
  return out;
}

// ---------------------------------------------------------------- logistic_loss

Tensor logistic_loss(const Tensor& logits, const Tensor& targets, const Tensor& pos_weight, const Tensor& weight) {
  if (detail::is_bf16(logits) || detail::is_bf16(targets) || detail::is_bf16(pos_weight) ||
      detail::is_bf16(weight)) {  // float32 policy (autocast.h); the result follows the logits
    const Tensor out = logistic_loss(detail::widen_bf16(logits), detail::widen_bf16(targets),
                                     detail::widen_bf16(pos_weight), detail::widen_bf16(weight));
    return detail::is_bf16(logits) ? detail::precision_result(out, kBFloat16) : out;
  }
  const char* op = "logistic_loss";
  if (logits.shape() != targets.shape())
    throw ShapeError(message(op, ": targets of shape ", targets.shape().str(), " must match logits of shape ",
                             logits.shape().str()));
  const auto check = [&](const Tensor& t, const char* what) {
    if (!t.defined()) return;
    if (t.dtype() != logits.dtype())
      throw TypeError(
          message(op, ": ", what, " is ", dtype_name(t.dtype()), " but the logits are ", dtype_name(logits.dtype())));
    bool fits = t.dim() <= logits.dim();
    for (int i = 1; fits && i <= t.dim(); ++i) {
      const std::int64_t size = t.shape()[t.dim() - i];
      fits = size == 1 || size == logits.shape()[logits.dim() - i];
    }
    if (!fits)
      throw ShapeError(message(op, ": ", what, " of shape ", t.shape().str(),
                               " does not broadcast to the logits' shape ", logits.shape().str()));
  };
  check(targets, "targets");
  check(weight, "weight");
  check(pos_weight, "pos_weight");
  // The weights broadcast as ops on the tape, so that a gradient of the logits' shape sums back
  // to theirs.
  const Tensor w = weight.defined() ? broadcast_to(weight, logits.shape()) : Tensor();
  const Tensor p = pos_weight.defined() ? broadcast_to(pos_weight, logits.shape()) : Tensor();
  const std::int64_t n = logits.numel();
  Tensor out = empty(logits.shape(), logits.dtype());
  {
    const Tensor xd = kernels::dense(logits), yd = kernels::dense(targets);
    const Tensor wd = w.defined() ? kernels::dense(w) : Tensor(), pd = p.defined() ? kernels::dense(p) : Tensor();
    dispatch_floating(logits.dtype(), op, [&](auto tag) {
      using T = decltype(tag);
      const kernels::LogisticLoss<T> f{xd.data_ptr<T>(), yd.data_ptr<T>(), data_or_null<T>(wd), data_or_null<T>(pd)};
      kernels::logistic_loss_forward<T>(f, n, out.data_ptr<T>());
    });
  }
  if (!any_requires_grad({&logits, &targets, &w, &p})) return out;
  record(op, out, {logits, targets, w, p},
         [sx = SavedTensor(logits), sy = SavedTensor(targets), sw = SavedTensor(w), sp = SavedTensor(p), n,
          need_x = logits.requires_grad(), need_y = targets.requires_grad(), need_w = w.defined() && w.requires_grad(),
          need_p = p.defined() && p.requires_grad()](const Tensor& g) -> TensorList {
           const Tensor &x = sx.unpack(), &y = sy.unpack(), &w = sw.unpack(), &p = sp.unpack();
           if (need_w || need_p || any_requires_grad({&g, &x, &y})) {
             // Taped (or for the weights): the same formulas written with ops.
             const Tensor softplus_neg = softplus(-x);
             const Tensor c = p.defined() ? (p - 1.0) * y + 1.0 : Tensor();
             const Tensor gw = w.defined() ? g * w : g;
             Tensor dx, dy, dw, dp;
             if (need_x) dx = gw * ((1.0 - y) - (c.defined() ? c * sigmoid(-x) : sigmoid(-x)));
             if (need_y) dy = p.defined() ? gw * ((p - 1.0) * softplus_neg - x) : -(gw * x);
             if (need_w) dw = g * ((1.0 - y) * x + (c.defined() ? c * softplus_neg : softplus_neg));
             if (need_p) dp = gw * y * softplus_neg;
             return {dx, dy, dw, dp};
           }
           Tensor dx = need_x ? empty(x.shape(), x.dtype()) : Tensor();
           Tensor dy = need_y ? empty(x.shape(), x.dtype()) : Tensor();
           const Tensor gd = kernels::dense(g), xd = kernels::dense(x), yd = kernels::dense(y);
           const Tensor wd = w.defined() ? kernels::dense(w) : Tensor(),
                        pd = p.defined() ? kernels::dense(p) : Tensor();
           dispatch_floating(x.dtype(), "logistic_loss backward", [&](auto tag) {
             using T = decltype(tag);
             const kernels::LogisticLoss<T> f{xd.data_ptr<T>(), yd.data_ptr<T>(), data_or_null<T>(wd),
                                              data_or_null<T>(pd)};
             kernels::logistic_loss_backward<T>(f, gd.data_ptr<T>(), n, data_or_null<T>(dx), data_or_null<T>(dy));
           });
           return {dx, dy, Tensor(), Tensor()};
         });
  return out;
}

// ---------------------------------------------------------------- dropout

Tensor dropout(const Tensor& x, double p, bool training, Generator& gen) {
  if (!(p >= 0.0 && p <= 1.0)) {
    std::ostringstream message;
    message << "dropout: probability p must be in [0, 1], got " << p;
    throw ValueError(message.str());
  }
  if (x.dtype() != kBFloat16) dispatch_floating(x.dtype(), "dropout", [](auto) {});
  if (!training || p == 0.0) return x;
  if (x.dtype() == kBFloat16) return dropout(x.to(kFloat32), p, training, gen).to(kBFloat16);  // computed in float32
  // p == 1 keeps nothing; the scale is then irrelevant, and 0 avoids 1 / 0.
  const double scale = p < 1.0 ? 1.0 / (1.0 - p) : 0.0;
  Tensor keep = empty(x.shape(), kBool);  // keep: (x.shape), saved for backward (1 byte per element)
  Tensor out = empty(x.shape(), x.dtype());
  // Dropped entries are selected to 0 rather than multiplied by 0, so they are exactly 0 even
  // where x is inf or NaN.
  dispatch_floating(x.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    const Tensor xd = kernels::dense(x);
    kernels::dropout_forward<T>(xd.data_ptr<T>(), out.data_ptr<T>(), keep.data_ptr<bool>(), x.numel(), p,
                                static_cast<T>(scale), gen);
  });
  if (any_requires_grad({&x}))
    record("dropout", out, {x}, [keep, scale](const Tensor& g) -> TensorList {
      if (any_requires_grad({&g})) return {where(keep, g * scale, scalar_tensor(0.0, g.dtype()))};
      return {dispatch_floating(g.dtype(), "dropout backward", [&](auto tag) {
        using T = decltype(tag);
        const Tensor gd = kernels::dense(g);
        Tensor gx = empty(gd.shape(), gd.dtype());
        kernels::dropout_backward<T>(gd.data_ptr<T>(), keep.data_ptr<bool>(), static_cast<T>(scale), gx.data_ptr<T>(),
                                     gx.numel());
        return gx;
      })};
    });
  return out;
}

}  // namespace tapegrad
