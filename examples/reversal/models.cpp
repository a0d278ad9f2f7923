// sequence_reversal's models behind one interface (loss of a batch, a decoder, attention pictures),
// and decoding accuracy. See reversal.h.

#include <string>
#include <utility>
#include <vector>

#include "examples/reversal/reversal.h"

namespace tapegrad::examples::reversal {

namespace {

const std::int64_t kVocab = static_cast<std::int64_t>(kTokenNames.size());

// <sos> + reversed (decoder input) and reversed + <eos> (target) of a batch's padded target.
std::pair<Tensor, Tensor> split_target(const data::Batch& batch) {
  const std::int64_t t = batch.target.shape()[1];
  return {batch.target.narrow(1, 0, t - 1).contiguous(), batch.target.narrow(1, 1, t - 1).contiguous()};
}

// The pointer's targets: step t of a string of length L points at position L - 1 - t; steps past
// L are -1 (ignored by the loss, and the decoder's "start" input).
Tensor pointer_targets(const data::Batch& batch) {
  const std::int64_t b = batch.input.shape()[0], s = batch.input.shape()[1];
  const std::vector<std::int64_t> lengths = batch.lengths.to_vector<std::int64_t>();
  std::vector<std::int64_t> positions(static_cast<std::size_t>(b * s), -1);
  for (std::int64_t i = 0; i < b; ++i)
    for (std::int64_t t = 0; t < lengths[static_cast<std::size_t>(i)]; ++t)
      positions[static_cast<std::size_t>(i * s + t)] = lengths[static_cast<std::size_t>(i)] - 1 - t;
  return from_vector(positions, {b, s});
}

std::vector<std::string> source_labels(const Tensor& src) {
  std::vector<std::string> labels;
  for (std::int64_t s = 0; s < src.shape()[1]; ++s)
    labels.push_back(kTokenNames[static_cast<std::size_t>(src.at({0, s}))] + std::to_string(s));
  return labels;
}

// A heat map of weights (T, S).
HeatMap panel(const std::string& title, const Tensor& weights, std::vector<std::string> rows,
              std::vector<std::string> cols) {
  HeatMap map;
  map.title = title;
  map.row_labels = std::move(rows);
  map.col_labels = std::move(cols);
  map.x_label = "source letter and position";
  map.y_label = "decoder input";
  map.min = 0.0;
  map.max = 1.0;
  const std::vector<double> v = weights.to(kFloat64).to_vector<double>();
  const std::size_t cols_n = static_cast<std::size_t>(weights.shape()[1]);
  for (std::int64_t t = 0; t < weights.shape()[0]; ++t)
    map.values.emplace_back(v.begin() + static_cast<std::ptrdiff_t>(t * weights.shape()[1]),
                            v.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(t + 1) * cols_n));
  return map;
}

std::vector<std::string> token_labels(const Tensor& tokens) {
  std::vector<std::string> labels;
  for (std::int64_t t = 0; t < tokens.shape()[1]; ++t)
    labels.push_back(kTokenNames[static_cast<std::size_t>(tokens.at({0, t}))]);
  return labels;
}

ReversalModel transformer(const ReversalConfig& config, const std::string& name, Generator& init) {
  nn::EncoderDecoder model{nn::EncoderDecoderOptions()
                               .src_vocab(kVocab)
                               .tgt_vocab(kVocab)
                               .max_len(config.max_len)
                               .encoder_layers(config.encoder_layers)
                               .decoder_layers(config.decoder_layers)
                               .positions(name == "learned"  ? nn::PositionEncoding::Learned
                                          : name == "rotary" ? nn::PositionEncoding::Rotary
                                                             : nn::PositionEncoding::Sinusoidal)
                               .randomized_positions(name == "randomized" ? config.position_range : 0)
                               .layer(nn::TransformerLayerOptions(config.d_model, config.heads)
                                          .dim_feedforward(config.ff_hidden)
                                          .activation(nn::Activation::ReLU)
                                          .dropout(config.dropout)
                                          .norm_first(true))
                               .generator(&init)};
  ReversalModel m;
  m.module = model.ptr();
  m.loss = [model](const data::Batch& batch) {
    const auto [tgt_in, tgt_out] = split_target(batch);
    return sequence_loss(model(batch.input, tgt_in, batch.padding_mask), tgt_out);  // logits (B, L + 1, V)
  };
  // The decoder reads <sos> and the L letters: L + 1 target positions (randomized positions are drawn
  // for exactly those, as in training).
  m.decoder = [model](const Tensor& src) {
    return std::make_unique<nn::EncoderDecoderDecoder>(model, src, Tensor(), src.shape()[1] + 1);
  };
  m.attention = [model](const Tensor& src, const Tensor& tgt_in) {
    NoGradGuard no_grad;
    model->eval();
    const std::vector<Tensor> weights =
        model->decode(tgt_in, model->encode(src), {}, nn::AttentionForwardOptions().need_weights(true)).cross_weights;
    model->train();
    std::vector<HeatMap> panels;
    for (std::size_t layer = 0; layer < weights.size(); ++layer)  // (1, H, T, S) -> mean of heads (T, S)
      panels.push_back(panel("decoder layer " + std::to_string(layer) + " (mean of heads)",
                             weights[layer].mean({1}).select(0, 0), token_labels(tgt_in), source_labels(src)));
    return panels;
  };
  return m;
}

ReversalModel seq2seq(const ReversalConfig& config, Generator& init) {
  nn::RecurrentSeq2Seq model{nn::RecurrentSeq2SeqOptions(kVocab, kVocab, config.hidden)
                                 .score(nn::AlignmentScore::General)
                                 .dropout(config.dropout)
                                 .generator(&init)};
  ReversalModel m;
  m.module = model.ptr();
  m.loss = [model](const data::Batch& batch) {
    const auto [tgt_in, tgt_out] = split_target(batch);
    return sequence_loss(model(batch.input, tgt_in, batch.lengths), tgt_out);
  };
  m.decoder = [model](const Tensor& src) { return std::make_unique<nn::RecurrentSeq2SeqDecoder>(model, src); };
  m.attention = [model](const Tensor& src, const Tensor& tgt_in) {
    NoGradGuard no_grad;
    model->eval();
    const nn::EncodedSource enc = model->encode(src);
    const Tensor weights = model->decode(tgt_in, enc, enc.state).weights.select(0, 0);  // (T, S)
    model->train();
    return std::vector<HeatMap>{panel("attention", weights, token_labels(tgt_in), source_labels(src))};
  };
  return m;
}

// pointer: Vinyals et al.'s, fed encoder states; pointer_location: with location-aware attention and
// a decoder without state across steps.
ReversalModel pointer(const ReversalConfig& config, bool location, Generator& init) {
  nn::PointerNetwork model{nn::PointerNetworkOptions(kVocab, config.hidden)
                               .feed_encoder_states(true)
                               .location_kernel(location ? config.location_kernel : 0)
                               .recurrent_decoder(!location)
                               .generator(&init)};
  ReversalModel m;
  m.module = model.ptr();
  m.prompt = -1;
  m.pointer = true;
  m.loss = [model](const data::Batch& batch) {
    const Tensor targets = pointer_targets(batch);
    nn::CrossEntropyOptions options;
    options.ignore_index = -1;
    return nn::cross_entropy(model(batch.input, targets, batch.lengths).transpose(1, 2), targets, options);
  };
  m.decoder = [model](const Tensor& src) { return std::make_unique<nn::PointerNetworkDecoder>(model, src); };
  m.attention = [model](const Tensor& src, const Tensor& tgt_in) {
    NoGradGuard no_grad;
    model->eval();
    const std::int64_t length = src.shape()[1];
    std::vector<std::int64_t> previous{-1};
    for (std::int64_t t = length - 1; t > 0; --t) previous.push_back(t);
    const nn::EncodedSource enc = model->encode(src);
    const Tensor weights = model->decode(from_vector(previous, {1, length}), enc, enc.state).weights.select(0, 0);
    model->train();
    std::vector<std::string> rows = token_labels(tgt_in.narrow(1, 0, length));
    rows[0] = "<start>";
    return std::vector<HeatMap>{panel("pointer distribution", weights, rows, source_labels(src))};
  };
  return m;
}

}  // namespace

