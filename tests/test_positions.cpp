// Position encodings: sinusoidal table values worked by hand, learned position embeddings,
// rotary embeddings (hand-worked rotations, norm preservation, relative-position property,
// cached offsets), float64 gradchecks, error messages.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "tapegrad/nn/nn.h"
#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::check_gradients;
using tapegrad::testing::check_values;
using tapegrad::testing::max_abs_diff;
using tapegrad::testing::names;

namespace {

// Dot products of matching rows over the last axis: a, b (..., D) -> (...).
Tensor row_dots(const Tensor& a, const Tensor& b) { return (a * b).sum({-1}); }

}  // namespace

// ---------------------------------------------------------------- sinusoidal

TEST_CASE("positions: sinusoidal table values") {
  nn::SinusoidalPositionalEncoding pe(3, 4);
  CHECK(pe->parameters().empty());
  CHECK(names(pe->named_buffers()) == std::vector<std::string>{"pe"});
  CHECK(pe->table().shape() == Shape{3, 4});
  // pos 0: sin 0, cos 0 in every pair.
  check_values(pe->table().select(0, 0), {0, 1, 0, 1}, 1e-12);
  // pos 1, D = 4: pair 1 has frequency 10000^(-2/4) = 0.01 -> [sin 1, cos 1, sin 0.01, cos 0.01].
  check_values(pe->table().select(0, 1), {std::sin(1.0), std::cos(1.0), std::sin(0.01), std::cos(0.01)});
  check_values(pe->table().select(0, 1), {0.8414709848, 0.5403023059, 0.0099998333, 0.9999500004});
  check_values(pe->table().select(0, 2), {0.9092974268, -0.4161468365, 0.0199986667, 0.9998000067});

  // Odd D = 3: columns sin(pos), cos(pos), sin(pos / 10000^(2/3)); the last sine has no partner.
  nn::SinusoidalPositionalEncoding odd(2, 3);
  check_values(odd->table().select(0, 1), {std::sin(1.0), std::cos(1.0), std::sin(std::pow(10000.0, -2.0 / 3.0))});
}

TEST_CASE("positions: sinusoidal forward adds the first T rows, offsets, dtypes, errors") {
  nn::SinusoidalPositionalEncoding pe(5, 4);
  Tensor x = ones({2, 3, 4});  // (B, T, D)
  Tensor y = pe(x);
  CHECK(y.shape() == Shape{2, 3, 4});
  // Batch 1, position 1.
  check_values(y.select(0, 1).select(0, 1),
               {1 + std::sin(1.0), 1 + std::cos(1.0), 1 + std::sin(0.01), 1 + std::cos(0.01)});
  // An offset of 2 for a single step: position 2.
  check_values(pe(zeros({1, 1, 4}), 2), {std::sin(2.0), std::cos(2.0), std::sin(0.02), std::cos(0.02)});
  // A float64 input gets a float64 result.
  CHECK(pe(ones({1, 2, 4}, kFloat64)).dtype() == kFloat64);
  // Gradient of x passes through unchanged.
  Generator gen(0);
  check_gradients([&](const TensorList& in) { return pe(in[0]); }, {randn({2, 3, 4}, gen, kFloat64)});

  CHECK_THROWS_WITH_AS(pe(ones({1, 6, 4})),
                       "SinusoidalPositionalEncoding: positions 0..5 (offset 0, length 6) exceed max_len 5",
                       ValueError);
  CHECK_THROWS_WITH_AS(pe(ones({1, 2, 4}), 4),
                       "SinusoidalPositionalEncoding: positions 4..5 (offset 4, length 2) exceed max_len 5",
                       ValueError);
  CHECK_THROWS_WITH_AS(pe(ones({1, 3, 6})),
                       "SinusoidalPositionalEncoding: expected input (..., T, 4), got shape (1,3,6)", ShapeError);
  CHECK_THROWS_WITH_AS(nn::SinusoidalPositionalEncoding(0, 4),
                       "SinusoidalPositionalEncoding: max_len and dim must be positive, got 0 and 4", ValueError);
}

