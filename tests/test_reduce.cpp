// Reductions (sum, prod, mean, max, min, var, std, argmax, logsumexp), cumsum and cumprod: forward
// values worked by hand
// (cross-checked with PyTorch 1.13), keepdim / negative / multiple axes, non-contiguous inputs,
// float64 gradchecks and error messages. The softmax family is in test_softmax.cpp.

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::check_close;
using tapegrad::testing::check_gradients;
using tapegrad::testing::check_values;
using tapegrad::testing::distinct_3d;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

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
  CHECK_THROWS_WITH_AS(max(zeros({0})),
                       "max: cannot reduce over an empty axis of a tensor of shape (0) (the result "
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

// ---------------------------------------------------------------- cumsum

TEST_CASE("reduce: cumsum along each axis matches PyTorch, with its gradient") {
  // torch.cumsum(a, dim) and the gradient of (cumsum(a, dim) * w).sum() in float64.
  const Tensor a = tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}, kFloat64);
  const Tensor w = tensor({{1.0, -1.0, 2.0}, {0.5, 3.0, -2.0}}, kFloat64);
  struct Case {
    std::int64_t axis;
    std::vector<double> value, grad;
  };
  for (const Case& c :
       {Case{0, {1, 2, 3, 5, 7, 9}, {1.5, 2, 0, 0.5, 3, -2}}, Case{-1, {1, 3, 6, 4, 9, 15}, {2, 1, 2, 1.5, 1, -2}}}) {
    CAPTURE(c.axis);
    const Tensor x = a.detach().requires_grad_(true);
    const Tensor y = cumsum(x, c.axis);
    check_values(y, c.value, 1e-15);
    sum(y * w).backward();
    check_values(x.grad(), c.grad, 1e-15);
  }
  // A transposed (non-contiguous) input, the method form, a scalar (axis 0 or -1) and an empty axis.
  check_values(a.transpose(0, 1).cumsum(1), {1, 5, 2, 7, 3, 9}, 1e-15);
  CHECK(cumsum(scalar_tensor(2.5, kFloat64), -1).item() == 2.5);
  CHECK(cumsum(zeros({2, 0}), 1).shape() == Shape{2, 0});
}

TEST_CASE("reduce: cumsum carries float32 sums in double, counts Bool in int64, keeps int64") {
  // torch.cumsum(torch.tensor([1e8, 1, -1e8, 1])) = [1e8, 1e8, 1, 2]: a float32 carry would lose the
  // 1 (1e8 + 1 rounds to 1e8) and give [1e8, 1e8, 0, 1].
  const Tensor y = cumsum(from_vector(std::vector<float>{1e8f, 1.0f, -1e8f, 1.0f}, {4}), 0);
  CHECK(y.dtype() == kFloat32);
  CHECK(y.to_vector<float>() == std::vector<float>{1e8f, 1e8f, 1.0f, 2.0f});
  const Tensor counts = cumsum(tensor({1.0, 0.0, 1.0}).to(kBool), 0);
  CHECK(counts.dtype() == kInt64);
  CHECK(counts.to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 1, 2});
  CHECK(cumsum(tensor({3, 4, 5}, kInt64), 0).to_vector<std::int64_t>() == std::vector<std::int64_t>{3, 7, 12});
  const Tensor b = cumsum(tensor({0.5, 0.25, 0.125}).to(kBFloat16), 0);
  CHECK(b.dtype() == kBFloat16);
  check_values(b, {0.5, 0.75, 0.875}, 1e-15);
}

