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

// The input layouts of the 2-D and 3-D forms, for messages.
const char* input_layouts(int spatial) {
  return spatial == 3 ? "(N, C, D, H, W) or (C, D, H, W)" : "(N, C, H, W) or (C, H, W)";
}

// The kernel's axes in a weight's layout, for messages.
const char* kernel_axes(int spatial) { return spatial == 3 ? "kd, kh, kw" : "kh, kw"; }

// A window option of the 2-D or 3-D forms: one value (every axis) or one per spatial axis.
void check_option(const Dims& values, int spatial, const char* op, const char* name) {
  if (values.size() != 1 && values.size() != spatial)
    throw ValueError(message(op, ": ", name,
                             spatial == 3 ? " takes one value (every axis) or three (depth, height, width), got "
                                          : " takes one value (both axes) or two (height, width), got ",
                             values.str()));
}

// The trailing `spatial` extents of a shape.
Dims spatial_extents(const Shape& shape, int spatial) {
  return Dims(shape.begin() + (shape.size() - spatial), shape.end());
}

// The pools' window, checked before the padding is applied (unfold checks the rest): one value or
// one per axis for each option, a kernel of at least 1, a padding of at least 0 and at most half the
// kernel along each axis, as torch requires.
void check_pool_window(const Dims& kernel_size, const Dims& stride, const Dims& padding, const Dims& dilation,
                       int spatial, const char* op) {
  check_option(kernel_size, spatial, op, "kernel_size");
  check_option(stride, spatial, op, "stride");
  check_option(padding, spatial, op, "padding");
  check_option(dilation, spatial, op, "dilation");
  for (int a = 0; a < spatial; ++a)
    if (along(kernel_size, a) < 1 || along(padding, a) < 0 || along(padding, a) * 2 > along(kernel_size, a))
      throw ValueError(message(op, ": padding ", padding.str(), " must be between 0 and half the kernel size ",
                               kernel_size.str(), " (a kernel of at least 1)"));
}

// x as (N * C, 1, spatial...) for a pool, and the shape (N, C) or (C) its output goes back to; an
// input of one axis fewer is unbatched.
Tensor as_planes(const Tensor& x, Shape& lead, int spatial, const char* op) {
  if (x.dim() != spatial + 1 && x.dim() != spatial + 2)
    throw ShapeError(message(op, ": expected an input of shape ", input_layouts(spatial), ", got ", x.shape().str()));
  lead = Shape();
  for (int d = 0; d + spatial < x.dim(); ++d) lead.push_back(x.shape()[d]);
  Shape shape{lead.numel(), 1};
  for (const std::int64_t e : spatial_extents(x.shape(), spatial)) shape.push_back(e);
  return reshape(x, shape);
}

// (planes, 1, prod(out)) back to lead + out.
Tensor from_planes(const Tensor& y, Shape lead, const Dims& out) {
  for (const std::int64_t e : out) lead.push_back(e);
  return reshape(y, lead);
}

// The padding list of F::pad (last axis first, before then after) from one pair per spatial axis.
std::vector<std::int64_t> pad_list(const std::vector<std::pair<std::int64_t, std::int64_t>>& pairs) {
  std::vector<std::int64_t> pads;
  for (auto it = pairs.rbegin(); it != pairs.rend(); ++it) pads.insert(pads.end(), {it->first, it->second});
  return pads;
}

// The (before, after) padding of each spatial axis, first axis first, that a padding asks for, given
// the kernel's extents.
std::vector<std::pair<std::int64_t, std::int64_t>> padding_pairs(const ConvPadding& padding, const Dims& stride,
                                                                 const Dims& dilation, const Dims& kernel,
                                                                 const char* op) {
  const int spatial = kernel.size();
  std::vector<std::pair<std::int64_t, std::int64_t>> pairs;
  if (!padding.same()) {
    const Dims& values = padding.values();
    check_option(values, spatial, op, "padding");
    for (int a = 0; a < spatial; ++a) pairs.emplace_back(along(values, a), along(values, a));
    return pairs;
  }
  for (int a = 0; a < spatial; ++a) {
    if (along(stride, a) != 1) throw ValueError(message(op, ": padding kSame needs stride 1, got ", stride.str()));
    const std::int64_t total = along(dilation, a) * (kernel[a] - 1);
    pairs.emplace_back(total / 2, total - total / 2);
  }
  return pairs;
}

