#include "tapegrad/nn/padding.h"

namespace tapegrad::nn {

PadImpl::PadImpl(const PadOptions& options, functional::PadMode mode, int axes, const char* name)
    : mode_(mode), value_(options.value()), axes_(axes), name_(name) {
  const Dims& padding = options.padding();
  if (padding.size() != 1 && padding.size() != 2 * axes)
    throw ValueError(message(name, ": padding takes one value or ", 2 * axes, " (",
                             axes == 1   ? "left, right"
                             : axes == 2 ? "left, right, top, bottom"
                                         : "left, right, top, bottom, front, back",
                             "), got ", padding.str()));
  for (int i = 0; i < 2 * axes; ++i) pads_.push_back(padding[padding.size() == 1 ? 0 : i]);
}

Tensor PadImpl::forward(const Tensor& x) {
  if (x.dim() < axes_ + 1)
    throw ShapeError(
        message(name_, ": expected an input with at least ", axes_ + 1, " axes, got shape ", x.shape().str()));
  return functional::pad(x, pads_, mode_, value_);
}

}  // namespace tapegrad::nn
