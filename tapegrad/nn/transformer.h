#pragma once
// Transformer blocks, stacks and a decoder-only language model.
//
// Pre-norm (norm_first(true)) normalises each sublayer's input:
//   x = x + dropout(attn(norm1(x)));  x = x + dropout(ff(norm2(x)))
// Post-norm (norm_first(false), the original transformer and PyTorch's default) normalises after the residual:
//   x = norm1(x + dropout(attn(x)));  x = norm2(x + dropout(ff(x)))
// A decoder layer has three sublayers: causal self-attention, cross-attention to the encoder
// output ("memory"), feed-forward. Pre-norm stacks end with a final LayerNorm ("norm").

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "tapegrad/nn/attention.h"
#include "tapegrad/nn/latent_attention.h"
#include "tapegrad/nn/layers.h"
#include "tapegrad/nn/module.h"
#include "tapegrad/nn/moe.h"
#include "tapegrad/nn/positions.h"

namespace tapegrad::nn {

// How a model knows positions: learned or sinusoidal vectors added to the token embeddings, or
// rotary embeddings in every self-attention (nothing added).
enum class PositionEncoding { Learned, Sinusoidal, Rotary };

// The options of an encoder or decoder layer, with torch.nn.TransformerEncoderLayer's defaults
// (and, without arguments, torch.nn.Transformer's d_model 512 and nhead 8):
//   nn::TransformerLayerOptions(/*d_model=*/64, /*nhead=*/4).dim_feedforward(256).dropout(0.0).norm_first(true)
struct TransformerLayerOptions {
  TransformerLayerOptions() : TransformerLayerOptions(512, 8) {}
  TransformerLayerOptions(std::int64_t d_model, std::int64_t nhead) : d_model_(d_model), nhead_(nhead) {}
  TAPEGRAD_ARG(std::int64_t, d_model);
  TAPEGRAD_ARG(std::int64_t, nhead);
  TAPEGRAD_ARG(std::int64_t, num_kv_heads) = 0;  // < nhead: grouped-query attention (see MultiHeadAttentionOptions)
  TAPEGRAD_ARG(std::int64_t, dim_feedforward) = 2048;
  TAPEGRAD_ARG(double, dropout) = 0.1;  // after attention, in the feed-forward network, on the residual branches
  TAPEGRAD_ARG(Activation, activation) = Activation::ReLU;
  TAPEGRAD_ARG(bool, norm_first) = false;  // false: post-norm (the original transformer)
  TAPEGRAD_ARG(double, layer_norm_eps) = 1e-5;
  TAPEGRAD_ARG(std::int64_t, rotary_max_len) = 0;  // > 0: RoPE in every self-attention (see MultiHeadAttentionOptions)
  // Set: an encoder layer's self-attention is multi-head latent attention (latent_attention.h; causal, no
  // masks, its own decoupled RoPE) instead of MultiHeadAttention. Its d_model must be this d_model.
  TAPEGRAD_ARG(std::optional<MultiHeadLatentAttentionOptions>, latent_attention);
  // Set: an encoder layer's feed-forward sublayer is a mixture of experts (child "moe" instead of
  // "ff"; its dim must be this d_model). The MoE's output of the layer's last forward (auxiliary
  // losses, loads, dropped assignments) is TransformerEncoderLayerImpl::last_moe(). Decoder layers
  // refuse it.
  TAPEGRAD_ARG(std::optional<MoEOptions>, moe);
  // Draws the initial weights and the dropout generators' seeds from *generator (default generator if null).
  TAPEGRAD_ARG(Generator*, generator) = nullptr;
};

class TransformerEncoderLayerImpl : public Module {
 public:
  // Children: "self_attn", "ff", "norm1", "norm2", "dropout1", "dropout2".
  explicit TransformerEncoderLayerImpl(const TransformerLayerOptions& options);
  // x: (B, T, d) -> (B, T, d). options: the self-attention's masks (key_padding_mask: Bool (B, T),
  // true = padding); is_causal makes it the block of a decoder-only model; with a cache, x holds
  // only the new positions. need_weights is refused (ValueError): a layer returns one tensor.
  // With latent attention: is_causal is required, masks are refused, and the cache is latent_cache.
  Tensor forward(const Tensor& x, const AttentionForwardOptions& options = {});
  // With options.moe(): what the mixture of experts returned in the last forward (empty before).
  const MoEOutput& last_moe() const { return last_moe_; }

