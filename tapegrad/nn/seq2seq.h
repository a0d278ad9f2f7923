#pragma once
// Recurrent encoder-decoders with attention, and their adapters for greedy and beam search
// (decoding.h):
//
// RecurrentSeq2Seq (Luong et al. 2015, global attention): a (bi)directional recurrent encoder
// over the source embeddings; a recurrent decoder over the target embeddings, started from the
// encoder's final states (through a tanh bridge when the encoder is bidirectional); at each
// target step the decoder state h_t attends over the encoder states (AlignmentAttention) for a
// context c_t, and the logits are output(tanh(combine([c_t; h_t]))).
//
// PointerNetwork (Vinyals et al. 2015): the same encoder; the decoder's input at each step is the
// embedding of the source element chosen at the step before (a learned "start" vector first),
// and its output is the additive attention's distribution over source positions: a pointer.
// Positions are the tokens it emits; -1 stands for "start". With location-aware attention and a
// decoder without state across steps (location_kernel, recurrent_decoder(false)) a pointer learns
// moves ("the position left of the last one") that carry over to inputs longer than any it saw.
//
//   nn::RecurrentSeq2Seq model{nn::RecurrentSeq2SeqOptions(8, 8, 64)};
//   Tensor logits = model(src, tgt_in, src_lengths);        // (B, T) tokens -> (B, T, V)
//   nn::RecurrentSeq2SeqDecoder decoder(model, src, src_lengths);
//   auto best = nn::beam_search(decoder, full({B, 1}, kSos, kInt64), options);
//
//   nn::PointerNetwork ptr{nn::PointerNetworkOptions(8, 64)};
//   Tensor scores = ptr(src, target_positions, src_lengths); // (B, T) positions -> (B, T, S)
//   nn::PointerNetworkDecoder pd(ptr, src, src_lengths);     // prompt: full({B, 1}, -1, kInt64)
//
// Module children: "source_embedding" / "embedding", "target_embedding", "encoder", "decoder"
// (nn::LSTM, GRU or RNN), "bridge_h" and "bridge_c" (bidirectional encoder), "attention",
// "combine", "output"; the pointer network's parameter "start".

#include <cstdint>
#include <utility>

#include "tapegrad/nn/alignment.h"
#include "tapegrad/nn/decoding.h"
#include "tapegrad/nn/layers.h"
#include "tapegrad/nn/linear.h"
#include "tapegrad/nn/recurrent.h"

namespace tapegrad::nn {

// What decoding needs from the encoder.
struct EncodedSource {
  Tensor memory;          // (B, S, directions * hidden): the encoder's outputs, the attention's keys
  Tensor padding;         // Bool (B, S), true past a source's length; undefined without lengths
  RecurrentState state;   // the decoder's initial state (num_layers, B, hidden)
  Tensor embedded;        // (B, S, embed): the source embeddings (the pointer network's decoder inputs)
  Tensor projected_keys;  // the additive attention's key projection, computed once
};

// One call of the decoder over T steps.
struct DecoderSteps {
  Tensor logits;         // (B, T, V) for RecurrentSeq2Seq; for PointerNetwork the scores (B, T, S)
  Tensor weights;        // attention (B, T, S)
  RecurrentState state;  // the decoder's state after the last step
};

// ---------------------------------------------------------------- RecurrentSeq2Seq

struct RecurrentSeq2SeqOptions {
  RecurrentSeq2SeqOptions(std::int64_t source_vocab, std::int64_t target_vocab, std::int64_t hidden)
      : source_vocab_(source_vocab), target_vocab_(target_vocab), hidden_(hidden) {}
  TAPEGRAD_ARG(std::int64_t, source_vocab);
  TAPEGRAD_ARG(std::int64_t, target_vocab);
  TAPEGRAD_ARG(std::int64_t, hidden);
  TAPEGRAD_ARG(std::int64_t, embed_dim) = 0;  // 0: hidden
  TAPEGRAD_ARG(RecurrentMode, cell) = RecurrentMode::Lstm;
  TAPEGRAD_ARG(std::int64_t, num_layers) = 1;
  TAPEGRAD_ARG(bool, bidirectional_encoder) = true;
  TAPEGRAD_ARG(AlignmentScore, score) = AlignmentScore::General;
  // Location-aware attention (alignment.h) of this width; needs the additive score. 0: none.
  TAPEGRAD_ARG(std::int64_t, location_kernel) = 0;
  // Dropout on the embeddings, between recurrent layers and on the attentional state, in training.
  TAPEGRAD_ARG(double, dropout) = 0.0;
  TAPEGRAD_ARG(Generator*, generator) = nullptr;  // initial weights and the dropout generator's seed
};

class RecurrentSeq2SeqImpl : public Module {
 public:
  explicit RecurrentSeq2SeqImpl(const RecurrentSeq2SeqOptions& options);
  // source: Int64 (B, S); lengths: Int64 (B) in [1, S], or undefined for S.
  EncodedSource encode(const Tensor& source, const Tensor& lengths = Tensor());
  // target_in: Int64 (B, T), from state (the encoder's, or the last call's). previous_attention:
  // the last call's last attention (B, S), for location-aware attention; undefined at the start.
  DecoderSteps decode(const Tensor& target_in, const EncodedSource& source, const RecurrentState& state,
                      const Tensor& previous_attention = Tensor());
  // Teacher forcing: the logits (B, T, V) of every target position.
  Tensor forward(const Tensor& source, const Tensor& target_in, const Tensor& lengths = Tensor());

