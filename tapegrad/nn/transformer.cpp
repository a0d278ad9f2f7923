#include "tapegrad/nn/transformer.h"

#include <cmath>
#include <string>

namespace tapegrad::nn {

namespace {

void check_model_input(const Tensor& x, std::int64_t d_model, const char* op) {
  if (x.dim() != 3 || x.shape()[2] != d_model)
    throw ShapeError(std::string(op) + ": expected input (B, T, " + std::to_string(d_model) + "), got shape " +
                     x.shape().str());
}

}  // namespace

// ---------------------------------------------------------------- encoder layer
TransformerEncoderLayer::TransformerEncoderLayer(const TransformerLayerOptions& options, Generator& gen)
    : options_(options) {
  MultiHeadAttentionOptions attn;
  attn.dropout = options.dropout;
  attn.rotary_max_len = options.rotary_max_len;
  self_attn_ = register_module("self_attn", std::make_shared<MultiHeadAttention>(options.d_model, options.num_heads, gen, attn));
  ff_ = register_module("ff", std::make_shared<FeedForward>(options.d_model, options.ff_hidden, options.activation,
                                                            options.dropout, gen));
  norm1_ = register_module("norm1", std::make_shared<LayerNorm>(options.d_model, options.eps));
  norm2_ = register_module("norm2", std::make_shared<LayerNorm>(options.d_model, options.eps));
  dropout1_ = register_module("dropout1", std::make_shared<Dropout>(options.dropout, gen.next_u64()));
  dropout2_ = register_module("dropout2", std::make_shared<Dropout>(options.dropout, gen.next_u64()));
}

Tensor TransformerEncoderLayer::forward(const Tensor& x, const Tensor& key_padding_mask, bool is_causal,
                                        KVCache* cache) {
  check_model_input(x, options_.d_model, "TransformerEncoderLayer");
  MultiHeadAttentionForwardOptions attn;
  attn.key_padding_mask = key_padding_mask;
  attn.is_causal = is_causal;
  attn.cache = cache;
  auto self_attention = [&](const Tensor& h) { return (*self_attn_)(h, Tensor(), attn).output; };
  Tensor h = x;  // h: (B, T, d)
  if (options_.norm_first) {
    h = h + (*dropout1_)(self_attention((*norm1_)(h)));
    h = h + (*dropout2_)((*ff_)((*norm2_)(h)));
  } else {
    h = (*norm1_)(h + (*dropout1_)(self_attention(h)));
    h = (*norm2_)(h + (*dropout2_)((*ff_)(h)));
  }
  return h;
}

// ---------------------------------------------------------------- decoder layer
TransformerDecoderLayer::TransformerDecoderLayer(const TransformerLayerOptions& options, Generator& gen)
    : options_(options) {
  MultiHeadAttentionOptions cross;
  cross.dropout = options.dropout;
  cross.cross_attention = true;
  MultiHeadAttentionOptions self = cross;
  self.cross_attention = false;
  self.rotary_max_len = options.rotary_max_len;
  self_attn_ = register_module("self_attn", std::make_shared<MultiHeadAttention>(options.d_model, options.num_heads, gen, self));
  cross_attn_ =
      register_module("cross_attn", std::make_shared<MultiHeadAttention>(options.d_model, options.num_heads, gen, cross));
  ff_ = register_module("ff", std::make_shared<FeedForward>(options.d_model, options.ff_hidden, options.activation,
                                                            options.dropout, gen));
  norm1_ = register_module("norm1", std::make_shared<LayerNorm>(options.d_model, options.eps));
  norm2_ = register_module("norm2", std::make_shared<LayerNorm>(options.d_model, options.eps));
  norm3_ = register_module("norm3", std::make_shared<LayerNorm>(options.d_model, options.eps));
  dropout1_ = register_module("dropout1", std::make_shared<Dropout>(options.dropout, gen.next_u64()));
  dropout2_ = register_module("dropout2", std::make_shared<Dropout>(options.dropout, gen.next_u64()));
  dropout3_ = register_module("dropout3", std::make_shared<Dropout>(options.dropout, gen.next_u64()));
}

Tensor TransformerDecoderLayer::forward(const Tensor& x, const Tensor& memory, const DecoderLayerInputs& inputs,
                                        Tensor* cross_weights) {
  check_model_input(x, options_.d_model, "TransformerDecoderLayer");
  check_model_input(memory, options_.d_model, "TransformerDecoderLayer (memory)");
  MultiHeadAttentionForwardOptions self;
  self.is_causal = true;
  self.key_padding_mask = inputs.tgt_key_padding_mask;
  self.cache = inputs.self_cache;
  MultiHeadAttentionForwardOptions cross;
  cross.key_padding_mask = inputs.memory_key_padding_mask;
  cross.cache = inputs.cross_cache;
  cross.need_weights = inputs.need_cross_weights && cross_weights != nullptr;
  auto self_attention = [&](const Tensor& h) { return (*self_attn_)(h, Tensor(), self).output; };
  auto cross_attention = [&](const Tensor& h) {
    AttentionResult r = (*cross_attn_)(h, memory, cross);
    if (cross.need_weights) *cross_weights = r.weights;
    return r.output;
  };
  Tensor h = x;  // h: (B, T, d)
  if (options_.norm_first) {
    h = h + (*dropout1_)(self_attention((*norm1_)(h)));
    h = h + (*dropout2_)(cross_attention((*norm2_)(h)));
    h = h + (*dropout3_)((*ff_)((*norm3_)(h)));
  } else {
    h = (*norm1_)(h + (*dropout1_)(self_attention(h)));
    h = (*norm2_)(h + (*dropout2_)(cross_attention(h)));
    h = (*norm3_)(h + (*dropout3_)((*ff_)(h)));
  }
  return h;
}

// ---------------------------------------------------------------- stacks
TransformerEncoder::TransformerEncoder(std::int64_t num_layers, const TransformerLayerOptions& options, Generator& gen) {
  if (num_layers <= 0) throw ValueError("TransformerEncoder: num_layers must be positive, got " + std::to_string(num_layers));
  auto list = register_module("layers", std::make_shared<ModuleList>());
  for (std::int64_t i = 0; i < num_layers; ++i)
    layers_.push_back(list->push_back(std::make_shared<TransformerEncoderLayer>(options, gen)));
  if (options.norm_first) norm_ = register_module("norm", std::make_shared<LayerNorm>(options.d_model, options.eps));
}

Tensor TransformerEncoder::forward(const Tensor& x, const Tensor& key_padding_mask) {
  Tensor h = x;
  for (auto& layer : layers_) h = (*layer)(h, key_padding_mask);
  return norm_ ? (*norm_)(h) : h;
}

TransformerDecoder::TransformerDecoder(std::int64_t num_layers, const TransformerLayerOptions& options, Generator& gen) {
  if (num_layers <= 0) throw ValueError("TransformerDecoder: num_layers must be positive, got " + std::to_string(num_layers));
  auto list = register_module("layers", std::make_shared<ModuleList>());
  for (std::int64_t i = 0; i < num_layers; ++i)
    layers_.push_back(list->push_back(std::make_shared<TransformerDecoderLayer>(options, gen)));
  if (options.norm_first) norm_ = register_module("norm", std::make_shared<LayerNorm>(options.d_model, options.eps));
}

Tensor TransformerDecoder::forward(const Tensor& x, const Tensor& memory, const Tensor& tgt_key_padding_mask,
                                   const Tensor& memory_key_padding_mask, DecoderCache* cache,
                                   std::vector<Tensor>* cross_weights) {
  if (cache) {
    cache->self.resize(layers_.size());
    cache->cross.resize(layers_.size());
  }
  if (cross_weights) cross_weights->assign(layers_.size(), Tensor());
  Tensor h = x;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    DecoderLayerInputs inputs;
    inputs.tgt_key_padding_mask = tgt_key_padding_mask;
    inputs.memory_key_padding_mask = memory_key_padding_mask;
    inputs.self_cache = cache ? &cache->self[i] : nullptr;
    inputs.cross_cache = cache ? &cache->cross[i] : nullptr;
    inputs.need_cross_weights = cross_weights != nullptr;
    h = layers_[i]->forward(h, memory, inputs, cross_weights ? &(*cross_weights)[i] : nullptr);
  }
  return norm_ ? (*norm_)(h) : h;
}

