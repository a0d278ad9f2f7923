#include "tapegrad/nn/conv.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "tapegrad/autograd/autocast.h"
#include "tapegrad/nn/functional.h"
#include "tapegrad/nn/layout.h"

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

// With ceil_mode, the padding past the end that lets unfold make torch's last window: the windows
// are ceil((size + 2 * padding - span) / stride) + 1, less the last when it would start past the
// input and its left padding (torch's rule).
std::int64_t ceil_overhang(std::int64_t size, const Dims& kernel, const Dims& dilation, const Dims& padding,
                           const Dims& stride, int a) {
  const std::int64_t span = along(dilation, a) * (along(kernel, a) - 1) + 1, p = along(padding, a);
  const std::int64_t s = along(stride, a), room = size + 2 * p - span;
  if (room < 0 || s < 1) return 0;  // no window fits (or a bad stride): unfold says so
  std::int64_t windows = (room + s - 1) / s + 1;
  if ((windows - 1) * s >= size + p) --windows;
  return std::max<std::int64_t>(0, (windows - 1) * s + span - (size + 2 * p));
}

// A 1-D option as the 2-D one over (1, length): `fill` on the height axis.
Dims over_length(const Dims& values, std::int64_t fill, const char* op, const char* name) {
  if (values.size() != 1)
    throw ValueError(message(op, ": ", name, " takes one value, got ", values.size(), " in ", values.str()));
  return {fill, values[0]};
}

// The 1-D forms' input: (N, C, L) or (C, L).
void check_1d_input(const Tensor& x, const char* op) {
  if (x.dim() != 2 && x.dim() != 3)
    throw ShapeError(message(op, ": expected an input of shape (N, C, L) or (C, L), got ", x.shape().str()));
}

// A window option of the 2-D forms: one value (both axes) or two (height, width).
void check_pair(const Dims& values, const char* op, const char* name) {
  if (values.size() != 1 && values.size() != 2)
    throw ValueError(
        message(op, ": ", name, " takes one value (both axes) or two (height, width), got ", values.str()));
}

