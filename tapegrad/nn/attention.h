#pragma once
// Scaled dot-product attention and MultiHeadAttention (self- and cross-attention, causal
// masking, key-padding and general masks, a key/value cache for incremental decoding).
//
//   scores  = scale * q @ k^T                     q: (..., Tq, D), k: (..., Tk, D) -> (..., Tq, Tk)
//   scores += additive_mask                       (float, broadcast to the scores)
//   weights = softmax(scores over Tk, masked keys excluded)
//   output  = dropout(weights) @ v                v: (..., Tk, Dv) -> (..., Tq, Dv)
//
// The leading axes ("...", e.g. (B, H)) of q, k and v broadcast together, as in torch's
// F.scaled_dot_product_attention; scale defaults to 1 / sqrt(D).
// Masks say their polarity in their names:
//   is_causal         query i sees key j when j <= i (CausalAlignment::TopLeft, PyTorch's default)
//                     or j <= i + (Tk - Tq) (BottomRight: the queries are the last Tq positions,
//                     as in decoding after Tk - Tq cached keys). The two agree when Tq = Tk.
//                     MultiHeadAttention given a KV cache always uses BottomRight.
//   key_padding_mask  Bool (B, Tk), true = padding: that key is ignored (B = the first leading axis).
//   keep_mask         Bool broadcast to the scores, true = keep (may attend).
//   additive_mask     float broadcast to the scores, added to them; -inf entries count as masked.
//   attn_mask         torch's argument of that name: a Bool mask is a keep_mask, a float one an
//                     additive_mask (given instead of those).
// Two paths compute it. When no weights are asked for, there is no dropout, q, k and v share their
// leading shape and the additive mask needs no gradient, the fused kernel runs (fused_attention in
// autograd/ops.h: an online softmax over key tiles, the scores never materialised, memory linear
// in T); otherwise the unfused composition below, which is also the reference the tests hold the
// fused one to.
// A query row whose keys are all masked gets zero weights and a zero output, never NaN, and
// passes no gradient (on both paths). On the unfused one: such rows are softmaxed over their raw (finite) scores and
// then zeroed with masked_fill, so no NaN appears anywhere, forward or backward. Other masked entries are set to -inf
// before the softmax, so they get exactly 0 weight.
//
//   nn::MultiHeadAttention attn(/*embed_dim=*/256, /*num_heads=*/8);
//   Tensor y = attn(x, Tensor(), nn::AttentionForwardOptions().is_causal(true)).output;  // (B, T, 256)
//   nn::KVCache cache;                  // incremental decoding, one step x_t: (B, 1, 256)
//   Tensor y_t = attn(x_t, Tensor(), nn::AttentionForwardOptions().is_causal(true).cache(&cache)).output;

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "tapegrad/nn/linear.h"
#include "tapegrad/nn/module.h"
#include "tapegrad/nn/positions.h"

