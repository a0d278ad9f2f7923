// Convolutions, pools, unfold and fold (nn/conv.h, autograd/ops.h): values and gradients of both
// orders by gradcheck, torch's tie rule of max pooling, the modules' parameters and initialisation,
// bfloat16 and autocast, the errors, and a small CNN that learns. Values against PyTorch are in
// test_torch_reference.cpp's window cases.

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "tapegrad/nn/nn.h"
#include "tapegrad/optim/optim.h"
#include "tests/testing.h"

using namespace tapegrad;
namespace F = tapegrad::nn::functional;
using tapegrad::testing::check_gradients;
using tapegrad::testing::check_values;
using tapegrad::testing::names;

TEST_CASE("conv: unfold of a small image, worked by hand, and fold as its adjoint") {
  // A 1 x 1 x 3 x 3 image 1..9, 2 x 2 windows, stride 1: four windows, rows (kernel row, column).
  const Tensor image = arange(1.0, 10.0, 1.0, kFloat64).reshape({1, 1, 3, 3});
  const Tensor cols = unfold(image, {2});
  CHECK(cols.shape() == Shape{1, 4, 4});
  check_values(cols, {1, 2, 4, 5, 2, 3, 5, 6, 4, 5, 7, 8, 5, 6, 8, 9}, 1e-15);
  // Padding 1 puts zeros around: the first window of a 2 x 2 kernel is (0, 0, 0, 1).
  check_values(unfold(image, {2}, {1}, {1}).select(2, 0), {0, 0, 0, 1}, 1e-15);
  // fold adds every window back: the centre pixel is in all four windows.
  check_values(fold(cols, {3}, {2}), {1, 4, 3, 8, 20, 12, 7, 16, 9}, 1e-15);
  // <unfold(x), c> = <x, fold(c)> for any x and c: fold is unfold's adjoint.
  Generator gen(5);
  const Tensor x = randn({2, 3, 5, 6}, gen, kFloat64);
  const Tensor u = unfold(x, {2, 3}, {2, 1}, {1, 2}, {1, 2});
  const Tensor c = randn(u.shape(), gen, kFloat64);
  CHECK(sum(u * c).item() ==
        doctest::Approx(sum(x * fold(c, {5, 6}, {2, 3}, {2, 1}, {1, 2}, {1, 2})).item()).epsilon(1e-12));
}

TEST_CASE("conv: gradcheck of unfold, fold, the convolutions and the pools, first and second order") {
  Generator gen(3);
  const Tensor x = randn({2, 4, 5, 6}, gen, kFloat64);
  const Tensor w = randn({6, 2, 2, 3}, gen, kFloat64), b = randn({6}, gen, kFloat64);
  check_gradients([](const TensorList& in) { return unfold(in[0], {2, 3}, {1, 2}, {1}, {2, 1}); }, {x});
  check_gradients(
      [](const TensorList& in) {
        return fold(in[0], {4, 5}, {2}, {1}, {1}, {2});
      },
      {randn({2, 12, 9}, gen, kFloat64)});
  check_gradients(
      [](const TensorList& in) {
        return F::conv2d(in[0], in[1], in[2], {2, 1}, {1, 0}, {1, 2}, /*groups=*/2);
      },
      {x, w, b});
  check_gradients([](const TensorList& in) { return F::conv2d(in[0].transpose(2, 3), in[1], Tensor(), {1}, {1}); },
                  {x, randn({3, 4, 2, 2}, gen, kFloat64)});
  check_gradients([](const TensorList& in) { return F::conv1d(in[0], in[1], in[2], {2}, {1}, {2}); },
                  {randn({2, 3, 9}, gen, kFloat64), randn({4, 3, 3}, gen, kFloat64), randn({4}, gen, kFloat64)});
  // Random values: no ties in a window, where the max is not differentiable.
  check_gradients([](const TensorList& in) { return F::max_pool2d(in[0], {3, 2}, {2}, {1}, {1, 2}); }, {x});
  check_gradients([](const TensorList& in) { return F::avg_pool2d(in[0], {3, 2}, {2, 1}, {1}, false); }, {x});
  check_gradients([](const TensorList& in) { return F::avg_pool1d(in[0], {3}, {}, {1}); },
                  {randn({2, 3, 8}, gen, kFloat64)});
}

TEST_CASE("conv: max and adaptive max pooling send a tie's gradient to the window's first largest entry, as torch's") {
  // torch: F.max_pool2d(ones(1, 1, 3, 3), 2, stride=1).sum().backward() gives [[1, 1, 0], [1, 1, 0], [0, 0, 0]];
  // max_pool1d over [1, nan, 3, 2] with kernel 2 gives [nan, 3] and the gradient [0, 1, 1, 0].
  const Tensor x = ones({1, 1, 3, 3}, kFloat64).requires_grad_(true);
  sum(F::max_pool2d(x, {2}, {1})).backward();
  check_values(x.grad(), {1, 1, 0, 1, 1, 0, 0, 0, 0}, 1e-15);
  const Tensor y = tensor({1.0, std::nan(""), 3.0, 2.0}, kFloat64).reshape({1, 1, 4}).requires_grad_(true);
  const Tensor pooled = F::max_pool1d(y, {2});
  check_values(pooled, {std::nan(""), 3}, 1e-15);
  sum(pooled).backward();
  check_values(y.grad(), {0, 1, 1, 0}, 1e-15);
  // torch: adaptive_max_pool2d(ones(1, 1, 3, 3), 2) sends each of the four overlapping windows' gradient
  // to its top-left entry, [[1, 1, 0], [1, 1, 0], [0, 0, 0]]; over [[1, 2, 2], [2, 1, 0], [0, 2, 1]] with
  // output 1 the first 2 in row-major order, (0, 1), takes it (not (1, 0), the first down the columns).
  const Tensor ones_image = ones({1, 1, 3, 3}, kFloat64).requires_grad_(true);
  sum(F::adaptive_max_pool2d(ones_image, {2})).backward();
  check_values(ones_image.grad(), {1, 1, 0, 1, 1, 0, 0, 0, 0}, 1e-15);
  const Tensor z = tensor({{1.0, 2.0, 2.0}, {2.0, 1.0, 0.0}, {0.0, 2.0, 1.0}}, kFloat64).reshape({1, 1, 3, 3});
  z.requires_grad_(true);
  sum(F::adaptive_max_pool2d(z, {1})).backward();
  check_values(z.grad(), {0, 1, 0, 0, 0, 0, 0, 0, 0}, 1e-15);
}