 private:
  TransformerLayerOptions options_;
  MultiHeadAttention self_attn_{nullptr};
  MultiHeadLatentAttention latent_attn_{nullptr};  // instead of self_attn_ with options.latent_attention()
  FeedForward ff_{nullptr};
  MixtureOfExperts moe_{nullptr};  // instead of ff_ with options.moe()
  MoEOutput last_moe_;
  LayerNorm norm1_{nullptr}, norm2_{nullptr};
  Dropout dropout1_{nullptr}, dropout2_{nullptr};
};
TAPEGRAD_MODULE(TransformerEncoderLayer);

struct DecoderLayerResult {
  Tensor output;         // (B, T, d)
  Tensor cross_weights;  // (B, H, T, S) when cross.need_weights, else undefined
};

class TransformerDecoderLayerImpl : public Module {
 public:
  // Children: "self_attn", "cross_attn", "ff", "norm1".."norm3", "dropout1".."dropout3".
  explicit TransformerDecoderLayerImpl(const TransformerLayerOptions& options);
  // x: (B, T, d), memory: (B, S, d) -> output (B, T, d). self: the self-attention's masks and cache
  // (it is causal whatever self.is_causal says, offset by the cache); cross: the cross-attention's
  // (memory_key_padding_mask as cross.key_padding_mask, its cache holds the memory's projections,
  // cross.need_weights returns the weights).
  DecoderLayerResult forward(const Tensor& x, const Tensor& memory, const AttentionForwardOptions& self = {},
                             const AttentionForwardOptions& cross = {});

 private:
  TransformerLayerOptions options_;
  MultiHeadAttention self_attn_{nullptr}, cross_attn_{nullptr};
  FeedForward ff_{nullptr};
  LayerNorm norm1_{nullptr}, norm2_{nullptr}, norm3_{nullptr};
  Dropout dropout1_{nullptr}, dropout2_{nullptr}, dropout3_{nullptr};
};
TAPEGRAD_MODULE(TransformerDecoderLayer);

// A stack of encoder layers ("layers.0" ...) and a final LayerNorm ("norm"): by default for pre-norm
// only; final_norm true or false decides (torch.nn.Transformer has one after post-norm stacks too).
//   nn::TransformerEncoder encoder(nn::TransformerLayerOptions(64, 4).norm_first(true), /*num_layers=*/2);
//   Tensor h = encoder(x, nn::AttentionForwardOptions().key_padding_mask(pad));
class TransformerEncoderImpl : public Module {
 public:
  TransformerEncoderImpl(const TransformerLayerOptions& layer, std::int64_t num_layers,
                         std::optional<bool> final_norm = std::nullopt);
  // x: (B, T, d) -> (B, T, d); options as for one layer, without a cache (ValueError).
  Tensor forward(const Tensor& x, const AttentionForwardOptions& options = {});
  std::int64_t num_layers() const { return static_cast<std::int64_t>(layers_.size()); }

 private:
  std::vector<TransformerEncoderLayer> layers_;
  LayerNorm norm_{nullptr};  // empty without a final norm
};
TAPEGRAD_MODULE(TransformerEncoder);

// Per-layer caches of a decoder stack.
struct DecoderCache {
  std::vector<KVCache> self;
  std::vector<KVCache> cross;
  // An EncoderDecoder with randomized positions: each row's target positions, (B, n), drawn on the
  // first decode (n = max_len) unless the caller set them (n = the expected target length).
  Tensor positions;
  std::int64_t length() const { return self.empty() ? 0 : self.front().length(); }
  // Keeps rows `rows` of every layer's caches (beam search), rows may repeat.
  void reorder(const Tensor& rows);
};

struct DecoderResult {
  Tensor output;                      // (B, T, d) from the stack; logits (B, T, V) from EncoderDecoder::decode
  std::vector<Tensor> cross_weights;  // each layer's (B, H, T, S) when cross.need_weights, else empty
};

// A stack of decoder layers ("layers.0" ...) and a final "norm" as for TransformerEncoder.
class TransformerDecoderImpl : public Module {
 public:
  TransformerDecoderImpl(const TransformerLayerOptions& layer, std::int64_t num_layers,
                         std::optional<bool> final_norm = std::nullopt);
  // x: (B, T, d), memory: (B, S, d); self and cross as for one layer but without caches (ValueError):
  // the stack's caches are per layer, in `cache`. With a cache, x holds only the new positions.
  DecoderResult forward(const Tensor& x, const Tensor& memory, const AttentionForwardOptions& self = {},
                        const AttentionForwardOptions& cross = {}, DecoderCache* cache = nullptr);
  std::int64_t num_layers() const { return static_cast<std::int64_t>(layers_.size()); }

