#include "tapegrad/nn/transformer.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "tapegrad/nn/containers.h"
#include "tapegrad/nn/decoding.h"

namespace tapegrad::nn {

namespace {

void check_model_input(const Tensor& x, std::int64_t d_model, const char* op) {
  if (x.dim() != 3 || x.shape()[2] != d_model)
    throw ShapeError(message(op, ": expected input (B, T, ", d_model, "), got shape ", x.shape().str()));
}

// Puts a module in eval mode for a scope and restores its mode on the way out, thrown or not.
class EvalScope {
 public:
  explicit EvalScope(Module& module) : module_(module), was_training_(module.is_training()) { module_.eval(); }
  ~EvalScope() { module_.train(was_training_); }
  EvalScope(const EvalScope&) = delete;
  EvalScope& operator=(const EvalScope&) = delete;

 private:
  Module& module_;
  bool was_training_;
};

}  // namespace

// ---------------------------------------------------------------- encoder layer
namespace {

// The children every layer shares, drawn from gen in the order the layers always used.
MultiHeadAttentionOptions make_attention_options(const TransformerLayerOptions& options, Generator& gen) {
  return MultiHeadAttentionOptions(options.d_model(), options.nhead())
      .num_kv_heads(options.num_kv_heads())
      .dropout(options.dropout())
      .generator(&gen);
}
FeedForward make_feed_forward(const TransformerLayerOptions& options, Generator& gen) {
  return FeedForward(FeedForwardOptions(options.d_model(), options.dim_feedforward())
                         .activation(options.activation())
                         .dropout(options.dropout())
                         .generator(&gen));
}
LayerNorm make_norm(const TransformerLayerOptions& options) {
  return LayerNorm(LayerNormOptions(options.d_model()).eps(options.layer_norm_eps()));
}
Dropout make_dropout(const TransformerLayerOptions& options, Generator& gen) {
  return Dropout(DropoutOptions(options.dropout()).generator(&gen));
}

}  // namespace

TransformerEncoderLayerImpl::TransformerEncoderLayerImpl(const TransformerLayerOptions& options) : options_(options) {
  Generator& gen = generator_or_default(options.generator());
  options_.generator(nullptr);  // not kept: it need not outlive the construction
  if (options.latent_attention()) {
    MultiHeadLatentAttentionOptions latent = *options.latent_attention();
    if (latent.d_model() != options.d_model())
      throw ValueError(message("TransformerEncoderLayer: latent_attention has d_model ", latent.d_model(),
                               " but the layer ", options.d_model()));
    options_.latent_attention()->generator(nullptr);
    latent_attn_ = register_module("self_attn", MultiHeadLatentAttention(latent.generator(&gen)));
  } else {
    self_attn_ = register_module(
        "self_attn", MultiHeadAttention(make_attention_options(options, gen).rotary_max_len(options.rotary_max_len())));
  }
  if (options.moe()) {
    if (options.moe()->dim() != options.d_model())
      throw ValueError(message("TransformerEncoderLayer: moe has dim ", options.moe()->dim(), " but the layer d_model ",
                               options.d_model()));
    options_.moe()->generator(nullptr);
    moe_ = register_module("moe", MixtureOfExperts(MoEOptions(*options.moe()).generator(&gen)));
  } else {
    ff_ = register_module("ff", make_feed_forward(options, gen));
  }
  norm1_ = register_module("norm1", make_norm(options));
  norm2_ = register_module("norm2", make_norm(options));
  dropout1_ = register_module("dropout1", make_dropout(options, gen));
  dropout2_ = register_module("dropout2", make_dropout(options, gen));
}

Tensor TransformerEncoderLayerImpl::forward(const Tensor& x, const AttentionForwardOptions& options) {
  check_model_input(x, options_.d_model(), "TransformerEncoderLayer");
  if (options.need_weights())
    throw ValueError(
        "TransformerEncoderLayer: need_weights is not supported (the layer returns one tensor); "
        "call its self-attention for the weights");
  if (latent_attn_) {
    if (!options.is_causal() || options.key_padding_mask().defined() || options.keep_mask().defined() ||
        options.additive_mask().defined() || options.attn_mask().defined() || options.cache() != nullptr)
      throw ValueError(
          "TransformerEncoderLayer: latent attention is causal self-attention without masks: it needs is_causal, "
          "no masks, and its cache in latent_cache (not cache)");
  } else if (options.latent_cache() != nullptr) {
    throw ValueError("TransformerEncoderLayer: latent_cache is given but the self-attention is not latent attention");
  }
  auto self_attention = [&](const Tensor& h) {
    return latent_attn_ ? latent_attn_(h, options.latent_cache()) : self_attn_(h, Tensor(), options).output;
  };
  auto feed_forward = [&](const Tensor& h) {
    if (!moe_) return ff_(h);
    last_moe_ = moe_(h);
    return last_moe_.output;
  };
  Tensor h = x;  // h: (B, T, d)
  if (options_.norm_first()) {
    h = h + dropout1_(self_attention(norm1_(h)));
    h = h + dropout2_(feed_forward(norm2_(h)));
  } else {
    h = norm1_(h + dropout1_(self_attention(h)));
    h = norm2_(h + dropout2_(feed_forward(h)));
  }
  return h;
}

// ---------------------------------------------------------------- decoder layer
TransformerDecoderLayerImpl::TransformerDecoderLayerImpl(const TransformerLayerOptions& options) : options_(options) {
  if (options.moe())
    throw ValueError("TransformerDecoderLayer: a mixture-of-experts feed-forward (moe) is for encoder layers only");
  Generator& gen = generator_or_default(options.generator());
  options_.generator(nullptr);  // not kept: it need not outlive the construction
  self_attn_ = register_module(
      "self_attn", MultiHeadAttention(make_attention_options(options, gen).rotary_max_len(options.rotary_max_len())));
  cross_attn_ =
      register_module("cross_attn", MultiHeadAttention(make_attention_options(options, gen).cross_attention(true)));
  ff_ = register_module("ff", make_feed_forward(options, gen));
  norm1_ = register_module("norm1", make_norm(options));
  norm2_ = register_module("norm2", make_norm(options));
  norm3_ = register_module("norm3", make_norm(options));
  dropout1_ = register_module("dropout1", make_dropout(options, gen));
  dropout2_ = register_module("dropout2", make_dropout(options, gen));
  dropout3_ = register_module("dropout3", make_dropout(options, gen));
}

DecoderLayerResult TransformerDecoderLayerImpl::forward(const Tensor& x, const Tensor& memory,
                                                        const AttentionForwardOptions& self,
                                                        const AttentionForwardOptions& cross) {
  check_model_input(x, options_.d_model(), "TransformerDecoderLayer");
  check_model_input(memory, options_.d_model(), "TransformerDecoderLayer (memory)");
  AttentionForwardOptions causal = self;
  causal.is_causal(true);
  DecoderLayerResult result;
  auto self_attention = [&](const Tensor& h) { return self_attn_(h, Tensor(), causal).output; };
  auto cross_attention = [&](const Tensor& h) {
    AttentionResult r = cross_attn_(h, memory, cross);
    result.cross_weights = r.weights;
    return r.output;
  };
  Tensor h = x;  // h: (B, T, d)
  if (options_.norm_first()) {
    h = h + dropout1_(self_attention(norm1_(h)));
    h = h + dropout2_(cross_attention(norm2_(h)));
    h = h + dropout3_(ff_(norm3_(h)));
  } else {
    h = norm1_(h + dropout1_(self_attention(h)));
    h = norm2_(h + dropout2_(cross_attention(h)));
    h = norm3_(h + dropout3_(ff_(h)));
  }
  result.output = h;
  return result;
}

// ---------------------------------------------------------------- stacks
namespace {

void check_stack(std::int64_t num_layers, const char* stack) {
  if (num_layers <= 0) throw ValueError(message(stack, ": num_layers must be positive, got ", num_layers));
}

void check_no_cache(const AttentionForwardOptions& options, const char* stack, const char* which) {
  if (options.cache() != nullptr || options.latent_cache() != nullptr)
    throw ValueError(
        message(stack, ": ", which, ".cache must be null; a stack keeps one cache per layer (DecoderCache)"));
}

}  // namespace

TransformerEncoderImpl::TransformerEncoderImpl(const TransformerLayerOptions& layer, std::int64_t num_layers,
                                               std::optional<bool> final_norm) {
  check_stack(num_layers, "TransformerEncoder");
  TransformerLayerOptions options = layer;
  options.generator(&generator_or_default(layer.generator()));
  auto list = register_module("layers", ModuleList());
  for (std::int64_t i = 0; i < num_layers; ++i) layers_.push_back(list->push_back(TransformerEncoderLayer(options)));
  if (final_norm.value_or(options.norm_first())) norm_ = register_module("norm", make_norm(options));
}

Tensor TransformerEncoderImpl::forward(const Tensor& x, const AttentionForwardOptions& options) {
  check_no_cache(options, "TransformerEncoder", "options");
  Tensor h = x;
  for (auto& layer : layers_) h = layer(h, options);
  return norm_ ? norm_(h) : h;
}

TransformerDecoderImpl::TransformerDecoderImpl(const TransformerLayerOptions& layer, std::int64_t num_layers,
                                               std::optional<bool> final_norm) {
  check_stack(num_layers, "TransformerDecoder");
  TransformerLayerOptions options = layer;
  options.generator(&generator_or_default(layer.generator()));
  auto list = register_module("layers", ModuleList());
  for (std::int64_t i = 0; i < num_layers; ++i) layers_.push_back(list->push_back(TransformerDecoderLayer(options)));
  if (final_norm.value_or(options.norm_first())) norm_ = register_module("norm", make_norm(options));
}

DecoderResult TransformerDecoderImpl::forward(const Tensor& x, const Tensor& memory,
                                              const AttentionForwardOptions& self, const AttentionForwardOptions& cross,
                                              DecoderCache* cache) {
  check_no_cache(self, "TransformerDecoder", "self");
  check_no_cache(cross, "TransformerDecoder", "cross");
  if (cache) {
    cache->self.resize(layers_.size());
    cache->cross.resize(layers_.size());
  }
  DecoderResult result;
  if (cross.need_weights()) result.cross_weights.reserve(layers_.size());
  AttentionForwardOptions layer_self = self, layer_cross = cross;
  Tensor h = x;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    layer_self.cache(cache ? &cache->self[i] : nullptr);
    layer_cross.cache(cache ? &cache->cross[i] : nullptr);
    DecoderLayerResult layer = layers_[i](h, memory, layer_self, layer_cross);
    h = layer.output;
    if (cross.need_weights()) result.cross_weights.push_back(layer.cross_weights);
  }
  result.output = norm_ ? norm_(h) : h;
  return result;
}

