// The 3-D convolutions and pools (nn/conv.h) and the volume forms of unfold, fold and the window
// argmaxes (autograd/ops.h): conv3d against a sum of conv2d over the kernel's depth, the adjoint
// identities, gradcheck of both orders, torch's indices, tie and NaN rules and divisor_override,
// the modules (BatchNorm3d and InstanceNorm3d too), ConvTranspose's output_size, and the errors.
// Values and gradients against PyTorch are in test_torch_reference.cpp's window cases.

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "tapegrad/nn/nn.h"
#include "tests/testing.h"

using namespace tapegrad;
namespace F = tapegrad::nn::functional;
using tapegrad::testing::check_gradients;
using tapegrad::testing::check_values;
using tapegrad::testing::max_abs_diff;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<std::int64_t> int_values(const Tensor& t) { return t.to_vector<std::int64_t>(); }

// a and b hold the same values, NaN where the other has NaN.
bool same_values(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  if (x.size() != y.size()) return false;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (std::isnan(x[i]) != std::isnan(y[i]) || (!std::isnan(x[i]) && x[i] != y[i])) return false;
  return true;
}

}  // namespace

TEST_CASE("conv3d: a sum over the kernel's depth of 2-D convolutions, and unfold's volumes fold back") {
  Generator gen(31);
  const Tensor x = randn({2, 3, 5, 4, 6}, gen, kFloat64);
  const Tensor w = randn({4, 3, 2, 3, 2}, gen, kFloat64), b = randn({4}, gen, kFloat64);
  const Tensor y = F::conv3d(x, w, b);
  REQUIRE(y.shape() == Shape{2, 4, 4, 2, 5});
  // Output slice z is the sum over kernel depth d of conv2d of input slice z + d with weight slice d.
  for (std::int64_t z = 0; z < 4; ++z) {
    Tensor expected = reshape(b, {1, 4, 1, 1});
    for (std::int64_t d = 0; d < 2; ++d) expected = expected + F::conv2d(x.select(2, z + d), w.select(2, d));
    CHECK(max_abs_diff(y.select(2, z), expected) < 1e-12);
  }
  // Strided, padded and dilated: the same identity over the padded input.
  const Tensor strided = F::conv3d(x, w, Tensor(), {2, 1, 1}, {1, 0, 1}, {2, 1, 1});
  const Tensor padded = F::pad(x, {1, 1, 0, 0, 1, 1});
  REQUIRE(strided.shape() == Shape{2, 4, 3, 2, 7});
  for (std::int64_t z = 0; z < 3; ++z) {
    Tensor expected = F::conv2d(padded.select(2, 2 * z), w.select(2, 0));
    expected = expected + F::conv2d(padded.select(2, 2 * z + 2), w.select(2, 1));
    CHECK(max_abs_diff(strided.select(2, z), expected) < 1e-12);
  }
  // Unbatched (C, D, H, W) input is a batch of one.
  CHECK(max_abs_diff(F::conv3d(x.select(0, 1), w, b), y.select(0, 1)) < 1e-15);

  // unfold over volumes: rows (channel, depth, row, column) of the kernel; fold is its adjoint.
  const Tensor cube = arange(1.0, 9.0, 1.0, kFloat64).reshape({1, 1, 2, 2, 2});
  check_values(unfold(cube, {2}), {1, 2, 3, 4, 5, 6, 7, 8}, 1e-15);
  check_values(unfold(cube, {1, 2, 2}).select(1, 3), {4, 8}, 1e-15);
  const Tensor u = unfold(x, {2, 3, 2}, {2, 1, 1}, {1, 0, 1}, {1, 2, 1});
  const Tensor c = randn(u.shape(), gen, kFloat64);
  CHECK(sum(u * c).item() ==
        doctest::Approx(sum(x * fold(c, {5, 4, 6}, {2, 3, 2}, {2, 1, 1}, {1, 0, 1}, {1, 2, 1})).item()).epsilon(1e-12));
}

