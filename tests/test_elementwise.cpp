// Elementwise ops: forward values worked by hand, float64 gradchecks with broadcasting and
// non-contiguous inputs, PyTorch's gradients at the kinks, and error messages.

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::check_gradients;
using tapegrad::testing::check_values;

namespace {

// A (3, 4) input with entries well away from 0 and from +-1 (the kinks of relu, abs, clamp).
Tensor away_from_kinks() {
  return tensor({{-1.7, -0.6, 0.4, 1.3}, {2.1, -2.4, 0.7, -0.3}, {0.55, 1.8, -1.2, 0.25}}, kFloat64);
}

Tensor positive() { return tensor({{0.5, 1.5, 2.5, 3.0}, {0.8, 1.1, 4.0, 0.3}, {2.2, 0.9, 1.7, 0.6}}, kFloat64); }

}  // namespace

TEST_CASE("elementwise: arithmetic forward with broadcasting") {
  Tensor a = tensor({{1, 2}, {3, 4}});
  Tensor row = tensor({10, 20});
  Tensor col = tensor({10, 20}).reshape({2, 1});
  check_values(a + row, {11, 22, 13, 24});
  check_values(a - col, {-9, -8, -17, -16});
  check_values(a * row, {10, 40, 30, 80});
  check_values(a / col, {0.1, 0.2, 0.15, 0.2});
  check_values(row + col, {20, 30, 30, 40});  // (2) with (2,1) -> (2,2)
  check_values(a + 1.0, {2, 3, 4, 5});
  check_values(1.0 - a, {0, -1, -2, -3});
  check_values(a * 2.0, {2, 4, 6, 8});
  check_values(a / 4.0, {0.25, 0.5, 0.75, 1.0});
  check_values(2.0 / a, {2, 1, 2.0 / 3, 0.5});
  check_values(-a, {-1, -2, -3, -4});
  check_values(maximum(a, tensor({2.5})), {2.5, 2.5, 3, 4});
  check_values(minimum(a, tensor({2.5})), {1, 2, 2.5, 2.5});
  CHECK((a + row).shape() == Shape{2, 2});
  CHECK((tensor({1.0}) * zeros({3, 1, 2})).shape() == Shape{3, 1, 2});
}

TEST_CASE("elementwise: unary math and activations forward") {
  check_values(pow(tensor({1, 2, 3}), 2.0), {1, 4, 9});
  check_values(pow(tensor({4, 9}), 0.5), {2, 3});
  check_values(pow(tensor({2}), -1.0), {0.5});
  check_values(exp(tensor({0, 1})), {1, 2.718281828459045});
  check_values(log(tensor({1, 2.718281828459045})), {0, 1});
  check_values(sqrt(tensor({4, 9})), {2, 3});
  check_values(abs(tensor({-1, 2, 0})), {1, 2, 0});
  check_values(tanh(tensor({0, 0.5})), {0, 0.46211715726000974});
  check_values(sigmoid(tensor({0, 2, -2})), {0.5, 0.8807970779778823, 0.11920292202211755});
  check_values(relu(tensor({-1, 0, 2})), {0, 0, 2});
  // log(1 + e^x), and no overflow far out: softplus(100) = 100, softplus(-100) = e^-100.
  check_values(softplus(tensor({0, 2, -2})), {0.6931471805599453, 2.1269280110429727, 0.1269280110429725});
  check_values(softplus(tensor({100, -100})), {100, 0});
  CHECK(softplus(tensor({-100}).to(kFloat64)).item() == doctest::Approx(std::exp(-100.0)).epsilon(1e-12));
  const Tensor at_zero = zeros({2}).requires_grad_();
  softplus(at_zero).sum().backward();
  CHECK(at_zero.grad().to_vector<float>() == std::vector<float>{0.5f, 0.5f});  // sigmoid(0), not a subgradient of |x|
  // x Phi(x): Phi(1) = 0.8413447460685429
  check_values(gelu(tensor({1, -1, 0})), {0.8413447460685429, -0.15865525393145707, 0});
  check_values(gelu(tensor({1, -1}), GeluApproximation::Tanh), {0.8411919906082768, -0.15880800939172324});
  check_values(silu(tensor({1, -1})), {0.7310585786300049, -0.2689414213699951});
  check_values(clamp(tensor({-2, 0.5, 3}), -1.0, 1.0), {-1, 0.5, 1});
  check_values(clamp(tensor({-2, 0.5, 3}), std::nullopt, 1.0), {-2, 0.5, 1});
  check_values(clamp(tensor({-2, 0.5, 3}), 0.0, std::nullopt), {0, 0.5, 3});
}

