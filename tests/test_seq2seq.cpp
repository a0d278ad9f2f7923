// nn::RecurrentSeq2Seq and nn::PointerNetwork: float64 gradcheck, step-by-step decoding equal to
// teacher forcing, padding, both learning string reversal, and beam search over their decoders
// (width 1 is greedy, a batch equals its items alone, the coverage penalty as GNMT defines it).

#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "tapegrad/nn/nn.h"
#include "tapegrad/optim/optim.h"
#include "testing.h"

using namespace tapegrad;
using tapegrad::testing::check_gradients;
using tapegrad::testing::max_abs_diff;

namespace {

constexpr std::int64_t kSos = 0, kEos = 1, kLetters = 3, kVocab = 2 + kLetters;

// n random strings of `length` letters (tokens 2 ..), their reversals with <sos>/<eos>.
struct Batch {
  Tensor src, tgt_in, tgt_out, positions;  // positions: the source position each output step copies
};

Batch reversal_batch(std::int64_t n, std::int64_t length, Generator& gen) {
  std::vector<std::int64_t> src, out, pos;
  for (std::int64_t i = 0; i < n; ++i) {
    std::vector<std::int64_t> s;
    for (std::int64_t j = 0; j < length; ++j) s.push_back(2 + static_cast<std::int64_t>(gen.next_u64() % kLetters));
    src.insert(src.end(), s.begin(), s.end());
    for (std::int64_t j = length - 1; j >= 0; --j) {
      out.push_back(s[static_cast<std::size_t>(j)]);
      pos.push_back(j);
    }
    out.push_back(kEos);
  }
  // tgt_in: <sos> + reversed (length + 1); tgt_out: reversed + <eos>.
  std::vector<std::int64_t> tin;
  for (std::int64_t i = 0; i < n; ++i) {
    tin.push_back(kSos);
    for (std::int64_t j = 0; j < length; ++j) tin.push_back(out[static_cast<std::size_t>(i * (length + 1) + j)]);
  }
  return {from_vector(src, {n, length}), from_vector(tin, {n, length + 1}), from_vector(out, {n, length + 1}),
          from_vector(pos, {n, length})};
}

nn::RecurrentSeq2Seq small_seq2seq(std::uint64_t seed, RecurrentMode cell = RecurrentMode::Lstm,
                                   nn::AlignmentScore score = nn::AlignmentScore::General, std::int64_t hidden = 32) {
  Generator gen(seed);
  return nn::RecurrentSeq2Seq(
      nn::RecurrentSeq2SeqOptions(kVocab, kVocab, hidden).cell(cell).score(score).generator(&gen));
}

nn::PointerNetwork small_pointer(std::uint64_t seed, std::int64_t hidden = 32, bool feed_encoder_states = false) {
  Generator gen(seed);
  return nn::PointerNetwork(
      nn::PointerNetworkOptions(kVocab, hidden).feed_encoder_states(feed_encoder_states).generator(&gen));
}

}  // namespace

TEST_CASE(
    "RecurrentSeq2Seq (GRU and LSTM, with source lengths) and PointerNetwork pass float64 gradcheck and "
    "gradgradcheck") {
  Generator gen(1);
  const Batch b = reversal_batch(2, 3, gen);
  const Tensor lengths = from_vector(std::vector<std::int64_t>{3, 2}, {2});
  for (RecurrentMode cell : {RecurrentMode::Lstm, RecurrentMode::Gru}) {
    CAPTURE(static_cast<int>(cell));
    nn::RecurrentSeq2Seq model = small_seq2seq(2, cell, nn::AlignmentScore::Concat, 2);
    model->to(kFloat64);
    auto f = [&](const TensorList&) { return model(b.src, b.tgt_in, lengths); };
    check_gradients(f, {}, model->named_parameters());
  }
  for (bool feed : {false, true}) {
    CAPTURE(feed);
    nn::PointerNetwork ptr = small_pointer(3, 2, feed);
    ptr->to(kFloat64);
    const Tensor positions = from_vector(std::vector<std::int64_t>{2, 1, 0, 1, 0, 0}, {2, 3});
    auto g = [&](const TensorList&) { return log_softmax(ptr(b.src, positions), -1); };
    check_gradients(g, {}, ptr->named_parameters());
  }
}

