// Sliding windows over images and volumes: unfold (im2col) and fold (col2im), each the other's gradient, so
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

// A window option: one value (every spatial axis) or one per axis, written into the last `spatial`
// entries of out (a 2-D image is a volume of depth 1, its depth entry left as it was).
void read_option(const Dims& values, std::int64_t (&out)[3], int spatial, std::int64_t minimum, const char* op,
                 const char* name) {
  if (values.size() != 1 && values.size() != spatial)
    throw ValueError(message(op, ": ", name,
                             spatial == 2 ? " takes one value (both axes) or two (height, width), got "
                                          : " takes one value (every axis) or three (depth, height, width), got ",
                             values.size(), " in ", values.str()));
  for (int a = 0; a < spatial; ++a) {
    out[3 - spatial + a] = values[values.size() == 1 ? 0 : a];
    if (out[3 - spatial + a] < minimum)
      throw ValueError(message(op, ": ", name, " must be at least ", minimum, ", got ", values.str()));
  }
}

// "a x b" or "a x b x c": the last `spatial` entries of v, or of f(axis) over them.
template <class F>
std::string extents(int spatial, F f) {
  std::string text;
  for (int a = 3 - spatial; a < 3; ++a) text += (a > 3 - spatial ? " x " : "") + std::to_string(f(a));
  return text;
}

// The windows over an image of the given spatial size (height, width) or (depth, height, width),
// checked: at least one must fit along each axis.
kernels::Windows windows(const Dims& size, const Dims& kernel_size, const Dims& dilation, const Dims& padding,
                         const Dims& stride, const char* op) {
  const int spatial = size.size();
  kernels::Windows w;
  read_option(kernel_size, w.kernel, spatial, 1, op, "kernel_size");
  read_option(dilation, w.dilation, spatial, 1, op, "dilation");
  read_option(padding, w.padding, spatial, 0, op, "padding");
  read_option(stride, w.stride, spatial, 1, op, "stride");
  for (int a = 0; a < spatial; ++a) w.in[3 - spatial + a] = size[a];
  const auto span = [&](int a) { return w.dilation[a] * (w.kernel[a] - 1) + 1; };
  const auto padded = [&](int a) { return w.in[a] + 2 * w.padding[a]; };
  for (int a = 3 - spatial; a < 3; ++a) {
    if (padded(a) < span(a))
      throw ShapeError(message(op, ": the windows do not fit: a kernel of ",
                               extents(spatial, [&](int b) { return w.kernel[b]; }), " with dilation ",
                               extents(spatial, [&](int b) { return w.dilation[b]; }), " spans ",
                               extents(spatial, span), " pixels, and the padded input is ", extents(spatial, padded)));
    w.out[a] = (padded(a) - span(a)) / w.stride[a] + 1;
  }
  return w;
}

// The trailing `spatial` extents of x's shape.
Dims spatial_size(const Tensor& x, int spatial) {
  return Dims(x.shape().begin() + (x.dim() - spatial), x.shape().end());
}

// How many spatial axes the window ops see in x: two in (N, C, H, W) or (C, H, W), three in
// (N, C, D, H, W).
int spatial_axes(const Tensor& x, const char* op) {
  if (x.dim() < 3 || x.dim() > 5)
    throw ShapeError(
        message(op, ": expected an input of shape (N, C, H, W), (C, H, W) or (N, C, D, H, W), got ", x.shape().str()));
  return x.dim() == 5 ? 3 : 2;
}

}  // namespace

