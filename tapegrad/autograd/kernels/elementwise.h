#pragma once
// Elementwise kernels over strided, broadcast operands. Outputs are new contiguous tensors.
// map, map2 and map3 take a scalar functor f, inlined into the inner loop; unit-stride and
// broadcast-scalar runs get their own loops so the compiler can vectorise them. Large outputs
// are cut into chunks over the thread pool (parallel_for_each_run); each element is computed the
// same way whatever the cut. The transcendental maps and GELU, vectorised with xsimd, are in
// unary.h.

#include <cstdint>

#include "tapegrad/autograd/kernels/strided.h"
#include "tapegrad/autograd/tensor.h"

namespace tapegrad::kernels {

// x itself when contiguous, else a contiguous copy (not recorded on the tape).
Tensor dense(const Tensor& x);

// out[i] = f(x[i]); out has dtype R, x has dtype T.
template <class R, class T, class F>
Tensor map(const Tensor& x, F f) {
  Tensor out = empty(x.shape(), dtype_of<R>());
  const T* px = x.data_ptr<T>();
  R* po = out.data_ptr<R>();
  parallel_for_each_run<2>(x.shape(), {out.strides(), x.strides()}, [&](Offsets<2> off, std::int64_t n, Offsets<2> st) {
    R* o = po + off[0];
    const T* a = px + off[1];
    if (st[1] == 1)
      for (std::int64_t i = 0; i < n; ++i) o[i] = f(a[i]);
    else
      for (std::int64_t i = 0; i < n; ++i) o[i * st[0]] = f(a[i * st[1]]);
  });
  return out;
}

// out[i] = f(a[i], b[i]) with a and b broadcast to out_shape.
template <class R, class T, class U = T, class F>
Tensor map2(const Tensor& a, const Tensor& b, const Shape& out_shape, F f) {
  Tensor out = empty(out_shape, dtype_of<R>());
  const T* pa = a.data_ptr<T>();
  const U* pb = b.data_ptr<U>();
  R* po = out.data_ptr<R>();
  parallel_for_each_run<3>(out_shape, {out.strides(), broadcast_strides(a, out_shape), broadcast_strides(b, out_shape)},
                           [&](Offsets<3> off, std::int64_t n, Offsets<3> st) {
                             R* o = po + off[0];
                             const T* x = pa + off[1];
                             const U* y = pb + off[2];
                             if (st[1] == 1 && st[2] == 1) {
                               for (std::int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
                             } else if (st[1] == 1 && st[2] == 0) {
                               const U yv = *y;
                               for (std::int64_t i = 0; i < n; ++i) o[i] = f(x[i], yv);
                             } else if (st[1] == 0 && st[2] == 1) {
                               const T xv = *x;
                               for (std::int64_t i = 0; i < n; ++i) o[i] = f(xv, y[i]);
                             } else {
                               for (std::int64_t i = 0; i < n; ++i) o[i * st[0]] = f(x[i * st[1]], y[i * st[2]]);
                             }
                           });
  return out;
}

// out[i] = f(a[i], b[i], c[i]) with all three broadcast to out_shape.
template <class R, class T, class U, class V, class F>
Tensor map3(const Tensor& a, const Tensor& b, const Tensor& c, const Shape& out_shape, F f) {
  Tensor out = empty(out_shape, dtype_of<R>());
  const T* pa = a.data_ptr<T>();
  const U* pb = b.data_ptr<U>();
  const V* pc = c.data_ptr<V>();
  R* po = out.data_ptr<R>();
  parallel_for_each_run<4>(out_shape,
                           {out.strides(), broadcast_strides(a, out_shape), broadcast_strides(b, out_shape),
                            broadcast_strides(c, out_shape)},
                           [&](Offsets<4> off, std::int64_t n, Offsets<4> st) {
                             R* o = po + off[0];
                             const T* x = pa + off[1];
                             const U* y = pb + off[2];
                             const V* z = pc + off[3];
                             if (st[1] == 1 && st[2] == 1 && st[3] == 1)
                               for (std::int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i], z[i]);
                             else
                               for (std::int64_t i = 0; i < n; ++i)
                                 o[i * st[0]] = f(x[i * st[1]], y[i * st[2]], z[i * st[3]]);
                           });
  return out;
}

// out = f(x) for floating x (dtype checked under op's name), f returning x's type; a bfloat16
// element is computed in float32 and rounded. This and backward_map are static, compiled in each
// ops file that uses them (see rows.h).
template <class F>
static Tensor floating_map(const Tensor& x, const char* op, F f) {
  return dispatch_floating_or_bf16(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    return map<T, T>(x, [f](T v) { return static_cast<T>(f(v)); });
  });
}

// out = f(x) in int64 for an int64 or Bool x (Bool read as 0 and 1), f taking and returning
// uint64 so that the arithmetic wraps around as torch's int64 does, without undefined behaviour.
template <class F>
static Tensor integer_map(const Tensor& x, F f) {
  return map<std::int64_t, std::int64_t>(
      x.to(DType::Int64), [f](std::int64_t v) { return static_cast<std::int64_t>(f(static_cast<std::uint64_t>(v))); });
}

// grad_in = f(g, saved) where g and saved have the same shape (unary backward formulas).
template <class F>
static Tensor backward_map(const Tensor& g, const Tensor& saved, F f) {
  return dispatch_floating_or_bf16(g.dtype(), "backward", [&](auto tag) {
    using T = decltype(tag);
    return map2<T, T>(g, saved, g.shape(), [f](T gv, T s) { return static_cast<T>(f(gv, s)); });
  });
}

}  // namespace tapegrad::kernels
