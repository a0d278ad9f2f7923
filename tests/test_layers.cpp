// nn layers: Embedding, LayerNorm, RMSNorm, Dropout, ReLU/GELU/SiLU, Sequential, FeedForward.
// Forward values worked by hand (activations cross-checked with PyTorch 1.13), float64
// gradchecks of inputs and parameters, parameter names, train/eval and error messages.

#include <doctest/doctest.h>

#include <algorithm>

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tapegrad/nn/nn.h"
#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::check_gradients;
using tapegrad::testing::check_values;
using tapegrad::testing::names;

namespace {

void check_same(const Tensor& a, const Tensor& b, double tol = 1e-12) {
  REQUIRE(a.shape() == b.shape());
  check_values(a, b.to_vector<double>(), tol);
}

}  // namespace

// ---------------------------------------------------------------- Embedding

TEST_CASE("layers: Embedding looks up rows and zeroes the padding row") {
  manual_seed(0);
  nn::Embedding emb{nn::EmbeddingOptions(4, 3).padding_idx(1)};
  CHECK(names(emb->named_parameters()) == std::vector<std::string>{"weight"});
  CHECK(emb->weight().shape() == Shape{4, 3});
  check_values(emb->weight().select(0, 1), {0, 0, 0}, 1e-12);
  // The other rows are N(0, 1) draws, so not zero.
  CHECK(emb->weight().select(0, 0).abs().sum().item() > 0.0);
  {
    NoGradGuard no_grad;
    emb->weight().copy_(from_vector(std::vector<double>{0, 1, 2, 0, 0, 0, 6, 7, 8, 9, 10, 11}, {4, 3}));
  }
  Tensor ids = from_vector(std::vector<std::int64_t>{3, 0, 1, 2}, {2, 2});
  Tensor y = emb(ids);
  CHECK(y.shape() == Shape{2, 2, 3});
  check_values(y, {9, 10, 11, 0, 1, 2, 0, 0, 0, 6, 7, 8});
  // Gradient: row counts scatter-added, nothing for the padding row.
  emb(from_vector(std::vector<std::int64_t>{2, 1, 2}, {3})).sum().backward();
  check_values(emb->weight().grad(), {0, 0, 0, 0, 0, 0, 2, 2, 2, 0, 0, 0});
}

TEST_CASE("layers: Embedding negative padding_idx counts from the end, errors") {
  manual_seed(0);
  nn::Embedding emb{nn::EmbeddingOptions(5, 2).padding_idx(-1)};
  REQUIRE(emb->padding_idx().has_value());
  CHECK(*emb->padding_idx() == 4);
  check_values(emb->weight().select(0, 4), {0, 0}, 1e-12);
  nn::Embedding plain(5, 2);
  CHECK_FALSE(plain->padding_idx().has_value());
  CHECK_THROWS_WITH_AS(nn::Embedding(nn::EmbeddingOptions(5, 2).padding_idx(5)),
                       "Embedding: padding_idx 5 must be within [-5, 5)", ValueError);
  CHECK_THROWS_WITH_AS(nn::Embedding(0, 2), "Embedding: num_embeddings and dim must be positive, got 0 and 2",
                       ValueError);
  CHECK_THROWS_AS(plain(from_vector(std::vector<std::int64_t>{0, 5}, {2})), IndexError);
}

TEST_CASE("layers: Embedding gradcheck of the weight") {
  manual_seed(1);
  nn::Embedding emb{nn::EmbeddingOptions(5, 3).padding_idx(0)};
  emb->to(kFloat64);
  Tensor ids = from_vector(std::vector<std::int64_t>{1, 0, 4, 1, 2, 0}, {2, 3});
  check_gradients([&](const TensorList& in) { return emb(in[0]) * emb(in[0]); }, {ids}, {}, emb->parameters());
}

// ---------------------------------------------------------------- LayerNorm

