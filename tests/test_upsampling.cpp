// Resampling (tapegrad/nn/upsampling.h): Upsample, PixelShuffle and PixelUnshuffle modules on worked
// cases, second-order gradients, and the errors (values and first-order gradients against torch are
// in test_torch_reference.cpp); the padding modules (tapegrad/nn/padding.h) against torch's values.

#include <doctest/doctest.h>

#include "tapegrad/nn/nn.h"
#include "tests/testing.h"

using namespace tapegrad;
namespace F = tapegrad::nn::functional;
using tapegrad::testing::check_gradients;
using tapegrad::testing::check_values;
using tapegrad::testing::max_abs_diff;

TEST_CASE("upsampling: the modules on worked cases") {
  // Nearest, factor 2: every entry twice along each axis.
  nn::Upsample nearest{nn::UpsampleOptions().scale_factor({2})};
  const Tensor x = tensor({{1.0, 2.0}, {3.0, 4.0}}, kFloat64).reshape({1, 1, 2, 2});
  check_values(nearest(x), {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}, 1e-15);
  // Bilinear with aligned corners to 3 x 3: the corners kept, the middle the mean of the four.
  nn::Upsample bilinear{nn::UpsampleOptions().size({3}).mode(nn::InterpolateMode::Bilinear).align_corners(true)};
  check_values(bilinear(x), {1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4}, 1e-15);
  // Linear without aligned corners, [0, 10] to 4 entries: sources -0.25 (clamped to 0), 0.25, 0.75, 1.25.
  const Tensor line = tensor({0.0, 10.0}, kFloat64).reshape({1, 1, 2});
  check_values(F::interpolate(line, F::InterpolateOptions().size({4}).mode(nn::InterpolateMode::Linear)),
               {0, 2.5, 7.5, 10}, 1e-15);
  // PixelShuffle moves channel c * 4 + i * 2 + j to the block's (i, j); PixelUnshuffle undoes it.
  nn::PixelShuffle shuffle{2};
  nn::PixelUnshuffle unshuffle{2};
  const Tensor channels = arange(0, 8, 1, kFloat64).reshape({2, 4, 1, 1});
  const Tensor image = shuffle(channels);
  CHECK(image.shape() == Shape{2, 1, 2, 2});
  check_values(image, {0, 1, 2, 3, 4, 5, 6, 7}, 1e-15);
  const Tensor big = arange(0, 48, 1, kFloat64).reshape({3, 4, 4});
  tapegrad::testing::check_close(shuffle(unshuffle(big)), big, 0.0);
  CHECK(unshuffle(big).shape() == Shape{12, 2, 2});
  CHECK(nearest->parameters().empty());
}

TEST_CASE("upsampling: gradcheck first and second order") {
  Generator gen(8);
  const Tensor x = randn({2, 2, 3, 4}, gen, kFloat64);
  check_gradients(
      [](const TensorList& in) {
        return F::interpolate(in[0], F::InterpolateOptions().size({5, 3}).mode(nn::InterpolateMode::Bilinear));
      },
      {x});
  check_gradients(
      [](const TensorList& in) {
        return F::interpolate(in[0], F::InterpolateOptions().scale_factor({1.5, 2.0}));
      },
      {x});
  check_gradients([](const TensorList& in) { return F::pixel_shuffle(in[0], 2); },
                  {randn({1, 8, 2, 3}, gen, kFloat64)});
  check_gradients([](const TensorList& in) { return F::pixel_unshuffle(in[0], 2); },
                  {randn({2, 1, 4, 6}, gen, kFloat64)});
  const Tensor line = randn({2, 3, 5}, gen, kFloat64);
  for (const bool corners : {false, true})
    check_gradients(
        [corners](const TensorList& in) {
          return F::interpolate(
              in[0], F::InterpolateOptions().size({8}).mode(nn::InterpolateMode::Linear).align_corners(corners));
        },
        {line});
  check_gradients(
      [](const TensorList& in) {
        return F::interpolate(in[0], F::InterpolateOptions().scale_factor({0.6}).mode(nn::InterpolateMode::Linear));
      },
      {line});
}