Tensor unfold(const Tensor& x, const Dims& kernel_size, const Dims& dilation, const Dims& padding, const Dims& stride) {
  const char* op = "unfold";
  const int spatial = spatial_axes(x, op);
  if (x.dim() == 3) return squeeze(unfold(unsqueeze(x, 0), kernel_size, dilation, padding, stride), 0);
  if (x.dtype() == kBFloat16)  // a copy: exact through float32
    return unfold(x.to(kFloat32), kernel_size, dilation, padding, stride).to(kBFloat16);
  const std::int64_t n = x.shape()[0], channels = x.shape()[1];
  const Dims size = spatial_size(x, spatial);
  const kernels::Windows w = windows(size, kernel_size, dilation, padding, stride, op);
  const Tensor images = kernels::dense(x.detach());
  Tensor out = dispatch_floating(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    Tensor cols = empty({n, channels * w.kernel_size(), w.count()}, x.dtype());
    if (cols.numel() > 0) kernels::im2col(images.data_ptr<T>(), cols.data_ptr<T>(), n, channels, w);
    return cols;
  });
  if (any_requires_grad({&x}))
    record(op, out, {x}, [size, kernel_size, dilation, padding, stride](const Tensor& g) -> TensorList {
      return {fold(g, size, kernel_size, dilation, padding, stride)};
    });
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
  // Three output extents ask for volumes; otherwise images, one value for both axes or two.
  const int spatial = output_size.size() == 3 ? 3 : 2;
  std::int64_t extent[3] = {1, 1, 1};
  read_option(output_size, extent, spatial, 1, op, "output_size");
  const Dims size(extent + (3 - spatial), extent + 3);
  const kernels::Windows w = windows(size, kernel_size, dilation, padding, stride, op);
  const std::int64_t n = x.shape()[0], rows = x.shape()[1];
  if (rows % w.kernel_size() != 0 || x.shape()[2] != w.count())
    throw ShapeError(message(op, ": an input of shape ", x.shape().str(), " does not hold the windows of a ",
                             extents(spatial, [&](int a) { return w.kernel[a]; }), " kernel over ",
                             extents(spatial, [&](int a) { return w.in[a]; }), ": expected (N, C * ", w.kernel_size(),
                             ", ", w.count(), ")"));
  const std::int64_t channels = rows / w.kernel_size();
  Shape shape{n, channels};
  for (const std::int64_t e : size) shape.push_back(e);
  const Tensor cols = kernels::dense(x.detach());
  Tensor out = dispatch_floating(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    Tensor images = zeros(shape, x.dtype());
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
  const int spatial = spatial_axes(x, op);
  if (x.dim() == 3) return squeeze(window_argmax(unsqueeze(x, 0), kernel_size, dilation, padding, stride, overhang), 0);
  if (x.dtype() == kBFloat16) return window_argmax(x.to(kFloat32), kernel_size, dilation, padding, stride, overhang);
  kernels::Windows w = windows(spatial_size(x, spatial), kernel_size, dilation, padding, stride, op);
  std::int64_t extra[3] = {0, 0, 0};
  read_option(overhang, extra, spatial, 0, op, "overhang");
  for (int a = 3 - spatial; a < 3; ++a) {
    w.out[a] = (w.in[a] + 2 * w.padding[a] + extra[a] - (w.dilation[a] * (w.kernel[a] - 1) + 1)) / w.stride[a] + 1;
    // Each window needs a tap inside the input along every axis.
    for (std::int64_t k = 0; k < w.out[a]; ++k) {
      bool inside = false;
      for (std::int64_t t = 0; t < w.kernel[a] && !inside; ++t) inside = w.inside(a, w.at(a, k, t));
      if (!inside)
        throw ValueError(message(op, ": window ", k, " along axis ", a - 1 + spatial, " (kernel ", w.kernel[a],
                                 ", dilation ", w.dilation[a], ", padding ", w.padding[a], ", stride ", w.stride[a],
                                 ") holds no pixel of an input of shape ", x.shape().str()));
    }
  }
  // The kernel keeps a float32 volume's offsets in 32 bits: a larger one is searched in float64.
  if (x.dtype() == kFloat32 && w.volume() >= std::int64_t{1} << 32)
    return window_argmax(x.to(kFloat64), kernel_size, dilation, padding, stride, overhang);
  const std::int64_t volumes = x.shape()[0] * x.shape()[1];
  Shape shape{x.shape()[0], x.shape()[1]};
  for (int a = 3 - spatial; a < 3; ++a) shape.push_back(w.out[a]);
  const Tensor images = kernels::dense(x.detach());
  return dispatch_floating(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    Tensor indices = empty(shape, kInt64);
    if (indices.numel() > 0) kernels::window_argmax(images.data_ptr<T>(), indices.data_ptr<std::int64_t>(), volumes, w);
    return indices;
  });
}

Tensor adaptive_window_argmax(const Tensor& x, const Dims& output_size) {
  const char* op = "adaptive_window_argmax";
  const int spatial = spatial_axes(x, op);
  if (x.dim() == 3) return squeeze(adaptive_window_argmax(unsqueeze(x, 0), output_size), 0);
  if (x.dtype() == kBFloat16) return adaptive_window_argmax(x.to(kFloat32), output_size);
  std::int64_t size[3] = {1, 1, 1}, in[3] = {1, 1, 1};
  read_option(output_size, size, spatial, 1, op, "output_size");
  for (int a = 0; a < spatial; ++a) in[3 - spatial + a] = x.shape()[2 + a];
  if (in[0] < 1 || in[1] < 1 || in[2] < 1)
    throw ShapeError(message(op, ": the input of shape ", x.shape().str(), " has an empty spatial axis"));
  kernels::Ranges ranges[3];
  Shape shape{x.shape()[0], x.shape()[1]};
  for (int a = 0; a < 3; ++a) {
    for (std::int64_t i = 0; i < size[a]; ++i) {
      ranges[a].start.push_back(i * in[a] / size[a]);
      ranges[a].end.push_back(((i + 1) * in[a] + size[a] - 1) / size[a]);
    }
    if (a >= 3 - spatial) shape.push_back(size[a]);
  }
  const Tensor images = kernels::dense(x.detach());
  return dispatch_floating(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    Tensor indices = empty(shape, kInt64);
    if (indices.numel() > 0)
      kernels::ranges_argmax(images.data_ptr<T>(), indices.data_ptr<std::int64_t>(), x.shape()[0] * x.shape()[1], in,
                             ranges);
    return indices;
  });
}

