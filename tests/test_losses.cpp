// Loss functions: cross_entropy, nll_loss, kl_div, binary_cross_entropy_with_logits (and its op,
// logistic_loss), the regression losses (mse, l1, smooth L1, Huber) and the distribution helpers. Expected values come
// from the seed's worked numbers and from torch.nn.functional 1.13 in float64 (the script's inputs are the literals
// written here). Over 400 lines: one file for the losses, each with values, gradcheck and errors,
// as losses.cpp is one.

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "tapegrad/nn/nn.h"
#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::check_gradients;
using tapegrad::testing::check_values;

namespace {

// logits: (4, 3)
Tensor four_by_three() {
  return tensor({{1.0, 2.0, 0.5}, {0.0, -1.0, 3.0}, {2.0, 2.0, -2.0}, {0.3, -0.7, 1.1}}, kFloat64);
}
// targets: (4), the last one ignored with PyTorch's default ignore_index -100
Tensor targets_with_ignored() { return from_vector(std::vector<std::int64_t>{1, 2, 0, -100}, {4}); }

// x: (2, 3, 2) in PyTorch's (N, C, T) layout
Tensor n_c_t_logits() {
  return from_vector(std::vector<double>{0.2, 1.0, 0.5, -0.3, -1.0, 0.4, 1.5, 0.0, 0.1, 0.2, 0.3, -2.0}, {2, 3, 2});
}
// targets: (2, 2)
Tensor n_t_targets() { return from_vector(std::vector<std::int64_t>{2, 0, -100, 1}, {2, 2}); }

bool all_finite(const Tensor& t) {
  for (double v : t.to_vector<double>())
    if (!std::isfinite(v)) return false;
  return true;
}

}  // namespace

// ---------------------------------------------------------------- the seed's numbers

TEST_CASE("losses: the seed's cross-entropy and KL numbers in bits") {
  const Tensor p = tensor({0.1, 0.2, 0.4, 0.2, 0.1}, kFloat64);
  const Tensor uniform5 = full({5}, 0.2, kFloat64);
  const Tensor closer = tensor({0.15, 0.175, 0.35, 0.175, 0.15}, kFloat64);
  // The seed rounds to 2.32 and 2.16; the exact values are log2(5) and 2.159051657...
  const double h_uniform = nn::cross_entropy_between(p, uniform5, -1, 2.0).item();
  const double h_closer = nn::cross_entropy_between(p, closer, -1, 2.0).item();
  CHECK(std::round(h_uniform * 100) / 100 == doctest::Approx(2.32));
  CHECK(std::round(h_closer * 100) / 100 == doctest::Approx(2.16));
  CHECK(h_uniform == doctest::Approx(std::log2(5.0)).epsilon(1e-12));
  CHECK(h_closer == doctest::Approx(2.159051657097048).epsilon(1e-12));
  CHECK(nn::entropy(p, -1, 2.0).item() == doctest::Approx(2.1219280948873624).epsilon(1e-12));
  // The uniform distribution over 5 events needs log2(5) bits, like H(P, uniform).
  CHECK(nn::entropy(uniform5, 0, 2.0).item() == doctest::Approx(std::log2(5.0)).epsilon(1e-12));
  // KL(P, P) = 0, and H(P, Q) = KL(P, Q) + H(P).
  CHECK(nn::kl_divergence(p, p, -1, 2.0).item() == doctest::Approx(0.0));
  const double kl_closer = nn::kl_divergence(p, closer, -1, 2.0).item();
  CHECK(kl_closer == doctest::Approx(0.03712356220968567).epsilon(1e-10));
  CHECK(h_closer == doctest::Approx(kl_closer + nn::entropy(p, -1, 2.0).item()).epsilon(1e-12));
  // Natural log by default.
  CHECK(nn::cross_entropy_between(p, closer).item() == doctest::Approx(1.4965405688000968).epsilon(1e-12));
  // kl_div with PyTorch's argument order (input = log q) gives the same KL, in nats.
  CHECK(nn::kl_div(log(closer), p, nn::Reduction::Sum).item() ==
        doctest::Approx(kl_closer * std::log(2.0)).epsilon(1e-12));
}

TEST_CASE("losses: distribution helpers reduce one axis and treat 0 log 0 as 0") {
  // p: (2, 3), rows are distributions; the first has a zero entry.
  const Tensor p = tensor({{0.5, 0.0, 0.5}, {0.2, 0.3, 0.5}}, kFloat64);
  const Tensor h = nn::entropy(p);
  CHECK(h.shape() == Shape{2});
  check_values(h, {std::log(2.0), -(0.2 * std::log(0.2) + 0.3 * std::log(0.3) + 0.5 * std::log(0.5))}, 1e-12);
  // Along axis 0 (columns): column 1 is (0, 0.3).
  check_values(nn::entropy(p, 0),
               {-(0.5 * std::log(0.5) + 0.2 * std::log(0.2)), -0.3 * std::log(0.3), -2 * 0.5 * std::log(0.5)}, 1e-12);
  // q = 0 where p = 0 costs nothing; q = 0 where p > 0 is infinitely surprising.
  const Tensor q = tensor({{0.25, 0.0, 0.75}, {0.2, 0.0, 0.8}}, kFloat64);
  const Tensor h_pq = nn::cross_entropy_between(p, q);
  CHECK(h_pq.at({0}) == doctest::Approx(-(0.5 * std::log(0.25) + 0.5 * std::log(0.75))));
  CHECK(std::isinf(h_pq.at({1})));
  CHECK_THROWS_WITH_AS(nn::entropy(p, -1, 1.0), "entropy: log_base must be finite, positive and not 1, got 1",
                       ValueError);
  // An infinite base would turn every entropy into 0 bits.
  CHECK_THROWS_WITH_AS(nn::kl_divergence(p, q, -1, std::numeric_limits<double>::infinity()),
                       "kl_divergence: log_base must be finite, positive and not 1, got inf", ValueError);
  CHECK_THROWS_WITH_AS(nn::entropy(p, 2), "entropy: axis 2 is out of range for a tensor of rank 2", IndexError);
  CHECK_THROWS_WITH_AS(nn::cross_entropy_between(p, q, -3),
                       "cross_entropy_between: axis -3 is out of range for a tensor of rank 2", IndexError);
}

// ---------------------------------------------------------------- cross_entropy / nll_loss

TEST_CASE("losses: cross_entropy reductions with ignored targets match PyTorch") {
  const Tensor x = four_by_three();
  const Tensor t = targets_with_ignored();
  // Row 0 by hand: logsumexp(1, 2, 0.5) - 2 = log(e + e^2 + e^0.5) - 2 = 0.46436878...
  check_values(nn::cross_entropy(x, t, {nn::Reduction::None}), {0.4643687841, 0.0658839038, 0.7022633214, 0.0}, 1e-9);
  // Mean over the 3 non-ignored targets, not the 4 rows.
  CHECK(nn::cross_entropy(x, t).item() == doctest::Approx(0.41083866976815636).epsilon(1e-12));
  CHECK(nn::cross_entropy(x, t, {nn::Reduction::Sum}).item() == doctest::Approx(1.2325160093044691).epsilon(1e-12));
  CHECK(nn::cross_entropy(x, t).item() ==
        doctest::Approx(nn::cross_entropy(x, t, {nn::Reduction::Sum}).item() / 3).epsilon(1e-12));
  // A different ignore_index: class 1 is ignored, only row 2 (target 0) remains.
  nn::CrossEntropyOptions ignore_one;
  ignore_one.ignore_index = 1;
  const Tensor t_ones = from_vector(std::vector<std::int64_t>{1, 1, 0, 1}, {4});
  CHECK(nn::cross_entropy(x, t_ones, ignore_one).item() == doctest::Approx(0.7022633214390952).epsilon(1e-12));
  // Every target ignored: the mean is 0 / 0 = NaN, as in PyTorch; the sum is 0.
  const Tensor all_ignored = full({4}, -100, kInt64);
  CHECK(std::isnan(nn::cross_entropy(x, all_ignored).item()));
  CHECK(nn::cross_entropy(x, all_ignored, {nn::Reduction::Sum}).item() == 0.0);
}

