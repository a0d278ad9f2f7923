// Reductions and the softmax family: forward values worked by hand (cross-checked with
// PyTorch 1.13), keepdim / negative / multiple axes, non-contiguous inputs, float64 gradchecks
// and error messages.

#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::check_gradients;
using tapegrad::testing::check_values;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A (2, 3, 4) float64 input with distinct entries (no ties, so max/min are differentiable).
Tensor distinct_3d() {
  Generator gen(11);
  return randn({2, 3, 4}, gen, kFloat64);
}

// Checks that every element of a equals the matching element of b within a relative tolerance
// (exactly when tol is 0).
void check_close(const Tensor& a, const Tensor& b, double tol) {
  REQUIRE(a.shape() == b.shape());
  const std::vector<double> va = a.to_vector<double>();
  const std::vector<double> vb = b.to_vector<double>();
  for (std::size_t i = 0; i < va.size(); ++i) {
    INFO("element " << i);
    if (tol == 0) CHECK(va[i] == vb[i]);
    else CHECK(va[i] == doctest::Approx(vb[i]).epsilon(tol));
  }
}

bool any_nan(const Tensor& t) {
  for (double v : t.to_vector<double>())
    if (std::isnan(v)) return true;
  return false;
}

}  // namespace

// ---------------------------------------------------------------- sum, mean (from the core)

TEST_CASE("reduce: sum and mean over axes") {
  Tensor x = tensor({{1, 2, 3}, {4, 5, 6}});
  check_values(sum(x), {21});
  check_values(sum(x, {0}), {5, 7, 9});
  check_values(mean(x, {-1}, /*keepdim=*/true), {2, 5});
  CHECK(mean(x, {-1}, true).shape() == Shape{2, 1});
  check_gradients([](const TensorList& in) { return mean(in[0].transpose(0, 1), {0}); }, {distinct_3d()});
}

// ---------------------------------------------------------------- max, min

TEST_CASE("reduce: max and min forward over axes, keepdim, negative and multiple axes") {
  Tensor x = tensor({{1, 5, 3}, {4, 2, 6}});
  check_values(max(x), {6});
  CHECK(max(x).shape() == Shape{});
  check_values(min(x), {1});
  check_values(max(x, {0}), {4, 5, 6});
  check_values(min(x, {0}), {1, 2, 3});
  check_values(max(x, {-1}), {5, 6});
  check_values(min(x, {1}, /*keepdim=*/true), {1, 2});
  CHECK(min(x, {1}, true).shape() == Shape{2, 1});
  check_values(max(x, {0, 1}), {6});
  check_values(max(x, {-1, 0}, true), {6});
  CHECK(max(x, {-1, 0}, true).shape() == Shape{1, 1});
  // (2, 2, 2): over axes 0 and 2 leaves axis 1.
  Tensor cube = tensor({1, 8, 3, 4, 5, 2, 7, 6}).reshape({2, 2, 2});
  check_values(max(cube, {0, 2}), {8, 7});
  check_values(min(cube, {0, 2}), {1, 3});
  // A size-1 axis reduces to itself.
  check_values(max(tensor({{3, -1, 2}}), {0}), {3, -1, 2});
  // Non-contiguous: the transpose's axis 0 is x's axis 1.
  check_values(max(x.transpose(0, 1), {0}), {5, 6});
  // -inf entries are ordinary values; int64 works (no gradient).
  check_values(max(tensor({-kInf, -5.0}, kFloat64)), {-5});
  CHECK(max(from_vector(std::vector<std::int64_t>{3, 9, -2}, {3})).dtype() == kInt64);
  CHECK(max(from_vector(std::vector<std::int64_t>{3, 9, -2}, {3})).item() == 9);
  CHECK(min(from_vector(std::vector<std::int64_t>{3, 9, -2}, {3})).item() == -2);
  // NaN propagates.
  CHECK(std::isnan(max(tensor({1.0, NAN, 3.0})).item()));
  CHECK(std::isnan(min(tensor({1.0, NAN, 3.0})).item()));
  // Reducing another axis of an empty tensor is fine.
  CHECK(max(zeros({0, 3}), {1}).shape() == Shape{0});
}