// ---------------------------------------------------------------- Transformer
TransformerImpl::TransformerImpl(const TransformerOptions& options) {
  TransformerLayerOptions layer = options.layer();
  layer.generator(&generator_or_default(options.generator()));
  encoder_ = register_module("encoder", TransformerEncoder(layer, options.num_encoder_layers(), /*final_norm=*/true));
  decoder_ = register_module("decoder", TransformerDecoder(layer, options.num_decoder_layers(), /*final_norm=*/true));
}

Tensor TransformerImpl::forward(const Tensor& src, const Tensor& tgt, const AttentionForwardOptions& src_options,
                                const AttentionForwardOptions& tgt_options,
                                const AttentionForwardOptions& memory_options) {
  const Tensor memory = encoder_(src, src_options);
  return decoder_(tgt, memory, tgt_options, memory_options).output;
}

// ---------------------------------------------------------------- language model
namespace {

// A token table that is also the output projection when `tied` (W_U = W_E^T) starts N(0, 1/d), so
// that the first logits, products of d unit-scale features with it, have about unit scale.
EmbeddingOptions tied_table_options(std::int64_t vocab, std::int64_t d, bool tied) {
  EmbeddingOptions options(vocab, d);
  if (tied) options.init_scale(1.0 / std::sqrt(static_cast<double>(d)));
  return options;
}

}  // namespace