// The pools' kernel and padding, checked before the padding is applied (unfold checks the rest):
// one value or two, a kernel of at least 1, a padding of at least 0 and at most half the kernel
// along each axis, as torch requires.
void check_pool_window(const Dims& kernel_size, const Dims& padding, const char* op) {
  check_pair(kernel_size, op, "kernel_size");
  check_pair(padding, op, "padding");
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

namespace {

// The (before, after) padding of each spatial axis, height first, that a padding asks for, given the
// kernel's extents (kh, kw).
std::array<std::pair<std::int64_t, std::int64_t>, 2> padding_pairs(const ConvPadding& padding, const Dims& stride,
                                                                   const Dims& dilation, std::int64_t kh,
                                                                   std::int64_t kw, const char* op) {
  std::array<std::pair<std::int64_t, std::int64_t>, 2> pairs;
  if (!padding.same()) {
    const Dims& values = padding.values();
    check_pair(values, op, "padding");
    for (int a = 0; a < 2; ++a) pairs[a] = {along(values, a), along(values, a)};
    return pairs;
  }
  for (int a = 0; a < 2; ++a) {
    if (along(stride, a) != 1) throw ValueError(message(op, ": padding kSame needs stride 1, got ", stride.str()));
    const std::int64_t total = along(dilation, a) * ((a == 0 ? kh : kw) - 1);
    pairs[a] = {total / 2, total - total / 2};
  }
  return pairs;
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Dims& stride,
              const ConvPadding& padding_option, const Dims& dilation, std::int64_t groups) {
  const char* op = "conv2d";
  if (x.dim() == 3) return squeeze(conv2d(unsqueeze(x, 0), weight, bias, stride, padding_option, dilation, groups), 0);
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
  // kSame with an odd total pads its extra row or column after the input, which unfold's symmetric
  // padding cannot: that input is padded first.
  const auto pairs = padding_pairs(padding_option, stride, dilation, kh, kw, op);
  const Dims padding{pairs[0].first, pairs[1].first};
  const bool uneven = pairs[0].first != pairs[0].second || pairs[1].first != pairs[1].second;
  if (uneven)
    return conv2d(pad(x, {pairs[1].first, pairs[1].second, pairs[0].first, pairs[0].second}), weight, bias, stride, {0},
                  dilation, groups);
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

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Dims& stride, const ConvPadding& padding,
              const Dims& dilation, std::int64_t groups) {
  const char* op = "conv1d";
  check_1d_input(x, op);
  if (weight.dim() != 3)
    throw ShapeError(message(op, ": expected a weight of shape (out_channels, in_channels / groups, k), got ",
                             weight.shape().str()));
  const ConvPadding padding_2d =
      padding.same() ? padding : ConvPadding(over_length(padding.values(), 0, op, "padding"));
  return squeeze(conv2d(unsqueeze(x, -2), unsqueeze(weight, -2), bias, over_length(stride, 1, op, "stride"), padding_2d,
                        over_length(dilation, 1, op, "dilation"), groups),
                 -2);
}

std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, const Dims& kernel_size, const Dims& stride,
                                                  const Dims& padding, const Dims& dilation, bool ceil_mode) {
  const char* op = "max_pool2d";
  const Dims& step = stride.empty() ? kernel_size : stride;
  Shape lead;
  const Tensor planes = as_planes(x, lead, op);
  check_pool_window(kernel_size, padding, op);
  const std::int64_t h = planes.shape()[2], w = planes.shape()[3];
  const std::int64_t eh = ceil_mode ? ceil_overhang(h, kernel_size, dilation, padding, step, 0) : 0;
  const std::int64_t ew = ceil_mode ? ceil_overhang(w, kernel_size, dilation, padding, step, 1) : 0;
  // Each window's largest entry found in place (no padded copy, no columns), then gathered: the
  // gradient goes back through the gather to that entry alone.
  const Tensor indices = window_argmax(planes, kernel_size, dilation, padding, step, {eh, ew});  // (P, 1, oh, ow)
  const std::int64_t oh = indices.shape()[2], ow = indices.shape()[3];
  const Tensor flat = reshape(indices, {lead.numel(), oh * ow});
  const Tensor best = gather(reshape(planes, {lead.numel(), h * w}), 1, flat);
  return {from_planes(best, lead, oh, ow), from_planes(flat, lead, oh, ow)};
}

Tensor max_pool2d(const Tensor& x, const Dims& kernel_size, const Dims& stride, const Dims& padding,
                  const Dims& dilation, bool ceil_mode) {
  return max_pool2d_with_indices(x, kernel_size, stride, padding, dilation, ceil_mode).first;
}

Tensor avg_pool2d(const Tensor& x, const Dims& kernel_size, const Dims& stride, const Dims& padding,
                  bool count_include_pad, bool ceil_mode, std::optional<std::int64_t> divisor_override) {
  const char* op = "avg_pool2d";
  if (divisor_override && *divisor_override == 0) throw ValueError(message(op, ": divisor_override must not be 0"));
  const Dims& step = stride.empty() ? kernel_size : stride;
  Shape lead;
  const Tensor planes = as_planes(x, lead, op);
  check_pool_window(kernel_size, padding, op);
  const std::int64_t h = planes.shape()[2], w = planes.shape()[3];
  const std::int64_t eh = ceil_mode ? ceil_overhang(h, kernel_size, {1}, padding, step, 0) : 0;
  const std::int64_t ew = ceil_mode ? ceil_overhang(w, kernel_size, {1}, padding, step, 1) : 0;
  if (count_include_pad && eh == 0 && ew == 0 && !divisor_override) {
    const Tensor cols = unfold(planes, kernel_size, {1}, padding, step);  // (planes, kh * kw, L)
    const std::int64_t oh = windows_along(h, kernel_size, {1}, padding, step, 0);
    return from_planes(mean(cols, {1}), lead, oh, cols.shape()[2] / oh);
  }
  // Each window's divisor: the same windows over an image of ones, its padding counted or not, the
  // overhang past the padding never.
  const std::int64_t ph = along(padding, 0), pw = along(padding, 1);
  const Tensor cols = unfold(pad(planes, {pw, pw + ew, ph, ph + eh}), kernel_size, {1}, {0}, step);
  const std::int64_t oh = windows_along(h + 2 * ph + eh, kernel_size, {1}, {0}, step, 0);
  if (divisor_override)  // every window's sum over the same divisor, as torch's
    return from_planes(sum(cols, {1}) / static_cast<double>(*divisor_override), lead, oh, cols.shape()[2] / oh);
  const Tensor counted =
      pad(pad(ones({1, 1, h, w}, cols.dtype()), {pw, pw, ph, ph}, count_include_pad ? 1.0 : 0.0), {0, ew, 0, eh});
  const Tensor means = sum(cols, {1}) / sum(unfold(counted, kernel_size, {1}, {0}, step), {1});
  return from_planes(means, lead, oh, cols.shape()[2] / oh);
}

std::pair<Tensor, Tensor> max_pool1d_with_indices(const Tensor& x, const Dims& kernel_size, const Dims& stride,
                                                  const Dims& padding, const Dims& dilation, bool ceil_mode) {
  const char* op = "max_pool1d";
  check_1d_input(x, op);
  auto [values, indices] = max_pool2d_with_indices(unsqueeze(x, -2), over_length(kernel_size, 1, op, "kernel_size"),
                                                   stride.empty() ? Dims{} : over_length(stride, 1, op, "stride"),
                                                   over_length(padding, 0, op, "padding"),
                                                   over_length(dilation, 1, op, "dilation"), ceil_mode);
  return {squeeze(values, -2), squeeze(indices, -2)};  // a plane of height 1: the offset is the position
}

Tensor max_pool1d(const Tensor& x, const Dims& kernel_size, const Dims& stride, const Dims& padding,
                  const Dims& dilation, bool ceil_mode) {
  return max_pool1d_with_indices(x, kernel_size, stride, padding, dilation, ceil_mode).first;
}

Tensor max_unpool2d(const Tensor& x, const Tensor& indices, const Dims& kernel_size, const Dims& stride,
                    const Dims& padding, const Dims& output_size) {
  const char* op = "max_unpool2d";
  Shape lead;
  const Tensor planes = as_planes(x, lead, op);
  if (indices.shape() != x.shape())
    throw ShapeError(
        message(op, ": expected indices of the input's shape ", x.shape().str(), ", got ", indices.shape().str()));
  if (indices.dtype() != kInt64)
    throw TypeError(message(op, ": expected int64 indices, got ", dtype_name(indices.dtype())));
  const Dims& step = stride.empty() ? kernel_size : stride;
  check_pair(kernel_size, op, "kernel_size");
  check_pair(step, op, "stride");
  check_pair(padding, op, "padding");
  if (!output_size.empty() && output_size.size() != 2)
    throw ValueError(message(op, ": output_size takes two values (height, width), got ", output_size.str()));
  std::int64_t size[2];
  for (int a = 0; a < 2; ++a) {
    size[a] = output_size.empty()
                  ? (planes.shape()[2 + a] - 1) * along(step, a) - 2 * along(padding, a) + along(kernel_size, a)
                  : output_size[a];
    if (size[a] < 1) throw ValueError(message(op, ": the output size ", size[a], " along axis ", 2 + a, " is empty"));
  }
  const std::int64_t plane = size[0] * size[1], pixels = planes.shape()[2] * planes.shape()[3];
  const Tensor flat = reshape(indices, {lead.numel(), pixels});
  if (flat.numel() > 0) {
    const std::int64_t low = min(flat).item<std::int64_t>(), high = max(flat).item<std::int64_t>();
    if (low < 0 || high >= plane)
      throw IndexError(message(op, ": index ", low < 0 ? low : high, " is outside an output plane of ", size[0], " x ",
                               size[1], " (", plane, " entries)"));
  }
  const Tensor out = scatter(zeros({lead.numel(), plane}, x.dtype()), 1, flat, reshape(planes, {lead.numel(), pixels}));
  return from_planes(out, lead, size[0], size[1]);
}

Tensor max_unpool1d(const Tensor& x, const Tensor& indices, const Dims& kernel_size, const Dims& stride,
                    const Dims& padding, const Dims& output_size) {
  const char* op = "max_unpool1d";
  check_1d_input(x, op);
  if (indices.shape() != x.shape())
    throw ShapeError(
        message(op, ": expected indices of the input's shape ", x.shape().str(), ", got ", indices.shape().str()));
  return squeeze(max_unpool2d(unsqueeze(x, -2), unsqueeze(indices, -2), over_length(kernel_size, 1, op, "kernel_size"),
                              stride.empty() ? Dims{} : over_length(stride, 1, op, "stride"),
                              over_length(padding, 0, op, "padding"),
                              output_size.empty() ? Dims{} : over_length(output_size, 1, op, "output_size")),
                 -2);
}

Tensor avg_pool1d(const Tensor& x, const Dims& kernel_size, const Dims& stride, const Dims& padding,
                  bool count_include_pad, bool ceil_mode) {
  const char* op = "avg_pool1d";
  check_1d_input(x, op);
  return squeeze(avg_pool2d(unsqueeze(x, -2), over_length(kernel_size, 1, op, "kernel_size"),
                            stride.empty() ? Dims{} : over_length(stride, 1, op, "stride"),
                            over_length(padding, 0, op, "padding"), count_include_pad, ceil_mode),
                 -2);
}

Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Dims& stride,
                        const Dims& padding, const Dims& output_padding, std::int64_t groups, const Dims& dilation) {
  const char* op = "conv_transpose2d";
  if (x.dim() == 3)
    return squeeze(conv_transpose2d(unsqueeze(x, 0), weight, bias, stride, padding, output_padding, groups, dilation),
                   0);
  if (x.dim() != 4)
    throw ShapeError(message(op, ": expected an input of shape (N, C, H, W) or (C, H, W), got ", x.shape().str()));
  if (weight.dim() != 4)
    throw ShapeError(message(op, ": expected a weight of shape (in_channels, out_channels / groups, kh, kw), got ",
                             weight.shape().str()));
  if (groups < 1) throw ValueError(message(op, ": groups must be at least 1, got ", groups));
  const std::int64_t n = x.shape()[0], in = weight.shape()[0], group_out = weight.shape()[1];
  const std::int64_t kh = weight.shape()[2], kw = weight.shape()[3], out = group_out * groups;
  if (x.shape()[1] != in)
    throw ShapeError(message(op, ": a weight of shape ", weight.shape().str(), " expects ", in,
                             " input channels, got an input of shape ", x.shape().str()));
  if (in % groups != 0)
    throw ValueError(message(op, ": the weight's ", in, " input channels do not split into ", groups, " groups"));
  if (bias.defined() && bias.shape() != Shape{out})
    throw ShapeError(message(op, ": expected a bias of shape (", out, "), got ", bias.shape().str()));
  check_pair(stride, op, "stride");
  check_pair(padding, op, "padding");
  check_pair(output_padding, op, "output_padding");
  check_pair(dilation, op, "dilation");
  Shape full, size;  // the output before and after the padding's crop, (height, width)
  for (int a = 0; a < 2; ++a) {
    const std::int64_t s = along(stride, a), p = along(padding, a), o = along(output_padding, a),
                       d = along(dilation, a);
    if (s < 1 || d < 1 || p < 0)
      throw ValueError(message(op, ": stride ", stride.str(), " and dilation ", dilation.str(),
                               " must be at least 1 and padding ", padding.str(), " at least 0"));
    if (o < 0 || (o >= s && o >= d))
      throw ValueError(message(op, ": output_padding ", output_padding.str(), " must be at least 0 and smaller than ",
                               "the stride ", stride.str(), " or the dilation ", dilation.str()));
    full.push_back((x.shape()[2 + a] - 1) * s + d * ((a == 0 ? kh : kw) - 1) + 1);
    size.push_back(full[a] - 2 * p + o);
    if (size[a] < 1)
      throw ValueError(message(op, ": an input of shape ", x.shape().str(), " and a kernel of ", kh, "x", kw,
                               " give an output of size ", size[a], " along axis ", 2 + a, " with padding ",
                               padding.str()));
  }
  // Every input pixel's contribution to its output window, (N, out * kh * kw, H * W), added into the
  // image without padding (fold is unfold's adjoint), then the padding cropped off each side and
  // output_padding's rows and columns added at the end (zeros past the image, as torch's).
  const std::int64_t pixels = x.shape()[2] * x.shape()[3];
  const Tensor per_group = transpose(reshape(weight, {groups, in / groups, group_out * kh * kw}), 1, 2);
  const Tensor cols =
      reshape(matmul(per_group, reshape(x, {n, groups, in / groups, pixels})), {n, out * kh * kw, pixels});
  Tensor y = fold(cols, full, {kh, kw}, dilation, {0}, stride);
  const std::int64_t ph = along(padding, 0), pw = along(padding, 1);
  y = pad(y, {-pw, along(output_padding, 1) - pw, -ph, along(output_padding, 0) - ph});
  if (bias.defined()) y = y + reshape(bias.to(y.dtype()), {1, out, 1, 1});
  return y;
}

Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Dims& stride,
                        const Dims& padding, const Dims& output_padding, std::int64_t groups, const Dims& dilation) {
  const char* op = "conv_transpose1d";
  check_1d_input(x, op);
  if (weight.dim() != 3)
    throw ShapeError(message(op, ": expected a weight of shape (in_channels, out_channels / groups, k), got ",
                             weight.shape().str()));
  return squeeze(
      conv_transpose2d(unsqueeze(x, -2), unsqueeze(weight, -2), bias, over_length(stride, 1, op, "stride"),
                       over_length(padding, 0, op, "padding"), over_length(output_padding, 0, op, "output_padding"),
                       groups, over_length(dilation, 1, op, "dilation")),
      -2);
}

