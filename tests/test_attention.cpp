// Scaled dot-product attention and MultiHeadAttention: hand-worked values, the vectorised heads
// against a per-head loop, causal and padding masks, cross-attention, the KV cache, fully masked
// rows, float64 gradchecks and error messages.

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

bool has_nan(const Tensor& t) {
  for (double x : t.to_vector<double>())
    if (std::isnan(x)) return true;
  return false;
}

// The q, k or v projection (block 0, 1, 2) restricted to the n output rows from start, applied to
// x: (B, T, in) -> (B, T, n); the weight is in_proj_weight's row block or the separate weight.
Tensor project_rows(const nn::MultiHeadAttention& m, std::int64_t block, const Tensor& x, std::int64_t start,
                    std::int64_t n) {
  const std::int64_t d = m->d_model();
  const Tensor w = m->qkv_same_embed_dim()
                       ? m->in_proj_weight().narrow(0, block * d, d)
                       : std::vector<Tensor>{m->q_proj_weight(), m->k_proj_weight(), m->v_proj_weight()}[block];
  Tensor y = matmul(x, w.narrow(0, start, n).mT());
  return m->in_proj_bias().defined() ? y + m->in_proj_bias().narrow(0, block * d + start, n) : y;
}

// The seed's list-of-heads formulation: one head at a time, heads concatenated, then out_proj.
// excluded: Bool (B, Tq, Tk), true = masked, or undefined. No fully masked rows.
Tensor per_head_reference(const nn::MultiHeadAttention& m, const Tensor& xq, const Tensor& xkv,
                          const Tensor& excluded) {
  const std::int64_t dh = m->head_dim();
  const Tensor& mem = m->is_cross_attention() ? xkv : xq;
  std::vector<Tensor> heads;
  for (std::int64_t h = 0; h < m->num_heads(); ++h) {
    const Tensor q = project_rows(m, 0, xq, h * dh, dh);  // (B, T, Dh)
    const Tensor k = project_rows(m, 1, mem, h * dh, dh);
    const Tensor v = project_rows(m, 2, mem, h * dh, dh);
    Tensor scores = matmul(q, k.mT()) / std::sqrt(static_cast<double>(dh));  // (B, Tq, Tk)
    if (excluded.defined()) scores = where(logical_not(excluded), scores, -kInf);
    heads.push_back(matmul(softmax(scores, -1), v));
  }
  return m->out_proj()(concat(heads, -1));
}

// Bool (Tq, Tk), true where key j is after query i.
Tensor future_keys(std::int64_t t) {
  std::vector<bool> data;
  for (std::int64_t i = 0; i < t; ++i)
    for (std::int64_t j = 0; j < t; ++j) data.push_back(j > i);
  return from_vector(data, {t, t});
}

nn::AttentionForwardOptions causal_options() { return nn::AttentionForwardOptions().is_causal(true); }

}  // namespace

