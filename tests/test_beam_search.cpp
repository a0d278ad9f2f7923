// nn::beam_search: width 1 is greedy, exhaustive search equals brute force over every sequence, a
// batch equals its rows alone, and the cached decoder equals one that recomputes everything.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "tapegrad/nn/nn.h"

using namespace tapegrad;

namespace {

nn::LanguageModel tiny_lm(std::int64_t vocab, std::uint64_t seed) {
  Generator gen(seed);
  return nn::LanguageModel(
      nn::LanguageModelOptions()
          .vocab_size(vocab)
          .max_len(16)
          .num_layers(1)
          .layer(nn::TransformerLayerOptions(8, 2).dim_feedforward(16).dropout(0.0).norm_first(true))
          .generator(&gen));
}

// A decoder without a cache: every step runs the model over the whole sequence so far.
class RecomputingDecoder : public nn::Decoder {
 public:
  explicit RecomputingDecoder(nn::LanguageModel model) : model_(std::move(model)) { model_->eval(); }
  Tensor start(const Tensor& prompt) override {
    sequence_ = prompt;
    return model_(sequence_).select(1, -1);
  }
  Tensor step(const Tensor& tokens) override {
    sequence_ = concat({sequence_, tokens}, 1);
    return model_(sequence_).select(1, -1);
  }
  void reorder(const Tensor& rows) override { sequence_ = index_select(sequence_, 0, rows); }

 private:
  nn::LanguageModel model_;
  Tensor sequence_;
};

// log P(continuation | prompt) under the model, summed over the continuation's tokens.
double sequence_log_prob(nn::LanguageModel& lm, const std::vector<std::int64_t>& prompt,
                         const std::vector<std::int64_t>& continuation) {
  std::vector<std::int64_t> all = prompt;
  all.insert(all.end(), continuation.begin(), continuation.end());
  NoGradGuard guard;
  lm->eval();
  const Tensor logp = log_softmax(lm(from_vector(all, {1, static_cast<std::int64_t>(all.size())})).to(kFloat64), -1);
  const std::vector<double> v = logp.to_vector<double>();
  const std::size_t vocab = static_cast<std::size_t>(logp.shape()[2]);
  double total = 0.0;
  for (std::size_t i = 0; i < continuation.size(); ++i)
    total += v[(prompt.size() - 1 + i) * vocab + static_cast<std::size_t>(continuation[i])];
  return total;
}

}  // namespace

TEST_CASE("beam search: width 1 is greedy decoding") {
  nn::LanguageModel lm = tiny_lm(7, 1);
  const Tensor prompt = tensor({{1, 2}, {3, 4}}, kInt64);
  nn::GenerationOptions greedy;
  greedy.max_new_tokens = 6;
  greedy.temperature = 0.0;
  const std::vector<std::int64_t> expected =
      lm->generate(prompt, greedy, default_generator()).to_vector<std::int64_t>();
  nn::LanguageModelDecoder decoder(lm);
  nn::BeamSearchOptions o;
  o.beam_size = 1;
  o.max_new_tokens = 6;
  const auto result = nn::beam_search(decoder, prompt, o);
  REQUIRE(result.size() == 2);
  for (std::size_t b = 0; b < 2; ++b) {
    REQUIRE(result[b].size() == 1);
    const std::vector<std::int64_t> want(expected.begin() + static_cast<std::ptrdiff_t>(b * 8 + 2),
                                         expected.begin() + static_cast<std::ptrdiff_t>(b * 8 + 8));
    CHECK(result[b][0].tokens == want);
    CHECK_FALSE(result[b][0].finished);
  }
}

