// affine_grid and grid_sample (nn/grid_sample.h): the identity map reproduces the image, a one-pixel
// translation shifts it, nearest reads whole pixels, the padding modes outside the image, gradients
// (gradcheck of the image, the grid and theta) and the errors. torch's values and gradients for every
// mode are in the fixture (test_torch_reference.cpp's grid_sample cases).

#include <doctest/doctest.h>

#include <vector>

#include "tapegrad/nn/nn.h"
#include "tests/testing.h"

using namespace tapegrad;
namespace F = tapegrad::nn::functional;
using tapegrad::testing::check_gradients;
using tapegrad::testing::max_abs_diff;

namespace {

// theta (N, 2, 3) of one affine map for every sample.
Tensor thetas(std::int64_t n, const std::vector<double>& map) {
  return from_vector(map, {1, 2, 3}).expand({n, 2, 3}).contiguous();
}

}  // namespace

TEST_CASE("grid_sample: the identity map reproduces the image, a translation shifts it") {
  Generator gen(91);
  const Tensor x = randn({2, 3, 4, 5}, gen, kFloat64);
  const Tensor identity = thetas(2, {1, 0, 0, 0, 1, 0});
  for (const bool align : {false, true}) {
    CAPTURE(align);
    const Tensor grid = F::affine_grid(identity, {2, 3, 4, 5}, align);
    CHECK(max_abs_diff(F::grid_sample(x, grid, F::GridSampleOptions().align_corners(align)), x) < 1e-14);
    CHECK(max_abs_diff(
              F::grid_sample(x, grid, F::GridSampleOptions().align_corners(align).mode(nn::GridSampleMode::Nearest)),
              x) == 0.0);
  }
  // x + 2 / W in normalised units is one pixel to the right (align_corners false): column j reads j + 1,
  // the last column reads outside (zeros) or its edge (border).
  const Tensor shift = F::affine_grid(thetas(2, {1, 0, 2.0 / 5.0, 0, 1, 0}), {2, 3, 4, 5});
  const Tensor shifted = F::grid_sample(x, shift);
  CHECK(max_abs_diff(shifted.narrow(3, 0, 4), x.narrow(3, 1, 4)) < 1e-14);
  CHECK(max_abs_diff(shifted.narrow(3, 4, 1), zeros({2, 3, 4, 1}, kFloat64)) < 1e-14);
  const Tensor bordered = F::grid_sample(x, shift, F::GridSampleOptions().padding_mode(nn::GridSamplePadding::Border));
  CHECK(max_abs_diff(bordered.narrow(3, 4, 1), x.narrow(3, 4, 1)) < 1e-14);
  // Reflection past the right edge (about the outer edge without align_corners) reads back inwards.
  const Tensor mirrored =
      F::grid_sample(x, shift, F::GridSampleOptions().padding_mode(nn::GridSamplePadding::Reflection));
  CHECK(max_abs_diff(mirrored.narrow(3, 4, 1), x.narrow(3, 4, 1)) < 1e-14);
}

TEST_CASE("grid_sample: bfloat16 samples in float32, so images wider than 256 pixels read the right ones") {
  // A 1 x 300 image whose pixel j holds j: the point over pixel 290 must read 290 (bfloat16 holds
  // 289 and 291 apart only in steps of 2).
  const Tensor image = arange(0.0, 300.0, 1.0, kFloat32).reshape({1, 1, 1, 300});
  const double x = (2.0 * 290.0 + 1.0) / 300.0 - 1.0;  // pixel 290's centre, align_corners false
  const Tensor grid = tensor({x, 0.0}, kFloat32).reshape({1, 1, 1, 2});
  const Tensor out =
      F::grid_sample(image.to(kBFloat16), grid.to(kBFloat16), F::GridSampleOptions().mode(nn::GridSampleMode::Nearest));
  CHECK(out.dtype() == kBFloat16);
  CHECK(F::grid_sample(image, grid, F::GridSampleOptions().mode(nn::GridSampleMode::Nearest)).item() == 290.0);
  CHECK(out.to(kFloat32).item() == 290.0);  // 290 is a bfloat16 value; a neighbour's read would be 288 or 292
}

TEST_CASE("grid_sample: gradients of the image, the grid and theta match finite differences") {
  Generator gen(92);
  const Tensor x = randn({1, 2, 3, 4}, gen, kFloat64);
  const Tensor grid = rand({1, 3, 2, 2}, gen, kFloat64) * 2.4 - 1.2;
  for (const auto padding :
       {nn::GridSamplePadding::Zeros, nn::GridSamplePadding::Border, nn::GridSamplePadding::Reflection}) {
    const auto options = F::GridSampleOptions().padding_mode(padding);
    check_gradients([&](const TensorList& in) { return F::grid_sample(in[0], in[1], options); }, {x, grid});
  }
  const Tensor theta = thetas(1, {0.9, 0.2, 0.1, -0.3, 1.1, 0.05});
  check_gradients(
      [&](const TensorList& in) {
        return F::grid_sample(in[0], F::affine_grid(in[1], {1, 2, 3, 3}, true));
      },
      {x, theta});
  // Nearest: the image's gradient counts the reads (border: every point reads a pixel); none reaches the grid.
  const Tensor image = x.clone().requires_grad_(true);
  const Tensor g = grid.clone().requires_grad_(true);
  sum(F::grid_sample(
          image, g,
          F::GridSampleOptions().mode(nn::GridSampleMode::Nearest).padding_mode(nn::GridSamplePadding::Border)))
      .backward();
  CHECK(sum(image.grad()).item() == 2.0 * 3.0 * 2.0);  // channels * H_out * W_out reads
  CHECK((!g.grad().defined() || max_abs_diff(g.grad(), zeros_like(g)) == 0.0));
}

TEST_CASE("grid_sample: shapes and dtypes that do not fit are named") {
  const Tensor x = zeros({2, 3, 4, 5}, kFloat64);
  CHECK_THROWS_WITH_AS(F::grid_sample(x, zeros({1, 4, 5, 2}, kFloat64)),
                       "grid_sample: expected input (N, C, H, W) with H and W positive and grid (N, H_out, W_out, 2) "
                       "with the same N, got input (2,3,4,5) and grid (1,4,5,2)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(F::grid_sample(x, zeros({2, 4, 5, 2})), "grid_sample: grid is float32 but the input is float64",
                       TypeError);
  CHECK_THROWS_AS(F::grid_sample(zeros({2, 3, 0, 5}, kFloat64), zeros({2, 4, 5, 2}, kFloat64)), ShapeError);
  CHECK_THROWS_WITH_AS(F::grid_sample(zeros({2, 3, 4, 5}, kInt64), zeros({2, 4, 5, 2}, kInt64)),
                       "grid_sample: input must be a floating-point tensor, got int64", TypeError);
  CHECK_THROWS_WITH_AS(F::affine_grid(zeros({2, 2, 3}, kInt64), {2, 3, 4, 5}),
                       "affine_grid: theta must be a floating-point tensor, got int64", TypeError);
  CHECK_THROWS_AS(F::affine_grid(zeros({2, 2, 3}, kFloat64), {2, 3, -1, 5}), ShapeError);
  CHECK_THROWS_WITH_AS(F::affine_grid(zeros({2, 3, 3}, kFloat64), {2, 3, 4, 5}),
                       "affine_grid: expected theta (N, 2, 3) and size (N, C, H, W) with the same N, got theta "
                       "(2,3,3) and size (2,3,4,5)",
                       ShapeError);
}