TEST_CASE("attention: scaled dot product on hand-worked numbers") {
  // D = 4: q.k / sqrt(4) with q = (1,1,1,1), k1 = 0, k2 = (ln3/2)(1,1,1,1) gives scores (0, ln 3),
  // so the weights are (1/4, 3/4) and the output 2/4 + 6 * 3/4 = 5 (and 10 for the second channel).
  const double l = std::log(3.0) / 2.0;
  Tensor q = ones({1, 1, 1, 4}, kFloat64);
  Tensor k = from_vector(std::vector<double>{0, 0, 0, 0, l, l, l, l}, {1, 1, 2, 4});
  Tensor v = from_vector(std::vector<double>{2, 4, 6, 12}, {1, 1, 2, 2});
  auto r = nn::scaled_dot_product_attention(q, k, v, nn::AttentionForwardOptions().need_weights(true));
  CHECK(r.output.shape() == Shape{1, 1, 1, 2});
  check_values(r.output, {5.0, 10.0}, 1e-12);
  check_values(r.weights, {0.25, 0.75}, 1e-12);
  CHECK_FALSE(nn::scaled_dot_product_attention(q, k, v).weights.defined());

  // Causal with Tq = 1 < Tk = 2, bottom-right aligned: the one query is the last position and sees
  // both keys; top-left aligned (the default, torch's), it is position 0 and sees key 0 only.
  nn::AttentionForwardOptions causal;
  causal.is_causal(true);
  check_values(nn::scaled_dot_product_attention(q, k, v, causal).output, {2.0, 4.0}, 1e-12);
  check_values(nn::scaled_dot_product_attention(
                   q, k, v, nn::AttentionForwardOptions(causal).causal_alignment(nn::CausalAlignment::BottomRight))
                   .output,
               {5.0, 10.0}, 1e-12);
  // Two queries, Tq = Tk: the first sees only key 0 (output v0), the second both.
  Tensor q2 = ones({1, 1, 2, 4}, kFloat64);
  auto rc = nn::scaled_dot_product_attention(q2, k, v, nn::AttentionForwardOptions(causal).need_weights(true));
  check_values(rc.output, {2.0, 4.0, 5.0, 10.0}, 1e-12);
  check_values(rc.weights, {1.0, 0.0, 0.25, 0.75}, 1e-12);

  // An additive mask of (0, -ln 3) makes the scores equal: weights (1/2, 1/2), output (4, 8).
  nn::AttentionForwardOptions additive;
  additive.additive_mask(from_vector(std::vector<double>{0.0, -std::log(3.0)}, {1, 2}));
  check_values(nn::scaled_dot_product_attention(q, k, v, additive).output, {4.0, 8.0}, 1e-12);
  // keep_mask (true = keep) excluding key 1: output v0.
  nn::AttentionForwardOptions keep;
  keep.keep_mask(from_vector(std::vector<bool>{true, false}, {1, 2}));
  check_values(nn::scaled_dot_product_attention(q, k, v, keep).output, {2.0, 4.0}, 1e-12);
  // An additive -inf counts as masked in the same way.
  nn::AttentionForwardOptions minus_inf;
  minus_inf.additive_mask(from_vector(std::vector<double>{0.0, -kInf}, {1, 2}));
  check_values(nn::scaled_dot_product_attention(q, k, v, minus_inf).output, {2.0, 4.0}, 1e-12);
}

TEST_CASE("attention: vectorised heads equal a per-head loop, self and cross") {
  manual_seed(1);
  Generator& gen = default_generator();  // the modules and the inputs draw from it
  SUBCASE("self-attention, causal and padded") {
    nn::MultiHeadAttention m(8, 2);
    m->to(kFloat64);
    Tensor x = randn({2, 5, 8}, gen, kFloat64);
    Tensor pad =
        from_vector(std::vector<bool>{false, false, false, false, false, false, false, false, true, true}, {2, 5});
    auto opts = causal_options();
    opts.key_padding_mask(pad);
    Tensor got = m(x, Tensor(), opts).output;
    // excluded (B, Tq, Tk) = future key or padded key; no row is fully masked (key 0 is never padded).
    Tensor excluded = logical_or(future_keys(5).unsqueeze(0), pad.unsqueeze(1));
    CHECK(max_abs_diff(got, per_head_reference(m, x, Tensor(), excluded)) < 1e-12);
    CHECK(max_abs_diff(m(x).output, per_head_reference(m, x, Tensor(), Tensor())) < 1e-12);
  }
  SUBCASE("cross-attention with Nq != Nv and kdim != embed_dim") {
    nn::MultiHeadAttention m{nn::MultiHeadAttentionOptions(8, 2).cross_attention(true).kdim(6)};
    m->to(kFloat64);
    Tensor xq = randn({2, 3, 8}, gen, kFloat64);
    Tensor mem = randn({2, 5, 6}, gen, kFloat64);
    auto r = m(xq, mem, nn::AttentionForwardOptions().need_weights(true));
    CHECK(r.output.shape() == Shape{2, 3, 8});
    CHECK(r.weights.shape() == Shape{2, 2, 3, 5});
    check_values(r.weights.sum({-1}), std::vector<double>(12, 1.0), 1e-12);
    CHECK(max_abs_diff(r.output, per_head_reference(m, xq, mem, Tensor())) < 1e-12);
  }
}

TEST_CASE("attention: causal outputs at positions <= t ignore later tokens") {
  manual_seed(2);
  Generator& gen = default_generator();  // the modules and the inputs draw from it
  nn::MultiHeadAttention m(8, 2);
  m->to(kFloat64);
  Tensor x = randn({2, 5, 8}, gen, kFloat64);
  Tensor changed = x.clone();
  {
    NoGradGuard no_grad;
    changed.narrow(1, 3, 2).copy_(randn({2, 2, 8}, gen, kFloat64));  // tokens 3 and 4
  }
  Tensor a = m(x, Tensor(), causal_options()).output;
  Tensor b = m(changed, Tensor(), causal_options()).output;
  CHECK(max_abs_diff(a.narrow(1, 0, 3), b.narrow(1, 0, 3)) < 1e-14);
  CHECK(max_abs_diff(a.narrow(1, 3, 2), b.narrow(1, 3, 2)) > 1e-3);  // later positions do change
  // Without the causal mask, every position changes.
  CHECK(max_abs_diff(m(x).output.narrow(1, 0, 1), m(changed).output.narrow(1, 0, 1)) > 1e-6);
}