TEST_CASE(
    "beam search: exhaustive search equals brute force over every sequence, with an end token and length penalty") {
  constexpr std::int64_t kVocab = 3, kEos = 2, kMax = 4;
  for (double alpha : {0.0, 0.6, 1.5}) {
    CAPTURE(alpha);
    nn::LanguageModel lm = tiny_lm(kVocab, 5);
    const std::vector<std::int64_t> prompt = {0, 1};
    // Every continuation: up to kMax tokens, the end token only as the last one.
    std::vector<std::pair<double, std::vector<std::int64_t>>> all;
    std::function<void(std::vector<std::int64_t>&)> expand = [&](std::vector<std::int64_t>& seq) {
      if (!seq.empty() && (seq.back() == kEos || static_cast<std::int64_t>(seq.size()) == kMax)) {
        const double lp = nn::gnmt_length_penalty(static_cast<std::int64_t>(seq.size()), alpha);
        all.emplace_back(sequence_log_prob(lm, prompt, seq) / lp, seq);
        return;
      }
      for (std::int64_t v = 0; v < kVocab; ++v) {
        seq.push_back(v);
        expand(seq);
        seq.pop_back();
      }
    };
    std::vector<std::int64_t> seq;
    expand(seq);
    std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first > b.first; });

    // Wide enough to keep every prefix: the search is exhaustive.
    nn::LanguageModelDecoder decoder(lm);
    nn::BeamSearchOptions o;
    o.beam_size = 27;
    o.max_new_tokens = kMax;
    o.eos_token = kEos;
    o.length_penalty = alpha;
    o.num_return = 5;
    const auto result = nn::beam_search(decoder, from_vector(prompt, {1, 2}), o);
    REQUIRE(result.size() == 1);
    REQUIRE(result[0].size() == 5);
    for (std::size_t i = 0; i < 5; ++i) {
      CAPTURE(i);
      CHECK(result[0][i].tokens == all[i].second);
      CHECK(result[0][i].score == doctest::Approx(all[i].first).epsilon(1e-5));  // float32, cached vs whole
      CHECK(result[0][i].finished == (result[0][i].tokens.back() == kEos));
    }
  }
}

TEST_CASE("beam search: a batch equals each row alone, and the cached decoder equals recomputation") {
  nn::LanguageModel lm = tiny_lm(9, 3);
  const Tensor prompts = tensor({{1, 2, 3}, {4, 5, 6}, {7, 8, 0}}, kInt64);
  nn::BeamSearchOptions o;
  o.beam_size = 3;
  o.max_new_tokens = 7;
  o.eos_token = 4;
  o.length_penalty = 0.6;
  o.num_return = 3;
  for (auto stopping : {nn::BeamSearchOptions::Stopping::Exhaustive, nn::BeamSearchOptions::Stopping::Early}) {
    o.stopping = stopping;
    nn::LanguageModelDecoder cached(lm);
    RecomputingDecoder recomputing(lm);
    const auto together = nn::beam_search(cached, prompts, o);
    const auto recomputed = nn::beam_search(recomputing, prompts, o);
    REQUIRE(together.size() == 3);
    for (std::int64_t b = 0; b < 3; ++b) {
      CAPTURE(b);
      nn::LanguageModelDecoder single(lm);
      const auto alone = nn::beam_search(single, prompts.narrow(0, b, 1).contiguous(), o);
      const auto& t = together[static_cast<std::size_t>(b)];
      REQUIRE(t.size() == alone[0].size());
      REQUIRE(t.size() == recomputed[static_cast<std::size_t>(b)].size());
      for (std::size_t i = 0; i < t.size(); ++i) {
        CHECK(t[i].tokens == alone[0][i].tokens);
        CHECK(t[i].score == doctest::Approx(alone[0][i].score).epsilon(1e-6));
        CHECK(t[i].tokens == recomputed[static_cast<std::size_t>(b)][i].tokens);
        CHECK(t[i].score == doctest::Approx(recomputed[static_cast<std::size_t>(b)][i].score).epsilon(1e-6));
      }
      // Best first.
      for (std::size_t i = 1; i < t.size(); ++i) CHECK(t[i - 1].score >= t[i].score);
    }
  }
  nn::LanguageModelDecoder decoder(lm);
  nn::BeamSearchOptions bad = o;
  bad.num_return = 4;
  CHECK_THROWS_WITH_AS(
      nn::beam_search(decoder, prompts, bad),
      "beam_search: beam_size and max_new_tokens must be >= 1 and num_return in [1, beam_size], got 3, "
      "7 and 4",
      ValueError);
}