TEST_CASE("elementwise: expm1 and log1p keep the digits exp(x) - 1 and log(1 + x) lose, as torch's") {
  // torch.expm1 / torch.log1p of these float64 values and the gradients of their sums, PyTorch 1.13.
  const Tensor x = tensor({-3.0, -1e-8, 0.0, 1e-8, 0.5, 2.0}, kFloat64).requires_grad_(true);
  const Tensor e = expm1(x);
  check_values(
      e,
      {-0.950212931632136, -9.999999950000001e-09, 0.0, 1.0000000050000001e-08, 0.6487212707001282, 6.38905609893065},
      1e-15);
  e.sum().backward();
  check_values(x.grad(),
               {0.04978706836786395, 0.9999999900000001, 1.0, 1.00000001, 1.6487212707001282, 7.38905609893065}, 1e-14);
  const Tensor y = tensor({-0.5, -1e-8, 0.0, 1e-8, 0.5, 2.0}, kFloat64).requires_grad_(true);
  const Tensor l = y.log1p();
  check_values(l,
               {-0.6931471805599453, -1.0000000050000001e-08, 0.0, 9.999999950000001e-09, 0.4054651081081644,
                1.0986122886681098},
               1e-15);
  l.sum().backward();
  check_values(y.grad(), {2.0, 1.0000000100000002, 1.0, 0.9999999900000002, 0.6666666666666666, 0.3333333333333333},
               1e-15);
  // In float32 exp(1e-8) - 1 is 0; expm1 and log1p give torch's 9.99999993922529e-09 (the float nearest 1e-8).
  CHECK((exp(tensor({1e-8})) - 1.0).item() == 0.0);
  CHECK(expm1(tensor({1e-8})).item() == 9.99999993922529e-09);
  CHECK(tensor({1e-8}).log1p().item() == 9.99999993922529e-09);
  // bfloat16 computed in float32 and rounded back, as exp and log.
  CHECK(expm1(tensor({0.5}).to(kBFloat16)).dtype() == kBFloat16);
  CHECK(expm1(tensor({0.5}).to(kBFloat16)).item() == tensor({0.6487212707001282}).to(kBFloat16).item());
  check_gradients([](const TensorList& t) { return expm1(t[0]); }, {away_from_kinks()});
  check_gradients([](const TensorList& t) { return log1p(t[0]); }, {positive() - 0.25});
  CHECK(expm1(tensor({1, 2}, kInt64)).dtype() == kFloat32);  // as torch's
}

TEST_CASE("elementwise: sin, cos, rsqrt and reciprocal match torch, values and gradients") {
  // torch.sin / cos of y and rsqrt / reciprocal of p, and the gradients of their sums, PyTorch 1.13.
  const std::vector<double> y{-1.2, 0.3, 2.0, 4.5}, p{0.25, 0.5, 2.0, 4.0};
  const std::vector<double> sines{-0.9320390859672263, 0.29552020666133955, 0.9092974268256817, -0.977530117665097};
  const std::vector<double> cosines{0.3623577544766736, 0.955336489125606, -0.4161468365471424, -0.2107957994307797};
  const auto run = [](const std::vector<double>& at, Tensor (*f)(const Tensor&), const std::vector<double>& out,
                      const std::vector<double>& grad) {
    const Tensor x = from_vector(at, {4}).requires_grad_(true);
    const Tensor r = f(x);
    check_values(r, out, 1e-15);
    r.sum().backward();
    check_values(x.grad(), grad, 1e-15);
  };
  run(y, sin, sines, cosines);
  run(y, cos, cosines, {0.9320390859672263, -0.29552020666133955, -0.9092974268256817, 0.977530117665097});
  run(p, rsqrt, {2.0, 1.414213562373095, 0.7071067811865475, 0.5},
      {-4.0, -1.4142135623730947, -0.17677669529663684, -0.0625});
  run(p, reciprocal, {4.0, 2.0, 0.5, 0.25}, {-16.0, -4.0, -0.25, -0.0625});
  // torch.rsqrt([0, -1]) = [inf, nan]; torch.reciprocal([0, -0]) = [inf, -inf].
  const std::vector<float> r = rsqrt(tensor({0.0, -1.0})).to_vector<float>();
  CHECK((std::isinf(r[0]) && r[0] > 0 && std::isnan(r[1])));
  CHECK(reciprocal(tensor({0.0, -0.0})).to_vector<float>() == std::vector<float>{INFINITY, -INFINITY});
  // The vectorised body and the scalar tail agree with the double values.
  const Tensor many = arange(-6.0, 6.0, 0.37);
  CHECK(testing::max_abs_diff(sin(many), sin(many.to(kFloat64))) < 1e-6);
  CHECK(testing::max_abs_diff(cos(many), cos(many.to(kFloat64))) < 1e-6);
  CHECK(sin(tensor({0.5}).to(kBFloat16)).dtype() == kBFloat16);
  check_gradients([](const TensorList& t) { return sin(t[0]) * cos(t[0]); }, {away_from_kinks()});
  check_gradients([](const TensorList& t) { return rsqrt(t[0]) + reciprocal(t[0]); }, {positive()});
}

