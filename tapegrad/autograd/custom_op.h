#pragma once
// custom_op: a user-defined differentiable op. The forward runs untaped (under NoGradGuard) on the inputs' values;
// the backward is a closure that maps the output's gradient to one gradient per input, as every built-in op
// records its own (graph.h's record()).
//
//   // y = x^3, dy/dx = 3 x^2
//   Tensor cube(const Tensor& x) {
//     return custom_op("cube", {x},
//                      [](const TensorList& in) { return in[0] * in[0] * in[0]; },
//                      [](const Tensor& grad, const TensorList& in, const Tensor& /*out*/) -> TensorList {
//                        return {grad * 3.0 * in[0] * in[0]};
//                      });
//   }
//
// The backward receives the inputs and the output, returns exactly one gradient per input, each of that input's
// shape and dtype, or an undefined Tensor for "no gradient"; the engine checks both and names the op on a mismatch.
// The inputs and the output are saved tensors (graph.h): written in place between the forward and the backward,
// they are a GraphError naming the op. A backward written with ops, as above, is itself differentiable: under
// backward(create_graph=true) or autograd::grad with create_graph it runs with grad mode on, the inputs carry their
// history and the output is connected to this op, so gradients of gradients are taped. When no input requires grad
// (or grad mode is off) nothing is recorded.

#include <functional>
#include <string>

#include "tapegrad/autograd/graph.h"
#include "tapegrad/autograd/tensor.h"

namespace tapegrad {

using CustomForward = std::function<Tensor(const TensorList& inputs)>;
using CustomBackward =
    std::function<TensorList(const Tensor& grad_output, const TensorList& inputs, const Tensor& output)>;

// ValueError naming the op when the name is empty, forward returns an undefined tensor, or forward returns a tensor
// that already belongs to the graph (it has a grad_fn, or it is a leaf that requires grad, such as an input returned
// unchanged): recording this op on it would replace or hijack that tensor's history, so return a new tensor
// (x.clone()) instead.
Tensor custom_op(const std::string& name, const TensorList& inputs, const CustomForward& forward,
                 CustomBackward backward);

}  // namespace tapegrad
