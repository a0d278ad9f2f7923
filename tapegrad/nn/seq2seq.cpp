#include "tapegrad/nn/seq2seq.h"

#include <string>
#include <vector>

#include "tapegrad/nn/functional.h"
#include "tapegrad/nn/init.h"

namespace tapegrad::nn {

namespace {

std::shared_ptr<RecurrentImpl> make_recurrent(RecurrentMode mode, const RecurrentOptions& options) {
  if (mode == RecurrentMode::Lstm) return LSTM(options).ptr();
  if (mode == RecurrentMode::Gru) return GRU(options).ptr();
  RecurrentOptions rnn = options;
  rnn.nonlinearity(mode == RecurrentMode::RnnRelu ? RnnNonlinearity::ReLU : RnnNonlinearity::Tanh);
  return RNN(rnn).ptr();
}

// Checks source (Int64 (B, S)) and lengths (Int64 (B) in [1, S] or undefined); returns the padding
// mask (true past a length), undefined without lengths.
Tensor source_padding_mask(const char* op, const Tensor& source, const Tensor& lengths) {
  if (source.dim() != 2 || source.dtype() != kInt64 || source.shape()[1] == 0)
    throw ShapeError(message(op, ": expected an Int64 source (B, S) with S >= 1, got ", dtype_name(source.dtype()), " ",
                             source.shape().str()));
  if (!lengths.defined()) return Tensor();
  const std::int64_t batch = source.shape()[0], steps = source.shape()[1];
  if (lengths.dtype() != kInt64 || lengths.shape() != Shape{batch})
    throw ShapeError(message(op, ": lengths must be Int64 ", Shape{batch}.str(), ", got ", dtype_name(lengths.dtype()),
                             " ", lengths.shape().str()));
  const std::vector<std::int64_t> len = lengths.to_vector<std::int64_t>();
  std::vector<bool> pad(static_cast<std::size_t>(batch * steps));
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t l = len[static_cast<std::size_t>(b)];
    if (l < 1 || l > steps) throw ValueError(message(op, ": lengths[", b, "] = ", l, " is outside [1, ", steps, "]"));
    for (std::int64_t s = 0; s < steps; ++s) pad[static_cast<std::size_t>(b * steps + s)] = s >= l;
  }
  return from_vector(pad, {batch, steps});
}

// The decoder's initial state from the encoder's final one: as is for a unidirectional encoder;
// for a bidirectional one, each layer's two directions concatenated and mapped by the bridge
// with tanh.
Tensor bridge(const Tensor& final_state, const Linear& map, std::int64_t layers) {
  if (!map) return final_state;
  const Tensor per_layer = final_state.reshape({layers, 2, final_state.shape()[1], final_state.shape()[2]});
  return tanh(map(concat({per_layer.select(1, 0), per_layer.select(1, 1)}, 2)));  // (L, B, 2H) -> (L, B, H)
}

// The decoder's initial state from the encoder's final state, h and (LSTM) c each through bridge.
RecurrentState bridge_state(const RecurrentState& final_state, const Linear& bridge_h, const Linear& bridge_c,
                            std::int64_t layers) {
  RecurrentState state;
  state.h = bridge(final_state.h, bridge_h, layers);
  if (final_state.c.defined()) state.c = bridge(final_state.c, bridge_c, layers);
  return state;
}

// A batch-first recurrent stack (the encoder, or with bidirectional false the decoder).
RecurrentOptions recurrent_options(std::int64_t embed, std::int64_t hidden, std::int64_t layers, bool bidirectional,
                                   double dropout, Generator& gen) {
  return RecurrentOptions(embed, hidden)
      .num_layers(layers)
      .bidirectional(bidirectional)
      .batch_first(true)
      .dropout(dropout)
      .generator(&gen);
}

}  // namespace

// ---------------------------------------------------------------- RecurrentSeq2Seq

