// The loss modules (nn/loss_modules.h): each equals its function with the same options, weights are
// buffers that state_dict lists and to(dtype) converts, and hooks see the call's tensors.

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "tapegrad/nn/nn.h"
#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::max_abs_diff;
using tapegrad::testing::names;

TEST_CASE("loss modules: each equals its function with the same options") {
  Generator gen(41);
  const Tensor logits = randn({6, 4}, gen, kFloat64),
               targets = from_vector(std::vector<std::int64_t>{0, 3, 1, 1, 2, 0}, {6});
  const Tensor weight = from_vector(std::vector<double>{1.0, 2.0, 0.5, 1.5}, {4});

  nn::CrossEntropyOptions ce;
  ce.label_smoothing = 0.1;
  ce.weight = weight;
  ce.ignore_index = 2;
  nn::CrossEntropyLoss criterion(ce);
  CHECK(max_abs_diff(criterion(logits, targets), nn::cross_entropy(logits, targets, ce)) == 0.0);
  CHECK(names(criterion->state_dict()) == std::vector<std::string>{"weight"});
  CHECK(nn::CrossEntropyLoss()->state_dict().empty());  // no weight, no buffer
  nn::CrossEntropyOptions plain;
  CHECK(max_abs_diff(nn::CrossEntropyLoss()(logits, targets), nn::cross_entropy(logits, targets, plain)) == 0.0);

  nn::NllLossOptions nll;
  nll.reduction = nn::Reduction::Sum;
  nll.weight = weight;
  const Tensor log_probs = log_softmax(logits, 1);
  CHECK(max_abs_diff(nn::NLLLoss(nll)(log_probs, targets), nn::nll_loss(log_probs, targets, nll)) == 0.0);

  const Tensor x = randn({3, 5}, gen, kFloat64), y = randn({3, 5}, gen, kFloat64);
  CHECK(max_abs_diff(nn::MSELoss()(x, y), nn::mse_loss(x, y)) == 0.0);
  CHECK(max_abs_diff(nn::L1Loss(nn::Reduction::None)(x, y), nn::l1_loss(x, y, nn::Reduction::None)) == 0.0);
  CHECK(max_abs_diff(nn::SmoothL1Loss(nn::SmoothL1LossOptions().beta(0.5).reduction(nn::Reduction::Sum))(x, y),
                     nn::smooth_l1_loss(x, y, nn::Reduction::Sum, 0.5)) == 0.0);
  CHECK(max_abs_diff(nn::HuberLoss(nn::HuberLossOptions().delta(0.3))(x, y),
                     nn::huber_loss(x, y, nn::Reduction::Mean, 0.3)) == 0.0);
  const Tensor labels = sign(randn({3, 5}, gen, kFloat64));
  CHECK(max_abs_diff(nn::SoftMarginLoss()(x, labels), nn::soft_margin_loss(x, labels)) == 0.0);

  const Tensor q = log_softmax(x, 1), p = softmax(y, 1);
  CHECK(max_abs_diff(nn::KLDivLoss(nn::KLDivLossOptions().reduction(nn::Reduction::BatchMean))(q, p),
                     nn::kl_div(q, p, nn::Reduction::BatchMean)) == 0.0);
  CHECK(max_abs_diff(nn::KLDivLoss(nn::KLDivLossOptions().log_target(true))(q, log(p)),
                     nn::kl_div(q, log(p), nn::Reduction::Mean, true)) == 0.0);

  const Tensor probs = sigmoid(x), truth = rand({3, 5}, gen, kFloat64);
  const Tensor element_weight = rand({5}, gen, kFloat64), pos_weight = full({5}, 3.0, kFloat64);
  nn::BCELoss bce(nn::BCELossOptions().weight(element_weight));
  CHECK(max_abs_diff(bce(probs, truth), nn::binary_cross_entropy(probs, truth, nn::Reduction::Mean, element_weight)) ==
        0.0);
  nn::BCEWithLogitsLoss bce_logits(nn::BCEWithLogitsLossOptions().pos_weight(pos_weight).weight(element_weight));
  CHECK(max_abs_diff(bce_logits(x, truth), nn::binary_cross_entropy_with_logits(x, truth, nn::Reduction::Mean,
                                                                                pos_weight, element_weight)) == 0.0);
  CHECK(names(bce_logits->state_dict()) == std::vector<std::string>{"weight", "pos_weight"});

  const Tensor a = randn({4, 3}, gen, kFloat64), b = randn({4, 3}, gen, kFloat64), c = randn({4, 3}, gen, kFloat64);
  const Tensor rank = from_vector(std::vector<double>{1, -1, 1, -1}, {4});
  CHECK(max_abs_diff(
            nn::MarginRankingLoss(nn::MarginRankingLossOptions().margin(0.2))(a.select(1, 0), b.select(1, 0), rank),
            nn::margin_ranking_loss(a.select(1, 0), b.select(1, 0), rank, 0.2)) == 0.0);
  CHECK(max_abs_diff(nn::CosineEmbeddingLoss(nn::CosineEmbeddingLossOptions().margin(0.1))(a, b, rank),
                     nn::cosine_embedding_loss(a, b, rank, 0.1)) == 0.0);
  const auto triplet = nn::TripletMarginLossOptions().margin(0.5).swap(true);
  CHECK(max_abs_diff(nn::TripletMarginLoss(triplet)(a, b, c), nn::triplet_margin_loss(a, b, c, triplet)) == 0.0);

  CHECK(max_abs_diff(nn::HingeEmbeddingLoss(nn::HingeEmbeddingLossOptions().margin(0.5))(x, labels),
                     nn::hinge_embedding_loss(x, labels, 0.5)) == 0.0);
  const auto multi = nn::MultiMarginLossOptions().p(2).margin(0.5).weight(weight).reduction(nn::Reduction::None);
  nn::MultiMarginLoss multi_margin(multi);
  CHECK(max_abs_diff(multi_margin(logits, targets), nn::multi_margin_loss(logits, targets, multi)) == 0.0);
  CHECK(names(multi_margin->state_dict()) == std::vector<std::string>{"weight"});
  const Tensor label_rows = from_vector(std::vector<std::int64_t>{2, 0, -1, 0, 3, -1, 1, 1, 0, 1, 2, 3}, {3, 4});
  const Tensor scores = randn({3, 4}, gen, kFloat64);
  CHECK(max_abs_diff(nn::MultiLabelMarginLoss(nn::Reduction::Sum)(scores, label_rows),
                     nn::multilabel_margin_loss(scores, label_rows, nn::Reduction::Sum)) == 0.0);
  nn::MultiLabelSoftMarginLoss soft_labels(nn::MultiLabelSoftMarginLossOptions().weight(element_weight));
  CHECK(max_abs_diff(soft_labels(x, truth),
                     nn::multilabel_soft_margin_loss(x, truth, nn::Reduction::Mean, element_weight)) == 0.0);
  CHECK(names(soft_labels->state_dict()) == std::vector<std::string>{"weight"});
  const auto poisson = nn::PoissonNLLLossOptions().log_input(false).full(true).eps(1e-4);
  CHECK(max_abs_diff(nn::PoissonNLLLoss(poisson)(probs, truth * 3.0),
                     nn::poisson_nll_loss(probs, truth * 3.0, poisson)) == 0.0);
  const auto gaussian = nn::GaussianNLLLossOptions().full(true).reduction(nn::Reduction::Sum);
  CHECK(max_abs_diff(nn::GaussianNLLLoss(gaussian)(x, y, probs), nn::gaussian_nll_loss(x, y, probs, gaussian)) == 0.0);
}