// ---------------------------------------------------------------- language model
LanguageModel::LanguageModel(const LanguageModelOptions& options, Generator& gen) : options_(options) {
  if (options.num_layers <= 0 || options.vocab_size <= 0 || options.max_len <= 0)
    throw ValueError("LanguageModel: num_layers, vocab_size and max_len must be positive, got " +
                     std::to_string(options.num_layers) + ", " + std::to_string(options.vocab_size) + ", " +
                     std::to_string(options.max_len));
  const std::int64_t d = options.layer.d_model;
  tok_emb_ = register_module("tok_emb", std::make_shared<Embedding>(options.vocab_size, d, gen));
  pos_emb_ = register_module("pos_emb", std::make_shared<LearnedPositionEmbedding>(options.max_len, d, gen));
  auto list = register_module("blocks", std::make_shared<ModuleList>());
  for (std::int64_t i = 0; i < options.num_layers; ++i)
    blocks_.push_back(list->push_back(std::make_shared<TransformerEncoderLayer>(options.layer, gen)));
  norm_ = register_module("norm", std::make_shared<LayerNorm>(d, options.layer.eps));
  head_ = register_module("head", std::make_shared<Linear>(d, options.vocab_size, gen));
}

Tensor LanguageModel::forward(const Tensor& tokens, std::vector<KVCache>* caches) {
  if (tokens.dim() != 2)
    throw ShapeError("LanguageModel: expected tokens (B, T), got shape " + tokens.shape().str());
  if (caches) caches->resize(blocks_.size());
  const std::int64_t offset = caches ? caches->front().length() : 0;
  Tensor h = pos_emb_->forward((*tok_emb_)(tokens), offset);  // h: (B, T, d)
  for (std::size_t i = 0; i < blocks_.size(); ++i) h = blocks_[i]->forward(h, Tensor(), /*is_causal=*/true, caches ? &(*caches)[i] : nullptr);
  return (*head_)((*norm_)(h));  // (B, T, vocab)
}