TEST_CASE("reduce: sum counts Bool in int64 and keeps int64, as torch's, mean wants floating point") {
  const Tensor pred = tensor({{0, 2, 1}, {1, 1, 0}}, kInt64), labels = tensor({{0, 1, 1}, {1, 1, 1}}, kInt64);
  const Tensor correct = eq(pred, labels).sum();
  CHECK(correct.dtype() == kInt64);
  CHECK(correct.dim() == 0);
  CHECK(correct.item() == 4.0);
  const Tensor by_row = eq(pred, labels).sum({1}, true);
  CHECK(by_row.shape() == Shape{2, 1});
  CHECK(by_row.to_vector<std::int64_t>() == std::vector<std::int64_t>{2, 2});
  // int64 over a strided view, a large enough tensor to take the pool's path, and negatives.
  CHECK(sum(pred.transpose(0, 1), {1}).to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 3, 1});
  const Tensor big = arange(100000).reshape({1000, 100}) - 50000;
  const Tensor column_sums = sum(big, {0});
  CHECK(column_sums.dtype() == kInt64);
  // column c holds 100 i + c - 50000 for i < 1000: 100 * 499500 + 1000 (c - 50000).
  CHECK(column_sums.narrow(0, 7, 1).item() == 100.0 * 499500 + 1000.0 * (7 - 50000));
  CHECK(sum(big).item() == static_cast<double>(99999) * 100000 / 2 - 50000.0 * 100000);
  CHECK_THROWS_WITH_AS(mean(pred), doctest::Contains("mean"), TypeError);
}

TEST_CASE("reduce: int64 sum and cumsum wrap around past 2^63, as torch's") {
  // torch.tensor([2**62, 2**62, 5]).sum() = -2**63 + 5, and cumsum gives [2**62, -2**63, -2**63 + 5]:
  // int64 arithmetic modulo 2^64 (signed overflow would be undefined behaviour, which the sanitizer
  // build traps).
  constexpr std::int64_t big = std::int64_t(1) << 62, lowest = std::numeric_limits<std::int64_t>::min();
  const Tensor x = from_vector(std::vector<std::int64_t>{big, big, 5}, {3});
  CHECK(sum(x).to_vector<std::int64_t>() == std::vector<std::int64_t>{lowest + 5});
  CHECK(cumsum(x, 0).to_vector<std::int64_t>() == std::vector<std::int64_t>{big, lowest, lowest + 5});
  // The pool's paths: 4 x 20000 with every entry 2^62, summed down the columns (leading axis) and
  // along the rows (trailing axis); 4 * 2^62 = 2^64 wraps to 0, 20000 * 2^62 = 5000 * 2^64 to 0.
  const Tensor wide = full({4, 20000}, 0.0, kInt64) + big;
  const Tensor columns = sum(wide, {0}), rows = sum(wide, {1});
  CHECK(columns.to_vector<std::int64_t>() == std::vector<std::int64_t>(20000, 0));
  CHECK(rows.to_vector<std::int64_t>() == std::vector<std::int64_t>(4, 0));
  CHECK(sum(wide + 1).item() == 80000.0);
}

TEST_CASE("reduce: cumsum gradients (float64 gradcheck) and errors") {
  Generator gen(7);
  const Tensor x = randn({3, 4, 2}, gen, kFloat64);
  for (std::int64_t axis : {0, 1, -1})
    check_gradients(
        [axis](const TensorList& in) { return cumsum(in[0].transpose(0, 2), axis) * in[0].transpose(0, 2); }, {x});
  CHECK_THROWS_WITH_AS(cumsum(zeros({2, 3}), 2), "cumsum: axis 2 is out of range for a tensor of rank 2", IndexError);
}

// ---------------------------------------------------------------- std

TEST_CASE("reduce: std matches PyTorch, with a zero gradient where the variance is 0") {
  // torch.std(x, 1) and the gradient of its sum, PyTorch 1.13: the second row is constant.
  const Tensor x = tensor({{1.0, 2.0, 4.0}, {3.0, 3.0, 3.0}}, kFloat64).requires_grad_(true);
  const Tensor s = tapegrad::std(x, {1});
  check_values(s, {1.5275252316519465, 0.0}, 1e-15);
  sum(s).backward();
  check_values(x.grad(), {-0.43643578047198484, -0.10910894511799625, 0.5455447255899809, 0, 0, 0}, 1e-15);
  check_values(x.detach().std({0}, /*correction=*/0), {1.0, 0.5, 0.5}, 1e-15);
  CHECK(x.detach().std({1}, 1, /*keepdim=*/true).shape() == Shape{2, 1});
  CHECK(std::isnan(tapegrad::std(tensor({1.0, NAN}, kFloat64)).item()));
  Generator gen(11);
  check_gradients([](const TensorList& in) { return tapegrad::std(in[0].transpose(0, 1), {0}); },
                  {randn({3, 4}, gen, kFloat64)});
  CHECK_THROWS_WITH_AS(tapegrad::std(zeros({2, 3}), {2}), "std: axis 2 is out of range for a tensor of rank 2",
                       IndexError);
  CHECK_THROWS_WITH_AS(tapegrad::std(tensor({1, 2}, kInt64)),
                       "std: expected a floating-point tensor (float32 or float64), got int64", TypeError);
}