TEST_CASE(
    "EncoderDecoderDecoder: width 1 equals greedy_decode, a batch equals its items alone, the cache equals "
    "recomputing") {
  Generator gen(21);
  nn::EncoderDecoder model{nn::EncoderDecoderOptions()
                               .src_vocab(6)
                               .tgt_vocab(6)
                               .max_len(12)
                               .encoder_layers(1)
                               .decoder_layers(1)
                               .layer(nn::TransformerLayerOptions(8, 2).dim_feedforward(16).dropout(0.0))
                               .generator(&gen)};
  const Tensor src = randint(2, 6, {3, 5}, gen);
  const Tensor pad = from_vector(std::vector<bool>{false, false, false, false, false, false, false, false, true, true,
                                                   false, false, false, false, true},
                                 {3, 5});
  nn::BeamSearchOptions o;
  o.beam_size = 1;
  o.max_new_tokens = 6;
  o.eos_token = 1;
  nn::EncoderDecoderDecoder greedy(model, src, pad);
  const auto width1 = nn::beam_search(greedy, full({3, 1}, 0.0, kInt64), o);
  const Tensor expected = model->greedy_decode(src, 0, 1, 6, pad);  // (3, 1 + n), eos-padded
  for (std::int64_t i = 0; i < 3; ++i) {
    std::vector<std::int64_t> row;
    for (std::int64_t t = 1; t < expected.shape()[1]; ++t) {
      row.push_back(expected.at({i, t}));
      if (row.back() == 1) break;
    }
    CHECK(width1[static_cast<std::size_t>(i)][0].tokens == row);
  }
  o.beam_size = 3;
  o.num_return = 3;
  o.length_penalty = 0.6;
  nn::EncoderDecoderDecoder batched(model, src, pad);
  const auto all = nn::beam_search(batched, full({3, 1}, 0.0, kInt64), o);
  for (std::int64_t i = 0; i < 3; ++i) {
    nn::EncoderDecoderDecoder one(model, src.narrow(0, i, 1).contiguous(), pad.narrow(0, i, 1).contiguous());
    const auto alone = nn::beam_search(one, full({1, 1}, 0.0, kInt64), o);
    REQUIRE(alone[0].size() == all[static_cast<std::size_t>(i)].size());
    for (std::size_t h = 0; h < alone[0].size(); ++h) {
      CHECK(alone[0][h].tokens == all[static_cast<std::size_t>(i)][h].tokens);
      CHECK(alone[0][h].score == doctest::Approx(all[static_cast<std::size_t>(i)][h].score).epsilon(1e-5));
      // The hypothesis' log-probability recomputed without a cache, over the whole prefix.
      std::vector<std::int64_t> in{0};
      in.insert(in.end(), alone[0][h].tokens.begin(), alone[0][h].tokens.end() - 1);
      NoGradGuard no_grad;
      const Tensor logits =
          model(src.narrow(0, i, 1).contiguous(), from_vector(in, {1, static_cast<std::int64_t>(in.size())}),
                pad.narrow(0, i, 1).contiguous());
      const std::vector<double> logp = log_softmax(logits.to(kFloat64), -1).to_vector<double>();
      double total = 0;
      for (std::size_t t = 0; t < in.size(); ++t)
        total += logp[t * 6 + static_cast<std::size_t>(alone[0][h].tokens[t])];
      CHECK(alone[0][h].log_prob == doctest::Approx(total).epsilon(1e-4));
    }
  }
}

