// Sliding windows over images: unfold (im2col) and fold (col2im), each the other's gradient, so
// gradients of every order follow. The loops are kernels/windows.h's; the convolutions and
// pools of nn/conv.h are built on these and matmul.

#include <string>
#include <vector>

#include "tapegrad/autograd/format.h"
#include "tapegrad/autograd/kernels/elementwise.h"
#include "tapegrad/autograd/kernels/windows.h"
#include "tapegrad/autograd/ops.h"

namespace tapegrad {

namespace {

// One of the window options for the two spatial axes: a list of one entry (both axes) or two.
void read_pair(const Dims& values, std::int64_t (&out)[2], std::int64_t minimum, const char* op, const char* name) {
  if (values.size() != 1 && values.size() != 2)
    throw ValueError(message(op, ": ", name, " takes one value (both axes) or two (height, width), got ", values.size(),
                             " in ", values.str()));
  for (int a = 0; a < 2; ++a) {
    out[a] = values[values.size() == 1 ? 0 : a];
    if (out[a] < minimum)
      throw ValueError(message(op, ": ", name, " must be at least ", minimum, ", got ", values.str()));
  }
}

// The windows over a height x width image, checked: at least one must fit along each axis.
kernels::Windows windows(std::int64_t height, std::int64_t width, const Dims& kernel_size, const Dims& dilation,
                         const Dims& padding, const Dims& stride, const char* op) {
  kernels::Windows w;
  read_pair(kernel_size, w.kernel, 1, op, "kernel_size");
  read_pair(dilation, w.dilation, 1, op, "dilation");
  read_pair(padding, w.padding, 0, op, "padding");
  read_pair(stride, w.stride, 1, op, "stride");
  w.in[0] = height;
  w.in[1] = width;
  for (int a = 0; a < 2; ++a) {
    const std::int64_t padded = w.in[a] + 2 * w.padding[a], span = w.dilation[a] * (w.kernel[a] - 1) + 1;
    if (padded < span)
      throw ShapeError(message(op, ": the windows do not fit: a kernel of ", w.kernel[0], " x ", w.kernel[1],
                               " with dilation ", w.dilation[0], " x ", w.dilation[1], " spans ",
                               w.dilation[0] * (w.kernel[0] - 1) + 1, " x ", w.dilation[1] * (w.kernel[1] - 1) + 1,
                               " pixels, and the padded input is ", w.in[0] + 2 * w.padding[0], " x ",
                               w.in[1] + 2 * w.padding[1]));
    w.out[a] = (padded - span) / w.stride[a] + 1;
  }
  return w;
}

}  // namespace

Tensor unfold(const Tensor& x, const Dims& kernel_size, const Dims& dilation, const Dims& padding, const Dims& stride) {
  const char* op = "unfold";
  if (x.dim() == 3) return squeeze(unfold(unsqueeze(x, 0), kernel_size, dilation, padding, stride), 0);
  if (x.dim() != 4)
    throw ShapeError(message(op, ": expected an input of shape (N, C, H, W) or (C, H, W), got ", x.shape().str()));
  if (x.dtype() == kBFloat16)  // a copy: exact through float32
    return unfold(x.to(kFloat32), kernel_size, dilation, padding, stride).to(kBFloat16);
  const std::int64_t n = x.shape()[0], channels = x.shape()[1];
  const kernels::Windows w = windows(x.shape()[2], x.shape()[3], kernel_size, dilation, padding, stride, op);
  const Tensor images = kernels::dense(x.detach());
  Tensor out = dispatch_floating(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    Tensor cols = empty({n, channels * w.kernel_size(), w.count()}, x.dtype());
    if (cols.numel() > 0) kernels::im2col(images.data_ptr<T>(), cols.data_ptr<T>(), n, channels, w);
    return cols;
  });
  if (any_requires_grad({&x}))
    record(op, out, {x},
           [size = Dims{x.shape()[2], x.shape()[3]}, kernel_size, dilation, padding,
            stride](const Tensor& g) -> TensorList { return {fold(g, size, kernel_size, dilation, padding, stride)}; });
  return out;
}

Tensor fold(const Tensor& x, const Dims& output_size, const Dims& kernel_size, const Dims& dilation,
            const Dims& padding, const Dims& stride) {
  const char* op = "fold";
  if (x.dim() == 2) return squeeze(fold(unsqueeze(x, 0), output_size, kernel_size, dilation, padding, stride), 0);
  if (x.dim() != 3)
    throw ShapeError(message(
        op, ": expected an input of shape (N, C * kh * kw, windows) or (C * kh * kw, windows), got ", x.shape().str()));
  if (x.dtype() == kBFloat16)  // sums: in float32, rounded once
    return fold(x.to(kFloat32), output_size, kernel_size, dilation, padding, stride).to(kBFloat16);
  std::int64_t size[2];
  read_pair(output_size, size, 1, op, "output_size");
  const kernels::Windows w = windows(size[0], size[1], kernel_size, dilation, padding, stride, op);
  const std::int64_t n = x.shape()[0], rows = x.shape()[1];
  if (rows % w.kernel_size() != 0 || x.shape()[2] != w.count())
    throw ShapeError(message(op, ": an input of shape ", x.shape().str(), " does not hold the windows of a ",
                             w.kernel[0], " x ", w.kernel[1], " kernel over ", size[0], " x ", size[1],
                             ": expected (N, C * ", w.kernel_size(), ", ", w.count(), ")"));
  const std::int64_t channels = rows / w.kernel_size();
  const Tensor cols = kernels::dense(x.detach());
  Tensor out = dispatch_floating(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    Tensor images = zeros({n, channels, size[0], size[1]}, x.dtype());
    if (cols.numel() > 0) kernels::col2im(cols.data_ptr<T>(), images.data_ptr<T>(), n, channels, w);
    return images;
  });
  if (any_requires_grad({&x}))
    record(op, out, {x}, [kernel_size, dilation, padding, stride](const Tensor& g) -> TensorList {
      return {unfold(g, kernel_size, dilation, padding, stride)};
    });
  return out;
}