TEST_CASE("attention: padded keys get exactly zero weight and do not affect the output") {
  manual_seed(3);
  Generator& gen = default_generator();  // the modules and the inputs draw from it
  nn::MultiHeadAttention m(8, 2);
  m->to(kFloat64);
  Tensor x = randn({2, 4, 8}, gen, kFloat64);
  nn::AttentionForwardOptions o;
  o.key_padding_mask(from_vector(std::vector<bool>{false, false, false, true, false, true, false, true}, {2, 4}));
  o.need_weights(true);
  auto r = m(x, Tensor(), o);
  REQUIRE(r.weights.shape() == Shape{2, 2, 4, 4});
  for (std::int64_t h = 0; h < 2; ++h)
    for (std::int64_t i = 0; i < 4; ++i) {
      CHECK(r.weights.at({0, h, i, 3}) == 0.0);
      CHECK(r.weights.at({1, h, i, 1}) == 0.0);
      CHECK(r.weights.at({1, h, i, 3}) == 0.0);
      CHECK(r.weights.at({1, h, i, 0}) > 0.0);
    }
  check_values(r.weights.sum({-1}), std::vector<double>(16, 1.0), 1e-12);
  // In cross-attention the padded memory positions can hold anything.
  nn::MultiHeadAttention cross{nn::MultiHeadAttentionOptions(8, 2).cross_attention(true)};
  cross->to(kFloat64);
  Tensor mem = randn({2, 4, 8}, gen, kFloat64);
  Tensor other = mem.clone();
  {
    NoGradGuard no_grad;
    other.select(0, 0).select(0, 3).copy_(full({8}, 100.0, kFloat64));
    other.select(0, 1).select(0, 1).copy_(full({8}, -7.0, kFloat64));
  }
  o.need_weights(false);
  CHECK(max_abs_diff(cross(x.narrow(1, 0, 3), mem, o).output, cross(x.narrow(1, 0, 3), other, o).output) < 1e-12);
}

TEST_CASE("attention: cached incremental decoding equals one causal pass") {
  manual_seed(4);
  Generator& gen = default_generator();  // the modules and the inputs draw from it
  nn::MultiHeadAttention m(8, 2);
  m->to(kFloat64);
  Tensor x = randn({2, 5, 8}, gen, kFloat64);
  Tensor full = m(x, Tensor(), causal_options()).output;

  SUBCASE("token by token") {
    nn::KVCache cache;
    auto o = causal_options();
    o.cache(&cache);
    std::vector<Tensor> steps;
    for (std::int64_t t = 0; t < 5; ++t) {
      steps.push_back(m(x.narrow(1, t, 1), Tensor(), o).output);
      CHECK(cache.length() == t + 1);
    }
    CHECK(cache.k.shape() == Shape{2, 2, 5, 4});
    CHECK(max_abs_diff(concat(steps, 1), full) < 1e-12);
  }
  SUBCASE("a prompt of 3 then 2 tokens at once") {
    nn::KVCache cache;
    auto o = causal_options();
    o.cache(&cache);
    Tensor first = m(x.narrow(1, 0, 3), Tensor(), o).output;
    Tensor rest = m(x.narrow(1, 3, 2), Tensor(), o).output;
    CHECK(max_abs_diff(concat({first, rest}, 1), full) < 1e-12);
  }
  SUBCASE("cross-attention reuses the cached memory projection") {
    nn::MultiHeadAttention cross{nn::MultiHeadAttentionOptions(8, 2).cross_attention(true)};
    cross->to(kFloat64);
    Tensor mem = randn({2, 3, 8}, gen, kFloat64);
    nn::KVCache cache;
    nn::AttentionForwardOptions o;
    o.cache(&cache);
    Tensor a = cross(x.narrow(1, 0, 1), mem, o).output;
    CHECK(cache.length() == 3);
    Tensor b = cross(x.narrow(1, 1, 1), Tensor(), o).output;  // memory taken from the cache
    CHECK(max_abs_diff(concat({a, b}, 1), cross(x.narrow(1, 0, 2), mem).output) < 1e-12);
  }
}