TEST_CASE("losses: cross_entropy label smoothing matches PyTorch, ignored targets excluded") {
  const Tensor x = four_by_three();
  const Tensor t = targets_with_ignored();
  nn::CrossEntropyOptions smooth;
  smooth.label_smoothing = 0.1;
  smooth.reduction = nn::Reduction::None;
  check_values(nn::cross_entropy(x, t, smooth), {0.5477021174, 0.2992172371, 0.8355966548, 0.0}, 1e-9);
  smooth.reduction = nn::Reduction::Mean;
  CHECK(nn::cross_entropy(x, t, smooth).item() == doctest::Approx(0.5608386697681563).epsilon(1e-12));
  smooth.reduction = nn::Reduction::Sum;
  CHECK(nn::cross_entropy(x, t, smooth).item() == doctest::Approx(1.6825160093044693).epsilon(1e-12));
  // By hand for row 0: (1 - eps) nll + eps * mean_c(-log p_c).
  const Tensor log_p = log_softmax(x, 1);
  const double uniform_part = -(log_p.at({0, 0}) + log_p.at({0, 1}) + log_p.at({0, 2})) / 3;
  CHECK(nn::cross_entropy(x, t, {nn::Reduction::None, -100, 0.1}).at({0}) ==
        doctest::Approx(0.9 * -log_p.at({0, 1}) + 0.1 * uniform_part).epsilon(1e-12));
  // label_smoothing = 1: the target is uniform.
  CHECK(nn::cross_entropy(x, t, {nn::Reduction::None, -100, 1.0}).at({0}) ==
        doctest::Approx(uniform_part).epsilon(1e-12));
}

TEST_CASE("losses: cross_entropy in the (N, C, T) layout matches PyTorch and the flattened (N*T, C) form") {
  const Tensor x = n_c_t_logits();  // (2, 3, 2)
  const Tensor t = n_t_targets();   // (2, 2)
  const Tensor per_token = nn::cross_entropy(x, t, {nn::Reduction::None});
  CHECK(per_token.shape() == Shape{2, 2});
  check_values(per_token, {2.1749569269, 0.5995743767, 0.0, 0.6572784771}, 1e-9);
  CHECK(nn::cross_entropy(x, t).item() == doctest::Approx(1.1439365935555563).epsilon(1e-12));
  CHECK(nn::cross_entropy(x, t, {nn::Reduction::Mean, -100, 0.2}).item() ==
        doctest::Approx(1.1794921491111119).epsilon(1e-12));
  // The same loss from (N*T, C) rows: transpose to (N, T, C) (a non-contiguous view), flatten.
  const Tensor rows = x.transpose(1, 2).reshape({4, 3});
  const Tensor flat_targets = t.reshape({4});
  CHECK(nn::cross_entropy(rows, flat_targets, {nn::Reduction::Mean, -100, 0.2}).item() ==
        doctest::Approx(1.1794921491111119).epsilon(1e-12));
  // And (N, T, C) logits passed as a transposed view: the language-model case.
  const Tensor n_t_c = x.transpose(1, 2).contiguous();
  CHECK(nn::cross_entropy(n_t_c.transpose(1, 2), t).item() == doctest::Approx(1.1439365935555563).epsilon(1e-12));
}

TEST_CASE("losses: cross_entropy of a single (C) vector with a scalar target") {
  const Tensor x = tensor({1.0, 2.0, 0.5}, kFloat64);
  const Tensor t = scalar_tensor(1, kInt64);
  const Tensor none = nn::cross_entropy(x, t, {nn::Reduction::None});
  CHECK(none.dim() == 0);
  CHECK(none.item() == doctest::Approx(0.4643687841079449).epsilon(1e-12));
  CHECK(nn::cross_entropy(x, t).item() == doctest::Approx(0.4643687841079449).epsilon(1e-12));
  check_gradients(
      [&](const TensorList& in) {
        return nn::cross_entropy(in[0], t, {nn::Reduction::Mean, -100, 0.3});
      },
      {x});
}

TEST_CASE("losses: cross_entropy equals nll_loss(log_softmax) and the composite x - logsumexp") {
  Generator gen(3);
  const Tensor x = randn({5, 4}, gen, kFloat64).requires_grad_();
  const Tensor t = from_vector(std::vector<std::int64_t>{3, -100, 0, 2, 1}, {5});
  const Tensor fused = nn::cross_entropy(x, t);
  const Tensor via_nll = nn::nll_loss(log_softmax(x, 1), t);
  const Tensor composite = nn::nll_loss(x - logsumexp(x, {1}, true), t);
  CHECK(fused.item() == doctest::Approx(via_nll.item()).epsilon(1e-14));
  CHECK(fused.item() == doctest::Approx(composite.item()).epsilon(1e-12));
  fused.backward();
  const std::vector<double> fused_grad = x.grad().to_vector<double>();
  x.zero_grad(true);
  composite.backward();
  check_values(x.grad(), fused_grad, 1e-10);
  // The gradient by hand: (softmax - one_hot) / 4 kept rows, zero on the ignored row.
  const Tensor p = softmax(x.detach(), 1);
  CHECK(fused_grad[0 * 4 + 3] == doctest::Approx((p.at({0, 3}) - 1) / 4).epsilon(1e-10));
  CHECK(fused_grad[0 * 4 + 1] == doctest::Approx(p.at({0, 1}) / 4).epsilon(1e-10));
  for (int c = 0; c < 4; ++c) CHECK(fused_grad[1 * 4 + c] == 0.0);
}

TEST_CASE("losses: cross_entropy with class-probability targets matches PyTorch") {
  const Tensor x = four_by_three();
  const Tensor p = tensor({{0.2, 0.5, 0.3}, {0.0, 0.0, 1.0}, {0.5, 0.5, 0.0}, {1 / 3.0, 1 / 3.0, 1 / 3.0}}, kFloat64);
  const Tensor none = nn::cross_entropy(x, p, {nn::Reduction::None});
  CHECK(none.shape() == Shape{4});
  // A one-hot row gives the class-index loss: row 1 is class 2, as in targets_with_ignored().
  CHECK(none.at({1}) == doctest::Approx(0.0658839038).epsilon(1e-9));
  CHECK(nn::cross_entropy(x, p).item() == doctest::Approx(0.8070717935259678).epsilon(1e-12));
  CHECK(nn::cross_entropy(x, p, {nn::Reduction::Sum}).item() == doctest::Approx(3.2282871741038712).epsilon(1e-12));
  CHECK(nn::cross_entropy(x, p, {nn::Reduction::Mean, -100, 0.1}).item() ==
        doctest::Approx(0.9033217935259679).epsilon(1e-12));
  // (N, C, T): probabilities along axis 1.
  const Tensor scores =
      from_vector(std::vector<double>{1.0, 0.0, 0.0, 0.0, 0.0, 2.0, 0.5, 0.0, 0.0, 0.3, 0.0, 0.0}, {2, 3, 2});
  CHECK(nn::cross_entropy(n_c_t_logits(), softmax(scores, 1)).item() ==
        doctest::Approx(1.2247658158255463).epsilon(1e-12));
  Generator gen(4);
  check_gradients(
      [](const TensorList& in) {
        return nn::cross_entropy(in[0], softmax(in[1], 1), {nn::Reduction::Mean, -100, 0.2});
      },
      {randn({2, 3, 2}, gen), randn({2, 3, 2}, gen)});
}

TEST_CASE("losses: nll_loss picks -log p of the target class") {
  const Tensor log_p = log(tensor({{0.2, 0.3, 0.5}, {0.6, 0.3, 0.1}}, kFloat64));
  const Tensor t = from_vector(std::vector<std::int64_t>{2, 0}, {2});
  check_values(nn::nll_loss(log_p, t, {nn::Reduction::None}), {-std::log(0.5), -std::log(0.6)}, 1e-12);
  CHECK(nn::nll_loss(log_p, t).item() == doctest::Approx(0.601986402162968).epsilon(1e-12));
  CHECK(nn::nll_loss(log_p, t, {nn::Reduction::Sum}).item() ==
        doctest::Approx(-std::log(0.5) - std::log(0.6)).epsilon(1e-12));
  // float32 works too.
  CHECK(nn::nll_loss(log_p.to(kFloat32), t).item() == doctest::Approx(0.601986402162968).epsilon(1e-6));
}

