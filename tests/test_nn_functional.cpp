// layer_norm and dropout: forward values worked by hand (cross-checked with PyTorch 1.13), the
// fused layer_norm against its composite, float64 gradchecks of every input, dropout's mask
// and scaling, and error messages.

#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::check_gradients;
using tapegrad::testing::check_values;

namespace {

// The definition, composed from primitives: (x - mean) / sqrt(var_biased + eps) * w + b over
// the trailing `axes` axes.
Tensor composite_layer_norm(const Tensor& x, int axes, const Tensor& w, const Tensor& b, double eps) {
  Dims reduced;
  for (int i = 0; i < axes; ++i) reduced.push_back(x.dim() - axes + i);
  Tensor y = (x - mean(x, reduced, true)) / sqrt(var(x, reduced, /*correction=*/0, true) + eps);
  if (w.defined()) y = y * w;
  if (b.defined()) y = y + b;
  return y;
}

void check_close(const Tensor& a, const Tensor& b, double tol) {
  REQUIRE(a.shape() == b.shape());
  const std::vector<double> va = a.to_vector<double>();
  const std::vector<double> vb = b.to_vector<double>();
  for (std::size_t i = 0; i < va.size(); ++i) {
    INFO("element " << i);
    CHECK(va[i] == doctest::Approx(vb[i]).epsilon(tol));
  }
}

}  // namespace

// ---------------------------------------------------------------- layer_norm

TEST_CASE("nn_functional: layer_norm forward values") {
  // mean 2.5, biased var 1.25: (x - 2.5) / sqrt(1.25 + 1e-5).
  const std::vector<double> xhat = {-1.3416354200, -0.4472118067, 0.4472118067, 1.3416354200};
  check_values(layer_norm(tensor({1, 2, 3, 4}), {4}), xhat);
  check_values(layer_norm(tensor({1, 2, 3, 4}, kFloat64), {4}), xhat, 1e-9);
  // With weight (1, 0.5, 2, -1) and bias (0, 1, -1, 0.5): xhat * w + b.
  Tensor w = tensor({1, 0.5, 2, -1});
  Tensor b = tensor({0, 1, -1, 0.5});
  check_values(layer_norm(tensor({1, 2, 3, 4}), {4}, w, b),
               {-1.3416354200, 0.7763940967, -0.1055763867, -0.8416354200});
  check_values(layer_norm(tensor({1, 2, 3, 4}), {4}, w), {-1.3416354200, -0.2236059034, 0.8944236134, -1.3416354200});
  check_values(layer_norm(tensor({1, 2, 3, 4}), {4}, Tensor(), b),
               {-1.3416354200, 0.5527881933, -0.5527881933, 1.8416354200});
  // Each row normalised on its own; a constant row gives 0 (var 0, rstd = 1/sqrt(eps)).
  Tensor rows = tensor({{1, 2, 3, 4}, {5, 5, 5, 5}});
  check_values(layer_norm(rows, {4}), {-1.3416354200, -0.4472118067, 0.4472118067, 1.3416354200, 0, 0, 0, 0});
  // eps matters: var 1.25 + eps 0.75 = 2.
  check_values(layer_norm(tensor({1, 2, 3, 4}), {4}, Tensor(), Tensor(), 0.75),
               {-1.5 / std::sqrt(2.0), -0.5 / std::sqrt(2.0), 0.5 / std::sqrt(2.0), 1.5 / std::sqrt(2.0)});
  // Over two trailing axes: the (2, 2) block is one group of four.
  check_values(layer_norm(tensor({{1, 2}, {3, 4}}), {2, 2}), xhat);
  // Large offset: the two-pass variance keeps the precision in float32.
  check_values(layer_norm(tensor({10001, 10002, 10003, 10004}), {4}), xhat, 1e-5);
}

TEST_CASE("nn_functional: fused layer_norm equals the composite") {
  Generator gen(21);
  for (DType dtype : {kFloat32, kFloat64}) {
    CAPTURE(dtype_name(dtype));
    const double tol = dtype == kFloat32 ? 1e-5 : 1e-12;
    // 37: the vector lanes plus a scalar tail.
    Tensor x = randn({3, 2, 37}, gen, dtype) * 3.0 + 1.5;
    Tensor w = randn({37}, gen, dtype);
    Tensor b = randn({37}, gen, dtype);
    check_close(layer_norm(x, {37}, w, b), composite_layer_norm(x, 1, w, b, 1e-5), tol);
    check_close(layer_norm(x, {37}), composite_layer_norm(x, 1, Tensor(), Tensor(), 1e-5), tol);
    Tensor w2 = randn({2, 37}, gen, dtype);
    Tensor b2 = randn({2, 37}, gen, dtype);
    check_close(layer_norm(x, {2, 37}, w2, b2, 1e-3), composite_layer_norm(x, 2, w2, b2, 1e-3), tol);
    // A non-contiguous input: normalised over the transpose's last axis.
    Tensor xt = x.transpose(0, 2);  // (37, 2, 3)
    Tensor w3 = randn({3}, gen, dtype);
    check_close(layer_norm(xt, {3}, w3), composite_layer_norm(xt, 1, w3, Tensor(), 1e-5), tol);
  }
}

