#pragma once
// Rows of contiguous buffers: a tensor seen as (outer, n, inner) around one axis, and the
// vectorised loops over one row shared by the row kernels (softmax.h, norm.h, reduce.h): xsimd
// batches for the body, a scalar loop for the tail (the compiler does not vectorise float
// reductions or std::exp by itself).
//
// The row and op kernels of this directory's headers (rows, softmax, reduce, norm, dropout,
// unary, index) are static: each op's translation unit compiles its own copy, which GCC inlines and
// schedules in the op as it did when these loops lived in the ops files. As external templates
// (one shared copy) they were compiled differently: argmax's row loop, for one, took three times
// as long.

#include <cmath>
#include <cstdint>
#include <limits>

#include <xsimd/xsimd.hpp>

#include "tapegrad/autograd/shape.h"

namespace tapegrad::kernels {

template <class T>
using Batch = xsimd::batch<T>;

template <class T>
constexpr std::int64_t kLanes = static_cast<std::int64_t>(Batch<T>::size);

// A contiguous tensor seen as (outer, n, inner) around one axis: inner == 1 when the axis is
// the last, so each of the outer rows of n values is contiguous.
struct AxisSplit {
  std::int64_t outer = 1;
  std::int64_t n = 1;  // the axis' length
  std::int64_t inner = 1;
};

static inline AxisSplit split_at(const Shape& shape, int axis) {
  AxisSplit s;
  if (shape.size() == 0) return s;  // a scalar is one row of length 1
  for (int d = 0; d < axis; ++d) s.outer *= shape[d];
  s.n = shape[axis];
  for (int d = axis + 1; d < shape.size(); ++d) s.inner *= shape[d];
  return s;
}

// sum(x[0 .. n)).
template <class T>
static T row_sum(const T* a, std::int64_t n) {
  Batch<T> acc(T(0));
  std::int64_t i = 0;
  for (; i + kLanes<T> <= n; i += kLanes<T>) acc += Batch<T>::load_unaligned(a + i);
  T total = xsimd::hadd(acc);
  for (; i < n; ++i) total += a[i];
  return total;
}

// Asks the caches for the n values at `row`, a 64-byte line at a time (for writing with ForWrite): a
// row of a table larger than the caches, wanted a few iterations on.
template <bool ForWrite = false, class T>
static void prefetch_row(const T* row, std::int64_t n) {
  const char* bytes = reinterpret_cast<const char*>(row);
  for (std::int64_t byte = 0; byte < n * static_cast<std::int64_t>(sizeof(T)); byte += 64)
    __builtin_prefetch(bytes + byte, ForWrite ? 1 : 0);
}

// sum(a[i] * b[i]).
template <class T>
static T row_dot(const T* a, const T* b, std::int64_t n) {
  Batch<T> acc(T(0));
  std::int64_t i = 0;
  for (; i + kLanes<T> <= n; i += kLanes<T>) acc += Batch<T>::load_unaligned(a + i) * Batch<T>::load_unaligned(b + i);
  T total = xsimd::hadd(acc);
  for (; i < n; ++i) total += a[i] * b[i];
  return total;
}

// max(x[0..n)); -inf for an empty row.
template <class T>
static T row_max(const T* x, std::int64_t n) {
  T best = -std::numeric_limits<T>::infinity();
  std::int64_t i = 0;
  if (n >= kLanes<T>) {
    Batch<T> acc = Batch<T>::load_unaligned(x);
    for (i = kLanes<T>; i + kLanes<T> <= n; i += kLanes<T>) acc = xsimd::max(acc, Batch<T>::load_unaligned(x + i));
    T lanes[kLanes<T>];
    acc.store_unaligned(lanes);
    for (T v : lanes) best = v > best ? v : best;
  }
  for (; i < n; ++i) best = x[i] > best ? x[i] : best;
  return best;
}

// out[i] = exp(x[i] - shift); returns the sum of the out[i]. out may be null (sum only).
template <class T>
static T exp_shifted_sum(const T* x, T shift, T* out, std::int64_t n) {
  const Batch<T> s(shift);
  Batch<T> acc(T(0));
  std::int64_t i = 0;
  for (; i + kLanes<T> <= n; i += kLanes<T>) {
    const Batch<T> e = xsimd::exp(Batch<T>::load_unaligned(x + i) - s);
    if (out) e.store_unaligned(out + i);
    acc += e;
  }
  T total = xsimd::hadd(acc);
  for (; i < n; ++i) {
    const T e = std::exp(x[i] - shift);
    if (out) out[i] = e;
    total += e;
  }
  return total;
}

}  // namespace tapegrad::kernels