LanguageModelImpl::LanguageModelImpl(const LanguageModelOptions& options) : options_(options) {
  if (options.num_layers() <= 0 || options.vocab_size() <= 0 || options.max_len() <= 0)
    throw ValueError(message("LanguageModel: num_layers, vocab_size and max_len must be positive, got ",
                             options.num_layers(), ", ", options.vocab_size(), ", ", options.max_len()));
  Generator& gen = generator_or_default(options.generator());
  options_.generator(nullptr);  // not kept: it need not outlive the construction
  TransformerLayerOptions layer = options.layer();
  layer.generator(&gen);
  options_.layer().generator(nullptr);
  if (options.positions() == PositionEncoding::Rotary) {
    layer.rotary_max_len(options.max_len());
    options_.layer().rotary_max_len(options.max_len());
  }
  if (layer.latent_attention() && layer.latent_attention()->max_len() < options.max_len())
    throw ValueError(message("LanguageModel: latent_attention's max_len ", layer.latent_attention()->max_len(),
                             " is below the model's ", options.max_len()));
  const std::int64_t d = layer.d_model();
  tok_emb_ = register_module(
      "tok_emb", Embedding(tied_table_options(options.vocab_size(), d, options.tie_embeddings()).generator(&gen)));
  if (options.positions() == PositionEncoding::Learned)
    pos_emb_ = register_module(
        "pos_emb", LearnedPositionEmbedding(LearnedPositionEmbeddingOptions(options.max_len(), d).generator(&gen)));
  else if (options.positions() == PositionEncoding::Sinusoidal)
    sin_pos_ = register_module("pos_enc", SinusoidalPositionalEncoding(options.max_len(), d));
  auto list = register_module("blocks", ModuleList());
  for (std::int64_t i = 0; i < options.num_layers(); ++i)
    blocks_.push_back(list->push_back(TransformerEncoderLayer(layer)));
  norm_ = register_module("norm", make_norm(layer));
  if (!options.tie_embeddings())
    head_ = register_module("head", Linear(LinearOptions(d, options.vocab_size()).generator(&gen)));
}

