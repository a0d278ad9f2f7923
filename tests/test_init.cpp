// Seeded initialisers: bounds and spreads from their formulas, reproducibility, errors.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "tapegrad/nn/nn.h"

using namespace tapegrad;

namespace {

double stddev(const Tensor& t) { return std::sqrt(t.to(kFloat64).var({}, 0).item()); }
double max_abs(const Tensor& t) { return t.abs().max().item(); }

}  // namespace

TEST_CASE("init: xavier and kaiming follow their formulas") {
  Generator gen(0);
  Tensor w = empty({300, 200});  // fan_out 300, fan_in 200
  nn::init::xavier_uniform_(w, gen);
  const double a = std::sqrt(6.0 / 500.0);
  CHECK(max_abs(w) <= a);
  CHECK(max_abs(w) > 0.99 * a);
  CHECK(stddev(w) == doctest::Approx(a / std::sqrt(3.0)).epsilon(0.02));
  nn::init::xavier_normal_(w, gen, 2.0);
  CHECK(stddev(w) == doctest::Approx(2.0 * std::sqrt(2.0 / 500.0)).epsilon(0.02));
  nn::init::kaiming_uniform_(w, gen);
  const double bound = std::sqrt(3.0) * std::sqrt(2.0 / 200.0);
  CHECK(max_abs(w) <= bound);
  CHECK(max_abs(w) > 0.99 * bound);
  nn::init::kaiming_normal_(w, gen, 0.0, nn::init::FanMode::FanOut);
  CHECK(stddev(w) == doctest::Approx(std::sqrt(2.0 / 300.0)).epsilon(0.02));
  nn::init::normal_(w, 1.0, 0.5, gen);
  CHECK(w.mean().item() == doctest::Approx(1.0).epsilon(0.01));
  CHECK(stddev(w) == doctest::Approx(0.5).epsilon(0.02));
  nn::init::zeros_(w);
  CHECK(max_abs(w) == 0.0);
  nn::init::ones_(w);
  CHECK(w.mean().item() == 1.0);
  // Receptive fields count in the fans: (out 4, in 3, 5) -> fan_in 15, fan_out 20.
  CHECK(nn::init::fans(empty({4, 3, 5})) == std::pair<std::int64_t, std::int64_t>{15, 20});
}

TEST_CASE("init: the same seed gives the same weights, and parameters stay leaves") {
  Generator a(11), b(11);
  Tensor x = empty({5, 4}).requires_grad_();
  Tensor y = empty({5, 4}).requires_grad_();
  nn::init::xavier_uniform_(x, a);
  nn::init::xavier_uniform_(y, b);
  CHECK(x.to_vector<float>() == y.to_vector<float>());
  CHECK(x.is_leaf());
  CHECK_FALSE(static_cast<bool>(x.grad_fn()));
}

TEST_CASE("init: errors name the shape") {
  Generator gen(0);
  CHECK_THROWS_WITH_AS(nn::init::xavier_uniform_(empty({3}), gen),
                       "init: fan in and fan out need a tensor with at least 2 dimensions, got shape (3)", ShapeError);
  CHECK_THROWS_WITH_AS(nn::init::kaiming_normal_(empty({3, 0}), gen),
                       "init: kaiming initialisation of a tensor with zero fan, shape (3,0)", ValueError);
}

TEST_CASE("init: random tensors and initialisers without a generator draw from the default one") {
  // manual_seed(n) makes the default generator draw what Generator(n) draws.
  manual_seed(21);
  const std::vector<float> from_default = randn({6}).to_vector<float>();
  const std::vector<double> uniform_default = uniform({4}, -2.0, 3.0, kFloat64).to_vector<double>();
  Tensor w = empty({5, 4});
  nn::init::kaiming_uniform_(w);
  const std::vector<std::int64_t> ints = randint(0, 10, {8}).to_vector<std::int64_t>();

  Generator gen(21);
  CHECK(from_default == randn({6}, gen).to_vector<float>());
  CHECK(uniform_default == uniform({4}, -2.0, 3.0, gen, kFloat64).to_vector<double>());
  Tensor v = empty({5, 4});
  nn::init::kaiming_uniform_(v, gen);
  CHECK(w.to_vector<float>() == v.to_vector<float>());
  CHECK(ints == randint(0, 10, {8}, gen).to_vector<std::int64_t>());
  for (double u : uniform_default) CHECK((u >= -2.0 && u < 3.0));
}

