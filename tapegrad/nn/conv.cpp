#include "tapegrad/nn/conv.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tapegrad/nn/functional.h"

namespace tapegrad::nn {

namespace functional {

namespace {

// Entry a of a window option given as one value (every axis) or one per axis; the ops check them.
std::int64_t along(const Dims& values, int a) { return values.size() == 1 ? values[0] : values[a]; }

// How many windows fit along an axis of `size` (unfold has checked that at least one does).
std::int64_t windows_along(std::int64_t size, const Dims& kernel, const Dims& dilation, const Dims& padding,
                           const Dims& stride, int a) {
  return (size + 2 * along(padding, a) - along(dilation, a) * (along(kernel, a) - 1) - 1) / along(stride, a) + 1;
}

// A 1-D option as the 2-D one over (1, length): `fill` on the height axis.
Dims over_length(const Dims& values, std::int64_t fill, const char* op, const char* name) {
  if (values.size() != 1)
    throw ValueError(message(op, ": ", name, " takes one value, got ", values.size(), " in ", values.str()));
  return {fill, values[0]};
}

// The pools' kernel and padding, checked before the padding is applied (unfold checks the rest):
// one value or two, a kernel of at least 1, a padding of at least 0 and at most half the kernel
// along each axis, as torch requires.
void check_pool_window(const Dims& kernel_size, const Dims& padding, const char* op) {
  for (const Dims* option : {&kernel_size, &padding})
    if (option->size() != 1 && option->size() != 2)
      throw ValueError(message(op, ": ", option == &padding ? "padding" : "kernel_size",
                               " takes one value (both axes) or two (height, width), got ", option->str()));
  for (int a = 0; a < 2; ++a)
    if (along(kernel_size, a) < 1 || along(padding, a) < 0 || along(padding, a) * 2 > along(kernel_size, a))
      throw ValueError(message(op, ": padding ", padding.str(), " must be between 0 and half the kernel size ",
                               kernel_size.str(), " (a kernel of at least 1)"));
}

// x as (N * C, 1, H, W) for a pool, and the shape (N, C) or (C) its output goes back to; 3-D (C, H, W)
// input is unbatched.
Tensor as_planes(const Tensor& x, Shape& lead, const char* op) {
  if (x.dim() != 3 && x.dim() != 4)
    throw ShapeError(message(op, ": expected an input of shape (N, C, H, W) or (C, H, W), got ", x.shape().str()));
  lead = Shape();
  for (int d = 0; d + 2 < x.dim(); ++d) lead.push_back(x.shape()[d]);
  return reshape(x, {lead.numel(), 1, x.shape()[x.dim() - 2], x.shape()[x.dim() - 1]});
}

// (planes, 1, oh * ow) back to lead + (oh, ow).
Tensor from_planes(const Tensor& y, Shape lead, std::int64_t oh, std::int64_t ow) {
  lead.push_back(oh);
  lead.push_back(ow);
  return reshape(y, lead);
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Dims& stride, const Dims& padding,
              const Dims& dilation, std::int64_t groups) {
  const char* op = "conv2d";
  if (x.dim() == 3) return squeeze(conv2d(unsqueeze(x, 0), weight, bias, stride, padding, dilation, groups), 0);
  if (x.dim() != 4)
    throw ShapeError(message(op, ": expected an input of shape (N, C, H, W) or (C, H, W), got ", x.shape().str()));
  if (weight.dim() != 4)
    throw ShapeError(message(op, ": expected a weight of shape (out_channels, in_channels / groups, kh, kw), got ",
                             weight.shape().str()));
  if (groups < 1) throw ValueError(message(op, ": groups must be at least 1, got ", groups));
  const std::int64_t n = x.shape()[0], channels = x.shape()[1], out_channels = weight.shape()[0];
  const std::int64_t group_channels = weight.shape()[1], kh = weight.shape()[2], kw = weight.shape()[3];
  if (out_channels % groups != 0)
    throw ValueError(
        message(op, ": the weight's ", out_channels, " output channels do not split into ", groups, " groups"));
  if (group_channels * groups != channels)
    throw ShapeError(message(op, ": a weight of shape ", weight.shape().str(), " with groups ", groups, " expects ",
                             group_channels * groups, " input channels, got an input of shape ", x.shape().str()));
  if (bias.defined() && bias.shape() != Shape{out_channels})
    throw ShapeError(message(op, ": expected a bias of shape (", out_channels, "), got ", bias.shape().str()));
  const Tensor cols = unfold(x, {kh, kw}, dilation, padding, stride);  // (N, C * kh * kw, L)
  const std::int64_t windows = cols.shape()[2];
  Tensor y;
  if (groups == 1) {
    y = matmul(reshape(weight, {out_channels, channels * kh * kw}), cols);  // (N, out, L)
  } else {
    const std::int64_t rows = group_channels * kh * kw;
    y = reshape(
        matmul(reshape(weight, {groups, out_channels / groups, rows}), reshape(cols, {n, groups, rows, windows})),
        {n, out_channels, windows});
  }
  if (bias.defined()) y = y + reshape(bias.to(y.dtype()), {1, out_channels, 1});  // bfloat16 under autocast, as torch's
  const std::int64_t oh = windows_along(x.shape()[2], {kh, kw}, dilation, padding, stride, 0);
  return reshape(y, {n, out_channels, oh, windows / oh});
}

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Dims& stride, const Dims& padding,
              const Dims& dilation, std::int64_t groups) {
  const char* op = "conv1d";
  if (x.dim() != 2 && x.dim() != 3)
    throw ShapeError(message(op, ": expected an input of shape (N, C, L) or (C, L), got ", x.shape().str()));
  if (weight.dim() != 3)
    throw ShapeError(message(op, ": expected a weight of shape (out_channels, in_channels / groups, k), got ",
                             weight.shape().str()));
  return squeeze(conv2d(unsqueeze(x, -2), unsqueeze(weight, -2), bias, over_length(stride, 1, op, "stride"),
                        over_length(padding, 0, op, "padding"), over_length(dilation, 1, op, "dilation"), groups),
                 -2);
}

Tensor max_pool2d(const Tensor& x, const Dims& kernel_size, const Dims& stride, const Dims& padding,
                  const Dims& dilation) {
  const char* op = "max_pool2d";
  if (x.dtype() == kBFloat16)  // the largest entry is one of them: exact through float32
    return max_pool2d(x.to(kFloat32), kernel_size, stride, padding, dilation).to(kBFloat16);
  const Dims& step = stride.empty() ? kernel_size : stride;
  Shape lead;
  Tensor planes = as_planes(x, lead, op);
  check_pool_window(kernel_size, padding, op);
  if (along(padding, 0) > 0 || along(padding, 1) > 0) {  // -inf, so that the max never picks it
    const std::int64_t ph = along(padding, 0), pw = along(padding, 1);
    planes = pad(planes, {pw, pw, ph, ph}, -std::numeric_limits<double>::infinity());
  }
  const Tensor cols = unfold(planes, kernel_size, dilation, {0}, step);  // (planes, kh * kw, L)
  const Tensor best = gather(cols, 1, argmax(cols, 1, /*keepdim=*/true));
  const std::int64_t oh = windows_along(planes.shape()[2], kernel_size, dilation, {0}, step, 0);
  return from_planes(best, lead, oh, cols.shape()[2] / oh);
}

Tensor avg_pool2d(const Tensor& x, const Dims& kernel_size, const Dims& stride, const Dims& padding,
                  bool count_include_pad) {
  const char* op = "avg_pool2d";
  const Dims& step = stride.empty() ? kernel_size : stride;
  Shape lead;
  const Tensor planes = as_planes(x, lead, op);
  check_pool_window(kernel_size, padding, op);
  const Tensor cols = unfold(planes, kernel_size, {1}, padding, step);  // (planes, kh * kw, L)
  Tensor means;
  if (count_include_pad) {
    means = mean(cols, {1});
  } else {
    // Each window's count of real pixels: the same windows over an image of ones.
    const Tensor ones_image = ones({1, 1, planes.shape()[2], planes.shape()[3]}, cols.dtype());
    means = sum(cols, {1}) / sum(unfold(ones_image, kernel_size, {1}, padding, step), {1});
  }
  const std::int64_t oh = windows_along(planes.shape()[2], kernel_size, {1}, padding, step, 0);
  return from_planes(means, lead, oh, cols.shape()[2] / oh);
}

Tensor max_pool1d(const Tensor& x, const Dims& kernel_size, const Dims& stride, const Dims& padding,
                  const Dims& dilation) {
  const char* op = "max_pool1d";
  if (x.dim() != 2 && x.dim() != 3)
    throw ShapeError(message(op, ": expected an input of shape (N, C, L) or (C, L), got ", x.shape().str()));
  return squeeze(max_pool2d(unsqueeze(x, -2), over_length(kernel_size, 1, op, "kernel_size"),
                            stride.empty() ? Dims{} : over_length(stride, 1, op, "stride"),
                            over_length(padding, 0, op, "padding"), over_length(dilation, 1, op, "dilation")),
                 -2);
}

Tensor avg_pool1d(const Tensor& x, const Dims& kernel_size, const Dims& stride, const Dims& padding,
                  bool count_include_pad) {
  const char* op = "avg_pool1d";
  if (x.dim() != 2 && x.dim() != 3)
    throw ShapeError(message(op, ": expected an input of shape (N, C, L) or (C, L), got ", x.shape().str()));
  return squeeze(avg_pool2d(unsqueeze(x, -2), over_length(kernel_size, 1, op, "kernel_size"),
                            stride.empty() ? Dims{} : over_length(stride, 1, op, "stride"),
                            over_length(padding, 0, op, "padding"), count_include_pad),
                 -2);
}

}  // namespace functional

ConvImpl::ConvImpl(const ConvOptions& options, int spatial_axes, const char* name) : options_(options) {
  const std::int64_t in = options.in_channels(), out = options.out_channels(), groups = options.groups();
  if (in <= 0 || out <= 0)
    throw ValueError(message(name, ": in_channels and out_channels must be positive, got ", in, " and ", out));
  if (groups < 1 || in % groups != 0 || out % groups != 0)
    throw ValueError(message(name, ": groups ", groups, " must divide in_channels ", in, " and out_channels ", out));
  const Dims& kernel = options.kernel_size();
  if (kernel.size() != 1 && kernel.size() != spatial_axes)
    throw ValueError(
        message(name, ": kernel_size takes one value", spatial_axes == 2 ? " or two" : "", ", got ", kernel.str()));
  Shape shape{out, in / groups};
  std::int64_t fan_in = in / groups;
  for (int a = 0; a < spatial_axes; ++a) {
    const std::int64_t k = kernel[kernel.size() == 1 ? 0 : a];
    if (k < 1) throw ValueError(message(name, ": kernel_size must be at least 1, got ", kernel.str()));
    shape.push_back(k);
    fan_in *= k;
  }
  Generator& gen = generator_or_default(options.generator());
  options_.generator(nullptr);  // not kept: it need not outlive the construction
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  weight_ = register_parameter("weight", uniform(shape, -bound, bound, gen));
  if (options.bias()) bias_ = register_parameter("bias", uniform({out}, -bound, bound, gen));
}

Tensor Conv1dImpl::forward(const Tensor& x) {
  return functional::conv1d(x, weight_, bias_, options_.stride(), options_.padding(), options_.dilation(),
                            options_.groups());
}

Tensor Conv2dImpl::forward(const Tensor& x) {
  return functional::conv2d(x, weight_, bias_, options_.stride(), options_.padding(), options_.dilation(),
                            options_.groups());
}

Tensor MaxPool1dImpl::forward(const Tensor& x) {
  return functional::max_pool1d(x, options_.kernel_size(), options_.stride(), options_.padding(), options_.dilation());
}

Tensor MaxPool2dImpl::forward(const Tensor& x) {
  return functional::max_pool2d(x, options_.kernel_size(), options_.stride(), options_.padding(), options_.dilation());
}

Tensor AvgPool1dImpl::forward(const Tensor& x) {
  return functional::avg_pool1d(x, options_.kernel_size(), options_.stride(), options_.padding(),
                                options_.count_include_pad());
}

Tensor AvgPool2dImpl::forward(const Tensor& x) {
  return functional::avg_pool2d(x, options_.kernel_size(), options_.stride(), options_.padding(),
                                options_.count_include_pad());
}

}  // namespace tapegrad::nn