TEST_CASE("reduce: max and min over long contiguous rows (the vectorised path)") {
  // 41 entries: several vectors plus a scalar tail, in float32 and float64. Row 0 has its max
  // inside the vector part and its min in the tail; row 1 the reverse.
  for (DType dtype : {kFloat32, kFloat64}) {
    CAPTURE(dtype_name(dtype));
    Tensor x = zeros({2, 41}, dtype);
    for (int j = 0; j < 41; ++j) {
      x.set({0, j}, std::sin(j));  // values in (-1, 1)
      x.set({1, j}, std::cos(j));
    }
    x.set({0, 5}, 9.0);
    x.set({0, 40}, -9.0);
    x.set({1, 39}, 8.0);
    x.set({1, 2}, -8.0);
    check_values(max(x, {1}), {9, 8});
    check_values(min(x, {1}), {-9, -8});
    CHECK(argmax(x, 1).to_vector<std::int64_t>() == std::vector<std::int64_t>{5, 39});
    // A NaN anywhere in the row, vector part or tail, makes the result NaN.
    Tensor with_nan = x.clone();
    with_nan.set({0, 20}, NAN);  // in a later vector (the first is lanes 0-15 or 0-7)
    with_nan.set({1, 40}, NAN);
    CHECK(std::isnan(max(with_nan, {1}).at({0})));
    CHECK(std::isnan(max(with_nan, {1}).at({1})));
    CHECK(std::isnan(min(with_nan, {1}).at({0})));
    CHECK(std::isnan(min(with_nan, {1}).at({1})));
    // logsumexp on the same rows against the direct formula (no overflow at these values).
    check_values(logsumexp(x, {1}), log(exp(x).sum({1})).to_vector<double>(), 1e-6);
  }
}

TEST_CASE("reduce: max and min share the gradient among ties") {
  Tensor x = tensor({1, 3, 3, 2}).requires_grad_();
  max(x).backward();
  check_values(x.grad(), {0, 0.5, 0.5, 0});
  Tensor y = tensor({{2, 2, 2}, {0, 1, 0}}).requires_grad_();
  (min(y, {1}) * tensor({1, 4})).sum().backward();
  check_values(y.grad(), {1.0 / 3, 1.0 / 3, 1.0 / 3, 2, 0, 2});
}

TEST_CASE("reduce: max and min gradcheck, keepdim, multiple axes, transposed views") {
  check_gradients([](const TensorList& in) { return max(in[0]); }, {distinct_3d()});
  check_gradients([](const TensorList& in) { return max(in[0], {1}); }, {distinct_3d()});
  check_gradients([](const TensorList& in) { return min(in[0], {0, -1}, true); }, {distinct_3d()});
  check_gradients([](const TensorList& in) { return max(in[0].transpose(0, 2), {-1}); }, {distinct_3d()});
  check_gradients([](const TensorList& in) { return min(in[0].transpose(1, 2), {1}, true) * 2.0; }, {distinct_3d()});
}

TEST_CASE("reduce: max and min errors") {
  CHECK_THROWS_WITH_AS(max(zeros({2, 3}), {2}), "max: axis 2 is out of range for a tensor of rank 2", IndexError);
  CHECK_THROWS_WITH_AS(min(zeros({2, 3}), {1, -1}), "min: axis -1 appears twice in (1,-1)", IndexError);
  CHECK_THROWS_WITH_AS(max(zeros({2, 0}), {1}),
                       "max: cannot reduce over an empty axis of a tensor of shape (2,0) (the result has no identity)",
                       ValueError);
  CHECK_THROWS_WITH_AS(max(zeros({0})), "max: cannot reduce over an empty axis of a tensor of shape (0) (the result "
                                        "has no identity)",
                       ValueError);
  CHECK_THROWS_WITH_AS(max(zeros({2}, kBool)), "max: expected a float32, float64 or int64 tensor, got bool", TypeError);
}

// ---------------------------------------------------------------- var