TEST_CASE("conv: Conv1d and Conv2d parameters, initialisation and shapes, and the pool modules") {
  Generator gen(0);
  nn::Conv2d conv{nn::ConvOptions(4, 6, {3, 2}).padding({1}).groups(2).generator(&gen)};
  CHECK(names(conv->named_parameters()) == std::vector<std::string>{"weight", "bias"});
  CHECK(conv->weight().shape() == Shape{6, 2, 3, 2});
  // torch's bound: 1 / sqrt(fan_in), fan_in = 2 input channels a group * 3 * 2.
  const double bound = 1.0 / std::sqrt(12.0);
  CHECK(max(abs(conv->weight())).item() <= bound);
  CHECK(max(abs(conv->bias())).item() <= bound);
  CHECK(max(abs(conv->weight())).item() > 0.8 * bound);  // drawn over the whole range, not a narrower one
  CHECK(conv(zeros({2, 4, 5, 5})).shape() == Shape{2, 6, 5, 6});
  CHECK(conv(zeros({4, 5, 5})).shape() == Shape{6, 5, 6});  // unbatched
  nn::Conv1d causal{nn::ConvOptions(3, 5, {3}).padding({2}).bias(false).generator(&gen)};
  CHECK(names(causal->named_parameters()) == std::vector<std::string>{"weight"});
  CHECK(causal(zeros({2, 3, 7})).shape() == Shape{2, 5, 9});
  nn::MaxPool2d max_pool{nn::MaxPoolOptions({2})};
  nn::AvgPool2d avg_pool{nn::AvgPoolOptions({3}).stride({1}).padding({1})};
  nn::MaxPool1d max_pool_1d{nn::MaxPoolOptions({2}).stride({1})};
  nn::AvgPool1d avg_pool_1d{nn::AvgPoolOptions({2})};
  CHECK(max_pool(zeros({2, 3, 8, 7})).shape() == Shape{2, 3, 4, 3});
  CHECK(avg_pool(zeros({2, 3, 8, 7})).shape() == Shape{2, 3, 8, 7});
  CHECK(max_pool_1d(zeros({3, 8})).shape() == Shape{3, 7});
  CHECK(avg_pool_1d(zeros({2, 3, 9})).shape() == Shape{2, 3, 4});
  CHECK(max_pool->parameters().empty());
  // The same generator state gives the same weights.
  Generator a(42), b(42);
  nn::Conv2d first{nn::ConvOptions(2, 3, {2}).generator(&a)}, second{nn::ConvOptions(2, 3, {2}).generator(&b)};
  CHECK(first->weight().to_vector<float>() == second->weight().to_vector<float>());
}

TEST_CASE("conv: bfloat16 inputs and autocast") {
  Generator gen(9);
  const Tensor x = randn({2, 3, 6, 6}, gen), w = randn({4, 3, 3, 3}, gen), b = randn({4}, gen);
  const Tensor reference = F::conv2d(x, w, b, {1}, {1});
  {
    AutocastGuard autocast(kBFloat16);
    const Tensor y = F::conv2d(x, w, b, {1}, {1});
    CHECK(y.dtype() == kBFloat16);  // a product, as torch's CPU autocast runs conv2d
    // 27 products a sum, each input rounded to 8 significant bits: within a few percent of the scale.
    CHECK(max(abs(y.to(kFloat32) - reference)).item() < 0.05 * max(abs(reference)).item());
  }
  // Pools of bfloat16 stay bfloat16; the max is exact.
  const Tensor xb = x.to(kBFloat16);
  const Tensor pooled = F::max_pool2d(xb, {2});
  CHECK(pooled.dtype() == kBFloat16);
  CHECK(pooled.to_vector<float>() == F::max_pool2d(xb.to(kFloat32), {2}).to_vector<float>());
  CHECK(unfold(xb, {2}).dtype() == kBFloat16);
}

TEST_CASE("conv: errors name the op, the option and the shapes") {
  const Tensor x = zeros({2, 4, 5, 5});
  CHECK_THROWS_WITH_AS(F::conv2d(x, zeros({6, 3, 3, 3})),
                       "conv2d: a weight of shape (6,3,3,3) with groups 1 expects 3 input channels, got an input of "
                       "shape (2,4,5,5)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(F::conv2d(x, zeros({6, 2, 3, 3}), zeros({5}), {1}, {0}, {1}, 2),
                       "conv2d: expected a bias of shape (6), got (5)", ShapeError);
  CHECK_THROWS_WITH_AS(F::conv2d(x, zeros({5, 2, 3, 3}), Tensor(), {1}, {0}, {1}, 2),
                       "conv2d: the weight's 5 output channels do not split into 2 groups", ValueError);
  CHECK_THROWS_WITH_AS(F::conv2d(zeros({4, 5}), zeros({6, 4, 3, 3})),
                       "conv2d: expected an input of shape (N, C, H, W) or (C, H, W), got (4,5)", ShapeError);
  CHECK_THROWS_WITH_AS(F::conv1d(zeros({2, 4, 5}), zeros({6, 4, 3}), Tensor(), {1, 2}),
                       "conv1d: stride takes one value, got 2 in (1,2)", ValueError);
  CHECK_THROWS_WITH_AS(unfold(x, {7}),
                       "unfold: the windows do not fit: a kernel of 7 x 7 with dilation 1 x 1 spans 7 x 7 pixels, and "
                       "the padded input is 5 x 5",
                       ShapeError);
  CHECK_THROWS_WITH_AS(unfold(x, {2}, {1}, {0}, {0}), "unfold: stride must be at least 1, got (0)", ValueError);
  CHECK_THROWS_WITH_AS(unfold(x, {2, 2, 2}),
                       "unfold: kernel_size takes one value (both axes) or two (height, width), got 3 in (2,2,2)",
                       ValueError);
  CHECK_THROWS_WITH_AS(fold(zeros({2, 8, 5}), {3}, {2}),
                       "fold: an input of shape (2,8,5) does not hold the windows of a 2 x 2 kernel over 3 x 3: "
                       "expected (N, C * 4, 4)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(
      F::max_pool2d(x, {2}, {}, {2}),
      "max_pool2d: padding (2) must be between 0 and half the kernel size (2) (a kernel of at least 1)", ValueError);
  CHECK_THROWS_WITH_AS(nn::Conv2d(nn::ConvOptions(4, 6, {3}).groups(4)),
                       "Conv2d: groups 4 must divide in_channels 4 and out_channels 6", ValueError);
  CHECK_THROWS_WITH_AS(nn::Conv1d(nn::ConvOptions(4, 6, {3, 3})), "Conv1d: kernel_size takes one value, got (3,3)",
                       ValueError);
  // Ranks and counts.
  CHECK_THROWS_WITH_AS(F::conv2d(x, zeros({6, 4, 3})),
                       "conv2d: expected a weight of shape (out_channels, in_channels / groups, kh, kw), got (6,4,3)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(F::conv2d(x, zeros({6, 4, 3, 3}), Tensor(), {1}, {0}, {1}, 0),
                       "conv2d: groups must be at least 1, got 0", ValueError);
  CHECK_THROWS_WITH_AS(F::conv1d(x, zeros({6, 4, 3})),
                       "conv1d: expected an input of shape (N, C, L) or (C, L), got (2,4,5,5)", ShapeError);
  CHECK_THROWS_WITH_AS(F::conv1d(zeros({2, 4, 5}), zeros({6, 4})),
                       "conv1d: expected a weight of shape (out_channels, in_channels / groups, k), got (6,4)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(unfold(zeros({4, 5}), {2}),
                       "unfold: expected an input of shape (N, C, H, W), (C, H, W) or (N, C, D, H, W), got (4,5)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(fold(zeros({4}), {3}, {2}),
                       "fold: expected an input of shape (N, C * kh * kw, windows) or (C * kh * kw, windows), got (4)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(F::max_pool1d(zeros({5}), {2}),
                       "max_pool1d: expected an input of shape (N, C, L) or (C, L), got (5)", ShapeError);
  CHECK_THROWS_WITH_AS(F::avg_pool1d(zeros({5}), {2}),
                       "avg_pool1d: expected an input of shape (N, C, L) or (C, L), got (5)", ShapeError);
  CHECK_THROWS_WITH_AS(F::max_pool2d(zeros({5, 5}), {2}),
                       "max_pool2d: expected an input of shape (N, C, H, W) or (C, H, W), got (5,5)", ShapeError);
  CHECK_THROWS_WITH_AS(nn::Conv2d(nn::ConvOptions(0, 6, {3})),
                       "Conv2d: in_channels and out_channels must be positive, got 0 and 6", ValueError);
  CHECK_THROWS_WITH_AS(nn::Conv2d(nn::ConvOptions(4, 6, {0})), "Conv2d: kernel_size must be at least 1, got (0)",
                       ValueError);
}

