#pragma once
// bfloat16: the upper half of an IEEE float32 (sign, 8 exponent bits, 7 mantissa bits), so it
// spans float32's range with about 3 significant decimal digits. Arithmetic on it happens in
// float32: a BFloat16 converts to float implicitly, and a float converts back with
// round-to-nearest-even. NaN becomes the quiet NaN 0x7FC0; infinities stay infinities; finite
// values beyond bfloat16's largest (about 3.39e38) round to infinity; subnormals round like
// normals (the format keeps float32's subnormal range). These are PyTorch's rules, so a tensor
// converted here and one converted by torch's `.to(torch.bfloat16)` hold the same bits.

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace tapegrad {

struct BFloat16 {
  std::uint16_t bits = 0;

  BFloat16() = default;
  // Implicit from float, as arithmetic results are floats; explicit from the other arithmetic
  // types, which go through float (a double is rounded twice, as in PyTorch).
  BFloat16(float value) : bits(round_bits(value)) {}  // NOLINT(google-explicit-constructor)
  template <class U, class = std::enable_if_t<std::is_arithmetic_v<U> && !std::is_same_v<U, float>>>
  explicit BFloat16(U value) : BFloat16(static_cast<float>(value)) {}

  operator float() const {  // NOLINT(google-explicit-constructor)
    const std::uint32_t widened = static_cast<std::uint32_t>(bits) << 16;
    float value;
    std::memcpy(&value, &widened, sizeof value);
    return value;
  }

  static BFloat16 from_bits(std::uint16_t bits) {
    BFloat16 b;
    b.bits = bits;
    return b;
  }

  // The bits of value rounded to the nearest bfloat16, ties to even.
  static std::uint16_t round_bits(float value) {
    std::uint32_t u;
    std::memcpy(&u, &value, sizeof u);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0;  // NaN
    // Adding 0x7FFF rounds the dropped half down below 0x8000 and up above it; the kept
    // half's lowest bit added on top turns an exact tie (0x8000) into rounding to even.
    const std::uint32_t tie_to_even = (u >> 16) & 1u;
    return static_cast<std::uint16_t>((u + 0x7FFFu + tie_to_even) >> 16);
  }
};

static_assert(sizeof(BFloat16) == 2, "tapegrad: BFloat16 must be two bytes");

}  // namespace tapegrad
