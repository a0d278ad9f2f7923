// ctc_loss and CTCLoss (nn/ctc.h): the loss against a brute-force sum over every alignment, its
// gradient against finite differences (of the loss itself and through log_softmax), the infeasible
// case with and without zero_infinity, the reductions and layouts, and the errors. torch's values
// and gradients are in the fixture (test_torch_reference.cpp's ctc_loss cases).

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "tapegrad/nn/nn.h"
#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::check_first_order_gradients;
using tapegrad::testing::max_abs_diff;

namespace {

// The collapse of an alignment: repeats merged, then blanks removed.
std::vector<std::int64_t> collapse(const std::vector<std::int64_t>& path, std::int64_t blank) {
  std::vector<std::int64_t> out;
  for (std::size_t t = 0; t < path.size(); ++t)
    if (path[t] != blank && (t == 0 || path[t] != path[t - 1])) out.push_back(path[t]);
  return out;
}

// -log of the summed probability of every alignment of `frames` frames collapsing to `labels`,
// by enumerating all C^T of them. y: (T, C) log-probabilities.
double brute_force_loss(const Tensor& y, std::int64_t frames, const std::vector<std::int64_t>& labels,
                        std::int64_t blank) {
  const std::int64_t classes = y.size(1);
  const std::vector<double> lp = y.to_vector<double>();
  std::vector<std::int64_t> path(static_cast<std::size_t>(frames), 0);
  double total = 0.0;
  while (true) {
    if (collapse(path, blank) == labels) {
      double log_prob = 0.0;
      for (std::int64_t t = 0; t < frames; ++t)
        log_prob += lp[static_cast<std::size_t>(t * classes + path[static_cast<std::size_t>(t)])];
      total += std::exp(log_prob);
    }
    std::int64_t t = 0;  // the next path, as a number in base C
    while (t < frames && ++path[static_cast<std::size_t>(t)] == classes) path[static_cast<std::size_t>(t++)] = 0;
    if (t == frames) break;
  }
  return -std::log(total);
}

}  // namespace

TEST_CASE("ctc_loss: each sequence's loss is -log of the summed probability of its alignments") {
  Generator gen(61);
  const std::int64_t frames = 6, batch = 4, classes = 4;
  const Tensor log_probs = log_softmax(randn({frames, batch, classes}, gen, kFloat64) * 1.5, 2);
  // Repeats need a blank between them; sequence 3 is empty; the blank is class 1.
  const std::vector<std::vector<std::int64_t>> labels = {{0, 2, 2}, {3, 0}, {2, 3, 0, 3}, {}};
  const std::vector<std::int64_t> input_lengths = {6, 5, 6, 3};
  const Tensor targets = from_vector(std::vector<std::int64_t>{0, 2, 2, 0, 3, 0, 0, 0, 2, 3, 0, 3, 0, 0, 0, 0}, {4, 4});
  const std::vector<std::int64_t> target_lengths = {3, 2, 4, 0};
  const auto none = nn::CTCLossOptions().blank(1).reduction(nn::Reduction::None);
  const Tensor losses = nn::ctc_loss(log_probs, targets, input_lengths, target_lengths, none);
  REQUIRE(losses.shape() == Shape{batch});
  std::vector<double> expected;
  for (std::int64_t n = 0; n < batch; ++n)
    expected.push_back(brute_force_loss(log_probs.select(1, n), input_lengths[static_cast<std::size_t>(n)],
                                        labels[static_cast<std::size_t>(n)], 1));
  tapegrad::testing::check_values(losses, expected, 1e-12);

  // Sum and Mean (each loss over its target length, at least 1), and the concatenated layout.
  const Tensor summed = nn::ctc_loss(log_probs, targets, input_lengths, target_lengths,
                                     nn::CTCLossOptions().blank(1).reduction(nn::Reduction::Sum));
  CHECK(summed.item() == doctest::Approx(expected[0] + expected[1] + expected[2] + expected[3]).epsilon(1e-13));
  const Tensor concatenated = from_vector(std::vector<std::int64_t>{0, 2, 2, 3, 0, 2, 3, 0, 3}, {9});
  const Tensor mean =
      nn::ctc_loss(log_probs, concatenated, input_lengths, target_lengths, nn::CTCLossOptions().blank(1));
  CHECK(mean.item() ==
        doctest::Approx((expected[0] / 3 + expected[1] / 2 + expected[2] / 4 + expected[3] / 1) / 4).epsilon(1e-13));

  // One sequence as (T, C), lengths as scalar tensors; float32 close to float64.
  const Tensor one =
      nn::ctc_loss(log_probs.select(1, 2), from_vector(labels[2], {4}), from_vector(std::vector<std::int64_t>{6}, {}),
                   from_vector(std::vector<std::int64_t>{4}, {}), none);
  CHECK(one.dim() == 0);
  CHECK(one.item() == doctest::Approx(expected[2]).epsilon(1e-13));
  const Tensor single = nn::ctc_loss(log_probs.to(kFloat32), targets, input_lengths, target_lengths, none);
  CHECK(single.dtype() == kFloat32);
  CHECK(max_abs_diff(single.to(kFloat64), losses) < 1e-5);
}