TEST_CASE("conv: gradcheck of the transposed convolutions, ceil_mode and the adaptive pools, first and second order") {
  Generator gen(11);
  const Tensor x = randn({2, 4, 3, 4}, gen, kFloat64);
  check_gradients(
      [](const TensorList& in) {
        return F::conv_transpose2d(in[0], in[1], in[2], {2, 1}, {1, 0}, {1, 0}, /*groups=*/2, {1, 2});
      },
      {x, randn({4, 3, 3, 2}, gen, kFloat64), randn({6}, gen, kFloat64)});
  check_gradients([](const TensorList& in) { return F::conv_transpose1d(in[0], in[1], Tensor(), {3}, {1}, {2}); },
                  {randn({2, 3, 4}, gen, kFloat64), randn({3, 2, 3}, gen, kFloat64)});
  const Tensor image = randn({2, 3, 8, 7}, gen, kFloat64);
  check_gradients([](const TensorList& in) { return F::max_pool2d(in[0], {3, 2}, {2}, {1, 0}, {1}, true); }, {image});
  check_gradients([](const TensorList& in) { return F::avg_pool2d(in[0], {3, 2}, {2}, {1}, false, true); }, {image});
  check_gradients([](const TensorList& in) { return F::adaptive_avg_pool2d(in[0], {3, 4}); }, {image});
  check_gradients([](const TensorList& in) { return F::adaptive_max_pool2d(in[0], {3, 4}); }, {image});
  check_gradients([](const TensorList& in) { return F::adaptive_max_pool1d(in[0], {4}); },
                  {randn({3, 9}, gen, kFloat64)});
}

TEST_CASE("conv: the transposed convolution is the convolution's adjoint") {
  // <conv2d(x, w), y> == <x, conv_transpose2d(y, w)> for every option the two share: the transposed
  // convolution is the gradient of conv2d's input.
  Generator gen(12);
  const Tensor w = randn({6, 2, 3, 2}, gen, kFloat64);
  const Tensor x = randn({2, 4, 9, 8}, gen, kFloat64);
  const Dims stride{2, 3}, padding{1, 2}, dilation{2, 1};
  const Tensor y = F::conv2d(x, w, Tensor(), stride, padding, dilation, 2);
  const Tensor u = randn(y.shape(), gen, kFloat64);
  // 9 = (4 - 1) * 2 - 2 + 2 * 2 + 0 + 1 wants output_padding 0 along the height; 8 = (4 - 1) * 3 - 4 + 1 + 1 + 1
  // wants 1 along the width.
  const Tensor back = F::conv_transpose2d(u, w, Tensor(), stride, padding, {0, 1}, 2, dilation);
  REQUIRE(back.shape() == x.shape());
  CHECK(sum(y * u).item() == doctest::Approx(sum(x * back).item()).epsilon(1e-12));
  const Tensor xg = x.detach().requires_grad_();
  sum(F::conv2d(xg, w, Tensor(), stride, padding, dilation, 2) * u).backward();
  tapegrad::testing::check_close(xg.grad(), back, 1e-12);
}