namespace {

// The output size of an adaptive pool, (height, width), checked: one value or two, each at least 1,
// over an input of shape (N, C, H, W) or (C, H, W) with H and W at least 1.
Shape adaptive_size(const Tensor& x, const Dims& output_size, const char* op) {
  if (x.dim() != 3 && x.dim() != 4)
    throw ShapeError(message(op, ": expected an input of shape (N, C, H, W) or (C, H, W), got ", x.shape().str()));
  check_pair(output_size, op, "output_size");
  const Shape size{along(output_size, 0), along(output_size, 1)};
  if (size[0] < 1 || size[1] < 1)
    throw ValueError(message(op, ": output_size must be at least 1, got ", output_size.str()));
  if (x.shape()[x.dim() - 2] < 1 || x.shape()[x.dim() - 1] < 1)
    throw ShapeError(message(op, ": the input of shape ", x.shape().str(), " has an empty spatial axis"));
  return size;
}

// Window i of an axis of n entries cut into `out`: [floor(i * n / out), ceil((i + 1) * n / out)).
std::pair<std::int64_t, std::int64_t> adaptive_window(std::int64_t i, std::int64_t n, std::int64_t out) {
  return {i * n / out, ((i + 1) * n + out - 1) / out};
}

// The (out, n) matrix whose row i averages window i of an axis of n entries.
Tensor averaging_matrix(std::int64_t n, std::int64_t out, DType dtype) {
  std::vector<double> m(static_cast<std::size_t>(out * n), 0.0);
  for (std::int64_t i = 0; i < out; ++i) {
    const auto [start, end] = adaptive_window(i, n, out);
    for (std::int64_t j = start; j < end; ++j)
      m[static_cast<std::size_t>(i * n + j)] = 1.0 / static_cast<double>(end - start);
  }
  return from_vector(m, {out, n}).to(dtype);
}

}  // namespace

