// nn::PointerSentinel (Merity et al. 2016): the mixture against a loop over positions, its
// gradients, the window, its errors, the decoder, and a copy task it learns.

#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tapegrad/data/token_stream.h"
#include "tapegrad/nn/nn.h"
#include "tapegrad/optim/optim.h"
#include "tests/testing.h"

using namespace tapegrad;
using testing::parameter;

namespace {

struct Case {
  Tensor hidden, tokens, logits, targets;
};

// Random states and logits; about half the targets repeat an earlier token of their row, so the
// pointer has something to find.
Case random_case(std::int64_t b, std::int64_t t, std::int64_t d, std::int64_t v, Generator& gen) {
  Case c;
  c.hidden = randn({b, t, d}, gen, kFloat64);
  c.logits = randn({b, t, v}, gen, kFloat64);
  std::vector<std::int64_t> tokens(static_cast<std::size_t>(b * t)), targets(tokens.size());
  for (auto& x : tokens) x = static_cast<std::int64_t>(gen.randint(static_cast<std::uint64_t>(v)));
  for (std::int64_t r = 0; r < b; ++r)
    for (std::int64_t i = 0; i < t; ++i) {
      const auto at = static_cast<std::size_t>(r * t + i);
      const auto back = static_cast<std::int64_t>(gen.randint(static_cast<std::uint64_t>(i + 1)));
      targets[at] = gen.uniform() < 0.5 ? tokens[static_cast<std::size_t>(r * t + i - back)]
                                        : static_cast<std::int64_t>(gen.randint(static_cast<std::uint64_t>(v)));
    }
  c.tokens = from_vector(tokens, {b, t});
  c.targets = from_vector(targets, {b, t});
  return c;
}

// The mixture at every position by the paper's formulas, one position at a time in double.
struct Reference {
  std::vector<double> p, gate, pointer, pointer_mass;
};

Reference loop_reference(nn::PointerSentinel& pointer, const Case& c, std::int64_t window) {
  const std::int64_t b = c.hidden.shape()[0], t_len = c.hidden.shape()[1], d = c.hidden.shape()[2];
  const std::int64_t v = c.logits.shape()[2];
  const std::vector<double> w = parameter(*pointer, "query.weight").to_vector<double>();
  const std::vector<double> bias = parameter(*pointer, "query.bias").to_vector<double>();
  const std::vector<double> s = parameter(*pointer, "sentinel").to_vector<double>();
  const std::vector<double> h = c.hidden.to_vector<double>(), logits = c.logits.to_vector<double>();
  const std::vector<std::int64_t> x = c.tokens.to_vector<std::int64_t>(), y = c.targets.to_vector<std::int64_t>();
  const auto H = [&](std::int64_t r, std::int64_t i, std::int64_t k) {
    return h[static_cast<std::size_t>((r * t_len + i) * d + k)];
  };
  Reference ref;
  for (std::int64_t r = 0; r < b; ++r)
    for (std::int64_t t = 0; t < t_len; ++t) {
      std::vector<double> q(static_cast<std::size_t>(d));
      for (std::int64_t o = 0; o < d; ++o) {
        double z = bias[static_cast<std::size_t>(o)];
        for (std::int64_t k = 0; k < d; ++k) z += w[static_cast<std::size_t>(o * d + k)] * H(r, t, k);
        q[static_cast<std::size_t>(o)] = std::tanh(z);
      }
      const std::int64_t first = std::max<std::int64_t>(0, t - window + 1);
      std::vector<double> z;  // the visible positions, then the sentinel
      for (std::int64_t i = first; i <= t; ++i) {
        double dot = 0;
        for (std::int64_t k = 0; k < d; ++k) dot += q[static_cast<std::size_t>(k)] * H(r, i, k);
        z.push_back(dot / std::sqrt(static_cast<double>(d)));
      }
      double dot = 0;
      for (std::int64_t k = 0; k < d; ++k) dot += q[static_cast<std::size_t>(k)] * s[static_cast<std::size_t>(k)];
      z.push_back(dot / std::sqrt(static_cast<double>(d)));
      double total = 0;
      for (const double zi : z) total += std::exp(zi);
      const double g = std::exp(z.back()) / total;
      const std::int64_t target = y[static_cast<std::size_t>(r * t_len + t)];
      double on_target = 0;
      for (std::int64_t i = first; i <= t; ++i)
        if (x[static_cast<std::size_t>(r * t_len + i)] == target)
          on_target += std::exp(z[static_cast<std::size_t>(i - first)]) / total;
      double norm = 0;
      for (std::int64_t k = 0; k < v; ++k) norm += std::exp(logits[static_cast<std::size_t>((r * t_len + t) * v + k)]);
      const double p_vocab = std::exp(logits[static_cast<std::size_t>((r * t_len + t) * v + target)]) / norm;
      ref.p.push_back(g * p_vocab + on_target);
      ref.gate.push_back(g);
      ref.pointer.push_back(on_target);
      ref.pointer_mass.push_back(g + on_target);
    }
  return ref;
}

// A language model of one block of width d (2 heads).
nn::LanguageModel one_block_lm(std::int64_t vocab, std::int64_t max_len, std::int64_t d, Generator& gen) {
  return nn::LanguageModel(nn::LanguageModelOptions()
                               .vocab_size(vocab)
                               .max_len(max_len)
                               .num_layers(1)
                               .layer(nn::TransformerLayerOptions(d, 2).dim_feedforward(2 * d))
                               .generator(&gen));
}

}  // namespace