TEST_CASE("reduce: var unbiased and biased") {
  Tensor x = tensor({1, 2, 3, 4});
  // mean 2.5, squared deviations 2.25 + 0.25 + 0.25 + 2.25 = 5: 5/3 and 5/4.
  check_values(var(x), {5.0 / 3});
  check_values(var(x, {}, /*correction=*/0), {1.25});
  check_values(x.var({0}), {1.6666667});
  Tensor m = tensor({{1, 5, 3}, {4, 2, 6}});
  // Rows: mean 3, deviations 4 + 4 + 0 = 8 -> 8/2; columns (1,4): 2.25 biased.
  check_values(var(m, {1}), {4, 4});
  check_values(var(m, {0}, 0), {2.25, 2.25, 2.25});
  check_values(var(m, {-2}, 0, /*keepdim=*/true), {2.25, 2.25, 2.25});
  CHECK(var(m, {-2}, 0, true).shape() == Shape{1, 3});
  // Over both axes: mean 3.5, squared deviations 6.25+2.25+0.25+0.25+2.25+6.25 = 17.5, / 5.
  check_values(var(m, {0, 1}), {3.5});
  check_values(var(m.transpose(0, 1), {0}), {4, 4});
  // One element, unbiased: 0 / 0 as in PyTorch.
  CHECK(std::isnan(var(tensor({7})).item()));
  check_values(var(tensor({7}), {}, 0), {0});
}

TEST_CASE("reduce: var gradcheck and errors") {
  check_gradients([](const TensorList& in) { return var(in[0]); }, {distinct_3d()});
  check_gradients([](const TensorList& in) { return var(in[0], {1, 2}, 0, true); }, {distinct_3d()});
  check_gradients([](const TensorList& in) { return var(in[0].transpose(0, 2), {-1}); }, {distinct_3d()});
  CHECK_THROWS_WITH_AS(var(zeros({2, 3}), {-3}), "var: axis -3 is out of range for a tensor of rank 2", IndexError);
  CHECK_THROWS_WITH_AS(var(zeros({2, 3}), {0, 0}), "var: axis 0 appears twice in (0,0)", IndexError);
  CHECK_THROWS_WITH_AS(var(arange(4)), "var: expected a floating-point tensor (float32 or float64), got int64",
                       TypeError);
}

// ---------------------------------------------------------------- argmax, argmin

TEST_CASE("reduce: argmax and argmin values, first occurrence, keepdim, axes") {
  Tensor x = tensor({{1, 5, 5}, {6, 2, 6}});
  Tensor am = argmax(x, 1);
  CHECK(am.dtype() == kInt64);
  CHECK(am.to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 0});  // first of the tied maxima
  CHECK(argmax(x, 0).to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 0, 1});
  CHECK(argmin(x, -1).to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 1});
  CHECK(argmin(x, 0).to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 1, 0});
  CHECK(argmax(x, -1, /*keepdim=*/true).shape() == Shape{2, 1});
  CHECK(x.argmax(0).shape() == Shape{3});
  // Transposed: argmax over the transpose's axis 1 is argmax over x's axis 0.
  CHECK(argmax(x.transpose(0, 1), 1).to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 0, 1});
  // Middle axis of a 3-D tensor (the strided path): cube[i][:, k].
  Tensor cube = tensor({1, 8, 3, 4, 5, 2, 7, 6, 9, 0, -1, 2}).reshape({2, 3, 2});
  CHECK(argmax(cube, 1).to_vector<std::int64_t>() == std::vector<std::int64_t>{2, 0, 1, 0});
  CHECK(argmin(cube, 1).to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 2, 2, 1});
  // Size-1 axis, scalar, int64 input, NaN counted as the largest (PyTorch's rule).
  CHECK(argmax(tensor({{4, 2}}), 0).to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 0});
  CHECK(argmax(scalar_tensor(3.0), 0).item() == 0);
  CHECK(argmin(from_vector(std::vector<std::int64_t>{5, -3, 7}, {3}), 0).item() == 1);
  CHECK(argmax(tensor({1.0, NAN, 5.0}), 0).item() == 1);
  CHECK(argmax(zeros({0, 3}), 1).shape() == Shape{0});
}