// ---------------------------------------------------------------- prod, cumprod

TEST_CASE("reduce: prod over axes matches PyTorch, keepdim, views, empty axes") {
  // a = torch.arange(24.).reshape(2, 3, 4) / 10 + 0.5 in float64.
  const Tensor a = arange(24).to(kFloat64).reshape({2, 3, 4}) / 10.0 + 0.5;
  CHECK(prod(a).item() == doctest::Approx(12703.6810).epsilon(1e-8));
  check_values(prod(a, {1}), {0.5850, 0.8400, 1.1550, 1.5360, 8.9250, 10.2960, 11.7990, 13.4400}, 1e-12);
  const Tensor last = a.prod({-1}, /*keepdim=*/true);
  CHECK(last.shape() == Shape{2, 3, 1});
  check_values(last, {0.1680, 1.1880, 4.3680, 11.6280, 25.5024, 49.1400}, 1e-12);
  // Axes that are not torch's one-or-all (here 0 and 2, around a kept axis) and a transposed view:
  // the same as reducing one axis after the other.
  check_close(prod(a, {0, 2}), prod(prod(a, {2}), {0}), 1e-12);
  check_close(prod(a.transpose(0, 2), {1}), prod(a, {1}).transpose(0, 1), 1e-12);
  check_values(prod(zeros({2, 0}), {1}), {1, 1});  // the empty product
  CHECK(prod(scalar_tensor(2.5, kFloat64)).item() == 2.5);
  CHECK_THROWS_WITH_AS(prod(a, {3}), "prod: axis 3 is out of range for a tensor of rank 3", IndexError);
}

TEST_CASE("reduce: prod and cumprod gradients are exact where entries are zero") {
  // torch: x.prod(1).sum().backward() gives each entry the product of the others in its row,
  // [[0, 6, 0], [0, 0, 0], [8, 4, 2]]; a division by x would give NaN at the zeros.
  const Tensor x = tensor({{2, 0, 3}, {0, 0, 5}, {1, 2, 4}}, kFloat64).requires_grad_(true);
  sum(prod(x, {1})).backward();
  check_values(x.grad(), {0, 6, 0, 0, 0, 0, 8, 4, 2}, 1e-15);
  // torch: (x.cumprod(0) * [1, 2, 3, 4]).sum() for x = [2, 0, 3, 4]: running products [2, 0, 0, 0],
  // gradient [1, 118, 0, 0].
  const Tensor y = tensor({2, 0, 3, 4}, kFloat64).requires_grad_(true);
  const Tensor running = cumprod(y, 0);
  check_values(running, {2, 0, 0, 0}, 1e-15);
  sum(running * tensor({1, 2, 3, 4}, kFloat64)).backward();
  check_values(y.grad(), {1, 118, 0, 0}, 1e-15);
}

TEST_CASE("reduce: prod and cumprod gradcheck, first and second order, with zeros") {
  // Both are multilinear in each entry, so the finite differences are exact at zeros too.
  std::vector<double> values = distinct_3d().to_vector<double>();
  for (std::size_t i = 0; i < values.size(); i += 5) values[i] = 0.0;  // every fifth entry 0
  const Tensor x = from_vector(values, {2, 3, 4});
  for (const Dims& axes : {Dims{}, Dims{1}, Dims{0, 2}, Dims{-1}}) {
    CAPTURE(axes.str());
    check_gradients([axes](const TensorList& in) { return prod(in[0], axes); }, {x});
  }
  check_gradients([](const TensorList& in) { return prod(in[0].transpose(0, 2), {0}, true); }, {x});
  for (std::int64_t axis : {0, 1, -1}) {
    CAPTURE(axis);
    check_gradients([axis](const TensorList& in) { return cumprod(in[0], axis); }, {x});
  }
  check_gradients([](const TensorList& in) { return cumprod(in[0].transpose(0, 1), 2); }, {x});
}