RecurrentSeq2SeqImpl::RecurrentSeq2SeqImpl(const RecurrentSeq2SeqOptions& options) : options_(options) {
  const std::int64_t hidden = options.hidden(), embed = options.embed_dim() > 0 ? options.embed_dim() : hidden;
  if (options.source_vocab() <= 0 || options.target_vocab() <= 0 || hidden <= 0)
    throw ValueError(message("RecurrentSeq2Seq: source_vocab, target_vocab and hidden must be positive, got ",
                             options.source_vocab(), ", ", options.target_vocab(), " and ", hidden));
  if (options.embed_dim() < 0)
    throw ValueError(
        message("RecurrentSeq2Seq: embed_dim must be positive, or 0 for hidden, got ", options.embed_dim()));
  if (options.location_kernel() != 0 && options.score() != AlignmentScore::Additive)
    throw ValueError(message("RecurrentSeq2Seq: location_kernel ", options.location_kernel(),
                             " needs score(AlignmentScore::Additive)"));
  options_.embed_dim(embed);
  Generator& gen = generator_or_default(options.generator());
  options_.generator(nullptr);
  const std::int64_t directions = options.bidirectional_encoder() ? 2 : 1;
  source_embedding_ =
      register_module("source_embedding", Embedding(EmbeddingOptions(options.source_vocab(), embed).generator(&gen)));
  target_embedding_ =
      register_module("target_embedding", Embedding(EmbeddingOptions(options.target_vocab(), embed).generator(&gen)));
  encoder_ = register_module(
      "encoder",
      make_recurrent(options.cell(), recurrent_options(embed, hidden, options.num_layers(),
                                                       options.bidirectional_encoder(), options.dropout(), gen)));
  decoder_ = register_module(
      "decoder", make_recurrent(options.cell(),
                                recurrent_options(embed, hidden, options.num_layers(), false, options.dropout(), gen)));
  if (directions == 2) {
    bridge_h_ = register_module("bridge_h", Linear(LinearOptions(2 * hidden, hidden).generator(&gen)));
    if (options.cell() == RecurrentMode::Lstm)
      bridge_c_ = register_module("bridge_c", Linear(LinearOptions(2 * hidden, hidden).generator(&gen)));
  }
  attention_ = register_module("attention", AlignmentAttention(AlignmentOptions(hidden, directions * hidden)
                                                                   .score(options.score())
                                                                   .location_kernel(options.location_kernel())
                                                                   .generator(&gen)));
  combine_ = register_module("combine",
                             Linear(LinearOptions(directions * hidden + hidden, hidden).bias(false).generator(&gen)));
  output_ = register_module("output", Linear(LinearOptions(hidden, options.target_vocab()).generator(&gen)));
  dropout_gen_.manual_seed(gen.next_u64());
  register_generator("dropout_generator", dropout_gen_);
}

EncodedSource RecurrentSeq2SeqImpl::encode(const Tensor& source, const Tensor& lengths) {
  EncodedSource enc;
  enc.padding = source_padding_mask("RecurrentSeq2Seq", source, lengths);
  const double p = is_training() ? options_.dropout() : 0.0;
  const Tensor embedded = dropout(source_embedding_(source), p, p > 0.0, dropout_gen_);
  const RecurrentOutput r = encoder_->forward(embedded, RecurrentState(), lengths);
  enc.memory = r.output;
  enc.state = bridge_state(r.state, bridge_h_, bridge_c_, options_.num_layers());
  return enc;
}

DecoderSteps RecurrentSeq2SeqImpl::decode(const Tensor& target_in, const EncodedSource& source,
                                          const RecurrentState& state, const Tensor& previous_attention) {
  if (target_in.dim() != 2 || target_in.dtype() != kInt64 || target_in.shape()[0] != source.memory.shape()[0])
    throw ShapeError(message("RecurrentSeq2Seq: expected Int64 target tokens (", source.memory.shape()[0], ", T), got ",
                             dtype_name(target_in.dtype()), " ", target_in.shape().str()));
  const double p = is_training() ? options_.dropout() : 0.0;
  const Tensor embedded = dropout(target_embedding_(target_in), p, p > 0.0, dropout_gen_);
  const RecurrentOutput r = decoder_->forward(embedded, state);  // (B, T, H)
  const AlignmentResult a = attention_(r.output, source.memory, source.padding,
                                       options_.location_kernel() > 0 ? previous_attention : Tensor());
  const Tensor attentional = dropout(tanh(combine_(concat({a.context, r.output}, 2))), p, p > 0.0, dropout_gen_);
  return {output_(attentional), a.weights, r.state};
}

