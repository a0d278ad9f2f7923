// nn::generate and nn::choose_tokens: greedy decoding and sampling (temperature, top-k, top-p)
// over any Decoder. LanguageModel::generate makes the same choices; temperature 0 is beam search
// of width 1; draws follow the filtered softmax; padding and end tokens are honoured.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tapegrad/nn/nn.h"

using namespace tapegrad;

namespace {

nn::LanguageModel tiny_lm(std::uint64_t seed) {
  Generator gen(seed);
  return nn::LanguageModel(
      nn::LanguageModelOptions()
          .vocab_size(7)
          .max_len(16)
          .num_layers(1)
          .layer(nn::TransformerLayerOptions(8, 2).dim_feedforward(16).dropout(0.0).norm_first(true))
          .generator(&gen));
}

// The same logits for every row and step.
class FixedDecoder : public nn::Decoder {
 public:
  explicit FixedDecoder(std::vector<double> logits) : logits_(std::move(logits)) {}
  Tensor start(const Tensor& prompt) override { return rows(prompt.shape()[0]); }
  Tensor step(const Tensor& tokens) override { return rows(tokens.shape()[0]); }
  void reorder(const Tensor&) override {}

 private:
  Tensor rows(std::int64_t n) const {
    const std::int64_t v = static_cast<std::int64_t>(logits_.size());
    return from_vector(logits_, {1, v}).expand({n, v}).contiguous();
  }
  std::vector<double> logits_;
};

std::vector<std::int64_t> column(const Tensor& sequences, std::int64_t t) {
  return sequences.select(1, t).contiguous().to_vector<std::int64_t>();
}

}  // namespace

TEST_CASE("generate over the language model's decoder makes LanguageModel::generate's choices") {
  nn::LanguageModel lm = tiny_lm(1);
  Generator data(2);
  const Tensor prompt = randint(0, 7, {3, 2}, data);
  nn::GenerationOptions o;
  o.max_new_tokens = 8;
  for (double temperature : {0.0, 0.8, 1.5}) {
    for (std::int64_t top_k : {0, 3}) {
      for (double top_p : {1.0, 0.7}) {
        CAPTURE(temperature);
        CAPTURE(top_k);
        CAPTURE(top_p);
        o.temperature = temperature;
        o.top_k = top_k;
        o.top_p = top_p;
        o.eos_token = top_k == 3 ? std::optional<std::int64_t>(4) : std::nullopt;
        Generator a(3), b(3);
        nn::LanguageModelDecoder decoder(lm);
        const Tensor through_decoder = nn::generate(decoder, prompt, o, a);
        const Tensor own = lm->generate(prompt, o, b);
        CHECK(through_decoder.to_vector<std::int64_t>() == own.to_vector<std::int64_t>());
      }
    }
  }
}

TEST_CASE("generate at temperature 0 is beam search of width 1, and top-k 1 is greedy, for a recurrent seq2seq") {
  Generator init(4);
  nn::RecurrentSeq2Seq model{nn::RecurrentSeq2SeqOptions(6, 6, 16).generator(&init)};
  Generator data(5);
  const Tensor src = randint(2, 6, {4, 5}, data);
  const Tensor prompt = zeros({4, 1}, kInt64);
  nn::GenerationOptions greedy;
  greedy.temperature = 0.0;
  greedy.max_new_tokens = 7;
  greedy.eos_token = 1;
  Generator unused(6);
  nn::RecurrentSeq2SeqDecoder d1(model, src);
  const Tensor out = nn::generate(d1, prompt, greedy, unused);
  nn::BeamSearchOptions beam;
  beam.beam_size = 1;
  beam.max_new_tokens = 7;
  beam.eos_token = 1;
  nn::RecurrentSeq2SeqDecoder d2(model, src);
  const auto best = nn::beam_search(d2, prompt, beam);
  const std::vector<std::int64_t> tokens = out.to_vector<std::int64_t>();
  const std::int64_t width = out.shape()[1];
  for (std::size_t i = 0; i < 4; ++i) {
    const std::vector<std::int64_t>& hyp = best[i][0].tokens;
    for (std::size_t t = 0; t < hyp.size(); ++t) CHECK(tokens[i * static_cast<std::size_t>(width) + 1 + t] == hyp[t]);
    // After the end token a row repeats it.
    for (std::size_t t = hyp.size() + 1; t < static_cast<std::size_t>(width); ++t)
      CHECK(tokens[i * static_cast<std::size_t>(width) + t] == 1);
  }
  nn::GenerationOptions top1 = greedy;
  top1.temperature = 1.3;
  top1.top_k = 1;
  Generator g(7);
  nn::RecurrentSeq2SeqDecoder d3(model, src);
  CHECK(nn::generate(d3, prompt, top1, g).to_vector<std::int64_t>() == tokens);
  // Draws are reproducible from the generator's seed, and differ between seeds.
  nn::GenerationOptions sample = greedy;
  sample.temperature = 2.0;
  sample.eos_token.reset();
  sample.max_new_tokens = 12;
  auto draw = [&](std::uint64_t seed) {
    Generator gen(seed);
    nn::RecurrentSeq2SeqDecoder d(model, src);
    return nn::generate(d, prompt, sample, gen).to_vector<std::int64_t>();
  };
  CHECK(draw(8) == draw(8));
  CHECK(draw(8) != draw(9));
}