Tensor window_argmax(const Tensor& x, const Dims& kernel_size, const Dims& dilation, const Dims& padding,
                     const Dims& stride, const Dims& overhang) {
  const char* op = "window_argmax";
  if (x.dim() == 3) return squeeze(window_argmax(unsqueeze(x, 0), kernel_size, dilation, padding, stride, overhang), 0);
  if (x.dim() != 4)
    throw ShapeError(message(op, ": expected an input of shape (N, C, H, W) or (C, H, W), got ", x.shape().str()));
  if (x.dtype() == kBFloat16) return window_argmax(x.to(kFloat32), kernel_size, dilation, padding, stride, overhang);
  kernels::Windows w = windows(x.shape()[2], x.shape()[3], kernel_size, dilation, padding, stride, op);
  std::int64_t extra[2];
  read_pair(overhang, extra, 0, op, "overhang");
  for (int a = 0; a < 2; ++a) {
    w.out[a] = (w.in[a] + 2 * w.padding[a] + extra[a] - (w.dilation[a] * (w.kernel[a] - 1) + 1)) / w.stride[a] + 1;
    // Each window needs a tap inside the input along both axes.
    for (std::int64_t k = 0; k < w.out[a]; ++k) {
      const std::int64_t start = k * w.stride[a] - w.padding[a];
      bool inside = false;
      for (std::int64_t i = 0; i < w.kernel[a] && !inside; ++i)
        inside = start + i * w.dilation[a] >= 0 && start + i * w.dilation[a] < w.in[a];
      if (!inside)
        throw ValueError(message(op, ": window ", k, " along axis ", 2 + a, " (kernel ", w.kernel[a], ", dilation ",
                                 w.dilation[a], ", padding ", w.padding[a], ", stride ", w.stride[a],
                                 ") holds no pixel of an input of shape ", x.shape().str()));
    }
  }
  // The kernel keeps a float32 plane's offsets in 32 bits: a larger plane is searched in float64.
  if (x.dtype() == kFloat32 && w.in[0] * w.in[1] >= std::int64_t{1} << 32)
    return window_argmax(x.to(kFloat64), kernel_size, dilation, padding, stride, overhang);
  const std::int64_t planes = x.shape()[0] * x.shape()[1];
  const Tensor images = kernels::dense(x.detach());
  return dispatch_floating(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    Tensor indices = empty({x.shape()[0], x.shape()[1], w.out[0], w.out[1]}, kInt64);
    if (indices.numel() > 0) kernels::window_argmax(images.data_ptr<T>(), indices.data_ptr<std::int64_t>(), planes, w);
    return indices;
  });
}

Tensor adaptive_window_argmax(const Tensor& x, const Dims& output_size) {
  const char* op = "adaptive_window_argmax";
  if (x.dim() == 3) return squeeze(adaptive_window_argmax(unsqueeze(x, 0), output_size), 0);
  if (x.dim() != 4)
    throw ShapeError(message(op, ": expected an input of shape (N, C, H, W) or (C, H, W), got ", x.shape().str()));
  if (x.dtype() == kBFloat16) return adaptive_window_argmax(x.to(kFloat32), output_size);
  std::int64_t size[2];
  read_pair(output_size, size, 1, op, "output_size");
  const std::int64_t height = x.shape()[2], width = x.shape()[3];
  if (height < 1 || width < 1)
    throw ShapeError(message(op, ": the input of shape ", x.shape().str(), " has an empty spatial axis"));
  std::vector<std::int64_t> starts[2], ends[2];
  for (int a = 0; a < 2; ++a) {
    const std::int64_t n = a == 0 ? height : width;
    for (std::int64_t i = 0; i < size[a]; ++i) {
      starts[a].push_back(i * n / size[a]);
      ends[a].push_back(((i + 1) * n + size[a] - 1) / size[a]);
    }
  }
  const Tensor images = kernels::dense(x.detach());
  return dispatch_floating(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    Tensor indices = empty({x.shape()[0], x.shape()[1], size[0], size[1]}, kInt64);
    if (indices.numel() > 0)
      kernels::ranges_argmax(images.data_ptr<T>(), indices.data_ptr<std::int64_t>(), x.shape()[0] * x.shape()[1],
                             height, width, starts[0], ends[0], starts[1], ends[1]);
    return indices;
  });
}

}  // namespace tapegrad