TEST_CASE("nn_functional: fused layer_norm backward equals the composite's") {
  Generator gen(4);
  Tensor x0 = randn({5, 19}, gen, kFloat64);
  Tensor w0 = randn({19}, gen, kFloat64);
  Tensor b0 = randn({19}, gen, kFloat64);
  Tensor g = randn({5, 19}, gen, kFloat64);
  Tensor x1 = x0.clone().requires_grad_(), w1 = w0.clone().requires_grad_(), b1 = b0.clone().requires_grad_();
  layer_norm(x1, {19}, w1, b1).backward(g);
  Tensor x2 = x0.clone().requires_grad_(), w2 = w0.clone().requires_grad_(), b2 = b0.clone().requires_grad_();
  composite_layer_norm(x2, 1, w2, b2, 1e-5).backward(g);
  check_close(x1.grad(), x2.grad(), 1e-10);
  check_close(w1.grad(), w2.grad(), 1e-10);
  check_close(b1.grad(), b2.grad(), 1e-10);
  // dbias = sum(g) over the rows, dweight = sum(g * xhat).
  check_close(b1.grad(), g.sum({0}), 1e-12);
  check_close(w1.grad(), (g * layer_norm(x0, {19})).sum({0}), 1e-12);
}

TEST_CASE("nn_functional: layer_norm gradcheck of input, weight and bias") {
  Generator gen(9);
  Tensor x = randn({3, 2, 4}, gen, kFloat64);
  Tensor w = randn({4}, gen, kFloat64);
  Tensor b = randn({4}, gen, kFloat64);
  check_gradients([](const TensorList& in) { return layer_norm(in[0], {4}, in[1], in[2]); }, {x, w, b});
  check_gradients(
      [](const TensorList& in) {
        return layer_norm(in[0], {2, 4}, in[1], in[2]);
      },
      {x, randn({2, 4}, gen, kFloat64), randn({2, 4}, gen, kFloat64)});
  check_gradients([](const TensorList& in) { return layer_norm(in[0], {4}); }, {x});
  check_gradients([](const TensorList& in) { return layer_norm(in[0], {4}, in[1]); }, {x, w});
  check_gradients([](const TensorList& in) { return layer_norm(in[0], {4}, Tensor(), in[1]); }, {x, b});
  // Through a transposed view: rows of the transpose are strided in x.
  check_gradients([](const TensorList& in) { return layer_norm(in[0].transpose(0, 2), {3}, in[1], in[2]); },
                  {x, randn({3}, gen, kFloat64), randn({3}, gen, kFloat64)});
  // Rows longer than a vector: lanes plus tail.
  check_gradients([](const TensorList& in) { return layer_norm(in[0], {19}, in[1], in[2], 1e-3); },
                  {randn({2, 19}, gen, kFloat64), randn({19}, gen, kFloat64), randn({19}, gen, kFloat64)});
}

TEST_CASE("nn_functional: layer_norm computes only the gradients that are needed") {
  Tensor x = tensor({{1, 2, 3, 4}, {2, 0, 1, 5}});
  Tensor w = ones({4}).requires_grad_();
  Tensor b = zeros({4}).requires_grad_();
  (layer_norm(x, {4}, w, b) * tensor({1, 2, 3, 4})).sum().backward();
  CHECK_FALSE(x.grad().defined());
  check_values(b.grad(), {2, 4, 6, 8});
  // dweight = sum over rows of g * xhat; row 0 xhat as above, row 1: mean 2, var 3.5.
  const double r1 = 1 / std::sqrt(3.5 + 1e-5);
  check_values(w.grad(),
               {-1.3416354200 + 0, 2 * (-0.4472118067 - 2 * r1), 3 * (0.4472118067 - r1), 4 * (1.3416354200 + 3 * r1)});
}

TEST_CASE("nn_functional: layer_norm errors") {
  CHECK_THROWS_WITH_AS(layer_norm(zeros({2, 3}), {4}),
                       "layer_norm: normalized_shape (4) must be non-empty and equal the trailing axes of the input, "
                       "which has shape (2,3)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(layer_norm(zeros({2, 3}), {2, 3, 1}),
                       "layer_norm: normalized_shape (2,3,1) must be non-empty and equal the trailing axes of the "
                       "input, which has shape (2,3)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(layer_norm(zeros({2, 3}), {}),
                       "layer_norm: normalized_shape () must be non-empty and equal the trailing axes of the input, "
                       "which has shape (2,3)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(layer_norm(zeros({2, 3}), {3}, ones({2})),
                       "layer_norm: weight of shape (2) does not match normalized_shape (3)", ShapeError);
  CHECK_THROWS_WITH_AS(layer_norm(zeros({2, 3}), {3}, ones({3}), ones({1, 3})),
                       "layer_norm: bias of shape (1,3) does not match normalized_shape (3)", ShapeError);
  CHECK_THROWS_WITH_AS(layer_norm(zeros({2, 3}), {3}, ones({3}, kFloat64)),
                       "layer_norm: weight is float64 but the input is float32", TypeError);
  CHECK_THROWS_WITH_AS(layer_norm(zeros({2, 3}), {3}, Tensor(), Tensor(), -1.0), "layer_norm: eps must be >= 0, got -1",
                       ValueError);
  CHECK_THROWS_WITH_AS(layer_norm(arange(6).reshape({2, 3}), {3}),
                       "layer_norm: expected a floating-point tensor (float32 or float64), got int64", TypeError);
}

