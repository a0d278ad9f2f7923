#pragma once
// Sliding windows over images and volumes (the loops of unfold and fold, ops/windows.cpp): im2col
// copies every window of a (channels, depth, height, width) image into a column of a (channels * kd *
// kh * kw, windows) matrix, zeros where the window reaches into the padding; col2im adds the columns back into the
// image, the adjoint (and the gradient) of im2col. A convolution is then one matrix product. Static,
// see rows.h.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "tapegrad/autograd/parallel.h"

namespace tapegrad::kernels {

// The geometry of the windows over three spatial axes (depth, height, width); a 2-D image is one of
// depth 1 with a kernel of depth 1.
struct Windows {
  std::int64_t kernel[3] = {1, 1, 1};
  std::int64_t dilation[3] = {1, 1, 1};
  std::int64_t padding[3] = {0, 0, 0};
  std::int64_t stride[3] = {1, 1, 1};
  std::int64_t in[3] = {1, 1, 1};   // the image's depth, height and width
  std::int64_t out[3] = {1, 1, 1};  // how many windows fit along each

  std::int64_t kernel_size() const { return kernel[0] * kernel[1] * kernel[2]; }
  std::int64_t count() const { return out[0] * out[1] * out[2]; }
  std::int64_t volume() const { return in[0] * in[1] * in[2]; }
  // The input coordinate along axis a of tap t of window k, which may lie in the padding.
  std::int64_t at(int a, std::int64_t k, std::int64_t t) const { return k * stride[a] - padding[a] + t * dilation[a]; }
  bool inside(int a, std::int64_t coordinate) const { return coordinate >= 0 && coordinate < in[a]; }
};

// The windows x in [0, out) whose pixel x * stride + offset lies inside a row of `width` pixels:
// [first, last), so the loops below copy or add that range without a test per pixel.
inline void inside_range(std::int64_t offset, std::int64_t stride, std::int64_t width, std::int64_t out,
                         std::int64_t& first, std::int64_t& last) {
  last = width - offset <= 0 ? 0 : std::min(out, (width - offset + stride - 1) / stride);
  first = std::min(last, offset >= 0 ? std::int64_t{0} : (-offset + stride - 1) / stride);
}

// One tap (i, j) of the kernel over one (height, width) plane of the input: row[y * ow + x] =
// plane[y * sh - ph + i * dh, x * sw - pw + j * dw], or 0 outside the plane (plane null: all outside).
template <class T>
static void im2col_plane(const T* plane, T* row, std::int64_t i, std::int64_t j, const Windows& w) {
  const std::int64_t ow = w.out[2], offset = j * w.dilation[2] - w.padding[2], stride = w.stride[2];
  std::int64_t first, last;
  inside_range(offset, stride, w.in[2], ow, first, last);
  for (std::int64_t y = 0; y < w.out[1]; ++y, row += ow) {
    const std::int64_t iy = w.at(1, y, i);
    if (plane == nullptr || !w.inside(1, iy)) {
      std::fill(row, row + ow, T(0));
      continue;
    }
    const T* line = plane + iy * w.in[2];
    std::fill(row, row + first, T(0));
    if (stride == 1) {
      for (std::int64_t x = first; x < last; ++x) row[x] = line[x + offset];
    } else {
      for (std::int64_t x = first; x < last; ++x) row[x] = line[x * stride + offset];
    }
    std::fill(row + last, row + ow, T(0));
  }
}

// cols[((c * kd + d) * kh + i) * kw + j, (z * oh + y) * ow + x] = image[c, z * sd - pd + d * dd, y * sh -
// ph + i * dh, x * sw - pw + j * dw], or 0 outside the image. images: (n, channels, depth, height,
// width) contiguous; cols: (n, channels * kd * kh * kw, od * oh * ow).
template <class T>
static void im2col(const T* images, T* cols, std::int64_t n, std::int64_t channels, const Windows& w) {
  const std::int64_t volume = w.volume(), plane = w.in[1] * w.in[2], area = w.out[1] * w.out[2];
  const std::int64_t rows = channels * w.kernel_size(), windows = w.count();
  parallel_for(0, n * channels, 1, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t nc = first; nc < last; ++nc) {
      const T* image = images + nc * volume;
      T* out = cols + (nc / channels) * rows * windows + (nc % channels) * w.kernel_size() * windows;
      for (std::int64_t d = 0; d < w.kernel[0]; ++d)
        for (std::int64_t i = 0; i < w.kernel[1]; ++i)
          for (std::int64_t j = 0; j < w.kernel[2]; ++j, out += windows)
            for (std::int64_t z = 0; z < w.out[0]; ++z) {
              const std::int64_t iz = w.at(0, z, d);
              im2col_plane(w.inside(0, iz) ? image + iz * plane : nullptr, out + z * area, i, j, w);
            }
    }
  });
}