TEST_CASE("conv3d: bfloat16 and autocast, as the 2-D forms") {
  Generator gen(35);
  const Tensor x = randn({2, 3, 4, 5, 5}, gen), w = randn({4, 3, 2, 3, 3}, gen), b = randn({4}, gen);
  const Tensor reference = F::conv3d(x, w, b, {1}, {1});
  const Tensor up_reference = F::conv_transpose3d(x, w.transpose(0, 1), b, {2});
  {
    AutocastGuard autocast(kBFloat16);
    const Tensor y = F::conv3d(x, w, b, {1}, {1}), up = F::conv_transpose3d(x, w.transpose(0, 1), b, {2});
    CHECK(y.dtype() == kBFloat16);
    CHECK(up.dtype() == kBFloat16);
    // 54 products a sum, each input rounded to 8 significant bits: within a few percent of the scale.
    CHECK(max(abs(y.to(kFloat32) - reference)).item() < 0.05 * max(abs(reference)).item());
    CHECK(max(abs(up.to(kFloat32) - up_reference)).item() < 0.05 * max(abs(up_reference)).item());
  }
  const Tensor xb = x.to(kBFloat16);
  CHECK(F::max_pool3d(xb, {2}).to_vector<float>() == F::max_pool3d(xb.to(kFloat32), {2}).to_vector<float>());
  CHECK(F::avg_pool3d(xb, {2}).dtype() == kBFloat16);
  CHECK(F::adaptive_max_pool3d(xb, {2}).dtype() == kBFloat16);
}

TEST_CASE("conv3d: the transposed convolution is the convolution's adjoint") {
  Generator gen(32);
  const Tensor x = randn({2, 4, 5, 6, 5}, gen, kFloat64), w = randn({4, 2, 2, 3, 2}, gen, kFloat64);
  const Dims stride{2, 1, 2}, padding{1, 0, 1}, dilation{1, 2, 1};
  const Tensor y = F::conv3d(x, w, Tensor(), stride, padding, dilation, /*groups=*/2);
  const Tensor u = randn(y.shape(), gen, kFloat64);
  // output_padding picks the size that maps back to x's: depth and width (5 + 2 - 2) / 2 leave one over.
  const Tensor back = F::conv_transpose3d(u, w, Tensor(), stride, padding, {1, 0, 1}, 2, dilation);
  REQUIRE(back.shape() == Shape{2, 4, 5, 6, 5});
  CHECK(sum(y * u).item() == doctest::Approx(sum(x * back).item()).epsilon(1e-12));
}

TEST_CASE("conv3d: gradcheck of the 3-D convolutions, pools and unfold, first and second order") {
  Generator gen(33);
  const Tensor x = randn({2, 2, 4, 3, 5}, gen, kFloat64);
  check_gradients([](const TensorList& in) { return unfold(in[0], {2, 2, 3}, {1}, {1, 0, 1}, {2, 1, 1}); }, {x});
  check_gradients(
      [](const TensorList& in) {
        return fold(in[0], {3, 3, 4}, {2});
      },
      {randn({2, 16, 12}, gen, kFloat64)});
  check_gradients(
      [](const TensorList& in) {
        return F::conv3d(in[0], in[1], in[2], {1, 2, 1}, {1, 0, 1}, {1, 1, 2}, /*groups=*/2);
      },
      {x, randn({4, 1, 2, 2, 2}, gen, kFloat64), randn({4}, gen, kFloat64)});
  check_gradients([](const TensorList& in) { return F::conv3d(in[0], in[1], Tensor(), {1}, nn::kSame); },
                  {x, randn({3, 2, 2, 3, 2}, gen, kFloat64)});
  check_gradients(
      [](const TensorList& in) {
        return F::conv_transpose3d(in[0], in[1], in[2], {2, 1, 2}, {1, 0, 0}, {1, 0, 1}, 1, {1, 2, 1});
      },
      {randn({1, 2, 2, 3, 2}, gen, kFloat64), randn({2, 3, 2, 2, 2}, gen, kFloat64), randn({3}, gen, kFloat64)});
  // Distinct values, so no window holds a tie that finite differences would split.
  const Tensor distinct = remainder(arange(0.0, 240.0, 1.0, kFloat64) * 0.37, 1.0).reshape({2, 2, 4, 3, 5});
  check_gradients(
      [](const TensorList& in) {
        return F::max_pool3d(in[0], {2, 2, 3}, {1, 2, 2}, {1, 0, 1});
      },
      {distinct});
  check_gradients([](const TensorList& in) { return F::max_pool3d(in[0], {2}, {2}, {0}, {1}, /*ceil_mode=*/true); },
                  {distinct});
  check_gradients(
      [](const TensorList& in) {
        return F::avg_pool3d(in[0], {2, 2, 3}, {2}, {1, 1, 0}, /*count_include_pad=*/false, /*ceil_mode=*/true);
      },
      {x});
  check_gradients([](const TensorList& in) { return F::avg_pool3d(in[0], {2}, {1}, {0}, true, false, 5); }, {x});
  check_gradients([](const TensorList& in) { return F::adaptive_avg_pool3d(in[0], {3, 2, 4}); }, {x});
  check_gradients([](const TensorList& in) { return F::adaptive_max_pool3d(in[0], {3, 2, 4}); }, {distinct});
  const auto [pooled, where] = F::max_pool3d_with_indices(distinct, {2});
  check_gradients(
      [where = where](const TensorList& in) {
        return F::max_unpool3d(in[0], where, {2}, {}, {0}, {4, 3, 5});
      },
      {pooled.detach()});
}