  const RecurrentSeq2SeqOptions& options() const { return options_; }

 private:
  RecurrentSeq2SeqOptions options_;
  Embedding source_embedding_{nullptr}, target_embedding_{nullptr};
  std::shared_ptr<RecurrentImpl> encoder_, decoder_;
  Linear bridge_h_{nullptr}, bridge_c_{nullptr}, combine_{nullptr}, output_{nullptr};
  AlignmentAttention attention_{nullptr};
  Generator dropout_gen_;
};
TAPEGRAD_MODULE(RecurrentSeq2Seq);

// ---------------------------------------------------------------- PointerNetwork

struct PointerNetworkOptions {
  PointerNetworkOptions(std::int64_t input_vocab, std::int64_t hidden) : input_vocab_(input_vocab), hidden_(hidden) {}
  TAPEGRAD_ARG(std::int64_t, input_vocab);
  TAPEGRAD_ARG(std::int64_t, hidden);
  TAPEGRAD_ARG(std::int64_t, embed_dim) = 0;  // 0: hidden
  TAPEGRAD_ARG(RecurrentMode, cell) = RecurrentMode::Lstm;
  TAPEGRAD_ARG(std::int64_t, num_layers) = 1;
  TAPEGRAD_ARG(bool, bidirectional_encoder) = true;
  // The decoder's input is the chosen element's embedding and, with this, the encoder's state at
  // its position too ([embedding; memory]), so the decoder sees where it pointed, not only what.
  TAPEGRAD_ARG(bool, feed_encoder_states) = false;
  // Location-aware attention (alignment.h) of this width: the pointer sees where it pointed the
  // step before, and can learn moves that hold at any length. 0: none.
  TAPEGRAD_ARG(std::int64_t, location_kernel) = 0;
  // false: the decoder keeps no state from step to step; each step's query is the decoder cell run
  // on that step's input alone, from zeros. The pointer then depends on what it read and (with
  // location_kernel) where it pointed, never on how many steps it has taken, so what it learned
  // on short inputs holds on longer ones. The state passed to decode comes back unchanged (the
  // encoder's bridged final state is still computed and the bridge kept, but unused: its
  // parameters get no gradient).
  TAPEGRAD_ARG(bool, recurrent_decoder) = true;
  TAPEGRAD_ARG(Generator*, generator) = nullptr;
};

class PointerNetworkImpl : public Module {
 public:
  explicit PointerNetworkImpl(const PointerNetworkOptions& options);
  EncodedSource encode(const Tensor& source, const Tensor& lengths = Tensor());
  // previous: Int64 (B, T), the position chosen before each step (-1: start). Returns the masked
  // scores over source positions (log_softmax: the pointer's log-probabilities). previous_attention
  // as RecurrentSeq2Seq's.
  DecoderSteps decode(const Tensor& previous, const EncodedSource& source, const RecurrentState& state,
                      const Tensor& previous_attention = Tensor());
  // Teacher forcing: scores (B, T, S) for target positions Int64 (B, T) in [0, S).
  Tensor forward(const Tensor& source, const Tensor& target_positions, const Tensor& lengths = Tensor());