TEST_CASE("elementwise: sign and the roundings are torch's with gradient 0, and isnan, isinf, isfinite") {
  // torch.round / floor / ceil / trunc of x, PyTorch 1.13 (round takes halves to even).
  const Tensor x = tensor({-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -0.7, 3.2}, kFloat64).requires_grad_(true);
  check_values(round(x), {-2, -2, -0.0, 0, 2, 2, -1, 3}, 1e-15);
  check_values(floor(x), {-3, -2, -1, 0, 1, 2, -1, 3}, 1e-15);
  check_values(ceil(x), {-2, -1, -0.0, 1, 2, 3, -0.0, 4}, 1e-15);
  check_values(trunc(x), {-2, -1, -0.0, 0, 1, 2, -0.0, 3}, 1e-15);
  // torch.sign([-2, 0, -0, 3, nan]) = [-1, 0, 0, 1, 0].
  const std::vector<float> signs = sign(tensor({-2.0, 0.0, -0.0, 3.0, NAN})).to_vector<float>();
  CHECK(signs == std::vector<float>{-1, 0, 0, 1, 0});
  CHECK_FALSE(std::signbit(signs[2]));
  (round(x) + floor(x) + ceil(x) + trunc(x) + sign(x)).sum().backward();
  check_values(x.grad(), std::vector<double>(8, 0.0), 1e-15);
  CHECK(round(tensor({2.5}).to(kBFloat16)).item() == 2.0);

  const Tensor special = tensor({1.0, NAN, INFINITY, -INFINITY, -0.0});
  CHECK(isnan(special).to_vector<int>() == std::vector<int>{0, 1, 0, 0, 0});
  CHECK(isinf(special).to_vector<int>() == std::vector<int>{0, 0, 1, 1, 0});
  CHECK(isfinite(special).to_vector<int>() == std::vector<int>{1, 0, 0, 0, 1});
  CHECK(isfinite(special.to(kBFloat16)).to_vector<int>() == std::vector<int>{1, 0, 0, 0, 1});
  CHECK(isnan(tensor({1, 2}, kInt64)).to_vector<int>() == std::vector<int>{0, 0});
  CHECK(isfinite(from_vector(std::vector<bool>{true}, {1})).to_vector<int>() == std::vector<int>{1});
  CHECK_THROWS_WITH_AS(floor(from_vector(std::vector<bool>{true}, {1})), doctest::Contains("floor"), TypeError);
}