TEST_CASE(
    "EncoderDecoderDecoder reports its last layer's cross-attention, and beam search takes the coverage penalty") {
  Generator gen(22);
  nn::EncoderDecoder model{nn::EncoderDecoderOptions()
                               .src_vocab(6)
                               .tgt_vocab(6)
                               .max_len(12)
                               .encoder_layers(1)
                               .decoder_layers(2)
                               .layer(nn::TransformerLayerOptions(8, 2).dim_feedforward(16).dropout(0.0))
                               .generator(&gen)};
  const Tensor src = randint(2, 6, {2, 5}, gen);
  const Tensor pad =
      from_vector(std::vector<bool>{false, false, false, false, false, false, false, false, true, true}, {2, 5});
  // The decoder's attention after each step equals the last layer's head-averaged cross-attention
  // of a full, uncached decode at the newest position.
  nn::EncoderDecoderDecoder decoder(model, src, pad);
  decoder.report_attention();
  const Tensor tokens = tensor({{0, 3, 4}, {0, 5, 2}}, kInt64);
  NoGradGuard no_grad;
  decoder.start(tokens.narrow(1, 0, 1).contiguous());
  for (std::int64_t t = 0; t < 3; ++t) {
    CAPTURE(t);
    if (t > 0) decoder.step(tokens.narrow(1, t, 1).contiguous());
    const nn::DecoderResult full =
        model->decode(tokens.narrow(1, 0, t + 1).contiguous(), model->encode(src, pad), {},
                      nn::AttentionForwardOptions().key_padding_mask(pad).need_weights(true));
    const Tensor expected = full.cross_weights.back().mean({1}).select(1, -1);  // (2, S)
    CHECK((decoder.attention() - expected).abs().max().item<double>() < 1e-5);
    CHECK(decoder.attention().at({1, 3}) == 0.0);  // padding
  }
  // The coverage penalty is beta * sum log min(coverage, 1) of the best hypothesis' attention.
  nn::BeamSearchOptions o;
  o.beam_size = 3;
  o.max_new_tokens = 4;
  o.coverage_penalty = 0.4;
  nn::EncoderDecoderDecoder with_attention(model, src, pad);
  with_attention.report_attention();
  const auto out = nn::beam_search(with_attention, zeros({2, 1}, kInt64), o);
  for (std::int64_t i = 0; i < 2; ++i) {
    const nn::Hypothesis& best = out[static_cast<std::size_t>(i)][0];
    std::vector<std::int64_t> in{0};
    in.insert(in.end(), best.tokens.begin(), best.tokens.end() - 1);
    const Tensor one_src = src.narrow(0, i, 1).contiguous(), one_pad = pad.narrow(0, i, 1).contiguous();
    const nn::DecoderResult r =
        model->decode(from_vector(in, {1, 4}), model->encode(one_src, one_pad), {},
                      nn::AttentionForwardOptions().key_padding_mask(one_pad).need_weights(true));
    const std::vector<double> coverage =
        r.cross_weights.back().mean({1}).select(0, 0).to(kFloat64).sum({0}).to_vector<double>();
    double cp = 0;
    for (std::size_t s = 0; s < coverage.size(); ++s)
      if (!(i == 1 && s >= 3)) cp += std::log(std::min(coverage[s], 1.0));
    CHECK(best.score == doctest::Approx(best.log_prob + 0.4 * cp).epsilon(1e-4));
  }
  CHECK_THROWS_WITH_AS(nn::EncoderDecoderDecoder(model, src, pad, -1),
                       "EncoderDecoderDecoder: target_length must be non-negative (0: max_len), got -1", ValueError);
  nn::EncoderDecoderDecoder silent(model, src, pad);
  CHECK_THROWS_WITH_AS(
      nn::beam_search(silent, zeros({2, 1}, kInt64), o),
      "beam_search: the coverage penalty needs the decoder's attention (6, S); this decoder gives none", ValueError);
}

// A decoder that returns log-probabilities of a fixed shape whatever it is asked, as a decoder with a
// forgotten select(1, -1) or a wrong reorder would.
class FixedShapeDecoder : public nn::Decoder {
 public:
  explicit FixedShapeDecoder(Shape shape) : shape_(std::move(shape)) {}
  Tensor start(const Tensor&) override { return zeros(shape_); }
  Tensor step(const Tensor&) override { return zeros(shape_); }
  void reorder(const Tensor&) override {}

 private:
  Shape shape_;
};