Tensor adaptive_avg_pool2d(const Tensor& x, const Dims& output_size) {
  const char* op = "adaptive_avg_pool2d";
  const Shape size = adaptive_size(x, output_size, op);
  if (!x.is_floating_point())
    throw TypeError(message(op, ": expected a floating-point input, got ", dtype_name(x.dtype())));
  if (x.dtype() == kBFloat16)  // averaged in float32, rounded once
    return adaptive_avg_pool2d(x.to(kFloat32), output_size).to(kBFloat16);
  // A mean over a rectangle is a mean over its rows of the means over its columns: two products with
  // averaging matrices, in x's precision whatever autocast says.
  const tapegrad::detail::AutocastOffGuard exact;
  const Tensor rows = averaging_matrix(x.shape()[x.dim() - 2], size[0], x.dtype());
  const Tensor cols = averaging_matrix(x.shape()[x.dim() - 1], size[1], x.dtype());
  return matmul(matmul(rows, x), cols.mT());
}

std::pair<Tensor, Tensor> adaptive_max_pool2d_with_indices(const Tensor& x, const Dims& output_size) {
  const char* op = "adaptive_max_pool2d";
  const Shape size = adaptive_size(x, output_size, op);
  // Each window's largest entry found in place, then gathered, as max_pool2d's.
  const Tensor indices = adaptive_window_argmax(x, output_size);  // lead + (oh, ow)
  const std::int64_t planes = x.numel() == 0 ? 0 : x.numel() / (x.shape()[x.dim() - 2] * x.shape()[x.dim() - 1]);
  const Tensor flat = reshape(indices, {planes, size[0] * size[1]});
  const Tensor best = gather(reshape(x, {planes, x.shape()[x.dim() - 2] * x.shape()[x.dim() - 1]}), 1, flat);
  return {reshape(best, indices.shape()), indices};
}

