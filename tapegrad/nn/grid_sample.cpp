#include "tapegrad/nn/grid_sample.h"

#include "tapegrad/autograd/autocast.h"
#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/ops.h"

namespace tapegrad::nn::functional {

namespace {

// The normalised coordinates of an axis of `steps` pixels, as torch's linspace_from_neg_one: -1 to 1
// over the corner pixels' centres with align_corners, scaled by (steps - 1) / steps without; 0 for
// one pixel.
Tensor normalised_axis(std::int64_t steps, bool align_corners, DType dtype) {
  if (steps <= 1) return zeros({std::max<std::int64_t>(steps, 0)}, dtype);
  const Tensor axis = linspace(-1.0, 1.0, steps, dtype);
  return align_corners ? axis : axis * (static_cast<double>(steps - 1) / static_cast<double>(steps));
}

// Mirrors coordinates into [low, high] (given doubled), as torch's reflect_coordinates: the distance
// from low folded by the span, odd folds read backwards. Differentiable (the fold count is data).
Tensor reflect(const Tensor& coord, double twice_low, double twice_high) {
  if (twice_low == twice_high) return zeros_like(coord);
  const double low = twice_low / 2.0, span = (twice_high - twice_low) / 2.0;
  const Tensor distance = abs(coord - low);
  const Tensor folds = floor(distance.detach() / span);
  const Tensor extra = distance - folds * span;
  const Tensor even = eq(remainder(folds, 2.0), 0.0);
  return where(even, extra + low, rsub(span + low, extra));
}

// A grid coordinate in [-1, 1] as a pixel position along an axis of `size` pixels, with the padding
// mode's clamping or mirroring applied.
Tensor source_position(const Tensor& coord, std::int64_t size, const GridSampleOptions& options) {
  const auto n = static_cast<double>(size);
  Tensor position = options.align_corners() ? (coord + 1.0) * (0.5 * (n - 1.0)) : ((coord + 1.0) * n - 1.0) * 0.5;
  if (options.padding_mode() == GridSamplePadding::Reflection)
    position =
        options.align_corners() ? reflect(position, 0.0, 2.0 * (n - 1.0)) : reflect(position, -1.0, 2.0 * n - 1.0);
  if (options.padding_mode() != GridSamplePadding::Zeros) position = clamp(position, 0.0, n - 1.0);
  return position;
}

}  // namespace

Tensor affine_grid(const Tensor& theta, const Dims& size, bool align_corners) {
  if (!theta.is_floating_point())
    throw TypeError(message("affine_grid: theta must be a floating-point tensor, got ", dtype_name(theta.dtype())));
  if (size.size() != 4 || theta.dim() != 3 || theta.size(0) != size[0] || theta.size(1) != 2 || theta.size(2) != 3 ||
      size[2] < 0 || size[3] < 0)
    throw ShapeError(message("affine_grid: expected theta (N, 2, 3) and size (N, C, H, W) with the same N, got theta ",
                             theta.shape().str(), " and size ", size.str()));
  const std::int64_t batch = size[0], height = size[2], width = size[3];
  const Tensor xs = normalised_axis(width, align_corners, theta.dtype()).reshape({1, width, 1});
  const Tensor ys = normalised_axis(height, align_corners, theta.dtype()).reshape({height, 1, 1});
  // base: (H, W, 3) rows (x, y, 1), one per output pixel.
  const Tensor base = concat(
      {expand(xs, {height, width, 1}), expand(ys, {height, width, 1}), ones({height, width, 1}, theta.dtype())}, 2);
  // (1, H * W, 3) @ (N, 3, 2) -> (N, H * W, 2)
  return matmul(base.reshape({1, height * width, 3}), theta.transpose(1, 2)).reshape({batch, height, width, 2});
}

Tensor grid_sample(const Tensor& input, const Tensor& grid, const GridSampleOptions& options) {
  if (detail::is_bf16(input) && detail::is_bf16(grid))  // positions in float32: bfloat16 is exact to 256 only
    return detail::precision_result(grid_sample(detail::widen_bf16(input), detail::widen_bf16(grid), options),
                                    kBFloat16);
  if (!input.is_floating_point())
    throw TypeError(message("grid_sample: input must be a floating-point tensor, got ", dtype_name(input.dtype())));
  if (grid.dtype() != input.dtype())
    throw TypeError(
        message("grid_sample: grid is ", dtype_name(grid.dtype()), " but the input is ", dtype_name(input.dtype())));
  if (input.dim() != 4 || grid.dim() != 4 || grid.size(0) != input.size(0) || grid.size(3) != 2 || input.size(2) == 0 ||
      input.size(3) == 0)
    throw ShapeError(
        message("grid_sample: expected input (N, C, H, W) with H and W positive and grid (N, H_out, W_out, 2) with "
                "the same N, got input ",
                input.shape().str(), " and grid ", grid.shape().str()));
  const std::int64_t batch = input.size(0), channels = input.size(1), height = input.size(2), width = input.size(3);
  const std::int64_t out_h = grid.size(1), out_w = grid.size(2), points = out_h * out_w;
  const Tensor x = source_position(grid.select(3, 0), width, options);   // (N, H_out, W_out)
  const Tensor y = source_position(grid.select(3, 1), height, options);  // (N, H_out, W_out)
  const Tensor flat = input.reshape({batch, channels, height * width});

  // The input's pixels at integer positions (cx, cy) (data, (N, H_out, W_out)), 0 where outside:
  // (N, C, H_out, W_out).
  const auto pixels = [&](const Tensor& cx, const Tensor& cy) {
    const Tensor inside = logical_and(logical_and(ge(cx, 0.0), le(cx, static_cast<double>(width - 1))),
                                      logical_and(ge(cy, 0.0), le(cy, static_cast<double>(height - 1))));
    // Offsets in int64: a float32 position is exact, a float32 product past 2^24 would not be.
    const Tensor column = where(inside, cx, 0.0).to(kInt64), row = where(inside, cy, 0.0).to(kInt64);
    const Tensor offset = (row * width + column).reshape({batch, 1, points});
    const Tensor read =
        gather(flat, 2, expand(offset, {batch, channels, points})).reshape({batch, channels, out_h, out_w});
    return where(inside.unsqueeze(1), read, 0.0);
  };
  if (options.mode() == GridSampleMode::Nearest) return pixels(round(x.detach()), round(y.detach()));

  const Tensor x0 = floor(x.detach()), y0 = floor(y.detach());
  const Tensor wx = (x - x0).unsqueeze(1), wy = (y - y0).unsqueeze(1);  // the far pixels' weights
  const Tensor x1 = x0 + 1.0, y1 = y0 + 1.0;
  return pixels(x0, y0) * (rsub(1.0, wx) * rsub(1.0, wy)) + pixels(x1, y0) * (wx * rsub(1.0, wy)) +
         pixels(x0, y1) * (rsub(1.0, wx) * wy) + pixels(x1, y1) * (wx * wy);
}

}  // namespace tapegrad::nn::functional
