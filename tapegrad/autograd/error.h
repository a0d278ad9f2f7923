#pragma once
// The exception hierarchy of tapegrad. Every mistake a user can make (a shape that does not
// fit, an index out of range, a bad argument, a misuse of the graph) throws one of these, with
// a message that names the op and the shapes or values involved, e.g.
//   "matmul: cannot multiply (2,3) by (4,5)".

#include <stdexcept>
#include <string>

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

}  // namespace tapegrad