TEST_CASE("conv3d: max pool indices, ties, NaN, unpooling and divisor_override, as torch 1.13 gives them") {
  // A 2 x 3 x 3 volume with a tie (the 5s, the 9s) and two NaNs.
  const Tensor x =
      from_vector(std::vector<double>{1.0, 5, 5, 2, 0, 3, 4, 4, 1, 5, 2, kNaN, 1, 9, 9, 0, 4, kNaN}, {1, 1, 2, 3, 3});
  auto [y, where] = F::max_pool3d_with_indices(x, {2}, {1});
  REQUIRE(y.shape() == Shape{1, 1, 1, 2, 2});
  CHECK(int_values(where) == std::vector<std::int64_t>{13, 11, 13, 17});  // torch's
  CHECK(y.flatten().select(0, 0).item() == 9.0);
  CHECK(std::isnan(y.flatten().select(0, 1).item()));
  auto [z, at] = F::max_pool3d_with_indices(x, {2}, {1, 2, 2}, {0, 1, 1});
  CHECK(int_values(at) == std::vector<std::int64_t>{9, 11, 6, 17});
  // Unpooled into the input's volume: each value back at its offset, zeros elsewhere (torch's).
  const Tensor back = F::max_unpool3d(z, at, {2}, {1, 2, 2}, {0, 1, 1}, {2, 3, 3});
  const Tensor expected =
      from_vector(std::vector<double>{0.0, 0, 0, 0, 0, 0, 4, 0, 0, 5, 0, kNaN, 0, 0, 0, 0, 0, kNaN}, {1, 1, 2, 3, 3});
  CHECK(same_values(back, expected));
  // The module gives the same pair.
  nn::MaxPool3d pool{nn::MaxPoolOptions({2}).stride({1, 2, 2}).padding({0, 1, 1})};
  CHECK(int_values(pool->forward_with_indices(x).second) == int_values(at));

  // Adaptive: overlapping windows, the last NaN kept.
  const Tensor a =
      from_vector(std::vector<double>{1.0, 2, 3, 4, 5, 6, 7, 8, 0, kNaN, 1, 2, 3, 3, 3, 3, 3, 3}, {1, 1, 3, 2, 3});
  nn::AdaptiveMaxPool3d adaptive{nn::AdaptivePoolOptions({2, 1, 2})};
  const auto [values, indices] = adaptive->forward_with_indices(a);
  CHECK(int_values(indices) == std::vector<std::int64_t>{9, 7, 9, 7});
  CHECK(values.flatten().select(0, 1).item() == 8.0);

  // divisor_override: every window's sum over the same divisor, the padding and ceil_mode as torch's.
  const Tensor ramp = arange(1.0, 25.0, 1.0, kFloat64).reshape({1, 1, 2, 3, 4});
  const Tensor third = F::avg_pool3d(ramp, {2}, {1}, {1, 0, 1}, true, false, 3);
  REQUIRE(third.shape() == Shape{1, 1, 3, 2, 5});
  check_values(third.flatten().slice(0, 0, 6), {2.0, 14.0 / 3, 6.0, 22.0 / 3, 4.0, 14.0 / 3}, 1e-12);
  nn::AvgPool3d fifth{nn::AvgPoolOptions({2}).stride({2}).padding({1, 1, 0}).ceil_mode(true).divisor_override(5)};
  check_values(fifth(ramp), {0.6, 1.4, 6.0, 7.6, 5.4, 6.2, 15.6, 17.2}, 1e-12);
}

