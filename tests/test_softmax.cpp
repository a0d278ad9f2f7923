// The softmax family (softmax, log_softmax, causal_softmax; ops/softmax.cpp): forward values worked
// by hand (cross-checked with PyTorch 1.13), stability, masked rows, the fused forms against their
// composites, float64 gradchecks and error messages.

#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::any_nan;
using tapegrad::testing::check_close;
using tapegrad::testing::check_gradients;
using tapegrad::testing::check_values;
using tapegrad::testing::distinct_3d;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

TEST_CASE("softmax: softmax and log_softmax forward values") {
  check_values(softmax(tensor({1, 2, 3}), 0), {0.0900306, 0.2447285, 0.6652410});
  check_values(softmax(tensor({1, 2, 3}, kFloat64), -1), {0.0900305732, 0.2447284711, 0.6652409558}, 1e-9);
  check_values(log_softmax(tensor({1, 2, 3}), 0), {-2.4076059644, -1.4076059644, -0.4076059644});
  check_values(log_softmax(tensor({1, 2, 3}, kFloat64), 0), {-2.4076059644, -1.4076059644, -0.4076059644}, 1e-10);
  // Along axis 0 (the strided path): columns (1,4), (5,2), (6,3)... softmax(1,4) = (e^-3, 1)/(1+e^-3).
  Tensor x = tensor({{1, 5, 3}, {4, 2, 6}});
  check_values(softmax(x, 0), {0.0474258732, 0.9525741268, 0.0474258732, 0.9525741268, 0.0474258732, 0.9525741268});
  check_values(log_softmax(x, 0),
               {-3.0485873516, -0.0485873516, -3.0485873516, -0.0485873516, -3.0485873516, -0.0485873516});
  CHECK(x.softmax(1).shape() == Shape{2, 3});
  // Each row sums to 1, also on a long row that mixes vector lanes and a scalar tail.
  Generator gen(3);
  Tensor long_rows = randn({3, 37}, gen) * 4.0;
  check_values(softmax(long_rows, 1).sum({1}), {1, 1, 1}, 1e-5);
  // A size-1 axis gives 1 (softmax) and 0 (log_softmax); a scalar too.
  check_values(softmax(tensor({{2, -7}}), 0), {1, 1});
  check_values(log_softmax(tensor({{2, -7}}), 0), {0, 0});
  check_values(softmax(scalar_tensor(5.0), 0), {1});
  CHECK(softmax(zeros({0, 4}), 1).shape() == Shape{0, 4});
}

TEST_CASE("softmax: softmax is stable with huge logits and -inf masks") {
  // (1000, 1001) overflows a naive exp; the shifted form gives (1 - s, s) with s = sigmoid(1).
  for (DType dtype : {kFloat32, kFloat64}) {
    check_values(softmax(tensor({1000, 1001}, dtype), 0), {0.2689414214, 0.7310585786});
    check_values(log_softmax(tensor({1000, 1001}, dtype), 0), {-1.3132616875, -0.3132616875});
    check_values(softmax(tensor({-1000, -1001}, dtype), 0), {0.7310585786, 0.2689414214});
  }
  // Masked attention: masked_fill(-inf) then softmax. Masked entries are exactly 0, no NaN.
  Tensor scores = tensor({{1, 2, 3}, {4, 5, 6}}, kFloat64);
  Tensor mask = from_vector(std::vector<bool>{false, true, false, false, true, true}, {2, 3});
  Tensor p = softmax(scores.masked_fill(mask, -kInf), -1);
  check_values(p, {0.1192029220, 0, 0.8807970780, 1, 0, 0}, 1e-9);
  CHECK(p.at({0, 1}) == 0.0);
  CHECK(p.at({1, 2}) == 0.0);
  Tensor lp = log_softmax(scores.masked_fill(mask, -kInf), -1);
  CHECK(lp.at({0, 1}) == -kInf);
  CHECK(lp.at({0, 0}) == doctest::Approx(-2.1269280110));
  CHECK(lp.at({1, 0}) == 0.0);
  // Masked along a non-last axis (strided path).
  Tensor pc = softmax(scores.masked_fill(mask, -kInf), 0);
  // Column 1 is entirely -inf: NaN there only.
  check_values(pc, {0.0474258732, NAN, 1, 0.9525741268, NAN, 0}, 1e-9);
}