// ---------------------------------------------------------------- dropout

TEST_CASE("nn_functional: dropout is the identity in eval mode and for p = 0") {
  Generator gen(1);
  Tensor x = tensor({1, 2, 3});
  CHECK(dropout(x, 0.5, /*training=*/false, gen).impl() == x.impl());
  CHECK(dropout(x, 0.0, /*training=*/true, gen).impl() == x.impl());
  CHECK(gen.uniform() == Generator(1).uniform());  // no numbers drawn
}

TEST_CASE("nn_functional: dropout keeps about 1 - p, scales by 1 / (1 - p), and follows the seed") {
  Generator gen(42);
  const double p = 0.3;
  Tensor x = ones({200, 500});
  Tensor y = dropout(x, p, true, gen);
  std::int64_t kept = 0;
  bool only_zero_or_scale = true;
  for (float v : y.to_vector<float>()) {
    if (v != 0.0f) ++kept;
    only_zero_or_scale = only_zero_or_scale && (v == 0.0f || v == doctest::Approx(1.0 / 0.7));
  }
  CHECK(only_zero_or_scale);
  // 100,000 Bernoulli(0.7) draws: standard deviation 0.00145, so +-0.01 is about 7 sigma.
  CHECK(static_cast<double>(kept) / 100000.0 == doctest::Approx(0.7).epsilon(0.01 / 0.7));
  // The same seed gives the same mask; another seed a different one.
  Generator same(42), other(43);
  CHECK(dropout(x, p, true, same).to_vector<float>() == y.to_vector<float>());
  CHECK(dropout(x, p, true, other).to_vector<float>() != y.to_vector<float>());
  // Values other than 1 are scaled, not replaced; a non-contiguous input works.
  Generator g1(7), g2(7);
  Tensor v = tensor({{1, -2, 3}, {4, 5, -6}});
  Tensor dv = dropout(v.transpose(0, 1), 0.5, true, g1);  // (3, 2)
  Tensor mask_scaled = dropout(ones({3, 2}), 0.5, true, g2);
  check_values(dv, (v.transpose(0, 1) * mask_scaled).to_vector<double>());
}

TEST_CASE("nn_functional: dropout gradient is the same mask times the scale") {
  Generator gen(5);
  Tensor x = randn({4, 6}, gen).requires_grad_();
  Generator mask_gen(6), mask_gen_copy(6);
  Tensor y = dropout(x, 0.25, true, mask_gen);
  Tensor g = randn({4, 6}, gen);
  y.backward(g);
  Tensor mask_scaled = dropout(ones({4, 6}), 0.25, true, mask_gen_copy);  // the same draws
  check_values(x.grad(), (g * mask_scaled).to_vector<double>());
  check_values(y, (x.detach() * mask_scaled).to_vector<double>());
  // float64 gradcheck with a fixed seed per call, so every evaluation uses one mask.
  check_gradients(
      [](const TensorList& in) {
        Generator fixed(12);
        return dropout(in[0], 0.4, true, fixed);
      },
      {randn({3, 5}, gen, kFloat64)});
}

TEST_CASE("nn_functional: dropout with p = 1 zeroes everything, gradient included") {
  Generator gen(3);
  Tensor x = tensor({1, 2, 3, 4}).requires_grad_();
  Tensor y = dropout(x, 1.0, true, gen);
  check_values(y, {0, 0, 0, 0});
  y.sum().backward();
  check_values(x.grad(), {0, 0, 0, 0});
}

TEST_CASE("nn_functional: dropout errors") {
  Generator gen(0);
  CHECK_THROWS_WITH_AS(dropout(ones({2}), 1.5, true, gen), "dropout: probability p must be in [0, 1], got 1.5",
                       ValueError);
  CHECK_THROWS_WITH_AS(dropout(ones({2}), -0.1, true, gen), "dropout: probability p must be in [0, 1], got -0.1",
                       ValueError);
  CHECK_THROWS_WITH_AS(dropout(ones({2}), std::nan(""), false, gen),
                       "dropout: probability p must be in [0, 1], got nan", ValueError);
  CHECK_THROWS_WITH_AS(dropout(arange(3), 0.5, true, gen),
                       "dropout: expected a floating-point tensor (float32 or float64), got int64", TypeError);
}