TEST_CASE("sampled tokens follow softmax(logits / temperature) cut to the top k and the top-p nucleus") {
  const std::vector<double> logits{2.0, 1.0, 0.0, -1.0, 0.5, -3.0};
  const double temperature = 0.7;
  // The probabilities by hand: softmax at the temperature, the top 4 kept (tokens 0, 1, 4, 2),
  // renormalised, then the smallest most-likely set reaching 0.9.
  std::vector<double> p(logits.size(), 0.0);
  const std::vector<std::size_t> top4{0, 1, 4, 2};
  double total = 0.0;
  for (std::size_t v : top4) total += p[v] = std::exp(logits[v] / temperature);
  for (double& x : p) x /= total;
  double mass = 0.0;
  std::vector<std::size_t> nucleus;
  for (std::size_t v : top4) {
    if (mass >= 0.9) break;
    mass += p[v];
    nucleus.push_back(v);
  }
  std::vector<double> expected(logits.size(), 0.0);
  for (std::size_t v : nucleus) expected[v] = p[v] / mass;
  REQUIRE(nucleus.size() == 3);  // 0, 1 and 4: token 2 falls outside the nucleus

  nn::GenerationOptions o;
  o.temperature = temperature;
  o.top_k = 4;
  o.top_p = 0.9;
  o.max_new_tokens = 2;
  const std::int64_t n = 40000;
  FixedDecoder decoder(logits);
  Generator gen(10);
  const Tensor out = nn::generate(decoder, zeros({n, 1}, kInt64), o, gen);
  std::vector<double> freq(logits.size(), 0.0);
  for (std::int64_t t : {1, 2})
    for (std::int64_t token : column(out, t)) freq.at(static_cast<std::size_t>(token)) += 1.0 / (2.0 * n);
  for (std::size_t v = 0; v < logits.size(); ++v) {
    CAPTURE(v);
    const double sigma = std::sqrt(expected[v] * (1 - expected[v]) / (2.0 * n));
    if (expected[v] == 0.0) CHECK(freq[v] == 0.0);
    else CHECK(std::abs(freq[v] - expected[v]) < 5 * sigma);
  }
}

TEST_CASE("a sampled pointer never points at padding") {
  Generator init(11);
  nn::PointerNetwork ptr{nn::PointerNetworkOptions(6, 8).generator(&init)};
  Generator data(12);
  const Tensor src = randint(2, 6, {2, 6}, data);
  const Tensor lengths = from_vector(std::vector<std::int64_t>{6, 3}, {2});
  nn::PointerNetworkDecoder decoder(ptr, src, lengths);
  nn::GenerationOptions o;
  o.temperature = 5.0;  // nearly uniform over the positions that exist
  o.max_new_tokens = 200;
  Generator gen(13);
  const Tensor out = nn::generate(decoder, full({2, 1}, -1.0, kInt64), o, gen);
  const std::vector<std::int64_t> row1 = out.select(0, 1).contiguous().to_vector<std::int64_t>();
  CHECK(*std::max_element(row1.begin() + 1, row1.end()) == 2);
  CHECK(*std::min_element(row1.begin() + 1, row1.end()) == 0);
  const std::vector<std::int64_t> row0 = out.select(0, 0).contiguous().to_vector<std::int64_t>();
  CHECK(*std::max_element(row0.begin() + 1, row0.end()) == 5);
}

