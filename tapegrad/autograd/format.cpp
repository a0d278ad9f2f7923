// Number formatting with std::to_chars. See format.h.

#include "tapegrad/autograd/format.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>

#include "tapegrad/autograd/error.h"

namespace tapegrad {

namespace {

// to_chars in the given format (none: shortest round trip) and precision (-1: none).
std::string to_text(double v, std::optional<std::chars_format> format, int digits, const char* caller) {
  if (std::isnan(v)) return std::signbit(v) ? "-nan" : "nan";  // the sign of a NaN is kept, as printf keeps it
  if (format && digits < 0) throw ValueError(message(caller, ": digits must be >= 0, got ", digits));
  // A fixed-format double has up to 309 digits before the point.
  std::string buffer(330 + static_cast<std::size_t>(std::max(digits, 0)), '\0');
  char* const first = buffer.data();
  char* const last = first + buffer.size();
  const std::to_chars_result result =
      !format ? std::to_chars(first, last, v) : std::to_chars(first, last, v, *format, digits);
  buffer.resize(static_cast<std::size_t>(result.ptr - first));
  return buffer;
}

}  // namespace

std::string format_number(double v) { return to_text(v, std::nullopt, -1, "format_number"); }

std::string format_fixed(double v, int digits) { return to_text(v, std::chars_format::fixed, digits, "format_fixed"); }

std::string format_significant(double v, int digits) {
  return to_text(v, std::chars_format::general, digits, "format_significant");
}

std::string format_scientific(double v, int digits) {
  return to_text(v, std::chars_format::scientific, digits, "format_scientific");
}

}  // namespace tapegrad
