// Tensor's op methods: each forwards to the free function of the same name in ops.h.

#include "tapegrad/autograd/ops.h"

namespace tapegrad {

Tensor Tensor::reshape(const Shape& s) const { return tapegrad::reshape(*this, s); }
Tensor Tensor::view(const Shape& s) const { return tapegrad::view(*this, s); }
Tensor Tensor::flatten(std::int64_t start_axis, std::int64_t end_axis) const {
  return tapegrad::flatten(*this, start_axis, end_axis);
}
Tensor Tensor::transpose(std::int64_t axis0, std::int64_t axis1) const {
  return tapegrad::transpose(*this, axis0, axis1);
}
Tensor Tensor::permute(const Dims& axes) const { return tapegrad::permute(*this, axes); }
Tensor Tensor::mT() const { return tapegrad::transpose(*this, -2, -1); }
Tensor Tensor::unsqueeze(std::int64_t axis) const { return tapegrad::unsqueeze(*this, axis); }
Tensor Tensor::squeeze(std::int64_t axis) const { return tapegrad::squeeze(*this, axis); }
Tensor Tensor::expand(const Shape& s) const { return tapegrad::expand(*this, s); }
Tensor Tensor::narrow(std::int64_t axis, std::int64_t start, std::int64_t length) const {
  return tapegrad::narrow(*this, axis, start, length);
}
Tensor Tensor::slice(std::int64_t axis, std::int64_t start, std::int64_t end, std::int64_t step) const {
  return tapegrad::slice(*this, axis, start, end, step);
}
Tensor Tensor::select(std::int64_t axis, std::int64_t index) const { return tapegrad::select(*this, axis, index); }
Tensor Tensor::sum(const Dims& axes, bool keepdim) const { return tapegrad::sum(*this, axes, keepdim); }
Tensor Tensor::mean(const Dims& axes, bool keepdim) const { return tapegrad::mean(*this, axes, keepdim); }
Tensor Tensor::max(const Dims& axes, bool keepdim) const { return tapegrad::max(*this, axes, keepdim); }
Tensor Tensor::prod(const Dims& axes, bool keepdim) const { return tapegrad::prod(*this, axes, keepdim); }
Tensor Tensor::min(const Dims& axes, bool keepdim) const { return tapegrad::min(*this, axes, keepdim); }
Tensor Tensor::var(const Dims& axes, std::int64_t correction, bool keepdim) const {
  return tapegrad::var(*this, axes, correction, keepdim);
}
Tensor Tensor::std(const Dims& axes, std::int64_t correction, bool keepdim) const {
  return tapegrad::std(*this, axes, correction, keepdim);
}
Tensor Tensor::argmax(std::int64_t axis, bool keepdim) const { return tapegrad::argmax(*this, axis, keepdim); }
Tensor Tensor::cumsum(std::int64_t axis) const { return tapegrad::cumsum(*this, axis); }
Tensor Tensor::cumprod(std::int64_t axis) const { return tapegrad::cumprod(*this, axis); }
Tensor Tensor::logcumsumexp(std::int64_t axis) const { return tapegrad::logcumsumexp(*this, axis); }
Tensor Tensor::repeat(const Dims& reps) const {
  if (reps.size() < dim())
    throw ValueError(message("repeat: ", reps.size(), " repetitions ", reps.str(), " for a tensor of rank ", dim(),
                             " (use tile() to repeat only the last axes)"));
  return tapegrad::tile(*this, reps);
}
Tensor Tensor::matmul(const Tensor& other) const { return tapegrad::matmul(*this, other); }
Tensor Tensor::pow(double exponent) const { return tapegrad::pow(*this, exponent); }
Tensor Tensor::exp() const { return tapegrad::exp(*this); }
Tensor Tensor::log() const { return tapegrad::log(*this); }
Tensor Tensor::expm1() const { return tapegrad::expm1(*this); }
Tensor Tensor::log1p() const { return tapegrad::log1p(*this); }
Tensor Tensor::sqrt() const { return tapegrad::sqrt(*this); }
Tensor Tensor::abs() const { return tapegrad::abs(*this); }
Tensor Tensor::tanh() const { return tapegrad::tanh(*this); }
Tensor Tensor::sigmoid() const { return tapegrad::sigmoid(*this); }
Tensor Tensor::relu() const { return tapegrad::relu(*this); }
Tensor Tensor::softmax(std::int64_t axis) const { return tapegrad::softmax(*this, axis); }
Tensor Tensor::log_softmax(std::int64_t axis) const { return tapegrad::log_softmax(*this, axis); }
Tensor Tensor::masked_fill(const Tensor& mask, double value) const { return tapegrad::masked_fill(*this, mask, value); }

}  // namespace tapegrad
