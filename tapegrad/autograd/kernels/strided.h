#pragma once
// Iteration over strided N-d layouts, and the in-place kernels built on it (copy, fill, scale,
// scaled add). Every elementwise kernel, copy and reduction goes through for_each_run: it merges
// axes that are contiguous for all operands (so a contiguous tensor is one run of numel
// elements), drops size-1 axes, and calls the body once per innermost run with each operand's
// offset and inner stride. The body's inner loop is where
// the work happens; with unit or zero strides the compiler vectorises it.

#include <algorithm>
#include <array>
#include <cstdint>

#include "tapegrad/autograd/parallel.h"
#include "tapegrad/autograd/shape.h"
#include "tapegrad/autograd/tensor.h"

namespace tapegrad::kernels {

template <std::size_t N>
using Offsets = std::array<std::int64_t, N>;

// The iteration space for_each_run walks: size-1 axes dropped and axes that are contiguous for
// every operand merged, the last remaining axis being the inner run.
template <std::size_t N>
struct RunLayout {
  int rank = 0;        // merged axes; 0 for a single element
  bool empty = false;  // some axis has size 0
  std::int64_t size[kMaxRank];
  std::int64_t stride[N][kMaxRank];

  std::int64_t numel() const {
    if (empty) return 0;
    std::int64_t n = 1;
    for (int d = 0; d < rank; ++d) n *= size[d];
    return n;
  }
};

template <std::size_t N>
RunLayout<N> run_layout(const Shape& shape, const std::array<Dims, N>& strides) {
  RunLayout<N> l;
  for (int d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) {
      l.empty = true;
      return l;
    }
    if (shape[d] == 1) continue;
    bool mergeable = l.rank > 0;
    for (std::size_t k = 0; k < N && mergeable; ++k) mergeable = l.stride[k][l.rank - 1] == strides[k][d] * shape[d];
    if (mergeable) {
      l.size[l.rank - 1] *= shape[d];
      for (std::size_t k = 0; k < N; ++k) l.stride[k][l.rank - 1] = strides[k][d];
      continue;
    }
    l.size[l.rank] = shape[d];
    for (std::size_t k = 0; k < N; ++k) l.stride[k][l.rank] = strides[k][d];
    ++l.rank;
  }
  return l;
}

// body(offsets, n, inner_strides) over the elements [first, last) of the layout, in order, one
// call per (part of an) inner run.
template <std::size_t N, class Body>
void for_runs(const RunLayout<N>& l, std::int64_t first, std::int64_t last, Body& body) {
  Offsets<N> offsets{};
  Offsets<N> inner{};
  if (l.empty || first >= last) return;
  if (l.rank == 0) {
    body(offsets, std::int64_t{1}, inner);
    return;
  }
  const int lastd = l.rank - 1;
  const std::int64_t run = l.size[lastd];
  for (std::size_t k = 0; k < N; ++k) inner[k] = l.stride[k][lastd];
  std::int64_t index[kMaxRank] = {};
  std::int64_t at = 0;  // position within the current run
  if (first > 0) {
    at = first % run;
    std::int64_t rest = first / run;  // the run's index, unravelled over the outer axes
    for (int d = lastd - 1; d >= 0; --d) {
      index[d] = rest % l.size[d];
      rest /= l.size[d];
      for (std::size_t k = 0; k < N; ++k) offsets[k] += index[d] * l.stride[k][d];
    }
  }
  std::int64_t remaining = last - first;
  for (;;) {
    const std::int64_t n = std::min(run - at, remaining);
    Offsets<N> start = offsets;
    for (std::size_t k = 0; k < N; ++k) start[k] += at * inner[k];
    body(start, n, inner);
    remaining -= n;
    if (remaining == 0) return;
    at = 0;
    for (int d = lastd - 1; d >= 0; --d) {
      for (std::size_t k = 0; k < N; ++k) offsets[k] += l.stride[k][d];
      if (++index[d] < l.size[d]) break;
      for (std::size_t k = 0; k < N; ++k) offsets[k] -= l.stride[k][d] * l.size[d];
      index[d] = 0;
    }
  }
}

// body(Offsets<N> offsets, int64 n, Offsets<N> inner_strides) for each innermost run.
template <std::size_t N, class Body>
void for_each_run(const Shape& shape, const std::array<Dims, N>& strides, Body&& body) {
  const RunLayout<N> l = run_layout(shape, strides);
  for_runs(l, 0, l.numel(), body);
}

// Elements an elementwise chunk should hold before it goes to another thread: about 5 us of
// the cheapest maps (an add), several times the cost of handing a chunk over.
constexpr std::int64_t kElementwiseGrain = 32768;