ReversalModel build_model(const ReversalConfig& config, const std::string& name, std::uint64_t seed) {
  Generator init(seed);
  ReversalModel m = name == "seq2seq"            ? seq2seq(config, init)
                    : name == "pointer"          ? pointer(config, false, init)
                    : name == "pointer_location" ? pointer(config, true, init)
                                                 : transformer(config, name, init);
  m.name = name;
  return m;
}

Accuracy decode_accuracy(const ReversalModel& model, const Tensors& set, std::int64_t beam) {
  const std::int64_t n = set.src.shape()[0], length = set.src.shape()[1];
  nn::BeamSearchOptions options;
  options.beam_size = beam;
  options.max_new_tokens = model.pointer ? length : length + 1;
  if (!model.pointer) options.eos_token = kEos;
  const std::unique_ptr<nn::Decoder> decoder = model.decoder(set.src);
  const auto best = nn::beam_search(*decoder, full({n, 1}, static_cast<double>(model.prompt), kInt64), options);
  model.module->train();
  // The pointer's positions become the letters they point at; it has no <eos> to check.
  const std::int64_t compared = model.pointer ? length : length + 1;
  std::int64_t exact = 0, tokens = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::vector<std::int64_t>& out = best[static_cast<std::size_t>(i)][0].tokens;
    bool same = true;
    for (std::int64_t t = 0; t < compared; ++t) {
      bool ok = t < static_cast<std::int64_t>(out.size());
      if (ok) {
        const std::int64_t token = out[static_cast<std::size_t>(t)];
        ok = (model.pointer ? set.src.at({i, token}) : token) == set.tgt_out.at({i, t});
      }
      tokens += ok;
      same = same && ok;
    }
    exact += same;
  }
  return {static_cast<double>(exact) / static_cast<double>(n),
          static_cast<double>(tokens) / static_cast<double>(n * compared)};
}

}  // namespace tapegrad::examples::reversal