TEST_CASE("conv: ConvTranspose modules, ceil_mode options and the adaptive pool modules") {
  Generator gen(0);
  nn::ConvTranspose2d up{nn::ConvTransposeOptions(4, 6, {2, 3}).stride({2}).groups(2).generator(&gen)};
  CHECK(names(up->named_parameters()) == std::vector<std::string>{"weight", "bias"});
  CHECK(up->weight().shape() == Shape{4, 3, 2, 3});
  // torch's bound for this weight: 1 / sqrt(fan_in), fan_in = its dimension 1 (3) * 2 * 3.
  const double bound = 1.0 / std::sqrt(18.0);
  CHECK(max(abs(up->weight())).item() <= bound);
  CHECK(max(abs(up->bias())).item() <= bound);
  CHECK(max(abs(up->weight())).item() > 0.8 * bound);
  CHECK(up(zeros({2, 4, 5, 5})).shape() == Shape{2, 6, 10, 11});
  CHECK(up(zeros({4, 5, 5})).shape() == Shape{6, 10, 11});
  nn::ConvTranspose1d up_1d{nn::ConvTransposeOptions(3, 5, {4}).stride({2}).padding({1}).bias(false)};
  CHECK(names(up_1d->named_parameters()) == std::vector<std::string>{"weight"});
  CHECK(up_1d(zeros({2, 3, 7})).shape() == Shape{2, 5, 14});
  nn::MaxPool2d max_pool{nn::MaxPoolOptions({2}).ceil_mode(true)};
  nn::AvgPool1d avg_pool{nn::AvgPoolOptions({2}).ceil_mode(true)};
  CHECK(max_pool(zeros({2, 3, 7, 5})).shape() == Shape{2, 3, 4, 3});
  CHECK(avg_pool(zeros({2, 3, 9})).shape() == Shape{2, 3, 5});
  nn::AdaptiveAvgPool2d global{nn::AdaptivePoolOptions({1})};
  nn::AdaptiveMaxPool2d grid{nn::AdaptivePoolOptions({2, 3})};
  nn::AdaptiveAvgPool1d avg_1d{nn::AdaptivePoolOptions({4})};
  nn::AdaptiveMaxPool1d max_1d{nn::AdaptivePoolOptions({1})};
  const Tensor x = arange(0, 24, 1, kFloat64).reshape({1, 2, 3, 4});
  check_values(global(x), {5.5, 17.5}, 1e-15);
  CHECK(grid(x).shape() == Shape{1, 2, 2, 3});
  check_values(grid(x).select(1, 0), {5, 6, 7, 9, 10, 11}, 1e-15);  // windows [0, 2) and [1, 3) of the rows
  CHECK(avg_1d(zeros({3, 10})).shape() == Shape{3, 4});
  check_values(max_1d(x.reshape({2, 12})), {11, 23}, 1e-15);
  CHECK(global->parameters().empty());
}

TEST_CASE("conv: padding kSame and kValid, and padding modes, in the modules") {
  Generator gen(13);
  const Tensor x = randn({2, 3, 6, 7}, gen, kFloat64);
  // kSame keeps the spatial size, an odd total (kernel 4) with the extra row after, as torch's.
  nn::Conv2d same{nn::ConvOptions(3, 4, {4, 3}).padding(nn::kSame).dilation({1, 2}).generator(&gen)};
  same->to(kFloat64);
  CHECK(same(x).shape() == Shape{2, 4, 6, 7});
  tapegrad::testing::check_close(
      same(x), F::conv2d(F::pad(x, {2, 2, 1, 2}), same->weight(), same->bias(), {1}, {0}, {1, 2}), 1e-12);
  nn::Conv1d valid{nn::ConvOptions(3, 2, {3}).padding(nn::kValid)};
  CHECK(valid(zeros({2, 3, 9})).shape() == Shape{2, 2, 7});
  // padding_mode: the input padded in that mode (F::pad, checked against torch), then convolved
  // without padding; the padding pairs as the explicit or kSame padding asks.
  const std::vector<std::pair<nn::PadMode, const char*>> modes = {
      {nn::PadMode::Reflect, "reflect"}, {nn::PadMode::Replicate, "replicate"}, {nn::PadMode::Circular, "circular"}};
  for (const auto& [mode, name] : modes) {
    CAPTURE(name);
    nn::Conv2d conv{nn::ConvOptions(3, 4, {3, 2}).padding({1, 2}).padding_mode(mode).generator(&gen)};
    conv->to(kFloat64);
    tapegrad::testing::check_close(
        conv(x), F::conv2d(F::pad(x, {2, 2, 1, 1}, mode), conv->weight(), conv->bias(), {1}, {0}), 1e-12);
    nn::Conv1d conv_1d{nn::ConvOptions(3, 2, {4}).padding(nn::kSame).padding_mode(mode).generator(&gen)};
    conv_1d->to(kFloat64);
    const Tensor line = randn({2, 3, 9}, gen, kFloat64);
    tapegrad::testing::check_close(conv_1d(line),
                                   F::conv1d(F::pad(line, {1, 2}, mode), conv_1d->weight(), conv_1d->bias()), 1e-12);
  }
  // The padded entries' gradients go back to the entries they copy.
  check_gradients(
      [](const TensorList& in) {
        return F::pad(in[0], {2, 1, 1, 2}, nn::PadMode::Reflect);
      },
      {randn({2, 4, 5}, gen, kFloat64)});
  check_gradients(
      [](const TensorList& in) {
        return F::pad(in[0], {3, 0}, nn::PadMode::Circular);
      },
      {randn({2, 4}, gen, kFloat64)});
  CHECK_THROWS_WITH_AS(F::conv2d(x, zeros({4, 3, 3, 3}, kFloat64), Tensor(), {2}, nn::kSame),
                       "conv2d: padding kSame needs stride 1, got (2)", ValueError);
  CHECK_THROWS_WITH_AS(F::conv2d(x, zeros({4, 3, 3, 3}, kFloat64), Tensor(), {1}, {1, 1, 1}),
                       "conv2d: padding takes one value (both axes) or two (height, width), got (1,1,1)", ValueError);
  CHECK_THROWS_WITH_AS(F::pad(x, {7, 0}, nn::PadMode::Reflect),
                       "pad (reflect): pads (7, 0) do not fit axis 3 of shape (2,3,6,7): each must be at least 0 and "
                       "smaller than the axis's size",
                       ValueError);
  CHECK_THROWS_WITH_AS(F::pad(x, {0, 0, 7, 0}, nn::PadMode::Circular),
                       "pad (circular): pads (7, 0) do not fit axis 2 of shape (2,3,6,7): each must be at least 0 and "
                       "at most the axis's size",
                       ValueError);
  CHECK_THROWS_WITH_AS(F::pad(zeros({2, 0}), {1, 0}, nn::PadMode::Replicate),
                       "pad (replicate): pads (1, 0) do not fit axis 1 of shape (2,0): each must be at least 0, and "
                       "the axis must not be empty",
                       ValueError);
  CHECK_THROWS_WITH_AS(F::pad(x, {-1, 0}, nn::PadMode::Replicate),
                       "pad (replicate): pads (-1, 0) do not fit axis 3 of shape (2,3,6,7): each must be at least 0, "
                       "and the axis must not be empty",
                       ValueError);
  CHECK_THROWS_WITH_AS(F::pad(x, {1}, nn::PadMode::Reflect),
                       "pad (reflect): pads come in (before, after) pairs, got 1 values", ValueError);
}