 private:
  std::vector<TransformerDecoderLayer> layers_;
  LayerNorm norm_{nullptr};  // empty without a final norm
};
TAPEGRAD_MODULE(TransformerDecoder);

// torch.nn.Transformer: an encoder stack and a decoder stack, each with a final LayerNorm, on vectors
// (no embeddings, positions or output layer; EncoderDecoder has them). Its state dict has torch's
// names under nn::pytorch_key_map() (key_map.h), so weights move both ways.
//   nn::Transformer model(nn::TransformerOptions(nn::TransformerLayerOptions(64, 4).dropout(0.0)));
//   Tensor y = model(src, tgt);  // (B, S, 64), (B, T, 64) -> (B, T, 64)
struct TransformerOptions {
  TransformerOptions() = default;
  explicit TransformerOptions(const TransformerLayerOptions& layer) : layer_(layer) {}
  TAPEGRAD_ARG(TransformerLayerOptions, layer);
  TAPEGRAD_ARG(std::int64_t, num_encoder_layers) = 6;
  TAPEGRAD_ARG(std::int64_t, num_decoder_layers) = 6;
  TAPEGRAD_ARG(Generator*, generator) = nullptr;  // initial weights and dropout; layer().generator() is not read
};

class TransformerImpl : public Module {
 public:
  // Children: "encoder", "decoder".
  explicit TransformerImpl(const TransformerOptions& options);
  // src: (B, S, d), tgt: (B, T, d) -> (B, T, d). The decoder's self-attention is causal, as torch's
  // with tgt_mask = Transformer.generate_square_subsequent_mask(T). src: the encoder's self-attention
  // masks (src_key_padding_mask as src.key_padding_mask); tgt: the decoder's (tgt_key_padding_mask);
  // memory: the cross-attention's (memory_key_padding_mask). None takes a cache.
  Tensor forward(const Tensor& src, const Tensor& tgt, const AttentionForwardOptions& src_options = {},
                 const AttentionForwardOptions& tgt_options = {}, const AttentionForwardOptions& memory_options = {});
  TransformerEncoder& encoder() { return encoder_; }
  TransformerDecoder& decoder() { return decoder_; }

