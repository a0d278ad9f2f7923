// scaled_dot_product_attention as torch's F.scaled_dot_product_attention: any number of leading
// axes (broadcast between q and k/v), scale, attn_mask (Bool keep or additive float), the two
// causal alignments, dropout; hand-worked numbers, the math composition in float64 and gradchecks
// (one through dropout).

#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "tapegrad/nn/nn.h"
#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::check_gradients;
using tapegrad::testing::check_values;
using tapegrad::testing::max_abs_diff;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Bool (Tq, Tk), true where query i may see key j: j <= i + offset.
Tensor causal_keep(std::int64_t tq, std::int64_t tk, std::int64_t offset) {
  std::vector<bool> data;
  for (std::int64_t i = 0; i < tq; ++i)
    for (std::int64_t j = 0; j < tk; ++j) data.push_back(j <= i + offset);
  return from_vector(data, {tq, tk});
}

// The math composition torch documents: softmax(scale * q @ k^T + add, masked to -inf where not
// keep) @ v, with matmul's broadcasting of the leading axes. Rows with no key to see are not
// handled here (the tests give none).
Tensor reference(const Tensor& q, const Tensor& k, const Tensor& v, double scale, const Tensor& keep = Tensor(),
                 const Tensor& add = Tensor()) {
  Tensor scores = matmul(q, k.mT()) * scale;
  if (add.defined()) scores = scores + add;
  if (keep.defined()) scores = where(keep, scores, -kInf);
  return matmul(softmax(scores, -1), v);
}

// Hand-worked inputs, D = 4 (default scale 1/2): q = (1,1,1,1) in every row, keys k0 = 0,
// k1 = (ln3/2)(1,1,1,1), k2 = 0, so the scores of any query are (0, ln 3, 0); values
// v0 = (2, 4), v1 = (6, 12), v2 = (0, 0).
struct HandWorked {
  Tensor q(std::int64_t tq) const { return ones({1, 1, tq, 4}, kFloat64); }
  Tensor k(std::int64_t tk) const {
    const double l = std::log(3.0) / 2.0;
    return from_vector(std::vector<double>{0, 0, 0, 0, l, l, l, l, 0, 0, 0, 0}, {1, 1, 3, 4}).narrow(2, 0, tk);
  }
  Tensor v(std::int64_t tk) const {
    return from_vector(std::vector<double>{2, 4, 6, 12, 0, 0}, {1, 1, 3, 2}).narrow(2, 0, tk);
  }
};

nn::AttentionForwardOptions causal(nn::CausalAlignment alignment) {
  return nn::AttentionForwardOptions().is_causal(true).causal_alignment(alignment);
}

}  // namespace

TEST_CASE("sdpa: causal alignment top-left (torch's default) and bottom-right, hand-worked") {
  const HandWorked hw;
  using nn::CausalAlignment;
  CHECK(nn::AttentionForwardOptions().causal_alignment() == CausalAlignment::TopLeft);
  SUBCASE("Tq = 2 < Tk = 3") {
    // Top-left: query 0 sees k0 (output v0), query 1 sees k0, k1 (weights 1/4, 3/4: (5, 10)).
    auto tl = nn::scaled_dot_product_attention(hw.q(2), hw.k(3), hw.v(3),
                                               causal(CausalAlignment::TopLeft).need_weights(true));
    check_values(tl.output, {2, 4, 5, 10}, 1e-12);
    check_values(tl.weights, {1, 0, 0, 0.25, 0.75, 0}, 1e-12);
    // Bottom-right: query 0 sees k0, k1 (5, 10); query 1 sees all three (1/5, 3/5, 1/5: (4, 8)).
    auto br = nn::scaled_dot_product_attention(hw.q(2), hw.k(3), hw.v(3),
                                               causal(CausalAlignment::BottomRight).need_weights(true));
    check_values(br.output, {5, 10, 4, 8}, 1e-12);
    check_values(br.weights, {0.25, 0.75, 0, 0.2, 0.6, 0.2}, 1e-12);
  }
  SUBCASE("Tq = 3 > Tk = 2") {
    // Top-left: rows see k0; k0, k1; k0, k1.
    check_values(nn::scaled_dot_product_attention(hw.q(3), hw.k(2), hw.v(2), causal(CausalAlignment::TopLeft)).output,
                 {2, 4, 5, 10, 5, 10}, 1e-12);
    // Bottom-right: row 0 sees no key (zero output, no NaN), row 1 sees k0, row 2 k0 and k1.
    auto br = nn::scaled_dot_product_attention(hw.q(3), hw.k(2), hw.v(2),
                                               causal(CausalAlignment::BottomRight).need_weights(true));
    check_values(br.output, {0, 0, 2, 4, 5, 10}, 1e-12);
    check_values(br.weights, {0, 0, 1, 0, 0.25, 0.75}, 1e-12);
  }
  SUBCASE("Tq = Tk: the alignments agree") {
    Tensor a = nn::scaled_dot_product_attention(hw.q(3), hw.k(3), hw.v(3), causal(CausalAlignment::TopLeft)).output;
    Tensor b = nn::scaled_dot_product_attention(hw.q(3), hw.k(3), hw.v(3), causal(CausalAlignment::BottomRight)).output;
    check_values(a, {2, 4, 5, 10, 4, 8}, 1e-12);
    CHECK(max_abs_diff(a, b) == 0.0);
  }
}