Tensor adaptive_max_pool2d(const Tensor& x, const Dims& output_size) {
  return adaptive_max_pool2d_with_indices(x, output_size).first;
}

Tensor adaptive_avg_pool1d(const Tensor& x, const Dims& output_size) {
  const char* op = "adaptive_avg_pool1d";
  check_1d_input(x, op);
  return squeeze(adaptive_avg_pool2d(unsqueeze(x, -2), over_length(output_size, 1, op, "output_size")), -2);
}

std::pair<Tensor, Tensor> adaptive_max_pool1d_with_indices(const Tensor& x, const Dims& output_size) {
  const char* op = "adaptive_max_pool1d";
  check_1d_input(x, op);
  auto [values, indices] =
      adaptive_max_pool2d_with_indices(unsqueeze(x, -2), over_length(output_size, 1, op, "output_size"));
  return {squeeze(values, -2), squeeze(indices, -2)};
}

Tensor adaptive_max_pool1d(const Tensor& x, const Dims& output_size) {
  return adaptive_max_pool1d_with_indices(x, output_size).first;
}

}  // namespace functional

namespace {

// The kernel's extents, one per spatial axis, from a kernel_size of one value or one per axis.
Dims kernel_extents(const Dims& kernel, int spatial_axes, const char* name) {
  if (kernel.size() != 1 && kernel.size() != spatial_axes)
    throw ValueError(
        message(name, ": kernel_size takes one value", spatial_axes == 2 ? " or two" : "", ", got ", kernel.str()));
  Dims extents;
  for (int a = 0; a < spatial_axes; ++a) {
    const std::int64_t k = kernel[kernel.size() == 1 ? 0 : a];
    if (k < 1) throw ValueError(message(name, ": kernel_size must be at least 1, got ", kernel.str()));
    extents.push_back(k);
  }
  return extents;
}

// A convolution module's weight and bias (when wanted), its channels and kernel checked first: weight
// (out, in / groups, kernel...), or (in, out / groups, kernel...) when transposed, and bias (out), both
// uniform in +-1/sqrt(fan_in) with torch's fan_in of that weight, its second extent * the kernel's size.
std::pair<Tensor, Tensor> conv_parameters(std::int64_t in, std::int64_t out, std::int64_t groups,
                                          const Dims& kernel_size, int spatial_axes, bool transposed, bool bias,
                                          Generator* generator, const char* name) {
  if (in <= 0 || out <= 0)
    throw ValueError(message(name, ": in_channels and out_channels must be positive, got ", in, " and ", out));
  if (groups < 1 || in % groups != 0 || out % groups != 0)
    throw ValueError(message(name, ": groups ", groups, " must divide in_channels ", in, " and out_channels ", out));
  Shape shape = transposed ? Shape{in, out / groups} : Shape{out, in / groups};
  std::int64_t fan_in = shape[1];
  for (const std::int64_t k : kernel_extents(kernel_size, spatial_axes, name)) {
    shape.push_back(k);
    fan_in *= k;
  }
  Generator& gen = generator_or_default(generator);
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  Tensor weight = uniform(shape, -bound, bound, gen);
  return {weight, bias ? uniform({out}, -bound, bound, gen) : Tensor()};
}

}  // namespace