namespace tapegrad::nn {

struct AttentionResult {
  Tensor output;   // (..., Tq, Dv) from scaled_dot_product_attention; (B, Tq, d_model) from the module
  Tensor weights;  // (..., Tq, Tk), per head (B, H, Tq, Tk) from the module, before dropout; undefined unless asked for
};

// Which keys a causal mask lets query i see when Tq != Tk (see the top of this file).
enum class CausalAlignment {
  TopLeft,     // j <= i (torch's is_causal)
  BottomRight  // j <= i + Tk - Tq (the queries are the last Tq of Tk positions)
};

// Projected keys and values of every position seen so far, k, v: (B, H, T_cached, head_dim).
// Self-attention appends the new positions on each call; cross-attention fills it on the first
// call and reuses it afterwards (the memory does not change while decoding). Empty at first.
// Decode under NoGradGuard: with gradients on, the cached tensors keep their graph alive.
struct MLACache;  // latent_attention.h

struct KVCache {
  Tensor k;
  Tensor v;
  std::int64_t length() const { return k.defined() ? k.shape()[2] : 0; }
};

// What attention takes besides its inputs: the masks, whether to return the weights, and the KV
// cache. One struct for scaled_dot_product_attention, MultiHeadAttention and the transformer
// layers and stacks (a decoder takes one for its self-attention and one for its cross-attention).
//   nn::AttentionForwardOptions().is_causal(true).key_padding_mask(pad)
struct AttentionForwardOptions {
  TAPEGRAD_ARG(bool, is_causal) = false;
  TAPEGRAD_ARG(CausalAlignment, causal_alignment) = CausalAlignment::TopLeft;
  TAPEGRAD_ARG(Tensor, key_padding_mask);      // Bool (B, Tk), true = padding; Tk counts cached positions too
  TAPEGRAD_ARG(Tensor, keep_mask);             // Bool, broadcast to the scores (..., Tq, Tk), true = may attend
  TAPEGRAD_ARG(Tensor, additive_mask);         // q's dtype, broadcast to the scores (..., Tq, Tk), added to them
  TAPEGRAD_ARG(Tensor, attn_mask);             // torch's: Bool = keep_mask, float = additive_mask (not with those)
  TAPEGRAD_ARG(std::optional<double>, scale);  // multiplies q @ k^T; 1 / sqrt(D) when not given
  TAPEGRAD_ARG(bool, need_weights) = false;
  // Incremental decoding (see KVCache): read by MultiHeadAttention and a single layer; a stack
  // takes a DecoderCache (or, for a language model, a LanguageModelCache) instead.
  TAPEGRAD_ARG(KVCache*, cache) = nullptr;
  // The same for an encoder layer whose self-attention is latent attention (latent_attention.h).
  TAPEGRAD_ARG(MLACache*, latent_cache) = nullptr;
};

// torch's F.scaled_dot_product_attention: q: (..., Tq, D), k: (..., Tk, D), v: (..., Tk, Dv), the
// leading axes broadcast together to L -> output (L..., Tq, Dv) and, when options.need_weights, the
// weights (L..., Tq, Tk). dropout_p > 0 drops attention weights (scaling the rest by 1 / (1 - p)),
// drawing from gen (the default generator if null). options.cache is not read here (the module
// keeps caches). Throws ShapeError / TypeError / ValueError naming the shapes.
AttentionResult scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                             const AttentionForwardOptions& options = {}, double dropout_p = 0.0,
                                             Generator* gen = nullptr);

// Defaults are torch.nn.MultiheadAttention's (dropout 0, bias true).
//   nn::MultiHeadAttentionOptions(64, 4).dropout(0.1)
//   nn::MultiHeadAttentionOptions(64, 4).cross_attention(true).kdim(32)
struct MultiHeadAttentionOptions {
  MultiHeadAttentionOptions(std::int64_t embed_dim, std::int64_t num_heads)
      : embed_dim_(embed_dim), num_heads_(num_heads) {}
  TAPEGRAD_ARG(std::int64_t, embed_dim);
  TAPEGRAD_ARG(std::int64_t, num_heads);
  // Key/value heads, dividing num_heads (0: num_heads). Fewer is grouped-query attention (1:
  // multi-query): query head h attends with key/value head h / (num_heads / num_kv_heads), the
  // k and v projections have num_kv_heads * head_dim rows, and a KV cache holds only those heads.
  TAPEGRAD_ARG(std::int64_t, num_kv_heads) = 0;
  TAPEGRAD_ARG(double, dropout) = 0.0;  // on the attention weights, in training mode only
  TAPEGRAD_ARG(bool, bias) = true;      // in_proj_bias and out_proj.bias
  // false: self-attention, forward(x). true: cross-attention, forward(query, key_value) or
  // forward(query, key, value); with a cache, the memory's projections are kept after the first call.
  // The parameters do not depend on it (only on kdim and vdim), so one state dict serves both.
  TAPEGRAD_ARG(bool, cross_attention) = false;
  // Feature sizes of the keys and values (cross-attention only); 0 means embed_dim (torch's
  // kdim, vdim). vdim 0 with kdim set means vdim = kdim (keys and values from one sequence).
  TAPEGRAD_ARG(std::int64_t, kdim) = 0;
  TAPEGRAD_ARG(std::int64_t, vdim) = 0;
  // > 0: self-attention rotates q and k by rotary position embeddings (RoPE) for positions up
  // to this length; with a KV cache, the new positions continue from the cached length.
  TAPEGRAD_ARG(std::int64_t, rotary_max_len) = 0;
  // Draws the initial weights and the dropout generator's seed from *generator (default generator if null).
  TAPEGRAD_ARG(Generator*, generator) = nullptr;
};