TEST_CASE("sdpa: scale, and attn_mask as torch's (Bool = may attend, float = added)") {
  const HandWorked hw;
  // scale 1: scores (0, 2 ln 3), weights (1/10, 9/10), output (0.2 + 5.4, 0.4 + 10.8).
  check_values(
      nn::scaled_dot_product_attention(hw.q(1), hw.k(2), hw.v(2), nn::AttentionForwardOptions().scale(1.0)).output,
      {5.6, 11.2}, 1e-12);
  // Bool attn_mask excluding k1: weights (1/2, 0, 1/2), output (1, 2).
  Tensor keep = from_vector(std::vector<bool>{true, false, true}, {1, 3});
  check_values(
      nn::scaled_dot_product_attention(hw.q(1), hw.k(3), hw.v(3), nn::AttentionForwardOptions().attn_mask(keep)).output,
      {1, 2}, 1e-12);
  // Float attn_mask (0, -ln 3, 0) is added: scores all 0, output the mean of the values (8/3, 16/3).
  Tensor add = from_vector(std::vector<double>{0, -std::log(3.0), 0}, {1, 3});
  check_values(
      nn::scaled_dot_product_attention(hw.q(1), hw.k(3), hw.v(3), nn::AttentionForwardOptions().attn_mask(add)).output,
      {8.0 / 3.0, 16.0 / 3.0}, 1e-12);
  // attn_mask is the same as the named masks it stands for.
  Generator gen(11);
  Tensor q = randn({2, 3, 4, 5}, gen, kFloat64), k = randn({2, 3, 6, 5}, gen, kFloat64);
  Tensor v = randn({2, 3, 6, 2}, gen, kFloat64), bias = randn({4, 6}, gen, kFloat64);
  Tensor keep2 = gt(randn({3, 4, 6}, gen, kFloat64), -0.5);
  keep2 = logical_or(keep2, causal_keep(4, 6, 0));  // every row keeps a key
  CHECK(max_abs_diff(
            nn::scaled_dot_product_attention(q, k, v, nn::AttentionForwardOptions().attn_mask(keep2)).output,
            nn::scaled_dot_product_attention(q, k, v, nn::AttentionForwardOptions().keep_mask(keep2)).output) == 0.0);
  CHECK(max_abs_diff(
            nn::scaled_dot_product_attention(q, k, v, nn::AttentionForwardOptions().attn_mask(bias)).output,
            nn::scaled_dot_product_attention(q, k, v, nn::AttentionForwardOptions().additive_mask(bias)).output) ==
        0.0);
  CHECK_THROWS_WITH_AS(
      nn::scaled_dot_product_attention(q, k, v, nn::AttentionForwardOptions().attn_mask(bias).keep_mask(keep2)),
      "scaled_dot_product_attention: give attn_mask or keep_mask / additive_mask, not both", ValueError);
}