// conv2d and conv3d over `spatial` axes.
Tensor convolution(const Tensor& x, const Tensor& weight, const Tensor& bias, const Dims& stride,
                   const ConvPadding& padding_option, const Dims& dilation, std::int64_t groups, int spatial,
                   const char* op) {
  if (x.dim() == spatial + 1)
    return squeeze(convolution(unsqueeze(x, 0), weight, bias, stride, padding_option, dilation, groups, spatial, op),
                   0);
  if (x.dim() != spatial + 2)
    throw ShapeError(message(op, ": expected an input of shape ", input_layouts(spatial), ", got ", x.shape().str()));
  if (weight.dim() != spatial + 2)
    throw ShapeError(message(op, ": expected a weight of shape (out_channels, in_channels / groups, ",
                             kernel_axes(spatial), "), got ", weight.shape().str()));
  if (groups < 1) throw ValueError(message(op, ": groups must be at least 1, got ", groups));
  const std::int64_t n = x.shape()[0], channels = x.shape()[1], out_channels = weight.shape()[0];
  const std::int64_t group_channels = weight.shape()[1];
  const Dims kernel = spatial_extents(weight.shape(), spatial);
  if (out_channels % groups != 0)
    throw ValueError(
        message(op, ": the weight's ", out_channels, " output channels do not split into ", groups, " groups"));
  if (group_channels * groups != channels)
    throw ShapeError(message(op, ": a weight of shape ", weight.shape().str(), " with groups ", groups, " expects ",
                             group_channels * groups, " input channels, got an input of shape ", x.shape().str()));
  if (bias.defined() && bias.shape() != Shape{out_channels})
    throw ShapeError(message(op, ": expected a bias of shape (", out_channels, "), got ", bias.shape().str()));
  check_option(stride, spatial, op, "stride");
  check_option(dilation, spatial, op, "dilation");
  // kSame with an odd total pads its extra row or column after the input, which unfold's symmetric
  // padding cannot: that input is padded first.
  const auto pairs = padding_pairs(padding_option, stride, dilation, kernel, op);
  Dims padding;
  bool uneven = false;
  for (const auto& [before, after] : pairs) {
    padding.push_back(before);
    uneven |= before != after;
  }
  if (uneven) return convolution(pad(x, pad_list(pairs)), weight, bias, stride, {0}, dilation, groups, spatial, op);
  const Tensor cols = unfold(x, kernel, dilation, padding, stride);  // (N, C * prod(kernel), L)
  const std::int64_t windows = cols.shape()[2], rows = group_channels * kernel.numel();
  Tensor y;
  if (groups == 1) {
    y = matmul(reshape(weight, {out_channels, rows}), cols);  // (N, out, L)
  } else {
    y = reshape(
        matmul(reshape(weight, {groups, out_channels / groups, rows}), reshape(cols, {n, groups, rows, windows})),
        {n, out_channels, windows});
  }
  if (bias.defined()) y = y + reshape(bias.to(y.dtype()), {1, out_channels, 1});  // bfloat16 under autocast, as torch's
  Shape shape{n, out_channels};
  for (int a = 0; a < spatial; ++a)
    shape.push_back(windows_along(x.shape()[2 + a], kernel, dilation, padding, stride, a));
  return reshape(y, shape);
}

// max_pool2d_with_indices and max_pool3d_with_indices over `spatial` axes.
std::pair<Tensor, Tensor> max_pool_with_indices(const Tensor& x, const Dims& kernel_size, const Dims& stride,
                                                const Dims& padding, const Dims& dilation, bool ceil_mode, int spatial,
                                                const char* op) {
  const Dims& step = stride.empty() ? kernel_size : stride;
  Shape lead;
  const Tensor planes = as_planes(x, lead, spatial, op);
  check_pool_window(kernel_size, step, padding, dilation, spatial, op);
  const Dims size = spatial_extents(planes.shape(), spatial);
  Dims extra;
  for (int a = 0; a < spatial; ++a)
    extra.push_back(ceil_mode ? ceil_overhang(size[a], kernel_size, dilation, padding, step, a) : 0);
  // Each window's largest entry found in place (no padded copy, no columns), then gathered: the
  // gradient goes back through the gather to that entry alone.
  const Tensor indices = window_argmax(planes, kernel_size, dilation, padding, step, extra);  // (P, 1, out...)
  const Dims out = spatial_extents(indices.shape(), spatial);
  const Tensor flat = reshape(indices, {lead.numel(), out.numel()});
  const Tensor best = gather(reshape(planes, {lead.numel(), size.numel()}), 1, flat);
  return {from_planes(best, lead, out), from_planes(flat, lead, out)};
}

