#pragma once
// The gate math of one recurrent step, for one row of the batch: forward and backward of the
// Elman (tanh/ReLU), LSTM and GRU cells, vectorised with xsimd (a scalar tail with the same
// formulas). The fused layer op that runs them step by step, with the matrix products between,
// is in ops/recurrent.cpp. Static, see rows.h.
//
// Per row, gi is the input's contribution to the pre-activations (x W_ih^T + b_ih) and gh the
// state's (h W_hh^T + b_hh), in PyTorch's gate order:
//   Elman (H):    h' = act(gi + gh)                                   act = tanh or relu
//   LSTM (4H):    i, f, g, o = sigmoid, sigmoid, tanh, sigmoid of (gi + gh) in four blocks
//                 c' = f c + i g,  h' = o tanh(c')
//   GRU (3H):     r = sigmoid(gi_r + gh_r),  z = sigmoid(gi_z + gh_z),
//                 n = tanh(gi_n + r gh_n),   h' = (1 - z) n + z h
// Forward keeps, per row, what backward needs: the Elman output, the LSTM's four activated gates,
// the GRU's r, z, n and gh_n.

#include <cmath>
#include <cstdint>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "tapegrad/autograd/kernels/rows.h"

namespace tapegrad::kernels {

// body(V{}, i) over [0, n): V = xsimd batches of T while a whole batch fits, then V = T.
template <class T, class Body>
static inline void over_lanes(std::int64_t n, Body&& body) {
  std::int64_t i = 0;
  for (; i + kLanes<T> <= n; i += kLanes<T>) body(Batch<T>(), i);
  for (; i < n; ++i) body(T(), i);
}

template <class V, class T>
static inline V load_lanes(const T* p) {
  if constexpr (std::is_same_v<V, T>) return *p;
  else return V::load_unaligned(p);
}

template <class V, class T>
static inline void store_lanes(T* p, const V& v) {
  if constexpr (std::is_same_v<V, T>) *p = v;
  else v.store_unaligned(p);
}

template <class V>
static inline V sigmoid_lanes(const V& x) {
  using std::exp;
  return V(1) / (V(1) + exp(-x));
}

template <class V>
static inline V tanh_lanes(const V& x) {
  using std::tanh;
  return tanh(x);
}

// --- Elman: h' = act(gi + gh). out: h' (H).
template <class T>
static void elman_forward_row(const T* gi, const T* gh, bool relu, std::int64_t H, T* out) {
  over_lanes<T>(H, [&](auto v, std::int64_t j) {
    using V = decltype(v);
    const V a = load_lanes<V>(gi + j) + load_lanes<V>(gh + j);
    if (relu) {
      using std::max;
      using xsimd::max;
      store_lanes(out + j, V(max(a, V(T(0)))));
    } else {
      store_lanes(out + j, tanh_lanes(a));
    }
  });
}

// From dh (the gradient reaching h'), the pre-activations' gradient da (H), given h' (H).
template <class T>
static void elman_backward_row(const T* h_new, const T* dh, bool relu, std::int64_t H, T* da) {
  for (std::int64_t j = 0; j < H; ++j)
    da[j] = relu ? (h_new[j] > T(0) ? dh[j] : T(0)) : dh[j] * (T(1) - h_new[j] * h_new[j]);
}

// --- LSTM. gates: (4H) activated i, f, g, o out; c: (H) in; c_new, h_new: (H) out.
template <class T>
static void lstm_forward_row(const T* gi, const T* gh, const T* c, std::int64_t H, T* gates, T* c_new, T* h_new) {
  over_lanes<T>(H, [&](auto v, std::int64_t j) {
    using V = decltype(v);
    const V i = sigmoid_lanes(load_lanes<V>(gi + j) + load_lanes<V>(gh + j));
    const V f = sigmoid_lanes(load_lanes<V>(gi + H + j) + load_lanes<V>(gh + H + j));
    const V g = tanh_lanes(load_lanes<V>(gi + 2 * H + j) + load_lanes<V>(gh + 2 * H + j));
    const V o = sigmoid_lanes(load_lanes<V>(gi + 3 * H + j) + load_lanes<V>(gh + 3 * H + j));
    const V cn = f * load_lanes<V>(c + j) + i * g;
    store_lanes(gates + j, i);
    store_lanes(gates + H + j, f);
    store_lanes(gates + 2 * H + j, g);
    store_lanes(gates + 3 * H + j, o);
    store_lanes(c_new + j, cn);
    store_lanes(h_new + j, V(o * tanh_lanes(cn)));
  });
}

// From dh and dc (the gradients reaching h' and c'), the pre-activations' gradient da (4H) and
// dc_prev (H), given the activated gates, c and c'. dc_prev may be dc.
template <class T>
static void lstm_backward_row(const T* gates, const T* c, const T* c_new, const T* dh, const T* dc, std::int64_t H,
                              T* da, T* dc_prev) {
  over_lanes<T>(H, [&](auto v, std::int64_t j) {
    using V = decltype(v);
    const V one(T(1));
    const V i = load_lanes<V>(gates + j), f = load_lanes<V>(gates + H + j);
    const V g = load_lanes<V>(gates + 2 * H + j), o = load_lanes<V>(gates + 3 * H + j);
    const V tc = tanh_lanes(load_lanes<V>(c_new + j));
    const V dhv = load_lanes<V>(dh + j);
    const V dct = load_lanes<V>(dc + j) + dhv * o * (one - tc * tc);
    store_lanes(da + j, V(dct * g * i * (one - i)));
    store_lanes(da + H + j, V(dct * load_lanes<V>(c + j) * f * (one - f)));
    store_lanes(da + 2 * H + j, V(dct * i * (one - g * g)));
    store_lanes(da + 3 * H + j, V(dhv * tc * o * (one - o)));
    store_lanes(dc_prev + j, V(dct * f));
  });
}

// --- GRU. h: (H) in; saved: (4H) r, z, n, gh_n out; h_new: (H) out.
template <class T>
static void gru_forward_row(const T* gi, const T* gh, const T* h, std::int64_t H, T* saved, T* h_new) {
  over_lanes<T>(H, [&](auto v, std::int64_t j) {
    using V = decltype(v);
    const V r = sigmoid_lanes(load_lanes<V>(gi + j) + load_lanes<V>(gh + j));
    const V z = sigmoid_lanes(load_lanes<V>(gi + H + j) + load_lanes<V>(gh + H + j));
    const V hn = load_lanes<V>(gh + 2 * H + j);
    const V n = tanh_lanes(load_lanes<V>(gi + 2 * H + j) + r * hn);
    store_lanes(saved + j, r);
    store_lanes(saved + H + j, z);
    store_lanes(saved + 2 * H + j, n);
    store_lanes(saved + 3 * H + j, hn);
    store_lanes(h_new + j, V(n + z * (load_lanes<V>(h + j) - n)));
  });
}

// From dh (the gradient reaching h'), the gradients of gi and gh (3H each) and the direct part of
// dh_prev (H; the part through gh is added by the caller's product with W_hh).
template <class T>
static void gru_backward_row(const T* saved, const T* h, const T* dh, std::int64_t H, T* dgi, T* dgh, T* dh_prev) {
  over_lanes<T>(H, [&](auto v, std::int64_t j) {
    using V = decltype(v);
    const V one(T(1));
    const V r = load_lanes<V>(saved + j), z = load_lanes<V>(saved + H + j);
    const V n = load_lanes<V>(saved + 2 * H + j), hn = load_lanes<V>(saved + 3 * H + j);
    const V dhv = load_lanes<V>(dh + j);
    const V dan = dhv * (one - z) * (one - n * n);
    const V dar = dan * hn * r * (one - r);
    const V daz = dhv * (load_lanes<V>(h + j) - n) * z * (one - z);
    store_lanes(dgi + j, dar);
    store_lanes(dgh + j, dar);
    store_lanes(dgi + H + j, daz);
    store_lanes(dgh + H + j, daz);
    store_lanes(dgi + 2 * H + j, dan);
    store_lanes(dgh + 2 * H + j, V(dan * r));
    store_lanes(dh_prev + j, V(dhv * z));
  });
}

}  // namespace tapegrad::kernels