TEST_CASE("softmax: a row that is entirely -inf gives NaN, as in PyTorch") {
  // Documented behaviour: max = -inf, and -inf - -inf = NaN for every entry of that row only.
  Tensor x = tensor({{-kInf, -kInf, -kInf}, {0.0, 0.0, 0.0}});
  Tensor p = softmax(x, 1);
  for (int j = 0; j < 3; ++j) CHECK(std::isnan(p.at({0, j})));
  check_values(p.select(0, 1), {1.0 / 3, 1.0 / 3, 1.0 / 3});
  Tensor lp = log_softmax(x, 1);
  for (int j = 0; j < 3; ++j) CHECK(std::isnan(lp.at({0, j})));
  CHECK(lp.at({1, 0}) == doctest::Approx(-std::log(3.0)));
}

TEST_CASE("softmax: fused softmax equals the composite exp(x - logsumexp(x))") {
  Generator gen(5);
  for (DType dtype : {kFloat32, kFloat64}) {
    const double tol = dtype == kFloat32 ? 1e-5 : 1e-12;
    Tensor x = randn({3, 4, 21}, gen, dtype) * 5.0;  // 21: vector lanes plus a tail
    for (std::int64_t axis : {0, 1, 2, -1}) {
      CAPTURE(axis);
      Tensor lse = logsumexp(x, {axis}, /*keepdim=*/true);
      check_close(softmax(x, axis), exp(x - lse), tol);
      check_close(log_softmax(x, axis), x - lse, tol);
    }
    // A non-contiguous input gives what its contiguous copy gives.
    Tensor xt = x.transpose(0, 2);  // (21, 4, 3)
    check_close(softmax(xt, 0), softmax(xt.contiguous(), 0), 0);
    check_close(log_softmax(xt, -1), x.log_softmax(0).transpose(0, 2), tol);
  }
}

TEST_CASE("softmax: softmax and log_softmax gradcheck along every axis and through transposes") {
  for (std::int64_t axis : {0, 1, 2, -1}) {
    CAPTURE(axis);
    check_gradients([axis](const TensorList& in) { return softmax(in[0], axis); }, {distinct_3d()});
    check_gradients([axis](const TensorList& in) { return log_softmax(in[0], axis); }, {distinct_3d()});
  }
  check_gradients([](const TensorList& in) { return softmax(in[0].transpose(0, 2), -1); }, {distinct_3d()});
  check_gradients([](const TensorList& in) { return log_softmax(in[0].transpose(1, 2), 1); }, {distinct_3d()});
  // Rows longer than a vector (lanes + tail) take the vectorised path.
  Generator gen(8);
  check_gradients([](const TensorList& in) { return softmax(in[0], 1); }, {randn({2, 19}, gen, kFloat64)});
  check_gradients([](const TensorList& in) { return log_softmax(in[0], 1); }, {randn({2, 19}, gen, kFloat64)});
  check_gradients([](const TensorList& in) { return log_softmax(in[0], 0); }, {randn({3, 19}, gen, kFloat64)});
}

TEST_CASE("softmax: softmax backward closed forms and masked rows") {
  // softmax: gx = y * (g - sum(g * y)); y = softmax(1,2,3), g = (1, 0, 0): gx = y * (e0 - y0).
  Tensor x = tensor({1, 2, 3}, kFloat64).requires_grad_();
  Tensor y = softmax(x, 0);
  y.backward(tensor({1, 0, 0}, kFloat64));
  const double y0 = 0.0900305732, y1 = 0.2447284711, y2 = 0.6652409558;
  check_values(x.grad(), {y0 * (1 - y0), -y1 * y0, -y2 * y0}, 1e-8);
  // log_softmax: gx = g - exp(y) * sum(g); g = (1, 1, 1): gx = 1 - 3 softmax.
  Tensor x2 = tensor({1, 2, 3}, kFloat64).requires_grad_();
  log_softmax(x2, 0).sum().backward();
  check_values(x2.grad(), {1 - 3 * y0, 1 - 3 * y1, 1 - 3 * y2}, 1e-8);
  // -inf entries (as masked_fill leaves them) get exactly 0 gradient and nothing is NaN. The
  // -inf values are in the leaf itself, so no masked_fill backward can hide a NaN.
  Tensor w = tensor({{0.3, -1.2, 2.0}, {1.5, 0.7, -0.4}}, kFloat64);
  Tensor s = tensor({{1, -kInf, 3}, {4, -kInf, -kInf}}, kFloat64).requires_grad_();
  (softmax(s, 1) * w).sum().backward();
  CHECK_FALSE(any_nan(s.grad()));
  CHECK(s.grad().at({0, 1}) == 0.0);
  CHECK(s.grad().at({1, 2}) == 0.0);
  CHECK(s.grad().at({1, 0}) == 0.0);  // a row with one survivor has probability 1 and no gradient
  // Row 0: y = (0.1192029220, 0, 0.8807970780), sum(g y) = 0.3 y0 + 2 y2; gx0 = y0 (0.3 - that).
  const double m0 = 0.1192029220, m2 = 0.8807970780, dot = 0.3 * m0 + 2.0 * m2;
  CHECK(s.grad().at({0, 0}) == doctest::Approx(m0 * (0.3 - dot)));
  Tensor s2 = tensor({{1, -kInf, 3}, {4, -kInf, -kInf}}, kFloat64).requires_grad_();
  Tensor g2 = tensor({{0.3, 0, 2.0}, {1.5, 0, 0}}, kFloat64);  // zero upstream gradient on -inf outputs
  log_softmax(s2, 1).backward(g2);
  CHECK_FALSE(any_nan(s2.grad()));
  CHECK(s2.grad().at({0, 1}) == 0.0);
  CHECK(s2.grad().at({1, 0}) == 0.0);  // g - exp(0) * 1.5
  CHECK(s2.grad().at({0, 0}) == doctest::Approx(0.3 - m0 * 2.3));
}

