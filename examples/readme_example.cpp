// The autograd example shown in README.md, verbatim between the BEGIN/END markers below. It is
// built and run as a CTest (readme_example), so the README's code cannot stop compiling or
// silently start computing something else: when you change one, change the other.

// BEGIN README EXAMPLE
#include <iostream>

#include "tapegrad/autograd/autograd.h"

using namespace tapegrad;

int main() {
  Generator gen(0);                                // every random op takes a seeded generator
  Tensor x = randn({4, 3}, gen);                   // x: (4, 3), a constant input
  Tensor w = randn({3, 2}, gen).requires_grad_();  // w: (3, 2), a parameter
  Tensor b = zeros({2}).requires_grad_();          // b: (2), broadcast over the rows

  Tensor loss = (matmul(x, w) + b).tanh().pow(2).mean();  // each op records itself on the tape
  loss.backward();                                        // walks the tape back: fills w.grad(), b.grad()
  std::cout << "loss " << loss.item() << "\ndloss/dw\n" << w.grad() << "\n";

  // The same function in float64 against central differences.
  GradcheckResult check =
      gradcheck([](const TensorList& in) { return (matmul(in[0], in[1]) + in[2]).tanh().pow(2).mean(); }, {x, w, b});
  std::cout << check.message() << "\n";
  return check.passed ? 0 : 1;
}
// END README EXAMPLE