// The adjoint of im2col_plane: plane += one tap's row of every window at the pixel it was copied
// from; entries from the padding are dropped.
template <class T>
static void col2im_plane(const T* row, T* plane, std::int64_t i, std::int64_t j, const Windows& w) {
  const std::int64_t ow = w.out[2], offset = j * w.dilation[2] - w.padding[2], stride = w.stride[2];
  std::int64_t first, last;
  inside_range(offset, stride, w.in[2], ow, first, last);
  for (std::int64_t y = 0; y < w.out[1]; ++y, row += ow) {
    const std::int64_t iy = w.at(1, y, i);
    if (!w.inside(1, iy)) continue;
    T* line = plane + iy * w.in[2];
    if (stride == 1) {
      for (std::int64_t x = first; x < last; ++x) line[x + offset] += row[x];
    } else {
      for (std::int64_t x = first; x < last; ++x) line[x * stride + offset] += row[x];
    }
  }
}

// The adjoint of im2col: images (zeroed by the caller) += every column entry at the pixel it was
// copied from. One image channel per task, so no two tasks write the same pixel.
template <class T>
static void col2im(const T* cols, T* images, std::int64_t n, std::int64_t channels, const Windows& w) {
  const std::int64_t volume = w.volume(), plane = w.in[1] * w.in[2], area = w.out[1] * w.out[2];
  const std::int64_t rows = channels * w.kernel_size(), windows = w.count();
  parallel_for(0, n * channels, 1, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t nc = first; nc < last; ++nc) {
      T* image = images + nc * volume;
      const T* in = cols + (nc / channels) * rows * windows + (nc % channels) * w.kernel_size() * windows;
      for (std::int64_t d = 0; d < w.kernel[0]; ++d)
        for (std::int64_t i = 0; i < w.kernel[1]; ++i)
          for (std::int64_t j = 0; j < w.kernel[2]; ++j, in += windows)
            for (std::int64_t z = 0; z < w.out[0]; ++z) {
              const std::int64_t iz = w.at(0, z, d);
              if (w.inside(0, iz)) col2im_plane(in + z * area, image + iz * plane, i, j, w);
            }
    }
  });
}

