// The smaller torch.nn layers: LocalResponseNorm and ChannelShuffle (against torch 1.13's values),
// AlphaDropout and FeatureAlphaDropout (their affine map, the statistics they keep, one draw per
// channel), RReLU (slopes in range, their mean in eval mode), Softmax2d, Unflatten, Fold and Unfold,
// ZeroPad1d and ZeroPad3d, CircularPad1d/2d/3d; gradchecks and the errors.

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "tapegrad/nn/nn.h"
#include "tests/testing.h"

using namespace tapegrad;
namespace F = tapegrad::nn::functional;
using tapegrad::testing::check_gradients;
using tapegrad::testing::check_values;
using tapegrad::testing::max_abs_diff;

namespace {

// x: (1, 4, 3), the input of the values printed by torch 1.13's F.local_response_norm below.
Tensor lrn_input() {
  return tensor({0.5, -1.0, 2.0, 1.5, 0.25, -0.75, -2.0, 1.0, 0.5, 0.3, 0.6, -0.9}, kFloat64).reshape({1, 4, 3});
}

}  // namespace

TEST_CASE("more layers: local_response_norm and channel_shuffle match torch's") {
  const Tensor x = lrn_input();
  check_values(F::local_response_norm(x, 3, 0.5, 0.75, 2.0),
               {0.2579630127662672, -0.5579479807701592, 0.9338970745979659, 0.6446528403930055, 0.13197952010239375,
                -0.3462983945643591, -0.8651550257048846, 0.5466865363204415, 0.27032787449056916, 0.143158671470799,
                0.32916211529372863, -0.5022252741701893},
               1e-14);
  // An even window (one channel before, none after) over a 4-D input.
  check_values(F::local_response_norm(x.reshape({1, 4, 3, 1}), 2, 1.0, 0.5, 1.0),
               {0.47140452079103173, -0.8164965809277261, 1.1547005383792517, 1.0, 0.20203050891044214,
                -0.41403933560541256, -0.9847319278346618, 0.8081220356417685, 0.4216370213557839, 0.17192047651837583,
                0.46291004988627577, -0.7276068751089989},
               1e-14);
  nn::LocalResponseNorm lrn(nn::LocalResponseNormOptions(3).alpha(0.5).k(2.0));
  CHECK(max_abs_diff(lrn(x), F::local_response_norm(x, 3, 0.5, 0.75, 2.0)) == 0.0);
  check_gradients([](const TensorList& in) { return F::local_response_norm(in[0], 3, 0.5, 0.75, 2.0); }, {x});
  CHECK_THROWS_WITH_AS(F::local_response_norm(x.select(0, 0), 3),
                       "local_response_norm: expected an input of 3 or more axes (N, C, ...), got (4,3)", ShapeError);
  CHECK_THROWS_WITH_AS(F::local_response_norm(x, 0), "local_response_norm: size must be at least 1, got 0", ValueError);
  CHECK(F::local_response_norm(zeros({0, 4, 3}, kFloat64), 3).shape() == Shape{0, 4, 3});  // a zero batch

  // Six channels in three groups of two: channel g * 2 + i moves to i * 3 + g (torch's order).
  const Tensor y = arange(0.0, 12.0, 1.0, kFloat64).reshape({1, 6, 2});
  const Tensor shuffled = nn::ChannelShuffle(3)(y);
  CHECK(shuffled.to_vector<double>() == std::vector<double>{0, 1, 4, 5, 8, 9, 2, 3, 6, 7, 10, 11});
  CHECK(max_abs_diff(F::channel_shuffle(shuffled, 2), y) == 0.0);  // (3, 2) read back as (2, 3)
  CHECK_THROWS_WITH_AS(F::channel_shuffle(y, 4),
                       "channel_shuffle: groups must be positive and divide the 6 channels, got 4", ValueError);
  CHECK_THROWS_WITH_AS(F::channel_shuffle(y.select(0, 0), 3),
                       "channel_shuffle: expected an input of 3 or more axes (N, C, ...), got (6,2)", ShapeError);
  Generator gen(84);
  check_gradients([](const TensorList& in) { return F::channel_shuffle(in[0], 2); }, {randn({2, 4, 3}, gen, kFloat64)});
}