TEST_CASE("reduce: argmax and argmin errors") {
  CHECK_THROWS_WITH_AS(argmax(zeros({2, 3}), 2), "argmax: axis 2 is out of range for a tensor of rank 2", IndexError);
  CHECK_THROWS_WITH_AS(argmax(zeros({2, 0}), 1),
                       "argmax: axis 1 of a tensor of shape (2,0) is empty, so there is no largest value", ValueError);
  CHECK_THROWS_WITH_AS(argmin(zeros({0, 2}), 0),
                       "argmin: axis 0 of a tensor of shape (0,2) is empty, so there is no smallest value", ValueError);
  CHECK_THROWS_WITH_AS(argmax(zeros({2}, kBool), 0), "argmax: expected a float32, float64 or int64 tensor, got bool",
                       TypeError);
}

// ---------------------------------------------------------------- logsumexp

TEST_CASE("reduce: logsumexp forward, stability and -inf rows") {
  // log(e + e^2 + e^3) = 3 + log(1 + e^-1 + e^-2)
  check_values(logsumexp(tensor({1, 2, 3}, kFloat64), {0}), {3.4076059644}, 1e-10);
  // 1001 + log(1 + e^-1): exp(1000) alone would overflow.
  check_values(logsumexp(tensor({1000, 1001}), {0}), {1001.3132616875});
  check_values(logsumexp(tensor({1000, 1001}, kFloat64), {0}), {1001.3132616875}, 1e-12);
  Tensor x = tensor({{1, 5, 3}, {4, 2, 6}}, kFloat64);
  // Columns: 4 + log(1 + e^-3) = 4.0485873516, and 5.0485873516, 6.0485873516.
  check_values(logsumexp(x, {0}), {4.0485873516, 5.0485873516, 6.0485873516}, 1e-10);
  check_values(logsumexp(x, {-2}, /*keepdim=*/true), {4.0485873516, 5.0485873516, 6.0485873516}, 1e-10);
  CHECK(logsumexp(x, {-2}, true).shape() == Shape{1, 3});
  check_close(logsumexp(x, {0, 1}), log(exp(x).sum()), 1e-12);
  check_close(logsumexp(x, {}), log(exp(x).sum()), 1e-12);  // empty list: every axis
  check_close(logsumexp(x.transpose(0, 1), {1}), logsumexp(x, {0}), 1e-12);
  // A masked entry contributes nothing; a fully masked row gives -inf, not NaN.
  check_values(logsumexp(tensor({1.0, -kInf, 3.0}, kFloat64), {0}), {3.1269280110}, 1e-10);
  Tensor rows = tensor({{-kInf, -kInf}, {0.0, 0.0}}, kFloat64);
  const std::vector<double> lse = logsumexp(rows, {1}).to_vector<double>();
  CHECK(lse[0] == -kInf);
  CHECK(lse[1] == doctest::Approx(std::log(2.0)));
  CHECK(logsumexp(tensor({kInf, 1.0}), {0}).item() == kInf);
}

TEST_CASE("reduce: logsumexp gradient is the softmax, 0 on -inf entries") {
  check_gradients([](const TensorList& in) { return logsumexp(in[0], {1}); }, {distinct_3d()});
  check_gradients([](const TensorList& in) { return logsumexp(in[0], {0, 2}, true); }, {distinct_3d()});
  check_gradients([](const TensorList& in) { return logsumexp(in[0].transpose(0, 1), {0}); }, {distinct_3d()});
  Tensor x = tensor({{1.0, -kInf, 3.0}, {-kInf, -kInf, -kInf}}, kFloat64).requires_grad_();
  logsumexp(x, {1}).sum().backward();
  // Row 0: softmax(1, -inf, 3) = (0.1192029220, 0, 0.8807970780); row 1 entirely masked: 0.
  check_values(x.grad(), {0.1192029220, 0, 0.8807970780, 0, 0, 0}, 1e-9);
}

