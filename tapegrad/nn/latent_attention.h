#pragma once
// Multi-head latent attention (DeepSeek-V2): keys and values come from one low-rank latent per
// token, so a KV cache keeps only that latent and a small rotary key instead of H keys and values.
//
// For a token h_t (d_model), with H heads of d_h (no RoPE) + d_r (RoPE) query/key features and d_v
// value features, latent ranks r_q (queries) and r_kv (keys and values):
//   c_q   = RMSNorm(W_dq h_t)                             (r_q)     "q_a_proj", "q_a_layernorm"
//   q     = W_uq c_q, per head [q_C (d_h), q_R (d_r)]     q_R rotated by RoPE at position t; "q_b_proj"
//   c_kv  = RMSNorm(first r_kv of W_dkv h_t)              (r_kv)    "kv_a_proj_with_mqa", "kv_a_layernorm"
//   k_R   = RoPE(last d_r of W_dkv h_t)                   (d_r), one rotary key shared by every head
//   [k_C, v] = W_ukv c_kv, per head (d_h + d_v)                     "kv_b_proj"
//   head i: softmax([q_C, q_R] . [k_C, k_R] / sqrt(d_h + d_r), causal) v
//   output = W_o concat(heads)                                      "o_proj"
// (parameter names as in DeepSeek-V2's released model; no biases.) q_lora_rank 0 projects q from
// h_t directly ("q_proj").
//
// Two ways to compute the same thing:
//   naive     (training): k_C and v are formed for every key and head, attention as usual;
//   absorbed  (decoding, and forward with absorb): W_uk is folded into the query,
//             q_C . k_C = (W_uk,i^T q_C) . c_kv, so each head attends over [c_kv, k_R] directly (one
//             key/value head shared by all, on the fused kernel) and W_uv is applied to the
//             attention-weighted latent afterwards. Nothing per head is ever formed for the keys.
// A cache (MLACache) holds c_kv (B, T, r_kv) and k_R (B, T, d_r): (r_kv + d_r) numbers per token
// and layer, against 2 H d_h for multi-head attention.
//
//   nn::MultiHeadLatentAttention mla(nn::MultiHeadLatentAttentionOptions(/*d_model=*/256, /*heads=*/8)
//                                         .kv_lora_rank(64).q_lora_rank(96).max_len(512));
//   Tensor y = mla(x);                               // (B, T, 256), causal, naive
//   nn::MLACache cache;                              // decoding, one token x_t: (B, 1, 256)
//   Tensor y_t = mla(x_t, &cache);

#include <cstdint>

#include "tapegrad/nn/layers.h"
#include "tapegrad/nn/linear.h"
#include "tapegrad/nn/module.h"
#include "tapegrad/nn/positions.h"

namespace tapegrad::nn {

// Defaults: DeepSeek-V2's proportions at a small size.
struct MultiHeadLatentAttentionOptions {
  MultiHeadLatentAttentionOptions(std::int64_t d_model, std::int64_t num_heads)
      : d_model_(d_model), num_heads_(num_heads) {}
  TAPEGRAD_ARG(std::int64_t, d_model);
  TAPEGRAD_ARG(std::int64_t, num_heads);
  TAPEGRAD_ARG(std::int64_t, q_lora_rank) = 0;    // 0: q projected from h_t directly
  TAPEGRAD_ARG(std::int64_t, kv_lora_rank) = 64;  // r_kv
  TAPEGRAD_ARG(std::int64_t, qk_nope_head_dim) = 32;
  TAPEGRAD_ARG(std::int64_t, qk_rope_head_dim) = 16;  // even
  TAPEGRAD_ARG(std::int64_t, v_head_dim) = 32;
  TAPEGRAD_ARG(std::int64_t, max_len) = 2048;  // positions RoPE covers
  TAPEGRAD_ARG(double, norm_eps) = 1e-6;
  TAPEGRAD_ARG(Generator*, generator) = nullptr;  // draws the initial weights (default generator if null)
};

// What multi-head latent attention keeps per token while decoding: the normalised latent and the
// rotated shared key. Empty at first; every forward given it appends the new positions.
struct MLACache {
  Tensor latent;      // c_kv: (B, T, kv_lora_rank)
  Tensor rotary_key;  // k_R: (B, T, qk_rope_head_dim)
  std::int64_t length() const { return latent.defined() ? latent.size(1) : 0; }
};

class MultiHeadLatentAttentionImpl : public Module {
 public:
  explicit MultiHeadLatentAttentionImpl(const MultiHeadLatentAttentionOptions& options);

  // Causal self-attention over x (B, T, d_model) -> (B, T, d_model). With a cache the new tokens
  // follow the cached ones and the absorbed path runs; otherwise `absorb` picks it.
  Tensor forward(const Tensor& x, MLACache* cache = nullptr, bool absorb = false);

  const MultiHeadLatentAttentionOptions& options() const { return options_; }

 private:
  MultiHeadLatentAttentionOptions options_;
  Linear q_a_proj_{nullptr}, q_b_proj_{nullptr}, q_proj_{nullptr}, kv_a_proj_{nullptr}, kv_b_proj_{nullptr},
      o_proj_{nullptr};
  RMSNorm q_a_norm_{nullptr}, kv_a_norm_{nullptr};
  RotaryEmbedding rotary_{nullptr};
};
TAPEGRAD_MODULE(MultiHeadLatentAttention);

}  // namespace tapegrad::nn