ConvImpl::ConvImpl(const ConvOptions& options, int spatial_axes, const char* name) : options_(options) {
  auto [weight, bias] =
      conv_parameters(options.in_channels(), options.out_channels(), options.groups(), options.kernel_size(),
                      spatial_axes, false, options.bias(), options.generator(), name);
  options_.generator(nullptr);  // not kept: it need not outlive the construction
  weight_ = register_parameter("weight", weight);
  if (bias.defined()) bias_ = register_parameter("bias", bias);
}

ConvTransposeImpl::ConvTransposeImpl(const ConvTransposeOptions& options, int spatial_axes, const char* name)
    : options_(options) {
  auto [weight, bias] =
      conv_parameters(options.in_channels(), options.out_channels(), options.groups(), options.kernel_size(),
                      spatial_axes, true, options.bias(), options.generator(), name);
  options_.generator(nullptr);  // as ConvImpl's
  weight_ = register_parameter("weight", weight);
  if (bias.defined()) bias_ = register_parameter("bias", bias);
}

Tensor ConvTranspose1dImpl::forward(const Tensor& x) {
  return functional::conv_transpose1d(x, weight_, bias_, options_.stride(), options_.padding(),
                                      options_.output_padding(), options_.groups(), options_.dilation());
}

Tensor ConvTranspose2dImpl::forward(const Tensor& x) {
  return functional::conv_transpose2d(x, weight_, bias_, options_.stride(), options_.padding(),
                                      options_.output_padding(), options_.groups(), options_.dilation());
}

