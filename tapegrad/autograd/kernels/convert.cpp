#include "tapegrad/autograd/kernels/convert.h"

#include <cstring>

#include "tapegrad/autograd/parallel.h"

namespace tapegrad::kernels {

namespace {

// Elements per chunk of the pool: below two of these a conversion runs on the calling thread.
constexpr std::int64_t kConvertGrain = 32768;

}  // namespace

void round_to_bfloat16_serial(const float* src, BFloat16* dst, std::int64_t n) {
  static_assert(sizeof(float) == sizeof(std::uint32_t));
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint32_t u;
    std::memcpy(&u, src + i, sizeof u);
    // As BFloat16::round_bits: 0x7FFF plus the kept half's lowest bit rounds to nearest, ties to even.
    const std::uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    const bool nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
    dst[i].bits = static_cast<std::uint16_t>(nan ? 0x7FC0u : rounded);
  }
}

void round_to_bfloat16(const float* src, BFloat16* dst, std::int64_t n) {
  // The pointers are copied into the body, so the compiler knows the stores cannot move them.
  parallel_for(0, n, kConvertGrain,
               [src, dst](std::int64_t lo, std::int64_t hi) { round_to_bfloat16_serial(src + lo, dst + lo, hi - lo); });
}

void widen_bfloat16_serial(const BFloat16* src, float* dst, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint32_t u = static_cast<std::uint32_t>(src[i].bits) << 16;
    std::memcpy(dst + i, &u, sizeof u);
  }
}

void widen_bfloat16(const BFloat16* src, float* dst, std::int64_t n) {
  parallel_for(0, n, kConvertGrain,
               [src, dst](std::int64_t lo, std::int64_t hi) { widen_bfloat16_serial(src + lo, dst + lo, hi - lo); });
}

}  // namespace tapegrad::kernels