 private:
  TransformerEncoder encoder_{nullptr};
  TransformerDecoder decoder_{nullptr};
};
TAPEGRAD_MODULE(Transformer);

// Decoder-only language model: token embedding (+ learned or sinusoidal positions) -> causal
// self-attention blocks (encoder layers run with is_causal) -> final norm -> Linear to the vocabulary.
// The blocks' attention is what layer() says: multi-head, grouped- or multi-query (num_kv_heads), or
// multi-head latent attention (latent_attention).
//   nn::LanguageModel lm{nn::LanguageModelOptions().vocab_size(256).layer(nn::TransformerLayerOptions(64, 4))};
struct LanguageModelOptions {
  TAPEGRAD_ARG(std::int64_t, vocab_size) = 256;
  TAPEGRAD_ARG(std::int64_t, max_len) = 128;
  TAPEGRAD_ARG(std::int64_t, num_layers) = 4;
  // Rotary sets layer().rotary_max_len(max_len); latent attention rotates its own decoupled key
  // whatever this says, and with Rotary nothing else carries positions.
  TAPEGRAD_ARG(PositionEncoding, positions) = PositionEncoding::Learned;
  TAPEGRAD_ARG(TransformerLayerOptions, layer);
  // Tied input and output embeddings (W_U = W_E^T): the logits are norm(h) @ tok_emb.weight^T, with
  // no "head" child and no output bias; the one table is "tok_emb.weight" in the state dict and its
  // gradient is the sum of both uses. It then starts N(0, 1/d), so the first logits have about unit
  // scale (N(0, 1), torch's Embedding default, otherwise).
  TAPEGRAD_ARG(bool, tie_embeddings) = false;
  // The whole model's initial weights and dropout seeds (default generator if null; layer().generator() is not read).
  TAPEGRAD_ARG(Generator*, generator) = nullptr;
};

struct GenerationOptions {
  std::int64_t max_new_tokens = 16;
  double temperature = 1.0;               // 0 = greedy (argmax)
  std::int64_t top_k = 0;                 // 0 = sample from the whole vocabulary
  double top_p = 1.0;                     // < 1: sample from the smallest set of most likely tokens whose
                                          // probability reaches top_p (nucleus sampling), after top_k
  std::optional<std::int64_t> eos_token;  // stop a sequence once it emits this
  // Past the model's max_len: false refuses (ValueError); true conditions each new token on the last
  // max_len tokens, recomputed without the cache (a sliding window).
  bool sliding_window = false;
};

// What a language model keeps while decoding, one entry per block: keys and values (multi-head,
// grouped- and multi-query attention) or the latent and rotary key (latent attention). Empty at
// first; every forward given it appends the new positions.
struct LanguageModelCache {
  std::vector<KVCache> kv;
  std::vector<MLACache> latent;
  std::int64_t length() const;
  // Bytes the cache holds per cached token and per block, counted from its tensors (0 when empty).
  double bytes_per_token_per_layer() const;
  // Keeps the batch rows `rows` (Int64 (R)) of every tensor, in that order (beam search).
  void reorder(const Tensor& rows);
};

class LanguageModelImpl : public Module {
 public:
  // Children: "tok_emb", "pos_emb" (learned positions only), "blocks.0" ..., "norm", "head" (not
  // with tie_embeddings).
  explicit LanguageModelImpl(const LanguageModelOptions& options);
  // tokens: Int64 (B, T) -> logits (B, T, vocab). With a cache, tokens are the new positions only
  // and positions continue from the cached length.
  Tensor forward(const Tensor& tokens, LanguageModelCache* cache = nullptr);
  // forward in two halves: the final hidden states (B, T, d), after the last LayerNorm, and the
  // logits of hidden states (the output projection). For heads that read the states themselves
  // (nn::PointerSentinel). They skip the module's forward hooks, as calling a torch submethod does.
  Tensor hidden(const Tensor& tokens, LanguageModelCache* cache = nullptr);
  Tensor logits(const Tensor& hidden);
  // Continues prompt (Int64 (B, T0)) token by token with the cache, under no-grad; returns
  // (B, T0 + new). Greedy when temperature is 0, else samples from softmax(logits / temperature)
  // restricted to the top_k most likely tokens when top_k > 0, then to the top_p nucleus when
  // top_p < 1.
  Tensor generate(const Tensor& prompt, const GenerationOptions& options, Generator& gen);
  const LanguageModelOptions& options() const { return options_; }
  // With layer().moe(): each block's mixture-of-experts output of the last forward, in block order
  // (their auxiliary losses go into the training loss); empty without.
  std::vector<const MoEOutput*> last_moe() const;