TEST_CASE("pointer sentinel: the mixture equals a loop over positions by the paper's formulas") {
  Generator gen(1);
  for (const std::int64_t window : {1, 3, 100}) {
    CAPTURE(window);
    const Case c = random_case(2, 7, 5, 6, gen);
    nn::PointerSentinel pointer{nn::PointerSentinelOptions(5).window(window).generator(&gen)};
    pointer->to(kFloat64);
    const nn::PointerSentinelOutput out = pointer(c.hidden, c.tokens, c.logits, c.targets);
    const Reference ref = loop_reference(pointer, c, window);
    testing::check_values(exp(out.log_probs), ref.p, 1e-12);
    testing::check_values(out.gate, ref.gate, 1e-12);
    testing::check_values(out.pointer_probs, ref.pointer, 1e-12);
    testing::check_values(exp(out.pointer_log_mass), ref.pointer_mass, 1e-12);
    // The full distribution at the targets is the same mixture, and each position's sums to 1.
    const Tensor full = pointer->log_distribution(c.hidden, c.tokens, c.logits);  // (2, 7, 6)
    testing::check_values(exp(gather(full, 2, c.targets.unsqueeze(2)).squeeze(2)), ref.p, 1e-12);
    testing::check_close(exp(full).sum({2}), ones({2, 7}, kFloat64), 1e-12);
    // The loss is the mean of the paper's two terms.
    double loss = 0;
    for (std::size_t i = 0; i < ref.p.size(); ++i) loss -= std::log(ref.p[i]) + std::log(ref.pointer_mass[i]);
    CHECK(nn::pointer_sentinel_loss(out).item<double>() == doctest::Approx(loss / 14).epsilon(1e-12));
  }
}

TEST_CASE("pointer sentinel: gradients of the mixture and of the loss check to second order") {
  Generator gen(2);
  const Case c = random_case(2, 5, 4, 5, gen);
  nn::PointerSentinel pointer{nn::PointerSentinelOptions(4).window(3).generator(&gen)};
  pointer->to(kFloat64);
  const auto f = [&](const TensorList& in) {
    const nn::PointerSentinelOutput out = pointer(in[0], c.tokens, in[1], c.targets);
    return concat({out.log_probs, out.pointer_log_mass}, 1);
  };
  testing::check_gradients(f, {c.hidden, c.logits}, {}, pointer->parameters());
  const auto mixture = [&](const TensorList& in) { return pointer->log_distribution(in[0], c.tokens, in[1]); };
  testing::check_gradients(mixture, {c.hidden, c.logits}, {}, pointer->parameters());
}