TEST_CASE("upsampling: volumes, nearest and trilinear, and the trilinear mode's rank") {
  Generator gen(17);
  const Tensor v = randn({1, 2, 3, 2, 4}, gen, kFloat64);
  // Trilinear is linear along each axis in turn: the depth axis alone matches linear over it.
  nn::Upsample up{nn::UpsampleOptions().size({5, 2, 4}).mode(nn::InterpolateMode::Trilinear).align_corners(true)};
  const Tensor y = up(v);
  REQUIRE(y.shape() == Shape{1, 2, 5, 2, 4});
  const Tensor by_depth =
      F::interpolate(v.permute({0, 1, 3, 4, 2}).reshape({1, 16, 3}),
                     F::InterpolateOptions().size({5}).mode(nn::InterpolateMode::Linear).align_corners(true));
  CHECK(max(abs(y - by_depth.reshape({1, 2, 2, 4, 5}).permute({0, 1, 4, 2, 3}))).item() < 1e-14);
  // Nearest doubles every entry along each axis.
  const Tensor twice = F::interpolate(v, F::InterpolateOptions().scale_factor({2}));
  CHECK(twice.shape() == Shape{1, 2, 6, 4, 8});
  CHECK(max(abs(twice.slice(2, 1, 6, 2).slice(3, 1, 4, 2).slice(4, 1, 8, 2) - v)).item() == 0.0);
  check_gradients(
      [](const TensorList& in) {
        return F::interpolate(in[0], F::InterpolateOptions().size({4, 3, 3}).mode(nn::InterpolateMode::Trilinear));
      },
      {v});
  CHECK_THROWS_WITH_AS(
      F::interpolate(zeros({1, 2, 3, 4}), F::InterpolateOptions().size({2}).mode(nn::InterpolateMode::Trilinear)),
      "interpolate: mode trilinear needs a 5-D input, got shape (1,2,3,4)", ValueError);
}

TEST_CASE("upsampling: bicubic follows torch's upsample_bicubic2d") {
  // x[0, 0] = arange(12)^1.5 as (3, 4), x[0, 1] its negative; the first 8 outputs of channel 0 printed
  // by PyTorch 1.13's F.interpolate(mode='bicubic') in float64.
  const Tensor grid = pow(arange(0, 12, 1, kFloat64), 1.5).reshape({1, 1, 3, 4});
  const Tensor x = concat({grid, -grid}, 1);
  auto check = [&](F::InterpolateOptions options, const Shape& shape, const std::vector<double>& first) {
    const Tensor y = F::interpolate(x, options.mode(nn::InterpolateMode::Bicubic));
    REQUIRE(y.shape() == shape);
    const std::vector<double> channel = y.select(1, 0).reshape({-1}).to_vector<double>();
    check_values(from_vector(std::vector<double>(channel.begin(), channel.begin() + first.size()),
                             {static_cast<std::int64_t>(first.size())}),
                 first, 1e-12);
    CHECK(max_abs_diff(y.select(1, 1), -y.select(1, 0)) == 0.0);
  };
  check(F::InterpolateOptions().size({5, 7}), Shape{1, 2, 5, 7},
        {-0.846449211625484, -0.6010561254382928, -0.09952450425131487, 0.7211217569732573, 1.893498143836773,
         3.2603434918376557, 4.138091297574539, 1.8761920498323585});
  check(F::InterpolateOptions().size({5, 7}).align_corners(true), Shape{1, 2, 5, 7},
        {0.0, 0.32858495705504465, 1.0, 1.7859893156893039, 2.8284271247461903, 4.183704816671367, 5.196152422706632,
         2.628679656440357});
  check(F::InterpolateOptions().scale_factor({2.5}), Shape{1, 2, 7, 10},
        {-0.9657478323962088, -0.8307969297581519, -0.656157444704176, -0.2844412128907805, 0.31527642711735726,
         0.8542633815911622, 1.8006880174583404, 2.777512910102955});
  check(F::InterpolateOptions().size({2, 3}), Shape{1, 2, 2, 3},
        {1.4689450018877932, 3.722987617736381, 7.239194493772046, 20.11748775644093, 25.942896949845704,
         32.28743319387135});
  // The same size is the input itself (the kernel is 1 at distance 0 and 0 at 1 and 2).
  CHECK(max_abs_diff(F::interpolate(x, F::InterpolateOptions().size({3, 4}).mode(nn::InterpolateMode::Bicubic)), x) ==
        0.0);
  check_gradients(
      [](const TensorList& in) {
        return F::interpolate(in[0], F::InterpolateOptions().size({4, 5}).mode(nn::InterpolateMode::Bicubic));
      },
      {x.slice(3, 0, 3)});
  CHECK_THROWS_WITH_AS(
      F::interpolate(grid.reshape({1, 1, 12}), F::InterpolateOptions().size({5}).mode(nn::InterpolateMode::Bicubic)),
      "interpolate: mode bicubic needs a 4-D input, got shape (1,1,12)", ValueError);
}