TEST_CASE("init: trunc_normal_ draws the truncated normal, constant_ fills") {
  Generator gen(3);
  Tensor w = empty({200, 100});
  nn::init::trunc_normal_(w, 0.0, 1.0, -2.0, 2.0, gen);
  CHECK(w.min().item() >= -2.0);
  CHECK(w.max().item() <= 2.0);
  CHECK(w.max().item() > 1.9);
  CHECK(std::abs(w.mean().item()) < 0.02);
  // The standard normal truncated to [-2, 2] has variance 1 - 4 phi(2) / (Phi(2) - Phi(-2)).
  const double phi2 = std::exp(-2.0) / std::sqrt(2.0 * M_PI), mass = std::erf(2.0 / std::sqrt(2.0));
  CHECK(stddev(w) == doctest::Approx(std::sqrt(1.0 - 4.0 * phi2 / mass)).epsilon(0.02));
  // One side only: the half normal N(1, 0.5^2) above its mean, mean 1 + 0.5 sqrt(2 / pi).
  nn::init::trunc_normal_(w, 1.0, 0.5, 1.0, INFINITY, gen);
  CHECK(w.min().item() >= 1.0);
  CHECK(w.mean().item() == doctest::Approx(1.0 + 0.5 * std::sqrt(2.0 / M_PI)).epsilon(0.01));
  Generator first(5), second(5);
  Tensor u = empty({4, 3}), v = empty({4, 3});
  nn::init::trunc_normal_(u, 0.0, 1.0, -2.0, 2.0, first);
  nn::init::trunc_normal_(v, 0.0, 1.0, -2.0, 2.0, second);
  CHECK(u.to_vector<float>() == v.to_vector<float>());
  nn::init::constant_(w, 0.25);
  CHECK(w.min().item() == 0.25);
  CHECK(w.max().item() == 0.25);
  CHECK_THROWS_WITH_AS(nn::init::trunc_normal_(w, 0.0, 0.0, -2.0, 2.0, gen),
                       "init: trunc_normal_ needs a finite std > 0, got 0", ValueError);
  CHECK_THROWS_WITH_AS(nn::init::trunc_normal_(w, 0.0, 1.0, 2.0, 2.0, gen),
                       "init: trunc_normal_ needs a < b, got a 2 and b 2", ValueError);
  CHECK_THROWS_WITH_AS(nn::init::trunc_normal_(w, 0.0, 1.0, 10.0, 11.0, gen),
                       doctest::Contains("init: trunc_normal_'s bounds [10, 11] hold"), ValueError);
}

TEST_CASE("init: orthogonal_ gives orthonormal rows or columns, times the gain") {
  Generator gen(4);
  const auto gram_error = [](const Tensor& m, double scale) {
    // m (r, c) with r <= c: m m^T should be scale^2 I.
    const Tensor gram = matmul(m.to(kFloat64), m.to(kFloat64).transpose(0, 1));
    return (gram - eye(m.size(0), std::nullopt, kFloat64) * (scale * scale)).abs().max().item();
  };
  Tensor wide = empty({3, 5});
  nn::init::orthogonal_(wide, gen);
  CHECK(gram_error(wide, 1.0) < 1e-6);
  Tensor tall = empty({6, 4}, kFloat64);
  nn::init::orthogonal_(tall, gen, 2.0);
  CHECK(gram_error(tall.transpose(0, 1), 2.0) < 1e-12);
  Tensor square = empty({4, 4}, kFloat64);
  nn::init::orthogonal_(square, gen);
  CHECK(gram_error(square, 1.0) < 1e-12);
  CHECK(gram_error(square.transpose(0, 1), 1.0) < 1e-12);
  // A convolution-shaped weight is viewed as (out, in * kernel).
  Tensor conv = empty({4, 2, 3}, kFloat64);
  nn::init::orthogonal_(conv, gen);
  CHECK(gram_error(conv.reshape({4, 6}), 1.0) < 1e-12);
  // Uniform over the orthogonal group: the diagonal is not always positive (as it would be if the
  // signs were left to the factorisation).
  int negative = 0;
  for (int i = 0; i < 20; ++i) {
    nn::init::orthogonal_(square, gen);
    const std::vector<double> d = diagonal(square).to_vector<double>();
    negative += std::any_of(d.begin(), d.end(), [](double x) { return x < 0.0; }) ? 1 : 0;
  }
  CHECK(negative > 5);
  CHECK_THROWS_WITH_AS(nn::init::orthogonal_(empty({3}), gen),
                       "init: orthogonal_ needs a tensor with at least 2 dimensions, got shape (3)", ShapeError);
}
