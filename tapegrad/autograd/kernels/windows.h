#pragma once
// Sliding windows over images (the loops of unfold and fold, ops/windows.cpp): im2col copies every
// window of a (channels, height, width) image into a column of a (channels * kh * kw, windows)
// matrix, zeros where the window reaches into the padding; col2im adds the columns back into the
// image, the adjoint (and the gradient) of im2col. A convolution is then one matrix product. Static,
// see rows.h.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

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

// The windows x in [0, out) whose pixel x * stride + offset lies inside a row of `width` pixels:
// [first, last), so the loops below copy or add that range without a test per pixel.
inline void inside_range(std::int64_t offset, std::int64_t stride, std::int64_t width, std::int64_t out,
                         std::int64_t& first, std::int64_t& last) {
  last = width - offset <= 0 ? 0 : std::min(out, (width - offset + stride - 1) / stride);
  first = std::min(last, offset >= 0 ? std::int64_t{0} : (-offset + stride - 1) / stride);
}

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
            const std::int64_t offset = j * w.dilation[1] - w.padding[1], stride = w.stride[1];
            std::int64_t first, last;
            inside_range(offset, stride, w.in[1], w.out[1], first, last);
            for (std::int64_t x = 0; x < first; ++x) row[x] = T(0);
            if (stride == 1) {
              for (std::int64_t x = first; x < last; ++x) row[x] = line[x + offset];
            } else {
              for (std::int64_t x = first; x < last; ++x) row[x] = line[x * stride + offset];
            }
            for (std::int64_t x = last; x < w.out[1]; ++x) row[x] = T(0);
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
            const std::int64_t offset = j * w.dilation[1] - w.padding[1], stride = w.stride[1];
            std::int64_t first, last;
            inside_range(offset, stride, w.in[1], w.out[1], first, last);
            if (stride == 1) {
              for (std::int64_t x = first; x < last; ++x) line[x + offset] += row[x];
            } else {
              for (std::int64_t x = first; x < last; ++x) line[x * stride + offset] += row[x];
            }
          }
    }
  });
}

// The largest entry of every window: indices[plane, y * ow + x] = the offset iy * width + ix, within
// its plane, of the window's first largest pixel in row-major order, or of its last NaN (torch's CPU
// rule), the taps in the padding or past the image skipped. images: (planes, height, width) contiguous; indices:
// (planes, oh * ow). Every window must hold at least one pixel of the image, and a plane's offsets
// must fit in T's width (2^32 pixels for float: the caller computes larger planes in double).
template <class T>
static void window_argmax(const T* images, std::int64_t* indices, std::int64_t planes, const Windows& w) {
  using Bits = std::conditional_t<sizeof(T) == 8, std::uint64_t, std::uint32_t>;
  constexpr Bits kUnset = ~Bits{0};
  const std::int64_t width = w.in[1], plane = w.in[0] * width, windows = w.count(), ow = w.out[1];
  parallel_for(0, planes, 1, [&](std::int64_t first_plane, std::int64_t last_plane) {
    std::vector<Bits> best(static_cast<std::size_t>(ow)), best_value(static_cast<std::size_t>(ow));
    for (std::int64_t p = first_plane; p < last_plane; ++p) {
      const T* image = images + p * plane;
      for (std::int64_t y = 0; y < w.out[0]; ++y) {
        // One output row at a time, tap by tap in the kernel's row-major order, each tap a sweep over
        // the windows that see it inside the image. A tap is taken when it is the window's first,
        // larger than the best so far, or a NaN (so the last NaN stays, as torch's). The offsets and the
        // values' bits are selected with masks, not branches: on random data a branch per tap
        // mispredicts half the time.
        std::fill(best.begin(), best.end(), kUnset);
        for (std::int64_t i = 0; i < w.kernel[0]; ++i) {
          const std::int64_t iy = y * w.stride[0] - w.padding[0] + i * w.dilation[0];
          if (iy < 0 || iy >= w.in[0]) continue;
          const T* line = image + iy * width;
          for (std::int64_t j = 0; j < w.kernel[1]; ++j) {
            const std::int64_t offset = j * w.dilation[1] - w.padding[1], stride = w.stride[1];
            std::int64_t first, last;
            inside_range(offset, stride, width, ow, first, last);
            for (std::int64_t x = first; x < last; ++x) {
              const std::int64_t at = x * stride + offset;
              const T v = line[at];
              T b;
              std::memcpy(&b, &best_value[x], sizeof b);
              const bool take = (best[x] == kUnset) | (v > b) | (v != v);
              const Bits mask = -static_cast<Bits>(take);  // all ones when taken
              Bits bits;
              std::memcpy(&bits, &v, sizeof v);
              best[x] = (static_cast<Bits>(iy * width + at) & mask) | (best[x] & ~mask);
              best_value[x] = (bits & mask) | (best_value[x] & ~mask);
            }
          }
        }
        std::int64_t* out = indices + p * windows + y * ow;
        for (std::int64_t x = 0; x < ow; ++x) out[x] = static_cast<std::int64_t>(best[x]);
      }
    }
  });
}

// The largest entry of every window given by its row and column ranges: window (y, x) covers rows
// [row_start[y], row_end[y]) and columns [col_start[x], col_end[x]) (each range non-empty, inside
// the plane), and indices[plane, y * ow + x] = the offset r * width + c of its first largest entry in
// row-major order, or of its last NaN (torch's CPU rule). images: (planes, height, width) contiguous.
template <class T>
static void ranges_argmax(const T* images, std::int64_t* indices, std::int64_t planes, std::int64_t height,
                          std::int64_t width, const std::vector<std::int64_t>& row_start,
                          const std::vector<std::int64_t>& row_end, const std::vector<std::int64_t>& col_start,
                          const std::vector<std::int64_t>& col_end) {
  using Bits = std::conditional_t<sizeof(T) == 8, std::uint64_t, std::uint32_t>;
  const auto oh = static_cast<std::int64_t>(row_start.size()), ow = static_cast<std::int64_t>(col_start.size());
  parallel_for(0, planes, 1, [&](std::int64_t first_plane, std::int64_t last_plane) {
    for (std::int64_t p = first_plane; p < last_plane; ++p) {
      const T* image = images + p * height * width;
      std::int64_t* out = indices + p * oh * ow;
      for (std::int64_t y = 0; y < oh; ++y)
        for (std::int64_t x = 0; x < ow; ++x, ++out) {
          std::int64_t best = row_start[y] * width + col_start[x];
          T best_value = image[best];
          for (std::int64_t r = row_start[y]; r < row_end[y]; ++r)
            for (std::int64_t c = r == row_start[y] ? col_start[x] + 1 : col_start[x]; c < col_end[x]; ++c) {
              const std::int64_t at = r * width + c;
              const T v = image[at];
              // Masks rather than branches, as window_argmax's.
              const auto mask = -static_cast<std::uint64_t>((v > best_value) | (v != v));
              best = static_cast<std::int64_t>((static_cast<std::uint64_t>(at) & mask) |
                                               (static_cast<std::uint64_t>(best) & ~mask));
              Bits new_bits, old_bits;
              std::memcpy(&new_bits, &v, sizeof v);
              std::memcpy(&old_bits, &best_value, sizeof best_value);
              new_bits = (new_bits & static_cast<Bits>(mask)) | (old_bits & ~static_cast<Bits>(mask));
              std::memcpy(&best_value, &new_bits, sizeof best_value);
            }
          *out = best;
        }
    }
  });
}

}  // namespace tapegrad::kernels