TEST_CASE("reduce: prod and cumprod give the same first gradient taped (create_graph) as from their kernels") {
  // gradgradcheck differentiates the taped gradient, so it would pass a taped formula that is
  // smooth but wrong; this compares its values with the kernels' (which gradcheck checks).
  std::vector<double> values = distinct_3d().to_vector<double>();
  values[3] = values[10] = values[11] = 0.0;  // one zero in a row of 4, two in another
  const Tensor x = from_vector(values, {2, 3, 4}).requires_grad_(true);
  Generator gen(3);
  autograd::GradOptions taped;
  taped.create_graph = true;
  const std::vector<std::function<Tensor(const Tensor&)>> functions = {[](const Tensor& t) { return prod(t, {-1}); },
                                                                       [](const Tensor& t) {
                                                                         return prod(t, {0, 2});
                                                                       },
                                                                       [](const Tensor& t) { return prod(t); },
                                                                       [](const Tensor& t) { return cumprod(t, -1); },
                                                                       [](const Tensor& t) { return cumprod(t, 0); }};
  for (std::size_t i = 0; i < functions.size(); ++i) {
    CAPTURE(i);
    const Tensor y = functions[i](x);
    const Tensor u = randn(y.shape(), gen, kFloat64);
    const Tensor plain = autograd::grad({y}, {x}, {u}, {false, true})[0];
    const Tensor with_graph = autograd::grad({y}, {x}, {u}, taped)[0];
    CHECK(with_graph.requires_grad());
    check_close(with_graph, plain, 1e-12);
  }
}

TEST_CASE("reduce: prod and cumprod of int64 wrap around, Bool gives int64, bfloat16 as float32") {
  // torch.tensor([2**32, 2**32, 3]).prod() = 0 (2^64 wraps), cumprod [2**32, 0, 0].
  constexpr std::int64_t half = std::int64_t(1) << 32;
  const Tensor ids = from_vector(std::vector<std::int64_t>{half, half, 3}, {3});
  CHECK(prod(ids).dtype() == kInt64);
  CHECK(prod(ids).to_vector<std::int64_t>() == std::vector<std::int64_t>{0});
  CHECK(cumprod(ids, 0).to_vector<std::int64_t>() == std::vector<std::int64_t>{half, 0, 0});
  CHECK(cumprod(tensor({3, -2, 5}, kInt64), 0).to_vector<std::int64_t>() == std::vector<std::int64_t>{3, -6, -30});
  const Tensor flags = tensor({1, 1, 0}).to(kBool);
  CHECK(prod(flags).dtype() == kInt64);
  CHECK(prod(flags).item() == 0.0);
  CHECK(cumprod(flags, 0).to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 1, 0});
  // float32 carries the running product in double: 1e20 * 1e20 overflows float32, * 1e-20 brings it back.
  const Tensor wide = from_vector(std::vector<float>{1e20f, 1e20f, 1e-20f}, {3});
  CHECK(prod(wide).item() == doctest::Approx(1e20).epsilon(1e-6));
  const Tensor b = cumprod(tensor({0.5, 4.0, 0.25}).to(kBFloat16), 0);
  CHECK(b.dtype() == kBFloat16);
  check_values(b, {0.5, 2.0, 0.5}, 1e-15);
  CHECK(prod(tensor({0.5, 4.0}).to(kBFloat16)).dtype() == kBFloat16);
  CHECK_THROWS_WITH_AS(cumprod(zeros({2, 3}), -3), "cumprod: axis -3 is out of range for a tensor of rank 2",
                       IndexError);
}