 private:
  LanguageModelOptions options_;
  Embedding tok_emb_{nullptr};
  LearnedPositionEmbedding pos_emb_{nullptr};
  SinusoidalPositionalEncoding sin_pos_{nullptr};
  std::vector<TransformerEncoderLayer> blocks_;  // run with is_causal
  LayerNorm norm_{nullptr};
  Linear head_{nullptr};
};
TAPEGRAD_MODULE(LanguageModel);

// Encoder-decoder transformer for sequence-to-sequence tasks: source and target token
// embeddings plus positions, an encoder stack, a decoder stack with
// causal self-attention and cross-attention, and Linear(d, tgt_vocab) on top.
// Rotary: no positions are added to the embeddings; self-attention rotates q and k instead.

//   nn::EncoderDecoderOptions().src_vocab(12).tgt_vocab(12).layer(nn::TransformerLayerOptions(64, 4))
struct EncoderDecoderOptions {
  TAPEGRAD_ARG(std::int64_t, src_vocab) = 8;
  TAPEGRAD_ARG(std::int64_t, tgt_vocab) = 8;
  TAPEGRAD_ARG(std::int64_t, max_len) = 16;
  TAPEGRAD_ARG(std::int64_t, encoder_layers) = 2;
  TAPEGRAD_ARG(std::int64_t, decoder_layers) = 2;
  TAPEGRAD_ARG(PositionEncoding, positions) = PositionEncoding::Learned;
  // Multiply token embeddings by sqrt(d_model) before adding positions (Vaswani et al., whose
  // embeddings start with variance 1/d). Off by default: Embedding starts at N(0, 1) as in
  // PyTorch, the scale of the learned or sinusoidal positions, and scaling it would make the
  // tokens drown the positions (the reversal task then needs 8x the steps).
  TAPEGRAD_ARG(bool, scale_embeddings) = false;
  // Randomized positions (Ruoss et al. 2023), with Learned or Sinusoidal positions: a table of this
  // many positions (at least max_len), and every sequence's positions an ordered random subset of
  // it (random_ordered_positions), drawn anew at every encode and decode from the model's
  // "position_generator", in training and in evaluation. 0: positions 0 .. T-1.
  TAPEGRAD_ARG(std::int64_t, randomized_positions) = 0;
  TAPEGRAD_ARG(TransformerLayerOptions, layer);
  // Tied target and output embeddings (W_U = W_E^T): the logits are the decoder's output @
  // tgt_emb.weight^T, with no "head" child and no output bias; one "tgt_emb.weight" in the state dict,
  // its gradient the sum of both uses. It then starts N(0, 1/d), as LanguageModelOptions says.
  TAPEGRAD_ARG(bool, tie_embeddings) = false;
  // The whole model's initial weights and dropout seeds (default generator if null; layer().generator() is not read).
  TAPEGRAD_ARG(Generator*, generator) = nullptr;
};

class EncoderDecoderImpl : public Module {
 public:
  // Children: "src_emb", "tgt_emb", "src_pos", "tgt_pos", "encoder", "decoder", "head" (not with
  // tie_embeddings).
  explicit EncoderDecoderImpl(const EncoderDecoderOptions& options);
  // src: Int64 (B, S) -> memory (B, S, d).
  Tensor encode(const Tensor& src, const Tensor& src_key_padding_mask = Tensor());
  // tgt_in: Int64 (B, T) -> output: logits (B, T, tgt_vocab), and the cross-attention weights when
  // cross.need_weights. self and cross as for TransformerDecoder (cross.key_padding_mask is the
  // source's padding). With a cache, tgt_in holds only the new positions, which continue from the
  // cached length.
  DecoderResult decode(const Tensor& tgt_in, const Tensor& memory, const AttentionForwardOptions& self = {},
                       const AttentionForwardOptions& cross = {}, DecoderCache* cache = nullptr);
  Tensor forward(const Tensor& src, const Tensor& tgt_in, const Tensor& src_key_padding_mask = Tensor(),
                 const Tensor& tgt_key_padding_mask = Tensor());
  // Greedy decoding with the KV cache, under no-grad: starts every row with sos and appends the
  // argmax token until all rows have produced eos or max_new_tokens were made. Returns (B, 1 + n)
  // including the leading sos; rows that finished early are padded with eos. ValueError for a
  // token id outside the target vocabulary; the module's training mode is restored, thrown or not.
  Tensor greedy_decode(const Tensor& src, std::int64_t sos, std::int64_t eos, std::int64_t max_new_tokens,
                       const Tensor& src_key_padding_mask = Tensor());
  const EncoderDecoderOptions& options() const { return options_; }
  // Draws randomized positions (rows, count) from the model's generator (randomized_positions only);
  // a decoder that knows its target length sets a cache's positions with it.
  Tensor sample_positions(std::int64_t rows, std::int64_t count);
  Generator& position_generator() { return position_gen_; }

 private:
  // One side's token embedding and positions (at most one of learned and sinusoidal is set).
  struct Side {
    Embedding tokens{nullptr};
    LearnedPositionEmbedding learned{nullptr};
    SinusoidalPositionalEncoding sinusoidal{nullptr};
  };
  Tensor embed(Side& side, const Tensor& tokens, std::int64_t offset, const Tensor& positions = Tensor());

  EncoderDecoderOptions options_;
  Generator position_gen_;
  Side src_, tgt_;
  TransformerEncoder encoder_{nullptr};
  TransformerDecoder decoder_{nullptr};
  Linear head_{nullptr};
};
TAPEGRAD_MODULE(EncoderDecoder);

}  // namespace tapegrad::nn