TEST_CASE("softmax: softmax errors") {
  CHECK_THROWS_WITH_AS(softmax(zeros({2, 3}), 2), "softmax: axis 2 is out of range for a tensor of rank 2", IndexError);
  CHECK_THROWS_WITH_AS(log_softmax(zeros({2, 3}), -3), "log_softmax: axis -3 is out of range for a tensor of rank 2",
                       IndexError);
  CHECK_THROWS_WITH_AS(softmax(arange(3), 0),
                       "softmax: expected a floating-point tensor (float32 or float64), got int64", TypeError);
  CHECK_THROWS_WITH_AS(log_softmax(zeros({2}, kBool), 0),
                       "log_softmax: expected a floating-point tensor (float32 or float64), got bool", TypeError);
}

TEST_CASE("softmax: causal_softmax equals softmax of the -inf-masked scores, and passes gradcheck") {
  Generator gen(21);
  // (B, H, Tq, Tk) with Tq == Tk (offset 0), cached keys (Tq < Tk, offset Tk - Tq), and rows
  // longer than a vector register, so the fused row loops run their vector and tail parts.
  for (Shape shape : {Shape{2, 3, 5, 5}, Shape{2, 2, 3, 7}, Shape{1, 1, 40, 40}, Shape{4, 6}}) {
    CAPTURE(shape.str());
    const std::int64_t tq = shape[shape.size() - 2], tk = shape[shape.size() - 1], offset = tk - tq;
    const Tensor x = randn(shape, gen, kFloat64).mul_(3.0);
    const Tensor key = arange(0.0, static_cast<double>(tk), 1.0, kFloat64).reshape({1, tk});
    const Tensor query = arange(0.0, static_cast<double>(tq), 1.0, kFloat64).reshape({tq, 1});
    const Tensor masked = gt(key, query + offset);  // (Tq, Tk), true = excluded
    const Tensor fused = causal_softmax(x, offset);
    const Tensor composed = softmax(masked_fill(x, masked, -INFINITY), -1);
    const std::vector<double> a = fused.to_vector<double>(), b = composed.to_vector<double>();
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == doctest::Approx(b[i]).epsilon(1e-12));
    // The same for the gradients, from one upstream gradient.
    const Tensor g = randn(shape, gen, kFloat64);
    const Tensor x1 = x.clone().requires_grad_(), x2 = x.clone().requires_grad_();
    causal_softmax(x1, offset).backward(g);
    softmax(masked_fill(x2, masked, -INFINITY), -1).backward(g);
    const std::vector<double> ga = x1.grad().to_vector<double>(), gb = x2.grad().to_vector<double>();
    for (std::size_t i = 0; i < ga.size(); ++i) CHECK(ga[i] == doctest::Approx(gb[i]).epsilon(1e-12));
    // float32 agrees with float64.
    const std::vector<double> f32 = causal_softmax(x.to(kFloat32), offset).to_vector<double>();
    for (std::size_t i = 0; i < f32.size(); ++i) CHECK(f32[i] == doctest::Approx(a[i]).epsilon(1e-5));
    if (x.numel() <= 60) check_gradients([offset](const TensorList& t) { return causal_softmax(t[0], offset); }, {x});
  }
  CHECK_THROWS_WITH_AS(causal_softmax(zeros({3})), "causal_softmax: expected (..., Tq, Tk) scores, got shape (3)",
                       ShapeError);
  CHECK_THROWS_AS(causal_softmax(zeros({2, 2}), -1), ValueError);
}