// avg_pool2d and avg_pool3d over `spatial` axes.
Tensor avg_pool(const Tensor& x, const Dims& kernel_size, const Dims& stride, const Dims& padding,
                bool count_include_pad, bool ceil_mode, std::optional<std::int64_t> divisor_override, int spatial,
                const char* op) {
  if (divisor_override && *divisor_override == 0) throw ValueError(message(op, ": divisor_override must not be 0"));
  const Dims& step = stride.empty() ? kernel_size : stride;
  Shape lead;
  const Tensor planes = as_planes(x, lead, spatial, op);
  check_pool_window(kernel_size, step, padding, {1}, spatial, op);
  const Dims size = spatial_extents(planes.shape(), spatial);
  std::vector<std::pair<std::int64_t, std::int64_t>> symmetric, overhang;
  bool overhangs = false;
  for (int a = 0; a < spatial; ++a) {
    const std::int64_t extra = ceil_mode ? ceil_overhang(size[a], kernel_size, {1}, padding, step, a) : 0;
    symmetric.emplace_back(along(padding, a), along(padding, a));
    overhang.emplace_back(0, extra);
    overhangs |= extra > 0;
  }
  const auto windows = [&](const Dims& extents, const Dims& pads) {
    Dims out;
    for (int a = 0; a < spatial; ++a) out.push_back(windows_along(extents[a], kernel_size, {1}, pads, step, a));
    return out;
  };
  if (count_include_pad && !overhangs && !divisor_override) {
    const Tensor cols = unfold(planes, kernel_size, {1}, padding, step);  // (planes, prod(kernel), L)
    return from_planes(mean(cols, {1}), lead, windows(size, padding));
  }
  // Each window's divisor: the same windows over an image of ones, its padding counted or not, the
  // overhang past the padding never.
  const Tensor cols = unfold(pad(pad(planes, pad_list(symmetric)), pad_list(overhang)), kernel_size, {1}, {0}, step);
  Dims padded;
  for (int a = 0; a < spatial; ++a) padded.push_back(size[a] + symmetric[a].first * 2 + overhang[a].second);
  const Dims out = windows(padded, {0});
  if (divisor_override)  // every window's sum over the same divisor, as torch's
    return from_planes(sum(cols, {1}) / static_cast<double>(*divisor_override), lead, out);
  Shape unit{1, 1};
  for (const std::int64_t e : size) unit.push_back(e);
  const Tensor counted =
      pad(pad(ones(unit, cols.dtype()), pad_list(symmetric), count_include_pad ? 1.0 : 0.0), pad_list(overhang));
  return from_planes(sum(cols, {1}) / sum(unfold(counted, kernel_size, {1}, {0}, step), {1}), lead, out);
}

// max_unpool2d and max_unpool3d over `spatial` axes.
Tensor max_unpool(const Tensor& x, const Tensor& indices, const Dims& kernel_size, const Dims& stride,
                  const Dims& padding, const Dims& output_size, int spatial, const char* op) {
  Shape lead;
  const Tensor planes = as_planes(x, lead, spatial, op);
  if (indices.shape() != x.shape())
    throw ShapeError(
        message(op, ": expected indices of the input's shape ", x.shape().str(), ", got ", indices.shape().str()));
  if (indices.dtype() != kInt64)
    throw TypeError(message(op, ": expected int64 indices, got ", dtype_name(indices.dtype())));
  const Dims& step = stride.empty() ? kernel_size : stride;
  check_option(kernel_size, spatial, op, "kernel_size");
  check_option(step, spatial, op, "stride");
  check_option(padding, spatial, op, "padding");
  if (!output_size.empty() && output_size.size() != spatial)
    throw ValueError(message(op, ": output_size takes ",
                             spatial == 3 ? "three values (depth, height, width)" : "two values (height, width)",
                             ", got ", output_size.str()));
  const Dims in = spatial_extents(planes.shape(), spatial);
  Dims size;
  for (int a = 0; a < spatial; ++a) {
    size.push_back(output_size.empty() ? (in[a] - 1) * along(step, a) - 2 * along(padding, a) + along(kernel_size, a)
                                       : output_size[a]);
    if (size[a] < 1) throw ValueError(message(op, ": the output size ", size[a], " along axis ", 2 + a, " is empty"));
  }
  const std::int64_t volume = size.numel();
  const Tensor flat = reshape(indices, {lead.numel(), in.numel()});
  if (flat.numel() > 0) {
    const std::int64_t low = min(flat).item<std::int64_t>(), high = max(flat).item<std::int64_t>();
    if (low < 0 || high >= volume) {
      std::string extents = std::to_string(size[0]);
      for (int a = 1; a < spatial; ++a) extents += " x " + std::to_string(size[a]);
      throw IndexError(message(op, ": index ", low < 0 ? low : high, " is outside an output ",
                               spatial == 3 ? "volume" : "plane", " of ", extents, " (", volume, " entries)"));
    }
  }
  const Tensor out =
      scatter(zeros({lead.numel(), volume}, x.dtype()), 1, flat, reshape(planes, {lead.numel(), in.numel()}));
  return from_planes(out, lead, size);
}

