#pragma once
// gradcheck: compares the gradients backward computes with central finite differences, in
// float64, with PyTorch's pass rule |analytic - numeric| <= atol + rtol * |numeric|.
//
//   auto result = gradcheck([](const TensorList& x) { return (x[0] * x[1]).tanh(); },
//                           {randn({3, 4}, gen), randn({4}, gen)});
//   CHECK_MESSAGE(result.passed, result.message());
//
// Every floating-point input is copied to float64 and differentiated; other inputs (indices,
// masks) are passed through unchanged. f must build its output from the inputs it is given
// (so the whole computation runs in float64). Small problems get the full Jacobian: one
// backward per output element with a one-hot upstream gradient against one central difference
// per input element. Large ones get random directions: for random u (output) and v (one input),
// u^T J v from backward against (u.f(x + eps v) - u.f(x - eps v)) / (2 eps).

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tapegrad/autograd/graph.h"
#include "tapegrad/autograd/tensor.h"

namespace tapegrad {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
  // The full Jacobian is used while (output elements) x (input elements) stays within this.
  std::int64_t full_jacobian_limit = 1 << 16;
  int random_directions = 6;  // per input, when the Jacobian is too large
  std::uint64_t seed = 0;
};

struct GradcheckInputReport {
  std::string name;             // a named parameter's name; empty for inputs and unnamed parameters
  bool differentiated = false;  // false for non-floating inputs
  bool passed = true;
  Shape shape;
  // The worst comparison: the one whose error is largest relative to its tolerance. In full
  // Jacobian mode, `output_index` and `input_index` locate it; in random mode `direction` does.
  std::int64_t output_index = -1;
  std::int64_t input_index = -1;
  int direction = -1;
  double analytic = 0.0;
  double numeric = 0.0;
  double abs_error = 0.0;
  double tolerance = 0.0;
  double ratio = -1.0;  // abs_error / tolerance of the worst comparison (infinite for NaN)
};

struct GradcheckResult {
  bool passed = true;
  bool full_jacobian = true;
  std::vector<GradcheckInputReport> inputs;
  // One line per input with its worst element, for test failure messages.
  std::string message() const;
};

using GradcheckFunction = std::function<Tensor(const TensorList&)>;

// `parameters` are float64 leaves that f reads directly (a module's parameters after
// module.to(kFloat64)): they are perturbed in place (in-place writes: their versions grow),
// restored, and checked like inputs; their reports follow the inputs' in the result, and their
// .grad is overwritten.
GradcheckResult gradcheck(const GradcheckFunction& f, const TensorList& inputs, const GradcheckOptions& options = {},
                          const TensorList& parameters = {});

// The same with named parameters (module.named_parameters()): each report carries its parameter's name, and the
// message names it ("parameter 'fc1.weight' (2,3): MISMATCH, worst element 3 of d out[0]: analytic ..., numeric
// ...").
GradcheckResult gradcheck(const GradcheckFunction& f, const TensorList& inputs, const NamedTensors& parameters,
                          const GradcheckOptions& options = {});

// gradgradcheck: the second derivatives, with PyTorch's rule. For a random upstream gradient u of
// f's output shape, the first-order gradients g(x, u) = d sum(f(x) * u) / dx, computed by a
// backward taped with create_graph, are themselves checked by gradcheck against finite
// differences, with respect to the inputs, the parameters and u (reported last among the inputs,
// as "grad_output"). Every op whose backward is written with differentiable ops passes.
GradcheckResult gradgradcheck(const GradcheckFunction& f, const TensorList& inputs,
                              const GradcheckOptions& options = {}, const TensorList& parameters = {});
GradcheckResult gradgradcheck(const GradcheckFunction& f, const TensorList& inputs, const NamedTensors& parameters,
                              const GradcheckOptions& options = {});

}  // namespace tapegrad