TEST_CASE("decoding step by step from the encoder's state equals teacher forcing") {
  Generator gen(4);
  const Batch b = reversal_batch(3, 4, gen);
  nn::RecurrentSeq2Seq model = small_seq2seq(5);
  model->eval();
  NoGradGuard no_grad;
  const Tensor all = model(b.src, b.tgt_in);
  const nn::EncodedSource enc = model->encode(b.src);
  nn::RecurrentState state = enc.state;
  for (std::int64_t t = 0; t < b.tgt_in.shape()[1]; ++t) {
    const nn::DecoderSteps s = model->decode(narrow(b.tgt_in, 1, t, 1), enc, state);
    CHECK(max_abs_diff(s.logits.select(1, 0), all.select(1, t)) < 1e-5);
    state = s.state;
  }
  for (bool feed : {false, true}) {
    CAPTURE(feed);
    nn::PointerNetwork ptr = small_pointer(6, 32, feed);
    ptr->eval();
    const Tensor scores = ptr(b.src, b.positions);
    const nn::EncodedSource penc = ptr->encode(b.src);
    state = penc.state;
    Tensor previous = full({3, 1}, -1.0, kInt64);
    for (std::int64_t t = 0; t < b.positions.shape()[1]; ++t) {
      const nn::DecoderSteps s = ptr->decode(previous, penc, state);
      CHECK(max_abs_diff(s.logits.select(1, 0), scores.select(1, t)) < 1e-5);
      state = s.state;
      previous = narrow(b.positions, 1, t, 1);
    }
  }
}

TEST_CASE("a padded source equals the source alone, and the attention gives padding no weight") {
  Generator gen(7);
  const Batch b = reversal_batch(2, 5, gen);
  nn::RecurrentSeq2Seq model = small_seq2seq(8);
  model->eval();
  const Tensor lengths = from_vector(std::vector<std::int64_t>{5, 3}, {2});
  const nn::EncodedSource enc = model->encode(b.src, lengths);
  const nn::DecoderSteps padded = model->decode(b.tgt_in, enc, enc.state);
  CHECK(narrow(padded.weights.select(0, 1), 1, 3, 2).abs().max().item<double>() == 0.0);
  const Tensor alone_src = narrow(narrow(b.src, 0, 1, 1), 1, 0, 3).contiguous();
  const Tensor alone = model(alone_src, narrow(b.tgt_in, 0, 1, 1));
  CHECK(max_abs_diff(alone, narrow(padded.logits, 0, 1, 1)) < 1e-5);
}

TEST_CASE("RecurrentSeq2Seq and PointerNetwork learn to reverse strings") {
  Generator gen(9);
  const Batch train = reversal_batch(64, 5, gen);
  nn::RecurrentSeq2Seq model = small_seq2seq(10);
  nn::PointerNetwork ptr = small_pointer(11);
  optim::Adam opt(model->parameters(), optim::AdamOptions(1e-2));
  optim::Adam popt(ptr->parameters(), optim::AdamOptions(1e-2));
  double first = 0, last = 0, pfirst = 0, plast = 0;
  for (int step = 0; step < 150; ++step) {
    opt.zero_grad();
    const Tensor loss =
        nn::cross_entropy(model(train.src, train.tgt_in).reshape({-1, kVocab}), train.tgt_out.reshape({-1}));
    loss.backward();
    opt.step();
    popt.zero_grad();
    const Tensor scores = ptr(train.src, train.positions);
    const Tensor ploss = nn::cross_entropy(scores.reshape({-1, 5}), train.positions.reshape({-1}));
    ploss.backward();
    popt.step();
    if (step == 0) {
      first = loss.item();
      pfirst = ploss.item();
    }
    last = loss.item();
    plast = ploss.item();
  }
  CHECK(last < 0.05 * first);
  CHECK(plast < 0.05 * pfirst);
  // Greedy decoding through the decoders reverses held-out strings.
  const Batch test = reversal_batch(20, 5, gen);
  nn::BeamSearchOptions greedy;
  greedy.beam_size = 1;
  greedy.max_new_tokens = 6;
  greedy.eos_token = kEos;
  nn::RecurrentSeq2SeqDecoder decoder(model, test.src);
  const auto out = nn::beam_search(decoder, full({20, 1}, kSos, kInt64), greedy);
  greedy.max_new_tokens = 5;
  greedy.eos_token.reset();
  nn::PointerNetworkDecoder pdecoder(ptr, test.src);
  const auto pout = nn::beam_search(pdecoder, full({20, 1}, -1.0, kInt64), greedy);
  int exact = 0, pexact = 0;
  const std::vector<std::int64_t> want = test.tgt_out.to_vector<std::int64_t>();
  const std::vector<std::int64_t> want_pos = test.positions.to_vector<std::int64_t>();
  for (std::size_t i = 0; i < 20; ++i) {
    exact += out[i][0].tokens == std::vector<std::int64_t>(want.begin() + i * 6, want.begin() + (i + 1) * 6);
    pexact += pout[i][0].tokens == std::vector<std::int64_t>(want_pos.begin() + i * 5, want_pos.begin() + (i + 1) * 5);
  }
  CHECK(exact >= 18);
  CHECK(pexact >= 18);
}

