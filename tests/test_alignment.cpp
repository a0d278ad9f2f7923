// nn::AlignmentAttention (Luong dot/general/concat, Bahdanau additive): each score against the
// formula evaluated pair by pair, padding, float64 gradcheck, the cached key projection, errors.

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "tapegrad/nn/nn.h"
#include "testing.h"

using namespace tapegrad;
using tapegrad::testing::check_gradients;
using tapegrad::testing::max_abs_diff;

namespace {

const nn::AlignmentScore kScores[] = {nn::AlignmentScore::Dot, nn::AlignmentScore::General, nn::AlignmentScore::Concat,
                                      nn::AlignmentScore::Additive};

// score(h, z) for one query row h (dq) and one key z (dk), from the module's parameters.
double pair_score(nn::AlignmentAttention& attn, const Tensor& h, const Tensor& z) {
  const auto params = attn->named_parameters();
  auto param = [&](const std::string& name) {
    for (const auto& [n, p] : params)
      if (n == name) return p;
    FAIL("no parameter " << name);
    return Tensor();
  };
  switch (attn->options().score()) {
    case nn::AlignmentScore::Dot:
      return (h * z).sum().item<double>();
    case nn::AlignmentScore::General:
      return (h * matmul(param("weight"), z)).sum().item<double>();
    case nn::AlignmentScore::Concat:
      return (param("v") * tanh(matmul(param("proj.weight"), concat({h, z}, 0)))).sum().item<double>();
    default:
      return (param("v") * tanh(matmul(param("query_proj.weight"), h) + param("query_proj.bias") +
                                matmul(param("key_proj.weight"), z)))
          .sum()
          .item<double>();
  }
}

}  // namespace

TEST_CASE("alignment scores equal their formulas pair by pair, with padding") {
  Generator gen(1);
  const std::int64_t B = 2, T = 3, S = 4;
  for (nn::AlignmentScore score : kScores) {
    const std::int64_t dq = 3, dk = score == nn::AlignmentScore::Dot ? 3 : 5;
    CAPTURE(static_cast<int>(score));
    nn::AlignmentAttention attn{nn::AlignmentOptions(dq, dk).score(score).attention_dim(6).generator(&gen)};
    attn->to(kFloat64);
    const Tensor q = randn({B, T, dq}, gen, kFloat64), keys = randn({B, S, dk}, gen, kFloat64);
    const Tensor pad = from_vector(std::vector<bool>{false, false, false, false, false, true, false, true}, {B, S});
    const nn::AlignmentResult r = attn(q, keys, pad);
    CHECK(r.weights.shape() == Shape{B, T, S});
    CHECK(r.context.shape() == Shape{B, T, dk});
    const std::vector<double> scores = r.scores.to_vector<double>(), weights = r.weights.to_vector<double>();
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t t = 0; t < T; ++t) {
        double total = 0.0;
        for (std::int64_t s = 0; s < S; ++s) {
          const std::size_t i = static_cast<std::size_t>((b * T + t) * S + s);
          const bool padded = b == 1 && (s == 1 || s == 3);
          if (padded) {
            CHECK(weights[i] == 0.0);
            CHECK(std::isinf(scores[i]));
          } else {
            CHECK(scores[i] ==
                  doctest::Approx(pair_score(attn, q.select(0, b).select(0, t), keys.select(0, b).select(0, s)))
                      .epsilon(1e-12));
          }
          total += weights[i];
        }
        CHECK(total == doctest::Approx(1.0).epsilon(1e-12));
      }
    CHECK(max_abs_diff(r.context, matmul(r.weights, keys)) < 1e-12);
    // A (B, dq) query is one step.
    const nn::AlignmentResult one = attn(q.select(1, 2), keys, pad);
    CHECK(max_abs_diff(one.context, r.context.select(1, 2)) < 1e-12);
  }
}

TEST_CASE("alignment attention passes float64 gradcheck and gradgradcheck for every score") {
  Generator gen(2);
  const Tensor pad = from_vector(std::vector<bool>{false, false, true, false, false, false}, {2, 3});
  for (nn::AlignmentScore score : kScores) {
    CAPTURE(static_cast<int>(score));
    nn::AlignmentAttention attn{nn::AlignmentOptions(2, score == nn::AlignmentScore::Dot ? 2 : 3)
                                    .score(score)
                                    .attention_dim(3)
                                    .generator(&gen)};
    attn->to(kFloat64);
    const std::int64_t dk = attn->options().key_dim();
    auto f = [attn, pad](const TensorList& in) {
      const nn::AlignmentResult r = attn(in[0], in[1], pad);
      return concat({r.context.reshape({-1}), r.weights.reshape({-1})}, 0);
    };
    check_gradients(f, {randn({2, 2, 2}, gen, kFloat64), randn({2, 3, dk}, gen, kFloat64)}, attn->named_parameters());
  }
}