TEST_CASE("losses: cross_entropy and nll_loss gradients (float64 gradcheck)") {
  Generator gen(7);
  const Tensor t = targets_with_ignored();
  SUBCASE("mean with an ignored target") {
    check_gradients([&](const TensorList& in) { return nn::cross_entropy(in[0], t); }, {randn({4, 3}, gen)});
  }
  SUBCASE("label smoothing, per-element") {
    check_gradients(
        [&](const TensorList& in) {
          return nn::cross_entropy(in[0], t, {nn::Reduction::None, -100, 0.25});
        },
        {randn({4, 3}, gen)});
  }
  SUBCASE("(N, C, T) from a transposed (N, T, C) input, smoothing and a custom ignore_index") {
    const Tensor tokens = from_vector(std::vector<std::int64_t>{2, 0, 0, 1, 3, 0}, {2, 3});
    check_gradients(
        [&](const TensorList& in) {
          return nn::cross_entropy(in[0].transpose(1, 2), tokens, {nn::Reduction::Mean, 0, 0.1});
        },
        {randn({2, 3, 4}, gen)});
  }
  SUBCASE("nll_loss sum") {
    check_gradients([&](const TensorList& in) { return nn::nll_loss(in[0], t, {nn::Reduction::Sum}); },
                    {randn({4, 3}, gen)});
  }
}

TEST_CASE("losses: cross_entropy and nll_loss errors name the shapes and the bad index") {
  const Tensor x = four_by_three();
  CHECK_THROWS_WITH_AS(nn::cross_entropy(x, from_vector(std::vector<std::int64_t>{0, 1, 2}, {3})),
                       "cross_entropy: input of shape (4,3) needs targets of shape (4), got targets of shape (3)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(nn::cross_entropy(n_c_t_logits(), from_vector(std::vector<std::int64_t>{0, 1}, {2})),
                       "cross_entropy: input of shape (2,3,2) needs targets of shape (2,2), got targets of shape (2)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(nn::cross_entropy(x, from_vector(std::vector<std::int64_t>{0, 3, 1, 2}, {4})),
                       "cross_entropy: target 3 is out of range for 3 classes (ignore_index is -100)", IndexError);
  CHECK_THROWS_WITH_AS(nn::nll_loss(x, from_vector(std::vector<std::int64_t>{0, -1, 1, 2}, {4})),
                       "nll_loss: target -1 is out of range for 3 classes (ignore_index is -100)", IndexError);
  CHECK_THROWS_WITH_AS(nn::cross_entropy(x, zeros({4}, kBool)),
                       "cross_entropy: targets must be an int64 tensor of class indices, got bool", TypeError);
  CHECK_THROWS_WITH_AS(nn::cross_entropy(x, zeros({4}, kFloat64)),
                       "cross_entropy: probability targets of shape (4) must match input of shape (4,3)", ShapeError);
  CHECK_THROWS_WITH_AS(nn::cross_entropy(x, targets_with_ignored(), {nn::Reduction::BatchMean}),
                       "cross_entropy: reduction BatchMean is only defined for kl_div; use None, Mean or Sum",
                       ValueError);
  CHECK_THROWS_WITH_AS(nn::cross_entropy(x, targets_with_ignored(), {nn::Reduction::Mean, -100, 1.5}),
                       "cross_entropy: label_smoothing must be in [0, 1], got 1.5", ValueError);
}

// ---------------------------------------------------------------- kl_div

TEST_CASE("losses: kl_div reductions none, sum, mean and batchmean match PyTorch") {
  const Tensor input = log(tensor({{0.25, 0.25, 0.5}, {0.1, 0.6, 0.3}}, kFloat64));
  const Tensor target = tensor({{0.5, 0.0, 0.5}, {0.2, 0.5, 0.3}}, kFloat64);
  check_values(nn::kl_div(input, target, nn::Reduction::None),
               {0.3465735903, 0.0, 0.0, 0.1386294361, -0.0911607784, 0.0}, 1e-9);
  CHECK(nn::kl_div(input, target, nn::Reduction::Sum).item() == doctest::Approx(0.3940422480).epsilon(1e-9));
  CHECK(nn::kl_div(input, target).item() == doctest::Approx(0.0656737080).epsilon(1e-9));  // / 6 elements
  CHECK(nn::kl_div(input, target, nn::Reduction::BatchMean).item() ==
        doctest::Approx(0.1970211240).epsilon(1e-9));  // / 2 rows
  // log_target: target given as log-probabilities.
  const Tensor log_target = log(tensor({{0.5, 0.2, 0.3}, {0.2, 0.5, 0.3}}, kFloat64));
  CHECK(nn::kl_div(input, log_target, nn::Reduction::BatchMean, true).item() ==
        doctest::Approx(0.09808292530117262).epsilon(1e-12));
  // batchmean is the per-row KL(p || q).
  CHECK(nn::kl_div(input, target, nn::Reduction::BatchMean).item() ==
        doctest::Approx(nn::kl_divergence(target, exp(input)).mean().item()).epsilon(1e-12));
}

TEST_CASE("losses: kl_div with zeros in the target: no NaN in the value or the gradient") {
  // q has a zero exactly where p does: input = log 0 = -inf there.
  const Tensor input = log(tensor({{0.5, 0.0, 0.5}}, kFloat64)).requires_grad_();
  const Tensor target = tensor({{0.25, 0.0, 0.75}}, kFloat64).requires_grad_();
  const Tensor loss = nn::kl_div(input, target, nn::Reduction::Sum);
  CHECK(loss.item() == doctest::Approx(0.25 * std::log(0.5) + 0.75 * std::log(1.5)).epsilon(1e-12));
  loss.backward();
  REQUIRE(all_finite(input.grad()));
  REQUIRE(all_finite(target.grad()));
  check_values(input.grad(), {-0.25, 0.0, -0.75}, 1e-12);
  // d/dp [p log p - p x] = log p + 1 - x where p > 0; 0 where p == 0.
  check_values(target.grad(), {std::log(0.25) + 1 - std::log(0.5), 0.0, std::log(0.75) + 1 - std::log(0.5)}, 1e-12);
}

TEST_CASE("losses: kl_div gradients (float64 gradcheck)") {
  Generator gen(11);
  SUBCASE("with respect to the input, zeros in the target") {
    const Tensor target = tensor({{0.5, 0.0, 0.5}, {0.0, 0.0, 1.0}}, kFloat64);
    check_gradients(
        [&](const TensorList& in) { return nn::kl_div(log_softmax(in[0], 1), target, nn::Reduction::BatchMean); },
        {randn({2, 3}, gen)});
  }
  SUBCASE("with respect to both, positive targets, per element") {
    check_gradients([](const TensorList& in) { return nn::kl_div(in[0], in[1], nn::Reduction::None); },
                    {randn({2, 3}, gen), rand({2, 3}, gen) + 0.1});
  }
  SUBCASE("log_target, mean, target broadcast over rows") {
    check_gradients([](const TensorList& in) { return nn::kl_div(in[0], in[1], nn::Reduction::Mean, true); },
                    {randn({2, 3}, gen), randn({3}, gen)});
  }
  SUBCASE("distribution helpers") {
    check_gradients([](const TensorList& in) { return nn::entropy(in[0], 0, 2.0); }, {rand({3, 2}, gen) + 0.1});
    check_gradients([](const TensorList& in) { return nn::cross_entropy_between(in[0], in[1]); },
                    {rand({2, 3}, gen) + 0.1, rand({2, 3}, gen) + 0.1});
    check_gradients([](const TensorList& in) { return nn::kl_divergence(in[0], in[1]); },
                    {rand({2, 3}, gen) + 0.1, rand({3}, gen) + 0.1});
  }
}

// ---------------------------------------------------------------- binary cross-entropy, mse