TEST_CASE("elementwise: large float32 tensors take the vectorised path with the same values") {
  Generator gen(1);
  Tensor x = randn({1000, 33}, gen);  // odd width: vector tail
  Tensor x64 = x.to(kFloat64);
  auto close = [](const Tensor& a, const Tensor& b) { return (a.to(kFloat64) - b).abs().max().item() < 1e-5; };
  CHECK(close(exp(x), exp(x64)));
  CHECK(close(tanh(x), tanh(x64)));
  CHECK(close(sigmoid(x), sigmoid(x64)));
  CHECK(close(gelu(x), gelu(x64)));
  CHECK(close(silu(x), silu(x64)));
  CHECK(close(softplus(x * 10.0), softplus(x64 * 10.0)));
  // Far below zero softplus(x) = e^x: the vectorised body keeps it (not the 0 that log(1 + e^x) rounds to).
  const std::vector<float> far = softplus(zeros({64}) - 30.0).to_vector<float>();
  for (float v : far) CHECK(v == doctest::Approx(std::exp(-30.0)).epsilon(1e-6));
  CHECK(close(exp(x.transpose(0, 1)), exp(x64.transpose(0, 1))));  // strided input
}

TEST_CASE("elementwise: gradcheck of arithmetic with broadcast shapes") {
  Generator gen(0);
  const Tensor a = randn({3, 4}, gen);
  const Tensor row = randn({4}, gen);
  const Tensor col = randn({3, 1}, gen);
  const Tensor away = away_from_kinks();
  check_gradients([](const TensorList& x) { return x[0] + x[1]; }, {a, row});
  check_gradients([](const TensorList& x) { return x[0] - x[1]; }, {a, col});
  check_gradients([](const TensorList& x) { return x[0] * x[1]; }, {a, row});
  check_gradients([](const TensorList& x) { return x[0] * x[1]; }, {row, col});  // both broadcast
  check_gradients([](const TensorList& x) { return x[0] / x[1]; }, {a, away.narrow(0, 0, 1)});
  check_gradients([](const TensorList& x) { return x[0] + 2.0; }, {a});
  check_gradients([](const TensorList& x) { return 2.0 - x[0]; }, {a});
  check_gradients([](const TensorList& x) { return x[0] * 3.0; }, {a});
  check_gradients([](const TensorList& x) { return x[0] / 3.0; }, {a});
  check_gradients([](const TensorList& x) { return 3.0 / x[0]; }, {away});
  check_gradients([](const TensorList& x) { return -x[0]; }, {a});
  check_gradients([](const TensorList& x) { return maximum(x[0], x[1]); }, {away, row});
  check_gradients([](const TensorList& x) { return minimum(x[0], x[1]); }, {away, col});
}

TEST_CASE("elementwise: gradcheck of unary math and activations") {
  const Tensor x = away_from_kinks();
  const Tensor p = positive();
  check_gradients([](const TensorList& t) { return pow(t[0], 3.0); }, {x});
  check_gradients([](const TensorList& t) { return pow(t[0], 2.0); }, {x});
  check_gradients([](const TensorList& t) { return pow(t[0], -1.5); }, {p});
  check_gradients([](const TensorList& t) { return exp(t[0]); }, {x});
  check_gradients([](const TensorList& t) { return log(t[0]); }, {p});
  check_gradients([](const TensorList& t) { return sqrt(t[0]); }, {p});
  check_gradients([](const TensorList& t) { return abs(t[0]); }, {x});
  check_gradients([](const TensorList& t) { return tanh(t[0]); }, {x});
  check_gradients([](const TensorList& t) { return sigmoid(t[0]); }, {x});
  check_gradients([](const TensorList& t) { return relu(t[0]); }, {x});
  check_gradients([](const TensorList& t) { return gelu(t[0]); }, {x});
  check_gradients([](const TensorList& t) { return gelu(t[0], GeluApproximation::Tanh); }, {x});
  check_gradients([](const TensorList& t) { return silu(t[0]); }, {x});
  check_gradients([](const TensorList& t) { return softplus(t[0]); }, {x});
  check_gradients([](const TensorList& t) { return clamp(t[0], -1.0, 1.0); }, {x});
  check_gradients([](const TensorList& t) { return clamp(t[0], std::nullopt, 0.5); }, {x});
}