// conv_transpose2d and conv_transpose3d over `spatial` axes.
Tensor transposed_convolution(const Tensor& x, const Tensor& weight, const Tensor& bias, const Dims& stride,
                              const Dims& padding, const Dims& output_padding, std::int64_t groups,
                              const Dims& dilation, int spatial, const char* op) {
  if (x.dim() == spatial + 1)
    return squeeze(transposed_convolution(unsqueeze(x, 0), weight, bias, stride, padding, output_padding, groups,
                                          dilation, spatial, op),
                   0);
  if (x.dim() != spatial + 2)
    throw ShapeError(message(op, ": expected an input of shape ", input_layouts(spatial), ", got ", x.shape().str()));
  if (weight.dim() != spatial + 2)
    throw ShapeError(message(op, ": expected a weight of shape (in_channels, out_channels / groups, ",
                             kernel_axes(spatial), "), got ", weight.shape().str()));
  if (groups < 1) throw ValueError(message(op, ": groups must be at least 1, got ", groups));
  const std::int64_t n = x.shape()[0], in = weight.shape()[0], group_out = weight.shape()[1];
  const Dims kernel = spatial_extents(weight.shape(), spatial);
  const std::int64_t out = group_out * groups;
  if (x.shape()[1] != in)
    throw ShapeError(message(op, ": a weight of shape ", weight.shape().str(), " expects ", in,
                             " input channels, got an input of shape ", x.shape().str()));
  if (in % groups != 0)
    throw ValueError(message(op, ": the weight's ", in, " input channels do not split into ", groups, " groups"));
  if (bias.defined() && bias.shape() != Shape{out})
    throw ShapeError(message(op, ": expected a bias of shape (", out, "), got ", bias.shape().str()));
  check_option(stride, spatial, op, "stride");
  check_option(padding, spatial, op, "padding");
  check_option(output_padding, spatial, op, "output_padding");
  check_option(dilation, spatial, op, "dilation");
  Dims full;  // the output before the padding's crop
  std::vector<std::pair<std::int64_t, std::int64_t>> crop;
  for (int a = 0; a < spatial; ++a) {
    const std::int64_t s = along(stride, a), p = along(padding, a), o = along(output_padding, a),
                       d = along(dilation, a);
    if (s < 1 || d < 1 || p < 0)
      throw ValueError(message(op, ": stride ", stride.str(), " and dilation ", dilation.str(),
                               " must be at least 1 and padding ", padding.str(), " at least 0"));
    if (o < 0 || (o >= s && o >= d))
      throw ValueError(message(op, ": output_padding ", output_padding.str(), " must be at least 0 and smaller than ",
                               "the stride ", stride.str(), " or the dilation ", dilation.str()));
    full.push_back((x.shape()[2 + a] - 1) * s + d * (kernel[a] - 1) + 1);
    const std::int64_t size = full[a] - 2 * p + o;
    if (size < 1) {
      std::string extents = std::to_string(kernel[0]);
      for (int b = 1; b < spatial; ++b) extents += "x" + std::to_string(kernel[b]);
      throw ValueError(message(op, ": an input of shape ", x.shape().str(), " and a kernel of ", extents,
                               " give an output of size ", size, " along axis ", 2 + a, " with padding ",
                               padding.str()));
    }
    crop.emplace_back(-p, o - p);
  }
  // Every input pixel's contribution to its output window, (N, out * prod(kernel), pixels), added into
  // the image without padding (fold is unfold's adjoint), then the padding cropped off each side and
  // output_padding's rows and columns added at the end (zeros past the image, as torch's).
  const std::int64_t pixels = spatial_extents(x.shape(), spatial).numel(), taps = kernel.numel();
  const Tensor per_group = transpose(reshape(weight, {groups, in / groups, group_out * taps}), 1, 2);
  const Tensor cols = reshape(matmul(per_group, reshape(x, {n, groups, in / groups, pixels})), {n, out * taps, pixels});
  Tensor y = pad(fold(cols, full, kernel, dilation, {0}, stride), pad_list(crop));
  if (bias.defined()) {
    Shape shape{1, out};
    for (int a = 0; a < spatial; ++a) shape.push_back(1);
    y = y + reshape(bias.to(y.dtype()), shape);
  }
  return y;
}