TEST_CASE("positions: tables too large to hold and offsets past any int64 are refused, not overflowed") {
  // max_len x dim wraps an int64 to 0 here: the table would have been a vector of no elements.
  CHECK_THROWS_WITH_AS(nn::SinusoidalPositionalEncoding(std::int64_t{1} << 61, 8),
                       "SinusoidalPositionalEncoding: a table of max_len 2305843009213693952 x dim 8 is too large (at "
                       "most 4294967296 elements)",
                       ValueError);
  CHECK_THROWS_WITH_AS(nn::RotaryEmbedding(16, std::int64_t{1} << 61),
                       "RotaryEmbedding: a table of max_len 2305843009213693952 x dim 16 is too large (at most "
                       "4294967296 elements)",
                       ValueError);
  CHECK_THROWS_AS(nn::LearnedPositionEmbedding(std::int64_t{1} << 40, 8), ValueError);
  const std::int64_t huge = std::numeric_limits<std::int64_t>::max();
  nn::RotaryEmbedding rope(4, 8);
  CHECK_THROWS_WITH_AS(rope(ones({1, 1, 2, 4}), huge),
                       "RotaryEmbedding: positions 9223372036854775807..9223372036854775808 (offset "
                       "9223372036854775807, length 2) exceed max_len 8",
                       ValueError);
  nn::SinusoidalPositionalEncoding pe(8, 4);
  CHECK_THROWS_AS(pe(ones({1, 2, 4}), huge - 1), ValueError);
  nn::LearnedPositionEmbedding learned(8, 4);
  CHECK_THROWS_AS(learned(ones({1, 2, 4}), huge), ValueError);
}

TEST_CASE("positions: sinusoidal table in the model's dtype, with a base option") {
  CHECK(nn::SinusoidalPositionalEncodingOptions(8, 6).base() == 10000.0);
  const std::int64_t max_len = 7, dim = 5;
  const double base = 100.0;
  nn::SinusoidalPositionalEncoding pe{nn::SinusoidalPositionalEncodingOptions(max_len, dim).base(base)};
  CHECK(pe->base() == base);
  // The formula in double: PE[pos, 2i] = sin(pos / base^(2i / dim)), PE[pos, 2i + 1] = cos(the same).
  std::vector<double> expected;
  for (std::int64_t pos = 0; pos < max_len; ++pos)
    for (std::int64_t j = 0; j < dim; ++j) {
      const std::int64_t pair = j / 2;  // columns 2i and 2i + 1 share the frequency base^(-2i / dim)
      const double a =
          static_cast<double>(pos) / std::pow(base, static_cast<double>(2 * pair) / static_cast<double>(dim));
      expected.push_back(j % 2 == 0 ? std::sin(a) : std::cos(a));
    }
  // float32 by default: each value the double one rounded once.
  CHECK(pe->table().dtype() == kFloat32);
  const std::vector<double> f32 = pe->table().to_vector<double>();
  for (std::size_t i = 0; i < expected.size(); ++i)
    CHECK(f32[i] == static_cast<double>(static_cast<float>(expected[i])));
  // After Module::to(kFloat64): the double values themselves, not the float32 ones widened; in the
  // table, in the state dict's buffer and in forward.
  pe->to(kFloat64);
  // Read before any table() or forward call: to() itself refills the buffer.
  const std::vector<double> buffer_after_to = pe->state_dict().front().second.to_vector<double>();
  CHECK(pe->table().dtype() == kFloat64);
  const std::vector<double> f64 = pe->table().to_vector<double>();
  CHECK(buffer_after_to == f64);
  int widened = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    CHECK(f64[i] == doctest::Approx(expected[i]).epsilon(1e-15));
    if (f64[i] != expected[i] && f64[i] == f32[i]) ++widened;
  }
  CHECK(widened == 0);
  const Tensor buffer = pe->state_dict().front().second;
  CHECK(buffer.dtype() == kFloat64);
  CHECK(buffer.to_vector<double>() == f64);
  check_values(pe(zeros({1, max_len, dim}, kFloat64)), expected, 1e-15);
  // Back to float32: rounded from the doubles again.
  pe->to(kFloat32);
  CHECK(pe->table().to_vector<double>() == f32);
  CHECK_THROWS_WITH_AS(nn::SinusoidalPositionalEncoding(nn::SinusoidalPositionalEncodingOptions(4, 4).base(0.0)),
                       "SinusoidalPositionalEncoding: base must be positive, got 0", ValueError);
}

// ---------------------------------------------------------------- learned