TEST_CASE("elementwise: gradcheck through non-contiguous views and repeated use") {
  const Tensor x = away_from_kinks();
  Generator gen(3);
  const Tensor y = randn({4, 3}, gen);
  // x transposed is (4, 3) with strides (1, 4).
  check_gradients([](const TensorList& t) { return t[0].transpose(0, 1) * t[1]; }, {x, y});
  check_gradients([](const TensorList& t) { return tanh(t[0].transpose(0, 1)) + t[1].slice(0, 0, 4, 2).sum(); },
                  {x, y});
  check_gradients([](const TensorList& t) { return gelu(t[0].slice(1, 0, 4, 2)); }, {x});
  // One tensor in several places.
  check_gradients([](const TensorList& t) { return t[0] * t[0].exp() + t[0].transpose(0, 1).sum(); }, {x});
}

TEST_CASE("elementwise: gradients at the kinks are PyTorch's") {
  // Gradcheck stays away from these points; the values are PyTorch 1.13's (float64, the gradient
  // of out.sum()): relu'(0) = 0, abs'(0) = 0, clamp passes the gradient at its bounds, maximum and
  // minimum split it on ties, sqrt'(0) = inf, (x^2)'(0) = 0.
  const auto grad_of = [](const std::function<Tensor(const Tensor&)>& f, const std::vector<double>& at) {
    Tensor x = from_vector(at, {static_cast<std::int64_t>(at.size())}).requires_grad_();  // float64
    f(x).sum().backward();
    return x.grad();
  };
  check_values(grad_of([](const Tensor& x) { return relu(x); }, {-1, 0, 1}), {0, 0, 1});
  check_values(grad_of([](const Tensor& x) { return abs(x); }, {-1, 0, 1}), {-1, 0, 1});
  check_values(grad_of([](const Tensor& x) { return clamp(x, -1.0, 1.0); }, {-2, -1, 0, 1, 2}), {0, 1, 1, 1, 0});
  check_values(grad_of([](const Tensor& x) { return pow(x, 2.0); }, {0}), {0});
  Tensor root = grad_of([](const Tensor& x) { return sqrt(x); }, {0, 4});
  CHECK(root.to_vector<double>() == std::vector<double>{std::numeric_limits<double>::infinity(), 0.25});

  Tensor a = tensor({1, 2, 3}, kFloat64).requires_grad_();
  Tensor b = tensor({1, 1, 4}, kFloat64).requires_grad_();
  maximum(a, b).sum().backward();
  check_values(a.grad(), {0.5, 1, 0});
  check_values(b.grad(), {0.5, 0, 1});
  Tensor c = tensor({1, 2, 3}, kFloat64).requires_grad_();
  Tensor d = tensor({1, 1, 4}, kFloat64).requires_grad_();
  minimum(c, d).sum().backward();
  check_values(c.grad(), {0.5, 0, 1});
  check_values(d.grad(), {0.5, 1, 0});
}

TEST_CASE("elementwise: gelu's vectorised backward equals the strided (scalar) path") {
  // 1003 values: full vectors plus a tail. The contiguous input takes the vectorised kernel;
  // the same values read through a stride-2 view take the per-element formula.
  Generator gen(11);
  const Tensor values = randn({1003}, gen).mul_(3.0);
  const Tensor wide = zeros({1003, 2});
  wide.select(1, 0).copy_(values);
  const Tensor upstream = randn({1003}, gen);
  for (GeluApproximation approx : {GeluApproximation::None, GeluApproximation::Tanh}) {
    const Tensor a = values.clone().requires_grad_();
    gelu(a, approx).backward(upstream);
    const Tensor b = wide.clone().requires_grad_();
    gelu(b.select(1, 0), approx).backward(upstream);
    const std::vector<float> fast = a.grad().to_vector<float>();
    const std::vector<float> slow = b.grad().select(1, 0).to_vector<float>();
    REQUIRE(fast.size() == slow.size());
    for (std::size_t i = 0; i < fast.size(); ++i) CHECK(fast[i] == doctest::Approx(slow[i]).epsilon(1e-5).scale(1.0));
  }
}

TEST_CASE("elementwise: gelu's vectorised forward equals the formula in double, body and tail") {
  // 1003 values: full vectors plus a scalar tail; each against 0.5 x (1 + erf(x / sqrt 2)) (or the
  // tanh form) evaluated in double.
  Generator gen(12);
  const std::vector<float> x = randn({1003}, gen).mul_(3.0).to_vector<float>();
  for (GeluApproximation approx : {GeluApproximation::None, GeluApproximation::Tanh}) {
    const std::vector<float> got = gelu(from_vector(x, {1003}), approx).to_vector<float>();
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double v = x[i];
      const double expected =
          approx == GeluApproximation::Tanh
              ? 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / 3.14159265358979323846) * (v + 0.044715 * v * v * v)))
              : 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
      CAPTURE(i);
      CHECK(got[i] == doctest::Approx(expected).epsilon(1e-5).scale(1.0));
    }
  }
}