TEST_CASE("ctc_loss: its gradient matches finite differences of the loss and, through log_softmax, of the logits") {
  Generator gen(62);
  const Tensor log_probs = log_softmax(randn({5, 3, 4}, gen, kFloat64), 2);
  const Tensor logits = randn({5, 3, 4}, gen, kFloat64);
  const Tensor targets = from_vector(std::vector<std::int64_t>{1, 1, 2, 3, 0, 0, 2, 0, 0}, {3, 3});
  const std::vector<std::int64_t> input_lengths = {5, 3, 4}, target_lengths = {3, 1, 1};
  const char* reason = "ctc_loss's gradient is computed by its kernel and is not differentiable again, as torch's";
  // The loss as a function of free log-probabilities (no normalisation): the gradient torch's kernel
  // does not give, frames past an input length included (their gradient 0).
  check_first_order_gradients(reason,
                              [&](const TensorList& in) {
                                return nn::ctc_loss(in[0], targets, input_lengths, target_lengths,
                                                    nn::CTCLossOptions().reduction(nn::Reduction::Sum));
                              },
                              {log_probs});
  check_first_order_gradients(reason,
                              [&](const TensorList& in) {
                                return nn::ctc_loss(log_softmax(in[0], 2), targets, input_lengths, target_lengths,
                                                    nn::CTCLossOptions());
                              },
                              {logits});

  const Tensor x = log_probs.clone().requires_grad_(true);
  Tensor loss = nn::ctc_loss(x, targets, input_lengths, target_lengths);
  loss.backward();
  CHECK(max_abs_diff(x.grad().narrow(0, 3, 2).select(1, 1), zeros({2, 4}, kFloat64)) == 0.0);  // past 3 frames
  const Tensor y = log_probs.clone().requires_grad_(true);
  const Tensor again = nn::ctc_loss(y, targets, input_lengths, target_lengths);
  CHECK_THROWS_WITH_AS(
      again.backward(Tensor(), std::nullopt, /*create_graph=*/true),
      "ctc_loss: its gradient cannot be differentiated again (torch has no double backward for it either); call "
      "backward without create_graph",
      GraphError);
}

TEST_CASE("ctc_loss: a class of probability 0 gets gradient 0, not NaN") {
  // Class 3 has log-probability -inf at every frame (masked); no alignment uses it.
  Generator gen(65);
  const Tensor logits = randn({4, 1, 4}, gen, kFloat64);
  const Tensor masked = from_vector(std::vector<double>{0.0, 0.0, 0.0, -std::numeric_limits<double>::infinity()}, {4});
  const Tensor x = log_softmax(logits + masked, 2).detach().requires_grad_(true);
  const Tensor loss = nn::ctc_loss(x, from_vector(std::vector<std::int64_t>{1, 2}, {1, 2}), {4}, {2});
  loss.backward();
  CHECK(std::isfinite(loss.item()));
  const std::vector<double> grad = x.grad().to_vector<double>();
  for (std::size_t i = 0; i < grad.size(); ++i) {
    CAPTURE(i);
    CHECK(std::isfinite(grad[i]));
    if (i % 4 == 3) CHECK(grad[i] == 0.0);
  }
}

TEST_CASE("ctc_loss: a target that cannot fit is an infinite loss, or 0 with zero_infinity") {
  // Three equal labels need five frames (1, blank, 1, blank, 1); sequence 0 has four.
  Generator gen(63);
  const Tensor x = log_softmax(randn({5, 2, 3}, gen, kFloat64), 2).detach().requires_grad_(true);
  const Tensor targets = from_vector(std::vector<std::int64_t>{1, 1, 1, 2, 0, 0}, {2, 3});
  const std::vector<std::int64_t> input_lengths = {4, 5}, target_lengths = {3, 1};
  const Tensor losses =
      nn::ctc_loss(x, targets, input_lengths, target_lengths, nn::CTCLossOptions().reduction(nn::Reduction::None));
  CHECK(losses.to_vector<double>()[0] == std::numeric_limits<double>::infinity());
  CHECK(std::isfinite(losses.to_vector<double>()[1]));
  sum(losses).backward();
  CHECK(std::isnan(x.grad().to_vector<double>()[0]));  // as torch's: its gradient is NaN
  x.grad().zero_();
  const Tensor zeroed = nn::ctc_loss(x, targets, input_lengths, target_lengths,
                                     nn::CTCLossOptions().zero_infinity(true).reduction(nn::Reduction::None));
  CHECK(zeroed.to_vector<double>()[0] == 0.0);
  CHECK(zeroed.to_vector<double>()[1] == losses.to_vector<double>()[1]);
  sum(zeroed).backward();
  CHECK(max_abs_diff(x.grad().select(1, 0), zeros({5, 3}, kFloat64)) == 0.0);
  CHECK(max_abs_diff(x.grad().select(1, 1), zeros({5, 3}, kFloat64)) > 0.0);
}

