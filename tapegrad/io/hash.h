#pragma once
// FNV-1a, 64 bits: a hash of small records that is the same on every machine and in every run, so
// processes can compare what they hold (model layouts, metric names, shapes) by exchanging one
// number. Not for integrity checks of files (safetensors uses CRC-32) nor against adversaries.
//
//   io::Fnv1a h;
//   h.add(name);                                   // the bytes of a string
//   h.add(static_cast<std::uint64_t>(size));       // a number, as one step
//   std::uint64_t digest = h.value();

#include <cstdint>
#include <string_view>

namespace tapegrad::io {

class Fnv1a {
 public:
  void add(std::uint64_t value) { state_ = (state_ ^ value) * kPrime; }
  void add(std::string_view text) {
    for (const char c : text) add(static_cast<std::uint64_t>(static_cast<unsigned char>(c)));
  }
  std::uint64_t value() const { return state_; }

 private:
  static constexpr std::uint64_t kOffsetBasis = 0xcbf29ce484222325ull;
  static constexpr std::uint64_t kPrime = 0x100000001b3ull;
  std::uint64_t state_ = kOffsetBasis;
};

}  // namespace tapegrad::io
