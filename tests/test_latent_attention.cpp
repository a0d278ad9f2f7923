// Multi-head latent attention: the absorbed path equals the naive one for a prompt and for
// token-by-token decoding from the latent cache; gradchecks; the cache's size per token against
// multi-head, grouped-query and multi-query attention's, measured from the caches.

#include <doctest/doctest.h>

#include "tapegrad/nn/nn.h"
#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::check_gradients;
using tapegrad::testing::max_abs_diff;

namespace {

nn::MultiHeadLatentAttentionOptions small_options(Generator& gen) {
  return nn::MultiHeadLatentAttentionOptions(/*d_model=*/16, /*num_heads=*/4)
      .q_lora_rank(12)
      .kv_lora_rank(8)
      .qk_nope_head_dim(6)
      .qk_rope_head_dim(4)
      .v_head_dim(5)
      .max_len(128)
      .generator(&gen);
}

std::size_t bytes(const Tensor& t) { return static_cast<std::size_t>(t.numel()) * element_size(t.dtype()); }

}  // namespace

TEST_CASE("latent attention: the absorbed path equals the naive one for a prompt") {
  Generator gen(1);
  for (const DType dtype : {kFloat64, kFloat32}) {
    CAPTURE(dtype_name(dtype));
    nn::MultiHeadLatentAttention mla(small_options(gen));
    mla->to(dtype);
    const Tensor x = randn({2, 70, 16}, gen, dtype);  // more than one 64-row tile
    const Tensor naive = mla(x), absorbed = mla(x, nullptr, /*absorb=*/true);
    CHECK(naive.shape() == Shape{2, 70, 16});
    CHECK(max_abs_diff(naive, absorbed) < (dtype == kFloat64 ? 1e-12 : 2e-5));
    // Without the low-rank query.
    nn::MultiHeadLatentAttention direct(small_options(gen).q_lora_rank(0));
    direct->to(dtype);
    CHECK(max_abs_diff(direct(x), direct(x, nullptr, true)) < (dtype == kFloat64 ? 1e-12 : 2e-5));
  }
}

TEST_CASE("latent attention: decoding token by token from the latent cache equals the full pass") {
  Generator gen(2);
  nn::MultiHeadLatentAttention mla(small_options(gen));
  mla->to(kFloat64);
  const Tensor x = randn({2, 9, 16}, gen, kFloat64);
  NoGradGuard no_grad;
  const Tensor full = mla(x);
  nn::MLACache cache;
  std::vector<Tensor> pieces{mla(x.narrow(1, 0, 5), &cache)};  // a prompt of 5, then one token at a time
  for (std::int64_t t = 5; t < 9; ++t) pieces.push_back(mla(x.narrow(1, t, 1), &cache));
  CHECK(max_abs_diff(concat(pieces, 1), full) < 1e-12);
  // Only the latent and the rotary key are kept.
  CHECK(cache.latent.shape() == Shape{2, 9, 8});
  CHECK(cache.rotary_key.shape() == Shape{2, 9, 4});
  CHECK(cache.length() == 9);
}

TEST_CASE("latent attention: float64 gradcheck of the naive and the absorbed path") {
  Generator gen(3);
  nn::MultiHeadLatentAttention mla(nn::MultiHeadLatentAttentionOptions(8, 2)
                                       .q_lora_rank(6)
                                       .kv_lora_rank(4)
                                       .qk_nope_head_dim(3)
                                       .qk_rope_head_dim(2)
                                       .v_head_dim(3)
                                       .max_len(16)
                                       .generator(&gen));
  mla->to(kFloat64);
  const Tensor x = randn({2, 5, 8}, gen, kFloat64);
  for (const bool absorb : {false, true}) {
    CAPTURE(absorb);
    check_gradients([&](const TensorList& in) { return mla(in[0], nullptr, absorb); }, {x}, {}, mla->parameters());
  }
}

TEST_CASE("latent attention: parameter names and shapes, and argument errors") {
  Generator gen(4);
  nn::MultiHeadLatentAttention mla(small_options(gen));
  const std::vector<std::string> expected{
      "q_a_proj.weight",       "q_a_layernorm.weight", "q_b_proj.weight", "kv_a_proj_with_mqa.weight",
      "kv_a_layernorm.weight", "kv_b_proj.weight",     "o_proj.weight"};
  CHECK(testing::names(mla->named_parameters()) == expected);
  CHECK(mla->named_parameters()[5].second.shape() == Shape{4 * (6 + 5), 8});
  CHECK_THROWS_WITH_AS(mla(zeros({2, 3, 15})), doctest::Contains("expected x of shape (B,T,16), got (2,3,15)"),
                       ShapeError);
  CHECK_THROWS_AS(nn::MultiHeadLatentAttention(small_options(gen).kv_lora_rank(0)), ValueError);
  nn::MLACache cache;
  mla(zeros({2, 3, 16}), &cache);
  CHECK_THROWS_WITH_AS(mla(zeros({3, 1, 16}), &cache),
                       "MultiHeadLatentAttention: for x (3,1,16) the cache must hold a latent (3, T, 8) and a rotary "
                       "key (3, T, 4), got (2,3,8) and (2,3,4)",
                       ShapeError);
  // A cache whose two parts disagree is refused before either grows.
  cache.rotary_key = cache.rotary_key.narrow(1, 0, 2).contiguous();
  CHECK_THROWS_WITH_AS(mla(zeros({2, 1, 16}), &cache), doctest::Contains("got (2,3,8) and (2,2,4)"), ShapeError);
  CHECK(cache.latent.shape() == Shape{2, 3, 8});
  CHECK(cache.rotary_key.shape() == Shape{2, 2, 4});
}

TEST_CASE("latent attention: KV-cache bytes per token and layer, measured, against MHA, GQA and MQA") {
  // d_model 256, 8 heads of 32 (MHA, GQA with 2 key/value heads, MQA); MLA with a latent of 64 and
  // a rotary key of 16. float32, one token of a batch of one cached in each.
  Generator gen(5);
  NoGradGuard no_grad;
  const Tensor x = randn({1, 1, 256}, gen);
  auto attention_bytes = [&](std::int64_t kv_heads) {
    nn::MultiHeadAttention attn(nn::MultiHeadAttentionOptions(256, 8).num_kv_heads(kv_heads).generator(&gen));
    nn::KVCache cache;
    attn(x, Tensor(), nn::AttentionForwardOptions().is_causal(true).cache(&cache));
    return bytes(cache.k) + bytes(cache.v);
  };
  CHECK(attention_bytes(8) == 2 * 256 * 4);  // MHA: 2048 bytes
  CHECK(attention_bytes(2) == 2 * 64 * 4);   // GQA: 512
  CHECK(attention_bytes(1) == 2 * 32 * 4);   // MQA: 256
  nn::MultiHeadLatentAttention mla(nn::MultiHeadLatentAttentionOptions(256, 8)
                                       .kv_lora_rank(64)
                                       .qk_nope_head_dim(32)
                                       .qk_rope_head_dim(16)
                                       .v_head_dim(32)
                                       .generator(&gen));
  nn::MLACache cache;
  mla(x, &cache);
  CHECK(bytes(cache.latent) + bytes(cache.rotary_key) == (64 + 16) * 4);  // MLA: 320
}