Tensor LanguageModel::generate(const Tensor& prompt, const GenerationOptions& options, Generator& gen) {
  if (prompt.dim() != 2 || prompt.shape()[1] == 0)
    throw ShapeError("LanguageModel::generate: expected a prompt (B, T) with T >= 1, got shape " + prompt.shape().str());
  if (options.temperature < 0 || options.top_k < 0)
    throw ValueError("LanguageModel::generate: temperature and top_k must be non-negative, got " +
                     std::to_string(options.temperature) + " and " + std::to_string(options.top_k));
  if (prompt.shape()[1] + options.max_new_tokens > options_.max_len)
    throw ValueError("LanguageModel::generate: prompt length " + std::to_string(prompt.shape()[1]) + " plus " +
                     std::to_string(options.max_new_tokens) + " new tokens exceeds max_len " +
                     std::to_string(options_.max_len));
  NoGradGuard no_grad;
  const bool was_training = is_training();
  eval();
  const std::int64_t batch = prompt.shape()[0];
  std::vector<KVCache> caches;
  Tensor sequence = prompt;
  Tensor logits = forward(prompt, &caches);  // (B, T0, V)
  std::vector<bool> finished(static_cast<std::size_t>(batch), false);
  for (std::int64_t step = 0; step < options.max_new_tokens; ++step) {
    Tensor last = logits.select(1, -1).to(kFloat64);  // (B, V)
    std::vector<std::int64_t> next(static_cast<std::size_t>(batch));
    if (options.temperature == 0.0) {
      next = argmax(last, -1).to_vector<std::int64_t>();
    } else {
      Tensor scaled = last / options.temperature;
      if (options.top_k > 0 && options.top_k < options_.vocab_size) {
        Tensor threshold = topk(scaled, options.top_k, -1).first.narrow(1, options.top_k - 1, 1);  // (B, 1)
        scaled = masked_fill(scaled, lt(scaled, threshold), -INFINITY);
      }
      const std::vector<double> probs = softmax(scaled, -1).to_vector<double>();
      const std::size_t vocab = static_cast<std::size_t>(options_.vocab_size);
      for (std::size_t b = 0; b < next.size(); ++b) {
        // Inverse-CDF sampling; the last token with non-zero probability absorbs rounding.
        double u = gen.uniform();
        std::size_t chosen = vocab - 1;
        while (chosen > 0 && probs[b * vocab + chosen] == 0.0) --chosen;
        for (std::size_t v = 0; v < vocab; ++v) {
          u -= probs[b * vocab + v];
          if (u < 0) {
            chosen = v;
            break;
          }
        }
        next[b] = static_cast<std::int64_t>(chosen);
      }
    }
    if (options.eos_token) {
      for (std::size_t b = 0; b < next.size(); ++b) {
        if (finished[b]) next[b] = *options.eos_token;
        finished[b] = finished[b] || next[b] == *options.eos_token;
      }
    }
    const Tensor next_tokens = from_vector(next, {batch, 1});
    sequence = concat({sequence, next_tokens}, 1);
    bool all_done = options.eos_token.has_value();
    for (bool f : finished) all_done = all_done && f;
    if (all_done || step + 1 == options.max_new_tokens) break;
    logits = forward(next_tokens, &caches);
  }
  train(was_training);
  return sequence;
}