TEST_CASE("sdpa: 3-D, 4-D and 5-D inputs with broadcast leading axes equal the float64 math composition") {
  Generator gen(12);
  struct Case {
    const char* name;
    Shape q, k, v;
  };
  const std::vector<Case> cases = {
      {"3-D (B, T, D)", {2, 4, 5}, {2, 6, 5}, {2, 6, 3}},
      {"4-D (B, H, T, D)", {2, 3, 4, 5}, {2, 3, 6, 5}, {2, 3, 6, 3}},
      {"4-D, k/v shared by the heads", {2, 3, 4, 5}, {2, 1, 6, 5}, {2, 1, 6, 3}},
      {"5-D (B, G, H, T, D), q broadcast over B", {1, 2, 2, 4, 5}, {2, 2, 2, 6, 5}, {2, 2, 2, 6, 3}},
      {"2-D (T, D) against 3-D k, v", {4, 5}, {2, 6, 5}, {2, 6, 3}},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    Tensor q = randn(c.q, gen, kFloat64), k = randn(c.k, gen, kFloat64), v = randn(c.v, gen, kFloat64);
    const double scale = 1.0 / std::sqrt(5.0);
    Tensor plain = nn::scaled_dot_product_attention(q, k, v).output;
    CHECK(max_abs_diff(plain, reference(q, k, v, scale)) < 1e-12);
    CHECK(plain.dim() == std::max({q.dim(), k.dim(), v.dim()}));
    // Causal, both alignments: the fused causal softmax against the composition.
    CHECK(max_abs_diff(nn::scaled_dot_product_attention(q, k, v, causal(nn::CausalAlignment::TopLeft)).output,
                       reference(q, k, v, scale, causal_keep(4, 6, 0))) < 1e-12);
    CHECK(max_abs_diff(nn::scaled_dot_product_attention(q, k, v, causal(nn::CausalAlignment::BottomRight)).output,
                       reference(q, k, v, scale, causal_keep(4, 6, 2))) < 1e-12);
    // A custom scale with an additive mask, and a Bool mask with causal (combined masks).
    Tensor add = randn({4, 6}, gen, kFloat64);
    CHECK(max_abs_diff(
              nn::scaled_dot_product_attention(q, k, v, nn::AttentionForwardOptions().scale(0.3).attn_mask(add)).output,
              reference(q, k, v, 0.3, Tensor(), add)) < 1e-12);
    Tensor keep = from_vector(std::vector<bool>{true, false, true, true, false, true}, {6});
    auto opts = causal(nn::CausalAlignment::BottomRight).attn_mask(keep);
    CHECK(max_abs_diff(nn::scaled_dot_product_attention(q, k, v, opts).output,
                       reference(q, k, v, scale, logical_and(keep, causal_keep(4, 6, 2)))) < 1e-12);
  }
}

TEST_CASE("sdpa: key_padding_mask on 3-D and 5-D inputs pads keys of the first axis's batch") {
  Generator gen(13);
  Tensor pad = from_vector(std::vector<bool>{false, false, true, false, true, true}, {2, 3});  // (B, Tk)
  Tensor keep3 = logical_not(pad).reshape({2, 1, 3});                                          // (B, 1, Tk)
  Tensor q = randn({2, 4, 5}, gen, kFloat64), k = randn({2, 3, 5}, gen, kFloat64), v = randn({2, 3, 2}, gen, kFloat64);
  CHECK(max_abs_diff(
            nn::scaled_dot_product_attention(q, k, v, nn::AttentionForwardOptions().key_padding_mask(pad)).output,
            reference(q, k, v, 1.0 / std::sqrt(5.0), keep3)) < 1e-12);
  Tensor q5 = randn({2, 2, 2, 4, 5}, gen, kFloat64), k5 = randn({2, 2, 2, 3, 5}, gen, kFloat64);
  Tensor v5 = randn({2, 2, 2, 3, 2}, gen, kFloat64);
  CHECK(max_abs_diff(
            nn::scaled_dot_product_attention(q5, k5, v5, nn::AttentionForwardOptions().key_padding_mask(pad)).output,
            reference(q5, k5, v5, 1.0 / std::sqrt(5.0), keep3.reshape({2, 1, 1, 1, 3}))) < 1e-12);
  CHECK_THROWS_WITH_AS(nn::scaled_dot_product_attention(ones({4, 5}), ones({3, 5}), ones({3, 2}),
                                                        nn::AttentionForwardOptions().key_padding_mask(pad)),
                       "scaled_dot_product_attention: key_padding_mask (B, Tk) needs a batch axis, but the scores "
                       "have shape (4,3)",
                       ShapeError);
}