TEST_CASE("beam_search refuses a decoder's log-probabilities of the wrong shape instead of reading past them") {
  nn::BeamSearchOptions o;
  o.beam_size = 4;
  o.max_new_tokens = 3;
  const Tensor prompt = zeros({2, 1}, kInt64);  // 2 prompts x 4 beams = 8 rows
  FixedShapeDecoder too_few(Shape{1, 5});
  CHECK_THROWS_WITH_AS(nn::beam_search(too_few, prompt, o),
                       "beam_search: the decoder's logits must be (8, V) with V >= 1 (one row per hypothesis), "
                       "got (1,5) at step 0",
                       ShapeError);
  FixedShapeDecoder three_d(Shape{8, 3, 5});
  CHECK_THROWS_AS(nn::beam_search(three_d, prompt, o), ShapeError);
  FixedShapeDecoder empty(Shape{8, 0});
  CHECK_THROWS_AS(nn::beam_search(empty, prompt, o), ShapeError);
  FixedShapeDecoder right(Shape{8, 5});
  CHECK(nn::beam_search(right, prompt, o).size() == 2);
}

TEST_CASE("beam_search refuses an end token it could never emit and penalties that would make scores NaN") {
  nn::BeamSearchOptions o;
  o.beam_size = 2;
  o.max_new_tokens = 3;
  const Tensor prompt = zeros({1, 1}, kInt64);
  FixedShapeDecoder five(Shape{2, 5});
  o.eos_token = 5;
  CHECK_THROWS_WITH_AS(nn::beam_search(five, prompt, o),
                       "beam_search: eos_token 5 is outside the decoder's vocabulary of 5 tokens (it could never be "
                       "emitted)",
                       ValueError);
  o.eos_token = -1;
  CHECK_THROWS_WITH_AS(nn::beam_search(five, prompt, o), "beam_search: eos_token must be a token id (>= 0), got -1",
                       ValueError);
  o.eos_token = 4;
  CHECK(nn::beam_search(five, prompt, o).size() == 1);
  o.length_penalty = std::nan("");
  CHECK_THROWS_WITH_AS(nn::beam_search(five, prompt, o),
                       "beam_search: length_penalty and coverage_penalty must be finite, got nan and 0", ValueError);
  o.length_penalty = 0.6;
  o.coverage_penalty = std::numeric_limits<double>::infinity();
  CHECK_THROWS_WITH_AS(nn::beam_search(five, prompt, o),
                       "beam_search: length_penalty and coverage_penalty must be finite, got 0.6 and inf", ValueError);
}

// Uniform logits over 3 tokens and attention over `widths[step]` source positions at each step, with
// padding of the given shape (none when empty).
class AttendingDecoder : public nn::Decoder {
 public:
  AttendingDecoder(std::vector<std::int64_t> widths, Shape padding)
      : widths_(std::move(widths)), padding_(std::move(padding)) {}
  Tensor start(const Tensor& prompt) override {
    rows_ = prompt.shape()[0];
    step_ = 0;
    return zeros({rows_, 3});
  }
  Tensor step(const Tensor&) override {
    ++step_;
    return zeros({rows_, 3});
  }
  void reorder(const Tensor&) override {}
  Tensor attention() const override {
    const std::int64_t s = widths_[static_cast<std::size_t>(std::min<std::int64_t>(step_, 2))];
    return full({rows_, s}, 1.0 / static_cast<double>(s));
  }
  Tensor source_padding() const override { return padding_.empty() ? Tensor() : zeros(padding_, kBool); }

 private:
  std::vector<std::int64_t> widths_;
  Shape padding_;
  std::int64_t rows_ = 0, step_ = 0;
};

TEST_CASE("beam_search's coverage penalty refuses attention whose width changes and padding of another shape") {
  nn::BeamSearchOptions o;
  o.beam_size = 2;
  o.max_new_tokens = 3;
  o.coverage_penalty = 0.2;
  const Tensor prompt = zeros({1, 1}, kInt64);
  AttendingDecoder steady({4, 4, 4}, Shape{2, 4});
  CHECK(nn::beam_search(steady, prompt, o)[0].size() == 1);
  AttendingDecoder narrowing({4, 4, 2}, Shape{});
  CHECK_THROWS_WITH_AS(nn::beam_search(narrowing, prompt, o),
                       "beam_search: the decoder's attention covered 4 source positions, then 2", ShapeError);
  AttendingDecoder short_padding({4, 4, 4}, Shape{2, 3});
  CHECK_THROWS_WITH_AS(nn::beam_search(short_padding, prompt, o),
                       "beam_search: the decoder's source padding must be (2, 4) like its attention, got (2,3)",
                       ShapeError);
}
