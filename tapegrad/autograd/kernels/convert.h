#pragma once
// Dense conversions between float32 and bfloat16, the casts autocast inserts around every product.
// Written as branch-free loops over the bit patterns, which the compiler vectorises (the scalar
// BFloat16 constructor's early return for NaN keeps a per-element loop scalar), and split over the
// thread pool. The bits are those of BFloat16's own conversions: round to nearest even, NaN to
// 0x7FC0, subnormals rounded like normals.

#include <cstdint>

#include "tapegrad/autograd/bfloat16.h"

namespace tapegrad::kernels {

// dst[i] = BFloat16(src[i]) for i < n.
void round_to_bfloat16(const float* src, BFloat16* dst, std::int64_t n);
// dst[i] = float(src[i]) for i < n (exact).
void widen_bfloat16(const BFloat16* src, float* dst, std::int64_t n);
// The same two on the calling thread alone, for callers that split their work over the pool
// themselves (and convert a cache-sized chunk at a time around a float32 kernel).
void round_to_bfloat16_serial(const float* src, BFloat16* dst, std::int64_t n);
void widen_bfloat16_serial(const BFloat16* src, float* dst, std::int64_t n);

}  // namespace tapegrad::kernels
