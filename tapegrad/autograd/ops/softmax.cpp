// The softmax family along one axis: softmax, log_softmax and causal_softmax, each followed
// by its backward. The row kernels, and how they stay stable, are in kernels/softmax.h.

#include <string>

#include "tapegrad/autograd/autocast.h"
#include "tapegrad/autograd/kernels/elementwise.h"
#include "tapegrad/autograd/kernels/softmax.h"
#include "tapegrad/autograd/ops.h"

namespace tapegrad {

namespace {

using kernels::AxisSplit;

// The backward written with ops, for a taped backward: softmax y (g - sum(g y)), log_softmax
// g - exp(y) sum(g), along `axis`.
Tensor softmax_backward_taped(const Tensor& g, const Tensor& y, int axis, bool log) {
  if (log) return g - exp(y) * sum(g, {axis}, /*keepdim=*/true);
  return y * (g - sum(g * y, {axis}, /*keepdim=*/true));
}

template <bool kLog>
Tensor softmax_family(const Tensor& x, std::int64_t axis, const char* op) {
  const int a = normalize_axis(axis, x.dim(), op);
  const AxisSplit split = kernels::split_at(x.shape(), a);
  Tensor out = dispatch_floating(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    Tensor y = empty(x.shape(), x.dtype());
    if (y.numel() > 0) kernels::softmax_forward<T, kLog>(kernels::dense(x).data_ptr<T>(), y.data_ptr<T>(), split);
    return y;
  });
  if (any_requires_grad({&x}))
    record(op, out, {x}, [saved = SavedTensor::output(out), split, a](const Tensor& g) -> TensorList {
      const Tensor& y = saved.unpack();
      if (any_requires_grad({&g, &y})) return {softmax_backward_taped(g, y, a, kLog)};
      return {dispatch_floating(y.dtype(), "softmax backward", [&](auto tag) {
        using T = decltype(tag);
        Tensor gx = empty(y.shape(), y.dtype());
        if (gx.numel() > 0)
          kernels::softmax_backward<T, kLog>(kernels::dense(g).data_ptr<T>(), y.data_ptr<T>(), gx.data_ptr<T>(), split);
        return gx;
      })};
    });
  return out;
}

}  // namespace

Tensor softmax(const Tensor& x, std::int64_t axis) {
  if (x.dtype() == kBFloat16)
    return detail::precision_result(softmax(x.to(kFloat32), axis), kBFloat16);  // float32 policy (autocast.h)
  return softmax_family<false>(x, axis, "softmax");
}

// causal_softmax: each row i of the trailing (Tq, Tk) matrices is softmaxed over its first
// min(Tk, i + offset + 1) entries and the rest are written as 0, in one pass per row. The
// same values as softmax(masked_fill(x, key > query + offset, -inf)), without building the
// mask, filling the scores or exponentiating the masked entries. The backward is softmax's:
// y = 0 at the excluded entries makes their gradient 0.
Tensor causal_softmax(const Tensor& x, std::int64_t offset) {
  if (x.dtype() == kBFloat16)
    return detail::precision_result(causal_softmax(x.to(kFloat32), offset), kBFloat16);  // float32 policy (autocast.h)
  if (x.dim() < 2) throw ShapeError("causal_softmax: expected (..., Tq, Tk) scores, got shape " + x.shape().str());
  const std::int64_t tq = x.shape()[x.dim() - 2], tk = x.shape()[x.dim() - 1];
  if (offset < 0)
    throw ValueError(
        message("causal_softmax: offset must be >= 0 (every query sees at least its own key), got ", offset));
  const AxisSplit split = kernels::split_at(x.shape(), x.dim() - 1);  // rows: (outer = ... * Tq, n = Tk)
  Tensor out = dispatch_floating(x.dtype(), "causal_softmax", [&](auto tag) {
    using T = decltype(tag);
    Tensor y = empty(x.shape(), x.dtype());
    if (y.numel() == 0) return y;
    kernels::causal_softmax_forward<T>(kernels::dense(x).data_ptr<T>(), y.data_ptr<T>(), split.outer, tq, tk, offset);
    return y;
  });
  if (any_requires_grad({&x}))
    record("causal_softmax", out, {x}, [saved = SavedTensor::output(out), split](const Tensor& g) -> TensorList {
      const Tensor& y = saved.unpack();
      if (any_requires_grad({&g, &y})) return {softmax_backward_taped(g, y, y.dim() - 1, false)};
      return {dispatch_floating(y.dtype(), "causal_softmax backward", [&](auto tag) {
        using T = decltype(tag);
        Tensor gx = empty(y.shape(), y.dtype());
        if (gx.numel() > 0)
          kernels::softmax_backward<T, false>(kernels::dense(g).data_ptr<T>(), y.data_ptr<T>(), gx.data_ptr<T>(),
                                              split);
        return gx;
      })};
    });
  return out;
}

Tensor log_softmax(const Tensor& x, std::int64_t axis) {
  if (x.dtype() == kBFloat16)
    return detail::precision_result(log_softmax(x.to(kFloat32), axis), kBFloat16);  // float32 policy (autocast.h)
  return softmax_family<true>(x, axis, "log_softmax");
}

}  // namespace tapegrad