std::int64_t LanguageModelCache::length() const {
  if (!kv.empty()) return kv.front().length();
  return latent.empty() ? 0 : latent.front().length();
}

double LanguageModelCache::bytes_per_token_per_layer() const {
  double bytes = 0.0, tokens = 0.0;
  const auto add = [&](const Tensor& t, double layer_tokens) {
    if (!t.defined()) return;
    bytes += static_cast<double>(t.numel()) * static_cast<double>(element_size(t.dtype()));
    tokens += layer_tokens;
  };
  // Tokens counted once per layer (with the keys or the latent), so the quotient is per token and layer.
  for (const KVCache& c : kv) {
    if (!c.k.defined()) continue;
    add(c.k, static_cast<double>(c.k.shape()[0] * c.k.shape()[2]));
    add(c.v, 0.0);
  }
  for (const MLACache& c : latent) {
    if (!c.latent.defined()) continue;
    add(c.latent, static_cast<double>(c.latent.shape()[0] * c.latent.shape()[1]));
    add(c.rotary_key, 0.0);
  }
  return tokens > 0 ? bytes / tokens : 0.0;
}

void DecoderCache::reorder(const Tensor& rows) {
  if (positions.defined()) positions = index_select(positions, 0, rows);
  for (std::vector<KVCache>* caches : {&self, &cross})
    for (KVCache& c : *caches) {
      if (c.k.defined()) c.k = index_select(c.k, 0, rows);
      if (c.v.defined()) c.v = index_select(c.v, 0, rows);
    }
}

void LanguageModelCache::reorder(const Tensor& rows) {
  const auto pick = [&](Tensor& t) {
    if (t.defined()) t = index_select(t, 0, rows);
  };
  for (KVCache& c : kv) {
    pick(c.k);
    pick(c.v);
  }
  for (MLACache& c : latent) {
    pick(c.latent);
    pick(c.rotary_key);
  }
}

Tensor LanguageModelImpl::forward(const Tensor& tokens, LanguageModelCache* cache) {
  return logits(hidden(tokens, cache));
}

Tensor LanguageModelImpl::logits(const Tensor& hidden) {
  return head_ ? head_(hidden) : linear(hidden, tok_emb_->weight());  // (B, T, vocab)
}