TEST_CASE("generate and choose_tokens reject bad options with messages naming the values") {
  FixedDecoder decoder({0.0, 1.0});
  Generator gen(14);
  nn::GenerationOptions o;
  o.top_p = 0.0;
  CHECK_THROWS_WITH_AS(nn::generate(decoder, zeros({1, 1}, kInt64), o, gen), "generate: top_p must be in (0, 1], got 0",
                       ValueError);
  o.top_p = 1.0;
  o.temperature = -1.0;
  CHECK_THROWS_WITH_AS(
      nn::choose_tokens(zeros({1, 2}), o, gen),
      "choose_tokens: temperature must be finite and non-negative and top_k non-negative, got -1 and 0", ValueError);
  o.temperature = std::nan("");
  CHECK_THROWS_WITH_AS(
      nn::choose_tokens(zeros({1, 2}), o, gen),
      "choose_tokens: temperature must be finite and non-negative and top_k non-negative, got nan and 0", ValueError);
  o.temperature = 1.0;
  const double inf = std::numeric_limits<double>::infinity();
  CHECK_THROWS_WITH_AS(
      nn::choose_tokens(from_vector(std::vector<double>{0.0, 1.0, -inf, -inf}, {2, 2}), o, gen),
      "choose_tokens: row 1 of the logits gives no distribution to sample (a NaN, or every logit -inf)", ValueError);
  o.temperature = 1.0;
  o.sliding_window = true;
  CHECK_THROWS_WITH_AS(
      nn::generate(decoder, zeros({1, 1}, kInt64), o, gen),
      "generate: sliding_window is LanguageModel::generate's (it recomputes the model over a window); a "
      "Decoder continues from its own state",
      ValueError);
  o.sliding_window = false;
  CHECK_THROWS_WITH_AS(nn::generate(decoder, zeros({1, 1}), o, gen),
                       "generate: expected an Int64 prompt (R, T) with T >= 1, got float32 (1,1)", ShapeError);
  CHECK_THROWS_WITH_AS(nn::choose_tokens(zeros({2}), o, gen),
                       "choose_tokens: expected logits (R, V) with V >= 1, got shape (2)", ShapeError);
}

// Logits with `extra` more rows than it was given (a decoder that forgot to select its rows).
class WideDecoder : public nn::Decoder {
 public:
  explicit WideDecoder(std::int64_t extra) : extra_(extra) {}
  Tensor start(const Tensor& prompt) override { return zeros({prompt.shape()[0] + extra_, 4}); }
  Tensor step(const Tensor& tokens) override { return zeros({tokens.shape()[0] + extra_, 4}); }
  void reorder(const Tensor&) override {}

 private:
  std::int64_t extra_;
};

TEST_CASE("generate refuses a decoder's logits of the wrong rows and an end token outside its vocabulary") {
  Generator gen(3);
  nn::GenerationOptions o;
  o.max_new_tokens = 3;
  o.eos_token = 1;
  WideDecoder more(2);
  CHECK_THROWS_WITH_AS(nn::generate(more, zeros({3, 1}, kInt64), o, gen),
                       "generate: the decoder's logits must be (3, V) with V >= 1 (one row per hypothesis), got (5,4) "
                       "at step 0",
                       ShapeError);
  WideDecoder exact(0);
  CHECK(nn::generate(exact, zeros({3, 1}, kInt64), o, gen).shape()[0] == 3);
  o.eos_token = 4;
  CHECK_THROWS_WITH_AS(nn::generate(exact, zeros({3, 1}, kInt64), o, gen),
                       "generate: eos_token 4 is outside the decoder's vocabulary of 4 tokens (it could never be "
                       "emitted)",
                       ValueError);
  o.eos_token = -2;
  CHECK_THROWS_WITH_AS(nn::generate(exact, zeros({3, 1}, kInt64), o, gen),
                       "generate: eos_token must be a token id (>= 0), got -2", ValueError);
  nn::LanguageModel lm = tiny_lm(5);
  lm->train();
  o.eos_token = 7;
  CHECK_THROWS_WITH_AS(lm->generate(zeros({1, 2}, kInt64), o, gen),
                       "LanguageModel::generate: eos_token 7 is outside the decoder's vocabulary of 7 tokens (it "
                       "could never be emitted)",
                       ValueError);
  CHECK(lm->is_training());  // restored after the failed call
}
