#pragma once
// Spatial transformers (Jaderberg et al. 2015): affine_grid builds a sampling grid from affine maps,
// grid_sample reads an image at a grid's points, differentiable in both the image and the grid, with
// torch.nn.functional's semantics (2-D: images (N, C, H, W), grids (N, H_out, W_out, 2)).
//
//   namespace F = nn::functional;
//   Tensor grid = F::affine_grid(theta, {N, C, 32, 32});     // theta: (N, 2, 3), from a localisation net
//   Tensor warped = F::grid_sample(images, grid);           // bilinear, zeros outside, align_corners false
//
// Grid points are (x, y) in [-1, 1], -1 the left / top and 1 the right / bottom: with align_corners
// the centres of the corner pixels, without it (torch's default) the outer edges of the corner pixels.

#include <cstdint>

#include "tapegrad/autograd/arg.h"
#include "tapegrad/autograd/shape.h"
#include "tapegrad/autograd/tensor.h"

namespace tapegrad::nn {

// Bilinear: the four pixels around the point, weighted by distance; Nearest: the closest (halves to
// even), whose gradient with respect to the grid is 0, as torch's.
enum class GridSampleMode { Bilinear, Nearest };
// What lies outside the image: Zeros; Border, the points clamped to the edge pixels; Reflection, the
// points mirrored at the edges (about the corner pixels' centres with align_corners, their outer
// edges without), then clamped.
enum class GridSamplePadding { Zeros, Border, Reflection };

namespace functional {

struct GridSampleOptions {
  TAPEGRAD_ARG(GridSampleMode, mode) = GridSampleMode::Bilinear;
  TAPEGRAD_ARG(GridSamplePadding, padding_mode) = GridSamplePadding::Zeros;
  TAPEGRAD_ARG(bool, align_corners) = false;
};

// torch's F.affine_grid for 2-D: theta (N, 2, 3) maps each output pixel's normalised (x, y, 1) to the
// point it samples; size is the output's (N, C, H, W). Returns (N, H, W, 2), differentiable in theta.
// ShapeError for a theta or size that do not fit.
Tensor affine_grid(const Tensor& theta, const Dims& size, bool align_corners = false);

// torch's F.grid_sample for 2-D: input (N, C, H, W), grid (N, H_out, W_out, 2) of the input's dtype
// -> (N, C, H_out, W_out); the gradient reaches the input (from the pixels read) and the grid (through
// the bilinear weights). bfloat16 input and grid are sampled in float32 and rounded back. ShapeError
// for shapes that do not fit or an empty image; TypeError for a non-floating input or a grid of
// another dtype.
Tensor grid_sample(const Tensor& input, const Tensor& grid, const GridSampleOptions& options = {});

}  // namespace functional

}  // namespace tapegrad::nn