// A padding_mode other than zeros: the input padded by F::pad in that mode, then convolved without
// padding, as torch's modules do.
Tensor ConvImpl::padded_input(const Tensor& x, int spatial_axes) const {
  const Dims& kernel = options_.kernel_size();
  const std::int64_t kh = spatial_axes == 1 ? 1 : kernel[0], kw = kernel[kernel.size() - 1];
  const char* op = spatial_axes == 1 ? "Conv1d" : "Conv2d";
  ConvPadding padding = options_.padding();
  if (spatial_axes == 1 && !padding.same()) padding = ConvPadding({0, padding.values()[0]});
  const Dims stride = spatial_axes == 1 ? Dims{1, options_.stride()[0]} : options_.stride();
  const Dims dilation = spatial_axes == 1 ? Dims{1, options_.dilation()[0]} : options_.dilation();
  const auto pairs = functional::padding_pairs(padding, stride, dilation, kh, kw, op);
  std::vector<std::int64_t> pads{pairs[1].first, pairs[1].second};
  if (spatial_axes == 2) pads.insert(pads.end(), {pairs[0].first, pairs[0].second});
  return functional::pad(x, pads, options_.padding_mode());
}

Tensor Conv1dImpl::forward(const Tensor& x) {
  if (options_.padding_mode() != PadMode::Constant)
    return functional::conv1d(padded_input(x, 1), weight_, bias_, options_.stride(), {0}, options_.dilation(),
                              options_.groups());
  return functional::conv1d(x, weight_, bias_, options_.stride(), options_.padding(), options_.dilation(),
                            options_.groups());
}