TEST_CASE("conv: the new ops' errors name the op, the option and the values") {
  const Tensor x = zeros({2, 4, 5, 5});
  CHECK_THROWS_WITH_AS(F::conv_transpose2d(x, zeros({3, 2, 3, 3})),
                       "conv_transpose2d: a weight of shape (3,2,3,3) expects 3 input channels, got an input of shape "
                       "(2,4,5,5)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(F::conv_transpose2d(x, zeros({4, 2, 3, 3}), zeros({2}), {1}, {0}, {0}, 2),
                       "conv_transpose2d: expected a bias of shape (4), got (2)", ShapeError);
  CHECK_THROWS_WITH_AS(F::conv_transpose2d(x, zeros({4, 2, 3, 3}), Tensor(), {2}, {0}, {2}),
                       "conv_transpose2d: output_padding (2) must be at least 0 and smaller than the stride (2) or the "
                       "dilation (1)",
                       ValueError);
  CHECK_THROWS_WITH_AS(F::conv_transpose2d(zeros({1, 4, 1, 1}), zeros({4, 2, 1, 1}), Tensor(), {1}, {1}),
                       "conv_transpose2d: an input of shape (1,4,1,1) and a kernel of 1x1 give an output of size -1 "
                       "along axis 2 with padding (1)",
                       ValueError);
  CHECK_THROWS_WITH_AS(F::conv_transpose2d(x, zeros({4, 2, 3})),
                       "conv_transpose2d: expected a weight of shape (in_channels, out_channels / groups, kh, kw), got "
                       "(4,2,3)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(F::conv_transpose2d(x, zeros({4, 2, 3, 3}), Tensor(), {1}, {0}, {0}, 3),
                       "conv_transpose2d: the weight's 4 input channels do not split into 3 groups", ValueError);
  CHECK_THROWS_WITH_AS(F::conv_transpose2d(x, zeros({4, 2, 3, 3}), Tensor(), {1, 1, 1}),
                       "conv_transpose2d: stride takes one value (both axes) or two (height, width), got (1,1,1)",
                       ValueError);
  CHECK_THROWS_WITH_AS(F::conv_transpose1d(zeros({2, 4, 5}), zeros({4, 2, 3}), Tensor(), {1}, {0}, {0, 0}),
                       "conv_transpose1d: output_padding takes one value, got 2 in (0,0)", ValueError);
  CHECK_THROWS_WITH_AS(nn::ConvTranspose2d(nn::ConvTransposeOptions(4, 6, {3}).groups(4)),
                       "ConvTranspose2d: groups 4 must divide in_channels 4 and out_channels 6", ValueError);
  CHECK_THROWS_WITH_AS(F::adaptive_avg_pool2d(x, {0}), "adaptive_avg_pool2d: output_size must be at least 1, got (0)",
                       ValueError);
  CHECK_THROWS_WITH_AS(F::adaptive_max_pool2d(zeros({2, 3, 0, 4}), {2}),
                       "adaptive_max_pool2d: the input of shape (2,3,0,4) has an empty spatial axis", ShapeError);
  CHECK_THROWS_WITH_AS(F::adaptive_avg_pool2d(zeros({4, 4}, kInt64), {2}),
                       "adaptive_avg_pool2d: expected an input of shape (N, C, H, W) or (C, H, W), got (4,4)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(F::adaptive_avg_pool2d(zeros({1, 4, 4}, kInt64), {2}),
                       "adaptive_avg_pool2d: expected a floating-point input, got int64", TypeError);
  CHECK_THROWS_WITH_AS(F::adaptive_max_pool1d(zeros({2, 4, 5}), {1, 2}),
                       "adaptive_max_pool1d: output_size takes one value, got 2 in (1,2)", ValueError);
  const Tensor w = zeros({4, 2, 3, 3});
  CHECK_THROWS_WITH_AS(F::conv_transpose2d(x, w, Tensor(), {0}),
                       "conv_transpose2d: stride (0) and dilation (1) must be at least 1 and padding (0) at least 0",
                       ValueError);
  CHECK_THROWS_WITH_AS(F::conv_transpose2d(x, w, Tensor(), {1}, {0}, {0}, 1, {1, 0}),
                       "conv_transpose2d: stride (1) and dilation (1,0) must be at least 1 and padding (0) at least 0",
                       ValueError);
  CHECK_THROWS_WITH_AS(F::conv_transpose2d(x, w, Tensor(), {1}, {0, -1}),
                       "conv_transpose2d: stride (1) and dilation (1) must be at least 1 and padding (0,-1) at least 0",
                       ValueError);
  CHECK_THROWS_WITH_AS(F::conv1d(zeros({2, 4, 5}), zeros({6, 4, 3}), Tensor(), {1}, Dims{1, 1}),
                       "conv1d: padding takes one value, got 2 in (1,1)", ValueError);
  // Every 1-D form checks its input's rank the same way.
  CHECK_THROWS_WITH_AS(F::conv_transpose1d(zeros({5}), zeros({4, 2, 3})),
                       "conv_transpose1d: expected an input of shape (N, C, L) or (C, L), got (5)", ShapeError);
  CHECK_THROWS_WITH_AS(F::adaptive_avg_pool1d(zeros({5}), {2}),
                       "adaptive_avg_pool1d: expected an input of shape (N, C, L) or (C, L), got (5)", ShapeError);
  CHECK_THROWS_WITH_AS(F::adaptive_max_pool1d(x, {2}),
                       "adaptive_max_pool1d: expected an input of shape (N, C, L) or (C, L), got (2,4,5,5)",
                       ShapeError);
}

TEST_CASE("conv: a small CNN learns to tell horizontal from vertical bars") {
  // 8 x 8 images with one bar of ones, horizontal (class 0) or vertical (class 1), at rows and columns
  // 0..7, with noise: Conv2d(1, 4, 3) -> ReLU -> MaxPool2d(2) -> Linear(36, 2). SGD, 150 steps on the
  // 16 images; the loss falls and every image is classified right.
  Generator gen(1);
  std::vector<Tensor> images;
  std::vector<std::int64_t> labels;
  for (int k = 0; k < 8; ++k)
    for (int cls = 0; cls < 2; ++cls) {
      Tensor image = randn({1, 8, 8}, gen) * 0.1;
      (cls == 0 ? image.select(1, k) : image.select(2, k)).add_(1.0);
      images.push_back(image);
      labels.push_back(cls);
    }
  const Tensor x = stack(images, 0), y = from_vector(labels, {16});
  nn::Conv2d conv{nn::ConvOptions(1, 4, {3}).generator(&gen)};
  nn::MaxPool2d pool{nn::MaxPoolOptions({2})};
  nn::Linear head{nn::LinearOptions(36, 2).generator(&gen)};
  TensorList params = conv->parameters();
  for (const Tensor& p : head->parameters()) params.push_back(p);
  optim::SGD opt(params, optim::SGDOptions(0.5));
  auto logits = [&] { return head(flatten(pool(relu(conv(x))), 1)); };
  const double first = nn::cross_entropy(logits(), y).item();
  for (int step = 0; step < 150; ++step) {
    opt.zero_grad();
    nn::cross_entropy(logits(), y).backward();
    opt.step();
  }
  const double last = nn::cross_entropy(logits(), y).item();
  CHECK(last < 0.1 * first);
  CHECK(argmax(logits(), 1).to_vector<std::int64_t>() == labels);
}