// The largest entry of every window: indices[volume, (z * oh + y) * ow + x] = the offset (iz * height +
// iy) * width + ix, within its (depth, height, width) volume, of the window's first largest pixel in
// row-major order, or of its last NaN (torch's CPU rule), the taps in the padding or past the image
// skipped. images: (volumes, depth, height, width) contiguous; indices: (volumes, od * oh * ow). Every
// window must hold at least one pixel of the image, and a volume's offsets must fit in T's width (2^32
// pixels for float: the caller computes larger volumes in double).
template <class T>
static void window_argmax(const T* images, std::int64_t* indices, std::int64_t volumes, const Windows& w) {
  using Bits = std::conditional_t<sizeof(T) == 8, std::uint64_t, std::uint32_t>;
  constexpr Bits kUnset = ~Bits{0};
  const std::int64_t width = w.in[2], volume = w.volume(), windows = w.count(), ow = w.out[2];
  // Per kernel column j: its offset along a row and the windows that see it inside the row.
  const auto columns = static_cast<std::size_t>(w.kernel[2]);
  std::vector<std::int64_t> offsets(columns), firsts(columns), lasts(columns);
  for (std::size_t j = 0; j < columns; ++j) {
    offsets[j] = static_cast<std::int64_t>(j) * w.dilation[2] - w.padding[2];
    inside_range(offsets[j], w.stride[2], width, ow, firsts[j], lasts[j]);
  }
  parallel_for(0, volumes, 1, [&](std::int64_t first_volume, std::int64_t last_volume) {
    std::vector<Bits> best(static_cast<std::size_t>(ow)), best_value(static_cast<std::size_t>(ow));
    for (std::int64_t p = first_volume; p < last_volume; ++p) {
      const T* image = images + p * volume;
      std::int64_t* out = indices + p * windows;
      for (std::int64_t z = 0; z < w.out[0]; ++z)
        for (std::int64_t y = 0; y < w.out[1]; ++y, out += ow) {
          // One output row at a time, tap by tap in the kernel's row-major order, each tap a sweep
          // over the windows that see it inside the image. A tap is taken when it is the window's
          // first, larger than the best so far, or a NaN (so the last NaN stays, as torch's). The
          // offsets and the values' bits are selected with masks, not branches: on random data a
          // branch per tap mispredicts half the time.
          std::fill(best.begin(), best.end(), kUnset);
          for (std::int64_t d = 0; d < w.kernel[0]; ++d) {
            const std::int64_t iz = w.at(0, z, d);
            if (!w.inside(0, iz)) continue;
            for (std::int64_t i = 0; i < w.kernel[1]; ++i) {
              const std::int64_t iy = w.at(1, y, i);
              if (!w.inside(1, iy)) continue;
              const std::int64_t line_start = (iz * w.in[1] + iy) * width;
              const T* line = image + line_start;
              for (std::size_t j = 0; j < columns; ++j) {
                const std::int64_t offset = offsets[j], stride = w.stride[2];
                for (std::int64_t x = firsts[j]; x < lasts[j]; ++x) {
                  const std::int64_t at = x * stride + offset;
                  const T v = line[at];
                  T b;
                  std::memcpy(&b, &best_value[x], sizeof b);
                  const bool take = (best[x] == kUnset) | (v > b) | (v != v);
                  const Bits mask = -static_cast<Bits>(take);  // all ones when taken
                  Bits bits;
                  std::memcpy(&bits, &v, sizeof v);
                  best[x] = (static_cast<Bits>(line_start + at) & mask) | (best[x] & ~mask);
                  best_value[x] = (bits & mask) | (best_value[x] & ~mask);
                }
              }
            }
          }
          for (std::int64_t x = 0; x < ow; ++x) out[x] = static_cast<std::int64_t>(best[x]);
        }
    }
  });
}

// The windows of an adaptive pool along one axis: window k spans [start[k], end[k]), non-empty and
// inside the axis.
struct Ranges {
  std::vector<std::int64_t> start, end;
  std::int64_t size() const { return static_cast<std::int64_t>(start.size()); }
};

// The largest entry of every window given by its ranges along depth, height and width:
// indices[volume, (z * oh + y) * ow + x] = the offset (r0 * height + r1) * width + r2 of its first
// largest entry in row-major order, or of its last NaN (torch's CPU rule). images: (volumes, depth,
// height, width) contiguous, `in` its (depth, height, width).
template <class T>
static void ranges_argmax(const T* images, std::int64_t* indices, std::int64_t volumes, const std::int64_t (&in)[3],
                          const Ranges (&ranges)[3]) {
  using Bits = std::conditional_t<sizeof(T) == 8, std::uint64_t, std::uint32_t>;
  const Ranges &depth = ranges[0], &rows = ranges[1], &cols = ranges[2];
  const std::int64_t height = in[1], width = in[2], volume = in[0] * height * width;
  parallel_for(0, volumes, 1, [&](std::int64_t first_volume, std::int64_t last_volume) {
    for (std::int64_t p = first_volume; p < last_volume; ++p) {
      const T* image = images + p * volume;
      std::int64_t* out = indices + p * depth.size() * rows.size() * cols.size();
      for (std::int64_t z = 0; z < depth.size(); ++z)
        for (std::int64_t y = 0; y < rows.size(); ++y)
          for (std::int64_t x = 0; x < cols.size(); ++x, ++out) {
            std::int64_t best = (depth.start[z] * height + rows.start[y]) * width + cols.start[x];
            T best_value = image[best];
            for (std::int64_t s = depth.start[z]; s < depth.end[z]; ++s)
              for (std::int64_t r = rows.start[y]; r < rows.end[y]; ++r) {
                const bool first_row = s == depth.start[z] && r == rows.start[y];
                for (std::int64_t c = first_row ? cols.start[x] + 1 : cols.start[x]; c < cols.end[x]; ++c) {
                  const std::int64_t at = (s * height + r) * width + c;
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
              }
            *out = best;
          }
    }
  });
}

}  // namespace tapegrad::kernels