// The output size of an adaptive pool over `spatial` axes, checked: one value or one per axis, each
// at least 1, over an input with no empty spatial axis.
Dims adaptive_size(const Tensor& x, const Dims& output_size, int spatial, const char* op) {
  if (x.dim() != spatial + 1 && x.dim() != spatial + 2)
    throw ShapeError(message(op, ": expected an input of shape ", input_layouts(spatial), ", got ", x.shape().str()));
  check_option(output_size, spatial, op, "output_size");
  Dims size;
  for (int a = 0; a < spatial; ++a) {
    size.push_back(along(output_size, a));
    if (size[a] < 1) throw ValueError(message(op, ": output_size must be at least 1, got ", output_size.str()));
  }
  if (spatial_extents(x.shape(), spatial).contains(0))
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

// adaptive_avg_pool2d and adaptive_avg_pool3d over `spatial` axes.
Tensor adaptive_avg_pool(const Tensor& x, const Dims& output_size, int spatial, const char* op) {
  const Dims size = adaptive_size(x, output_size, spatial, op);
  if (!x.is_floating_point())
    throw TypeError(message(op, ": expected a floating-point input, got ", dtype_name(x.dtype())));
  if (x.dtype() == kBFloat16)  // averaged in float32, rounded once
    return adaptive_avg_pool(x.to(kFloat32), output_size, spatial, op).to(kBFloat16);
  // A mean over a box is a mean along each axis in turn: a product with an averaging matrix per
  // axis, in x's precision whatever autocast says.
  const tapegrad::detail::AutocastOffGuard exact;
  const Dims in = spatial_extents(x.shape(), spatial);
  const auto averaging = [&](int a) { return averaging_matrix(in[a], size[a], x.dtype()); };
  Tensor y = matmul(matmul(averaging(spatial - 2), x), averaging(spatial - 1).mT());  // the last two axes
  if (spatial == 3) {  // the depth axis over (D, oh * ow)
    Shape shape = y.shape();
    y = matmul(averaging(0), flatten(y, -2));
    shape[shape.size() - 3] = size[0];
    y = reshape(y, shape);
  }
  return y;
}

// adaptive_max_pool2d_with_indices and adaptive_max_pool3d_with_indices over `spatial` axes.
std::pair<Tensor, Tensor> adaptive_max_pool_with_indices(const Tensor& x, const Dims& output_size, int spatial,
                                                         const char* op) {
  const Dims size = adaptive_size(x, output_size, spatial, op);
  // Each window's largest entry found in place, then gathered, as max_pool2d's.
  const bool unbatched = x.dim() == spatial + 1;
  Tensor indices = adaptive_window_argmax(unbatched ? unsqueeze(x, 0) : x, output_size);
  if (unbatched) indices = squeeze(indices, 0);  // lead + out
  const std::int64_t volume = spatial_extents(x.shape(), spatial).numel();
  const std::int64_t planes = x.numel() == 0 ? 0 : x.numel() / volume;
  const Tensor flat = reshape(indices, {planes, size.numel()});
  const Tensor best = gather(reshape(x, {planes, volume}), 1, flat);
  return {reshape(best, indices.shape()), indices};
}

// fractional_max_pool2d_with_indices and fractional_max_pool3d_with_indices over `spatial` axes.
std::pair<Tensor, Tensor> fractional_max_pool_with_indices(const Tensor& x, const Dims& kernel_size,
                                                           const Dims& output_size,
                                                           const std::vector<double>& output_ratio,
                                                           const Tensor& random_samples, int spatial, const char* op) {
  if (x.dim() != spatial + 1 && x.dim() != spatial + 2)
    throw ShapeError(message(op, ": expected an input of shape ",
                             spatial == 2 ? "(N, C, H, W) or (C, H, W)" : "(N, C, D, H, W) or (C, D, H, W)", ", got ",
                             x.shape().str()));
  if (output_size.empty() == output_ratio.empty())
    throw ValueError(message(op, ": give either output_size or output_ratio (",
                             output_size.empty() ? "neither" : "both", " given)"));
  const Dims extents = spatial_extents(x.shape(), spatial);
  Dims size = output_size;
  if (!output_ratio.empty()) {
    if (output_ratio.size() != 1 && static_cast<int>(output_ratio.size()) != spatial)
      throw ValueError(message(op, ": output_ratio takes one value or ", spatial, ", got ", output_ratio.size()));
    for (int a = 0; a < spatial; ++a) {
      const double r = output_ratio[output_ratio.size() == 1 ? 0 : static_cast<std::size_t>(a)];
      if (!(r > 0.0 && r < 1.0)) throw ValueError(message(op, ": output_ratio must lie in (0, 1), got ", r));
      size.push_back(static_cast<std::int64_t>(static_cast<double>(extents[a]) * r));
    }
  }
  const bool unbatched = x.dim() == spatial + 1;
  Tensor samples = random_samples;
  if (!samples.defined()) {
    Shape shape(x.shape().begin(), x.shape().end() - spatial);  // (N, C) or (C)
    shape.push_back(spatial);
    samples = rand(shape, x.dtype() == kBFloat16 ? kFloat32 : x.dtype());
  }
  // Batched for fractional_window_argmax, which reads the number of spatial axes from the rank.
  Tensor indices = fractional_window_argmax(unbatched ? unsqueeze(x, 0) : x, kernel_size, size,
                                            unbatched ? unsqueeze(samples, 0) : samples);
  if (unbatched) indices = squeeze(indices, 0);
  const std::int64_t volume = extents.numel();
  const std::int64_t planes = x.numel() == 0 ? 0 : x.numel() / volume;
  const std::int64_t outputs = spatial_extents(indices.shape(), spatial).numel();
  const Tensor best = gather(reshape(x, {planes, volume}), 1, reshape(indices, {planes, outputs}));
  return {reshape(best, indices.shape()), indices};
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Dims& stride, const ConvPadding& padding,
              const Dims& dilation, std::int64_t groups) {
  return convolution(x, weight, bias, stride, padding, dilation, groups, 2, "conv2d");
}

Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Dims& stride, const ConvPadding& padding,
              const Dims& dilation, std::int64_t groups) {
  return convolution(x, weight, bias, stride, padding, dilation, groups, 3, "conv3d");
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
  return max_pool_with_indices(x, kernel_size, stride, padding, dilation, ceil_mode, 2, "max_pool2d");
}

std::pair<Tensor, Tensor> max_pool3d_with_indices(const Tensor& x, const Dims& kernel_size, const Dims& stride,
                                                  const Dims& padding, const Dims& dilation, bool ceil_mode) {
  return max_pool_with_indices(x, kernel_size, stride, padding, dilation, ceil_mode, 3, "max_pool3d");
}