TEST_CASE("loss modules: weights follow to(dtype), gradients flow, and hooks see the call") {
  nn::CrossEntropyOptions options;
  options.weight = from_vector(std::vector<float>{1.0f, 2.0f, 3.0f}, {3});
  nn::CrossEntropyLoss criterion(options);
  criterion->to(kFloat64);
  CHECK(criterion->options().weight.dtype() == kFloat64);  // the buffer, converted in place
  Generator gen(42);
  const Tensor logits = randn({4, 3}, gen, kFloat64).requires_grad_(true);
  const Tensor targets = from_vector(std::vector<std::int64_t>{0, 1, 2, 2}, {4});
  int calls = 0;
  criterion->register_forward_hook([&](nn::Module&, const TensorList& args, const Tensor& loss) {
    ++calls;
    CHECK(args.size() == 2);
    CHECK(loss.dim() == 0);
  });
  Tensor loss = criterion(logits, targets);
  CHECK(calls == 1);
  loss.backward();
  REQUIRE(logits.grad().defined());
  // d loss / d logits: softmax - one_hot, weighted by w[target] over the sum of the weights used.
  const Tensor expected = (softmax(logits.detach(), 1) - one_hot(targets, 3).to(kFloat64)) *
                          from_vector(std::vector<double>{1, 2, 3, 3}, {4, 1}) / 9.0;
  CHECK(max_abs_diff(logits.grad(), expected) < 1e-12);
}