TEST_CASE("beam search over the recurrent decoders: width 1 is greedy, a batch equals its items alone") {
  Generator gen(12);
  const Batch b = reversal_batch(3, 4, gen);
  nn::RecurrentSeq2Seq model = small_seq2seq(13);
  nn::BeamSearchOptions o;
  o.max_new_tokens = 5;
  o.eos_token = kEos;
  o.beam_size = 1;
  nn::RecurrentSeq2SeqDecoder d1(model, b.src);
  const auto width1 = nn::beam_search(d1, full({3, 1}, kSos, kInt64), o);
  // Greedy by hand: argmax of each step.
  {
    NoGradGuard no_grad;
    model->eval();
    const nn::EncodedSource enc = model->encode(b.src);
    nn::RecurrentState state = enc.state;
    Tensor tok = full({3, 1}, kSos, kInt64);
    std::vector<std::vector<std::int64_t>> seqs(3);
    std::vector<bool> ended(3, false);
    for (int t = 0; t < 5; ++t) {
      const nn::DecoderSteps s = model->decode(tok, enc, state);
      state = s.state;
      tok = argmax(s.logits.select(1, 0), -1, /*keepdim=*/true);
      const std::vector<std::int64_t> v = tok.to_vector<std::int64_t>();
      for (std::size_t i = 0; i < 3; ++i)
        if (!ended[i]) {
          seqs[i].push_back(v[i]);
          ended[i] = v[i] == kEos;
        }
    }
    for (std::size_t i = 0; i < 3; ++i) CHECK(width1[i][0].tokens == seqs[i]);
  }
  o.beam_size = 3;
  o.num_return = 2;
  o.length_penalty = 0.6;
  o.coverage_penalty = 0.2;
  nn::RecurrentSeq2SeqDecoder batched(model, b.src);
  const auto all = nn::beam_search(batched, full({3, 1}, kSos, kInt64), o);
  for (std::int64_t i = 0; i < 3; ++i) {
    nn::RecurrentSeq2SeqDecoder one(model, narrow(b.src, 0, i, 1).contiguous());
    const auto alone = nn::beam_search(one, full({1, 1}, kSos, kInt64), o);
    REQUIRE(alone[0].size() == all[static_cast<std::size_t>(i)].size());
    for (std::size_t h = 0; h < alone[0].size(); ++h) {
      CHECK(alone[0][h].tokens == all[static_cast<std::size_t>(i)][h].tokens);
      CHECK(alone[0][h].score == doctest::Approx(all[static_cast<std::size_t>(i)][h].score).epsilon(1e-5));
    }
  }
}