Tensor max_pool2d(const Tensor& x, const Dims& kernel_size, const Dims& stride, const Dims& padding,
                  const Dims& dilation, bool ceil_mode) {
  return max_pool2d_with_indices(x, kernel_size, stride, padding, dilation, ceil_mode).first;
}

Tensor max_pool3d(const Tensor& x, const Dims& kernel_size, const Dims& stride, const Dims& padding,
                  const Dims& dilation, bool ceil_mode) {
  return max_pool3d_with_indices(x, kernel_size, stride, padding, dilation, ceil_mode).first;
}

Tensor avg_pool2d(const Tensor& x, const Dims& kernel_size, const Dims& stride, const Dims& padding,
                  bool count_include_pad, bool ceil_mode, std::optional<std::int64_t> divisor_override) {
  return avg_pool(x, kernel_size, stride, padding, count_include_pad, ceil_mode, divisor_override, 2, "avg_pool2d");
}

Tensor avg_pool3d(const Tensor& x, const Dims& kernel_size, const Dims& stride, const Dims& padding,
                  bool count_include_pad, bool ceil_mode, std::optional<std::int64_t> divisor_override) {
  return avg_pool(x, kernel_size, stride, padding, count_include_pad, ceil_mode, divisor_override, 3, "avg_pool3d");
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
  return max_unpool(x, indices, kernel_size, stride, padding, output_size, 2, "max_unpool2d");
}

Tensor max_unpool3d(const Tensor& x, const Tensor& indices, const Dims& kernel_size, const Dims& stride,
                    const Dims& padding, const Dims& output_size) {
  return max_unpool(x, indices, kernel_size, stride, padding, output_size, 3, "max_unpool3d");
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
  return transposed_convolution(x, weight, bias, stride, padding, output_padding, groups, dilation, 2,
                                "conv_transpose2d");
}

Tensor conv_transpose3d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Dims& stride,
                        const Dims& padding, const Dims& output_padding, std::int64_t groups, const Dims& dilation) {
  return transposed_convolution(x, weight, bias, stride, padding, output_padding, groups, dilation, 3,
                                "conv_transpose3d");
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

void check_norm_type(double norm_type, const char* op) {
  if (!(norm_type > 0.0 && std::isfinite(norm_type)))
    throw ValueError(message(op, ": norm_type must be positive and finite, got ", norm_type));
}

// The average of x^p over each window (`averaged`) as the p-norm of the window, torch's way.
Tensor power_average(const Tensor& averaged, double norm_type, const Dims& kernel_size, int spatial) {
  double window = 1.0;
  for (int i = 0; i < spatial; ++i)
    window *= static_cast<double>(kernel_size.size() == 1 ? kernel_size[0] : kernel_size[static_cast<std::size_t>(i)]);
  // sign(a) relu(|a|) is a, with torch's gradient (0 where a is 0).
  return pow(sign(averaged) * relu(abs(averaged)) * window, 1.0 / norm_type);
}

}  // namespace

Tensor lp_pool1d(const Tensor& x, double norm_type, const Dims& kernel_size, const Dims& stride, bool ceil_mode) {
  check_norm_type(norm_type, "lp_pool1d");
  return power_average(avg_pool1d(pow(x, norm_type), kernel_size, stride, {0}, true, ceil_mode), norm_type, kernel_size,
                       1);
}

Tensor lp_pool2d(const Tensor& x, double norm_type, const Dims& kernel_size, const Dims& stride, bool ceil_mode) {
  check_norm_type(norm_type, "lp_pool2d");
  return power_average(avg_pool2d(pow(x, norm_type), kernel_size, stride, {0}, true, ceil_mode), norm_type, kernel_size,
                       2);
}

Tensor lp_pool3d(const Tensor& x, double norm_type, const Dims& kernel_size, const Dims& stride, bool ceil_mode) {
  check_norm_type(norm_type, "lp_pool3d");
  return power_average(avg_pool3d(pow(x, norm_type), kernel_size, stride, {0}, true, ceil_mode), norm_type, kernel_size,
                       3);
}

Tensor adaptive_avg_pool2d(const Tensor& x, const Dims& output_size) {
  return adaptive_avg_pool(x, output_size, 2, "adaptive_avg_pool2d");
}

Tensor adaptive_avg_pool3d(const Tensor& x, const Dims& output_size) {
  return adaptive_avg_pool(x, output_size, 3, "adaptive_avg_pool3d");
}

std::pair<Tensor, Tensor> adaptive_max_pool2d_with_indices(const Tensor& x, const Dims& output_size) {
  return adaptive_max_pool_with_indices(x, output_size, 2, "adaptive_max_pool2d");
}

std::pair<Tensor, Tensor> adaptive_max_pool3d_with_indices(const Tensor& x, const Dims& output_size) {
  return adaptive_max_pool_with_indices(x, output_size, 3, "adaptive_max_pool3d");
}