// ---------------------------------------------------------------- encoder-decoder
EncoderDecoder::EncoderDecoder(const EncoderDecoderOptions& options, Generator& gen) : options_(options) {
  if (options.positions == PositionEncoding::Rotary) options_.layer.rotary_max_len = options.max_len;
  if (options.src_vocab <= 0 || options.tgt_vocab <= 0 || options.max_len <= 0)
    throw ValueError("EncoderDecoder: src_vocab, tgt_vocab and max_len must be positive, got " +
                     std::to_string(options.src_vocab) + ", " + std::to_string(options.tgt_vocab) + ", " +
                     std::to_string(options.max_len));
  const std::int64_t d = options.layer.d_model;
  src_emb_ = register_module("src_emb", std::make_shared<Embedding>(options.src_vocab, d, gen));
  tgt_emb_ = register_module("tgt_emb", std::make_shared<Embedding>(options.tgt_vocab, d, gen));
  if (options.positions == PositionEncoding::Learned) {
    src_pos_ = register_module("src_pos", std::make_shared<LearnedPositionEmbedding>(options.max_len, d, gen));
    tgt_pos_ = register_module("tgt_pos", std::make_shared<LearnedPositionEmbedding>(options.max_len, d, gen));
  } else if (options.positions == PositionEncoding::Sinusoidal) {
    src_pos_ = register_module("src_pos", std::make_shared<SinusoidalPositionalEncoding>(options.max_len, d));
    tgt_pos_ = register_module("tgt_pos", std::make_shared<SinusoidalPositionalEncoding>(options.max_len, d));
  }
  encoder_ = register_module("encoder", std::make_shared<TransformerEncoder>(options.encoder_layers, options_.layer, gen));
  decoder_ = register_module("decoder", std::make_shared<TransformerDecoder>(options.decoder_layers, options_.layer, gen));
  head_ = register_module("head", std::make_shared<Linear>(d, options.tgt_vocab, gen));
}

Tensor EncoderDecoder::embed(const std::shared_ptr<Embedding>& table, const std::shared_ptr<UnaryModule>& positions,
                             const Tensor& tokens, std::int64_t offset) {
  if (tokens.dim() != 2)
    throw ShapeError("EncoderDecoder: expected tokens (B, T), got shape " + tokens.shape().str());
  Tensor x = (*table)(tokens);  // x: (B, T, d)
  if (options_.scale_embeddings) x = x * std::sqrt(static_cast<double>(options_.layer.d_model));
  if (!positions) {  // rotary: positions enter in self-attention
    if (offset + tokens.shape()[1] > options_.max_len)
      throw ValueError("EncoderDecoder: positions up to " + std::to_string(offset + tokens.shape()[1]) +
                       " exceed max_len " + std::to_string(options_.max_len));
    return x;
  }
  if (auto learned = std::dynamic_pointer_cast<LearnedPositionEmbedding>(positions)) return learned->forward(x, offset);
  return std::static_pointer_cast<SinusoidalPositionalEncoding>(positions)->forward(x, offset);
}

Tensor EncoderDecoder::encode(const Tensor& src, const Tensor& src_key_padding_mask) {
  return (*encoder_)(embed(src_emb_, src_pos_, src, 0), src_key_padding_mask);
}

Tensor EncoderDecoder::decode(const Tensor& tgt_in, const Tensor& memory, const Tensor& tgt_key_padding_mask,
                              const Tensor& memory_key_padding_mask, DecoderCache* cache,
                              std::vector<Tensor>* cross_weights) {
  const std::int64_t offset = cache ? cache->length() : 0;
  const Tensor h = decoder_->forward(embed(tgt_emb_, tgt_pos_, tgt_in, offset), memory, tgt_key_padding_mask,
                                     memory_key_padding_mask, cache, cross_weights);
  return (*head_)(h);  // (B, T, tgt_vocab)
}

Tensor EncoderDecoder::forward(const Tensor& src, const Tensor& tgt_in, const Tensor& src_key_padding_mask,
                               const Tensor& tgt_key_padding_mask) {
  return decode(tgt_in, encode(src, src_key_padding_mask), tgt_key_padding_mask, src_key_padding_mask);
}

Tensor EncoderDecoder::greedy_decode(const Tensor& src, std::int64_t sos, std::int64_t eos, std::int64_t max_new_tokens,
                                     const Tensor& src_key_padding_mask) {
  if (max_new_tokens < 0 || max_new_tokens + 1 > options_.max_len)
    throw ValueError("EncoderDecoder::greedy_decode: max_new_tokens " + std::to_string(max_new_tokens) +
                     " must be in [0, max_len - 1 = " + std::to_string(options_.max_len - 1) + "]");
  NoGradGuard no_grad;
  const bool was_training = is_training();
  eval();
  const Tensor memory = encode(src, src_key_padding_mask);
  const std::int64_t batch = src.shape()[0];
  DecoderCache cache;
  Tensor sequence = full({batch, 1}, static_cast<double>(sos), kInt64);
  Tensor next = sequence;
  std::vector<bool> finished(static_cast<std::size_t>(batch), false);
  for (std::int64_t step = 0; step < max_new_tokens; ++step) {
    const Tensor logits = decode(next, memory, Tensor(), src_key_padding_mask, &cache);  // (B, 1, V)
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
  train(was_training);
  return sequence;
}

}  // namespace tapegrad::nn
