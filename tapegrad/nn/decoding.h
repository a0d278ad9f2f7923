#pragma once
// Beam search for autoregressive models, written against a small interface (Decoder) so that any
// model with a step function and a reorderable state can use it; LanguageModelDecoder adapts
// nn::LanguageModel and its cache. generate (greedy and sampling) runs over the same interface.
//
//   nn::LanguageModelDecoder decoder(lm);
//   nn::BeamSearchOptions o;  o.beam_size = 4;  o.max_new_tokens = 40;  o.eos_token = 10;  o.length_penalty = 0.6;
//   std::vector<std::vector<nn::Hypothesis>> best = nn::beam_search(decoder, prompt, o);   // per prompt row, best
//   first
//
// Scores: the sum of the generated tokens' log-probabilities, divided by GNMT's length penalty
// lp(|Y|) = ((5 + |Y|) / 6)^alpha (alpha = length_penalty; |Y| counts the generated tokens, the end
// token included), plus, with coverage_penalty beta, GNMT's coverage penalty
// cp = beta * sum_j log(min(sum_i a_ij, 1)) over the source positions j. Step one expands only the first beam of each
// row (the others start at -inf), so the beams never hold copies of one hypothesis.

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "tapegrad/autograd/tensor.h"
#include "tapegrad/nn/transformer.h"

namespace tapegrad::nn {

// An autoregressive model as decoding sees it. Rows are hypotheses; the decoder keeps each row's state
// (a KV cache, a recurrent state).
class Decoder {
 public:
  virtual ~Decoder() = default;
  // Starts every row from its prompt (Int64 (R, T0)) and returns the logits of the next token (R, V).
  virtual Tensor start(const Tensor& prompt) = 0;
  // Appends one token per row (Int64 (R, 1)) and returns the logits of the next (R, V).
  virtual Tensor step(const Tensor& tokens) = 0;
  // Keeps rows `rows` of the state, in that order (rows may repeat): row i of the new state is row
  // rows[i] of the old.
  virtual void reorder(const Tensor& rows) = 0;
  // For the coverage penalty: the attention over source positions (R, S) behind the last logits,
  // and Bool (R, S), true where a row's source has no position (padding). Undefined when the
  // model has no source attention (no padding).
  virtual Tensor attention() const { return Tensor(); }
  virtual Tensor source_padding() const { return Tensor(); }
};

// nn::LanguageModel with its cache (under no-grad, in eval mode while decoding).
class LanguageModelDecoder : public Decoder {
 public:
  explicit LanguageModelDecoder(LanguageModel model) : model_(std::move(model)) {}
  Tensor start(const Tensor& prompt) override;
  Tensor step(const Tensor& tokens) override;
  void reorder(const Tensor& rows) override { cache_.reorder(rows); }

 private:
  LanguageModel model_;
  LanguageModelCache cache_;
};

// nn::EncoderDecoder with its decoder cache: the sources (B, S) are encoded once at start, and the
// prompt's rows are the sources repeated (beam search: item-major). Under no-grad, in eval mode.
// With randomized positions, target_length (prompt and generated tokens, when known) sizes each
// row's random target positions as in training; 0 draws max_len of them.
class EncoderDecoderDecoder : public Decoder {
 public:
  // ValueError for a negative target_length.
  EncoderDecoderDecoder(EncoderDecoder model, Tensor source, Tensor source_padding = Tensor(),
                        std::int64_t target_length = 0);
  Tensor start(const Tensor& prompt) override;
  Tensor step(const Tensor& tokens) override;
  void reorder(const Tensor& rows) override;
  // For beam search's coverage penalty: with this on, attention() is the last decoder layer's
  // cross-attention at the newest position, averaged over heads (R, S). Off by default: asking
  // for the weights makes every step's cross-attention materialise them.
  EncoderDecoderDecoder& report_attention(bool on = true) {
    report_attention_ = on;
    return *this;
  }
  Tensor attention() const override { return attention_; }
  Tensor source_padding() const override { return row_padding_; }