TEST_CASE("attention: a fully masked row gives zeros and no NaN, forward or backward") {
  manual_seed(5);
  Generator& gen = default_generator();  // the modules and the inputs draw from it
  Tensor q = randn({1, 2, 3, 4}, gen, kFloat64).requires_grad_();
  Tensor k = randn({1, 2, 3, 4}, gen, kFloat64).requires_grad_();
  Tensor v = randn({1, 2, 3, 2}, gen, kFloat64).requires_grad_();
  nn::AttentionForwardOptions masks;
  // Query row 1 may attend to nothing; rows 0 and 2 keep keys 0 and 1.
  masks.keep_mask(from_vector(std::vector<bool>{true, true, false, false, false, false, true, true, false}, {3, 3}));
  auto r = nn::scaled_dot_product_attention(q, k, v, nn::AttentionForwardOptions(masks).need_weights(true));
  CHECK_FALSE(has_nan(r.output));
  CHECK_FALSE(has_nan(r.weights));
  check_values(r.output.narrow(2, 1, 1), {0, 0, 0, 0}, 1e-15);
  check_values(r.weights.narrow(2, 1, 1), std::vector<double>(6, 0.0), 1e-15);
  check_values(r.weights.sum({-1}), {1, 0, 1, 1, 0, 1}, 1e-12);
  (r.output * r.output).sum().backward();
  for (const Tensor* t : {&q, &k, &v}) CHECK_FALSE(has_nan(t->grad()));
  check_values(q.grad().narrow(2, 1, 1), std::vector<double>(8, 0.0), 1e-15);

  // Gradcheck across the masked row, and through an additive mask whose row is all -inf.
  check_gradients(
      [&](const TensorList& in) { return nn::scaled_dot_product_attention(in[0], in[1], in[2], masks).output; },
      {q.detach(), k.detach(), v.detach()});
  nn::AttentionForwardOptions additive;
  additive.additive_mask(
      from_vector(std::vector<double>{0.5, -1.0, -kInf, -kInf, -kInf, -kInf, 0.0, 0.0, 0.25}, {3, 3}));
  auto ra = nn::scaled_dot_product_attention(q, k, v, nn::AttentionForwardOptions(additive).need_weights(true));
  CHECK_FALSE(has_nan(ra.output));
  check_values(ra.weights.narrow(2, 1, 1), std::vector<double>(6, 0.0), 1e-15);
  check_gradients(
      [&](const TensorList& in) { return nn::scaled_dot_product_attention(in[0], in[1], in[2], additive).output; },
      {q.detach(), k.detach(), v.detach()});

  // A batch element whose keys are all padding: the module's output there is out_proj's bias.
  nn::MultiHeadAttention m(8, 2);
  m->to(kFloat64);
  nn::AttentionForwardOptions o;
  o.key_padding_mask(from_vector(std::vector<bool>{false, false, true, true, true, true}, {2, 3}));
  Tensor x = randn({2, 3, 8}, gen, kFloat64).requires_grad_();
  Tensor y = m(x, Tensor(), o).output;
  CHECK_FALSE(has_nan(y));
  CHECK(max_abs_diff(y.select(0, 1), m->out_proj()->bias().expand({3, 8})) == 0.0);
  y.sum().backward();
  CHECK_FALSE(has_nan(x.grad()));
  for (const Tensor& p : m->parameters()) CHECK_FALSE(has_nan(p.grad()));
}

TEST_CASE("attention: float64 gradcheck of scaled dot product attention with masks, non-contiguous inputs") {
  Generator gen(6);
  Tensor q = randn({2, 2, 3, 4}, gen, kFloat64);
  Tensor kt = randn({2, 2, 4, 4}, gen, kFloat64);  // read as k = kt^T: (2, 2, 4, 4) non-contiguous
  Tensor v = randn({2, 2, 4, 3}, gen, kFloat64);
  Tensor bias = randn({3, 4}, gen, kFloat64);
  nn::AttentionForwardOptions masks;
  masks.is_causal(true);
  masks.causal_alignment(nn::CausalAlignment::BottomRight);  // Tq = 3 < Tk = 4
  masks.key_padding_mask(from_vector(std::vector<bool>{false, false, false, false, false, true, false, false}, {2, 4}));
  check_gradients(
      [&](const TensorList& in) {
        nn::AttentionForwardOptions m = masks;
        m.additive_mask(in[3]);  // a learned bias also receives its gradient
        return nn::scaled_dot_product_attention(in[0], in[1].mT(), in[2], m).output;
      },
      {q, kt, v, bias});
}