TEST_CASE("layers: LayerNorm forward, parameters and gradcheck") {
  nn::LayerNorm norm(4);
  CHECK(names(norm->named_parameters()) == std::vector<std::string>{"weight", "bias"});
  check_values(norm->weight(), {1, 1, 1, 1}, 1e-12);
  check_values(norm->bias(), {0, 0, 0, 0}, 1e-12);
  // mean 2.5, biased var 1.25: (x - 2.5) / sqrt(1.25 + 1e-5).
  check_values(norm(tensor({{1, 2, 3, 4}})), {-1.3416354200, -0.4472118067, 0.4472118067, 1.3416354200});
  // var 1.25 + eps 0.75 = 2: (x - 2.5) / sqrt(2).
  nn::LayerNorm wide_eps{nn::LayerNormOptions(Shape{4}).eps(0.75).elementwise_affine(false)};
  CHECK(wide_eps->parameters().empty());
  check_values(wide_eps(tensor({1, 2, 3, 4})),
               {-1.5 / std::sqrt(2.0), -0.5 / std::sqrt(2.0), 0.5 / std::sqrt(2.0), 1.5 / std::sqrt(2.0)});

  Generator gen(2);
  nn::LayerNorm norm2d(Shape{2, 3});
  norm2d->to(kFloat64);
  {
    NoGradGuard no_grad;
    norm2d->weight().copy_(randn({2, 3}, gen, kFloat64));
    norm2d->bias().copy_(randn({2, 3}, gen, kFloat64));
  }
  Tensor x = randn({3, 2, 3}, gen, kFloat64);
  check_gradients([&](const TensorList& in) { return norm2d(in[0]); }, {x}, {}, norm2d->parameters());
  // A non-contiguous input: (3, 2) transposed to (2, 3).
  nn::LayerNorm norm3(3);
  norm3->to(kFloat64);
  check_gradients([&](const TensorList& in) { return norm3(in[0].transpose(0, 1)); }, {randn({3, 2}, gen, kFloat64)},
                  {}, norm3->parameters());
  CHECK_THROWS_AS(norm2d(randn({3, 3, 2}, gen, kFloat64)), ShapeError);
  CHECK_THROWS_WITH_AS(nn::LayerNorm(Shape{}),
                       "LayerNorm: normalized_shape must be non-empty with positive sizes, got ()", ValueError);
}

// ---------------------------------------------------------------- RMSNorm

