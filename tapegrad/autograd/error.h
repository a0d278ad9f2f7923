#pragma once
// The exception hierarchy of tapegrad. Every mistake a user can make (a shape that does not
// fit, an index out of range, a bad argument, a misuse of the graph) throws one of these, with
// a message that names the op and the shapes or values involved, e.g.
//   "matmul: cannot multiply (2,3) by (4,5)".
// message() builds such messages from strings, characters and numbers, one argument per piece:
//   throw ValueError(message("topk: k = ", k, " is larger than the axis's ", n, " elements"));

#include <charconv>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include "tapegrad/autograd/format.h"

namespace tapegrad {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Shapes that do not fit together (broadcasting, matmul, reshape, concatenation ...).
class ShapeError : public Error {
 public:
  using Error::Error;
};

// An index or axis outside its range.
class IndexError : public Error {
 public:
  using Error::Error;
};

// An argument whose value is not allowed (negative probability, k larger than the axis ...).
class ValueError : public Error {
 public:
  using Error::Error;
};

// A tensor of the wrong element type for the op (an integer tensor passed to exp ...).
class TypeError : public Error {
 public:
  using Error::Error;
};

// A misuse of the autograd graph (backward through a released graph, a non-scalar root ...).
class GraphError : public Error {
 public:
  using Error::Error;
};

// Reading or writing files.
class IoError : public Error {
 public:
  using Error::Error;
};

namespace detail {

template <class T>
void append_piece(std::string& out, const T& piece) {
  if constexpr (std::is_same_v<T, bool>) {
    out += piece ? "true" : "false";
  } else if constexpr (std::is_same_v<T, char>) {
    out += piece;
  } else if constexpr (std::is_integral_v<T>) {
    out += std::to_string(piece);
  } else if constexpr (std::is_same_v<T, float>) {
    char text[32];  // the shortest text that reads back as the same float
    out.append(text, std::to_chars(text, text + sizeof text, piece).ptr);
  } else if constexpr (std::is_floating_point_v<T>) {
    out += format_number(static_cast<double>(piece));
  } else {
    static_assert(std::is_convertible_v<const T&, std::string_view>,
                  "message() takes strings, characters and numbers; format anything else first (shape.str())");
    out += std::string_view(piece);
  }
}

}  // namespace detail

// The pieces' text, concatenated: strings and characters as they are, integers in decimal,
// doubles as format_number writes them ("0.1", "1e-05", "nan"), floats as the shortest text of
// the float (0.1F is "0.1"), bools as "true"/"false". The same text whatever the global locale.
template <class... Pieces>
std::string message(const Pieces&... pieces) {
  std::string out;
  (detail::append_piece(out, pieces), ...);
  return out;
}

}  // namespace tapegrad
