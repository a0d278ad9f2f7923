#pragma once
// The pointer sentinel mixture (Merity, Xiong, Bradbury and Socher 2016, "Pointer Sentinel Mixture
// Models") on top of a language model's hidden states: a pointer over the last `window` input
// tokens can copy one of them, and a learned sentinel in the same softmax says how much to trust
// the vocabulary softmax instead. At position t, with h_i the hidden states and x_i the tokens:
//
//   q_t   = tanh(W h_t + b)                         the query
//   z_ti  = q_t . h_i / sqrt(d)   for t - window < i <= t
//   z_ts  = q_t . s / sqrt(d)                       s: the sentinel, a learned vector
//   a_t   = softmax([z_t ; z_ts]),  g_t = a_ts      the sentinel's weight, the gate
//   p(y)  = g_t p_vocab(y) + sum over i with x_i = y of a_ti
//
// (The paper's scores have no 1 / sqrt(d); here they do, as attention's.) The loss the paper trains
// with adds -log(g_t + sum over i with x_i = y of a_ti) to -log p(y): the pointer is told where the
// target occurs, or to defer to the sentinel when it does not (pointer_sentinel_loss).
//
//   nn::PointerSentinel pointer{nn::PointerSentinelOptions(256).window(100)};
//   Tensor h = lm->hidden(tokens);                  // (B, T, d)
//   nn::PointerSentinelOutput out = pointer(h, tokens, lm->logits(h), targets);
//   Tensor loss = nn::pointer_sentinel_loss(out);
//
// The outputs for training are computed in log space (the mixture as one logsumexp whose sentinel
// term is always finite), so a target the pointer cannot see or the vocabulary rounds to zero costs
// no NaN. log_distribution, for decoding, adds probabilities and takes their log: a token whose
// probability underflows gets -inf.

#include <cstdint>

#include "tapegrad/nn/decoding.h"
#include "tapegrad/nn/linear.h"
#include "tapegrad/nn/module.h"
#include "tapegrad/nn/transformer.h"

namespace tapegrad::nn {

struct PointerSentinelOptions {
  explicit PointerSentinelOptions(std::int64_t d_model) : d_model_(d_model) {}
  TAPEGRAD_ARG(std::int64_t, d_model);
  TAPEGRAD_ARG(std::int64_t, window) = 100;  // the paper's L: positions t - window + 1 .. t
  TAPEGRAD_ARG(Generator*, generator) = nullptr;
};

struct PointerSentinelOutput {
  Tensor log_probs;         // (B, T) log p(target) of the mixture
  Tensor pointer_log_mass;  // (B, T) log(g + the pointer's weight on the target's occurrences), the paper's second term
  Tensor gate;              // (B, T) g, the vocabulary softmax's share (no gradient)
  Tensor pointer_probs;     // (B, T) the pointer's probability of the target (no gradient)
};

// Children "query" (Linear(d, d)), parameter "sentinel" (d), drawn as Linear's weights are.
class PointerSentinelImpl : public Module {
 public:
  explicit PointerSentinelImpl(const PointerSentinelOptions& options);
  // hidden (B, T, d); tokens and targets Int64 (B, T), tokens[b, i] the input at position i (what the
  // pointer copies), targets the next tokens; logits (B, T, V). ShapeError naming the shapes otherwise;
  // IndexError for a target (or, in log_distribution, a token) outside [0, V).
  PointerSentinelOutput forward(const Tensor& hidden, const Tensor& tokens, const Tensor& logits,
                                const Tensor& targets);
  // The mixture's log-probabilities over the vocabulary at every position, (B, T, V): for decoding.
  Tensor log_distribution(const Tensor& hidden, const Tensor& tokens, const Tensor& logits);

  const PointerSentinelOptions& options() const { return options_; }

 private:
  // log a_t: (B, T, T + 1), the sentinel last; positions where `shown` (Bool (T, T + 1)) is false,
  // those outside the window, at -inf.
  Tensor log_attention(const Tensor& hidden, const Tensor& shown);
  void check(const Tensor& hidden, const Tensor& tokens, const Tensor& logits) const;

  PointerSentinelOptions options_;
  Linear query_{nullptr};
  Tensor sentinel_;
};
TAPEGRAD_MODULE(PointerSentinel);

// The paper's training loss: the mean over positions of -log p(y) - log(g + the pointer's weight on y).
Tensor pointer_sentinel_loss(const PointerSentinelOutput& out);

// A LanguageModel with a pointer sentinel on top, for nn::generate and nn::beam_search: each step
// runs the model over the last max_len tokens of every row (no cache: the pointer reads the whole
// window) and returns the mixture's log-probabilities of the next token. Under no-grad, in eval
// mode while decoding.
class PointerSentinelDecoder : public Decoder {
 public:
  PointerSentinelDecoder(LanguageModel model, PointerSentinel pointer)
      : model_(std::move(model)), pointer_(std::move(pointer)) {}
  Tensor start(const Tensor& prompt) override;
  Tensor step(const Tensor& tokens) override;
  void reorder(const Tensor& rows) override;

 private:
  Tensor next();  // (R, V) at the last position of the window

  LanguageModel model_;
  PointerSentinel pointer_;
  Tensor sequences_;  // (R, T) every token so far
};

}  // namespace tapegrad::nn