TEST_CASE("layers: RMSNorm forward values") {
  // mean(x^2) = 30 / 4 = 7.5; eps 0.5 makes it 8: y = x / sqrt(8).
  nn::RMSNorm half{nn::RMSNormOptions(4).eps(0.5)};
  check_values(half(tensor({1, 2, 3, 4})), {0.3535533906, 0.7071067812, 1.0606601718, 1.4142135624});
  // Default eps 1e-6, weight (1, 0.5, 2, -1): x / sqrt(7.500001) * w (PyTorch 1.13 has no RMSNorm;
  // x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w written with its ops gives the same).
  nn::RMSNorm norm(4);
  CHECK(norm->eps() == 1e-6);
  CHECK(names(norm->named_parameters()) == std::vector<std::string>{"weight"});
  {
    NoGradGuard no_grad;
    norm->weight().copy_(tensor({1, 0.5, 2, -1}));
  }
  check_values(norm(tensor({{1, 2, 3, 4}, {2, 4, 6, 8}})),
               {0.3651483473, 0.3651483473, 2.1908900840, -1.4605933893, 0.3651483473, 0.3651483473, 2.1908900840,
                -1.4605933893},
               1e-6);
  nn::RMSNorm bare{nn::RMSNormOptions(3).eps(1e-6).elementwise_affine(false)};
  CHECK(bare->parameters().empty());
  CHECK_THROWS_WITH_AS(norm(ones({2, 3})), "RMSNorm: expected input with last dimension 4, got shape (2,3)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(nn::RMSNorm(0), "RMSNorm: dim must be positive, got 0", ValueError);
}

TEST_CASE("layers: RMSNorm gradcheck of input and weight, non-contiguous input") {
  Generator gen(3);
  nn::RMSNorm norm(4);
  norm->to(kFloat64);
  {
    NoGradGuard no_grad;
    norm->weight().copy_(randn({4}, gen, kFloat64));
  }
  check_gradients([&](const TensorList& in) { return norm(in[0]); }, {randn({2, 3, 4}, gen, kFloat64)}, {},
                  norm->parameters());
  check_gradients([&](const TensorList& in) { return norm(in[0].transpose(0, 1)); }, {randn({4, 3}, gen, kFloat64)}, {},
                  norm->parameters());
}

// ---------------------------------------------------------------- Dropout

TEST_CASE("layers: Dropout drops and scales in training, is the identity in eval") {
  Generator seed(7);
  nn::Dropout drop{nn::DropoutOptions(0.5).generator(&seed)};  // its mask generator is seeded from `seed`
  CHECK(drop->p() == 0.5);
  Tensor x = ones({200});
  const std::vector<double> y = drop(x).to_vector<double>();
  int zeros_seen = 0, kept = 0;
  for (double v : y) {
    if (v == 0.0) ++zeros_seen;
    else if (v == 2.0) ++kept;  // survivors scaled by 1 / (1 - 0.5)
  }
  CHECK(zeros_seen + kept == 200);
  CHECK(zeros_seen > 60);  // Binomial(200, 0.5): far outside these bounds is a broken mask
  CHECK(kept > 60);
  // The same seed gives the same mask.
  Generator same_seed(7);
  nn::Dropout same{nn::DropoutOptions(0.5).generator(&same_seed)};
  CHECK(same(x).to_vector<double>() == y);

  drop->eval();
  check_values(drop(tensor({1.5, -2, 3})), {1.5, -2, 3}, 1e-12);
  drop->train();
  nn::Dropout none(0.0);
  check_values(none(tensor({1.5, -2, 3})), {1.5, -2, 3}, 1e-12);
  nn::Dropout all(1.0);
  check_values(all(tensor({1.5, -2, 3})), {0, 0, 0}, 1e-12);

  CHECK_THROWS_WITH_AS(nn::Dropout(1.5), "Dropout: dropout probability p must be in [0, 1], got 1.5", ValueError);
  CHECK_THROWS_WITH_AS(nn::Dropout(-0.1), "Dropout: dropout probability p must be in [0, 1], got -0.1", ValueError);
}

TEST_CASE("layers: Dropout1d and Dropout2d drop whole channels") {
  Generator seed(11);
  nn::Dropout2d drop{nn::DropoutOptions(0.5).generator(&seed)};
  const Tensor x = arange(1.0, 1.0 + 8 * 16 * 3 * 2, 1.0, kFloat64).reshape({8, 16, 3, 2}).requires_grad_();
  const Tensor y = drop(x);
  // Each (sample, channel) is all zeros or all twice the input; both happen.
  const Tensor ratio = (y / x).detach().reshape({8 * 16, 6});
  int dropped = 0, kept = 0;
  for (std::int64_t c = 0; c < 8 * 16; ++c) {
    const std::vector<double> r = ratio.select(0, c).to_vector<double>();
    const bool all_zero = std::all_of(r.begin(), r.end(), [](double v) { return v == 0.0; });
    const bool all_two = std::all_of(r.begin(), r.end(), [](double v) { return v == 2.0; });
    CHECK((all_zero || all_two));
    dropped += all_zero;
    kept += all_two;
  }
  CHECK(dropped > 30);  // Binomial(128, 0.5)
  CHECK(kept > 30);
  // The gradient is the mask: 0 or 2 per channel, as y / x.
  sum(y).backward();
  tapegrad::testing::check_close(x.grad().reshape({8 * 16, 6}), ratio, 0.0);
  drop->eval();
  tapegrad::testing::check_close(drop(x), x, 0.0);
  // Dropout1d over (N, C, L) and unbatched (C, L): one draw per row.
  Generator seed1(3);
  nn::Dropout1d drop1{nn::DropoutOptions(0.5).generator(&seed1)};
  const Tensor rows = drop1(ones({40, 5}, kFloat64));
  for (std::int64_t c = 0; c < 40; ++c) {
    const std::vector<double> r = rows.select(0, c).to_vector<double>();
    CHECK(std::count(r.begin(), r.end(), r.front()) == 5);
  }
  CHECK(nn::Dropout1d(nn::DropoutOptions(0.3))(zeros({2, 3, 4})).shape() == Shape{2, 3, 4});
  namespace F = nn::functional;
  Generator gen(1);
  CHECK_THROWS_WITH_AS(F::dropout2d(zeros({3, 4, 4}), 0.5, true, gen),
                       "dropout2d: expected an input of shape (N, C, H, W), got (3,4,4) (a 3-D input: unsqueeze it to "
                       "(1, C, H, W), or use dropout1d for (N, C, L))",
                       ShapeError);
  CHECK_THROWS_WITH_AS(F::dropout1d(zeros({4}), 0.5, true, gen),
                       "dropout1d: expected an input of shape (N, C, L) or (C, L), got (4)", ShapeError);
  CHECK_THROWS_WITH_AS(nn::Dropout2d(nn::DropoutOptions(2.0)),
                       "Dropout2d: dropout probability p must be in [0, 1], got 2", ValueError);
  // Dropout3d over (N, C, D, H, W) and unbatched (C, D, H, W): one draw per volume.
  Generator seed3(4);
  nn::Dropout3d drop3{nn::DropoutOptions(0.5).generator(&seed3)};
  const Tensor volumes = drop3(ones({30, 2, 3, 2}, kFloat64)).reshape({30, 12});
  int zero_volumes = 0;
  for (std::int64_t c = 0; c < 30; ++c) {
    const std::vector<double> r = volumes.select(0, c).to_vector<double>();
    CHECK(std::count(r.begin(), r.end(), r.front()) == 12);
    zero_volumes += r.front() == 0.0;
  }
  CHECK(zero_volumes > 3);  // Binomial(30, 0.5)
  CHECK(zero_volumes < 27);
  CHECK(drop3(zeros({2, 3, 2, 2, 2})).shape() == Shape{2, 3, 2, 2, 2});
  CHECK_THROWS_WITH_AS(F::dropout3d(zeros({3, 4, 4}), 0.5, true, gen),
                       "dropout3d: expected an input of shape (N, C, D, H, W) or (C, D, H, W), got (3,4,4)",
                       ShapeError);
}

TEST_CASE("layers: Dropout in eval mode passes gradients unchanged") {
  Generator gen(4);
  nn::Dropout drop(0.3);
  drop->eval();
  check_gradients([&](const TensorList& in) { return drop(in[0]) * in[0]; }, {randn({3, 2}, gen, kFloat64)});
}

// ---------------------------------------------------------------- activations

TEST_CASE("layers: ReLU, GELU and SiLU modules") {
  Tensor x = tensor({-1, 0.5, 2}, kFloat64);
  check_values(nn::ReLU()(x), {0, 0.5, 2}, 1e-12);
  // Values from PyTorch 1.13 (F.gelu, F.gelu(approximate='tanh'), F.silu).
  check_values(nn::GELU()(x), {-0.1586552539, 0.3457312306, 1.9544997361}, 1e-9);
  check_values(nn::GELU(nn::GELUOptions().approximate(GeluApproximation::Tanh))(x),
               {-0.1588080094, 0.3457140098, 1.9545976941}, 1e-9);
  check_values(nn::SiLU()(x), {-0.2689414214, 0.3112296656, 1.7615941560}, 1e-9);
  CHECK(nn::GELU()->parameters().empty());
  Generator gen(5);
  check_gradients(
      [](const TensorList& in) { return nn::GELU(nn::GELUOptions().approximate(GeluApproximation::Tanh))(in[0]); },
      {randn({2, 3}, gen, kFloat64)});
  check_gradients([](const TensorList& in) { return nn::SiLU()(in[0]); }, {randn({2, 3}, gen, kFloat64)});
  check_gradients([](const TensorList& in) { return nn::ReLU()(in[0]); }, {tensor({-1.2, 0.7, 2.1}, kFloat64)});
}

// ---------------------------------------------------------------- Sequential

TEST_CASE("layers: Sequential names children 0, 1, ... and chains them") {
  manual_seed(6);
  Generator& gen = default_generator();  // the modules and the input draw from it
  nn::Linear first(3, 4);
  nn::ReLU act;
  nn::Linear last{nn::LinearOptions(4, 2).bias(false)};
  nn::Sequential seq(first, act);
  seq->push_back(last);
  CHECK(seq->size() == 3);
  CHECK(names(seq->named_parameters()) == std::vector<std::string>{"0.weight", "0.bias", "2.weight"});
  CHECK(seq->at(2).get() == static_cast<nn::UnaryModule*>(last.get()));
  Tensor x = randn({5, 3}, gen);
  check_same(seq(x), last(first(x).relu()), 1e-6);
  // eval reaches the children.
  seq->eval();
  CHECK_FALSE(first->is_training());

  nn::Sequential empty;
  check_same(empty(x), x, 1e-12);
  CHECK_THROWS_WITH_AS(seq->at(3), "Sequential: index 3 is out of range for 3 modules", IndexError);
  CHECK_THROWS_WITH_AS(seq->push_back(nullptr), "Sequential: cannot add a null module at index 3", ValueError);
  CHECK_THROWS_WITH_AS(seq->push_back(nn::Linear(nullptr)), "Sequential: cannot add a null module at index 3",
                       ValueError);
  // Handles and shared_ptrs mix; the variadic constructor is what push_back does one by one.
  nn::Sequential mixed(nn::Linear(3, 3), std::make_shared<nn::GELUImpl>(), seq);
  CHECK(mixed->size() == 3);
  CHECK(mixed->at(2).get() == static_cast<nn::UnaryModule*>(seq.get()));
  nn::Sequential one(nn::Linear(3, 3));  // a single module is an argument, not a copy of a handle
  CHECK(one->size() == 1);
  nn::Sequential shared = seq;  // copying a Sequential handle shares it
  CHECK(shared.get() == seq.get());
}

TEST_CASE("layers: Sequential gradcheck with parameters") {
  manual_seed(7);
  Generator& gen = default_generator();
  nn::Sequential seq(nn::Linear(3, 4), nn::SiLU(), nn::LayerNorm(4), nn::Linear(4, 2));
  seq->to(kFloat64);
  check_gradients([&](const TensorList& in) { return seq(in[0]); }, {randn({2, 3}, gen, kFloat64)}, {},
                  seq->parameters());
}

// ---------------------------------------------------------------- FeedForward

TEST_CASE("layers: FeedForward is fc2(act(fc1(x))) with named children") {
  manual_seed(8);
  Generator& gen = default_generator();
  nn::FeedForward ff{nn::FeedForwardOptions(4, 6).activation(nn::Activation::GELU)};
  CHECK(names(ff->named_parameters()) == std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"});
  CHECK(ff->num_parameters() == 4 * 6 + 6 + 6 * 4 + 4);
  const auto params = ff->named_parameters();
  CHECK(params[0].second.shape() == Shape{6, 4});
  CHECK(params[2].second.shape() == Shape{4, 6});
  Tensor x = randn({2, 3, 4}, gen);
  // The same computation from the parameters themselves.
  Tensor h = gelu(matmul(x, params[0].second.mT()) + params[1].second);
  check_same(ff(x), matmul(h, params[2].second.mT()) + params[3].second, 1e-6);

  CHECK_THROWS_WITH_AS(nn::FeedForward(nn::FeedForwardOptions(4, 0)),
                       "FeedForward: d_model and hidden must be positive, got 4 and 0", ValueError);
  CHECK_THROWS_WITH_AS(nn::FeedForward(nn::FeedForwardOptions(4, 8).dropout(2.0)),
                       "FeedForward: dropout probability p must be in [0, 1], got 2", ValueError);
  CHECK_THROWS_AS(ff(ones({2, 5})), ShapeError);
}

TEST_CASE("layers: FeedForward dropout follows train and eval") {
  manual_seed(9);
  Generator& gen = default_generator();
  nn::FeedForward ff{nn::FeedForwardOptions(4, 8).dropout(0.5)};
  Tensor x = randn({6, 4}, gen);
  ff->eval();
  Tensor a = ff(x);
  check_same(ff(x), a, 1e-12);  // eval: deterministic
  ff->train();
  Tensor b = ff(x);
  double difference = (b - a).abs().sum().item();
  CHECK(difference > 1e-3);  // training: hidden units dropped
}

TEST_CASE("layers: FeedForward gradcheck for each activation") {
  for (nn::Activation act : {nn::Activation::ReLU, nn::Activation::GELU, nn::Activation::SiLU}) {
    CAPTURE(static_cast<int>(act));
    manual_seed(10);
    Generator& gen = default_generator();
    nn::FeedForward ff{nn::FeedForwardOptions(3, 5).activation(act).dropout(0.25)};
    ff->eval();  // a fixed function, as gradcheck needs
    ff->to(kFloat64);
    check_gradients([&](const TensorList& in) { return ff(in[0]); }, {randn({2, 3}, gen, kFloat64)}, {},
                    ff->parameters());
  }
}

TEST_CASE("layers: Embedding starts normal, uniform or zero as asked, and from a pretrained table") {
  Generator gen(5);
  nn::Embedding normal{nn::EmbeddingOptions(400, 50).init_scale(0.1).generator(&gen)};
  const Tensor w = normal->weight();
  CHECK(std::abs(w.mean().item<double>()) < 5e-3);
  CHECK(std::sqrt((w * w).mean().item<double>()) == doctest::Approx(0.1).epsilon(0.02));
  nn::Embedding uniform{nn::EmbeddingOptions(400, 50).init(nn::EmbeddingInit::Uniform).generator(&gen)};
  const double bound = 0.5 / 50;  // word2vec.c's: U(-0.5 / dim, 0.5 / dim)
  CHECK(uniform->weight().max().item<double>() <= bound);
  CHECK(uniform->weight().min().item<double>() >= -bound);
  CHECK(uniform->weight().max().item<double>() > 0.99 * bound);
  nn::Embedding zero{nn::EmbeddingOptions(10, 4).init(nn::EmbeddingInit::Zeros)};
  CHECK(zero->weight().abs().max().item<double>() == 0.0);
  nn::Embedding padded{nn::EmbeddingOptions(10, 4).init(nn::EmbeddingInit::Uniform).init_scale(3.0).padding_idx(2)};
  CHECK(padded->weight().select(0, 2).abs().max().item<double>() == 0.0);
  CHECK(padded->weight().abs().max().item<double>() <= 3.0);
  CHECK_THROWS_WITH_AS(nn::Embedding(nn::EmbeddingOptions(10, 4).init_scale(-1.0)),
                       "Embedding: init_scale must be finite and non-negative, got -1", ValueError);

  // from_pretrained copies the table; frozen by default, trainable on request.
  const Tensor table = randn({5, 3}, gen, kFloat64);
  nn::Embedding frozen = nn::embedding_from_pretrained(table);
  CHECK(frozen->weight().dtype() == kFloat64);
  CHECK(!frozen->weight().requires_grad());
  const Tensor idx = from_vector(std::vector<std::int64_t>{4, 0, 4}, {3});
  CHECK((frozen(idx) - index_select(table, 0, idx)).abs().max().item<double>() == 0.0);
  table.fill_(0.0);  // a copy: the module keeps its values
  CHECK(frozen->weight().abs().max().item<double>() > 0.0);
  const Tensor pretrained = randn({5, 3}, gen);
  nn::Embedding trainable = nn::embedding_from_pretrained(pretrained, /*freeze=*/false, 1);
  CHECK(trainable->weight().requires_grad());
  // The padding row keeps its pretrained values (as in torch) and gets no gradient.
  CHECK((trainable->weight().select(0, 1) - pretrained.select(0, 1)).abs().max().item<double>() == 0.0);
  trainable(from_vector(std::vector<std::int64_t>{4, 1, 4}, {3})).sum().backward();
  CHECK(trainable->weight().grad().select(0, 4).sum().item<double>() == doctest::Approx(6.0));
  CHECK(trainable->weight().grad().select(0, 1).abs().max().item<double>() == 0.0);
  CHECK_THROWS_WITH_AS(nn::embedding_from_pretrained(zeros({5}, kFloat32)),
                       "embedding_from_pretrained: expected float32 or float64 weights (V, D), got float32 (5)",
                       ShapeError);
}

TEST_CASE("layers: the hard and gated activations at their kinks, as torch 1.13 gives them") {
  namespace F = nn::functional;
  // torch: each activation of [-3, -1, 0, 1, 3, 6] (float64) and the gradient of its sum.
  const std::vector<double> points = {-3, -1, 0, 1, 3, 6};
  struct Case {
    const char* name;
    std::function<Tensor(const Tensor&)> f;
    std::vector<double> value, gradient;
  };
  const double third = 1.0 / 3.0, sixth = 1.0 / 6.0;
  const std::vector<Case> cases = {
      {"hardtanh", [](const Tensor& x) { return F::hardtanh(x); }, {-1, -1, 0, 1, 1, 1}, {0, 0, 1, 0, 0, 0}},
      {"relu6", F::relu6, {0, 0, 0, 1, 3, 6}, {0, 0, 0, 1, 1, 0}},
      {"hardsigmoid", F::hardsigmoid, {0, third, 0.5, 2 * third, 1, 1}, {0, sixth, sixth, sixth, 0, 0}},
      {"hardswish", F::hardswish, {0, -third, 0, 2 * third, 3, 6}, {-0.5, sixth, 0.5, 5 * sixth, 1.5, 1}},
      {"softsign", F::softsign, {-0.75, -0.5, 0, 0.5, 0.75, 6.0 / 7.0}, {0.0625, 0.25, 1, 0.25, 0.0625, 1.0 / 49.0}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    const Tensor x = from_vector(points, {6}).requires_grad_();
    const Tensor y = c.f(x);
    check_values(y, c.value, 1e-15);
    y.sum().backward();
    check_values(x.grad(), c.gradient, 1e-15);
  }
  // prelu at 0 takes the slope (torch: x > 0 picks x), and the slope's gradient is the sum of x <= 0.
  const Tensor x = from_vector(points, {1, 6}).requires_grad_();
  nn::PReLU prelu;
  prelu->to(kFloat64);
  CHECK(prelu->weight().item() == 0.25);
  const Tensor y = prelu(x);
  check_values(y, {-0.75, -0.25, 0, 1, 3, 6}, 1e-15);
  y.sum().backward();
  check_values(x.grad(), {0.25, 0.25, 0.25, 1, 1, 1}, 1e-15);
  check_values(prelu->weight().grad(), {-4}, 1e-15);
  // Far out, logsigmoid stays finite: log(sigmoid(-800)) = -800, log(sigmoid(800)) = -e^-800 ~ 0.
  check_values(F::logsigmoid(from_vector(std::vector<double>{-800, 800}, {2})), {-800, 0}, 1e-15);
}

TEST_CASE("layers: the activation modules, their options, gradcheck and errors") {
  namespace F = nn::functional;
  nn::Hardtanh bounded{nn::HardtanhOptions().min_val(-2).max_val(0.5)};
  check_values(bounded(tensor({-3.0, 0.25, 1.0})), {-2, 0.25, 0.5});
  nn::GLU glu{nn::GLUOptions().dim(0)};
  const Tensor halves = tensor({{1.0, 2.0}, {0.0, 0.0}});
  check_values(glu(halves), {0.5, 1.0});  // a * sigmoid(0)
  nn::PReLU per_channel{nn::PReLUOptions().num_parameters(3).init(0.1)};
  CHECK(per_channel->weight().shape() == Shape{3});
  check_values(per_channel(tensor({{-1.0, -2.0, 3.0}})), {-0.1, -0.2, 3.0});
  for (const auto& module :
       std::vector<std::shared_ptr<nn::UnaryModule>>{nn::ReLU6().ptr(), nn::Hardsigmoid().ptr(), nn::Hardswish().ptr(),
                                                     nn::LogSigmoid().ptr(), nn::Softsign().ptr()})
    CHECK(module->forward(zeros({2, 3})).shape() == Shape{2, 3});
  Generator gen(6);
  const Tensor x = randn({3, 4}, gen, kFloat64) * 3.0;
  check_gradients([](const TensorList& in) { return F::hardswish(in[0]) + F::logsigmoid(in[0]) + F::softsign(in[0]); },
                  {x});
  // x * 3 spreads the entries over every piece of the piecewise ones (a draw within the finite
  // difference's step of a kink would fail; seed 6 has none).
  check_gradients(
      [](const TensorList& in) {
        return F::hardtanh(in[0], -1.5, 2.0) + F::relu6(in[0] * 3.0) + F::hardsigmoid(in[0] * 2.0);
      },
      {x});
  check_gradients([](const TensorList& in) { return F::glu(in[0], 1) * F::prelu(in[0].narrow(1, 0, 2), in[1]); },
                  {x, tensor({0.3}, kFloat64)});
  CHECK_THROWS_WITH_AS(F::hardtanh(x, 1.0, -1.0), "hardtanh: max_val -1 is smaller than min_val 1", ValueError);
  CHECK_THROWS_WITH_AS(nn::Hardtanh(nn::HardtanhOptions().min_val(2)), "Hardtanh: max_val 1 is smaller than min_val 2",
                       ValueError);
  CHECK_THROWS_WITH_AS(F::glu(zeros({2, 3})), "glu: axis -1 of shape (2,3) has odd size 3, which does not halve",
                       ValueError);
  CHECK_THROWS_WITH_AS(
      F::prelu(zeros({2, 3}), zeros({2})),
      "prelu: expected a weight of one entry or one per channel (3) for an input of shape (2,3), got (2)", ShapeError);
  CHECK_THROWS_WITH_AS(nn::PReLU(nn::PReLUOptions().num_parameters(0)),
                       "PReLU: num_parameters must be at least 1, got 0", ValueError);
  CHECK_THROWS_WITH_AS(F::relu6(zeros({2}, kInt64)), doctest::Contains("hardtanh"), TypeError);
}

TEST_CASE("layers: the shrinks, threshold, softmin, and the two-input distance modules") {
  namespace F = nn::functional;
  // At the kinks torch's gradients are 0: |x| = lambd is inside the dead zone, x = threshold too.
  const Tensor x = from_vector(std::vector<double>{-2.0, -0.5, -0.2, 0.0, 0.5, 1.5}, {6}).requires_grad_(true);
  check_values(F::softshrink(x, 0.5), {-1.5, 0.0, 0.0, 0.0, 0.0, 1.0}, 1e-15);
  check_values(F::hardshrink(x, 0.5), {-2.0, 0.0, 0.0, 0.0, 0.0, 1.5}, 1e-15);
  check_values(F::threshold(x, 0.0, 9.0), {9.0, 9.0, 9.0, 9.0, 0.5, 1.5}, 1e-15);
  sum(F::softshrink(x, 0.5) + F::hardshrink(x, 0.5) + F::threshold(x, 0.5, 9.0)).backward();
  check_values(x.grad(), {2.0, 0.0, 0.0, 0.0, 0.0, 3.0}, 1e-15);
  CHECK_THROWS_WITH_AS(F::softshrink(x, -1.0), "softshrink: lambd must be at least 0, got -1", ValueError);
  CHECK_THROWS_WITH_AS(nn::Softshrink(-0.5), "Softshrink: lambd must be at least 0, got -0.5", ValueError);

  Generator gen(12);
  const Tensor a = randn({3, 4}, gen, kFloat64) * 2.0;
  check_gradients([](const TensorList& in) { return nn::functional::softshrink(in[0], 0.3); }, {a});
  check_gradients([](const TensorList& in) { return nn::functional::tanhshrink(in[0]); }, {a});
  check_gradients([](const TensorList& in) { return nn::functional::softmin(in[0], 0); }, {a});
  CHECK(max(abs(nn::Softmin(1)(a) - softmax(-a, 1))).item() == 0.0);
  CHECK(max(abs(nn::Tanhshrink()(a) - (a - tanh(a)))).item() == 0.0);
  CHECK(max(abs(nn::Hardshrink(1.0)(a) - F::hardshrink(a, 1.0))).item() == 0.0);
  CHECK(max(abs(nn::Threshold(nn::ThresholdOptions(0.1, 20.0))(a) - F::threshold(a, 0.1, 20.0))).item() == 0.0);

  // Distances and similarities of rows, as torch 1.13 gives them.
  const Tensor u = from_vector(std::vector<double>{1, 2, 3, 0, -1, 4}, {2, 3});
  const Tensor v = from_vector(std::vector<double>{1, 0, 3, 2, 2, 2}, {2, 3});
  check_values(nn::PairwiseDistance()(u, v), {2.0000010000005, 4.123104898011085}, 1e-14);
  const Tensor l1 = nn::PairwiseDistance(nn::PairwiseDistanceOptions().p(1.0).keepdim(true))(u, v);
  CHECK(l1.shape() == Shape{2, 1});
  check_values(l1, {2.0000030000000004, 6.999999}, 1e-14);
  check_values(F::pairwise_distance(u, v, INFINITY), {2.000001, 2.999999}, 1e-14);
  check_values(nn::CosineSimilarity()(u, v), {0.8451542547285166, 0.420084025208403}, 1e-14);
  check_gradients([](const TensorList& in) { return nn::functional::pairwise_distance(in[0], in[1]); },
                  {randn({3, 4}, gen, kFloat64), randn({3, 4}, gen, kFloat64)});
}
