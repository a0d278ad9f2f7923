// Reductions over any set of axes (sum, mean, max, min, var, argmax, argmin, logsumexp) and
// the softmax family along one axis.

#include <cmath>
#include <limits>
#include <string>

#include "autograd/kernels/elementwise.h"
#include "autograd/kernels/strided.h"
#include "autograd/ops.h"

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

// Sum over the reduced axes into a new tensor of the keepdim shape.
template <class T>
Tensor sum_kernel(const Tensor& x, const ReducedAxes& r) {
  Tensor out = zeros(r.kept_shape, x.dtype());
  T* po = out.data_ptr<T>();
  const T* px = x.data_ptr<T>();
  kernels::for_each_run<2>(x.shape(), {reduced_strides(r), x.strides()},
                           [&](kernels::Offsets<2> off, std::int64_t n, kernels::Offsets<2> st) {
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
                           });
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

}  // namespace tapegrad