TEST_CASE("positions: learned position embedding adds rows and trains them") {
  Generator gen(1);
  nn::LearnedPositionEmbedding pos(4, 3);
  CHECK(names(pos->named_parameters()) == std::vector<std::string>{"weight"});
  {
    NoGradGuard no_grad;
    pos->weight().copy_(from_vector(std::vector<double>{0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32}, {4, 3}));
  }
  Tensor x = ones({2, 2, 3});
  check_values(pos(x), {1, 2, 3, 11, 12, 13, 1, 2, 3, 11, 12, 13});
  check_values(pos(zeros({1, 1, 3}), 3), {30, 31, 32});
  // Each used row receives the batch count (2); unused rows none.
  pos(x).sum().backward();
  check_values(pos->weight().grad(), {2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0});

  pos->to(kFloat64);
  check_gradients([&](const TensorList& in) { return pos(in[0]) * pos(in[0]); }, {randn({2, 3, 3}, gen, kFloat64)}, {},
                  pos->parameters());
  CHECK_THROWS_WITH_AS(pos(ones({1, 5, 3}, kFloat64)),
                       "LearnedPositionEmbedding: positions 0..4 (offset 0, length 5) exceed max_len 4", ValueError);
  CHECK_THROWS_AS(pos(ones({1, 2, 2}, kFloat64)), ShapeError);
}

// ---------------------------------------------------------------- rotary

TEST_CASE("positions: rotary rotates each pair by pos * base^(-2i/Dh)") {
  nn::RotaryEmbedding rope(4, 8);
  CHECK(rope->parameters().empty());
  CHECK(rope->state_dict().empty());
  // x = (1, 0, 0, 1) at positions 0 and 1 (B = H = 1, T = 2).
  Tensor x = from_vector(std::vector<double>{1, 0, 0, 1, 1, 0, 0, 1}, {1, 1, 2, 4});
  Tensor y = rope(x);
  CHECK(y.shape() == Shape{1, 1, 2, 4});
  // Position 0: no rotation. Position 1: pair 0 by 1 rad -> (cos 1, sin 1); pair 1 by 0.01 rad ->
  // (0, 1) becomes (-sin 0.01, cos 0.01).
  check_values(y, {1, 0, 0, 1, std::cos(1.0), std::sin(1.0), -std::sin(0.01), std::cos(0.01)}, 1e-12);
  // x = (1, 2, 3, 4) at position 2: pair 0 by 2 rad, pair 1 by 0.02 rad.
  Tensor x2 = from_vector(std::vector<double>{1, 2, 3, 4}, {1, 1, 1, 4});
  check_values(rope(x2, 2), {-2.2347416902, 0.0770037537, 2.9194053532, 4.0591960267}, 1e-9);
  // base 100: pair 1 turns by 1 / 100^(2/4) = 0.1 rad at position 1; float32 input.
  nn::RotaryEmbedding rope100{nn::RotaryEmbeddingOptions(4, 2).base(100.0)};
  Tensor y100 = rope100(from_vector(std::vector<float>{1, 2, 3, 4}, {1, 1, 1, 4}), 1);
  CHECK(y100.dtype() == kFloat32);
  check_values(y100, {-1.1426396637, 1.9220755965, 2.5856788292, 4.2795169111}, 1e-6);
}

TEST_CASE("positions: rotary keeps norms and q.k depends only on the relative position") {
  Generator gen(2);
  nn::RotaryEmbedding rope(6, 16);
  Tensor x = randn({2, 3, 5, 6}, gen, kFloat64);  // (B, H, T, Dh)
  Tensor y = rope(x);
  check_values(row_dots(y, y), row_dots(x, x).to_vector<double>(), 1e-12);

  // One query vector q and key vector k placed at positions (m, n): the rotated dot product
  // equals that at (m + s, n + s) for any shift s.
  Tensor q = randn({1, 1, 1, 6}, gen, kFloat64);
  Tensor k = randn({1, 1, 1, 6}, gen, kFloat64);
  auto score = [&](std::int64_t m, std::int64_t n) { return row_dots(rope(q, m), rope(k, n)).item(); };
  const double s_3_1 = score(3, 1);
  CHECK(score(5, 3) == doctest::Approx(s_3_1).epsilon(1e-12));
  CHECK(score(12, 10) == doctest::Approx(s_3_1).epsilon(1e-12));
  CHECK(score(2, 0) == doctest::Approx(s_3_1).epsilon(1e-12));
  // A different relative position gives a different score (the property is not vacuous).
  CHECK(std::abs(score(4, 1) - s_3_1) > 1e-6);
  // Without rotation the score is the plain dot product, which equals the score at equal positions.
  CHECK(score(7, 7) == doctest::Approx(row_dots(q, k).item()).epsilon(1e-12));
}