TEST_CASE("more layers: alpha dropout maps kept and dropped entries affinely and keeps mean 0 and variance 1") {
  Generator gen(81);
  const Tensor x = randn({400, 250}, gen, kFloat64).requires_grad_(true);
  const double p = 0.2, alpha = 1.7580993408473766;
  const double a = 1.0 / std::sqrt((alpha * alpha * p + 1.0) * (1.0 - p));
  Generator masks(5);
  const Tensor y = F::alpha_dropout(x, p, true, masks);
  const std::vector<double> xs = x.detach().to_vector<double>(), ys = y.detach().to_vector<double>();
  std::size_t dropped = 0;
  double mean = 0.0, square = 0.0;
  for (std::size_t i = 0; i < ys.size(); ++i) {
    const bool kept = std::abs(ys[i] - (a * xs[i] + a * alpha * p)) < 1e-12;
    if (!kept) {
      CHECK(ys[i] == doctest::Approx(a * alpha * (p - 1.0)).epsilon(1e-14));
      ++dropped;
    }
    mean += ys[i];
    square += ys[i] * ys[i];
  }
  const double n = static_cast<double>(ys.size());
  mean /= n;
  CHECK(static_cast<double>(dropped) / n == doctest::Approx(p).epsilon(0.02));
  CHECK(std::abs(mean) < 0.01);
  CHECK(square / n - mean * mean == doctest::Approx(1.0).epsilon(0.02));
  // The gradient is a where the entry was kept, 0 where dropped.
  sum(y).backward();
  const std::vector<double> grads = x.grad().to_vector<double>();
  for (std::size_t i = 0; i < grads.size(); i += 997) {
    const bool kept = std::abs(ys[i] - (a * xs[i] + a * alpha * p)) < 1e-12;
    CHECK(grads[i] == doctest::Approx(kept ? a : 0.0));
  }

  // Not training, or p = 0: the identity; p = 1: zeros.
  CHECK(max_abs_diff(F::alpha_dropout(x, p, false, masks), x) == 0.0);
  CHECK(max_abs_diff(F::alpha_dropout(x, 0.0, true, masks), x) == 0.0);
  CHECK(max_abs_diff(F::alpha_dropout(x, 1.0, true, masks), zeros({400, 250}, kFloat64)) == 0.0);
  CHECK_THROWS_WITH_AS(F::alpha_dropout(x, 1.5, true, masks), "alpha_dropout: p must be in [0, 1], got 1.5",
                       ValueError);
  CHECK_THROWS_WITH_AS(F::feature_alpha_dropout(x.select(0, 0), 0.5, true, masks),
                       "feature_alpha_dropout: expected an input (N, C, ...), got (250)", ShapeError);

  // The feature form drops whole channels: each (sample, channel) slab is all kept or all dropped.
  const Tensor images = randn({8, 16, 3, 3}, gen, kFloat64);
  nn::FeatureAlphaDropout drop(nn::DropoutOptions(0.5));
  const Tensor out = drop(images);
  const double a_half = 1.0 / std::sqrt((alpha * alpha * 0.5 + 1.0) * 0.5);
  const Tensor dropped_value = full({8, 16, 3, 3}, a_half * alpha * -0.5, kFloat64);
  const Tensor is_dropped = lt(abs(out - dropped_value), 1e-12).to(kFloat64);
  const Tensor per_channel = sum(is_dropped, {2, 3});  // 0 or 9 everywhere
  for (const double count : per_channel.to_vector<double>()) CHECK((count == 0.0 || count == 9.0));
  drop->eval();
  CHECK(max_abs_diff(drop(images), images) == 0.0);
  nn::AlphaDropout plain(nn::DropoutOptions(0.3));
  CHECK(max_abs_diff(plain(images), images) > 0.0);
  plain->eval();
  CHECK(max_abs_diff(plain(images), images) == 0.0);
}

TEST_CASE("more layers: RReLU draws a slope in [lower, upper] per negative entry, and uses their mean in eval") {
  Generator gen(82);
  const Tensor x = randn({50, 40}, gen, kFloat64).requires_grad_(true);
  nn::RReLU rrelu(nn::RReLUOptions().lower(0.1).upper(0.3).generator(&gen));
  const Tensor y = rrelu(x);
  sum(y).backward();
  const std::vector<double> xs = x.detach().to_vector<double>(), ys = y.detach().to_vector<double>(),
                            grads = x.grad().to_vector<double>();
  double smallest = 1.0, largest = 0.0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    if (xs[i] > 0) {
      CHECK(ys[i] == xs[i]);
      CHECK(grads[i] == 1.0);
      continue;
    }
    const double slope = ys[i] / xs[i];
    CHECK(slope >= 0.1);
    CHECK(slope <= 0.3);
    CHECK(grads[i] == doctest::Approx(slope).epsilon(1e-12));  // the gradient is the slope drawn
    smallest = std::min(smallest, slope);
    largest = std::max(largest, slope);
  }
  CHECK(smallest < 0.11);  // the draws cover the range
  CHECK(largest > 0.29);
  rrelu->eval();
  CHECK(max_abs_diff(rrelu(x), F::leaky_relu(x, 0.2)) < 1e-15);
  check_gradients([&](const TensorList& in) { return F::rrelu(in[0], 0.1, 0.3, false, gen); },
                  {x.detach().narrow(0, 0, 3)});
  CHECK_THROWS_WITH_AS(F::rrelu(x, 0.4, 0.3, true, gen),
                       "rrelu: expected 0 <= lower <= upper, got lower 0.4 and upper 0.3", ValueError);
  CHECK_THROWS_WITH_AS(nn::RReLU(nn::RReLUOptions().lower(0.5).upper(0.2)),
                       "RReLU: expected 0 <= lower <= upper, got lower 0.5 and upper 0.2", ValueError);
  const auto generators = rrelu->named_generators();  // a checkpoint keeps the slopes' generator
  REQUIRE(generators.size() == 1);
  CHECK(generators[0].first == "generator");
}