TEST_CASE("the coverage penalty is GNMT's beta * sum log min(coverage, 1) over the source") {
  Generator gen(14);
  const Batch b = reversal_batch(1, 4, gen);
  nn::RecurrentSeq2Seq model = small_seq2seq(15);
  nn::BeamSearchOptions o;
  o.beam_size = 2;
  o.max_new_tokens = 4;
  o.coverage_penalty = 0.5;
  nn::RecurrentSeq2SeqDecoder decoder(model, b.src);
  const auto out = nn::beam_search(decoder, full({1, 1}, kSos, kInt64), o);
  // Recompute the best hypothesis' log-probability and attention by teacher forcing.
  const std::vector<std::int64_t>& y = out[0][0].tokens;
  std::vector<std::int64_t> in{kSos};
  in.insert(in.end(), y.begin(), y.end() - 1);
  NoGradGuard no_grad;
  model->eval();
  const nn::EncodedSource enc = model->encode(b.src);
  const nn::DecoderSteps s = model->decode(from_vector(in, {1, 4}), enc, enc.state);
  const std::vector<double> logp = log_softmax(s.logits.to(kFloat64), -1).to_vector<double>();
  double log_prob = 0;
  for (std::size_t t = 0; t < 4; ++t) log_prob += logp[t * kVocab + static_cast<std::size_t>(y[t])];
  const std::vector<double> coverage = s.weights.to(kFloat64).sum({1}).to_vector<double>();
  double cp = 0;
  for (double c : coverage) cp += std::log(std::min(c, 1.0));
  CHECK(out[0][0].log_prob == doctest::Approx(log_prob).epsilon(1e-5));
  CHECK(out[0][0].score == doctest::Approx(log_prob + 0.5 * cp).epsilon(1e-5));
  // A decoder without attention cannot take the penalty.
  class Plain : public nn::Decoder {
   public:
    Tensor start(const Tensor& p) override { return zeros({p.shape()[0], 3}); }
    Tensor step(const Tensor& t) override { return zeros({t.shape()[0], 3}); }
    void reorder(const Tensor&) override {}
  } plain;
  CHECK_THROWS_WITH_AS(
      nn::beam_search(plain, full({1, 1}, 0.0, kInt64), o),
      "beam_search: the coverage penalty needs the decoder's attention (2, S); this decoder gives none", ValueError);
}

TEST_CASE("RecurrentSeq2Seq, PointerNetwork and their decoders reject bad input with messages naming the values") {
  CHECK_THROWS_WITH_AS(nn::RecurrentSeq2Seq(nn::RecurrentSeq2SeqOptions(0, 5, 4)),
                       "RecurrentSeq2Seq: source_vocab, target_vocab and hidden must be positive, got 0, 5 and 4",
                       ValueError);
  CHECK_THROWS_WITH_AS(nn::RecurrentSeq2Seq(nn::RecurrentSeq2SeqOptions(5, 5, 4).location_kernel(3)),
                       "RecurrentSeq2Seq: location_kernel 3 needs score(AlignmentScore::Additive)", ValueError);
  CHECK_THROWS_WITH_AS(nn::PointerNetwork(nn::PointerNetworkOptions(5, -1)),
                       "PointerNetwork: input_vocab and hidden must be positive, got 5 and -1", ValueError);
  CHECK_THROWS_WITH_AS(nn::RecurrentSeq2Seq(nn::RecurrentSeq2SeqOptions(5, 5, 4).embed_dim(-3)),
                       "RecurrentSeq2Seq: embed_dim must be positive, or 0 for hidden, got -3", ValueError);
  CHECK_THROWS_WITH_AS(nn::PointerNetwork(nn::PointerNetworkOptions(5, 4).embed_dim(-1)),
                       "PointerNetwork: embed_dim must be positive, or 0 for hidden, got -1", ValueError);
  nn::RecurrentSeq2Seq model = small_seq2seq(16, RecurrentMode::Lstm, nn::AlignmentScore::General, 4);
  const Tensor src = from_vector(std::vector<std::int64_t>{2, 3, 4, 2, 2, 3}, {2, 3});
  CHECK_THROWS_WITH_AS(model->encode(src.to(kFloat32)),
                       "RecurrentSeq2Seq: expected an Int64 source (B, S) with S >= 1, got float32 (2,3)", ShapeError);
  CHECK_THROWS_WITH_AS(model->encode(src, from_vector(std::vector<std::int64_t>{3, 0}, {2})),
                       "RecurrentSeq2Seq: lengths[1] = 0 is outside [1, 3]", ValueError);
  CHECK_THROWS_WITH_AS(model->encode(src, from_vector(std::vector<std::int64_t>{3, 1, 2}, {3})),
                       "RecurrentSeq2Seq: lengths must be Int64 (2), got int64 (3)", ShapeError);
  const nn::EncodedSource enc = model->encode(src);
  CHECK_THROWS_WITH_AS(model->decode(full({3, 1}, kSos, kInt64), enc, enc.state),
                       "RecurrentSeq2Seq: expected Int64 target tokens (2, T), got int64 (3,1)", ShapeError);
  nn::PointerNetwork ptr = small_pointer(17, 4);
  const nn::EncodedSource penc = ptr->encode(src);
  CHECK_THROWS_WITH_AS(ptr->decode(from_vector(std::vector<std::int64_t>{-1, 3}, {2, 1}), penc, penc.state),
                       "PointerNetwork: previous position 3 at (1, 0) is outside [-1, 3)", ValueError);
  CHECK_THROWS_WITH_AS(ptr(src, full({2, 0}, 0.0, kInt64)),
                       "PointerNetwork: expected Int64 target positions (B, T) with T >= 1, got int64 (2,0)",
                       ShapeError);
  nn::RecurrentSeq2SeqDecoder decoder(model, src);
  CHECK_THROWS_WITH_AS(decoder.start(full({3, 1}, kSos, kInt64)),
                       "RecurrentSeq2SeqDecoder: 3 prompt rows for 2 sources; the rows must be the sources repeated an "
                       "equal number of times",
                       ShapeError);
}