 private:
  EncoderDecoder model_;
  Tensor source_, padding_;
  std::int64_t target_length_;
  bool report_attention_ = false;
  Tensor memory_, row_padding_, attention_;
  DecoderCache cache_;
};

namespace detail {
// The source each of `rows` decoder rows reads when the rows are `sources` sources repeated an
// equal number of times, item-major: Int64 (rows), row r -> r / (rows / sources). ShapeError
// naming the decoder otherwise.
Tensor source_rows(const char* decoder, std::int64_t rows, std::int64_t sources);
// choose_tokens' checks of temperature, top_k and top_p, and a negative eos_token: ValueError naming op.
void check_generation_options(const GenerationOptions& options, const char* op);
// What a Decoder returned at `step`, before it is read row by row: ShapeError naming op unless it is
// (rows, V) with V >= 1; ValueError if eos_token is not below V.
void check_decoder_logits(const Tensor& logits, std::int64_t rows, std::optional<std::int64_t> eos_token,
                          std::int64_t step, const char* op);
// generate's loop without its checks, choose_tokens' errors naming op: what generate and
// LanguageModel::generate (with a decoder of its own for the sliding window) both run.
Tensor generate_tokens(Decoder& decoder, const Tensor& prompt, const GenerationOptions& options, Generator& gen,
                       const char* op);
}  // namespace detail

struct BeamSearchOptions {
  std::int64_t beam_size = 4;
  std::int64_t max_new_tokens = 16;
  std::optional<std::int64_t> eos_token;  // a hypothesis ends when it emits this
  double length_penalty = 0.0;            // GNMT alpha; 0: plain sum of log-probabilities
  // GNMT beta: adds beta * sum_j log(min(coverage_j, 1)) to a hypothesis' score, coverage_j being
  // the attention source position j received over the hypothesis' steps (padding excluded). Needs
  // a decoder with attention(). 0: none.
  double coverage_penalty = 0.0;
  std::int64_t num_return = 1;  // hypotheses returned per row (at most beam_size)
  // When a row stops: Exhaustive keeps expanding until max_new_tokens (or until no live beam could
  // still beat the finished ones, which with length_penalty 0 is exact); Early stops a row once
  // beam_size hypotheses have finished.
  enum class Stopping { Exhaustive, Early } stopping = Stopping::Exhaustive;
};

struct Hypothesis {
  std::vector<std::int64_t> tokens;  // the generated tokens (the end token included), without the prompt
  double log_prob = 0.0;             // sum of the tokens' log-probabilities
  double score = 0.0;                // log_prob / lp(tokens.size()) + the coverage penalty
  bool finished = false;             // ended with the end token (else it reached max_new_tokens)
};

// Greedy decoding and sampling through any Decoder: each row of prompt (Int64 (R, T0)) continued
// one token at a time, the token chosen from the last logits as choose_tokens does. Returns
// (R, T0 + n), n <= max_new_tokens: n stops early only when every row has emitted eos_token, and
// a row that ended is continued with eos_token. Under no-grad. ValueError as choose_tokens, and for
// sliding_window (which only LanguageModel::generate offers).
//
//   nn::GenerationOptions o;  o.temperature = 0.8;  o.top_p = 0.9;  o.max_new_tokens = 20;  o.eos_token = kEos;
//   nn::RecurrentSeq2SeqDecoder decoder(model, src);
//   Tensor out = nn::generate(decoder, full({B, 1}, kSos, kInt64), o, gen);
Tensor generate(Decoder& decoder, const Tensor& prompt, const GenerationOptions& options, Generator& gen);

// The next token of every row of logits (R, V): the argmax when temperature is 0; otherwise one
// draw per row (one gen.uniform() each, rows in order) from softmax(logits / temperature), kept to
// the top_k most likely tokens when top_k > 0 and then to the smallest set of most likely tokens
// whose probability reaches top_p (ties by token id). ValueError naming `op` for a negative or
// non-finite temperature, a negative top_k, top_p outside (0, 1], or (when sampling) a row with no
// distribution (a NaN, or every logit -inf).
std::vector<std::int64_t> choose_tokens(const Tensor& logits, const GenerationOptions& options, Generator& gen,
                                        const char* op = "choose_tokens");

// GNMT's length penalty ((5 + length) / 6)^alpha.
double gnmt_length_penalty(std::int64_t length, double alpha);

// Beam search from each row of prompt (Int64 (B, T0)), all rows at once (B * beam_size decoder
// rows). Returns, per prompt row, up to num_return hypotheses, best score first. ValueError for
// beam_size, max_new_tokens or num_return below 1, num_return above beam_size, a non-finite length or
// coverage penalty, or an eos_token outside the decoder's vocabulary; ShapeError when the decoder's
// logits are not one row per beam, or its attention changes width between steps.
std::vector<std::vector<Hypothesis>> beam_search(Decoder& decoder, const Tensor& prompt,
                                                 const BeamSearchOptions& options);

}  // namespace tapegrad::nn