TEST_CASE("upsampling: area and nearest-exact follow torch's") {
  // The grid of the bicubic case; the first outputs of channel 0 printed by PyTorch 1.13's
  // F.interpolate(mode='area' / 'nearest-exact') in float64.
  const Tensor grid = pow(arange(0, 12, 1, kFloat64), 1.5).reshape({1, 1, 3, 4});
  const Tensor x = concat({grid, -grid}, 1);
  auto check = [](const Tensor& in, F::InterpolateOptions options, const Shape& shape,
                  const std::vector<double>& first) {
    const Tensor y = F::interpolate(in, options);
    REQUIRE(y.shape() == shape);
    const std::vector<double> flat = y.select(1, 0).reshape({-1}).to_vector<double>();
    check_values(
        from_vector(std::vector<double>(flat.begin(), flat.begin() + static_cast<std::ptrdiff_t>(first.size())),
                    {static_cast<std::int64_t>(first.size())}),
        first, 1e-12);
  };
  const auto area = F::InterpolateOptions().mode(nn::InterpolateMode::Area);
  check(x, F::InterpolateOptions(area).size({2, 3}), Shape{1, 2, 2, 3},
        {5.045084971874737, 7.426426367236052, 10.310444295401005, 17.20193922136712, 21.125013736470454,
         25.3307117324361});
  check(x, F::InterpolateOptions(area).size({5, 7}), Shape{1, 2, 5, 7},
        {0.0, 0.5, 1.0, 1.9142135623730951, 2.8284271247461903, 4.012289773726411, 5.196152422706632, 4.0});
  check(x, F::InterpolateOptions(area).scale_factor({0.7}), Shape{1, 2, 2, 2},
        {5.045084971874737, 10.310444295401005, 17.20193922136712, 25.3307117324361});
  check(grid.reshape({1, 1, 12}), F::InterpolateOptions(area).size({5}), Shape{1, 1, 5},
        {1.2761423749153968, 5.341526515817608, 13.099384380412538, 22.715892058473884, 31.701883098531066});
  const Tensor volume = pow(arange(0, 24, 1, kFloat64), 1.5).reshape({1, 1, 2, 3, 4});
  check(volume, F::InterpolateOptions(area).size({1, 2, 3}), Shape{1, 1, 1, 2, 3},
        {30.33931518571051, 34.427675433557326, 38.8632928856213, 48.57217015187912, 53.797952407464656,
         59.25034137218404});

  const auto exact = F::InterpolateOptions().mode(nn::InterpolateMode::NearestExact);
  check(x, F::InterpolateOptions(exact).size({5, 7}), Shape{1, 2, 5, 7},
        {0.0, 0.0, 1.0, 2.8284271247461903, 2.8284271247461903, 5.196152422706632, 5.196152422706632, 0.0});
  check(x, F::InterpolateOptions(exact).scale_factor({2.5}), Shape{1, 2, 7, 10},
        {0.0, 0.0, 1.0, 1.0, 1.0, 2.8284271247461903, 2.8284271247461903, 5.196152422706632, 5.196152422706632,
         5.196152422706632, 0.0, 0.0});
  check(x, F::InterpolateOptions(exact).size({2, 3}), Shape{1, 2, 2, 3},
        {0.0, 2.8284271247461903, 5.196152422706632, 22.627416997969522, 31.622776601683793, 36.4828726939094});
  check(volume, F::InterpolateOptions(exact).size({3, 2, 5}), Shape{1, 1, 3, 2, 5},
        {0.0, 1.0, 2.8284271247461903, 2.8284271247461903, 5.196152422706632, 22.627416997969522, 27.0,
         31.622776601683793, 31.622776601683793, 36.4828726939094});
  // Where the two nearest rules part: a factor of 0.6 over 12 entries reads 0, 2, 4, 5, 7, 9, 10 (centres)
  // and 0, 1, 3, 5, 6, 8, 10 (legacy).
  check(grid.reshape({1, 1, 12}), F::InterpolateOptions(exact).scale_factor({0.6}), Shape{1, 1, 7},
        {0.0, 2.8284271247461903, 8.0, 11.180339887498949, 18.520259177452132, 27.0, 31.622776601683793});
  check(grid.reshape({1, 1, 12}), F::InterpolateOptions().scale_factor({0.6}), Shape{1, 1, 7},
        {0.0, 1.0, 5.196152422706632, 11.180339887498949, 14.696938456699069, 22.627416997969522, 31.622776601683793});

  // Gradients: area's averages and nearest-exact's gathers, first and second order in float64.
  Generator gen(21);
  const Tensor small = randn({1, 2, 4, 5}, gen, kFloat64);
  for (const nn::InterpolateMode mode : {nn::InterpolateMode::Area, nn::InterpolateMode::NearestExact})
    check_gradients(
        [mode](const TensorList& in) {
          return F::interpolate(in[0], F::InterpolateOptions().size({3, 7}).mode(mode));
        },
        {small});
  nn::Upsample up{nn::UpsampleOptions().size({2}).mode(nn::InterpolateMode::Area)};
  check_values(up(tensor({1.0, 2.0, 3.0, 4.0}, kFloat64).reshape({1, 1, 4})), {1.5, 3.5}, 1e-15);
  CHECK_THROWS_WITH_AS(F::interpolate(x, F::InterpolateOptions(area).size({2, 3}).align_corners(true)),
                       "interpolate: align_corners is for the linear modes and bicubic, not area", ValueError);
  CHECK_THROWS_WITH_AS(F::interpolate(x, F::InterpolateOptions(exact).size({2, 3}).align_corners(true)),
                       "interpolate: align_corners is for the linear modes and bicubic, not nearest-exact", ValueError);
  CHECK_THROWS_WITH_AS(F::interpolate(x, F::InterpolateOptions(area).size({2, 3, 4})),
                       "interpolate: size takes one value or 2, got (2,3,4)", ValueError);
}