namespace {

// A pointer network with location-aware attention and no decoder state across steps.
nn::PointerNetwork location_pointer(std::uint64_t seed, std::int64_t hidden) {
  Generator gen(seed);
  return nn::PointerNetwork(nn::PointerNetworkOptions(kVocab, hidden)
                                .feed_encoder_states(true)
                                .location_kernel(3)
                                .recurrent_decoder(false)
                                .generator(&gen));
}

}  // namespace

TEST_CASE("location-aware RecurrentSeq2Seq and PointerNetwork pass float64 gradcheck and gradgradcheck") {
  Generator gen(18);
  const Batch b = reversal_batch(2, 3, gen);
  const Tensor lengths = from_vector(std::vector<std::int64_t>{3, 2}, {2});
  Generator init(19);
  nn::RecurrentSeq2Seq model{nn::RecurrentSeq2SeqOptions(kVocab, kVocab, 2)
                                 .cell(RecurrentMode::Gru)
                                 .score(nn::AlignmentScore::Additive)
                                 .location_kernel(3)
                                 .generator(&init)};
  model->to(kFloat64);
  auto f = [&](const TensorList&) { return model(b.src, b.tgt_in, lengths); };
  check_gradients(f, {}, model->named_parameters());
  nn::PointerNetwork ptr = location_pointer(20, 2);
  ptr->to(kFloat64);
  const Tensor positions = from_vector(std::vector<std::int64_t>{2, 1, 0, 1, 0, 0}, {2, 3});
  // Probabilities rather than log-probabilities: padding has probability 0, log-probability -inf.
  auto g = [&](const TensorList&) { return softmax(ptr(b.src, positions, lengths), -1); };
  check_gradients(g, {}, ptr->named_parameters());
}