TEST_CASE("elementwise: comparisons, where and masked_fill") {
  Tensor a = tensor({1, 2, 3});
  Tensor b = tensor({3, 2, 1});
  CHECK(lt(a, b).to_vector<int>() == std::vector<int>{1, 0, 0});
  CHECK(le(a, b).to_vector<int>() == std::vector<int>{1, 1, 0});
  CHECK(gt(a, b).to_vector<int>() == std::vector<int>{0, 0, 1});
  CHECK(ge(a, b).to_vector<int>() == std::vector<int>{0, 1, 1});
  CHECK(eq(a, b).to_vector<int>() == std::vector<int>{0, 1, 0});
  CHECK(ne(a, b).to_vector<int>() == std::vector<int>{1, 0, 1});
  CHECK(gt(a, 1.5).to_vector<int>() == std::vector<int>{0, 1, 1});
  CHECK(eq(arange(3), 1.0).to_vector<int>() == std::vector<int>{0, 1, 0});
  CHECK(gt(a, b).dtype() == kBool);
  Tensor m = gt(a, 1.5);
  CHECK(logical_not(m).to_vector<int>() == std::vector<int>{1, 0, 0});
  CHECK(logical_and(m, lt(a, 2.5)).to_vector<int>() == std::vector<int>{0, 1, 0});
  CHECK(logical_or(logical_not(m), eq(a, 3.0)).to_vector<int>() == std::vector<int>{1, 0, 1});

  check_values(where(m, a, b), {3, 2, 3});
  check_values(where(m, a, -1.0), {-1, 2, 3});
  Tensor scores = tensor({{1, 2, 3}, {4, 5, 6}});
  Tensor causal = from_vector(std::vector<bool>{false, true, true}, {3});
  check_values(masked_fill(scores, causal, -100.0), {1, -100, -100, 4, -100, -100});
  Tensor filled = masked_fill(scores, causal, -INFINITY);
  CHECK(std::isinf(filled.at({1, 2})));

  Generator gen(0);
  const Tensor cond = from_vector(std::vector<bool>{true, false, false, true}, {4});
  check_gradients([cond](const TensorList& t) { return where(cond, t[0], t[1]); },
                  {randn({3, 4}, gen), randn({4}, gen)});
  check_gradients([cond](const TensorList& t) { return masked_fill(t[0], cond, 2.0); }, {randn({3, 4}, gen)});
}

TEST_CASE("elementwise: dtype conversions carry gradients between float types") {
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  Tensor y = (x.to(kFloat64) * 3.0).sum();
  y.backward();
  CHECK(x.grad().dtype() == kFloat32);
  check_values(x.grad(), {3, 3});
  check_gradients([](const TensorList& t) { return t[0].to(kFloat32).to(kFloat64); }, {tensor({0.25, 0.5})},
                  GradcheckOptions{1e-3, 1e-5, 1e-3});
}

TEST_CASE("elementwise: errors name the op and the shapes") {
  CHECK_THROWS_WITH_AS(zeros({2, 3}) + zeros({4}), "add: shapes (2,3) and (4) cannot be broadcast together",
                       ShapeError);
  CHECK_THROWS_WITH_AS(zeros({2, 3}) * zeros({3, 2}), "mul: shapes (2,3) and (3,2) cannot be broadcast together",
                       ShapeError);
  CHECK_THROWS_WITH_AS(silu(arange(3)), doctest::Contains("silu"), TypeError);
  CHECK_THROWS_WITH_AS(clamp(zeros({2}), 1.0, 0.0), "clamp: min must not exceed max, got min 1, max 0", ValueError);
  CHECK_THROWS_WITH_AS(where(ones({2}), zeros({2}), zeros({2})),
                       "where: the condition must be a bool tensor, got float32", TypeError);
  CHECK_THROWS_WITH_AS(masked_fill(zeros({2}), from_vector(std::vector<bool>{true, false, true}, {3}), 0.0),
                       "masked_fill: shapes (3) and (2) cannot be broadcast together", ShapeError);
  CHECK_THROWS_WITH_AS(masked_fill(zeros({2}), from_vector(std::vector<bool>{true, false}, {2, 1}), 0.0),
                       "masked_fill: mask of shape (2,1) does not broadcast to the input's shape (2)", ShapeError);
  CHECK_THROWS_WITH_AS(logical_not(zeros({2})), "logical_not: the input must be a bool tensor, got float32", TypeError);
}