namespace {

// Where fractional max pooling's windows start along one axis of n entries (see ops.h), with torch's
// arithmetic in T.
template <class T>
kernels::Ranges fractional_ranges(T sample, std::int64_t n, std::int64_t out, std::int64_t k) {
  kernels::Ranges r;
  if (out > 1) {
    const T alpha = static_cast<T>(n - k) / static_cast<T>(out - 1);
    for (std::int64_t i = 0; i < out - 1; ++i)
      r.start.push_back(static_cast<std::int64_t>((static_cast<T>(i) + sample) * alpha) -
                        static_cast<std::int64_t>(sample * alpha));
  }
  r.start.push_back(n - k);
  for (const std::int64_t start : r.start) r.end.push_back(start + k);
  return r;
}

}  // namespace

Tensor fractional_window_argmax(const Tensor& x, const Dims& kernel_size, const Dims& output_size,
                                const Tensor& samples) {
  const char* op = "fractional_window_argmax";
  const int spatial = spatial_axes(x, op);
  if (x.dim() == 3)
    return squeeze(fractional_window_argmax(unsqueeze(x, 0), kernel_size, output_size, unsqueeze(samples, 0)), 0);
  if (x.dtype() == kBFloat16)
    return fractional_window_argmax(x.to(kFloat32), kernel_size, output_size, samples.to(kFloat32));
  std::int64_t kernel[3] = {1, 1, 1}, size[3] = {1, 1, 1}, in[3] = {1, 1, 1};
  read_option(kernel_size, kernel, spatial, 1, op, "kernel_size");
  read_option(output_size, size, spatial, 1, op, "output_size");
  for (int a = 0; a < spatial; ++a) in[3 - spatial + a] = x.shape()[2 + a];
  for (int a = 3 - spatial; a < 3; ++a)
    if (kernel[a] + size[a] - 1 > in[a])
      throw ValueError(message(op, ": windows of ", kernel[a], " with ", size[a], " outputs need at least ",
                               kernel[a] + size[a] - 1, " entries along axis ", 2 + a - (3 - spatial),
                               " of the input of shape ", x.shape().str()));
  const std::int64_t planes = x.shape()[0] * x.shape()[1];
  if (samples.shape() != Shape{x.shape()[0], x.shape()[1], spatial} || samples.dtype() != x.dtype())
    throw ValueError(message(op, ": samples must be ", dtype_name(x.dtype()), " of shape (", x.shape()[0], ",",
                             x.shape()[1], ",", spatial, "), got ", dtype_name(samples.dtype()), " ",
                             samples.shape().str()));
  Shape shape{x.shape()[0], x.shape()[1]};
  for (int a = 3 - spatial; a < 3; ++a) shape.push_back(size[a]);
  const Tensor images = kernels::dense(x.detach());
  const Tensor draws = kernels::dense(samples.detach());
  return dispatch_floating(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* u = draws.data_ptr<T>();
    for (std::int64_t i = 0; i < planes * spatial; ++i)
      if (!(u[i] >= T(0) && u[i] < T(1)))
        throw ValueError(message(op, ": samples must lie in [0, 1), got ", static_cast<double>(u[i])));
    Tensor indices = empty(shape, kInt64);
    const std::int64_t volume = in[0] * in[1] * in[2], outputs = size[0] * size[1] * size[2];
    const T* image = images.data_ptr<T>();
    std::int64_t* out = indices.data_ptr<std::int64_t>();
    parallel_for(0, planes, 1, [&](std::int64_t first, std::int64_t last) {
      for (std::int64_t p = first; p < last; ++p) {
        // torch's order of the samples: (width, height) for 2-D planes, (depth, height, width) for 3-D.
        const T* plane_u = u + p * spatial;
        kernels::Ranges ranges[3];
        ranges[0] =
            spatial == 3 ? fractional_ranges<T>(plane_u[0], in[0], size[0], kernel[0]) : kernels::Ranges{{0}, {1}};
        ranges[1] = fractional_ranges<T>(plane_u[1], in[1], size[1], kernel[1]);
        ranges[2] = fractional_ranges<T>(plane_u[spatial == 3 ? 2 : 0], in[2], size[2], kernel[2]);
        kernels::ranges_argmax(image + p * volume, out + p * outputs, 1, in, ranges);
      }
    });
    return indices;
  });
}

}  // namespace tapegrad