// ---------------------------------------------------------------- logcumsumexp

TEST_CASE("reduce: logcumsumexp matches PyTorch, stays finite where exp would not, and names its errors") {
  const double inf = std::numeric_limits<double>::infinity();
  // torch.logcumsumexp (PyTorch 1.13, float64).
  check_values(logcumsumexp(from_vector(std::vector<double>{-1000.0, 0.0, -inf, 3.0}, {4}), 0),
               {-1000.0, 0.0, 0.0, 3.048587351573742}, 1e-15);
  const std::vector<double> with_inf =
      logcumsumexp(from_vector(std::vector<double>{1.0, inf, 2.0}, {3}), 0).to_vector<double>();
  CHECK(with_inf == std::vector<double>{1.0, inf, inf});
  // A NaN stays in the running value, as torch's.
  CHECK(std::isnan(
      logcumsumexp(from_vector(std::vector<double>{1.0, std::nan(""), 2.0}, {3}), 0).to_vector<double>()[2]));
  // float32 carries in double: 1e30 twice is 1e30 + log 2, where exp overflows float32.
  check_values(logcumsumexp(tensor({1e30f, 1e30f}), 0), {1.0000000150474662e+30, 1.0000000150474662e+30}, 1e-7);
  // Against log(cumsum(exp(x))) along each axis, and through a transposed view.
  const Tensor x = distinct_3d();
  for (std::int64_t axis : {0, 1, 2, -1}) {
    CAPTURE(axis);
    check_close(logcumsumexp(x, axis), log(cumsum(exp(x), axis)), 1e-13);
  }
  check_close(x.transpose(0, 2).logcumsumexp(1), log(cumsum(exp(x.transpose(0, 2)), 1)), 1e-13);
  CHECK(logcumsumexp(zeros({2, 0}, kFloat64), 1).shape() == Shape{2, 0});
  CHECK(logcumsumexp(x.to(kBFloat16), 1).dtype() == kBFloat16);
  CHECK_THROWS_AS(logcumsumexp(x, 3), IndexError);
  CHECK_THROWS_WITH_AS(logcumsumexp(arange(0, 4, 1, kInt64), 0), doctest::Contains("logcumsumexp"), TypeError);
}

TEST_CASE("reduce: logcumsumexp's gradient matches PyTorch's, gradcheck first and second order") {
  // torch 1.13: the gradient of (logcumsumexp(x, 1) * w).sum(); w has entries of both signs and a 0.
  const Tensor x = from_vector(std::vector<double>{0.5, -1.0, 2.0, 0.25, 1.5, 1.0}, {2, 3}).requires_grad_();
  const Tensor w = from_vector(std::vector<double>{1.0, -2.0, 0.5, 0.3, 0.0, -1.0}, {2, 3});
  sum(logcumsumexp(x, 1) * w).backward();
  const Tensor xd = x.detach();
  // Reference in plain arithmetic: gx[j] = sum_{k >= j} w[k] exp(x[j] - out[k]).
  const std::vector<double> out = logcumsumexp(xd, 1).to_vector<double>(), xs = xd.to_vector<double>(),
                            ws = w.to_vector<double>();
  std::vector<double> expected(6, 0.0);
  for (int r = 0; r < 2; ++r)
    for (int j = 0; j < 3; ++j)
      for (int k = j; k < 3; ++k) expected[r * 3 + j] += ws[r * 3 + k] * std::exp(xs[r * 3 + j] - out[r * 3 + k]);
  check_values(x.grad(), expected, 1e-14);
  check_values(x.grad().select(0, 0), {-0.5475037563172689, -0.345294760977369, 0.3927985172946379}, 1e-13);

  for (std::int64_t axis : {0, 1, -1}) {
    CAPTURE(axis);
    check_gradients([axis](const TensorList& in) { return logcumsumexp(in[0], axis); }, {distinct_3d()});
  }
  check_gradients([](const TensorList& in) { return logcumsumexp(in[0].transpose(0, 1), 2); }, {distinct_3d()});
}
