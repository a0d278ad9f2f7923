#pragma once
// Transformer blocks, stacks and a decoder-only language model.
//
// Pre-norm (norm_first = true) normalises each sublayer's input:
//   x = x + dropout(attn(norm1(x)));  x = x + dropout(ff(norm2(x)))
// Post-norm (norm_first = false, the original transformer) normalises after the residual:
//   x = norm1(x + dropout(attn(x)));  x = norm2(x + dropout(ff(x)))
// A decoder layer has three sublayers: causal self-attention, cross-attention to the encoder
// output ("memory"), feed-forward. Pre-norm stacks end with a final LayerNorm ("norm").

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "tapegrad/nn/attention.h"
#include "tapegrad/nn/layers.h"
#include "tapegrad/nn/module.h"
#include "tapegrad/nn/positions.h"

namespace tapegrad::nn {

// Example: {.d_model = 64, .num_heads = 4, .ff_hidden = 256} with ReLU, no dropout, pre-norm.
struct TransformerLayerOptions {
  std::int64_t d_model = 64;
  std::int64_t num_heads = 4;
  std::int64_t ff_hidden = 256;
  Activation activation = Activation::ReLU;
  double dropout = 0.0;
  bool norm_first = true;
  double eps = 1e-5;
  std::int64_t rotary_max_len = 0;  // > 0: RoPE in every self-attention (see MultiHeadAttentionOptions)
};

class TransformerEncoderLayer : public Module {
 public:
  // Children: "self_attn", "ff", "norm1", "norm2", "dropout1", "dropout2".
  TransformerEncoderLayer(const TransformerLayerOptions& options, Generator& gen);
  // x: (B, T, d); key_padding_mask: Bool (B, T), true = padding. is_causal makes it the block of
  // a decoder-only model; with a cache, x holds only the new positions.
  Tensor forward(const Tensor& x, const Tensor& key_padding_mask = Tensor(), bool is_causal = false,
                 KVCache* cache = nullptr);
  Tensor operator()(const Tensor& x, const Tensor& key_padding_mask = Tensor()) { return forward(x, key_padding_mask); }

 private:
  TransformerLayerOptions options_;
  std::shared_ptr<MultiHeadAttention> self_attn_;
  std::shared_ptr<FeedForward> ff_;
  std::shared_ptr<LayerNorm> norm1_, norm2_;
  std::shared_ptr<Dropout> dropout1_, dropout2_;
};

// What a decoder layer needs besides its input. The caches are for incremental decoding.
struct DecoderLayerInputs {
  Tensor tgt_key_padding_mask;     // Bool (B, T_tgt), true = padding
  Tensor memory_key_padding_mask;  // Bool (B, T_src), true = padding
  KVCache* self_cache = nullptr;   // grows by the new positions on each call
  KVCache* cross_cache = nullptr;  // the memory's projected keys/values, filled on first use
  bool need_cross_weights = false;
};

class TransformerDecoderLayer : public Module {
 public:
  // Children: "self_attn", "cross_attn", "ff", "norm1".."norm3", "dropout1".."dropout3".
  TransformerDecoderLayer(const TransformerLayerOptions& options, Generator& gen);
  // x: (B, T, d) (causally masked, offset by the cache), memory: (B, S, d) -> (B, T, d).
  // When inputs.need_cross_weights, *cross_weights receives (B, H, T, S).
  Tensor forward(const Tensor& x, const Tensor& memory, const DecoderLayerInputs& inputs = {},
                 Tensor* cross_weights = nullptr);

 private:
  TransformerLayerOptions options_;
  std::shared_ptr<MultiHeadAttention> self_attn_, cross_attn_;
  std::shared_ptr<FeedForward> ff_;
  std::shared_ptr<LayerNorm> norm1_, norm2_, norm3_;
  std::shared_ptr<Dropout> dropout1_, dropout2_, dropout3_;
};

// A stack of encoder layers ("layers.0" ...) and, for pre-norm, a final "norm".
class TransformerEncoder : public Module {
 public:
  TransformerEncoder(std::int64_t num_layers, const TransformerLayerOptions& options, Generator& gen);
  Tensor forward(const Tensor& x, const Tensor& key_padding_mask = Tensor());
  Tensor operator()(const Tensor& x, const Tensor& key_padding_mask = Tensor()) { return forward(x, key_padding_mask); }
  std::int64_t num_layers() const { return static_cast<std::int64_t>(layers_.size()); }

 private:
  std::vector<std::shared_ptr<TransformerEncoderLayer>> layers_;
  std::shared_ptr<LayerNorm> norm_;  // null for post-norm
};

// Per-layer caches of a decoder stack.
struct DecoderCache {
  std::vector<KVCache> self;
  std::vector<KVCache> cross;
  std::int64_t length() const { return self.empty() ? 0 : self.front().length(); }
};

class TransformerDecoder : public Module {
 public:
  TransformerDecoder(std::int64_t num_layers, const TransformerLayerOptions& options, Generator& gen);
  // x: (B, T, d), memory: (B, S, d). With a cache, x holds only the new positions. When
  // cross_weights is given it receives each layer's (B, H, T, S) cross-attention weights.
  Tensor forward(const Tensor& x, const Tensor& memory, const Tensor& tgt_key_padding_mask = Tensor(),
                 const Tensor& memory_key_padding_mask = Tensor(), DecoderCache* cache = nullptr,
                 std::vector<Tensor>* cross_weights = nullptr);
  std::int64_t num_layers() const { return static_cast<std::int64_t>(layers_.size()); }