  const PointerNetworkOptions& options() const { return options_; }

 private:
  PointerNetworkOptions options_;
  Embedding embedding_{nullptr};
  std::shared_ptr<RecurrentImpl> encoder_, decoder_;
  Linear bridge_h_{nullptr}, bridge_c_{nullptr};
  AlignmentAttention attention_{nullptr};
  Tensor start_;
};
TAPEGRAD_MODULE(PointerNetwork);

// ---------------------------------------------------------------- decoding adapters
// Each keeps the encoded sources and the decoder state of every row; rows are the sources
// repeated (beam search: R = B * beam_size rows, item-major), and reorder moves states, memory
// and attention with them. Under no-grad, in eval mode, while decoding.

// What both adapters share: the rows' encoded sources, decoder state and last attention.
class RecurrentDecoderBase : public Decoder {
 public:
  Tensor start(const Tensor& prompt) override;
  Tensor step(const Tensor& tokens) override;
  void reorder(const Tensor& rows) override;
  Tensor attention() const override { return attention_; }
  Tensor source_padding() const override { return encoded_.padding; }

 protected:
  RecurrentDecoderBase(const char* name, Tensor source, Tensor lengths)
      : name_(name), source_(std::move(source)), lengths_(std::move(lengths)) {}
  // The model in eval mode, its encoding of the sources (B items).
  virtual EncodedSource encode(const Tensor& source, const Tensor& lengths) = 0;
  virtual DecoderSteps decode(const Tensor& tokens, const EncodedSource& source, const RecurrentState& state,
                              const Tensor& previous_attention) = 0;

 private:
  // Runs decode from state_ and keeps its state and last attention; the last step's logits.
  Tensor advance(const Tensor& tokens, const RecurrentState& from);

  const char* name_;
  Tensor source_, lengths_;
  EncodedSource encoded_;
  RecurrentState state_;
  Tensor attention_;
};

class RecurrentSeq2SeqDecoder : public RecurrentDecoderBase {
 public:
  RecurrentSeq2SeqDecoder(RecurrentSeq2Seq model, Tensor source, Tensor lengths = Tensor())
      : RecurrentDecoderBase("RecurrentSeq2SeqDecoder", std::move(source), std::move(lengths)),
        model_(std::move(model)) {}

 protected:
  EncodedSource encode(const Tensor& source, const Tensor& lengths) override;
  DecoderSteps decode(const Tensor& tokens, const EncodedSource& source, const RecurrentState& state,
                      const Tensor& previous_attention) override;

 private:
  RecurrentSeq2Seq model_;
};

class PointerNetworkDecoder : public RecurrentDecoderBase {
 public:
  PointerNetworkDecoder(PointerNetwork model, Tensor source, Tensor lengths = Tensor())
      : RecurrentDecoderBase("PointerNetworkDecoder", std::move(source), std::move(lengths)),
        model_(std::move(model)) {}

 protected:
  EncodedSource encode(const Tensor& source, const Tensor& lengths) override;
  DecoderSteps decode(const Tensor& tokens, const EncodedSource& source, const RecurrentState& state,
                      const Tensor& previous_attention) override;

 private:
  PointerNetwork model_;
};

// EncodedSource and RecurrentState with their batch rows picked (rows may repeat): decoding's
// public helper for reordering recurrent states by beam.
EncodedSource select_rows(const EncodedSource& source, const Tensor& rows);
RecurrentState select_rows(const RecurrentState& state, const Tensor& rows);

}  // namespace tapegrad::nn