TEST_CASE("upsampling: errors name the op and the values") {
  const Tensor x = zeros({1, 2, 3, 4});
  CHECK_THROWS_WITH_AS(F::interpolate(x, F::InterpolateOptions()),
                       "interpolate: give either size or scale_factor (neither given)", ValueError);
  CHECK_THROWS_WITH_AS(F::interpolate(x, F::InterpolateOptions().size({2}).scale_factor({2})),
                       "interpolate: give either size or scale_factor (both given)", ValueError);
  CHECK_THROWS_WITH_AS(F::interpolate(x, F::InterpolateOptions().size({2}).mode(nn::InterpolateMode::Linear)),
                       "interpolate: mode linear needs a 3-D input, got shape (1,2,3,4)", ValueError);
  CHECK_THROWS_WITH_AS(F::interpolate(x, F::InterpolateOptions().size({2}).align_corners(true)),
                       "interpolate: align_corners is for the linear modes and bicubic, not nearest", ValueError);
  CHECK_THROWS_WITH_AS(F::interpolate(x, F::InterpolateOptions().scale_factor({0.1})),
                       "interpolate: an input of shape (1,2,3,4) resampled to size 0 along axis 2: both must be at "
                       "least 1",
                       ValueError);
  CHECK_THROWS_WITH_AS(F::interpolate(x, F::InterpolateOptions().scale_factor({-2})),
                       "interpolate: scale_factor must be positive, got -2", ValueError);
  CHECK_THROWS_WITH_AS(F::interpolate(x, F::InterpolateOptions().size({2, 2, 2})),
                       "interpolate: size takes one value or 2, got (2,2,2)", ValueError);
  CHECK_THROWS_WITH_AS(F::interpolate(x, F::InterpolateOptions().scale_factor({2, 2, 2})),
                       "interpolate: scale_factor takes one value or 2, got 3", ValueError);
  CHECK_THROWS_WITH_AS(F::interpolate(zeros({2, 3}), F::InterpolateOptions().size({2})),
                       "interpolate: expected an input of shape (N, C, L), (N, C, H, W) or (N, C, D, H, W), got (2,3)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(F::interpolate(zeros({1, 1, 2}, kInt64), F::InterpolateOptions().size({4})),
                       "interpolate: expected a floating-point input, got int64", TypeError);
  CHECK_THROWS_WITH_AS(F::pixel_shuffle(zeros({1, 6, 2, 2}), 2),
                       "pixel_shuffle: upscale_factor 2 must be at least 1 and its square divide the 6 channels of an "
                       "input of shape (1,6,2,2)",
                       ValueError);
  CHECK_THROWS_WITH_AS(F::pixel_unshuffle(zeros({1, 1, 3, 4}), 2),
                       "pixel_unshuffle: downscale_factor 2 must be at least 1 and divide the height and width of an "
                       "input of shape (1,1,3,4)",
                       ValueError);
  CHECK_THROWS_WITH_AS(F::pixel_shuffle(zeros({4, 4}), 2),
                       "pixel_shuffle: expected an input of shape (*, C, H, W), got (4,4)", ShapeError);
}