TEST_CASE("losses: binary_cross_entropy_with_logits matches PyTorch, with and without pos_weight") {
  const Tensor x = tensor({{0.0, 2.0, -3.0}, {1.5, -0.5, 40.0}}, kFloat64);
  const Tensor y = tensor({{1.0, 0.0, 1.0}, {0.3, 0.0, 1.0}}, kFloat64);
  // x = 0: log 2; x = 40, y = 1: exp(-40), no overflow.
  check_values(nn::binary_cross_entropy_with_logits(x, y, nn::Reduction::None),
               {0.6931471806, 2.1269280110, 3.0485873516, 1.2514132780, 0.4740769842, 0.0}, 1e-9);
  CHECK(nn::binary_cross_entropy_with_logits(x, y).item() == doctest::Approx(1.2656921342232532).epsilon(1e-12));
  const Tensor pos_weight = tensor({2.0, 0.5, 1.0}, kFloat64);
  check_values(nn::binary_cross_entropy_with_logits(x, y, nn::Reduction::None, pos_weight),
               {1.3862943611, 2.1269280110, 3.0485873516, 1.3118372614, 0.4740769842, 0.0}, 1e-9);
  CHECK(nn::binary_cross_entropy_with_logits(x, y, nn::Reduction::Sum, pos_weight).item() ==
        doctest::Approx(8.34772396929429).epsilon(1e-12));
  // Large logits in float32 stay finite.
  const Tensor big = tensor({100.0f, -100.0f});
  check_values(nn::binary_cross_entropy_with_logits(big, tensor({0.0f, 1.0f}), nn::Reduction::None), {100.0, 100.0},
               1e-6);
}

TEST_CASE("losses: binary_cross_entropy_with_logits gradient is sigmoid(x) - y, also at x = 0") {
  const Tensor x = zeros({3}, kFloat64).requires_grad_();
  nn::binary_cross_entropy_with_logits(x, tensor({1.0, 0.0, 0.25}, kFloat64), nn::Reduction::Sum).backward();
  check_values(x.grad(), {-0.5, 0.5, 0.25}, 1e-12);  // PyTorch's values
  Generator gen(5);
  check_gradients(
      [](const TensorList& in) {
        return nn::binary_cross_entropy_with_logits(in[0], in[1], nn::Reduction::Mean, in[2]);
      },
      {randn({3, 2}, gen) * 3.0, rand({3, 2}, gen), rand({2}, gen) + 0.5});
  check_gradients(
      [](const TensorList& in) {
        return nn::binary_cross_entropy_with_logits(in[0].transpose(0, 1), in[1], nn::Reduction::None);
      },
      {randn({2, 3}, gen), rand({3, 2}, gen)});
}

TEST_CASE("losses: binary_cross_entropy_with_logits weight matches PyTorch with the gradients of logits and targets") {
  const Tensor x = tensor({{0.0, 2.0, -3.0}, {1.5, -0.5, 40.0}}, kFloat64).requires_grad_();
  const Tensor y = tensor({{1.0, 0.0, 1.0}, {0.3, 0.0, 1.0}}, kFloat64).requires_grad_();
  const Tensor weight = tensor({{0.5}, {2.0}}, kFloat64);  // broadcast along the rows
  const Tensor pos_weight = tensor({2.0, 0.5, 1.0}, kFloat64);
  const Tensor loss = nn::binary_cross_entropy_with_logits(x, y, nn::Reduction::None, pos_weight, weight);
  // torch.nn.functional.binary_cross_entropy_with_logits(x, y, weight, pos_weight=...), 1.13.
  check_values(loss,
               {0.6931471805599453, 1.0634640055214863, 1.524293675786871, 2.623674522755156, 0.9481539683602134, 0.0},
               1e-12);
  loss.sum().backward();
  check_values(x.grad(), {-0.5, 0.44039853898894116, -0.4762870634112166, 0.9256936381034737, 0.7550813375962908, 0.0},
               1e-12);
  check_values(y.grad(),
               {0.34657359027997264, -1.0317320027607433, 1.5, -2.597173444034495, 0.025923015819893314, -80.0}, 1e-12);
}

TEST_CASE("logistic_loss: gradcheck of the fused backward and of every input's gradient") {
  Generator gen(11);
  const Tensor weight = (rand({3, 1}, gen) + 0.5).to(kFloat64), pos_weight = (rand({4}, gen) + 0.5).to(kFloat64);
  // The fused kernels (weight and pos_weight constants; the second order runs the taped formulas).
  check_gradients([&](const TensorList& in) { return logistic_loss(in[0], in[1], pos_weight, weight); },
                  {randn({3, 4}, gen) * 3.0, rand({3, 4}, gen)});
  check_gradients([&](const TensorList& in) { return logistic_loss(in[0].transpose(0, 1), in[1]); },
                  {randn({4, 3}, gen), rand({3, 4}, gen)});
  // The weights' gradients, summed back over their broadcast axes.
  check_gradients([](const TensorList& in) { return logistic_loss(in[0], in[1], in[2], in[3]); },
                  {randn({3, 4}, gen) * 3.0, rand({3, 4}, gen), rand({4}, gen) + 0.5, rand({3, 1}, gen) + 0.5});
}

TEST_CASE("logistic_loss: a tensor the pool splits equals the formula written with ops") {
  // 70,001 elements: chunks of the thread pool, vector batches and a scalar tail, against the loss
  // and gradients of the composite (softplus and arithmetic ops, their own backwards) in float64.
  Generator gen(13);
  const std::int64_t n = 70001;
  const Tensor x = (randn({n}, gen) * 6.0).to(kFloat64), y = rand({n}, gen).to(kFloat64);
  const Tensor p = (rand({n}, gen) + 0.5).to(kFloat64), w = rand({n}, gen).to(kFloat64);
  const Tensor c = randn({n}, gen).to(kFloat64);
  const Tensor x1 = x.clone().requires_grad_(), y1 = y.clone().requires_grad_();
  const Tensor x2 = x.clone().requires_grad_(), y2 = y.clone().requires_grad_();
  const Tensor fused = logistic_loss(x1, y1, p, w);
  const Tensor composite = w * ((1.0 - y2) * x2 + ((p - 1.0) * y2 + 1.0) * softplus(-x2));
  CHECK(tapegrad::testing::max_abs_diff(fused, composite) < 1e-12);
  (fused * c).sum().backward();
  (composite * c).sum().backward();
  CHECK(tapegrad::testing::max_abs_diff(x1.grad(), x2.grad()) < 1e-12);
  CHECK(tapegrad::testing::max_abs_diff(y1.grad(), y2.grad()) < 1e-12);
}

TEST_CASE("logistic_loss: the vector body and the scalar tail agree with float64 and stay finite at large logits") {
  // 16 lanes of float32 on AVX-512: 53 elements are three batches and a tail of five.
  Generator gen(12);
  Tensor x = (randn({53}, gen) * 8.0).to(kFloat64);
  x.data_ptr<double>()[3] = 100.0;  // exp(x) overflows float32 in the backward
  x.data_ptr<double>()[50] = -100.0;
  const Tensor y = rand({53}, gen), w = rand({53}, gen), p = rand({53}, gen) + 0.5;
  const Tensor x32 = x.to(kFloat32).requires_grad_(), y32 = y.to(kFloat32).requires_grad_();
  const Tensor x64 = x32.detach().to(kFloat64).requires_grad_(), y64 = y32.detach().to(kFloat64).requires_grad_();
  const Tensor l32 = logistic_loss(x32, y32, p.to(kFloat32), w.to(kFloat32));
  const Tensor l64 = logistic_loss(x64, y64, p.to(kFloat32).to(kFloat64), w.to(kFloat32).to(kFloat64));
  l32.sum().backward();
  l64.sum().backward();
  for (const auto& [got, want] : {std::pair{l32, l64}, std::pair{x32.grad(), x64.grad()}, {y32.grad(), y64.grad()}}) {
    const std::vector<double> a = got.to_vector<double>(), b = want.to_vector<double>();
    for (std::size_t i = 0; i < a.size(); ++i) {
      INFO("element " << i << ": " << a[i] << " against " << b[i]);
      CHECK(std::isfinite(a[i]));
      CHECK(std::abs(a[i] - b[i]) <= 1e-5 * std::max(1.0, std::abs(b[i])));
    }
  }
}

TEST_CASE("logistic_loss: bfloat16 inputs are computed in float32 and rounded back") {
  const Tensor x = tensor({-2.0f, 0.0f, 3.0f}), y = tensor({1.0f, 0.5f, 0.0f});
  const Tensor low = logistic_loss(x.to(kBFloat16), y.to(kBFloat16));
  CHECK(low.dtype() == kBFloat16);
  CHECK(tapegrad::testing::max_abs_diff(low.to(kFloat32), logistic_loss(x, y)) < 0.02);
  // The result follows the logits: a bfloat16 weight beside float32 logits gives float32.
  CHECK(logistic_loss(x, y, Tensor(), tensor({1.0f, 2.0f, 3.0f}).to(kBFloat16)).dtype() == kFloat32);
  CHECK(nn::binary_cross_entropy_with_logits(x, y, nn::Reduction::Sum, tensor({2.0f}).to(kBFloat16)).dtype() ==
        kFloat32);
}