TEST_CASE("conv: max pools' indices and max_unpool, as torch 1.13 gives them") {
  // torch.nn.functional.max_pool2d(x, ..., return_indices=True) on this image, its indices the
  // offsets row * 5 + column in the 4 x 5 plane.
  const Tensor x =
      tensor({3.0, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4}, kFloat64).reshape({1, 1, 4, 5});
  const auto check_pool = [&](const std::pair<Tensor, Tensor>& pooled, const std::vector<double>& values,
                              const std::vector<double>& indices) {
    check_values(pooled.first, values, 1e-15);
    CHECK(pooled.second.dtype() == kInt64);
    CHECK(pooled.second.shape() == pooled.first.shape());
    check_values(pooled.second.to(kFloat64), indices, 1e-15);
  };
  check_pool(F::max_pool2d_with_indices(x, {2}), {9, 6, 8, 9}, {5, 7, 11, 12});
  check_pool(F::max_pool2d_with_indices(x, {2}, {}, {0}, {1}, /*ceil_mode=*/true), {9, 6, 5, 8, 9, 9},
             {5, 7, 4, 11, 12, 14});
  check_pool(F::max_pool2d_with_indices(x, {3}, {2}, {1}), {9, 6, 5, 9, 9, 9}, {5, 7, 4, 5, 12, 14});
  check_pool(F::max_pool2d_with_indices(x, {2}, {1}, {0}, {2}), {9, 8, 9, 9, 8, 6}, {12, 11, 12, 5, 18, 7});
  // Ties go to the first, a NaN to the window's last one, a window of -inf to its first pixel.
  const double nan = std::nan("");
  const Tensor ties = tensor({2.0, 2, 1, 1, 2, 0, 1, 1}, kFloat64).reshape({1, 1, 2, 4});
  check_values(F::max_pool2d_with_indices(ties, {2}).second.to(kFloat64), {0, 2}, 1e-15);
  const Tensor nans = tensor({1.0, nan, 2, nan, nan, 7, 3, 3}, kFloat64).reshape({1, 1, 2, 4});
  check_values(F::max_pool2d_with_indices(nans, {2}).second.to(kFloat64), {4, 3}, 1e-15);
  const Tensor low = full({1, 1, 2, 2}, -std::numeric_limits<double>::infinity(), kFloat64);
  check_values(F::max_pool2d_with_indices(low, {2}, {}, {1}).second.to(kFloat64), {0, 1, 2, 3}, 1e-15);
  // The gradient reaches the indexed entries: the NaN window's last NaN.
  const Tensor leaf = nans.clone().requires_grad_();
  sum(F::max_pool2d(leaf, {2})).backward();
  check_values(leaf.grad(), {0, 0, 0, 1, 1, 0, 0, 0}, 1e-15);
  // 1-D: positions along L.
  const Tensor line = tensor({1.0, 5, 2, 2, 0, 7}, kFloat64).reshape({1, 1, 6});
  const auto [line_values, line_indices] = F::max_pool1d_with_indices(line, {2});
  check_values(line_indices.to(kFloat64), {1, 2, 5}, 1e-15);
  check_values(F::max_unpool1d(line_values, line_indices, {2}), {0, 5, 2, 0, 0, 7}, 1e-15);
  // Unpooling writes each value back where it came from: the default size (H - 1) * stride -
  // 2 * padding + kernel, 4 x 4 here, or the input's 4 x 5 given as output_size.
  const auto [values, indices] = F::max_pool2d_with_indices(x, {2});
  const Tensor back = F::max_unpool2d(values, indices, {2});
  CHECK(back.shape() == Shape{1, 1, 4, 4});
  check_values(back, {0, 0, 0, 0, 0, 9, 0, 6, 0, 0, 0, 8, 9, 0, 0, 0}, 1e-15);
  check_values(F::max_unpool2d(values, indices, {2}, {}, {0}, {4, 5}),
               {0, 0, 0, 0, 0, 9, 0, 6, 0, 0, 0, 8, 9, 0, 0, 0, 0, 0, 0, 0}, 1e-15);
  // The modules give the same pair.
  nn::MaxPool2d pool{nn::MaxPoolOptions({2})};
  tapegrad::testing::check_close(pool->forward_with_indices(x).second, indices, 0.0);
  nn::MaxPool1d pool1{nn::MaxPoolOptions({2})};
  tapegrad::testing::check_close(pool1->forward_with_indices(line).second, line_indices, 0.0);
  nn::MaxUnpool2d unpool{nn::MaxUnpoolOptions({2})};
  tapegrad::testing::check_close(unpool(values, indices), back, 0.0);
  CHECK(unpool(values, indices, Dims{4, 5}).shape() == Shape{1, 1, 4, 5});
  nn::MaxUnpool1d unpool1{nn::MaxUnpoolOptions({2})};
  check_values(unpool1(line_values, line_indices, Dims{7}), {0, 5, 2, 0, 0, 7, 0}, 1e-15);
  // Gradients of unpooling, first and second order, and of the pool through its indices.
  Generator gen(12);
  const Tensor image = randn({2, 3, 6, 7}, gen, kFloat64);
  const Tensor where = F::max_pool2d_with_indices(image, {3}, {2}, {1}).second;
  check_gradients(
      [where](const TensorList& in) {
        return F::max_unpool2d(in[0], where, {3}, {2}, {1}, {6, 7});
      },
      {randn(where.shape(), gen, kFloat64)});
  check_gradients(
      [](const TensorList& in) { return F::max_pool2d_with_indices(in[0], {3}, {2}, {1}, {1}, true).first; }, {image});
  // Errors.
  CHECK_THROWS_WITH_AS(F::max_unpool2d(values, indices.narrow(3, 0, 1), {2}),
                       "max_unpool2d: expected indices of the input's shape (1,1,2,2), got (1,1,2,1)", ShapeError);
  CHECK_THROWS_WITH_AS(F::max_unpool2d(values, indices.to(kFloat64), {2}),
                       "max_unpool2d: expected int64 indices, got float64", TypeError);
  CHECK_THROWS_WITH_AS(F::max_unpool2d(values, indices, {2}, {}, {0}, {2, 2}),
                       "max_unpool2d: index 12 is outside an output plane of 2 x 2 (4 entries)", IndexError);
  CHECK_THROWS_WITH_AS(F::max_unpool2d(values, indices, {2}, {}, {0}, {4}),
                       "max_unpool2d: output_size takes two values (height, width), got (4)", ValueError);
  CHECK_THROWS_WITH_AS(F::max_unpool1d(line_values, line_indices.narrow(2, 0, 2), {2}),
                       "max_unpool1d: expected indices of the input's shape (1,1,3), got (1,1,2)", ShapeError);
  // The adaptive max pool's indices and NaN rule, as torch's (F.adaptive_max_pool2d(..., return_indices=True)
  // gives [[4, 3]] for the NaNs, [5, 7, 4, 11, 12, 14] for x at (2, 3), [1, 1, 3, 5] for the line at 4).
  const auto [adaptive_values, adaptive_indices] = F::adaptive_max_pool2d_with_indices(nans, {1, 2});
  check_values(adaptive_indices.to(kFloat64), {4, 3}, 1e-15);
  CHECK(std::isnan(adaptive_values.select(3, 0).item()));
  check_values(F::adaptive_max_pool2d_with_indices(x, {2, 3}).second.to(kFloat64), {5, 7, 4, 11, 12, 14}, 1e-15);
  check_values(F::adaptive_max_pool1d_with_indices(line, {4}).second.to(kFloat64), {1, 1, 3, 5}, 1e-15);
  // A window wholly in the padding (kernel 2, dilation 2, padding 1 over one pixel) has no entry to give.
  CHECK_THROWS_WITH_AS(window_argmax(zeros({1, 1, 1, 1}), {2}, {2}, {1}, {1}),
                       "window_argmax: window 0 along axis 2 (kernel 2, dilation 2, padding 1, stride 1) holds no "
                       "pixel of an input of shape (1,1,1,1)",
                       ValueError);
}