Tensor LanguageModelImpl::hidden(const Tensor& tokens, LanguageModelCache* cache) {
  if (tokens.dim() != 2) throw ShapeError("LanguageModel: expected tokens (B, T), got shape " + tokens.shape().str());
  const bool latent = options_.layer().latent_attention().has_value();
  if (cache) (latent ? cache->latent.resize(blocks_.size()) : cache->kv.resize(blocks_.size()));
  const std::int64_t offset = cache ? cache->length() : 0;
  if (offset + tokens.shape()[1] > options_.max_len())
    throw ValueError(message("LanguageModel: positions ", offset, " .. ", offset + tokens.shape()[1] - 1,
                             " exceed max_len ", options_.max_len()));
  Tensor h = tok_emb_(tokens);  // h: (B, T, d)
  if (pos_emb_) h = pos_emb_(h, offset);
  if (sin_pos_) h = sin_pos_(h, offset);
  AttentionForwardOptions causal = AttentionForwardOptions().is_causal(true);
  for (std::size_t i = 0; i < blocks_.size(); ++i) {
    if (cache && latent) causal.latent_cache(&cache->latent[i]);
    if (cache && !latent) causal.cache(&cache->kv[i]);
    h = blocks_[i](h, causal);
  }
  return norm_(h);
}

namespace {

// The language model step by step with its cache while the sequence fits max_len; past it, the
// new token has no position, so every step recomputes over the last max_len tokens without the
// cache (a sliding window). What LanguageModel::generate decodes with.
class SlidingWindowDecoder : public Decoder {
 public:
  SlidingWindowDecoder(LanguageModelImpl& model, std::int64_t max_len) : model_(model), max_len_(max_len) {}
  Tensor start(const Tensor& prompt) override {
    sequence_ = prompt;
    cache_ = LanguageModelCache();
    return model_.forward(window(), &cache_).select(1, -1);
  }
  Tensor step(const Tensor& tokens) override {
    sequence_ = concat({sequence_, tokens}, 1);
    if (sequence_.shape()[1] <= max_len_) return model_.forward(tokens, &cache_).select(1, -1);
    cache_ = LanguageModelCache();
    return model_.forward(window()).select(1, -1);
  }
  void reorder(const Tensor& rows) override {
    sequence_ = index_select(sequence_, 0, rows);
    cache_.reorder(rows);
  }

 private:
  // The last max_len tokens of the sequence, which is what the model sees once it is longer.
  Tensor window() const {
    const std::int64_t t = sequence_.shape()[1];
    return t > max_len_ ? sequence_.narrow(1, t - max_len_, max_len_).contiguous() : sequence_;
  }

  LanguageModelImpl& model_;
  std::int64_t max_len_;
  Tensor sequence_;
  LanguageModelCache cache_;
};

}  // namespace

std::vector<const MoEOutput*> LanguageModelImpl::last_moe() const {
  std::vector<const MoEOutput*> out;
  if (!options_.layer().moe()) return out;
  for (const TransformerEncoderLayer& block : blocks_) out.push_back(&block->last_moe());
  return out;
}

Tensor LanguageModelImpl::generate(const Tensor& prompt, const GenerationOptions& options, Generator& gen) {
  if (prompt.dim() != 2 || prompt.shape()[1] == 0)
    throw ShapeError("LanguageModel::generate: expected a prompt (B, T) with T >= 1, got shape " +
                     prompt.shape().str());
  detail::check_generation_options(options, "LanguageModel::generate");
  const std::int64_t max_len = options_.max_len();
  if (!options.sliding_window && prompt.shape()[1] + options.max_new_tokens > max_len)
    throw ValueError(message("LanguageModel::generate: prompt length ", prompt.shape()[1], " plus ",
                             options.max_new_tokens, " new tokens exceeds max_len ", max_len,
                             " (sliding_window continues past it)"));
  NoGradGuard no_grad;
  const EvalScope eval_scope(*this);
  SlidingWindowDecoder decoder(*this, max_len);
  return detail::generate_tokens(decoder, prompt, options, gen, "LanguageModel::generate");
}