TEST_CASE("reduce: logsumexp errors") {
  CHECK_THROWS_WITH_AS(logsumexp(zeros({2, 3}), {5}), "logsumexp: axis 5 is out of range for a tensor of rank 2",
                       IndexError);
  CHECK_THROWS_WITH_AS(logsumexp(zeros({2, 3}), {1, 1}), "logsumexp: axis 1 appears twice in (1,1)", IndexError);
  CHECK_THROWS_WITH_AS(logsumexp(arange(3), {0}),
                       "logsumexp: expected a floating-point tensor (float32 or float64), got int64", TypeError);
  CHECK_THROWS_WITH_AS(logsumexp(zeros({3, 0}), {1}),
                       "logsumexp: cannot reduce over an empty axis of a tensor of shape (3,0) (the result has no "
                       "identity)",
                       ValueError);
}

// ---------------------------------------------------------------- softmax, log_softmax

TEST_CASE("reduce: softmax and log_softmax forward values") {
  check_values(softmax(tensor({1, 2, 3}), 0), {0.0900306, 0.2447285, 0.6652410});
  check_values(softmax(tensor({1, 2, 3}, kFloat64), -1), {0.0900305732, 0.2447284711, 0.6652409558}, 1e-9);
  check_values(log_softmax(tensor({1, 2, 3}), 0), {-2.4076059644, -1.4076059644, -0.4076059644});
  check_values(log_softmax(tensor({1, 2, 3}, kFloat64), 0), {-2.4076059644, -1.4076059644, -0.4076059644}, 1e-10);
  // Along axis 0 (the strided path): columns (1,4), (5,2), (6,3)... softmax(1,4) = (e^-3, 1)/(1+e^-3).
  Tensor x = tensor({{1, 5, 3}, {4, 2, 6}});
  check_values(softmax(x, 0), {0.0474258732, 0.9525741268, 0.0474258732, 0.9525741268, 0.0474258732, 0.9525741268});
  check_values(log_softmax(x, 0), {-3.0485873516, -0.0485873516, -3.0485873516, -0.0485873516, -3.0485873516,
                                   -0.0485873516});
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

TEST_CASE("reduce: softmax is stable with huge logits and -inf masks") {
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

TEST_CASE("reduce: a row that is entirely -inf gives NaN, as in PyTorch") {
  // Documented behaviour: max = -inf, and -inf - -inf = NaN for every entry of that row only.
  Tensor x = tensor({{-kInf, -kInf, -kInf}, {0.0, 0.0, 0.0}});
  Tensor p = softmax(x, 1);
  for (int j = 0; j < 3; ++j) CHECK(std::isnan(p.at({0, j})));
  check_values(p.select(0, 1), {1.0 / 3, 1.0 / 3, 1.0 / 3});
  Tensor lp = log_softmax(x, 1);
  for (int j = 0; j < 3; ++j) CHECK(std::isnan(lp.at({0, j})));
  CHECK(lp.at({1, 0}) == doctest::Approx(-std::log(3.0)));
}

TEST_CASE("reduce: fused softmax equals the composite exp(x - logsumexp(x))") {
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

TEST_CASE("reduce: softmax and log_softmax gradcheck along every axis and through transposes") {
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

TEST_CASE("reduce: softmax backward closed forms and masked rows") {
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

TEST_CASE("reduce: softmax errors") {
  CHECK_THROWS_WITH_AS(softmax(zeros({2, 3}), 2), "softmax: axis 2 is out of range for a tensor of rank 2", IndexError);
  CHECK_THROWS_WITH_AS(log_softmax(zeros({2, 3}), -3), "log_softmax: axis -3 is out of range for a tensor of rank 2",
                       IndexError);
  CHECK_THROWS_WITH_AS(softmax(arange(3), 0),
                       "softmax: expected a floating-point tensor (float32 or float64), got int64", TypeError);
  CHECK_THROWS_WITH_AS(log_softmax(zeros({2}, kBool), 0),
                       "log_softmax: expected a floating-point tensor (float32 or float64), got bool", TypeError);
}

TEST_CASE("reduce: causal_softmax equals softmax of the -inf-masked scores, and passes gradcheck") {
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
