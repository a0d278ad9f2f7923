#pragma once
// Numbers as text for messages, logs and reports: the library's one number formatter, built on
// std::to_chars (locale-independent).
//
//   format_number(0.1)               "0.1"     the shortest text that reads back as the same double
//   format_number(1e-05)             "1e-05"
//   format_number(2.0)               "2"
//   format_fixed(0.98765, 3)         "0.988"   digits after the point         (printf %.3f)
//   format_significant(0.693147, 4)  "0.6931"  significant digits, shortest form (printf %.4g)
//   format_scientific(0.001, 2)      "1.00e-03"                                (printf %.2e)
//
// NaN and infinities come out as "nan", "-nan", "inf" and "-inf". digits must be >= 0 (ValueError).

#include <string>

namespace tapegrad {

std::string format_number(double v);
std::string format_fixed(double v, int digits);
std::string format_significant(double v, int digits);
std::string format_scientific(double v, int digits);

}  // namespace tapegrad
