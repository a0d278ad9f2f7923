// custom_op: user-defined ops recorded on the tape like the built-in ones.

#include "tapegrad/autograd/custom_op.h"

#include <mutex>
#include <set>
#include <vector>

#include "tapegrad/autograd/error.h"

namespace tapegrad {

namespace {

// Node::name is a C string that must outlive every node; custom op names are interned here once each.
const char* intern(const std::string& name) {
  static std::mutex mutex;
  static std::set<std::string> names;
  std::lock_guard<std::mutex> lock(mutex);
  return names.insert(name).first->c_str();
}

}  // namespace

Tensor custom_op(const std::string& name, const TensorList& inputs, const CustomForward& forward,
                 CustomBackward backward) {
  if (name.empty()) throw ValueError("custom_op: the op needs a name");
  if (!forward || !backward) throw ValueError("custom_op '" + name + "': forward and backward must both be given");
  const bool taped = any_requires_grad(inputs);
  Tensor output;
  {
    NoGradGuard untaped;
    output = forward(inputs);
  }
  if (!output.defined()) throw ValueError("custom_op '" + name + "': forward returned an undefined tensor");
  if (!taped) return output;
  if (output.grad_fn())
    throw ValueError("custom_op '" + name + "': forward returned a tensor that already has a grad_fn (" +
                     output.grad_fn()->name + "); return a new tensor, e.g. x.clone()");
  if (output.requires_grad())
    throw ValueError("custom_op '" + name +
                     "': forward returned a leaf that requires grad (an input returned unchanged?); return a new "
                     "tensor, e.g. x.clone()");
  std::vector<SavedTensor> saved;
  saved.reserve(inputs.size());
  for (const Tensor& in : inputs) saved.emplace_back(in);
  record(intern(name), output, inputs,
         [backward = std::move(backward), saved = std::move(saved),
          out = SavedTensor::output(output)](const Tensor& grad) {
           TensorList values;
           values.reserve(saved.size());
           for (const SavedTensor& s : saved) values.push_back(s.unpack());
           return backward(grad, values, out.unpack());
         });
  return output;
}

}  // namespace tapegrad