Tensor Conv2dImpl::forward(const Tensor& x) {
  if (options_.padding_mode() != PadMode::Constant)
    return functional::conv2d(padded_input(x, 2), weight_, bias_, options_.stride(), {0}, options_.dilation(),
                              options_.groups());
  return functional::conv2d(x, weight_, bias_, options_.stride(), options_.padding(), options_.dilation(),
                            options_.groups());
}

Tensor MaxPool1dImpl::forward(const Tensor& x) {
  return functional::max_pool1d(x, options_.kernel_size(), options_.stride(), options_.padding(), options_.dilation(),
                                options_.ceil_mode());
}

Tensor MaxPool2dImpl::forward(const Tensor& x) {
  return functional::max_pool2d(x, options_.kernel_size(), options_.stride(), options_.padding(), options_.dilation(),
                                options_.ceil_mode());
}

std::pair<Tensor, Tensor> MaxPool2dImpl::forward_with_indices(const Tensor& x) {
  return functional::max_pool2d_with_indices(x, options_.kernel_size(), options_.stride(), options_.padding(),
                                             options_.dilation(), options_.ceil_mode());
}

Tensor MaxUnpool1dImpl::forward(const Tensor& x, const Tensor& indices, const Dims& output_size) {
  return functional::max_unpool1d(x, indices, options_.kernel_size(), options_.stride(), options_.padding(),
                                  output_size);
}

Tensor MaxUnpool2dImpl::forward(const Tensor& x, const Tensor& indices, const Dims& output_size) {
  return functional::max_unpool2d(x, indices, options_.kernel_size(), options_.stride(), options_.padding(),
                                  output_size);
}

std::pair<Tensor, Tensor> MaxPool1dImpl::forward_with_indices(const Tensor& x) {
  return functional::max_pool1d_with_indices(x, options_.kernel_size(), options_.stride(), options_.padding(),
                                             options_.dilation(), options_.ceil_mode());
}

Tensor AvgPool1dImpl::forward(const Tensor& x) {
  return functional::avg_pool1d(x, options_.kernel_size(), options_.stride(), options_.padding(),
                                options_.count_include_pad(), options_.ceil_mode());
}

AvgPool1dImpl::AvgPool1dImpl(const AvgPoolOptions& options) : options_(options) {
  if (options.divisor_override())
    throw ValueError(message("AvgPool1d: divisor_override is for AvgPool2d (torch's AvgPool1d takes none), got ",
                             *options.divisor_override()));
}

Tensor AvgPool2dImpl::forward(const Tensor& x) {
  return functional::avg_pool2d(x, options_.kernel_size(), options_.stride(), options_.padding(),
                                options_.count_include_pad(), options_.ceil_mode(), options_.divisor_override());
}

Tensor AdaptiveAvgPool1dImpl::forward(const Tensor& x) {
  return functional::adaptive_avg_pool1d(x, options_.output_size());
}

Tensor AdaptiveAvgPool2dImpl::forward(const Tensor& x) {
  return functional::adaptive_avg_pool2d(x, options_.output_size());
}

Tensor AdaptiveMaxPool1dImpl::forward(const Tensor& x) {
  return functional::adaptive_max_pool1d(x, options_.output_size());
}

Tensor AdaptiveMaxPool2dImpl::forward(const Tensor& x) {
  return functional::adaptive_max_pool2d(x, options_.output_size());
}

}  // namespace tapegrad::nn