// How many rows (or columns) of n elements a chunk of a row- (column-) parallel kernel should
// hold: parallel_for's grain.
inline std::int64_t row_grain(std::int64_t n) {
  return std::max<std::int64_t>(1, kElementwiseGrain / std::max<std::int64_t>(n, 1));
}

// parallel_for over [0, n) with every chunk boundary on a multiple of kVectorBlock elements, for
// kernels whose vector body and scalar tail round differently (xsimd's exp, erf, tanh): each
// element then takes the same path, and gets the same bits, whatever the thread count.
constexpr std::int64_t kVectorBlock = 64;

template <class F>
void parallel_for_blocks(std::int64_t n, std::int64_t grain, F&& fn) {
  const std::int64_t blocks = (n + kVectorBlock - 1) / kVectorBlock;
  parallel_for(0, blocks, std::max<std::int64_t>(1, grain / kVectorBlock), [&](std::int64_t first, std::int64_t last) {
    fn(first * kVectorBlock, std::min(n, last * kVectorBlock));
  });
}

// for_each_run with the elements cut into chunks over the thread pool (parallel.h); a run may be
// cut between chunks. Only for bodies that write each element of a distinct output location.
template <std::size_t N, class Body>
void parallel_for_each_run(const Shape& shape, const std::array<Dims, N>& strides, Body&& body,
                           std::int64_t grain = kElementwiseGrain) {
  const RunLayout<N> l = run_layout(shape, strides);
  parallel_for(0, l.numel(), grain, [&](std::int64_t lo, std::int64_t hi) { for_runs(l, lo, hi, body); });
}

// The strides of t as seen through broadcasting to out_shape (0 along broadcast axes).
inline Dims broadcast_strides(const Shape& shape, const Dims& strides, const Shape& out_shape) {
  Dims result = Dims::filled(out_shape.size(), 0);
  const int shift = out_shape.size() - shape.size();
  for (int d = 0; d < shape.size(); ++d) result[d + shift] = shape[d] == 1 ? 0 : strides[d];
  return result;
}
inline Dims broadcast_strides(const Tensor& t, const Shape& out_shape) {
  return broadcast_strides(t.shape(), t.strides(), out_shape);
}

// dst[i] = src[i] over a shape, any strides; element type T for both.
template <class T>
void copy_strided(const T* src, const Dims& src_strides, T* dst, const Dims& dst_strides, const Shape& shape) {
  parallel_for_each_run<2>(shape, {dst_strides, src_strides}, [&](Offsets<2> off, std::int64_t n, Offsets<2> st) {
    T* d = dst + off[0];
    const T* s = src + off[1];
    if (st[0] == 1 && st[1] == 1) {
      for (std::int64_t i = 0; i < n; ++i) d[i] = s[i];
    } else {
      for (std::int64_t i = 0; i < n; ++i) d[i * st[0]] = s[i * st[1]];
    }
  });
}

// The in-place kernels below are static, like the row kernels (see rows.h): each is compiled in
// the file of the Tensor method that calls it.

// dst[i] = v over a shape, any strides.
template <class T>
static void fill_strided(T* dst, const Dims& strides, const Shape& shape, T v) {
  parallel_for_each_run<1>(shape, {strides}, [&](Offsets<1> off, std::int64_t n, Offsets<1> st) {
    T* p = dst + off[0];
    for (std::int64_t i = 0; i < n; ++i) p[i * st[0]] = v;
  });
}

// dst[i] *= f over a shape, any strides.
template <class T>
static void scale_strided(T* dst, const Dims& strides, const Shape& shape, T f) {
  parallel_for_each_run<1>(shape, {strides}, [&](Offsets<1> off, std::int64_t n, Offsets<1> st) {
    T* p = dst + off[0];
    for (std::int64_t i = 0; i < n; ++i) p[i * st[0]] *= f;
  });
}

// dst[i] += a * src[i] over n contiguous elements: gradient accumulation, optimiser steps.
template <class T>
static void add_scaled(T* dst, const T* src, T a, std::int64_t n) {
  parallel_for(0, n, kElementwiseGrain, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; ++i) dst[i] += a * src[i];
  });
}

// dst[i] += a * src[i] over a shape, any strides (src's may be broadcast_strides, 0 on
// broadcast axes).
template <class T>
static void add_scaled_strided(T* dst, const Dims& dst_strides, const T* src, const Dims& src_strides,
                               const Shape& shape, T a) {
  parallel_for_each_run<2>(shape, {dst_strides, src_strides}, [&](Offsets<2> off, std::int64_t n, Offsets<2> st) {
    T* d = dst + off[0];
    const T* s = src + off[1];
    if (st[0] == 1 && st[1] == 1)
      for (std::int64_t i = 0; i < n; ++i) d[i] += a * s[i];
    else
      for (std::int64_t i = 0; i < n; ++i) d[i * st[0]] += a * s[i * st[1]];
  });
}

}  // namespace tapegrad::kernels