TEST_CASE("pointer sentinel: a target outside the window gets no pointer mass and a finite loss") {
  Generator gen(3);
  // Window 2: position 1 sees tokens 4 and 1, position 2 sees 1 and 2 (the 4 at position 0 is
  // outside), position 3 sees 2 and 4.
  const Tensor tokens = from_vector(std::vector<std::int64_t>{4, 1, 2, 4}, {1, 4});
  const Tensor targets = from_vector(std::vector<std::int64_t>{1, 1, 4, 3}, {1, 4});
  const Tensor hidden = randn({1, 4, 3}, gen, kFloat64);
  // The vocabulary gives the targets of positions 2 and 3 almost nothing: exp(-800) is 0 in double.
  std::vector<double> l(4 * 5, 0.0);
  l[2 * 5 + 4] = -800;
  l[3 * 5 + 3] = -800;
  const Tensor logits = from_vector(l, {1, 4, 5}).requires_grad_();
  nn::PointerSentinel pointer{nn::PointerSentinelOptions(3).window(2).generator(&gen)};
  pointer->to(kFloat64);
  const nn::PointerSentinelOutput out = pointer(hidden, tokens, logits, targets);
  const std::vector<double> on_target = out.pointer_probs.to_vector<double>();
  CHECK(on_target[0] == 0.0);  // position 0 sees only the 4
  CHECK(on_target[1] > 0.0);   // the 1 at position 1
  CHECK(on_target[2] == 0.0);  // the 4 is outside the window
  CHECK(on_target[3] == 0.0);  // no 3 anywhere
  const std::vector<double> log_p = out.log_probs.to_vector<double>();
  CHECK(std::isfinite(log_p[2]));  // the vocabulary's term in log space: about log g - 800
  CHECK(log_p[2] < -700);
  const Tensor loss = nn::pointer_sentinel_loss(out);
  loss.backward();
  CHECK(std::isfinite(loss.item<double>()));
  CHECK_FALSE(testing::any_nan(logits.grad()));
}

TEST_CASE("pointer sentinel: mis-shaped inputs and options are errors naming them") {
  Generator gen(4);
  nn::PointerSentinel pointer{nn::PointerSentinelOptions(3).generator(&gen)};
  const Tensor hidden = randn({1, 4, 3}, gen), logits = randn({1, 4, 5}, gen);
  const Tensor tokens = zeros({1, 4}, kInt64);
  const std::string shapes =
      "PointerSentinel: expected hidden (B, T, 3), Int64 tokens (B, T) and logits (B, T, V), got (1,4,3), int64 (1,3) "
      "and (1,4,5)";
  CHECK_THROWS_WITH_AS(pointer(hidden, zeros({1, 3}, kInt64), logits, tokens), shapes.c_str(), ShapeError);
  const std::string targets = "PointerSentinel: expected Int64 targets (1,4) like the tokens, got float32 (1,4)";
  CHECK_THROWS_WITH_AS(pointer(hidden, tokens, logits, zeros({1, 4})), targets.c_str(), ShapeError);
  const std::string options = "PointerSentinel: d_model and window must be positive, got 3 and 0";
  CHECK_THROWS_WITH_AS(nn::PointerSentinel(nn::PointerSentinelOptions(3).window(0)), options.c_str(), ValueError);
  const Tensor past_vocabulary = from_vector(std::vector<std::int64_t>{0, 1, 5, 2}, {1, 4});
  CHECK_THROWS_WITH_AS(pointer(hidden, tokens, logits, past_vocabulary),
                       "PointerSentinel: target 5 at flat index 2 is outside the logits' vocabulary [0, 5)",
                       IndexError);
  CHECK_THROWS_WITH_AS(
      pointer->log_distribution(hidden, from_vector(std::vector<std::int64_t>{0, -1, 0, 0}, {1, 4}), logits),
      "PointerSentinel: token -1 at flat index 1 is outside the logits' vocabulary [0, 5)", IndexError);
}

