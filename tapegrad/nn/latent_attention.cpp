// Multi-head latent attention: the naive and the absorbed path, and the latent cache. See
// latent_attention.h for the formulas.

#include "tapegrad/nn/latent_attention.h"

#include <cmath>
#include <string>

#include "tapegrad/nn/attention.h"

namespace tapegrad::nn {

MultiHeadLatentAttentionImpl::MultiHeadLatentAttentionImpl(const MultiHeadLatentAttentionOptions& options)
    : options_(options) {
  const auto& o = options;
  options_.generator(nullptr);  // not kept: it need not outlive the construction
  for (const std::int64_t size : {o.d_model(), o.num_heads(), o.kv_lora_rank(), o.qk_nope_head_dim(),
                                  o.qk_rope_head_dim(), o.v_head_dim(), o.max_len()})
    if (size <= 0 || o.q_lora_rank() < 0)
      throw ValueError(
          message("MultiHeadLatentAttention: d_model ", o.d_model(), ", num_heads ", o.num_heads(),
                  ", the ranks, head dims and max_len must be positive (q_lora_rank may be 0), got a size ", size,
                  " or q_lora_rank ", o.q_lora_rank()));
  Generator& gen = generator_or_default(o.generator());
  auto linear = [&](std::int64_t in, std::int64_t out) {
    return Linear(LinearOptions(in, out).bias(false).generator(&gen));
  };
  const std::int64_t h = o.num_heads(), qk = o.qk_nope_head_dim() + o.qk_rope_head_dim();
  if (o.q_lora_rank() > 0) {
    q_a_proj_ = register_module("q_a_proj", linear(o.d_model(), o.q_lora_rank()));
    q_a_norm_ = register_module("q_a_layernorm", RMSNorm(RMSNormOptions(o.q_lora_rank()).eps(o.norm_eps())));
    q_b_proj_ = register_module("q_b_proj", linear(o.q_lora_rank(), h * qk));
  } else {
    q_proj_ = register_module("q_proj", linear(o.d_model(), h * qk));
  }
  kv_a_proj_ = register_module("kv_a_proj_with_mqa", linear(o.d_model(), o.kv_lora_rank() + o.qk_rope_head_dim()));
  kv_a_norm_ = register_module("kv_a_layernorm", RMSNorm(RMSNormOptions(o.kv_lora_rank()).eps(o.norm_eps())));
  kv_b_proj_ = register_module("kv_b_proj", linear(o.kv_lora_rank(), h * (o.qk_nope_head_dim() + o.v_head_dim())));
  o_proj_ = register_module("o_proj", linear(h * o.v_head_dim(), o.d_model()));
  rotary_ = register_module("rotary", RotaryEmbedding(o.qk_rope_head_dim(), o.max_len()));
}

Tensor MultiHeadLatentAttentionImpl::forward(const Tensor& x, MLACache* cache, bool absorb) {
  const auto& o = options_;
  if (x.dim() != 3 || x.size(2) != o.d_model())
    throw ShapeError(
        message("MultiHeadLatentAttention: expected x of shape (B,T,", o.d_model(), "), got ", x.shape().str()));
  const std::int64_t b = x.size(0), t = x.size(1), h = o.num_heads();
  const std::int64_t dh = o.qk_nope_head_dim(), dr = o.qk_rope_head_dim(), dv = o.v_head_dim(), r = o.kv_lora_rank();
  const std::int64_t cached = cache != nullptr ? cache->length() : 0;
  // The whole cache is checked before anything is appended to it: a failed call leaves it as it was.
  if (cached > 0 && (cache->latent.shape() != Shape{b, cached, r} || !cache->rotary_key.defined() ||
                     cache->rotary_key.shape() != Shape{b, cached, dr}))
    throw ShapeError(message("MultiHeadLatentAttention: for x ", x.shape().str(), " the cache must hold a latent (", b,
                             ", T, ", r, ") and a rotary key (", b, ", T, ", dr, "), got ", cache->latent.shape().str(),
                             " and ",
                             cache->rotary_key.defined() ? cache->rotary_key.shape().str() : std::string("none")));

  // q: (B, H, T, dh + dr) = [q_C, RoPE(q_R)]
  const Tensor q_flat = o.q_lora_rank() > 0 ? q_b_proj_(q_a_norm_(q_a_proj_(x))) : q_proj_(x);
  const Tensor q = q_flat.view({b, t, h, dh + dr}).transpose(1, 2);
  const Tensor q_c = q.narrow(-1, 0, dh);
  const Tensor q_r = rotary_(q.narrow(-1, dh, dr), cached);
  // The latent c_kv (B, T, r) and the shared rotary key (B, 1, T, dr), with the cached positions first.
  const Tensor kv_a = kv_a_proj_(x);
  Tensor latent = kv_a_norm_(kv_a.narrow(-1, 0, r));
  Tensor k_r = rotary_(kv_a.narrow(-1, r, dr).unsqueeze(1), cached);
  if (cache != nullptr) {
    if (cached > 0) {
      latent = concat({cache->latent, latent}, 1);
      k_r = concat({cache->rotary_key.unsqueeze(1), k_r}, 2);
    }
    cache->latent = latent;
    cache->rotary_key = k_r.squeeze(1);
  }
  const std::int64_t tk = latent.size(1);
  // Causal, the new queries being the last t of the tk positions.
  const auto masks = AttentionForwardOptions()
                         .is_causal(true)
                         .causal_alignment(CausalAlignment::BottomRight)
                         .scale(1.0 / std::sqrt(static_cast<double>(dh + dr)));

  Tensor heads;  // (B, H, T, dv)
  if (cache == nullptr && !absorb) {
    // Naive: k_C and v per head from the latent.
    const Tensor kv = kv_b_proj_(latent).view({b, tk, h, dh + dv}).transpose(1, 2);  // (B, H, Tk, dh + dv)
    const Tensor k = concat({kv.narrow(-1, 0, dh), k_r.expand({b, h, tk, dr})}, -1);
    heads = scaled_dot_product_attention(concat({q_c, q_r}, -1), k, kv.narrow(-1, dh, dv), masks).output;
  } else {
    // Absorbed: q_C . (W_uk,i c_kv) = (W_uk,i^T q_C) . c_kv, and W_uv,i after the weighted sum of latents.
    const Tensor w = kv_b_proj_->weight().view({h, dh + dv, r});  // per head [W_uk (dh, r); W_uv (dv, r)]
    const Tensor q_latent = matmul(q_c, w.narrow(1, 0, dh));      // (B, H, T, r)
    const Tensor shared = latent.unsqueeze(1);                    // (B, 1, Tk, r): one key/value head
    const Tensor mixed =
        scaled_dot_product_attention(concat({q_latent, q_r}, -1), concat({shared, k_r}, -1), shared, masks)
            .output;                                  // (B, H, T, r)
    heads = matmul(mixed, w.narrow(1, dh, dv).mT());  // (B, H, T, dv)
  }
  return o_proj_(heads.transpose(1, 2).reshape({b, t, h * dv}));
}

}  // namespace tapegrad::nn