Tensor RecurrentSeq2SeqImpl::forward(const Tensor& source, const Tensor& target_in, const Tensor& lengths) {
  const EncodedSource enc = encode(source, lengths);
  return decode(target_in, enc, enc.state).logits;
}

// ---------------------------------------------------------------- PointerNetwork

PointerNetworkImpl::PointerNetworkImpl(const PointerNetworkOptions& options) : options_(options) {
  const std::int64_t hidden = options.hidden(), embed = options.embed_dim() > 0 ? options.embed_dim() : hidden;
  if (options.input_vocab() <= 0 || hidden <= 0)
    throw ValueError(message("PointerNetwork: input_vocab and hidden must be positive, got ", options.input_vocab(),
                             " and ", hidden));
  if (options.embed_dim() < 0)
    throw ValueError(message("PointerNetwork: embed_dim must be positive, or 0 for hidden, got ", options.embed_dim()));
  options_.embed_dim(embed);
  Generator& gen = generator_or_default(options.generator());
  options_.generator(nullptr);
  const std::int64_t directions = options.bidirectional_encoder() ? 2 : 1;
  embedding_ = register_module("embedding", Embedding(EmbeddingOptions(options.input_vocab(), embed).generator(&gen)));
  encoder_ = register_module(
      "encoder", make_recurrent(options.cell(), recurrent_options(embed, hidden, options.num_layers(),
                                                                  options.bidirectional_encoder(), 0.0, gen)));
  const std::int64_t decoder_in = embed + (options.feed_encoder_states() ? directions * hidden : 0);
  decoder_ = register_module(
      "decoder",
      make_recurrent(options.cell(), recurrent_options(decoder_in, hidden, options.num_layers(), false, 0.0, gen)));
  if (directions == 2) {
    bridge_h_ = register_module("bridge_h", Linear(LinearOptions(2 * hidden, hidden).generator(&gen)));
    if (options.cell() == RecurrentMode::Lstm)
      bridge_c_ = register_module("bridge_c", Linear(LinearOptions(2 * hidden, hidden).generator(&gen)));
  }
  attention_ = register_module("attention", AlignmentAttention(AlignmentOptions(hidden, directions * hidden)
                                                                   .score(AlignmentScore::Additive)
                                                                   .location_kernel(options.location_kernel())
                                                                   .generator(&gen)));
  start_ = register_parameter("start", uniform({decoder_in}, -1.0, 1.0, gen));
}

EncodedSource PointerNetworkImpl::encode(const Tensor& source, const Tensor& lengths) {
  EncodedSource enc;
  enc.padding = source_padding_mask("PointerNetwork", source, lengths);
  enc.embedded = embedding_(source);
  const RecurrentOutput r = encoder_->forward(enc.embedded, RecurrentState(), lengths);
  enc.memory = r.output;
  enc.projected_keys = attention_->project_keys(enc.memory);
  enc.state = bridge_state(r.state, bridge_h_, bridge_c_, options_.num_layers());
  return enc;
}

DecoderSteps PointerNetworkImpl::decode(const Tensor& previous, const EncodedSource& source,
                                        const RecurrentState& state, const Tensor& previous_attention) {
  const std::int64_t batch = source.memory.shape()[0], steps = source.memory.shape()[1];
  if (previous.dim() != 2 || previous.dtype() != kInt64 || previous.shape()[0] != batch)
    throw ShapeError(message("PointerNetwork: expected Int64 previous positions (", batch, ", T), got ",
                             dtype_name(previous.dtype()), " ", previous.shape().str()));
  // Row b * S + s of the table is source element s of item b; row B * S is the start vector.
  const std::int64_t t = previous.shape()[1];
  const std::vector<std::int64_t> prev = previous.to_vector<std::int64_t>();
  std::vector<std::int64_t> rows(prev.size());
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t i = 0; i < t; ++i) {
      const std::size_t k = static_cast<std::size_t>(b * t + i);
      if (prev[k] < -1 || prev[k] >= steps)
        throw ValueError(message("PointerNetwork: previous position ", prev[k], " at (", b, ", ", i,
                                 ") is outside [-1, ", steps, ")"));
      rows[k] = prev[k] < 0 ? batch * steps : b * steps + prev[k];
    }
  const Tensor elements =
      options_.feed_encoder_states() ? concat({source.embedded, source.memory}, 2) : source.embedded;
  const Tensor table = concat({elements.reshape({batch * steps, -1}), unsqueeze(start_, 0)}, 0);
  const Tensor inputs = index_select(table, 0, from_vector(rows, {batch * t})).reshape({batch, t, -1});
  RecurrentOutput r;
  if (options_.recurrent_decoder()) {
    r = decoder_->forward(inputs, state);
  } else {
    // Every step alone, from a zero state: a query from the step's input only.
    r.output = decoder_->forward(inputs.reshape({batch * t, 1, -1})).output.reshape({batch, t, -1});
    r.state = state;
  }
  const AlignmentResult a =
      attention_->forward_projected(r.output, source.memory, source.projected_keys, source.padding,
                                    options_.location_kernel() > 0 ? previous_attention : Tensor());
  return {a.scores, a.weights, r.state};
}