 private:
  std::vector<std::shared_ptr<TransformerDecoderLayer>> layers_;
  std::shared_ptr<LayerNorm> norm_;  // null for post-norm
};

// Decoder-only language model: token embedding + learned positions -> causal self-attention
// blocks (encoder layers run with is_causal) -> final norm -> Linear to the vocabulary.
struct LanguageModelOptions {
  std::int64_t vocab_size = 256;
  std::int64_t max_len = 128;
  std::int64_t num_layers = 4;
  TransformerLayerOptions layer;
};

struct GenerationOptions {
  std::int64_t max_new_tokens = 16;
  double temperature = 1.0;  // 0 = greedy (argmax)
  std::int64_t top_k = 0;    // 0 = sample from the whole vocabulary
  std::optional<std::int64_t> eos_token;  // stop a sequence once it emits this
};

class LanguageModel : public Module {
 public:
  // Children: "tok_emb", "pos_emb", "blocks.0" ..., "norm", "head".
  LanguageModel(const LanguageModelOptions& options, Generator& gen);
  // tokens: Int64 (B, T) -> logits (B, T, vocab). With caches (one per block), tokens are the
  // new positions only and positions continue from the cached length.
  Tensor forward(const Tensor& tokens, std::vector<KVCache>* caches = nullptr);
  Tensor operator()(const Tensor& tokens) { return forward(tokens); }
  // Continues prompt (Int64 (B, T0)) token by token with the KV cache, under no-grad; returns
  // (B, T0 + new). Greedy when temperature is 0, else samples from softmax(logits / temperature)
  // restricted to the top_k most likely tokens when top_k > 0.
  Tensor generate(const Tensor& prompt, const GenerationOptions& options, Generator& gen);
  const LanguageModelOptions& options() const { return options_; }

 private:
  LanguageModelOptions options_;
  std::shared_ptr<Embedding> tok_emb_;
  std::shared_ptr<LearnedPositionEmbedding> pos_emb_;
  std::vector<std::shared_ptr<TransformerEncoderLayer>> blocks_;  // run with is_causal
  std::shared_ptr<LayerNorm> norm_;
  std::shared_ptr<Linear> head_;
};

// Encoder-decoder transformer for sequence-to-sequence tasks: source and target token
// embeddings plus positions, an encoder stack, a decoder stack with
// causal self-attention and cross-attention, and Linear(d, tgt_vocab) on top.
// Rotary: no positions are added to the embeddings; self-attention rotates q and k instead.
enum class PositionEncoding { Learned, Sinusoidal, Rotary };

struct EncoderDecoderOptions {
  std::int64_t src_vocab = 8;
  std::int64_t tgt_vocab = 8;
  std::int64_t max_len = 16;
  std::int64_t encoder_layers = 2;
  std::int64_t decoder_layers = 2;
  PositionEncoding positions = PositionEncoding::Learned;
  // Multiply token embeddings by sqrt(d_model) before adding positions (Vaswani et al., whose
  // embeddings start with variance 1/d). Off by default: Embedding starts at N(0, 1) as in
  // PyTorch, the scale of the learned or sinusoidal positions, and scaling it would make the
  // tokens drown the positions (the reversal task then needs 8x the steps).
  bool scale_embeddings = false;
  TransformerLayerOptions layer;
};

class EncoderDecoder : public Module {
 public:
  // Children: "src_emb", "tgt_emb", "src_pos", "tgt_pos", "encoder", "decoder", "head".
  EncoderDecoder(const EncoderDecoderOptions& options, Generator& gen);
  // src: Int64 (B, S) -> memory (B, S, d).
  Tensor encode(const Tensor& src, const Tensor& src_key_padding_mask = Tensor());
  // tgt_in: Int64 (B, T) -> logits (B, T, tgt_vocab). With a cache, tgt_in holds only the new
  // positions, which continue from the cached length.
  Tensor decode(const Tensor& tgt_in, const Tensor& memory, const Tensor& tgt_key_padding_mask = Tensor(),
                const Tensor& memory_key_padding_mask = Tensor(), DecoderCache* cache = nullptr,
                std::vector<Tensor>* cross_weights = nullptr);
  Tensor forward(const Tensor& src, const Tensor& tgt_in, const Tensor& src_key_padding_mask = Tensor(),
                 const Tensor& tgt_key_padding_mask = Tensor());
  // Greedy decoding with the KV cache, under no-grad: starts every row with sos and appends the
  // argmax token until all rows have produced eos or max_new_tokens were made. Returns (B, 1 + n)
  // including the leading sos; rows that finished early are padded with eos.
  Tensor greedy_decode(const Tensor& src, std::int64_t sos, std::int64_t eos, std::int64_t max_new_tokens,
                       const Tensor& src_key_padding_mask = Tensor());
  const EncoderDecoderOptions& options() const { return options_; }

 private:
  Tensor embed(const std::shared_ptr<Embedding>& table, const std::shared_ptr<UnaryModule>& learned_or_sinusoidal,
               const Tensor& tokens, std::int64_t offset);

  EncoderDecoderOptions options_;
  std::shared_ptr<Embedding> src_emb_, tgt_emb_;
  std::shared_ptr<UnaryModule> src_pos_, tgt_pos_;
  std::shared_ptr<TransformerEncoder> encoder_;
  std::shared_ptr<TransformerDecoder> decoder_;
  std::shared_ptr<Linear> head_;
};

}  // namespace tapegrad::nn