std::pair<Tensor, Tensor> fractional_max_pool2d_with_indices(const Tensor& x, const Dims& kernel_size,
                                                             const Dims& output_size,
                                                             const std::vector<double>& output_ratio,
                                                             const Tensor& random_samples) {
  return fractional_max_pool_with_indices(x, kernel_size, output_size, output_ratio, random_samples, 2,
                                          "fractional_max_pool2d");
}

std::pair<Tensor, Tensor> fractional_max_pool3d_with_indices(const Tensor& x, const Dims& kernel_size,
                                                             const Dims& output_size,
                                                             const std::vector<double>& output_ratio,
                                                             const Tensor& random_samples) {
  return fractional_max_pool_with_indices(x, kernel_size, output_size, output_ratio, random_samples, 3,
                                          "fractional_max_pool3d");
}

Tensor fractional_max_pool2d(const Tensor& x, const Dims& kernel_size, const Dims& output_size,
                             const std::vector<double>& output_ratio, const Tensor& random_samples) {
  return fractional_max_pool2d_with_indices(x, kernel_size, output_size, output_ratio, random_samples).first;
}

Tensor fractional_max_pool3d(const Tensor& x, const Dims& kernel_size, const Dims& output_size,
                             const std::vector<double>& output_ratio, const Tensor& random_samples) {
  return fractional_max_pool3d_with_indices(x, kernel_size, output_size, output_ratio, random_samples).first;
}

Tensor adaptive_max_pool2d(const Tensor& x, const Dims& output_size) {
  return adaptive_max_pool2d_with_indices(x, output_size).first;
}

