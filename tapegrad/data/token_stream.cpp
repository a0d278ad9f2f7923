#include "tapegrad/data/token_stream.h"

#include <algorithm>
#include <string>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/generator.h"

namespace tapegrad::data {

TokenStream::TokenStream(std::vector<std::int64_t> tokens, TokenStreamOptions options)
    : TokenStream(std::make_shared<const std::vector<std::int64_t>>(std::move(tokens)), options) {}

TokenStream::TokenStream(std::shared_ptr<const std::vector<std::int64_t>> tokens, TokenStreamOptions options)
    : tokens_(std::move(tokens)), options_(options) {
  if (!tokens_) throw ValueError("TokenStream: the token sequence is null");
  if (options_.batch_size() < 1 || options_.context() < 1)
    throw ValueError(message("TokenStream: batch_size and context must be >= 1, got ", options_.batch_size(), " and ",
                             options_.context()));
  if (size() - 1 < options_.context())  // not size() < context() + 1, which overflows for a context near INT64_MAX
    throw ValueError(message("TokenStream: a sequence of ", size(), " tokens is too short for one window of ",
                             options_.context(), " tokens and its targets (needs ",
                             static_cast<std::uint64_t>(options_.context()) + 1, ")"));
  // A batch is two (batch_size, context) tensors: their size bounded, their products free of overflow.
  constexpr std::int64_t kMaxBatchTokens = std::int64_t{1} << 32;
  if (options_.batch_size() > kMaxBatchTokens / options_.context())
    throw ValueError(message("TokenStream: batch_size ", options_.batch_size(), " x context ", options_.context(),
                             " is more than ", kMaxBatchTokens, " tokens a batch"));
}

std::int64_t TokenStream::batches_per_epoch() const {
  return std::max<std::int64_t>(1, (size() - 1) / (options_.batch_size() * options_.context()));
}

TokenBatch TokenStream::windows(const std::vector<std::int64_t>& starts) const {
  const std::int64_t t = options_.context();
  const std::int64_t last_start = size() - t - 1;
  const auto rows = static_cast<std::int64_t>(starts.size());
  std::vector<std::int64_t> input(static_cast<std::size_t>(rows * t)), target(input.size());
  const std::int64_t* ids = tokens_->data();
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t s = starts[static_cast<std::size_t>(r)];
    if (s < 0 || s > last_start)
      throw ValueError(message("TokenStream: window start ", s, " is outside [0, ", last_start, "] for ", size(),
                               " tokens and context ", t));
    std::copy(ids + s, ids + s + t, input.begin() + r * t);
    std::copy(ids + s + 1, ids + s + t + 1, target.begin() + r * t);
  }
  TokenBatch batch;
  batch.input = from_vector(input, {rows, t});
  batch.target = from_vector(target, {rows, t});
  batch.starts = starts;
  return batch;
}

TokenBatch TokenStream::batch_at(std::int64_t step) const {
  if (step < 0) throw ValueError(message("TokenStream::batch_at: step must be >= 0, got ", step));
  Generator gen(derive_seed(options_.seed(), static_cast<std::uint64_t>(step)));
  const auto choices = static_cast<std::uint64_t>(size() - options_.context());  // starts 0 .. N - T - 1
  std::vector<std::int64_t> starts(static_cast<std::size_t>(options_.batch_size()));
  for (std::int64_t& s : starts) s = static_cast<std::int64_t>(gen.randint(choices));
  return windows(starts);
}

std::int64_t TokenStream::eval_windows(std::int64_t max_windows) const {
  if (max_windows < 0) throw ValueError(message("TokenStream: max_windows must be >= 0, got ", max_windows));
  const std::int64_t all = (size() - 1) / options_.context();
  return max_windows > 0 ? std::min(all, max_windows) : all;
}

std::vector<TokenBatch> TokenStream::eval_batches(std::int64_t max_windows) const {
  const std::int64_t t = options_.context();
  const std::int64_t all = (size() - 1) / t;
  const std::int64_t count = eval_windows(max_windows);
  std::vector<std::int64_t> starts(static_cast<std::size_t>(count));
  // Window i of count is window floor(i * all / count) of all: every window when count == all.
  for (std::int64_t i = 0; i < count; ++i) starts[static_cast<std::size_t>(i)] = (i * all / count) * t;
  std::vector<TokenBatch> batches;
  for (std::int64_t first = 0; first < count; first += options_.batch_size()) {
    const std::int64_t end = std::min(count, first + options_.batch_size());
    batches.push_back(windows(std::vector<std::int64_t>(starts.begin() + first, starts.begin() + end)));
  }
  return batches;
}

}  // namespace tapegrad::data