TEST_CASE("additive attention with the keys projected once equals the plain forward") {
  Generator gen(3);
  nn::AlignmentAttention attn{nn::AlignmentOptions(4, 6).score(nn::AlignmentScore::Additive).generator(&gen)};
  const Tensor keys = randn({2, 5, 6}, gen), q = randn({2, 4}, gen);
  const Tensor projected = attn->project_keys(keys);
  CHECK(max_abs_diff(attn->forward_projected(q, keys, projected).context, attn(q, keys).context) == 0.0);
}

TEST_CASE("alignment attention errors name the problem") {
  auto message = [](const std::function<void()>& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  CHECK(message([] { nn::AlignmentAttention(nn::AlignmentOptions(3, 4).score(nn::AlignmentScore::Dot)); }) ==
        "AlignmentAttention: the dot score needs query_dim == key_dim, got 3 and 4 (use the general score to "
        "compare different sizes)");
  nn::AlignmentAttention attn{nn::AlignmentOptions(3, 4)};
  const Tensor keys = zeros({2, 3, 4});
  CHECK(message([&] {
          attn(zeros({2, 3}), keys, from_vector(std::vector<bool>{false, true, true, true, true, true}, {2, 3}));
        }) == "AlignmentAttention: every source position of row 1 is padding; nothing to attend to");
  CHECK(message([&] {
          attn(zeros({2, 3}), zeros({2, 0, 4}));
        }) == "AlignmentAttention: keys (2,0,4) have no source positions; nothing to attend to");
  CHECK(message([&] {
          attn(zeros({2, 5}), keys);
        }) == "AlignmentAttention: expected a query (2, 3) or (2, T, 3) for keys of shape (2,3,4), got shape (2,5)");
  CHECK(message([&] { attn->project_keys(keys); }) ==
        "AlignmentAttention: project_keys is for the additive score, this one is general");
}

namespace {

// The location-aware score of one query row h (dq) and position j of keys (S, dk) given the
// alignment before the step, prev (S), from the module's parameters.
double location_score(nn::AlignmentAttention& attn, const Tensor& h, const Tensor& keys, const Tensor& prev,
                      std::int64_t j) {
  Tensor w_q, b_q, w_k, v, u;
  for (const auto& [name, p] : attn->named_parameters()) {
    if (name == "query_proj.weight") w_q = p;
    if (name == "query_proj.bias") b_q = p;
    if (name == "key_proj.weight") w_k = p;
    if (name == "v") v = p;
    if (name == "location_weight") u = p;
  }
  const std::int64_t kernel = u.shape()[1], source = keys.shape()[0];
  Tensor e = matmul(w_q, h) + b_q + matmul(w_k, keys.select(0, j));
  for (std::int64_t o = -(kernel / 2); o <= kernel / 2; ++o)
    if (j + o >= 0 && j + o < source) e = e + u.select(1, o + kernel / 2) * prev.at({j + o});
  return (v * tanh(e)).sum().item<double>();
}

}  // namespace

TEST_CASE("location-aware attention scores each step from the weights of the step before") {
  Generator gen(5);
  const std::int64_t B = 2, T = 3, S = 5, dq = 3, dk = 4;
  nn::AlignmentAttention attn{nn::AlignmentOptions(dq, dk)
                                  .score(nn::AlignmentScore::Additive)
                                  .attention_dim(6)
                                  .location_kernel(3)
                                  .generator(&gen)};
  attn->to(kFloat64);
  const Tensor q = randn({B, T, dq}, gen, kFloat64), keys = randn({B, S, dk}, gen, kFloat64);
  const Tensor pad =
      from_vector(std::vector<bool>{false, false, false, false, false, false, false, false, true, true}, {B, S});
  const Tensor previous = softmax(randn({B, S}, gen, kFloat64), -1);
  const nn::AlignmentResult r = attn(q, keys, pad, previous);
  CHECK(r.weights.shape() == Shape{B, T, S});
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < T; ++t) {
      const Tensor prev = t == 0 ? previous.select(0, b) : r.weights.select(0, b).select(0, t - 1);
      for (std::int64_t s = 0; s < S; ++s) {
        CAPTURE(b);
        CAPTURE(t);
        CAPTURE(s);
        if (b == 1 && s >= 3) {
          CHECK(r.weights.at({b, t, s}) == 0.0);
          continue;
        }
        CHECK(r.scores.at({b, t, s}) ==
              doctest::Approx(location_score(attn, q.select(0, b).select(0, t), keys.select(0, b), prev, s))
                  .epsilon(1e-12));
      }
    }
  // One step at a time, each given the last one's weights, equals the three steps at once.
  Tensor prev = previous;
  for (std::int64_t t = 0; t < T; ++t) {
    const nn::AlignmentResult one = attn(q.select(1, t), keys, pad, prev);
    CHECK(max_abs_diff(one.weights, r.weights.select(1, t)) < 1e-14);
    CHECK(max_abs_diff(one.context, r.context.select(1, t)) < 1e-14);
    prev = one.weights;
  }
  // Without a previous alignment the first step starts from zeros.
  const nn::AlignmentResult from_zeros = attn(q, keys, pad);
  const nn::AlignmentResult given_zeros = attn(q, keys, pad, zeros({B, S}, kFloat64));
  CHECK(max_abs_diff(from_zeros.weights, given_zeros.weights) == 0.0);
}

