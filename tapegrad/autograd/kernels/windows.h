#pragma once
// Sliding windows over images (the loops of unfold and fold, ops/windows.cpp): im2col copies every
// window of a (channels, height, width) image into a column of a (channels * kh * kw, windows)
// matrix, zeros where the window reaches into the padding; col2im adds the columns back into the
// image, the adjoint (and the gradient) of im2col. A convolution is then one matrix product. Static,
// see rows.h.

#include <cstdint>

#include "tapegrad/autograd/parallel.h"

namespace tapegrad::kernels {

// The geometry of the windows over the two spatial axes (height, width).
struct Windows {
  std::int64_t kernel[2] = {1, 1};
  std::int64_t dilation[2] = {1, 1};
  std::int64_t padding[2] = {0, 0};
  std::int64_t stride[2] = {1, 1};
  std::int64_t in[2] = {1, 1};   // the image's height and width
  std::int64_t out[2] = {1, 1};  // how many windows fit along each

  std::int64_t kernel_size() const { return kernel[0] * kernel[1]; }
  std::int64_t count() const { return out[0] * out[1]; }
};

// cols[(c * kh + i) * kw + j, y * ow + x] = image[c, y * sh - ph + i * dh, x * sw - pw + j * dw], or 0 outside
// the image. images: (n, channels, height, width) contiguous; cols: (n, channels * kh * kw, oh * ow).
template <class T>
static void im2col(const T* images, T* cols, std::int64_t n, std::int64_t channels, const Windows& w) {
  const std::int64_t plane = w.in[0] * w.in[1], rows = channels * w.kernel_size(), windows = w.count();
  parallel_for(0, n * channels, 1, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t nc = first; nc < last; ++nc) {
      const T* image = images + nc * plane;
      T* out = cols + (nc / channels) * rows * windows + (nc % channels) * w.kernel_size() * windows;
      for (std::int64_t i = 0; i < w.kernel[0]; ++i)
        for (std::int64_t j = 0; j < w.kernel[1]; ++j, out += windows)
          for (std::int64_t y = 0; y < w.out[0]; ++y) {
            const std::int64_t iy = y * w.stride[0] - w.padding[0] + i * w.dilation[0];
            T* row = out + y * w.out[1];
            if (iy < 0 || iy >= w.in[0]) {
              for (std::int64_t x = 0; x < w.out[1]; ++x) row[x] = T(0);
              continue;
            }
            const T* line = image + iy * w.in[1];
            const std::int64_t offset = j * w.dilation[1] - w.padding[1];
            for (std::int64_t x = 0; x < w.out[1]; ++x) {
              const std::int64_t ix = x * w.stride[1] + offset;
              row[x] = ix >= 0 && ix < w.in[1] ? line[ix] : T(0);
            }
          }
    }
  });
}

// The adjoint of im2col: images (zeroed by the caller) += every column entry at the pixel it was
// copied from; entries from the padding are dropped. One image channel per task, so no two tasks
// write the same pixel.
template <class T>
static void col2im(const T* cols, T* images, std::int64_t n, std::int64_t channels, const Windows& w) {
  const std::int64_t plane = w.in[0] * w.in[1], rows = channels * w.kernel_size(), windows = w.count();
  parallel_for(0, n * channels, 1, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t nc = first; nc < last; ++nc) {
      T* image = images + nc * plane;
      const T* in = cols + (nc / channels) * rows * windows + (nc % channels) * w.kernel_size() * windows;
      for (std::int64_t i = 0; i < w.kernel[0]; ++i)
        for (std::int64_t j = 0; j < w.kernel[1]; ++j, in += windows)
          for (std::int64_t y = 0; y < w.out[0]; ++y) {
            const std::int64_t iy = y * w.stride[0] - w.padding[0] + i * w.dilation[0];
            if (iy < 0 || iy >= w.in[0]) continue;
            const T* row = in + y * w.out[1];
            T* line = image + iy * w.in[1];
            const std::int64_t offset = j * w.dilation[1] - w.padding[1];
            for (std::int64_t x = 0; x < w.out[1]; ++x) {
              const std::int64_t ix = x * w.stride[1] + offset;
              if (ix >= 0 && ix < w.in[1]) line[ix] += row[x];
            }
          }
    }
  });
}

}  // namespace tapegrad::kernels