// Multi-head attention: heads of size head_dim = d_model / num_heads, computed together in the
// (B, H, T, head_dim) layout (views of the projections, batched matmuls, one softmax).
//   self:  query (B, Tq, d), key_value undefined      -> output (B, Tq, d)
//   cross: query (B, Tq, d), key_value (B, Tk, kdim)  -> output (B, Tq, d)
//          (or key (B, Tk, kdim) and value (B, Tk, vdim))
// The forward is functional::multi_head_attention_forward (functional.h) over the module's weights.
// With options.cache, a causal mask is bottom-right aligned (the new queries follow the cached keys).
// Parameters by torch.nn.MultiheadAttention's names, so its state dicts load by name:
//   kdim = vdim = d (self or cross): "in_proj_weight" (3d, d), rows [W_q; W_k; W_v]
//   otherwise:                       "q_proj_weight" (d, d), "k_proj_weight" (d, kdim), "v_proj_weight" (d, vdim)
//   then "in_proj_bias" (3d) (with bias) and the child "out_proj" = Linear(d, d).
// With num_kv_heads < num_heads the k and v blocks have dkv = num_kv_heads * head_dim rows
// instead of d: in_proj_weight (d + 2 dkv, d), k_proj_weight (dkv, kdim), in_proj_bias (d + 2 dkv).
// Each projection is a gemm over its weight or a view of the fused weight's row block. Weights and
// biases start uniform in +-1/sqrt(fan_in), as the Linear layers they stand for (torch's
// MultiheadAttention starts with xavier_uniform weights and zero biases instead).
// The returned weights are per head, (B, H, Tq, Tk), before dropout (for pictures).
class MultiHeadAttentionImpl : public Module {
 public:
  MultiHeadAttentionImpl(std::int64_t embed_dim, std::int64_t num_heads)
      : MultiHeadAttentionImpl(MultiHeadAttentionOptions(embed_dim, num_heads)) {}
  explicit MultiHeadAttentionImpl(const MultiHeadAttentionOptions& options);

  AttentionResult forward(const Tensor& query, const Tensor& key_value = Tensor(),
                          const AttentionForwardOptions& options = {});
  // Cross-attention with keys and values from different tensors (kdim and vdim may differ).
  AttentionResult forward(const Tensor& query, const Tensor& key, const Tensor& value,
                          const AttentionForwardOptions& options = {});

  std::int64_t d_model() const { return d_model_; }
  std::int64_t num_heads() const { return num_heads_; }
  std::int64_t num_kv_heads() const { return num_kv_heads_; }
  std::int64_t head_dim() const { return head_dim_; }
  bool is_cross_attention() const { return options_.cross_attention(); }
  // torch's _qkv_same_embed_dim: the projections are the row blocks of in_proj_weight.
  bool qkv_same_embed_dim() const { return in_proj_weight_.defined(); }
  const Tensor& in_proj_weight() const { return in_proj_weight_; }  // undefined unless qkv_same_embed_dim
  const Tensor& q_proj_weight() const { return q_proj_weight_; }    // undefined when qkv_same_embed_dim
  const Tensor& k_proj_weight() const { return k_proj_weight_; }
  const Tensor& v_proj_weight() const { return v_proj_weight_; }
  const Tensor& in_proj_bias() const { return in_proj_bias_; }  // undefined without bias
  const Linear& out_proj() const { return out_proj_; }
  const MultiHeadAttentionOptions& options() const { return options_; }

 private:
  std::int64_t d_model_;
  std::int64_t num_heads_;
  std::int64_t num_kv_heads_;
  std::int64_t head_dim_;
  MultiHeadAttentionOptions options_;
  Tensor in_proj_weight_, q_proj_weight_, k_proj_weight_, v_proj_weight_, in_proj_bias_;
  Linear out_proj_{nullptr};
  RotaryEmbedding rotary_{nullptr};  // empty unless options.rotary_max_len > 0
  Generator dropout_gen_;            // seeded from the construction generator, so a run is reproducible
};
TAPEGRAD_MODULE(MultiHeadAttention);

}  // namespace tapegrad::nn