TEST_CASE("sdpa: float64 gradcheck of the new paths (ranks, scale, both mask kinds, both alignments)") {
  Generator gen(14);
  SUBCASE("4-D, scale, float attn_mask, bottom-right with Tq < Tk") {
    Tensor q = randn({2, 2, 3, 4}, gen, kFloat64), k = randn({2, 2, 5, 4}, gen, kFloat64);
    Tensor v = randn({2, 2, 5, 3}, gen, kFloat64), add = randn({3, 5}, gen, kFloat64);
    check_gradients(
        [&](const TensorList& in) {
          auto o = causal(nn::CausalAlignment::BottomRight).scale(0.7).attn_mask(in[3]);
          return nn::scaled_dot_product_attention(in[0], in[1], in[2], o).output;
        },
        {q, k, v, add});
  }
  SUBCASE("3-D, Bool attn_mask, top-left with Tq > Tk") {
    Tensor q = randn({2, 5, 4}, gen, kFloat64), k = randn({2, 3, 4}, gen, kFloat64),
           v = randn({2, 3, 2}, gen, kFloat64);
    Tensor keep = from_vector(std::vector<bool>{true, false, true}, {3});
    check_gradients(
        [&](const TensorList& in) {
          auto o = causal(nn::CausalAlignment::TopLeft).attn_mask(keep);
          return nn::scaled_dot_product_attention(in[0], in[1], in[2], o).output;
        },
        {q, k, v});
  }
  SUBCASE("3-D, causal only (the fused path), both alignments") {
    Tensor q = randn({2, 3, 4}, gen, kFloat64), k = randn({2, 4, 4}, gen, kFloat64),
           v = randn({2, 4, 2}, gen, kFloat64);
    for (nn::CausalAlignment a : {nn::CausalAlignment::TopLeft, nn::CausalAlignment::BottomRight})
      check_gradients(
          [&](const TensorList& in) { return nn::scaled_dot_product_attention(in[0], in[1], in[2], causal(a)).output; },
          {q, k, v});
  }
  SUBCASE("5-D with broadcast k/v, bottom-right with Tq > Tk (a fully masked row)") {
    Tensor q = randn({2, 2, 2, 4, 3}, gen, kFloat64), k = randn({2, 1, 2, 3, 3}, gen, kFloat64);
    Tensor v = randn({1, 2, 1, 3, 2}, gen, kFloat64);
    check_gradients(
        [&](const TensorList& in) {
          auto o = causal(nn::CausalAlignment::BottomRight).scale(0.5);
          return nn::scaled_dot_product_attention(in[0], in[1], in[2], o).output;
        },
        {q, k, v});
  }
}

TEST_CASE("sdpa: float64 gradcheck with dropout on the weights (the same mask in every evaluation)") {
  Generator gen(16);
  Tensor q = randn({2, 2, 3, 4}, gen, kFloat64), k = randn({2, 2, 5, 4}, gen, kFloat64);
  Tensor v = randn({2, 2, 5, 3}, gen, kFloat64);
  Generator drops(17);
  const auto attend = [&](const TensorList& in) {
    drops.manual_seed(17);  // each evaluation draws the same mask, so the function is differentiable
    return nn::scaled_dot_product_attention(in[0], in[1], in[2], causal(nn::CausalAlignment::BottomRight), 0.4, &drops)
        .output;
  };
  // The mask drops some weights (the output differs from no dropout) but not all of them.
  const Tensor dropped = attend({q, k, v});
  CHECK(max_abs_diff(dropped,
                     nn::scaled_dot_product_attention(q, k, v, causal(nn::CausalAlignment::BottomRight)).output) >
        1e-3);
  CHECK(max_abs_diff(dropped, zeros_like(dropped)) > 1e-3);
  check_gradients(attend, {q, k, v});
}

TEST_CASE("sdpa: dropout draws from the default generator when given none") {
  Generator gen(15);
  Tensor q = randn({1, 2, 4, 3}, gen, kFloat64), k = randn({1, 2, 4, 3}, gen, kFloat64);
  Tensor v = randn({1, 2, 4, 3}, gen, kFloat64);
  manual_seed(3);
  Tensor a = nn::scaled_dot_product_attention(q, k, v, {}, 0.5).output;
  manual_seed(3);
  Tensor b = nn::scaled_dot_product_attention(q, k, v, {}, 0.5).output;
  CHECK(max_abs_diff(a, b) == 0.0);
  CHECK(max_abs_diff(a, nn::scaled_dot_product_attention(q, k, v).output) > 1e-3);
}

TEST_CASE("sdpa: errors name the shapes") {
  CHECK_THROWS_WITH_AS(nn::scaled_dot_product_attention(ones({2, 3, 4}), ones({3, 5, 4}), ones({3, 5, 2})),
                       "scaled_dot_product_attention: shapes (2) and (3) cannot be broadcast together", ShapeError);
  CHECK_THROWS_WITH_AS(nn::scaled_dot_product_attention(ones({4}), ones({3, 4}), ones({3, 2})),
                       "scaled_dot_product_attention: expected q, k, v of rank >= 2 (..., T, D), got (4), (3,4), (3,2)",
                       ShapeError);
}