TEST_CASE("ctc_loss: CTCLoss is the function with its options, and bad arguments are named") {
  Generator gen(64);
  const Tensor lp = log_softmax(randn({4, 2, 3}, gen, kFloat64), 2);
  const Tensor targets = from_vector(std::vector<std::int64_t>{1, 2, 2, 0}, {2, 2});
  const Tensor input_lengths = from_vector(std::vector<std::int64_t>{4, 3}, {2});
  const Tensor target_lengths = from_vector(std::vector<std::int64_t>{2, 1}, {2});
  const auto options = nn::CTCLossOptions().zero_infinity(true).reduction(nn::Reduction::Sum);
  CHECK(max_abs_diff(nn::CTCLoss(options)(lp, targets, input_lengths, target_lengths),
                     nn::ctc_loss(lp, targets, input_lengths, target_lengths, options)) == 0.0);

  const std::vector<std::int64_t> in4 = {4, 3}, tl = {2, 1};
  CHECK_THROWS_WITH_AS(nn::ctc_loss(lp, targets, in4, tl, nn::CTCLossOptions().blank(3)),
                       "ctc_loss: blank 3 is out of range for 3 classes", ValueError);
  CHECK_THROWS_WITH_AS(nn::ctc_loss(lp, targets, in4, tl, nn::CTCLossOptions().blank(2)),
                       "ctc_loss: sequence 0 has the blank (2) among its labels", ValueError);
  CHECK_THROWS_WITH_AS(nn::ctc_loss(lp, from_vector(std::vector<std::int64_t>{1, 3, 2, 0}, {2, 2}), in4, tl),
                       "ctc_loss: label 3 of sequence 0 is out of range for 3 classes", IndexError);
  CHECK_THROWS_WITH_AS(nn::ctc_loss(lp, targets, {5, 3}, tl),
                       "ctc_loss: input_lengths[0] = 5 is outside [0, 4], the frames of log_probs", ValueError);
  CHECK_THROWS_WITH_AS(nn::ctc_loss(lp, targets, in4, {2, 3}),
                       "ctc_loss: target_lengths[1] = 3 is outside [0, 2], the padded targets' width", ValueError);
  CHECK_THROWS_WITH_AS(nn::ctc_loss(lp, targets, {4}, tl),
                       "ctc_loss: log_probs of shape (4,2,3) hold 2 sequences, but there are 1 input lengths and 2 "
                       "target lengths",
                       ShapeError);
  CHECK_THROWS_WITH_AS(nn::ctc_loss(lp, from_vector(std::vector<std::int64_t>{1, 2, 2, 1}, {4}), in4, tl),
                       "ctc_loss: the target lengths sum to 3 but the 1-D targets hold 4 labels", ShapeError);
  CHECK_THROWS_WITH_AS(nn::ctc_loss(lp.select(1, 0), targets, {4}, {2}),
                       "ctc_loss: targets must be (S) for log_probs of shape (4,3), got (2,2)", ShapeError);
  CHECK_THROWS_WITH_AS(nn::ctc_loss(lp.to(kInt64), targets, in4, tl),
                       "ctc_loss: log_probs must be a floating-point tensor, got int64", TypeError);
  CHECK_THROWS_WITH_AS(nn::ctc_loss(lp.unsqueeze(0), targets, in4, tl),
                       "ctc_loss: log_probs must be (T, N, C) or (T, C), got (1,4,2,3)", ShapeError);
  CHECK_THROWS_WITH_AS(nn::ctc_loss(lp, targets.to(kFloat64), in4, tl),
                       "ctc_loss: targets must be an int64 tensor of labels, got float64", TypeError);
  CHECK_THROWS_WITH_AS(nn::ctc_loss(lp, targets, input_lengths.to(kFloat32), target_lengths),
                       "ctc_loss: input_lengths must be an int64 tensor of one axis (or a scalar), got float32 (2)",
                       TypeError);
  CHECK_THROWS_WITH_AS(nn::ctc_loss(lp, targets, in4, tl, nn::CTCLossOptions().reduction(nn::Reduction::BatchMean)),
                       "ctc_loss: reduction BatchMean is only defined for kl_div; use None, Mean or Sum", ValueError);
}