TEST_CASE("logistic_loss: shapes and dtypes that do not fit are refused with the values") {
  const Tensor x = zeros({2, 3}), y = zeros({2, 3});
  CHECK_THROWS_WITH_AS(logistic_loss(x, zeros({3, 2})),
                       "logistic_loss: targets of shape (3,2) must match logits of shape (2,3)", ShapeError);
  CHECK_THROWS_WITH_AS(logistic_loss(x, y, Tensor(), zeros({2})),
                       "logistic_loss: weight of shape (2) does not broadcast to the logits' shape (2,3)", ShapeError);
  CHECK_THROWS_WITH_AS(logistic_loss(x, y, zeros({3}, kFloat64)),
                       "logistic_loss: pos_weight is float64 but the logits are float32", TypeError);
  CHECK_THROWS_WITH_AS(logistic_loss(x, y, Tensor(), zeros({1, 2, 3})),
                       "logistic_loss: weight of shape (1,2,3) does not broadcast to the logits' shape (2,3)",
                       ShapeError);
}

TEST_CASE("losses: mse_loss values, gradient and errors") {
  const Tensor a = tensor({{1.0, 2.0}, {3.0, -1.0}}, kFloat64);
  const Tensor b = tensor({{0.5, 2.5}, {1.0, 1.0}}, kFloat64);
  check_values(nn::mse_loss(a, b, nn::Reduction::None), {0.25, 0.25, 4.0, 4.0}, 1e-12);
  CHECK(nn::mse_loss(a, b).item() == doctest::Approx(2.125));
  CHECK(nn::mse_loss(a, b, nn::Reduction::Sum).item() == doctest::Approx(8.5));
  Generator gen(2);
  check_gradients([](const TensorList& in) { return nn::mse_loss(in[0].transpose(0, 1), in[1]); },
                  {randn({3, 2}, gen), randn({2, 3}, gen)});
  CHECK_THROWS_WITH_AS(nn::mse_loss(zeros({4, 1}), zeros({4})),
                       "mse_loss: target of shape (4) must match input of shape (4,1)", ShapeError);
  CHECK_THROWS_WITH_AS(nn::mse_loss(a, b, nn::Reduction::BatchMean),
                       "mse_loss: reduction BatchMean is only defined for kl_div; use None, Mean or Sum", ValueError);
  CHECK_THROWS_WITH_AS(nn::binary_cross_entropy_with_logits(zeros({2, 3}), zeros({3, 2})),
                       "binary_cross_entropy_with_logits: targets of shape (3,2) must match logits of shape (2,3)",
                       ShapeError);
}