TEST_CASE("padding modules: torch 1.13's values, the padding spec, and errors") {
  // torch: nn.ReflectionPad2d((1, 1, 2, 0)) of arange(9).reshape(1, 1, 3, 3).
  nn::ReflectionPad2d reflect{nn::PadOptions({1, 1, 2, 0})};
  const Tensor x = arange(0, 9, 1, kFloat64).reshape({1, 1, 3, 3});
  const Tensor y = reflect(x);
  CHECK(y.shape() == Shape{1, 1, 5, 5});
  check_values(y, {7, 6, 7, 8, 7, 4, 3, 4, 5, 4, 1, 0, 1, 2, 1, 4, 3, 4, 5, 4, 7, 6, 7, 8, 7}, 1e-15);
  // nn.ReplicationPad1d((2, 1)), nn.ConstantPad1d(1, -1.0), nn.ZeroPad2d(1).
  nn::ReplicationPad1d replicate{nn::PadOptions({2, 1})};
  check_values(replicate(arange(0, 3, 1, kFloat64).reshape({1, 1, 3})), {0, 0, 0, 1, 2, 2}, 1e-15);
  nn::ConstantPad1d constant{nn::PadOptions({1}).value(-1.0)};
  check_values(constant(arange(0, 3, 1, kFloat64).reshape({1, 3})), {-1, 0, 1, 2, -1}, 1e-15);
  nn::ZeroPad2d zero{nn::PadOptions({1})};
  check_values(zero(ones({1, 1, 1, 1}, kFloat64)), {0, 0, 0, 0, 1, 0, 0, 0, 0}, 1e-15);
  nn::ReplicationPad2d edges{nn::PadOptions({1})};
  nn::ConstantPad2d fill{nn::PadOptions({0, 1, 1, 0}).value(7.0)};
  nn::ReflectionPad1d mirror{nn::PadOptions({1})};
  CHECK(edges(zeros({2, 3, 4})).shape() == Shape{2, 5, 6});
  CHECK(fill(zeros({2, 3, 4})).shape() == Shape{2, 4, 5});
  CHECK(mirror(zeros({2, 3})).shape() == Shape{2, 5});
  CHECK(reflect->pads() == std::vector<std::int64_t>{1, 1, 2, 0});
  CHECK_THROWS_WITH_AS(nn::ReflectionPad2d(nn::PadOptions({1, 2})),
                       "ReflectionPad2d: padding takes one value or 4 (left, right, top, bottom), got (1,2)",
                       ValueError);
  CHECK_THROWS_WITH_AS(reflect(zeros({3, 3})),
                       "ReflectionPad2d: expected an input with at least 3 axes, got shape (3,3)", ShapeError);
  CHECK_THROWS_WITH_AS(mirror(zeros({2, 1})), doctest::Contains("pad (reflect): pads (1, 1) do not fit axis 1"),
                       ValueError);
  // The 3-D modules pad the last three axes, (left, right, top, bottom, front, back), as F::pad.
  const Tensor volume = arange(0, 24, 1, kFloat64).reshape({1, 2, 3, 4});
  nn::ReflectionPad3d reflect3{nn::PadOptions({1, 0, 2, 1, 1, 1})};
  nn::ReplicationPad3d replicate3{nn::PadOptions({1})};
  nn::ConstantPad3d constant3{nn::PadOptions({0, 1, 0, 0, 1, 0}).value(-3.0)};
  CHECK(max(abs(reflect3(volume) - F::pad(volume, {1, 0, 2, 1, 1, 1}, F::PadMode::Reflect))).item() == 0.0);
  CHECK(replicate3(volume).shape() == Shape{1, 4, 5, 6});
  CHECK(replicate3(volume).select(1, 0).select(1, 0).select(1, 0).item() == 0.0);  // the corner repeated
  CHECK(constant3(volume).shape() == Shape{1, 3, 3, 5});
  CHECK(constant3(volume).select(1, 0).select(1, 1).select(1, 2).item() == -3.0);  // the front plane
  CHECK_THROWS_WITH_AS(nn::ConstantPad3d(nn::PadOptions({1, 2})),
                       "ConstantPad3d: padding takes one value or 6 (left, right, top, bottom, front, back), got (1,2)",
                       ValueError);
}