TEST_CASE("positions: rotary with an offset equals the matching rows of a full pass") {
  Generator gen(3);
  nn::RotaryEmbedding rope(4, 6);
  Tensor x = randn({1, 2, 5, 4}, gen, kFloat64);
  Tensor full = rope(x);
  Tensor tail = rope(x.narrow(2, 3, 2), 3);
  check_values(tail, full.narrow(2, 3, 2).to_vector<double>(), 1e-12);
}

TEST_CASE("positions: rotary gradcheck, non-contiguous input, errors") {
  Generator gen(4);
  nn::RotaryEmbedding rope(4, 8);
  check_gradients([&](const TensorList& in) { return rope(in[0], 1); }, {randn({1, 2, 3, 4}, gen, kFloat64)});
  // (B, T, H, Dh) transposed to (B, H, T, Dh), as attention produces it.
  check_gradients([&](const TensorList& in) { return rope(in[0].transpose(1, 2)); },
                  {randn({1, 3, 2, 4}, gen, kFloat64)});
  CHECK_THROWS_WITH_AS(nn::RotaryEmbedding(5, 8), "RotaryEmbedding: head_dim must be even (pairs are rotated), got 5",
                       ValueError);
  CHECK_THROWS_WITH_AS(rope(ones({1, 1, 9, 4})),
                       "RotaryEmbedding: positions 0..8 (offset 0, length 9) exceed max_len 8", ValueError);
  CHECK_THROWS_WITH_AS(rope(ones({1, 1, 2, 4}), -1), "RotaryEmbedding: offset must be >= 0, got -1", ValueError);
  CHECK_THROWS_WITH_AS(rope(ones({1, 1, 2, 6})), "RotaryEmbedding: expected input (..., T, 4), got shape (1,1,2,6)",
                       ShapeError);
  CHECK_THROWS_AS(rope(from_vector(std::vector<std::int64_t>{1, 2, 3, 4}, {1, 4})), TypeError);
}

TEST_CASE("random_ordered_positions: distinct sorted positions in range, reproducible from the generator") {
  Generator a(5), b(5);
  const Tensor p = nn::random_ordered_positions(50, 7, 20, a);
  CHECK(p.shape() == Shape{50, 7});
  const std::vector<std::int64_t> v = p.to_vector<std::int64_t>();
  std::vector<int> seen(20, 0);
  for (std::size_t r = 0; r < 50; ++r)
    for (std::size_t i = 0; i < 7; ++i) {
      const std::int64_t x = v[r * 7 + i];
      CHECK((x >= 0 && x < 20));
      if (i > 0) CHECK(x > v[r * 7 + i - 1]);
      seen[static_cast<std::size_t>(x)] = 1;
    }
  CHECK(std::count(seen.begin(), seen.end(), 1) == 20);  // every position occurs somewhere
  CHECK(nn::random_ordered_positions(50, 7, 20, b).to_vector<std::int64_t>() == v);
  CHECK_THROWS_WITH_AS(
      nn::random_ordered_positions(1, 21, 20, a),
      "random_ordered_positions: need 0 <= count <= range and rows >= 0, got rows 1, count 21, range 20", ValueError);
}

