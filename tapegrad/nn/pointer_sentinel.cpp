#include "tapegrad/nn/pointer_sentinel.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace tapegrad::nn {

namespace {

constexpr double kMinusInfinity = -std::numeric_limits<double>::infinity();

// Bool (T, T + 1): position t may point at i (t - window < i <= t); the sentinel column is always on.
Tensor visible(std::int64_t t_len, std::int64_t window) {
  std::vector<bool> on(static_cast<std::size_t>(t_len * (t_len + 1)), false);
  for (std::int64_t t = 0; t < t_len; ++t) {
    for (std::int64_t i = std::max<std::int64_t>(0, t - window + 1); i <= t; ++i)
      on[static_cast<std::size_t>(t * (t_len + 1) + i)] = true;
    on[static_cast<std::size_t>(t * (t_len + 1) + t_len)] = true;
  }
  return from_vector(on, {t_len, t_len + 1});
}

// IndexError naming `what` for the first id outside the logits' vocabulary [0, vocab).
void check_in_vocabulary(const Tensor& ids, std::int64_t vocab, const char* what) {
  const std::vector<std::int64_t> values = ids.to_vector<std::int64_t>();
  for (std::size_t i = 0; i < values.size(); ++i)
    if (values[i] < 0 || values[i] >= vocab)
      throw IndexError(message("PointerSentinel: ", what, " ", values[i], " at flat index ", i,
                               " is outside the logits' vocabulary [0, ", vocab, ")"));
}

}  // namespace

PointerSentinelImpl::PointerSentinelImpl(const PointerSentinelOptions& options) : options_(options) {
  if (options.d_model() <= 0 || options.window() <= 0)
    throw ValueError(message("PointerSentinel: d_model and window must be positive, got ", options.d_model(), " and ",
                             options.window()));
  Generator& gen = generator_or_default(options.generator());
  options_.generator(nullptr);  // not kept: it need not outlive the construction
  query_ = register_module("query", Linear(LinearOptions(options.d_model(), options.d_model()).generator(&gen)));
  const double bound = 1.0 / std::sqrt(static_cast<double>(options.d_model()));
  sentinel_ = register_parameter("sentinel", uniform({options.d_model()}, -bound, bound, gen));
}

void PointerSentinelImpl::check(const Tensor& hidden, const Tensor& tokens, const Tensor& logits) const {
  const bool ok = hidden.dim() == 3 && hidden.shape()[2] == options_.d_model() && tokens.dim() == 2 &&
                  tokens.dtype() == kInt64 && tokens.shape()[0] == hidden.shape()[0] &&
                  tokens.shape()[1] == hidden.shape()[1] && logits.dim() == 3 &&
                  logits.shape()[0] == hidden.shape()[0] && logits.shape()[1] == hidden.shape()[1];
  if (!ok)
    throw ShapeError(message("PointerSentinel: expected hidden (B, T, ", options_.d_model(),
                             "), Int64 tokens (B, T) and logits (B, T, V), got ", hidden.shape().str(), ", ",
                             dtype_name(tokens.dtype()), " ", tokens.shape().str(), " and ", logits.shape().str()));
}

Tensor PointerSentinelImpl::log_attention(const Tensor& hidden, const Tensor& shown) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(options_.d_model()));
  const Tensor q = tanh(query_(hidden));                              // (B, T, d)
  const Tensor pointer = matmul(q, hidden.transpose(1, 2)) * scale;   // (B, T, T)
  const Tensor sentinel = matmul(q, sentinel_.unsqueeze(1)) * scale;  // (B, T, 1)
  const Tensor scores = concat({pointer, sentinel}, 2);               // (B, T, T + 1)
  return log_softmax(masked_fill(scores, logical_not(shown), kMinusInfinity), -1);
}

PointerSentinelOutput PointerSentinelImpl::forward(const Tensor& hidden, const Tensor& tokens, const Tensor& logits,
                                                   const Tensor& targets) {
  check(hidden, tokens, logits);
  if (targets.shape() != tokens.shape() || targets.dtype() != kInt64)
    throw ShapeError("PointerSentinel: expected Int64 targets " + tokens.shape().str() + " like the tokens, got " +
                     dtype_name(targets.dtype()) + " " + targets.shape().str());
  check_in_vocabulary(targets, logits.shape()[2], "target");
  const std::int64_t b = hidden.shape()[0], t_len = hidden.shape()[1];
  const Tensor shown = visible(t_len, options_.window());
  const Tensor log_a = log_attention(hidden, shown);  // (B, T, T + 1)
  // Where the target is: the visible positions holding it, and the sentinel.
  const Tensor at_target =
      concat({eq(tokens.unsqueeze(1).expand({b, t_len, t_len}), targets.unsqueeze(2)), ones({b, t_len, 1}, kBool)}, 2);
  const Tensor hit = logical_and(at_target, shown);
  // The sentinel's term carries the vocabulary's log-probability of the target.
  const Tensor vocab = gather(log_softmax(logits, -1), 2, targets.unsqueeze(2));  // (B, T, 1)
  const Tensor with_vocab = concat({log_a.narrow(2, 0, t_len), log_a.narrow(2, t_len, 1) + vocab}, 2);
  PointerSentinelOutput out;
  out.log_probs = logsumexp(where(hit, with_vocab, kMinusInfinity), {2});
  out.pointer_log_mass = logsumexp(where(hit, log_a, kMinusInfinity), {2});
  {
    const NoGradGuard no_grad;
    const Tensor a = exp(log_a);
    out.gate = a.select(2, t_len);
    out.pointer_probs = where(hit, a, 0.0).narrow(2, 0, t_len).sum({2});
  }
  return out;
}

Tensor PointerSentinelImpl::log_distribution(const Tensor& hidden, const Tensor& tokens, const Tensor& logits) {
  check(hidden, tokens, logits);
  const std::int64_t b = hidden.shape()[0], t_len = hidden.shape()[1], v = logits.shape()[2];
  check_in_vocabulary(tokens, v, "token");  // each copies its attention to its own column
  const Tensor a = exp(log_attention(hidden, visible(t_len, options_.window())));  // (B, T, T + 1)
  const Tensor vocab = softmax(logits, -1) * a.narrow(2, t_len, 1);
  const Tensor copied = scatter_add(zeros({b, t_len, v}, logits.dtype()), 2,
                                    tokens.unsqueeze(1).expand({b, t_len, t_len}), a.narrow(2, 0, t_len));
  return log(vocab + copied);
}

Tensor pointer_sentinel_loss(const PointerSentinelOutput& out) {
  return -(out.log_probs + out.pointer_log_mass).mean();
}

Tensor PointerSentinelDecoder::start(const Tensor& prompt) {
  model_->eval();
  pointer_->eval();
  sequences_ = prompt;
  return next();
}

Tensor PointerSentinelDecoder::step(const Tensor& tokens) {
  sequences_ = concat({sequences_, tokens}, 1);
  return next();
}

void PointerSentinelDecoder::reorder(const Tensor& rows) { sequences_ = index_select(sequences_, 0, rows); }

Tensor PointerSentinelDecoder::next() {
  const NoGradGuard no_grad;
  const std::int64_t len = sequences_.shape()[1], max_len = model_->options().max_len();
  const Tensor window = len > max_len ? sequences_.narrow(1, len - max_len, max_len) : sequences_;
  const Tensor hidden = model_->hidden(window);
  return pointer_->log_distribution(hidden, window, model_->logits(hidden)).select(1, -1);
}

}  // namespace tapegrad::nn