TEST_CASE("conv: avg_pool2d's divisor_override divides every window's sum, as torch's") {
  // torch.nn.functional.avg_pool2d(x, ..., divisor_override=d) in float64 on the 4 x 5 image above.
  const Tensor x =
      tensor({3.0, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4}, kFloat64).reshape({1, 1, 4, 5});
  check_values(F::avg_pool2d(x, {2}, {}, {0}, true, false, 3), {5, 16.0 / 3.0, 6, 9}, 1e-15);
  // Padding and ceil_mode change which entries are summed, not the divisor.
  check_values(F::avg_pool2d(x, {3}, {2}, {1}, true, true, 2), {7.5, 9.5, 7, 14.5, 25, 18, 2.5, 6.5, 6}, 1e-15);
  nn::AvgPool2d pool{nn::AvgPoolOptions({2}).divisor_override(3)};
  check_values(pool(x), {5, 16.0 / 3.0, 6, 9}, 1e-15);
  Generator gen(13);
  check_gradients([](const TensorList& in) { return F::avg_pool2d(in[0], {3}, {2}, {1}, false, true, -4); },
                  {randn({2, 3, 5, 6}, gen, kFloat64)});
  CHECK_THROWS_WITH_AS(F::avg_pool2d(x, {2}, {}, {0}, true, false, 0), "avg_pool2d: divisor_override must not be 0",
                       ValueError);
  CHECK_THROWS_WITH_AS(
      nn::AvgPool1d(nn::AvgPoolOptions({2}).divisor_override(2)),
      "AvgPool1d: divisor_override is for AvgPool2d and AvgPool3d (torch's AvgPool1d takes none), got 2", ValueError);
}

TEST_CASE("conv: lp pools are sum pools at p = 1, near max pools at large p, and differentiable") {
  Generator gen(71);
  const Tensor x = rand({2, 3, 6, 5}, gen, kFloat64) + 0.5;  // positive, so every p is defined
  // p = 1: the window sums; the 1-D form with ceil_mode scales its clipped last window as its average.
  CHECK(tapegrad::testing::max_abs_diff(F::lp_pool2d(x, 1.0, {2, 3}), F::avg_pool2d(x, {2, 3}) * 6.0) < 1e-13);
  const Tensor row = tensor({1.0, 2.0, 3.0, 4.0, 5.0}, kFloat64).reshape({1, 1, 5});
  check_values(F::lp_pool1d(row, 2.0, {2}, {2}, /*ceil_mode=*/true),
               {std::sqrt(5.0), std::sqrt(25.0), std::sqrt(2.0 * 25.0)}, 1e-14);
  // A large p approaches the window's largest entry.
  CHECK(tapegrad::testing::max_abs_diff(F::lp_pool2d(x, 200.0, {3}), F::max_pool2d(x, {3})) < 2e-2);
  CHECK(F::lp_pool3d(x.unsqueeze(0), 2.0, {1, 2, 2}).shape() == Shape{1, 2, 3, 3, 2});

  nn::LPPool2d pool(nn::LPPoolOptions(3.0, {2}).stride({1}));
  CHECK(tapegrad::testing::max_abs_diff(pool(x), F::lp_pool2d(x, 3.0, {2}, {1})) == 0.0);
  CHECK(tapegrad::testing::max_abs_diff(nn::LPPool1d(nn::LPPoolOptions(2.0, {3}))(row), F::lp_pool1d(row, 2.0, {3})) ==
        0.0);
  CHECK(tapegrad::testing::max_abs_diff(nn::LPPool3d(nn::LPPoolOptions(1.5, {1, 2, 2}))(x.unsqueeze(0)),
                                        F::lp_pool3d(x.unsqueeze(0), 1.5, {1, 2, 2})) == 0.0);
  check_gradients(
      [](const TensorList& in) {
        return F::lp_pool2d(in[0], 2.5, {2, 2}, {1, 2}, true);
      },
      {x.narrow(1, 0, 1)});
  CHECK_THROWS_WITH_AS(F::lp_pool2d(x, 0.0, {2}), "lp_pool2d: norm_type must be positive and finite, got 0",
                       ValueError);
  CHECK_THROWS_WITH_AS(F::lp_pool1d(row, std::numeric_limits<double>::infinity(), {2}),
                       "lp_pool1d: norm_type must be positive and finite, got inf", ValueError);
}