TEST_CASE("attention: float64 gradcheck of the module with its parameters") {
  manual_seed(7);
  Generator& gen = default_generator();  // the modules and the inputs draw from it
  SUBCASE("self-attention, causal with padding") {
    nn::MultiHeadAttention m(8, 2);
    m->to(kFloat64);
    Tensor x = randn({2, 4, 8}, gen, kFloat64);
    auto o = causal_options();
    o.key_padding_mask(from_vector(std::vector<bool>{false, false, false, false, false, true, false, true}, {2, 4}));
    check_gradients([&](const TensorList& in) { return m(in[0], Tensor(), o).output; }, {x}, {}, m->parameters());
  }
  SUBCASE("cross-attention with a keep mask, Nq != Nv") {
    nn::MultiHeadAttention m{nn::MultiHeadAttentionOptions(8, 2).cross_attention(true).kdim(6)};
    m->to(kFloat64);
    Tensor xq = randn({2, 3, 8}, gen, kFloat64);
    Tensor mem = randn({2, 5, 6}, gen, kFloat64);
    nn::AttentionForwardOptions o;
    o.keep_mask(from_vector(
        std::vector<bool>{true, true, true, false, true, true, true, true, true, false, true, true, true, true, true},
        {3, 5}));
    check_gradients([&](const TensorList& in) { return m(in[0], in[1], o).output; }, {xq, mem}, {}, m->parameters());
  }
}

TEST_CASE("attention: dropout on the weights only in training mode") {
  manual_seed(8);
  Generator& gen = default_generator();  // the modules and the inputs draw from it
  nn::MultiHeadAttention m{nn::MultiHeadAttentionOptions(8, 2).dropout(0.5)};
  Tensor x = randn({2, 4, 8}, gen);
  m->eval();
  Tensor a = m(x).output;
  CHECK(max_abs_diff(a, m(x).output) == 0.0);
  m->train();
  CHECK(max_abs_diff(a, m(x).output) > 1e-4);
}

TEST_CASE("attention: errors name the op and the shapes") {
  manual_seed(9);
  CHECK_THROWS_WITH_AS(nn::MultiHeadAttention(10, 3), "MultiHeadAttention: d_model 10 is not divisible by num_heads 3",
                       ValueError);
  nn::MultiHeadAttention m(8, 2);
  CHECK_THROWS_WITH_AS(m(ones({2, 3, 5})), "MultiHeadAttention: expected query of shape (B,Tq,8), got (2,3,5)",
                       ShapeError);
  CHECK_THROWS_AS(m(ones({2, 3, 8}), ones({2, 4, 8})), ValueError);
  nn::AttentionForwardOptions bad_pad;
  bad_pad.key_padding_mask(from_vector(std::vector<bool>{false, false, true}, {1, 3}));
  CHECK_THROWS_WITH_AS(m(ones({2, 3, 8}), Tensor(), bad_pad),
                       "scaled_dot_product_attention: key_padding_mask must have shape (B, Tk) = (2,3), got (1,3)",
                       ShapeError);
  nn::AttentionForwardOptions bad_keep;
  bad_keep.keep_mask(from_vector(std::vector<bool>(12, true), {3, 4}));
  CHECK_THROWS_WITH_AS(m(ones({2, 3, 8}), Tensor(), bad_keep),
                       "scaled_dot_product_attention: keep_mask of shape (3,4) does not broadcast to the scores' "
                       "shape (2,2,3,3)",
                       ShapeError);
  nn::AttentionForwardOptions float_keep;
  float_keep.keep_mask(ones({3, 3}));
  CHECK_THROWS_AS(m(ones({2, 3, 8}), Tensor(), float_keep), TypeError);
  CHECK_THROWS_WITH_AS(nn::scaled_dot_product_attention(ones({1, 2, 3, 4}), ones({1, 2, 5, 3}), ones({1, 2, 5, 4})),
                       "scaled_dot_product_attention: q (1,2,3,4), k (1,2,5,3) and v (1,2,5,4) do not fit "
                       "(..., Tq, D), (..., Tk, D), (..., Tk, Dv)",
                       ShapeError);
  nn::MultiHeadAttention cross{nn::MultiHeadAttentionOptions(8, 2).cross_attention(true)};
  CHECK_THROWS_AS(cross(ones({2, 3, 8})), ValueError);
  CHECK_THROWS_WITH_AS(cross(ones({2, 3, 8}), ones({2, 4, 6})),
                       "MultiHeadAttention: expected key_value of shape (2,Tk,8) for query (2,3,8), got (2,4,6)",
                       ShapeError);
}