TEST_CASE("location-aware decoding step by step, each step given the last attention, equals teacher forcing") {
  Generator gen(21);
  const Batch b = reversal_batch(3, 4, gen);
  Generator init(22);
  nn::RecurrentSeq2Seq model{nn::RecurrentSeq2SeqOptions(kVocab, kVocab, 16)
                                 .score(nn::AlignmentScore::Additive)
                                 .location_kernel(3)
                                 .generator(&init)};
  model->eval();
  NoGradGuard no_grad;
  const Tensor all = model(b.src, b.tgt_in);
  const nn::EncodedSource enc = model->encode(b.src);
  nn::RecurrentState state = enc.state;
  Tensor attention;
  for (std::int64_t t = 0; t < b.tgt_in.shape()[1]; ++t) {
    const nn::DecoderSteps s = model->decode(narrow(b.tgt_in, 1, t, 1), enc, state, attention);
    CHECK(max_abs_diff(s.logits.select(1, 0), all.select(1, t)) < 1e-5);
    state = s.state;
    attention = s.weights.select(1, 0);
  }
  nn::PointerNetwork ptr = location_pointer(23, 16);
  ptr->eval();
  const Tensor scores = ptr(b.src, b.positions);
  const nn::EncodedSource penc = ptr->encode(b.src);
  Tensor previous = full({3, 1}, -1.0, kInt64);
  attention = Tensor();
  for (std::int64_t t = 0; t < b.positions.shape()[1]; ++t) {
    const nn::DecoderSteps s = ptr->decode(previous, penc, penc.state, attention);
    CHECK(max_abs_diff(s.logits.select(1, 0), scores.select(1, t)) < 1e-5);
    attention = s.weights.select(1, 0);
    previous = narrow(b.positions, 1, t, 1);
  }
}

TEST_CASE("a pointer without decoder state: the state passed in comes back unchanged and changes nothing") {
  Generator gen(24);
  const Batch b = reversal_batch(2, 5, gen);
  nn::PointerNetwork ptr = location_pointer(25, 8);
  ptr->eval();
  NoGradGuard no_grad;
  const nn::EncodedSource enc = ptr->encode(b.src);
  const Tensor previous = concat({full({2, 1}, -1.0, kInt64), narrow(b.positions, 1, 0, 4)}, 1);
  const nn::DecoderSteps from_encoder = ptr->decode(previous, enc, enc.state);
  nn::RecurrentState other{randn(enc.state.h.shape(), gen), randn(enc.state.c.shape(), gen)};
  const nn::DecoderSteps from_other = ptr->decode(previous, enc, other);
  CHECK(max_abs_diff(from_encoder.logits, from_other.logits) == 0.0);
  CHECK(max_abs_diff(from_other.state.h, other.h) == 0.0);
  CHECK(max_abs_diff(from_other.state.c, other.c) == 0.0);
  // Each step's query depends on its own input only: step 3 alone, given step 2's attention, is
  // the same step of the whole run.
  const nn::DecoderSteps alone =
      ptr->decode(narrow(previous, 1, 3, 1), enc, enc.state, from_encoder.weights.select(1, 2));
  CHECK(max_abs_diff(alone.logits.select(1, 0), from_encoder.logits.select(1, 3)) < 1e-6);
}

TEST_CASE("greedy decoding of a location-aware pointer through its decoder agrees with teacher forcing") {
  // The decoder carries each row's last attention from step to step (and through beam reordering):
  // the positions it emits are the argmax of the teacher-forced scores of those same positions.
  Generator gen(26);
  const Batch b = reversal_batch(4, 6, gen);
  nn::PointerNetwork ptr = location_pointer(27, 16);
  nn::BeamSearchOptions o;
  o.max_new_tokens = 6;
  for (std::int64_t beam : {1, 3}) {
    CAPTURE(beam);
    o.beam_size = beam;
    nn::PointerNetworkDecoder decoder(ptr, b.src);
    const auto best = nn::beam_search(decoder, full({4, 1}, -1.0, kInt64), o);
    std::vector<std::int64_t> emitted;
    for (const auto& row : best) emitted.insert(emitted.end(), row[0].tokens.begin(), row[0].tokens.end());
    const Tensor positions = from_vector(emitted, {4, 6});
    NoGradGuard no_grad;
    ptr->eval();
    const Tensor log_probs = log_softmax(ptr(b.src, positions), -1);  // (4, 6, S)
    for (std::size_t i = 0; i < 4; ++i) {
      double total = 0.0;
      for (std::int64_t t = 0; t < 6; ++t) total += log_probs.at({static_cast<std::int64_t>(i), t, emitted[i * 6 + t]});
      CHECK(best[i][0].log_prob == doctest::Approx(total).epsilon(1e-5));
    }
    if (beam == 1) CHECK(max_abs_diff(argmax(log_probs, -1), positions) == 0.0);
  }
}
