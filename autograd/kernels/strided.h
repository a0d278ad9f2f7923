#pragma once
// Iteration over strided N-d layouts. Every elementwise kernel, copy and reduction goes
// through for_each_run: it merges axes that are contiguous for all operands (so a contiguous
// tensor is one run of numel elements), drops size-1 axes, and calls the body once per
// innermost run with each operand's offset and inner stride. The body's inner loop is where
// the work happens; with unit or zero strides the compiler vectorises it.

#include <array>
#include <cstdint>

#include "autograd/shape.h"
#include "autograd/tensor.h"

namespace tapegrad::kernels {

template <std::size_t N>
using Offsets = std::array<std::int64_t, N>;

// body(Offsets<N> offsets, int64 n, Offsets<N> inner_strides) for each innermost run.
template <std::size_t N, class Body>
void for_each_run(const Shape& shape, const std::array<Dims, N>& strides, Body&& body) {
  std::int64_t size[kMaxRank];
  std::int64_t stride[N][kMaxRank];
  int rank = 0;
  for (int d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) return;
    if (shape[d] == 1) continue;
    bool mergeable = rank > 0;
    for (std::size_t k = 0; k < N && mergeable; ++k)
      mergeable = stride[k][rank - 1] == strides[k][d] * shape[d];
    if (mergeable) {
      size[rank - 1] *= shape[d];
      for (std::size_t k = 0; k < N; ++k) stride[k][rank - 1] = strides[k][d];
      continue;
    }
    size[rank] = shape[d];
    for (std::size_t k = 0; k < N; ++k) stride[k][rank] = strides[k][d];
    ++rank;
  }
  Offsets<N> offsets{};
  Offsets<N> inner{};
  if (rank == 0) {
    body(offsets, std::int64_t{1}, inner);
    return;
  }
  const int last = rank - 1;
  for (std::size_t k = 0; k < N; ++k) inner[k] = stride[k][last];
  std::int64_t outer = 1;
  for (int d = 0; d < last; ++d) outer *= size[d];
  std::int64_t index[kMaxRank] = {};
  for (std::int64_t o = 0; o < outer; ++o) {
    body(offsets, size[last], inner);
    for (int d = last - 1; d >= 0; --d) {
      for (std::size_t k = 0; k < N; ++k) offsets[k] += stride[k][d];
      if (++index[d] < size[d]) break;
      for (std::size_t k = 0; k < N; ++k) offsets[k] -= stride[k][d] * size[d];
      index[d] = 0;
    }
  }
}

// The strides of t as seen through broadcasting to out_shape (0 along broadcast axes).
inline Dims broadcast_strides(const Shape& shape, const Dims& strides, const Shape& out_shape) {
  Dims result = Dims::filled(out_shape.size(), 0);
  const int shift = out_shape.size() - shape.size();
  for (int d = 0; d < shape.size(); ++d)
    result[d + shift] = shape[d] == 1 ? 0 : strides[d];
  return result;
}
inline Dims broadcast_strides(const Tensor& t, const Shape& out_shape) {
  return broadcast_strides(t.shape(), t.strides(), out_shape);
}

// dst[i] = src[i] over a shape, any strides; element type T for both.
template <class T>
void copy_strided(const T* src, const Dims& src_strides, T* dst, const Dims& dst_strides, const Shape& shape) {
  for_each_run<2>(shape, {dst_strides, src_strides}, [&](Offsets<2> off, std::int64_t n, Offsets<2> st) {
    T* d = dst + off[0];
    const T* s = src + off[1];
    if (st[0] == 1 && st[1] == 1) {
      for (std::int64_t i = 0; i < n; ++i) d[i] = s[i];
    } else {
      for (std::int64_t i = 0; i < n; ++i) d[i * st[0]] = s[i * st[1]];
    }
  });
}

}  // namespace tapegrad::kernels