TEST_CASE("conv: fractional max pools place their windows as torch's, from the samples given") {
  // x = sin(0.37 k) as (2, 3, 7, 9), the samples below; indices and values printed by PyTorch 1.13's
  // F.fractional_max_pool2d(..., return_indices=True, _random_samples=s) in float64.
  const Tensor x = sin(arange(0, 2 * 3 * 7 * 9, 1, kFloat64) * 0.37).reshape({2, 3, 7, 9});
  const Tensor s =
      tensor({0.13, 0.71, 0.5, 0.05, 0.99, 0.31, 0.0, 0.42, 0.77, 0.88, 0.25, 0.6}, kFloat64).reshape({2, 3, 2});
  const auto [y, indices] = F::fractional_max_pool2d_with_indices(x, {2, 3}, {4, 3}, {}, s);
  REQUIRE(y.shape() == Shape{2, 3, 4, 3});
  auto ints = [](const Tensor& t) { return t.reshape({-1}).to_vector<std::int64_t>(); };
  CHECK(ints(indices.select(0, 0).select(0, 0)) ==
        std::vector<std::int64_t>{2, 4, 6, 20, 21, 24, 38, 39, 35, 55, 57, 53});
  CHECK(ints(indices.select(0, 1).select(0, 2)) ==
        std::vector<std::int64_t>{11, 12, 15, 11, 12, 26, 29, 30, 44, 46, 48, 62});
  check_values(y.select(0, 0).select(0, 0),
               {0.674287911628145, 0.99588084453764, 0.7965654722360868, 0.8987080958116269, 0.9964756147406005,
                0.5182282059209767, 0.9970241087570002, 0.9574299115788811, 0.37428850114575674, 0.9975263011148543,
                0.7840403585276232, 0.6892432612306632},
               1e-15);
  // The output ratio gives floor(7 * 0.5) x floor(9 * 0.5); float32 rows and samples place the same windows.
  const auto [half, half_indices] = F::fractional_max_pool2d_with_indices(x, {3}, {}, {0.5, 0.5}, s);
  REQUIRE(half.shape() == Shape{2, 3, 3, 4});
  CHECK(ints(half_indices.select(0, 0).select(0, 1)) ==
        std::vector<std::int64_t>{9, 11, 24, 26, 27, 29, 42, 43, 45, 58, 60, 60});
  CHECK(ints(F::fractional_max_pool2d_with_indices(x.to(kFloat32), {2, 3}, {4, 3}, {}, s.to(kFloat32)).second) ==
        ints(indices));
  // 3-D: samples in (depth, height, width) order.
  const Tensor v = cos(arange(0, 2 * 5 * 6 * 7, 1, kFloat64) * 0.53).reshape({1, 2, 5, 6, 7});
  const Tensor s3 = tensor({0.1, 0.6, 0.35, 0.8, 0.2, 0.9}, kFloat64).reshape({1, 2, 3});
  const Tensor i3 = F::fractional_max_pool3d_with_indices(v, {2, 2, 3}, {3, 4, 3}, {}, s3).second;
  CHECK(ints(i3.select(0, 0).select(0, 0)) == std::vector<std::int64_t>{0,   11,  12,  23,  59,  60,  71,  24,  25,
                                                                        71,  72,  83,  84,  95,  95,  107, 59,  60,
                                                                        71,  107, 118, 71,  72,  83,  177, 178, 130,
                                                                        142, 142, 153, 154, 191, 202, 154, 165, 166});
  CHECK(ints(i3.select(0, 0).select(0, 1)) == std::vector<std::int64_t>{51,  51,  4,   51,  51,  62,  15,  16,  27,
                                                                        28,  39,  39,  51,  51,  97,  51,  51,  62,
                                                                        98,  109, 110, 121, 122, 75,  134, 170, 181,
                                                                        134, 135, 181, 182, 193, 193, 205, 205, 158});

  // The gradient returns to the entries taken; an unbatched input takes (C, 2) samples.
  Generator gen(61);
  check_gradients(
      [&](const TensorList& in) {
        return F::fractional_max_pool2d(in[0], {2}, {3, 4}, {}, s.select(0, 1));
      },
      {randn({3, 6, 7}, gen, kFloat64)});
  // The module draws its samples from the global generator: a seeded forward repeats.
  nn::FractionalMaxPool2d pool{nn::FractionalMaxPoolOptions({2}).output_ratio({0.5})};
  manual_seed(5);
  const Tensor first = pool->forward_with_indices(x).second;
  manual_seed(5);
  CHECK(ints(pool->forward_with_indices(x).second) == ints(first));
  CHECK(pool(x).shape() == Shape{2, 3, 3, 4});

  CHECK_THROWS_WITH_AS(F::fractional_max_pool2d(x, {5, 3}, {4, 3}, {}, s),
                       "fractional_window_argmax: windows of 5 with 4 outputs need at least 8 entries along axis 2 "
                       "of the input of shape (2,3,7,9)",
                       ValueError);
  CHECK_THROWS_WITH_AS(F::fractional_max_pool2d(x, {2}, {}, {}, s),
                       "fractional_max_pool2d: give either output_size or output_ratio (neither given)", ValueError);
  CHECK_THROWS_WITH_AS(F::fractional_max_pool2d(x, {2}, {}, {1.0}, s),
                       "fractional_max_pool2d: output_ratio must lie in (0, 1), got 1", ValueError);
  CHECK_THROWS_WITH_AS(F::fractional_max_pool2d(x, {2}, {3}, {}, s.narrow(0, 0, 1)),
                       "fractional_window_argmax: samples must be float64 of shape (2,3,2), got float64 (1,3,2)",
                       ValueError);
  CHECK_THROWS_WITH_AS(F::fractional_max_pool2d(x, {2}, {3}, {}, s + 1.0),
                       "fractional_window_argmax: samples must lie in [0, 1), got 1.13", ValueError);
  CHECK_THROWS_WITH_AS(F::fractional_max_pool3d(x.select(0, 0), {2}, {3}, {}, s),
                       "fractional_max_pool3d: expected an input of shape (N, C, D, H, W) or (C, D, H, W), got (3,7,9)",
                       ShapeError);
  // A (C, D, H, W) volume is pooled in 3-D, with (C, 3) samples.
  CHECK_THROWS_WITH_AS(F::fractional_max_pool3d(v.select(0, 0), {2}, {3}, {}, s),
                       "fractional_window_argmax: samples must be float64 of shape (1,2,3), got float64 (1,2,3,2)",
                       ValueError);
  CHECK(F::fractional_max_pool3d(v.select(0, 0), {2}, {3}, {}, s3.select(0, 0)).shape() == Shape{2, 3, 3, 3});
}