TEST_CASE("forward_at adds the table's rows at the given positions, and only those rows get gradient") {
  Generator gen(6);
  nn::LearnedPositionEmbedding learned{nn::LearnedPositionEmbeddingOptions(10, 4).generator(&gen)};
  nn::SinusoidalPositionalEncoding sinusoidal(10, 4);
  const Tensor x = randn({2, 3, 4}, gen);
  const Tensor positions = from_vector(std::vector<std::int64_t>{0, 4, 9, 1, 2, 3}, {2, 3});
  const Tensor y = learned->forward_at(x, positions);
  CHECK(max_abs_diff(y.select(0, 0).select(0, 1), x.select(0, 0).select(0, 1) + learned->weight().select(0, 4)) == 0.0);
  CHECK(max_abs_diff(sinusoidal->forward_at(x, positions).select(0, 1).select(0, 2),
                     x.select(0, 1).select(0, 2) + sinusoidal->table().select(0, 3)) == 0.0);
  y.sum().backward();
  const std::vector<double> row_norms = learned->weight().grad().abs().sum({1}).to_vector<double>();
  for (std::size_t r = 0; r < 10; ++r) CHECK((row_norms[r] > 0) == (r <= 4 || r == 9));
  CHECK_THROWS_WITH_AS(learned->forward_at(x, from_vector(std::vector<std::int64_t>{0, 4, 10, 1, 2, 3}, {2, 3})),
                       "LearnedPositionEmbedding: position 10 is outside [0, 10)", IndexError);
  CHECK_THROWS_WITH_AS(sinusoidal->forward_at(x, positions.to(kFloat32)),
                       "SinusoidalPositionalEncoding: expected x (B, T, 4) and Int64 positions (B, T), got x (2,3,4) "
                       "and float32 positions (2,3)",
                       ShapeError);
}

TEST_CASE(
    "EncoderDecoder with randomized positions: gradcheck, cached decoding equals teacher forcing, beam width 1 "
    "equals greedy_decode") {
  Generator gen(7);
  auto make = [&](DType dtype) {
    nn::EncoderDecoder model{nn::EncoderDecoderOptions()
                                 .src_vocab(5)
                                 .tgt_vocab(5)
                                 .max_len(8)
                                 .encoder_layers(1)
                                 .decoder_layers(1)
                                 .positions(nn::PositionEncoding::Sinusoidal)
                                 .randomized_positions(64)
                                 .layer(nn::TransformerLayerOptions(4, 2).dim_feedforward(8).dropout(0.0))
                                 .generator(&gen)};
    model->to(dtype);
    return model;
  };
  const Tensor src = from_vector(std::vector<std::int64_t>{2, 3, 4, 2, 4, 4}, {2, 3});
  const Tensor tgt_in = from_vector(std::vector<std::int64_t>{0, 4, 3, 0, 2, 2}, {2, 3});
  nn::EncoderDecoder model64 = make(kFloat64);
  auto f = [&](const TensorList&) {
    model64->position_generator().manual_seed(11);  // the same positions at every evaluation
    return model64(src, tgt_in);
  };
  const GradcheckResult r = gradcheck(f, {}, model64->named_parameters());
  CHECK_MESSAGE(r.passed, r.message());

  nn::EncoderDecoder model = make(kFloat32);
  model->eval();
  model->position_generator().manual_seed(3);
  const Tensor all = model(src, tgt_in);  // draws the source's positions, then the target's
  model->position_generator().manual_seed(3);
  const Tensor memory = model->encode(src);
  nn::DecoderCache cache;
  cache.positions = model->sample_positions(2, 3);
  for (std::int64_t t = 0; t < 3; ++t) {
    const Tensor logits = model->decode(tgt_in.narrow(1, t, 1).contiguous(), memory, {}, {}, &cache).output;
    CHECK(max_abs_diff(logits.select(1, 0), all.select(1, t)) < 1e-5);
  }
  // Positions differ between draws, so outputs do too.
  CHECK(max_abs_diff(model(src, tgt_in), all) > 1e-4);

  model->position_generator().manual_seed(9);
  const Tensor greedy = model->greedy_decode(src, 0, 1, 4);
  model->position_generator().manual_seed(9);
  nn::EncoderDecoderDecoder decoder(model, src, Tensor(), 4);
  nn::BeamSearchOptions o;
  o.beam_size = 1;
  o.max_new_tokens = 4;
  o.eos_token = 1;
  const auto best = nn::beam_search(decoder, full({2, 1}, 0.0, kInt64), o);
  for (std::int64_t i = 0; i < 2; ++i) {
    std::vector<std::int64_t> row;
    for (std::int64_t t = 1; t < greedy.shape()[1]; ++t) {
      row.push_back(greedy.at({i, t}));
      if (row.back() == 1) break;
    }
    CHECK(best[static_cast<std::size_t>(i)][0].tokens == row);
  }
  CHECK_THROWS_WITH_AS(nn::EncoderDecoder(nn::EncoderDecoderOptions().max_len(8).randomized_positions(4)),
                       "EncoderDecoder: randomized_positions needs learned or sinusoidal positions and a range of at "
                       "least max_len = 8, got 4",
                       ValueError);
}