// ---------------------------------------------------------------- encoder-decoder
EncoderDecoderImpl::EncoderDecoderImpl(const EncoderDecoderOptions& options) : options_(options) {
  if (options.positions() == PositionEncoding::Rotary) options_.layer().rotary_max_len(options.max_len());
  if (options.src_vocab() <= 0 || options.tgt_vocab() <= 0 || options.max_len() <= 0)
    throw ValueError(message("EncoderDecoder: src_vocab, tgt_vocab and max_len must be positive, got ",
                             options.src_vocab(), ", ", options.tgt_vocab(), ", ", options.max_len()));
  Generator& gen = generator_or_default(options.generator());
  options_.generator(nullptr);  // not kept: it need not outlive the construction
  TransformerLayerOptions layer = options_.layer();
  layer.generator(&gen);
  options_.layer().generator(nullptr);
  const std::int64_t d = layer.d_model(), randomized = options.randomized_positions();
  if (randomized != 0 && (randomized < options.max_len() || options.positions() == PositionEncoding::Rotary))
    throw ValueError(
        message("EncoderDecoder: randomized_positions needs learned or sinusoidal positions and a range of at "
                "least max_len = ",
                options.max_len(), ", got ", randomized));
  const std::int64_t max_len = randomized > 0 ? randomized : options.max_len();  // the position table's rows
  src_.tokens = register_module("src_emb", Embedding(EmbeddingOptions(options.src_vocab(), d).generator(&gen)));
  tgt_.tokens = register_module(
      "tgt_emb", Embedding(tied_table_options(options.tgt_vocab(), d, options.tie_embeddings()).generator(&gen)));
  if (options.positions() == PositionEncoding::Learned) {
    const auto learned = LearnedPositionEmbeddingOptions(max_len, d).generator(&gen);
    src_.learned = register_module("src_pos", LearnedPositionEmbedding(learned));
    tgt_.learned = register_module("tgt_pos", LearnedPositionEmbedding(learned));
  } else if (options.positions() == PositionEncoding::Sinusoidal) {
    src_.sinusoidal = register_module("src_pos", SinusoidalPositionalEncoding(max_len, d));
    tgt_.sinusoidal = register_module("tgt_pos", SinusoidalPositionalEncoding(max_len, d));
  }
  encoder_ = register_module("encoder", TransformerEncoder(layer, options.encoder_layers()));
  decoder_ = register_module("decoder", TransformerDecoder(layer, options.decoder_layers()));
  if (!options.tie_embeddings())
    head_ = register_module("head", Linear(LinearOptions(d, options.tgt_vocab()).generator(&gen)));
  if (randomized > 0) {
    position_gen_.manual_seed(gen.next_u64());
    register_generator("position_generator", position_gen_);
  }
}

Tensor EncoderDecoderImpl::sample_positions(std::int64_t rows, std::int64_t count) {
  if (options_.randomized_positions() == 0)
    throw ValueError("EncoderDecoder: sample_positions needs randomized_positions");
  if (count > options_.max_len())
    throw ValueError(message("EncoderDecoder: ", count, " positions exceed max_len ", options_.max_len()));
  return random_ordered_positions(rows, count, options_.randomized_positions(), position_gen_);
}

Tensor EncoderDecoderImpl::embed(Side& side, const Tensor& tokens, std::int64_t offset, const Tensor& positions) {
  if (tokens.dim() != 2) throw ShapeError("EncoderDecoder: expected tokens (B, T), got shape " + tokens.shape().str());
  Tensor x = side.tokens(tokens);  // x: (B, T, d)
  if (options_.scale_embeddings()) x = x * std::sqrt(static_cast<double>(options_.layer().d_model()));
  if (positions.defined())
    return side.learned ? side.learned->forward_at(x, positions) : side.sinusoidal->forward_at(x, positions);
  if (side.learned) return side.learned(x, offset);
  if (side.sinusoidal) return side.sinusoidal(x, offset);
  // rotary: positions enter in self-attention
  if (offset + tokens.shape()[1] > options_.max_len())
    throw ValueError(message("EncoderDecoder: positions up to ", offset + tokens.shape()[1], " exceed max_len ",
                             options_.max_len()));
  return x;
}

Tensor EncoderDecoderImpl::encode(const Tensor& src, const Tensor& src_key_padding_mask) {
  const Tensor positions = options_.randomized_positions() > 0 && src.dim() == 2
                               ? sample_positions(src.shape()[0], src.shape()[1])
                               : Tensor();
  return encoder_(embed(src_, src, 0, positions), AttentionForwardOptions().key_padding_mask(src_key_padding_mask));
}