TEST_CASE("more layers: Softmax2d, Unflatten, Fold and Unfold, ZeroPad1d and ZeroPad3d") {
  Generator gen(83);
  const Tensor images = randn({2, 3, 4, 5}, gen, kFloat64);
  CHECK(max_abs_diff(nn::Softmax2d()(images), softmax(images, 1)) == 0.0);
  CHECK(max_abs_diff(nn::Softmax2d()(images.select(0, 1)), softmax(images.select(0, 1), 0)) == 0.0);
  CHECK_THROWS_WITH_AS(nn::Softmax2d()(images.select(0, 0).select(0, 0)),
                       "Softmax2d: expected an input (N, C, H, W) or (C, H, W), got (4,5)", ShapeError);

  const Tensor flat = nn::Flatten()(images);  // (2, 60)
  CHECK(max_abs_diff(nn::Unflatten(nn::UnflattenOptions(1, {3, 4, 5}))(flat), images) == 0.0);
  CHECK(nn::Unflatten(nn::UnflattenOptions(-1, {-1, 5}))(flat).shape() == Shape{2, 12, 5});
  CHECK_THROWS_WITH_AS(nn::Unflatten(nn::UnflattenOptions(1, {7, -1}))(flat),
                       "Unflatten: axis 1 of size 60 cannot be split into (7,-1)", ShapeError);
  CHECK_THROWS_WITH_AS(nn::Unflatten(nn::UnflattenOptions(1, {std::int64_t{1} << 62, 4}))(flat),
                       "Unflatten: axis 1 of size 60 cannot be split into (4611686018427387904,4)", ShapeError);
  CHECK_THROWS_WITH_AS(nn::Unflatten(nn::UnflattenOptions(2, {60}))(flat),
                       "Unflatten: axis 2 is out of range for an input of shape (2,60)", IndexError);

  nn::Unfold unfold(nn::UnfoldOptions({2, 3}).stride({1, 2}).padding({1}));
  const Tensor columns = unfold(images);
  CHECK(max_abs_diff(columns, tapegrad::unfold(images, {2, 3}, {1}, {1}, {1, 2})) == 0.0);
  nn::Fold fold(nn::FoldOptions({4, 5}, {2, 3}).stride({1, 2}).padding({1}));
  CHECK(max_abs_diff(fold(columns), tapegrad::fold(columns, {4, 5}, {2, 3}, {1}, {1}, {1, 2})) == 0.0);

  const Tensor signal = ones({1, 2, 3}, kFloat64);
  const Tensor padded = nn::ZeroPad1d(nn::PadOptions({2, 1}))(signal);
  CHECK(padded.shape() == Shape{1, 2, 6});
  CHECK(padded.select(1, 0).to_vector<double>() == std::vector<double>{0, 0, 1, 1, 1, 0});
  const Tensor volume = nn::ZeroPad3d(nn::PadOptions({1}))(ones({1, 1, 2, 2, 2}, kFloat64));
  CHECK(volume.shape() == Shape{1, 1, 4, 4, 4});
  CHECK(sum(volume).item() == 8.0);
}

TEST_CASE("more layers: CircularPad1d, 2d and 3d wrap around as torch's") {
  const Tensor signal = arange(1, 5, 1, kFloat64).reshape({1, 1, 4});
  CHECK(nn::CircularPad1d(nn::PadOptions({2, 1}))(signal).to_vector<double>() ==
        std::vector<double>{3, 4, 1, 2, 3, 4, 1});
  // torch.nn.functional.pad(arange(12).reshape(1, 1, 3, 4), (2, 1, 1, 0), mode='circular') (PyTorch 1.13).
  const Tensor image = arange(0, 12, 1, kFloat64).reshape({1, 1, 3, 4});
  CHECK(
      nn::CircularPad2d(nn::PadOptions({2, 1, 1, 0}))(image).to_vector<double>() ==
      std::vector<double>{10, 11, 8, 9, 10, 11, 8, 2, 3, 0, 1, 2, 3, 0, 6, 7, 4, 5, 6, 7, 4, 10, 11, 8, 9, 10, 11, 8});
  const Tensor volume = arange(0, 8, 1, kFloat64).reshape({1, 1, 2, 2, 2});
  const Tensor wrapped = nn::CircularPad3d(nn::PadOptions({1}))(volume);
  CHECK(wrapped.shape() == Shape{1, 1, 4, 4, 4});
  CHECK(max_abs_diff(wrapped, F::pad(volume, {1, 1, 1, 1, 1, 1}, F::PadMode::Circular)) == 0.0);
  Generator gen(5);
  check_gradients(
      [](const TensorList& in) {
        return nn::CircularPad2d(nn::PadOptions({2, 1, 1, 2}))(in[0]);
      },
      {randn({1, 2, 3, 4}, gen, kFloat64)});
  CHECK_THROWS_WITH_AS(nn::CircularPad1d(nn::PadOptions({5, 0}))(signal), doctest::Contains("at most the axis's size"),
                       ValueError);
  CHECK_THROWS_WITH_AS(nn::CircularPad2d(nn::PadOptions({1, 2, 3})), doctest::Contains("CircularPad2d"), ValueError);
}
