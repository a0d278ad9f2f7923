#pragma once
// Vectorised loops over one contiguous row, shared by the fused kernels (softmax, layer_norm):
// xsimd batches for the body, a scalar loop for the tail.

#include <cstdint>

#include <xsimd/xsimd.hpp>

namespace tapegrad::kernels {

template <class T>
using Batch = xsimd::batch<T>;

template <class T>
constexpr std::int64_t kLanes = static_cast<std::int64_t>(Batch<T>::size);

// sum(x[0 .. n)).
template <class T>
T row_sum(const T* a, std::int64_t n) {
  Batch<T> acc(T(0));
  std::int64_t i = 0;
  for (; i + kLanes<T> <= n; i += kLanes<T>) acc += Batch<T>::load_unaligned(a + i);
  T total = xsimd::hadd(acc);
  for (; i < n; ++i) total += a[i];
  return total;
}

}  // namespace tapegrad::kernels