Tensor PointerNetworkImpl::forward(const Tensor& source, const Tensor& target_positions, const Tensor& lengths) {
  const EncodedSource enc = encode(source, lengths);
  if (target_positions.dim() != 2 || target_positions.dtype() != kInt64 || target_positions.shape()[1] == 0)
    throw ShapeError(message("PointerNetwork: expected Int64 target positions (B, T) with T >= 1, got ",
                             dtype_name(target_positions.dtype()), " ", target_positions.shape().str()));
  const Tensor start = full({target_positions.shape()[0], 1}, -1.0, kInt64);
  const Tensor previous = concat({start, narrow(target_positions, 1, 0, target_positions.shape()[1] - 1)}, 1);
  return decode(previous, enc, enc.state).logits;
}

// ---------------------------------------------------------------- decoding adapters

EncodedSource select_rows(const EncodedSource& source, const Tensor& rows) {
  EncodedSource out;
  auto pick = [&rows](const Tensor& t) { return t.defined() ? index_select(t, 0, rows) : Tensor(); };
  out.memory = pick(source.memory);
  out.padding = pick(source.padding);
  out.embedded = pick(source.embedded);
  out.projected_keys = pick(source.projected_keys);
  out.state = select_rows(source.state, rows);
  return out;
}

RecurrentState select_rows(const RecurrentState& state, const Tensor& rows) {
  RecurrentState out;  // (L, B, H): the rows are axis 1
  if (state.h.defined()) out.h = index_select(state.h, 1, rows);
  if (state.c.defined()) out.c = index_select(state.c, 1, rows);
  return out;
}

Tensor RecurrentDecoderBase::start(const Tensor& prompt) {
  NoGradGuard no_grad;
  const Tensor rows = detail::source_rows(name_, prompt.shape()[0], source_.shape()[0]);
  encoded_ = select_rows(encode(source_, lengths_), rows);
  attention_ = Tensor();
  return advance(prompt, encoded_.state);
}

Tensor RecurrentDecoderBase::step(const Tensor& tokens) {
  NoGradGuard no_grad;
  return advance(tokens, state_);
}

Tensor RecurrentDecoderBase::advance(const Tensor& tokens, const RecurrentState& from) {
  const DecoderSteps r = decode(tokens, encoded_, from, attention_);
  state_ = r.state;
  attention_ = r.weights.select(1, -1);
  return r.logits.select(1, -1);
}

void RecurrentDecoderBase::reorder(const Tensor& rows) {
  encoded_ = select_rows(encoded_, rows);
  state_ = select_rows(state_, rows);
  attention_ = index_select(attention_, 0, rows);
}

EncodedSource RecurrentSeq2SeqDecoder::encode(const Tensor& source, const Tensor& lengths) {
  model_->eval();
  return model_->encode(source, lengths);
}

DecoderSteps RecurrentSeq2SeqDecoder::decode(const Tensor& tokens, const EncodedSource& source,
                                             const RecurrentState& state, const Tensor& previous_attention) {
  return model_->decode(tokens, source, state, previous_attention);
}

EncodedSource PointerNetworkDecoder::encode(const Tensor& source, const Tensor& lengths) {
  model_->eval();
  return model_->encode(source, lengths);
}

DecoderSteps PointerNetworkDecoder::decode(const Tensor& tokens, const EncodedSource& source,
                                           const RecurrentState& state, const Tensor& previous_attention) {
  return model_->decode(tokens, source, state, previous_attention);
}

}  // namespace tapegrad::nn
