#pragma once
// A long token sequence (a book, a corpus) served as language-modelling windows: each training
// batch is B windows of T tokens at random offsets, with the targets shifted by one; evaluation
// reads the sequence as consecutive windows.
//
//   data::TokenStream train(std::move(train_ids), data::TokenStreamOptions().batch_size(16).context(128).seed(7));
//   data::TokenBatch b = train.batch_at(step);   // the same windows for the same step, on every run
//   Tensor loss = nn::cross_entropy(model(b.input).reshape({-1, vocab}), b.target.reshape({-1}));
//
// A batch is a pure function of (tokens, options, step), so a resumed run draws exactly the batches an
// uninterrupted one would, with no generator state to checkpoint.

#include <cstdint>
#include <memory>
#include <vector>

#include "tapegrad/autograd/arg.h"
#include "tapegrad/autograd/tensor.h"

namespace tapegrad::data {

struct TokenStreamOptions {
  TAPEGRAD_ARG(std::int64_t, batch_size) = 16;
  TAPEGRAD_ARG(std::int64_t, context) = 128;  // T, tokens per window
  TAPEGRAD_ARG(std::uint64_t, seed) = 0;      // with the step, decides a batch's offsets
};

struct TokenBatch {
  Tensor input;                      // (B, T) int64: tokens[s, s + T) for each window start s
  Tensor target;                     // (B, T) int64: tokens[s + 1, s + T + 1)
  std::vector<std::int64_t> starts;  // the window starts, one per row
  std::int64_t size() const { return static_cast<std::int64_t>(starts.size()); }
  std::int64_t tokens() const { return input.defined() ? input.numel() : 0; }
};

class TokenStream {
 public:
  // ValueError for batch_size or context below 1, or a sequence too short for one window (context + 1 tokens).
  TokenStream(std::vector<std::int64_t> tokens, TokenStreamOptions options);
  TokenStream(std::shared_ptr<const std::vector<std::int64_t>> tokens, TokenStreamOptions options);

  // Training batch of a (0-based) step: batch_size window starts drawn uniformly from [0, N - T - 1] by a
  // Generator seeded with derive_seed(seed, step). ValueError for step < 0.
  TokenBatch batch_at(std::int64_t step) const;

  // Evaluation: the sequence cut into consecutive windows of T tokens (the last < T targets are not
  // scored), or, with max_windows > 0 and more windows than that, max_windows of them spread evenly over
  // the sequence; in batches of batch_size rows (the last may be smaller), in sequence order.
  std::int64_t eval_windows(std::int64_t max_windows = 0) const;
  std::vector<TokenBatch> eval_batches(std::int64_t max_windows = 0) const;
  // Any windows, by start (ValueError for a start outside [0, N - T - 1]).
  TokenBatch windows(const std::vector<std::int64_t>& starts) const;

  std::int64_t size() const { return static_cast<std::int64_t>(tokens_->size()); }
  const std::vector<std::int64_t>& tokens() const { return *tokens_; }
  const TokenStreamOptions& options() const { return options_; }
  // Training windows per pass over the sequence: (N - 1) / (batch_size * T), at least 1 (for "epoch" figures).
  std::int64_t batches_per_epoch() const;

 private:
  std::shared_ptr<const std::vector<std::int64_t>> tokens_;
  TokenStreamOptions options_;
};

}  // namespace tapegrad::data
