#pragma once
// dropout's kernels on contiguous buffers: the forward draws the keep mask from a generator,
// the backward applies it. The op is in ops/nn.cpp. Static, see rows.h.

#include <cmath>
#include <cstdint>

#include "tapegrad/autograd/generator.h"

namespace tapegrad::kernels {

// y = keep ? x * scale : 0, drawing keep from gen. Each 64-bit draw gives two 32-bit uniforms
// (half the generator calls; 2^-32 resolution is far finer than any p), and element i uses
// the draws in row-major order, so a seed fixes the mask.
template <class T>
static void dropout_forward(const T* x, T* y, bool* keep, std::int64_t n, double p, T scale, Generator& gen) {
  // x, y, keep: (n)
  // keep iff u32 / 2^32 >= p, i.e. u32 >= ceil(p 2^32); p == 1 gives 2^32, which no u32 reaches.
  const std::uint64_t threshold = static_cast<std::uint64_t>(std::ceil(p * 4294967296.0));
  std::int64_t i = 0;
  for (; i + 2 <= n; i += 2) {
    const std::uint64_t bits = gen.next_u64();
    keep[i] = (bits & 0xffffffffu) >= threshold;
    keep[i + 1] = (bits >> 32) >= threshold;
    y[i] = keep[i] ? x[i] * scale : T(0);
    y[i + 1] = keep[i + 1] ? x[i + 1] * scale : T(0);
  }
  if (i < n) {
    keep[i] = (gen.next_u64() & 0xffffffffu) >= threshold;
    y[i] = keep[i] ? x[i] * scale : T(0);
  }
}

// gx = keep ? g * scale : 0.
template <class T>
static void dropout_backward(const T* g, const bool* keep, T scale, T* gx, std::int64_t n) {
  // g, keep, gx: (n)
  for (std::int64_t i = 0; i < n; ++i) gx[i] = keep[i] ? g[i] * scale : T(0);
}

}  // namespace tapegrad::kernels
