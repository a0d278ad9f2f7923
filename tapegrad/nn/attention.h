#pragma once
// Scaled dot-product attention and MultiHeadAttention (self- and cross-attention, causal
// masking, key-padding and general masks, a key/value cache for incremental decoding).
//
//   scores  = (q / sqrt(D)) @ k^T                 q: (B, H, Tq, D), k: (B, H, Tk, D) -> (B, H, Tq, Tk)
//   scores += additive_mask                       (float, broadcast to (B, H, Tq, Tk))
//   weights = softmax(scores over Tk, masked keys excluded)
//   output  = dropout(weights) @ v                v: (B, H, Tk, Dv) -> (B, H, Tq, Dv)
//
// Masks say their polarity in their names:
//   is_causal         query i sees keys j <= i + (Tk - Tq): the last query sees every key, so
//                     the same rule serves a full pass (Tq = Tk) and cached decoding (Tq < Tk).
//   key_padding_mask  Bool (B, Tk), true = padding: that key is ignored.
//   keep_mask         Bool broadcast to (B, H, Tq, Tk), true = keep (may attend).
//   additive_mask     float broadcast to (B, H, Tq, Tk), added to the scores; -inf entries
//                     count as masked.
// A query row whose keys are all masked gets zero weights and a zero output, never NaN, and
// passes no gradient: such rows are softmaxed over their raw (finite) scores and then zeroed
// with masked_fill, so no NaN appears anywhere, forward or backward. Other masked entries are
// set to -inf before the softmax, so they get exactly 0 weight.
//
//   Generator gen(0);
//   nn::MultiHeadAttention attn(/*d_model=*/256, /*num_heads=*/8, gen);
//   nn::MultiHeadAttentionForwardOptions causal;
//   causal.is_causal = true;
//   Tensor y = attn(x, Tensor(), causal).output;  // x: (B, T, 256) -> y: (B, T, 256)
//   nn::KVCache cache;                            // incremental decoding, one step x_t: (B, 1, 256)
//   causal.cache = &cache;
//   Tensor y_t = attn(x_t, Tensor(), causal).output;

#include <cstdint>
#include <memory>
#include <vector>

#include "tapegrad/nn/linear.h"
#include "tapegrad/nn/module.h"
#include "tapegrad/nn/positions.h"

namespace tapegrad::nn {

struct AttentionMasks {
  bool is_causal = false;
  Tensor key_padding_mask;  // Bool (B, Tk), true = padding (ignored key)
  Tensor keep_mask;         // Bool, broadcast to (B, H, Tq, Tk), true = may attend
  Tensor additive_mask;     // q's dtype, broadcast to (B, H, Tq, Tk), added to the scores
};

struct AttentionResult {
  Tensor output;   // (B, H, Tq, Dv) from scaled_dot_product_attention; (B, Tq, d_model) from the module
  Tensor weights;  // (B, H, Tq, Tk) per head, before dropout; undefined unless asked for
};

// q: (B, H, Tq, D), k: (B, H, Tk, D), v: (B, H, Tk, Dv) -> output (B, H, Tq, Dv) and, when
// need_weights, the weights (B, H, Tq, Tk). dropout_p > 0 drops attention weights (scaling the
// rest by 1 / (1 - p)) and needs gen. Throws ShapeError / TypeError / ValueError naming the shapes.
AttentionResult scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                             const AttentionMasks& masks = {}, bool need_weights = false,
                                             double dropout_p = 0.0, Generator* gen = nullptr);

// Projected keys and values of every position seen so far, k, v: (B, H, T_cached, head_dim).
// Self-attention appends the new positions on each call; cross-attention fills it on the first
// call and reuses it afterwards (the memory does not change while decoding). Empty at first.
// Decode under NoGradGuard: with gradients on, the cached tensors keep their graph alive.
struct KVCache {
  Tensor k;
  Tensor v;
  std::int64_t length() const { return k.defined() ? k.shape()[2] : 0; }
};

