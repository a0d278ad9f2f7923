// GloVe: the co-occurrence counts and the weighted least-squares fit. See glove.h.

#include "examples/word2vec/glove.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <string>
#include <unordered_map>

#include "tapegrad/optim/optim.h"

namespace tapegrad::examples::word2vec {

Cooccurrences count_cooccurrences(const std::vector<std::vector<std::int64_t>>& sentences, std::int64_t vocab_size,
                                  std::int64_t window) {
  if (window < 1) throw ValueError(message("count_cooccurrences: window must be at least 1, got ", window));
  // Keyed by row * vocab_size + col, which also orders the entries by (row, col).
  std::unordered_map<std::int64_t, double> counts;
  for (const std::vector<std::int64_t>& sentence : sentences) {
    for (std::int64_t id : sentence)
      if (id < 0 || id >= vocab_size)
        throw ValueError(message("count_cooccurrences: word id ", id, " outside the vocabulary of ", vocab_size));
    const auto n = static_cast<std::int64_t>(sentence.size());
    for (std::int64_t i = 0; i < n; ++i) {
      for (std::int64_t j = i + 1; j < std::min(n, i + window + 1); ++j) {
        const double weight = 1.0 / static_cast<double>(j - i);
        const std::int64_t a = sentence[static_cast<std::size_t>(i)], b = sentence[static_cast<std::size_t>(j)];
        counts[a * vocab_size + b] += weight;
        counts[b * vocab_size + a] += weight;
      }
    }
  }
  std::vector<std::int64_t> keys;
  keys.reserve(counts.size());
  for (const auto& entry : counts) keys.push_back(entry.first);
  std::sort(keys.begin(), keys.end());
  Cooccurrences x;
  x.rows.reserve(keys.size());
  x.cols.reserve(keys.size());
  x.counts.reserve(keys.size());
  for (std::int64_t key : keys) {
    x.rows.push_back(key / vocab_size);
    x.cols.push_back(key % vocab_size);
    x.counts.push_back(counts[key]);
  }
  return x;
}

namespace {

void validate(const Cooccurrences& x, std::int64_t vocab_size, const GloveOptions& o) {
  auto require = [](bool ok, const std::string& message) {
    if (!ok) throw ValueError("train_glove: " + message);
  };
  require(o.dim >= 1 && o.epochs >= 1 && o.batch_size >= 1,
          "dim, epochs and batch_size must be at least 1, got " + std::to_string(o.dim) + ", " +
              std::to_string(o.epochs) + " and " + std::to_string(o.batch_size));
  require(o.x_max > 0 && o.alpha > 0 && o.lr > 0, "x_max, alpha and lr must be above 0, got " + format_number(o.x_max) +
                                                      ", " + format_number(o.alpha) + " and " + format_number(o.lr));
  require(x.size() > 0 && vocab_size > 0, "no co-occurrences to fit");
}

// A (rows, cols) table drawn uniform in [-0.5, 0.5] / dim, a leaf.
Tensor glove_table(std::int64_t rows, std::int64_t cols, std::int64_t dim, Generator& gen) {
  const double half = 0.5 / static_cast<double>(dim);
  return uniform({rows, cols}, -half, half, gen).requires_grad_();
}

}  // namespace

Word2VecResult train_glove(const Cooccurrences& x, std::int64_t vocab_size, const GloveOptions& options,
                           const Word2VecCallbacks& callbacks, const DataParallel& parallel) {
  validate(x, vocab_size, options);
  Generator gen(options.seed);
  const std::int64_t d = options.dim;
  const Tensor words = glove_table(vocab_size, d, d, gen), contexts = glove_table(vocab_size, d, d, gen);
  const Tensor word_bias = glove_table(vocab_size, 1, d, gen), context_bias = glove_table(vocab_size, 1, d, gen);
  const TensorList leaves = {words, contexts, word_bias, context_bias};
  optim::Adagrad optimizer(leaves, optim::AdagradOptions(options.lr).initial_accumulator_value(1.0));

  // Each pair's weight f(X_ij) and target log X_ij, fixed for the whole run.
  std::vector<float> weights(x.counts.size()), targets(x.counts.size());
  for (std::size_t k = 0; k < x.counts.size(); ++k) {
    weights[k] = static_cast<float>(std::min(1.0, std::pow(x.counts[k] / options.x_max, options.alpha)));
    targets[k] = static_cast<float>(std::log(x.counts[k]));
  }

  Word2VecResult result;
  std::vector<std::int64_t> order(x.counts.size());
  std::iota(order.begin(), order.end(), std::int64_t{0});
  std::vector<std::int64_t> rows, cols;
  std::vector<float> batch_weights, batch_targets;
  // Half the weighted squared error of the pairs in rows/cols, summed, backpropagated into the
  // tables' row-sparse gradients.
  const auto fit = [&] {
    const auto b = static_cast<std::int64_t>(rows.size());
    const Tensor i = from_vector(rows, {b, 1}), j = from_vector(cols, {b, 1});
    // w_i . c_j as one gathered product: the rows of `words` at i dotted with the context rows.
    const Tensor context = embedding(contexts, j.reshape({b}), std::nullopt, /*sparse=*/true);  // (B, d)
    const Tensor dot = embedding_dot(words, i, context, /*sparse=*/true);                       // (B, 1)
    const Tensor bias = embedding(word_bias, i, std::nullopt, true).reshape({b, 1}) +
                        embedding(context_bias, j, std::nullopt, true).reshape({b, 1});
    const Tensor diff = dot + bias - from_vector(batch_targets, {b, 1});
    const Tensor loss = sum(from_vector(batch_weights, {b, 1}) * diff * diff) * 0.5;
    loss.backward();
    return loss.item();
  };
  double log_loss = 0.0;
  std::int64_t log_pairs = 0;
  const auto start = std::chrono::steady_clock::now();
  const auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  for (std::int64_t epoch = 0; epoch < options.epochs; ++epoch) {
    gen.shuffle(order);
    double epoch_loss = 0.0;
    for (std::size_t first = 0; first < order.size(); first += static_cast<std::size_t>(options.batch_size)) {
      const std::size_t last = std::min(order.size(), first + static_cast<std::size_t>(options.batch_size));
      // This process's part of the batch (the whole batch for one process).
      const auto part = [&](int rank) {
        return first + (last - first) * static_cast<std::size_t>(rank) / static_cast<std::size_t>(parallel.size());
      };
      rows.clear();
      cols.clear();
      batch_weights.clear();
      batch_targets.clear();
      for (std::size_t k = part(parallel.rank()); k < part(parallel.rank() + 1); ++k) {
        const auto pair = static_cast<std::size_t>(order[k]);
        rows.push_back(x.rows[pair]);
        cols.push_back(x.cols[pair]);
        batch_weights.push_back(weights[pair]);
        batch_targets.push_back(targets[pair]);
      }
      const Tensor batch_loss = from_vector(std::vector<double>{rows.empty() ? 0.0 : fit()}, {1});
      parallel.gather_sparse_grads(leaves);
      optimizer.step();
      optimizer.zero_grad(true);
      parallel.all_reduce_sum(batch_loss);  // the parts' losses: the batch's
      const double loss = batch_loss.item();
      const auto pairs = static_cast<std::int64_t>(last - first);
      epoch_loss += loss;
      log_loss += loss;
      log_pairs += pairs;
      result.words += pairs;
      ++result.steps;
      if (callbacks.log_every > 0 && result.steps % callbacks.log_every == 0) {
        const double t = seconds();
        if (callbacks.on_log)
          callbacks.on_log({result.steps, result.words, options.lr, log_loss / static_cast<double>(log_pairs), t,
                            static_cast<double>(result.words) / t});
        log_loss = 0.0;
        log_pairs = 0;
      }
    }
    result.epoch_losses.push_back(epoch_loss / static_cast<double>(x.size()));
    if (callbacks.on_epoch)
      callbacks.on_epoch(epoch + 1, result.epoch_losses.back(), static_cast<double>(result.words) / seconds());
  }
  result.seconds = seconds();
  result.words_per_second = static_cast<double>(result.words) / result.seconds;
  NoGradGuard no_grad;
  result.vectors = (words + contexts).detach();
  return result;
}

}  // namespace tapegrad::examples::word2vec