DecoderResult EncoderDecoderImpl::decode(const Tensor& tgt_in, const Tensor& memory,
                                         const AttentionForwardOptions& self, const AttentionForwardOptions& cross,
                                         DecoderCache* cache) {
  const std::int64_t offset = cache ? cache->length() : 0;
  Tensor positions;
  if (options_.randomized_positions() > 0 && tgt_in.dim() == 2) {
    const std::int64_t rows = tgt_in.shape()[0], length = tgt_in.shape()[1];
    if (!cache) {
      positions = sample_positions(rows, length);
    } else {
      if (!cache->positions.defined()) cache->positions = sample_positions(rows, options_.max_len());
      if (cache->positions.shape()[0] != rows || offset + length > cache->positions.shape()[1])
        throw ValueError(message("EncoderDecoder: the cache's positions ", cache->positions.shape().str(),
                                 " do not cover target positions ", offset, " to ", offset + length - 1, " of ", rows,
                                 " rows"));
      positions = cache->positions.narrow(1, offset, length).contiguous();
    }
  }
  DecoderResult result = decoder_(embed(tgt_, tgt_in, offset, positions), memory, self, cross, cache);
  result.output = head_ ? head_(result.output) : linear(result.output, tgt_.tokens->weight());  // (B, T, tgt_vocab)
  return result;
}

Tensor EncoderDecoderImpl::forward(const Tensor& src, const Tensor& tgt_in, const Tensor& src_key_padding_mask,
                                   const Tensor& tgt_key_padding_mask) {
  const Tensor memory = encode(src, src_key_padding_mask);
  return decode(tgt_in, memory, AttentionForwardOptions().key_padding_mask(tgt_key_padding_mask),
                AttentionForwardOptions().key_padding_mask(src_key_padding_mask))
      .output;
}

Tensor EncoderDecoderImpl::greedy_decode(const Tensor& src, std::int64_t sos, std::int64_t eos,
                                         std::int64_t max_new_tokens, const Tensor& src_key_padding_mask) {
  if (max_new_tokens < 0 || max_new_tokens + 1 > options_.max_len())
    throw ValueError(message("EncoderDecoder::greedy_decode: max_new_tokens ", max_new_tokens,
                             " must be in [0, max_len - 1 = ", options_.max_len() - 1, "]"));
  if (sos < 0 || sos >= options_.tgt_vocab() || eos < 0 || eos >= options_.tgt_vocab())
    throw ValueError(message("EncoderDecoder::greedy_decode: sos ", sos, " and eos ", eos,
                             " must be target token ids in [0, ", options_.tgt_vocab(), ")"));
  NoGradGuard no_grad;
  const EvalScope eval_scope(*this);
  const Tensor memory = encode(src, src_key_padding_mask);
  const std::int64_t batch = src.shape()[0];
  DecoderCache cache;
  // Randomized positions: as many as the decoder reads (<sos> and all but the last new token).
  if (options_.randomized_positions() > 0 && max_new_tokens > 0)
    cache.positions = sample_positions(batch, max_new_tokens);
  const AttentionForwardOptions cross = AttentionForwardOptions().key_padding_mask(src_key_padding_mask);
  Tensor sequence = full({batch, 1}, static_cast<double>(sos), kInt64);
  Tensor next = sequence;
  std::vector<bool> finished(static_cast<std::size_t>(batch), false);
  for (std::int64_t step = 0; step < max_new_tokens; ++step) {
    const Tensor logits = decode(next, memory, {}, cross, &cache).output;  // (B, 1, V)
    std::vector<std::int64_t> tokens = argmax(logits.select(1, 0), -1).to_vector<std::int64_t>();
    bool all_done = true;
    for (std::size_t b = 0; b < tokens.size(); ++b) {
      if (finished[b]) tokens[b] = eos;
      finished[b] = finished[b] || tokens[b] == eos;
      all_done = all_done && finished[b];
    }
    next = from_vector(tokens, {batch, 1});
    sequence = concat({sequence, next}, 1);
    if (all_done) break;
  }
  return sequence;
}

}  // namespace tapegrad::nn