struct MultiHeadAttentionOptions {
  bool bias = true;      // biases in every projection
  double dropout = 0.0;  // on the attention weights, in training mode only
  // false: self-attention, one fused projection qkv_proj = Linear(d, 3d).
  // true: cross-attention, q_proj = Linear(d, d) for the queries and a fused
  //       kv_proj = Linear(kv_dim, 2d) for the key/value sequence.
  bool cross_attention = false;
  // Feature size of the key/value sequence (cross-attention only); 0 means d_model. Keys and
  // values come from one sequence, so PyTorch's kdim and vdim are one number here.
  std::int64_t kv_dim = 0;
  // > 0: self-attention rotates q and k by rotary position embeddings (RoPE) for positions up
  // to this length; with a KV cache, the new positions continue from the cached length.
  std::int64_t rotary_max_len = 0;
};

struct MultiHeadAttentionForwardOptions {
  bool is_causal = false;
  Tensor key_padding_mask;  // Bool (B, Tk), true = padding; Tk counts cached positions too
  Tensor keep_mask;         // Bool, broadcast to (B, H, Tq, Tk), true = may attend
  Tensor additive_mask;     // float, broadcast to (B, H, Tq, Tk), added to the scores
  bool need_weights = false;
  KVCache* cache = nullptr;  // incremental decoding (see KVCache)
};

// Multi-head attention: heads of size head_dim = d_model / num_heads, computed together in the
// (B, H, T, head_dim) layout (views of the projections, batched matmuls, one softmax).
//   self:  query (B, Tq, d), key_value undefined      -> output (B, Tq, d)
//   cross: query (B, Tq, d), key_value (B, Tk, kv_dim) -> output (B, Tq, d)
// Children: "qkv_proj" (self) or "q_proj" and "kv_proj" (cross), then "out_proj" = Linear(d, d).
// The returned weights are per head, (B, H, Tq, Tk), before dropout (for pictures).
class MultiHeadAttention : public Module {
 public:
  MultiHeadAttention(std::int64_t d_model, std::int64_t num_heads, Generator& gen,
                     const MultiHeadAttentionOptions& options = {});

  AttentionResult forward(const Tensor& query, const Tensor& key_value = Tensor(),
                          const MultiHeadAttentionForwardOptions& options = {});
  AttentionResult operator()(const Tensor& query, const Tensor& key_value = Tensor(),
                             const MultiHeadAttentionForwardOptions& options = {}) {
    return forward(query, key_value, options);
  }

  std::int64_t d_model() const { return d_model_; }
  std::int64_t num_heads() const { return num_heads_; }
  std::int64_t head_dim() const { return head_dim_; }
  bool is_cross_attention() const { return options_.cross_attention; }
  const std::shared_ptr<Linear>& qkv_proj() const { return qkv_proj_; }  // null for cross-attention
  const std::shared_ptr<Linear>& q_proj() const { return q_proj_; }      // null for self-attention
  const std::shared_ptr<Linear>& kv_proj() const { return kv_proj_; }    // null for self-attention
  const std::shared_ptr<Linear>& out_proj() const { return out_proj_; }

 private:
  // x (B, T, in) through the n row blocks of proj's weight: n tensors (B, H, T, head_dim).
  std::vector<Tensor> project_heads(const Linear& proj, const Tensor& x, std::int64_t n) const;

  std::int64_t d_model_;
  std::int64_t num_heads_;
  std::int64_t head_dim_;
  MultiHeadAttentionOptions options_;
  std::shared_ptr<Linear> qkv_proj_;
  std::shared_ptr<Linear> q_proj_;
  std::shared_ptr<Linear> kv_proj_;
  std::shared_ptr<Linear> out_proj_;
  std::shared_ptr<RotaryEmbedding> rotary_;  // null unless options.rotary_max_len > 0
  Generator dropout_gen_;  // seeded from the constructor's generator, so a run is reproducible
};

}  // namespace tapegrad::nn