// ---------------------------------------------------------------- floor division and remainders

TEST_CASE("elementwise: floor_divide, remainder and fmod on floating point are torch's, edge cases included") {
  // torch.floor_divide / remainder / fmod of these float32 pairs: signs, a non-integer quotient,
  // -0, a tiny negative (remainder rounds to b), inf on either side, and a divisor that is not
  // exact in float32.
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor a = from_vector(std::vector<float>{5, -5, 5, -5, 5.5f, -0.0f, -1e-30f, inf, 5, -5, 7, -7}, {12});
  const Tensor b = from_vector(std::vector<float>{3, 3, -3, -3, 2, 3, 3, 3, inf, inf, 0.5f, 0.7f}, {12});
  const double nan = std::nan("");
  check_values(floor_divide(a, b), {1, -2, -2, 1, 2, -0.0, -1, nan, 0, -1, 14, -11}, 1e-15);
  check_values(remainder(a, b), {2, 1, -1, -2, 1.5, -0.0, 3, nan, 5, INFINITY, 0, 0.6999998688697815}, 1e-15);
  check_values(a % b, remainder(a, b).to_vector<double>(), 1e-15);
  check_values(fmod(a, b), {2, -2, 2, -2, 1.5, -0.0, -1.0000000031710769e-30, nan, 5, -5, 0, -1.1920928955078125e-07},
               1e-15);
  CHECK(std::signbit(floor_divide(a, b).to_vector<float>()[5]));  // -0, as torch's
  // A floating divisor of 0: a / b for floor_divide, NaN for both remainders.
  const Tensor z = tensor({5.0, -5.0, 0.0});
  check_values(floor_divide(z, 0.0), {INFINITY, -INFINITY, nan});
  check_values(remainder(z, 0.0), {nan, nan, nan});
  check_values(fmod(z, 0.0), {nan, nan, nan});
  // bfloat16 computed in float32 and rounded: torch gives [0.19921875, 0.08984375].
  const Tensor r = remainder(tensor({0.5, 4.0}).to(kBFloat16), tensor({0.3}).to(kBFloat16));
  CHECK(r.dtype() == kBFloat16);
  check_values(r, {0.19921875, 0.08984375}, 1e-15);
}

TEST_CASE("elementwise: floor_divide, remainder and fmod on int64 stay int64, with torch's dtypes") {
  const Tensor i = tensor({5, -5, 7, -7, 0, 9}, kInt64), j = tensor({3, 3, -2, -2, 4, -3}, kInt64);
  using V = std::vector<std::int64_t>;
  CHECK(floor_divide(i, j).to_vector<std::int64_t>() == V{1, -2, -4, 3, 0, -3});
  CHECK(remainder(i, j).to_vector<std::int64_t>() == V{2, 1, -1, -1, 0, 0});
  CHECK(fmod(i, j).to_vector<std::int64_t>() == V{2, -2, 1, -1, 0, 0});
  CHECK(floor_divide(i, 2).to_vector<std::int64_t>() == V{2, -3, 3, -4, 0, 4});
  CHECK((i % 2).to_vector<std::int64_t>() == V{1, 1, 1, 1, 0, 1});
  CHECK((i % 2).dtype() == kInt64);
  CHECK(fmod(i, 2).to_vector<std::int64_t>() == V{1, -1, 1, -1, 0, 1});
  // A double divisor makes them float32: torch gives these for i and 2.5.
  CHECK(remainder(i, 2.5).dtype() == kFloat32);
  check_values(floor_divide(i, 2.5), {2, -2, 2, -3, 0, 3}, 1e-15);
  check_values(remainder(i, 2.5), {0, -0.0, 2, 0.5, 0, 1.5}, 1e-15);
  check_values(fmod(i, 2.5), {0, -0.0, 2, -2, 0, 1.5}, 1e-15);
  // Promotion as the arithmetic ops: float32 with float64 (3,) is float64, with float64 () float32;
  // int64 with float32 is float32.
  const Tensor f = tensor({5.0, -5.0});
  CHECK(remainder(f, tensor({3.0}, kFloat64)).dtype() == kFloat64);
  CHECK(remainder(f, scalar_tensor(3.0, kFloat64)).dtype() == kFloat32);
  CHECK(remainder(tensor({5, -5}, kInt64), tensor({3.0})).dtype() == kFloat32);
  // INT64_MIN by -1 overflows: the quotient wraps around to itself, the remainders are 0.
  const std::int64_t lowest = std::numeric_limits<std::int64_t>::min();
  const Tensor m = from_vector(V{lowest, 7}, {2});
  CHECK(floor_divide(m, -1).to_vector<std::int64_t>() == V{lowest, -7});
  CHECK(remainder(m, -1).to_vector<std::int64_t>() == V{0, 0});
  CHECK(fmod(m, -1).to_vector<std::int64_t>() == V{0, 0});
}