TEST_CASE("location-aware attention passes float64 gradcheck and gradgradcheck, the previous alignment included") {
  Generator gen(6);
  nn::AlignmentAttention attn{nn::AlignmentOptions(2, 3)
                                  .score(nn::AlignmentScore::Additive)
                                  .attention_dim(3)
                                  .location_kernel(3)
                                  .generator(&gen)};
  attn->to(kFloat64);
  const Tensor pad = from_vector(std::vector<bool>{false, false, false, false, false, true, false, false}, {2, 4});
  auto f = [attn, pad](const TensorList& in) {
    const nn::AlignmentResult r = attn(in[0], in[1], pad, in[2]);
    return concat({r.context.reshape({-1}), r.weights.reshape({-1})}, 0);
  };
  check_gradients(
      f, {randn({2, 3, 2}, gen, kFloat64), randn({2, 4, 3}, gen, kFloat64), softmax(randn({2, 4}, gen, kFloat64), -1)},
      attn->named_parameters());
}

TEST_CASE("a location term that favours the left neighbour walks the source right to left at any length") {
  // Content carries nothing (zero projections): the location term alone moves the pointer, so
  // the same weights walk 40 positions as well as 4.
  const std::int64_t S = 40, A = 4;
  nn::AlignmentAttention attn{
      nn::AlignmentOptions(2, 2).score(nn::AlignmentScore::Additive).attention_dim(A).location_kernel(3)};
  {
    NoGradGuard no_grad;
    for (auto& [name, p] : attn->named_parameters()) {
      if (name == "v") {
        p.fill_(3.0);
      } else if (name == "location_weight") {
        p.copy_(from_vector(std::vector<float>{-5, -5, 5}, {1, 3}));  // offsets -1, 0, +1 of every row
      } else {
        p.fill_(0.0);
      }
    }
  }
  Generator gen(7);
  const Tensor keys = randn({1, S, 2}, gen);
  std::vector<float> last(S, 0.0f);
  last[S - 1] = 1.0f;
  const nn::AlignmentResult r = attn(zeros({1, S - 1, 2}), keys, Tensor(), from_vector(last, {1, S}));
  const std::vector<std::int64_t> argmax_steps = argmax(r.weights.select(0, 0), -1).to_vector<std::int64_t>();
  for (std::int64_t t = 0; t < S - 1; ++t) CHECK(argmax_steps[static_cast<std::size_t>(t)] == S - 2 - t);
  CHECK(r.weights.select(0, 0).max({1}).min().item<double>() > 0.9);
}

TEST_CASE("location-aware attention errors name the problem") {
  CHECK_THROWS_WITH_AS(
      nn::AlignmentAttention(nn::AlignmentOptions(3, 4).score(nn::AlignmentScore::Additive).location_kernel(2)),
      "AlignmentAttention: location_kernel must be 0 (none) or odd, got 2", ValueError);
  CHECK_THROWS_WITH_AS(nn::AlignmentAttention(nn::AlignmentOptions(3, 4).location_kernel(3)),
                       "AlignmentAttention: location_kernel is for the additive score, this one is general",
                       ValueError);
  nn::AlignmentAttention general{nn::AlignmentOptions(3, 4)};
  const Tensor keys = zeros({2, 3, 4});
  CHECK_THROWS_WITH_AS(general(zeros({2, 3}), keys, Tensor(), zeros({2, 3})),
                       "AlignmentAttention: the previous alignment is for location-aware attention (location_kernel)",
                       ValueError);
  nn::AlignmentAttention located{nn::AlignmentOptions(3, 4).score(nn::AlignmentScore::Additive).location_kernel(3)};
  CHECK_THROWS_WITH_AS(located(zeros({2, 3}), keys, Tensor(), zeros({2, 4})),
                       "AlignmentAttention: the previous alignment must have shape (2,3), got (2,4)", ShapeError);
  CHECK_THROWS_WITH_AS(located(zeros({2, 0, 3}), keys),
                       "AlignmentAttention: a location-aware query needs at least one step, got shape (2,0,3)",
                       ShapeError);
}