TEST_CASE("conv3d: the 3-D modules, ConvTranspose's output_size and the adaptive max pools' indices") {
  Generator gen(34);
  nn::Conv3d conv{nn::ConvOptions(3, 4, {2, 3, 3}).padding({1}).generator(&gen)};
  CHECK(conv->weight().shape() == Shape{4, 3, 2, 3, 3});
  const double bound = 1.0 / std::sqrt(3.0 * 18.0);  // torch's fan_in: in / groups * the kernel's size
  CHECK(max(abs(conv->weight())).item() <= bound);
  CHECK(max(abs(conv->weight())).item() > 0.9 * bound);
  const Tensor x = randn({2, 3, 4, 5, 6}, gen, kFloat64);
  const Tensor x32 = x.to(kFloat32);
  CHECK(conv(x32).shape() == Shape{2, 4, 5, 5, 6});
  CHECK(max_abs_diff(conv(x32), F::conv3d(x32, conv->weight(), conv->bias(), {1}, {1})) < 1e-6);
  // A padding mode other than zeros pads first, as torch's modules.
  nn::Conv3d circular{nn::ConvOptions(3, 2, {3}).padding({1}).padding_mode(nn::PadMode::Circular).generator(&gen)};
  CHECK(max_abs_diff(circular(x32), F::conv3d(F::pad(x32, {1, 1, 1, 1, 1, 1}, nn::PadMode::Circular),
                                              circular->weight(), circular->bias())) < 1e-6);
  nn::Conv3d same{nn::ConvOptions(3, 2, {2, 3, 4}).padding(nn::kSame).padding_mode(nn::PadMode::Reflect)};
  CHECK(same(x32).shape() == Shape{2, 2, 4, 5, 6});

  // ConvTranspose's output_size picks output_padding: torch gives (1, 3, 8, 10) for (1, 2, 4, 5) here.
  nn::ConvTranspose2d up{nn::ConvTransposeOptions(2, 3, {3}).stride({2}).padding({1})};
  const Tensor small = randn({1, 2, 4, 5}, gen);
  CHECK(up(small).shape() == Shape{1, 3, 7, 9});
  const Tensor sized = up(small, Dims{8, 10});
  CHECK(sized.shape() == Shape{1, 3, 8, 10});
  CHECK(max_abs_diff(sized, F::conv_transpose2d(small, up->weight(), up->bias(), {2}, {1}, {1, 1})) < 1e-6);
  CHECK(up(small, Dims{1, 3, 8, 9}).shape() == Shape{1, 3, 8, 9});  // N and C may lead
  CHECK_THROWS_WITH_AS(up(small, Dims{9, 11}),
                       "ConvTranspose2d: output_size (9,11) asks for 9 along axis 2, where an input of shape "
                       "(1,2,4,5) gives 7 to 8",
                       ValueError);
  CHECK_THROWS_WITH_AS(up(small, Dims{8}),
                       "ConvTranspose2d: output_size takes 2 spatial extents (or 4 with the leading axes), got (8)",
                       ValueError);
  nn::ConvTranspose3d up3{nn::ConvTransposeOptions(2, 3, {2, 3, 3}).stride({1, 2, 3})};
  CHECK(up3(randn({2, 3, 4, 5}, gen), Dims{4, 10, 16}).shape() == Shape{3, 4, 10, 16});  // unbatched
  nn::ConvTranspose1d up1{nn::ConvTransposeOptions(2, 2, {3}).stride({3})};
  CHECK(up1(randn({1, 2, 4}, gen), Dims{14}).shape() == Shape{1, 2, 14});

  // The pool modules.
  nn::MaxPool3d max_pool{nn::MaxPoolOptions({2})};
  nn::AvgPool3d avg_pool{nn::AvgPoolOptions({2, 1, 3})};
  nn::AdaptiveAvgPool3d head{nn::AdaptivePoolOptions({1})};
  CHECK(max_pool(x).shape() == Shape{2, 3, 2, 2, 3});
  CHECK(max_abs_diff(avg_pool(x), F::avg_pool3d(x, {2, 1, 3})) < 1e-15);
  CHECK(max_abs_diff(head(x).flatten(), mean(x, {2, 3, 4}).flatten()) < 1e-12);
  nn::MaxUnpool3d unpool{nn::MaxUnpoolOptions({2})};
  const auto [pooled, where] = max_pool->forward_with_indices(x);
  const Tensor restored = unpool(pooled, where, Dims{4, 5, 6});
  CHECK(restored.shape() == x.shape());
  CHECK(sum(ne(restored, 0.0)).item<std::int64_t>() == pooled.numel());
  // The adaptive max pools' modules return indices too (1-D and 2-D as well).
  nn::AdaptiveMaxPool2d adaptive2{nn::AdaptivePoolOptions({2, 3})};
  const auto [v2, i2] = adaptive2->forward_with_indices(x.select(2, 0));
  CHECK(int_values(i2) == int_values(F::adaptive_max_pool2d_with_indices(x.select(2, 0), {2, 3}).second));
  CHECK(max_abs_diff(v2, adaptive2(x.select(2, 0))) < 1e-15);
  nn::AdaptiveMaxPool1d adaptive1{nn::AdaptivePoolOptions({4})};
  CHECK(adaptive1->forward_with_indices(x.select(2, 0).select(2, 0)).second.shape() == Shape{2, 3, 4});

  // BatchNorm3d: per channel over (N, D, H, W); InstanceNorm3d per sample and channel over (D, H, W).
  nn::BatchNorm3d bn(3);
  const Tensor normed = bn(x32);
  check_values(mean(normed, {0, 2, 3, 4}), {0.0, 0.0, 0.0}, 1e-6);
  CHECK(max_abs_diff(bn->running_mean(), mean(x32, {0, 2, 3, 4}) * 0.1) < 1e-6);
  nn::InstanceNorm3d in(nn::InstanceNormOptions(3).affine(true));
  CHECK(max_abs_diff(mean(in(x32), {2, 3, 4}).flatten(), zeros({6})) < 1e-6);
  CHECK(max_abs_diff(in(x32.select(0, 0)), in(x32).select(0, 0)) < 1e-6);  // unbatched
  CHECK_THROWS_WITH_AS(bn(x32.select(0, 0)),
                       "BatchNorm3d: expected an input of shape (N, C, D, H, W) with C = 3, got (3,4,5,6)", ShapeError);
  CHECK_THROWS_WITH_AS(in(x32.select(2, 0)),
                       "InstanceNorm3d: expected an input of shape (N, C, D, H, W) or (C, D, H, W) with C = 3, got "
                       "(2,3,5,6)",
                       ShapeError);
}

