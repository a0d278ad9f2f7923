// Grouped-query and multi-query attention in MultiHeadAttention: equal to full multi-head
// attention whose key/value heads are copies, a KV cache of the key/value heads only, cached
// decoding equal to the full pass, gradchecks, and the errors.

#include <doctest/doctest.h>

#include "tapegrad/nn/nn.h"
#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::check_gradients;
using tapegrad::testing::max_abs_diff;

namespace {

// rows (H_kv * Dh, ...) with each head's block of Dh rows repeated `group` times.
Tensor repeat_head_rows(const Tensor& rows, std::int64_t kv_heads, std::int64_t group) {
  const std::int64_t dh = rows.size(0) / kv_heads;
  std::vector<Tensor> blocks;
  for (std::int64_t h = 0; h < kv_heads; ++h)
    for (std::int64_t g = 0; g < group; ++g) blocks.push_back(rows.narrow(0, h * dh, dh));
  return concat(blocks, 0);
}

}  // namespace

TEST_CASE("gqa: grouped and multi-query attention equal full attention with copied key/value heads") {
  Generator gen(1);
  const std::int64_t d = 24, heads = 6;
  for (const std::int64_t kv_heads : {1, 2, 3}) {
    CAPTURE(kv_heads);
    const std::int64_t group = heads / kv_heads, dkv = kv_heads * (d / heads);
    nn::MultiHeadAttention gqa(nn::MultiHeadAttentionOptions(d, heads).num_kv_heads(kv_heads).generator(&gen));
    CHECK(gqa->num_kv_heads() == kv_heads);
    CHECK(gqa->in_proj_weight().shape() == Shape{d + 2 * dkv, d});
    CHECK(gqa->in_proj_bias().shape() == Shape{d + 2 * dkv});
    nn::MultiHeadAttention full(nn::MultiHeadAttentionOptions(d, heads));
    {
      NoGradGuard no_grad;
      const Tensor& w = gqa->in_proj_weight();
      const Tensor& b = gqa->in_proj_bias();
      full->in_proj_weight().copy_(concat({w.narrow(0, 0, d), repeat_head_rows(w.narrow(0, d, dkv), kv_heads, group),
                                           repeat_head_rows(w.narrow(0, d + dkv, dkv), kv_heads, group)},
                                          0));
      full->in_proj_bias().copy_(concat({b.narrow(0, 0, d), repeat_head_rows(b.narrow(0, d, dkv), kv_heads, group),
                                         repeat_head_rows(b.narrow(0, d + dkv, dkv), kv_heads, group)},
                                        0));
      full->out_proj()->weight().copy_(gqa->out_proj()->weight());
      full->out_proj()->bias().copy_(gqa->out_proj()->bias());
    }
    Tensor x = randn({2, 37, d}, gen).requires_grad_();
    for (const bool weights : {false, true}) {  // the fused path and the unfused one
      CAPTURE(weights);
      const auto options = nn::AttentionForwardOptions().is_causal(true).need_weights(weights);
      const nn::AttentionResult a = gqa(x, Tensor(), options), r = full(x, Tensor(), options);
      CHECK(max_abs_diff(a.output, r.output) < 1e-5);
      if (weights) CHECK(max_abs_diff(a.weights, r.weights) < 1e-6);
      const Tensor ga = autograd::grad({a.output.sum()}, {x})[0], gr = autograd::grad({r.output.sum()}, {x})[0];
      CHECK(max_abs_diff(ga, gr) < 1e-4);
    }
  }
}

TEST_CASE("gqa: the KV cache holds only the key/value heads, and cached decoding equals the full pass") {
  Generator gen(2);
  nn::MultiHeadAttention attn(nn::MultiHeadAttentionOptions(16, 4).num_kv_heads(2).rotary_max_len(32).generator(&gen));
  const Tensor x = randn({2, 9, 16}, gen);
  NoGradGuard no_grad;
  const auto causal = nn::AttentionForwardOptions().is_causal(true);
  const Tensor full = attn(x, Tensor(), causal).output;
  nn::KVCache cache;
  std::vector<Tensor> steps;
  for (std::int64_t t = 0; t < 9; ++t)
    steps.push_back(attn(x.narrow(1, t, 1), Tensor(), nn::AttentionForwardOptions(causal).cache(&cache)).output);
  CHECK(cache.k.shape() == Shape{2, 2, 9, 4});  // (B, H_kv, T, head_dim): half of what 4 heads would keep
  CHECK(cache.v.shape() == Shape{2, 2, 9, 4});
  CHECK(max_abs_diff(concat(steps, 1), full) < 1e-5);
}

TEST_CASE("gqa: float64 gradcheck of grouped-query attention, self and cross") {
  Generator gen(3);
  nn::MultiHeadAttention self(nn::MultiHeadAttentionOptions(8, 4).num_kv_heads(2).generator(&gen));
  self->to(kFloat64);
  check_gradients(
      [&](const TensorList& in) { return self(in[0], Tensor(), nn::AttentionForwardOptions().is_causal(true)).output; },
      {randn({2, 5, 8}, gen, kFloat64)}, {}, self->parameters());
  nn::MultiHeadAttention cross(
      nn::MultiHeadAttentionOptions(8, 4).num_kv_heads(1).cross_attention(true).kdim(6).generator(&gen));
  cross->to(kFloat64);
  CHECK(cross->k_proj_weight().shape() == Shape{2, 6});
  check_gradients([&](const TensorList& in) { return cross(in[0], in[1]).output; },
                  {randn({2, 3, 8}, gen, kFloat64), randn({2, 4, 6}, gen, kFloat64)}, {}, cross->parameters());
}

TEST_CASE("gqa: num_kv_heads must divide num_heads") {
  CHECK_THROWS_WITH_AS(nn::MultiHeadAttention(nn::MultiHeadAttentionOptions(12, 4).num_kv_heads(3)),
                       "MultiHeadAttention: num_kv_heads 3 does not divide num_heads 4", ValueError);
  CHECK_THROWS_AS(nn::MultiHeadAttention(nn::MultiHeadAttentionOptions(12, 4).num_kv_heads(-1)), ValueError);
  CHECK_THROWS_WITH_AS(repeat_heads(zeros({4, 3}), 2),
                       "repeat_heads: expected (..., H, T, C) and a group >= 1, got (4,3) and 2", ValueError);
  CHECK(repeat_heads(arange(4).reshape({1, 2, 2, 1}).to(kFloat32), 2).reshape({8}).to_vector<double>() ==
        std::vector<double>{0, 1, 0, 1, 2, 3, 2, 3});
  // The functional form checks the weights against the heads it is told.
  const Tensor x = zeros({1, 2, 8});
  nn::functional::MultiHeadAttentionForwardFuncOptions o(4, zeros({8, 8}), Tensor());
  o.num_kv_heads(2).in_proj_weight(zeros({24, 8}));
  CHECK_THROWS_WITH_AS(nn::functional::multi_head_attention_forward(x, x, x, o),
                       doctest::Contains("in_proj_weight must have shape (16,8), got (24,8)"), ShapeError);
}