TEST_CASE("losses: l1_loss, smooth_l1_loss and huber_loss match PyTorch, values and gradients at the kinks") {
  // torch.nn.functional.{l1,smooth_l1,huber}_loss(a, b, reduction=...) in float64; the gradient is
  // that of the mean. a - b = [0.5, -0.5, -1, 2, -2, 0]: a kink of every loss at 0, and |d| = 1, the
  // default beta and delta, at the third element.
  const Tensor a = tensor({{1.0, 2.0, -0.25}, {3.0, -1.0, 0.5}}, kFloat64);
  const Tensor b = tensor({{0.5, 2.5, 0.75}, {1.0, 1.0, 0.5}}, kFloat64);
  using Loss = std::function<Tensor(const Tensor&, const Tensor&, nn::Reduction)>;
  struct Case {
    const char* name;
    Loss loss;
    std::vector<double> none;
    double sum, mean;
    std::vector<double> mean_grad;
  };
  const double s = 1.0 / 6.0, t = 1.0 / 12.0;
  const std::vector<Case> cases{
      {"l1",
       [](const Tensor& x, const Tensor& y, nn::Reduction r) { return nn::l1_loss(x, y, r); },
       {0.5, 0.5, 1.0, 2.0, 2.0, 0.0},
       6.0,
       1.0,
       {s, -s, -s, s, -s, 0.0}},
      {"smooth_l1 beta 1",
       [](const Tensor& x, const Tensor& y, nn::Reduction r) { return nn::smooth_l1_loss(x, y, r); },
       {0.125, 0.125, 0.5, 1.5, 1.5, 0.0},
       3.75,
       0.625,
       {t, -t, -s, s, -s, 0.0}},
      {"smooth_l1 beta 0.5",
       [](const Tensor& x, const Tensor& y, nn::Reduction r) { return nn::smooth_l1_loss(x, y, r, 0.5); },
       {0.25, 0.25, 0.75, 1.75, 1.75, 0.0},
       4.75,
       0.7916666666666666,
       {s, -s, -s, s, -s, 0.0}},
      // beta 0 is l1_loss, with the gradient 0 at d = 0 (PyTorch 1.13 gives -1/6 there; 2.x gives 0).
      {"smooth_l1 beta 0",
       [](const Tensor& x, const Tensor& y, nn::Reduction r) { return nn::smooth_l1_loss(x, y, r, 0.0); },
       {0.5, 0.5, 1.0, 2.0, 2.0, 0.0},
       6.0,
       1.0,
       {s, -s, -s, s, -s, 0.0}},
      {"huber delta 1",
       [](const Tensor& x, const Tensor& y, nn::Reduction r) { return nn::huber_loss(x, y, r); },
       {0.125, 0.125, 0.5, 1.5, 1.5, 0.0},
       3.75,
       0.625,
       {t, -t, -s, s, -s, 0.0}},
      {"huber delta 0.75",
       [](const Tensor& x, const Tensor& y, nn::Reduction r) { return nn::huber_loss(x, y, r, 0.75); },
       {0.125, 0.125, 0.46875, 1.21875, 1.21875, 0.0},
       3.15625,
       0.5260416666666666,
       {t, -t, -0.125, 0.125, -0.125, 0.0}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    check_values(c.loss(a, b, nn::Reduction::None), c.none, 1e-15);
    CHECK(c.loss(a, b, nn::Reduction::Sum).item() == doctest::Approx(c.sum).epsilon(1e-15));
    const Tensor x = a.detach().requires_grad_(true);
    const Tensor mean = c.loss(x, b, nn::Reduction::Mean);
    CHECK(mean.item() == doctest::Approx(c.mean).epsilon(1e-15));
    mean.backward();
    check_values(x.grad(), c.mean_grad, 1e-15);
  }
}

TEST_CASE("losses: l1_loss, smooth_l1_loss and huber_loss gradients (float64 gradcheck) and errors") {
  Generator gen(4);
  // Transposed inputs, and differences of either sign on both sides of beta and delta (normal
  // draws times 2 land within 1e-6 of a kink with negligible probability).
  const TensorList inputs{randn({3, 4}, gen, kFloat64) * 2.0, randn({4, 3}, gen, kFloat64)};
  check_gradients([](const TensorList& in) { return nn::l1_loss(in[0].transpose(0, 1), in[1]); }, inputs);
  check_gradients(
      [](const TensorList& in) { return nn::smooth_l1_loss(in[0].transpose(0, 1), in[1], nn::Reduction::Sum, 0.7); },
      inputs);
  check_gradients(
      [](const TensorList& in) { return nn::huber_loss(in[0].transpose(0, 1), in[1], nn::Reduction::None, 1.3); },
      inputs);
  CHECK_THROWS_WITH_AS(nn::smooth_l1_loss(zeros({2}), zeros({2}), nn::Reduction::Mean, -1.0),
                       "smooth_l1_loss: beta must be finite and >= 0, got -1", ValueError);
  CHECK_THROWS_WITH_AS(nn::smooth_l1_loss(zeros({2}), zeros({2}), nn::Reduction::Mean, std::nan("")),
                       "smooth_l1_loss: beta must be finite and >= 0, got nan", ValueError);
  CHECK_THROWS_WITH_AS(nn::huber_loss(zeros({2}), zeros({2}), nn::Reduction::Mean, 0.0),
                       "huber_loss: delta must be finite and > 0, got 0", ValueError);
  CHECK_THROWS_WITH_AS(
      nn::huber_loss(zeros({2}), zeros({2}), nn::Reduction::Mean, std::numeric_limits<double>::infinity()),
      "huber_loss: delta must be finite and > 0, got inf", ValueError);
  CHECK_THROWS_WITH_AS(nn::l1_loss(zeros({4, 1}), zeros({4})),
                       "l1_loss: target of shape (4) must match input of shape (4,1)", ShapeError);
  CHECK_THROWS_WITH_AS(nn::huber_loss(zeros({2}), zeros({2}, kInt64)),
                       "huber_loss: target must be a floating-point tensor, got int64", TypeError);
  CHECK_THROWS_WITH_AS(nn::smooth_l1_loss(zeros({2}), zeros({2}), nn::Reduction::BatchMean),
                       "smooth_l1_loss: reduction BatchMean is only defined for kl_div; use None, Mean or Sum",
                       ValueError);
}

TEST_CASE(
    "losses: cross_entropy and nll_loss with class weights match PyTorch (weighted mean, ignore_index, smoothing)") {
  // torch.nn.functional.cross_entropy(logits, t, weight=w, reduction=..., label_smoothing=...) in float64.
  const std::vector<double> values{1.0, -0.5, 2.0, 0.3, 0.2,  0.1,  -1.0, 1.5,  -0.7, 2.2,
                                   0.4, 0.0,  0.9, 0.9, -0.3, -1.2, 1.1,  -2.0, 0.5,  0.8};
  const Tensor targets = from_vector(std::vector<std::int64_t>{2, 0, 1, 3, -100}, {5});
  const Tensor w = from_vector(std::vector<double>{0.5, 2.0, 1.0, 3.0}, {4});
  struct Case {
    nn::Reduction reduction;
    double smoothing;
    std::vector<double> value, grad;
  };
  const std::vector<Case> cases{
      {nn::Reduction::Mean,
       0.0,
       {1.6774551200963033},
       {0.034665670956954,
        0.007734956712278,
        -0.059615090412524,
        0.017214462743292,
        -0.063830518851909,
        0.011846636440601,
        0.00394340271016,
        0.048040479701148,
        0.012718729018305,
        -0.076540277599075,
        0.038209173584574,
        0.025612374996195,
        0.190431101698306,
        0.190431101698306,
        0.057356745599594,
        -0.438218948996207,
        0,
        0,
        0,
        0}},
      {nn::Reduction::Mean,
       0.2,
       {1.7093465636193896},
       {0.03515272598042,
        -0.006682789083303,
        -0.024759284406398,
        -0.003710652490719,
        -0.046400406181422,
        0.001793007454257,
        -0.001974373762575,
        0.046581772489741,
        0.008395622833965,
        -0.039054632573725,
        0.029084021882845,
        0.001574987856915,
        0.169128763529808,
        0.157590301991346,
        0.044406736227323,
        -0.371125801748477,
        0,
        0,
        0,
        0}},
      {nn::Reduction::Sum,
       0.0,
       {10.903458280625971},
       {0.225326861220203,
        0.050277218629807,
        -0.387498087681409,
        0.111894007831399,
        -0.414898372537409,
        0.077003136863909,
        0.025632117616041,
        0.312263118057459,
        0.082671738618984,
        -0.497511804393986,
        0.248359628299732,
        0.16648043747527,
        1.237802161038991,
        1.237802161038991,
        0.37281884639736,
        -2.848423168475343,
        0,
        0,
        0,
        0}},
      {nn::Reduction::None,
       0.2,
       {1.0814786162172434, 1.1588024057068316, 1.0430974506059012, 7.827374190996055, 0.0},
       {0.228492718872728,
        -0.043438129041467,
        -0.160935348641585,
        -0.024119241189676,
        -0.301602640179243,
        0.011654548452668,
        -0.012833429456741,
        0.302781521183316,
        0.054571548420772,
        -0.253855111729211,
        0.189046142238492,
        0.010237421069948,
        1.09933696294375,
        1.02433696294375,
        0.288643785477602,
        -2.412317711365104,
        0,
        0,
        0,
        0}},
  };
  for (const Case& c : cases) {
    CAPTURE(static_cast<int>(c.reduction));
    CAPTURE(c.smoothing);
    Tensor logits = from_vector(values, {5, 4}).requires_grad_();
    nn::CrossEntropyOptions options;
    options.reduction = c.reduction;
    options.label_smoothing = c.smoothing;
    options.weight = w;
    const Tensor loss = nn::cross_entropy(logits, targets, options);
    check_values(loss, c.value, 1e-12);
    loss.sum().backward();
    check_values(logits.grad(), c.grad, 1e-10);
  }
  // The weighted mean divides by sum w[t] over the kept targets (1 + 0.5 + 2 + 3 = 6.5), not by their number.
  const Tensor logits = from_vector(values, {5, 4});
  nn::CrossEntropyOptions sum_options;
  sum_options.reduction = nn::Reduction::Sum;
  sum_options.weight = w;
  check_values(nn::cross_entropy(logits, targets, sum_options) / 6.5, {1.6774551200963033}, 1e-13);
  // nll_loss on log_softmax gives the same; another ignore_index leaves its class's weight out of the mean.
  nn::NllLossOptions nll;
  nll.weight = w;
  check_values(nn::nll_loss(log_softmax(logits, 1), targets, nll), {1.6774551200963033}, 1e-12);
  nn::CrossEntropyOptions ignore_one;
  ignore_one.ignore_index = 1;
  ignore_one.weight = w;
  check_values(nn::cross_entropy(logits, from_vector(std::vector<std::int64_t>{2, 0, 1, 3, 1}, {5}), ignore_one),
               {2.2958686625100366}, 1e-12);
  // (N, C, d) layout with weights, smoothing and an ignored position.
  nn::CrossEntropyOptions spatial;
  spatial.weight = from_vector(std::vector<double>{1.0, 2.0, 0.5}, {3});
  spatial.label_smoothing = 0.1;
  check_values(nn::cross_entropy(from_vector(std::vector<double>{1, 0, 2, -1, 0.5, 0.5, 0, 1, -1, 1, 2, 0}, {2, 3, 2}),
                                 from_vector(std::vector<std::int64_t>{0, 2, 1, -100}, {2, 2}), spatial),
               {2.2519010888619344}, 1e-12);
  // Probability targets: the weights multiply each class's term; Mean still averages over the rows.
  const Tensor probs = from_vector(std::vector<double>{0.21383822036598443,
                                                       0.23632778232153767,
                                                       0.2611825921550756,
                                                       0.28865140515740234,
                                                       0.4753668864186717,
                                                       0.17487770452710943,
                                                       0.17487770452710943,
                                                       0.17487770452710943,
                                                       0.3533992459382818,
                                                       0.3533992459382818,
                                                       0.07885403034254315,
                                                       0.21434747778089325,
                                                       0.04331716447953073,
                                                       0.04331716447953073,
                                                       0.04331716447953073,
                                                       0.8700485065614079,
                                                       0.25,
                                                       0.25,
                                                       0.25,
                                                       0.25},
                                   {5, 4});
  nn::CrossEntropyOptions soft;
  soft.weight = w;
  soft.label_smoothing = 0.1;
  check_values(nn::cross_entropy(logits, probs, soft), {3.7695377146161917}, 1e-12);
  soft.reduction = nn::Reduction::None;
  check_values(nn::cross_entropy(logits, probs, soft),
               {3.582242100926943, 1.8827673241103073, 2.5681467484026532, 7.511736444747253, 3.302795954893801},
               1e-12);

  // float64 gradcheck of the weighted, smoothed, partly ignored mean.
  Generator gen(5);
  nn::CrossEntropyOptions checked;
  checked.weight = w;
  checked.label_smoothing = 0.15;
  check_gradients([&](const TensorList& in) { return nn::cross_entropy(in[0], targets, checked); },
                  {randn({5, 4}, gen, kFloat64)});

  nn::CrossEntropyOptions bad;
  bad.weight = from_vector(std::vector<double>{1.0, 2.0}, {2});
  CHECK_THROWS_WITH_AS(nn::cross_entropy(logits, targets, bad),
                       "cross_entropy: weight must have shape (4) for 4 classes, got (2)", ShapeError);
  bad.weight = from_vector(std::vector<float>{1, 2, 3, 4}, {4});
  CHECK_THROWS_WITH_AS(nn::cross_entropy(logits, targets, bad),
                       "cross_entropy: weight is float32 but the input is float64", TypeError);
}

TEST_CASE("losses: binary_cross_entropy on probabilities matches PyTorch, clamped logs at 0 and 1") {
  // F.binary_cross_entropy(p, t) and with weight w and reduction sum, and the gradients, PyTorch 1.13.
  const Tensor t = tensor({0.0, 1.0, 0.3, 0.0}, kFloat64);
  const Tensor p = tensor({0.1, 0.8, 0.5, 0.999}, kFloat64).requires_grad_(true);
  const Tensor mean_loss = nn::binary_cross_entropy(p, t);
  CHECK(mean_loss.item() == doctest::Approx(1.9823516316285292).epsilon(1e-14));
  mean_loss.backward();
  check_values(p.grad(), {0.27777777777777773, -0.3125, 0.2, 249.99999999999974}, 1e-12);
  const Tensor pw = p.detach().requires_grad_(true);
  const Tensor summed = nn::binary_cross_entropy(pw, t, nn::Reduction::Sum, tensor({1.0, 2.0, 0.5, 1.0}, kFloat64));
  CHECK(summed.item() == doctest::Approx(7.805976487548355).epsilon(1e-14));
  summed.backward();
  check_values(pw.grad(), {1.111111111111111, -2.5, 0.4, 999.999999999999}, 1e-12);
  // At p = t = 0 and 1 the loss and gradient are 0; against the opposite label each log is clamped
  // at -100, as torch's.
  const Tensor edges = tensor({0.0, 1.0}, kFloat64).requires_grad_(true);
  const Tensor right = nn::binary_cross_entropy(edges, tensor({0.0, 1.0}, kFloat64));
  CHECK(right.item() == 0.0);
  right.backward();
  check_values(edges.grad(), {0.0, 0.0}, 1e-15);
  check_values(nn::binary_cross_entropy(edges.detach(), tensor({1.0, 0.0}, kFloat64), nn::Reduction::None),
               {100.0, 100.0}, 1e-15);
  Generator gen(15);
  check_gradients(
      [](const TensorList& in) { return nn::binary_cross_entropy(sigmoid(in[0]), in[1], nn::Reduction::Mean, in[2]); },
      {randn({3, 2}, gen, kFloat64), rand({3, 2}, gen, kFloat64), rand({3, 2}, gen, kFloat64)});
  CHECK_THROWS_WITH_AS(nn::binary_cross_entropy(tensor({0.5, 1.5}), tensor({0.0, 1.0})),
                       "binary_cross_entropy: probs must lie in [0, 1], got values from 0.5 to 1.5", ValueError);
  CHECK_THROWS_WITH_AS(nn::binary_cross_entropy(tensor({0.5, 0.5}), tensor({0.0})),
                       "binary_cross_entropy: targets of shape (1) must match probs of shape (2)", ShapeError);
}

TEST_CASE("losses: soft margin, margin ranking, triplet and cosine embedding losses match PyTorch") {
  // Each value and gradient from PyTorch 1.13's F.* of the same float64 inputs.
  const Tensor x = tensor({0.5, -1.0, 2.0, 0.0}, kFloat64).requires_grad_(true);
  const Tensor soft = nn::soft_margin_loss(x, tensor({1.0, 1.0, -1.0, -1.0}, kFloat64));
  CHECK(soft.item() == doctest::Approx(1.151853465825312).epsilon(1e-14));
  soft.backward();
  check_values(x.grad(), {-0.09438516719953637, -0.18276464465750122, 0.2201992694944706, 0.125}, 1e-14);

  // margin 0.2; the last pair ties, so its hinge is exactly the margin.
  const Tensor a = tensor({0.5, -1.0, 2.0, 0.3}, kFloat64).requires_grad_(true);
  const Tensor b = tensor({1.0, -2.0, 2.5, 0.3}, kFloat64).requires_grad_(true);
  const Tensor ranking = nn::margin_ranking_loss(a, b, tensor({1.0, 1.0, -1.0, 1.0}, kFloat64), 0.2);
  CHECK(ranking.item() == doctest::Approx(0.22499999999999998).epsilon(1e-14));
  ranking.backward();
  check_values(a.grad(), {-0.25, 0.0, 0.0, -0.25}, 1e-15);
  check_values(b.grad(), {0.25, 0.0, 0.0, 0.25}, 1e-15);

  const Tensor anchor = tensor({{1.0, 2.0, 0.0}, {0.0, -1.0, 1.0}}, kFloat64).requires_grad_(true);
  const Tensor positive = tensor({{1.5, 1.0, 0.0}, {0.0, -1.0, 1.2}}, kFloat64).requires_grad_(true);
  const Tensor negative = tensor({{0.0, 2.0, 1.0}, {1.0, 0.0, 1.0}}, kFloat64).requires_grad_(true);
  const Tensor triplet = nn::triplet_margin_loss(anchor, positive, negative);
  CHECK(triplet.item() == doctest::Approx(0.3519104367952933).epsilon(1e-14));
  triplet.backward();
  check_values(anchor.grad(), {-0.5771600052400278, 0.4472135102741164, 0.3535534842530346, 0, 0, 0}, 1e-13);
  check_values(positive.grad(), {0.2236062610936286, -0.447213863827507, -4.472134166140904e-07, 0, 0, 0}, 1e-13);
  check_values(negative.grad(), {0.3535537441463992, 3.535533905930086e-07, -0.353553037039618, 0, 0, 0}, 1e-13);
  const Tensor swapped = nn::triplet_margin_loss(
      anchor, positive, negative,
      nn::TripletMarginLossOptions().margin(0.5).p(1.0).swap(true).reduction(nn::Reduction::None));
  check_values(swapped, {4.440892098500626e-16, 0.0}, 1e-15);

  const Tensor x1 = tensor({{1.0, 2.0, 0.0}, {0.0, -1.0, 1.0}, {1.0, 1.0, 1.0}}, kFloat64).requires_grad_(true);
  const Tensor x2 = tensor({{1.5, 1.0, 0.0}, {0.0, 1.0, 1.2}, {-1.0, -1.0, 0.5}}, kFloat64).requires_grad_(true);
  const Tensor embedding = nn::cosine_embedding_loss(x1, x2, tensor({1.0, -1.0, -1.0}, kFloat64), 0.1);
  CHECK(embedding.item() == doctest::Approx(0.04391895262525369).epsilon(1e-14));
  embedding.backward();
  check_values(x1.grad(), {-0.0661518584475726, 0.033075929223757405, 0, 0, 0, 0, 0, 0, 0}, 1e-14);
  check_values(x2.grad(), {0.050886044959621304, -0.07632906743952089, 0, 0, 0, 0, 0, 0, 0}, 1e-14);

  Generator gen(16);
  const Tensor r1 = randn({3, 4}, gen, kFloat64), r2 = randn({3, 4}, gen, kFloat64), r3 = randn({3, 4}, gen, kFloat64);
  const Tensor labels = tensor({{1.0, -1.0, 1.0, -1.0}, {-1.0, 1.0, 1.0, 1.0}, {1.0, -1.0, -1.0, 1.0}}, kFloat64);
  check_gradients([&](const TensorList& in) { return nn::soft_margin_loss(in[0], labels); }, {r1});
  check_gradients([&](const TensorList& in) { return nn::margin_ranking_loss(in[0], in[1], labels, 0.3); }, {r1, r2});
  check_gradients([](const TensorList& in) { return nn::triplet_margin_loss(in[0], in[1], in[2]); }, {r1, r2, r3});
  check_gradients(
      [](const TensorList& in) {
        return nn::cosine_embedding_loss(in[0], in[1], tensor({1.0, -1.0, -1.0}, kFloat64), -0.5, nn::Reduction::Sum);
      },
      {r1, r2});
  CHECK_THROWS_WITH_AS(nn::margin_ranking_loss(r1, r2, tensor({1.0})),
                       "margin_ranking_loss: input1 (3,4), input2 (3,4) and target (1) must have the same shape",
                       ShapeError);
  CHECK_THROWS_WITH_AS(nn::triplet_margin_loss(r1, r2, r3, nn::TripletMarginLossOptions().p(0.0)),
                       "triplet_margin_loss: p must be positive, got 0", ValueError);
  CHECK_THROWS_WITH_AS(nn::cosine_embedding_loss(r1, r2, tensor({1.0})),
                       "cosine_embedding_loss: expected input1 and input2 (N, D) and target (N), got (3,4), (3,4) "
                       "and (1)",
                       ShapeError);
}

TEST_CASE("losses: hinge embedding, multi-margin, multilabel margins and the Poisson and Gaussian likelihoods") {
  // torch's documented examples: x = [0.1, 0.2, 0.4, 0.8]. Class 3 against the others:
  // (0.3 + 0.4 + 0.6) / 4; classes {3, 0} against {1, 2}: (0.9 + 0.6 + 1.1 + 0.8) / 4.
  const Tensor x = tensor({{0.1, 0.2, 0.4, 0.8}}, kFloat64).requires_grad_(true);
  const Tensor multi = nn::multi_margin_loss(x, from_vector(std::vector<std::int64_t>{3}, {1}));
  CHECK(multi.item() == doctest::Approx(0.325).epsilon(1e-14));
  multi.backward();
  check_values(x.grad(), {0.25, 0.25, 0.25, -0.75}, 1e-15);
  const Tensor labels = from_vector(std::vector<std::int64_t>{3, 0, -1, 1}, {1, 4});
  CHECK(nn::multilabel_margin_loss(x, labels).item() == doctest::Approx(0.85).epsilon(1e-14));
  // Nothing after the first -1 is read, and the unbatched form gives a scalar.
  const Tensor row = from_vector(std::vector<std::int64_t>{3, 0, -1, 2}, {4});
  CHECK(nn::multilabel_margin_loss(x.squeeze(0), row, nn::Reduction::None).item() ==
        doctest::Approx(0.85).epsilon(1e-14));
  // The hinge embedding loss: the distance where y = 1, the margin's hinge where y = -1.
  check_values(nn::hinge_embedding_loss(tensor({0.3, 0.3, 2.0}, kFloat64), tensor({1.0, -1.0, -1.0}, kFloat64), 1.0,
                                        nn::Reduction::None),
               {0.3, 0.7, 0.0}, 1e-15);
  // Poisson with log rates: exp(x) - y x; Gaussian: 0.5 (log var + d^2 / var), var clamped to eps.
  check_values(nn::poisson_nll_loss(tensor({0.0, 1.0}, kFloat64), tensor({2.0, 3.0}, kFloat64),
                                    nn::PoissonNLLLossOptions().reduction(nn::Reduction::None)),
               {1.0, std::exp(1.0) - 3.0}, 1e-15);
  const Tensor var = tensor({4.0, 0.0}, kFloat64).requires_grad_(true);
  const Tensor gaussian = nn::gaussian_nll_loss(tensor({1.0, 0.0}, kFloat64), tensor({3.0, 0.0}, kFloat64), var,
                                                nn::GaussianNLLLossOptions().eps(0.5).reduction(nn::Reduction::None));
  check_values(gaussian, {0.5 * (std::log(4.0) + 1.0), 0.5 * std::log(0.5)}, 1e-15);
  sum(gaussian).backward();
  check_values(var.grad(), {0.5 * (0.25 - 4.0 / 16.0), 0.5 / 0.5}, 1e-15);  // the clamp's gradient is 1

  Generator gen(23);
  const Tensor a = randn({3, 5}, gen, kFloat64);
  const Tensor b = randn({3, 5}, gen, kFloat64);
  const Tensor rates = rand({3, 5}, gen, kFloat64) * 3.0 + 0.2;
  const Tensor counts = rand({3, 5}, gen, kFloat64) * 4.0 + 0.1;
  const Tensor variances = rand({3, 5}, gen, kFloat64) + 0.1;
  const Tensor pm_one =
      tensor({{1.0, -1.0, 1.0, -1.0, 1.0}, {-1.0, 1.0, 1.0, 1.0, -1.0}, {1.0, -1.0, -1.0, 1.0, 1.0}}, kFloat64);
  const Tensor classes = from_vector(std::vector<std::int64_t>{4, 0, 2}, {3});
  const Tensor class_weight = tensor({0.5, 1.0, 1.5, 2.0, 2.5}, kFloat64);
  const Tensor label_rows =
      from_vector(std::vector<std::int64_t>{1, 3, -1, 0, 0, 4, -1, 0, 0, 0, 0, 1, 2, 3, 4}, {3, 5});
  check_gradients([&](const TensorList& in) { return nn::hinge_embedding_loss(in[0], pm_one, 0.8); }, {a});
  check_gradients(
      [&](const TensorList& in) {
        return nn::multi_margin_loss(in[0], classes,
                                     nn::MultiMarginLossOptions().p(2).margin(1.5).weight(class_weight));
      },
      {a});
  check_gradients([&](const TensorList& in) { return nn::multilabel_margin_loss(in[0], label_rows); }, {a});
  check_gradients(
      [&](const TensorList& in) {
        return nn::multilabel_soft_margin_loss(in[0], in[1], nn::Reduction::Sum, class_weight);  // no gradient to it
      },
      {a, sigmoid(b)});
  check_gradients(
      [&](const TensorList& in) {
        return nn::poisson_nll_loss(in[0], in[1], nn::PoissonNLLLossOptions().log_input(false).full(true));
      },
      {rates, counts});
  check_gradients(
      [](const TensorList& in) {
        return nn::gaussian_nll_loss(in[0], in[1], in[2], nn::GaussianNLLLossOptions().full(true));
      },
      {a, b, variances});
  check_gradients([](const TensorList& in) { return nn::gaussian_nll_loss(in[0], in[1], in[2]); },
                  {a, b, variances.select(1, 0)});  // one variance per row

  CHECK_THROWS_WITH_AS(nn::multi_margin_loss(a, classes, nn::MultiMarginLossOptions().p(3)),
                       "multi_margin_loss: p must be 1 or 2, got 3", ValueError);
  CHECK_THROWS_WITH_AS(nn::multi_margin_loss(a, from_vector(std::vector<std::int64_t>{4, 5, 0}, {3})),
                       "multi_margin_loss: target 5 is out of range for 5 classes", IndexError);
  CHECK_THROWS_WITH_AS(nn::multi_margin_loss(a, classes.narrow(0, 0, 2)),
                       "multi_margin_loss: input of shape (3,5) needs target of shape (3), got (2)", ShapeError);
  CHECK_THROWS_WITH_AS(nn::multi_margin_loss(a, classes, nn::MultiMarginLossOptions().weight(ones({5}))),
                       "multi_margin_loss: weight is float32 but the input is float64", TypeError);
  CHECK_THROWS_WITH_AS(nn::multi_margin_loss(a.unsqueeze(0), classes),
                       "multi_margin_loss: input must be (N, C) or (C) with C > 0, got (1,3,5)", ShapeError);
  CHECK_THROWS_WITH_AS(
      nn::multilabel_margin_loss(
          a, from_vector(std::vector<std::int64_t>{1, 5, -1, 0, 0, 0, 0, 0, 0, 0, -1, -1, -1, -1, -1}, {3, 5})),
      "multilabel_margin_loss: target 5 is out of range for 5 classes (-1 ends a row)", IndexError);
  CHECK_THROWS_WITH_AS(nn::multilabel_margin_loss(a, classes),
                       "multilabel_margin_loss: target of shape (3) must match input of shape (3,5)", ShapeError);
  CHECK_THROWS_WITH_AS(nn::multilabel_soft_margin_loss(a, b, nn::Reduction::Mean, ones({3, 1, 1}, kFloat64)),
                       "multilabel_soft_margin_loss: weight of shape (3,1,1) does not broadcast to the input's shape "
                       "(3,5)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(nn::gaussian_nll_loss(a, b, variances - 0.5),
                       doctest::Contains("gaussian_nll_loss: var has a negative entry (the smallest is -0."),
                       ValueError);
  CHECK_THROWS_WITH_AS(nn::gaussian_nll_loss(a, b, variances.narrow(1, 0, 2)),
                       "gaussian_nll_loss: var of shape (3,2) must be the input's shape (3,5), or it with the last "
                       "axis 1 or without it",
                       ShapeError);
  CHECK_THROWS_WITH_AS(nn::poisson_nll_loss(a, b, nn::PoissonNLLLossOptions().reduction(nn::Reduction::BatchMean)),
                       "poisson_nll_loss: reduction BatchMean is only defined for kl_div; use None, Mean or Sum",
                       ValueError);
  CHECK_THROWS_WITH_AS(nn::hinge_embedding_loss(a, pm_one.narrow(0, 0, 1)),
                       "hinge_embedding_loss: target of shape (1,5) must match input of shape (3,5)", ShapeError);
}