TEST_CASE("elementwise: remainder and fmod gradients are torch's, floor_divide has none") {
  // torch: (remainder(x, y) * w).sum().backward() gives x.grad = w and y.grad = -sum(w floor(x / y))
  // over the broadcast rows; fmod the same with trunc.
  const Tensor w = tensor({{1, 2, 3}, {-1, 0.5, 2}}, kFloat64);
  struct Case {
    std::function<Tensor(const Tensor&, const Tensor&)> f;
    std::vector<double> value, grad_y;
  };
  const std::vector<Case> cases = {
      {[](const Tensor& x, const Tensor& y) { return remainder(x, y); },
       {0.7999999999999998, 1.9000000000000004, -0.19999999999999996, 0.20000000000000018, 0.7, -0.35000000000000003},
       {2, 6.5, 22}},
      {[](const Tensor& x, const Tensor& y) { return fmod(x, y); },
       {0.7999999999999998, -0.09999999999999964, 0.20000000000000007, 0.20000000000000018, -1.3, 0.04999999999999999},
       {2, 4, 17}}};
  for (std::size_t c = 0; c < cases.size(); ++c) {
    CAPTURE(c);
    const Tensor x = tensor({{5.3, -4.1, 2.2}, {7.7, -1.3, 0.45}}, kFloat64).requires_grad_(true);
    const Tensor y = tensor({1.5, 2.0, -0.4}, kFloat64).requires_grad_(true);
    const Tensor out = cases[c].f(x, y);
    check_values(out, cases[c].value, 1e-14);
    sum(out * w).backward();
    check_values(x.grad(), w.to_vector<double>(), 1e-15);
    check_values(y.grad(), cases[c].grad_y, 1e-15);
    check_gradients([f = cases[c].f](const TensorList& in) { return f(in[0], in[1]); }, {x.detach(), y.detach()});
  }
  const Tensor x = tensor({5.5, -2.5}, kFloat64).requires_grad_(true);
  CHECK_FALSE(floor_divide(x, 2.0).requires_grad());
  CHECK(remainder(x, 2).requires_grad());
}

TEST_CASE("elementwise: floor_divide, remainder and fmod errors") {
  const Tensor i = tensor({5, -5}, kInt64);
  CHECK_THROWS_WITH_AS(floor_divide(i, tensor({3, 0}, kInt64)),
                       "floor_divide: integer division by zero (the divisor of shape (2) holds a 0)", ValueError);
  CHECK_THROWS_WITH_AS(i % 0, "remainder: integer division by zero (the divisor of shape () holds a 0)", ValueError);
  CHECK_THROWS_WITH_AS(fmod(tensor({1.0, 0.0}).to(kBool), tensor({1.0}).to(kBool)),
                       "fmod: not implemented for bool tensors (convert them with to(kInt64))", TypeError);
  CHECK_THROWS_WITH_AS(remainder(tensor({1.0, 2.0}), tensor({1.0, 2.0, 3.0})), doctest::Contains("remainder"),
                       ShapeError);
}