TEST_CASE("pointer sentinel: the language model's hidden states and logits are its forward in two halves") {
  Generator gen(5);
  nn::LanguageModel lm = one_block_lm(11, 8, 8, gen);
  lm->eval();  // no dropout: the two runs must see the same weights and masks
  const Tensor tokens = randint(0, 11, {2, 6}, gen);
  const Tensor hidden = lm->hidden(tokens);
  CHECK(hidden.shape() == Shape{2, 6, 8});
  CHECK(lm->logits(hidden).to_vector<float>() == lm(tokens).to_vector<float>());
}

namespace {

// Sequences of 12 tokens from a vocabulary of 40: six random tokens, then the same six again. The
// second half is predictable only by copying from the first.
data::TokenBatch copy_batch(std::int64_t rows, Generator& gen) {
  std::vector<std::int64_t> seq;
  for (std::int64_t r = 0; r < rows; ++r) {
    std::vector<std::int64_t> half;
    for (int i = 0; i < 6; ++i) half.push_back(static_cast<std::int64_t>(gen.randint(40)));
    seq.insert(seq.end(), half.begin(), half.end());
    seq.insert(seq.end(), half.begin(), half.end());
    seq.push_back(static_cast<std::int64_t>(gen.randint(40)));  // the target after the last
  }
  std::vector<std::int64_t> input, target;
  for (std::int64_t r = 0; r < rows; ++r)
    for (int i = 0; i < 12; ++i) {
      input.push_back(seq[static_cast<std::size_t>(r * 13 + i)]);
      target.push_back(seq[static_cast<std::size_t>(r * 13 + i + 1)]);
    }
  data::TokenBatch b;
  b.input = from_vector(input, {rows, 12});
  b.target = from_vector(target, {rows, 12});
  return b;
}

}  // namespace

TEST_CASE("pointer sentinel: a small model learns to copy, the pointer taking the mass on copied tokens") {
  Generator gen(6);
  nn::LanguageModel lm = one_block_lm(40, 12, 16, gen);
  nn::PointerSentinel pointer{nn::PointerSentinelOptions(16).window(12).generator(&gen)};
  TensorList params = lm->parameters();
  for (const Tensor& p : pointer->parameters()) params.push_back(p);
  optim::Adam adam(params, optim::AdamOptions(1e-2));
  const auto copied_pointer_share = [&](const nn::PointerSentinelOutput& out) {
    // Mean pointer probability of the target at positions 5..10 (predicting tokens 6..11, the copies).
    return out.pointer_probs.narrow(1, 5, 6).mean().item<double>();
  };
  double first_loss = 0, last_loss = 0, last_share = 0;
  for (int step = 0; step < 150; ++step) {
    const data::TokenBatch b = copy_batch(16, gen);
    const Tensor hidden = lm->hidden(b.input);
    const nn::PointerSentinelOutput out = pointer(hidden, b.input, lm->logits(hidden), b.target);
    const Tensor loss = nn::pointer_sentinel_loss(out);
    adam.zero_grad();
    loss.backward();
    adam.step();
    if (step == 0) first_loss = loss.item<double>();
    last_loss = loss.item<double>();
    last_share = copied_pointer_share(out);
  }
  CHECK(last_loss < first_loss - 2.0);
  CHECK(last_share > 0.8);
  // Greedy decoding through the decoder copies a fresh first half.
  const data::TokenBatch b = copy_batch(1, gen);
  nn::PointerSentinelDecoder decoder(lm, pointer);
  nn::GenerationOptions g;
  g.max_new_tokens = 6;
  const Tensor out = nn::generate(decoder, b.input.narrow(1, 0, 6), g, gen);
  CHECK(out.narrow(1, 6, 6).to_vector<std::int64_t>() == b.input.narrow(1, 0, 6).to_vector<std::int64_t>());
}