Tensor adaptive_max_pool3d(const Tensor& x, const Dims& output_size) {
  return adaptive_max_pool3d_with_indices(x, output_size).first;
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
    throw ValueError(message(name, ": kernel_size takes one value",
                             spatial_axes == 2   ? " or two"
                             : spatial_axes == 3 ? " or three"
                                                 : "",
                             ", got ", kernel.str()));
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
    : options_(options), spatial_axes_(spatial_axes), name_(name) {
  auto [weight, bias] =
      conv_parameters(options.in_channels(), options.out_channels(), options.groups(), options.kernel_size(),
                      spatial_axes, true, options.bias(), options.generator(), name);
  options_.generator(nullptr);  // as ConvImpl's
  weight_ = register_parameter("weight", weight);
  if (bias.defined()) bias_ = register_parameter("bias", bias);
}

Tensor ConvTransposeImpl::forward(const Tensor& x, const Dims& output_size) {
  const int spatial = spatial_axes_;
  Dims output_padding = options_.output_padding();
  const auto counted = [spatial](const Dims& values) { return values.size() == 1 || values.size() == spatial; };
  const bool options_ok = counted(options_.kernel_size()) && counted(options_.stride()) &&
                          counted(options_.padding()) && counted(options_.dilation());
  if (!output_size.empty() && options_ok) {  // (options of the wrong count: the functional form says so)
    // torch's rule: the size may be given with or without N and C; along each axis it must lie
    // between the smallest output and that plus stride - 1, and output_padding is the difference.
    if (output_size.size() != spatial && output_size.size() != x.dim())
      throw ValueError(message(name_, ": output_size takes ", spatial, " spatial extents (or ", x.dim(),
                               " with the leading axes), got ", output_size.str()));
    const auto along = [](const Dims& values, int a) { return values[values.size() == 1 ? 0 : a]; };
    const Dims& kernel = options_.kernel_size();
    output_padding = Dims();
    for (int a = 0; a < spatial; ++a) {
      const std::int64_t wanted = output_size[output_size.size() - spatial + a];
      const std::int64_t smallest = (x.shape()[x.dim() - spatial + a] - 1) * along(options_.stride(), a) -
                                    2 * along(options_.padding(), a) +
                                    along(options_.dilation(), a) * (along(kernel, a) - 1) + 1;
      const std::int64_t largest = smallest + along(options_.stride(), a) - 1;
      if (wanted < smallest || wanted > largest)
        throw ValueError(message(name_, ": output_size ", output_size.str(), " asks for ", wanted, " along axis ",
                                 x.dim() - spatial + a, ", where an input of shape ", x.shape().str(), " gives ",
                                 smallest, " to ", largest));
      output_padding.push_back(wanted - smallest);
    }
  }
  const auto run = spatial == 1   ? functional::conv_transpose1d
                   : spatial == 2 ? functional::conv_transpose2d
                                  : functional::conv_transpose3d;
  return run(x, weight_, bias_, options_.stride(), options_.padding(), output_padding, options_.groups(),
             options_.dilation());
}

// A padding_mode other than zeros: the input padded by F::pad in that mode, then convolved without
// padding, as torch's modules do.
Tensor ConvImpl::padded_input(const Tensor& x, int spatial_axes) const {
  const char* op = spatial_axes == 1 ? "Conv1d" : spatial_axes == 2 ? "Conv2d" : "Conv3d";
  // The 1-D module's options as the 2-D ones over (1, length), whose height padding is dropped below.
  const bool line = spatial_axes == 1;
  const Dims kernel =
      line ? Dims{1, options_.kernel_size().back()} : kernel_extents(options_.kernel_size(), spatial_axes, op);
  ConvPadding padding = options_.padding();
  if (line && !padding.same()) padding = ConvPadding({0, padding.values()[0]});
  const Dims stride = line ? Dims{1, options_.stride()[0]} : options_.stride();
  const Dims dilation = line ? Dims{1, options_.dilation()[0]} : options_.dilation();
  std::vector<std::int64_t> pads =
      functional::pad_list(functional::padding_pairs(padding, stride, dilation, kernel, op));
  if (line) pads.resize(2);
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

Tensor Conv3dImpl::forward(const Tensor& x) {
  if (options_.padding_mode() != PadMode::Constant)
    return functional::conv3d(padded_input(x, 3), weight_, bias_, options_.stride(), {0}, options_.dilation(),
                              options_.groups());
  return functional::conv3d(x, weight_, bias_, options_.stride(), options_.padding(), options_.dilation(),
                            options_.groups());
}

Tensor MaxPool3dImpl::forward(const Tensor& x) {
  return functional::max_pool3d(x, options_.kernel_size(), options_.stride(), options_.padding(), options_.dilation(),
                                options_.ceil_mode());
}

std::pair<Tensor, Tensor> MaxPool3dImpl::forward_with_indices(const Tensor& x) {
  return functional::max_pool3d_with_indices(x, options_.kernel_size(), options_.stride(), options_.padding(),
                                             options_.dilation(), options_.ceil_mode());
}

Tensor MaxUnpool3dImpl::forward(const Tensor& x, const Tensor& indices, const Dims& output_size) {
  return functional::max_unpool3d(x, indices, options_.kernel_size(), options_.stride(), options_.padding(),
                                  output_size);
}

Tensor AvgPool3dImpl::forward(const Tensor& x) {
  return functional::avg_pool3d(x, options_.kernel_size(), options_.stride(), options_.padding(),
                                options_.count_include_pad(), options_.ceil_mode(), options_.divisor_override());
}

Tensor AdaptiveAvgPool3dImpl::forward(const Tensor& x) {
  return functional::adaptive_avg_pool3d(x, options_.output_size());
}

Tensor AdaptiveMaxPool3dImpl::forward(const Tensor& x) {
  return functional::adaptive_max_pool3d(x, options_.output_size());
}

std::pair<Tensor, Tensor> AdaptiveMaxPool1dImpl::forward_with_indices(const Tensor& x) {
  return functional::adaptive_max_pool1d_with_indices(x, options_.output_size());
}

std::pair<Tensor, Tensor> AdaptiveMaxPool2dImpl::forward_with_indices(const Tensor& x) {
  return functional::adaptive_max_pool2d_with_indices(x, options_.output_size());
}

std::pair<Tensor, Tensor> AdaptiveMaxPool3dImpl::forward_with_indices(const Tensor& x) {
  return functional::adaptive_max_pool3d_with_indices(x, options_.output_size());
}

Tensor MaxPool1dImpl::forward(const Tensor& x) {
  return functional::max_pool1d(x, options_.kernel_size(), options_.stride(), options_.padding(), options_.dilation(),
                                options_.ceil_mode());
}

Tensor FractionalMaxPool2dImpl::forward(const Tensor& x) { return forward_with_indices(x).first; }

std::pair<Tensor, Tensor> FractionalMaxPool2dImpl::forward_with_indices(const Tensor& x) {
  return functional::fractional_max_pool2d_with_indices(x, options_.kernel_size(), options_.output_size(),
                                                        options_.output_ratio());
}

Tensor FractionalMaxPool3dImpl::forward(const Tensor& x) { return forward_with_indices(x).first; }

std::pair<Tensor, Tensor> FractionalMaxPool3dImpl::forward_with_indices(const Tensor& x) {
  return functional::fractional_max_pool3d_with_indices(x, options_.kernel_size(), options_.output_size(),
                                                        options_.output_ratio());
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
    throw ValueError(
        message("AvgPool1d: divisor_override is for AvgPool2d and AvgPool3d (torch's AvgPool1d takes none), got ",
                *options.divisor_override()));
}

Tensor AvgPool2dImpl::forward(const Tensor& x) {
  return functional::avg_pool2d(x, options_.kernel_size(), options_.stride(), options_.padding(),
                                options_.count_include_pad(), options_.ceil_mode(), options_.divisor_override());
}

Tensor LPPool1dImpl::forward(const Tensor& x) {
  return functional::lp_pool1d(x, options_.norm_type(), options_.kernel_size(), options_.stride(),
                               options_.ceil_mode());
}

Tensor LPPool2dImpl::forward(const Tensor& x) {
  return functional::lp_pool2d(x, options_.norm_type(), options_.kernel_size(), options_.stride(),
                               options_.ceil_mode());
}

Tensor LPPool3dImpl::forward(const Tensor& x) {
  return functional::lp_pool3d(x, options_.norm_type(), options_.kernel_size(), options_.stride(),
                               options_.ceil_mode());
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