TEST_CASE("conv3d: errors name the op, the option and the shapes") {
  const Tensor x = zeros({1, 2, 3, 4, 5}), w = zeros({3, 2, 2, 2, 2});
  CHECK_THROWS_WITH_AS(F::conv3d(zeros({2, 3, 4}), w),
                       "conv3d: expected an input of shape (N, C, D, H, W) or (C, D, H, W), got (2,3,4)", ShapeError);
  CHECK_THROWS_WITH_AS(
      F::conv3d(x, zeros({3, 2, 2, 2})),
      "conv3d: expected a weight of shape (out_channels, in_channels / groups, kd, kh, kw), got (3,2,2,2)", ShapeError);
  CHECK_THROWS_WITH_AS(F::conv3d(x, w, Tensor(), {1, 2}),
                       "conv3d: stride takes one value (every axis) or three (depth, height, width), got (1,2)",
                       ValueError);
  CHECK_THROWS_WITH_AS(F::conv3d(x, w, Tensor(), {1}, {1, 1}),
                       "conv3d: padding takes one value (every axis) or three (depth, height, width), got (1,1)",
                       ValueError);
  CHECK_THROWS_WITH_AS(F::conv3d(x, zeros({3, 2, 4, 2, 2})),
                       "unfold: the windows do not fit: a kernel of 4 x 2 x 2 with dilation 1 x 1 x 1 spans 4 x 2 x 2 "
                       "pixels, and the padded input is 3 x 4 x 5",
                       ShapeError);
  CHECK_THROWS_WITH_AS(F::conv_transpose3d(x, zeros({2, 3, 2, 2})),
                       "conv_transpose3d: expected a weight of shape (in_channels, out_channels / groups, kd, kh, kw), "
                       "got (2,3,2,2)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(F::conv_transpose3d(x, w.transpose(0, 1).contiguous(), Tensor(), {1}, {2}),
                       "conv_transpose3d: an input of shape (1,2,3,4,5) and a kernel of 2x2x2 give an output of size 0 "
                       "along axis 2 with padding (2)",
                       ValueError);
  CHECK_THROWS_WITH_AS(F::max_pool3d(zeros({2, 3, 4}), {2}),
                       "max_pool3d: expected an input of shape (N, C, D, H, W) or (C, D, H, W), got (2,3,4)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(F::max_pool3d(x, {2}, {}, {0}, {1, 1}),
                       "max_pool3d: dilation takes one value (every axis) or three (depth, height, width), got (1,1)",
                       ValueError);
  CHECK_THROWS_WITH_AS(
      F::avg_pool3d(x, {2}, {}, {2}),
      "avg_pool3d: padding (2) must be between 0 and half the kernel size (2) (a kernel of at least 1)", ValueError);
  CHECK_THROWS_WITH_AS(F::adaptive_avg_pool3d(zeros({1, 2, 0, 3, 3}), {1}),
                       "adaptive_avg_pool3d: the input of shape (1,2,0,3,3) has an empty spatial axis", ShapeError);
  CHECK_THROWS_WITH_AS(F::adaptive_max_pool3d(x, {1, 1}),
                       "adaptive_max_pool3d: output_size takes one value (every axis) or three (depth, height, width), "
                       "got (1,1)",
                       ValueError);
  const auto [pooled, where] = F::max_pool3d_with_indices(x, {2});
  CHECK_THROWS_WITH_AS(F::max_unpool3d(pooled, where, {2}, {}, {0}, {2, 4}),
                       "max_unpool3d: output_size takes three values (depth, height, width), got (2,4)", ValueError);
  CHECK_THROWS_WITH_AS(F::max_unpool3d(pooled, where + 100, {2}),
                       "max_unpool3d: index 112 is outside an output volume of 2 x 4 x 4 (32 entries)", IndexError);
  CHECK_THROWS_WITH_AS(nn::Conv3d(nn::ConvOptions(2, 2, {2, 2})),
                       "Conv3d: kernel_size takes one value or three, got (2,2)", ValueError);

  // The ops' own checks (the nn layer's answer first through the pools).
  CHECK_THROWS_WITH_AS(window_argmax(zeros({2, 3}), {2}),
                       "window_argmax: expected an input of shape (N, C, H, W), (C, H, W) or (N, C, D, H, W), got "
                       "(2,3)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(window_argmax(zeros({1, 1, 4, 4}), {2}, {1}, {0}, {2}, {0, 0, 0}),
                       "window_argmax: overhang takes one value (both axes) or two (height, width), got 3 in (0,0,0)",
                       ValueError);
  CHECK_THROWS_WITH_AS(window_argmax(x, {2}, {1}, {0}, {1}, {0, 1}),
                       "window_argmax: overhang takes one value (every axis) or three (depth, height, width), got 2 in "
                       "(0,1)",
                       ValueError);
  CHECK_THROWS_WITH_AS(adaptive_window_argmax(zeros({2, 2, 2, 2, 2, 2}), {1}),
                       "adaptive_window_argmax: expected an input of shape (N, C, H, W), (C, H, W) or (N, C, D, H, W), "
                       "got (2,2,2,2,2,2)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(adaptive_window_argmax(zeros({1, 1, 3, 0}), {1}),
                       "adaptive_window_argmax: the input of shape (1,1,3,0) has an empty spatial axis", ShapeError);
  CHECK_THROWS_WITH_AS(
      fold(zeros({1, 8, 5}), {3, 3, 3}, {2}),
      "fold: an input of shape (1,8,5) does not hold the windows of a 2 x 2 x 2 kernel over 3 x 3 x 3: "
      "expected (N, C * 8, 8)",
      ShapeError);
  // max_unpool2d's output size and kernel count (the 2-D forms share the code).
  const auto [p2, w2] = F::max_pool2d_with_indices(zeros({1, 1, 4, 4}), {2});
  CHECK_THROWS_WITH_AS(F::max_unpool2d(p2, w2, {2}, {}, {2}), "max_unpool2d: the output size 0 along axis 2 is empty",
                       ValueError);
  CHECK_THROWS_WITH_AS(F::max_unpool2d(p2, w2, {2, 2, 2}),
                       "max_unpool2d: kernel_size takes one value (both axes) or two (height, width), got (2,2,2)",
                       ValueError);
}
