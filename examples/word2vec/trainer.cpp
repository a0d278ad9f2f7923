// word2vec training: the batches, the two tables and their SGD steps. See trainer.h.

#include "examples/word2vec/trainer.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "tapegrad/nn/nn.h"
#include "tapegrad/optim/optim.h"

namespace tapegrad::examples::word2vec {

namespace {

// One step's examples: what predicts (the center word, or the context words of a CBOW window,
// padded with `pad`) and the word predicted.
struct Batch {
  std::vector<std::int64_t> inputs;   // (B, width)
  std::vector<std::int64_t> targets;  // (B)
  std::vector<float> inverse_counts;  // CBOW: 1 / the context words per example
  std::int64_t size() const { return static_cast<std::int64_t>(targets.size()); }
  void clear() {
    inputs.clear();
    targets.clear();
    inverse_counts.clear();
  }
};

class Word2Vec {
 public:
  Word2Vec(const Word2VecOptions& c, const Vocabulary& vocab, Generator& gen)
      : c_(c),
        vocab_size_(vocab.size()),
        cbow_(c.model == "cbow"),
        hs_(c.loss == "hs"),
        width_(cbow_ ? 2 * c.window : 1),
        noise_(noise_distribution(vocab)),
        tree_(nn::huffman_tree(vocab.counts)),
        // CBOW pads its windows with an extra row, a zero constant.
        input_(nn::EmbeddingOptions(vocab.size() + (cbow_ ? 1 : 0), c.dim)
                   .init(nn::EmbeddingInit::Uniform)
                   .padding_idx(cbow_ ? std::optional<std::int64_t>(vocab.size()) : std::nullopt)
                   .sparse(true)
                   .generator(&gen)),
        output_(nn::EmbeddingOptions(hs_ ? std::max<std::int64_t>(vocab.size() - 1, 1) : vocab.size(), c.dim)
                    .init(nn::EmbeddingInit::Zeros)
                    .sparse(true)),
        optimizer_(TensorList{input_->weight(), output_->weight()}, optim::SGDOptions(c.start_lr())) {}

  std::int64_t width() const { return width_; }
  bool cbow() const { return cbow_; }
  std::int64_t pad() const { return vocab_size_; }
  // The input vectors, one per vocabulary word (CBOW's padding row left out).
  Tensor vectors() const { return input_->weight().narrow(0, 0, vocab_size_).detach(); }

  // One SGD step on a batch at learning rate lr; returns the batch's summed loss.
  double step(const Batch& batch, double lr, Generator& gen) {
    const std::int64_t b = batch.size();
    const Tensor targets = from_vector(batch.targets, {b});
    Tensor hidden;  // (B, D)
    if (cbow_) {
      // The mean of the context vectors, each of which then receives the mean's whole gradient (not
      // a 1/count share), as word2vec.c and gensim update them: the value of sum / count, the
      // gradient of sum (the second term is zero, with gradient 1 - 1/count).
      const Tensor sum = input_(from_vector(batch.inputs, {b, width_})).sum({1});  // (B, D)
      const Tensor inverse = from_vector(batch.inverse_counts, {b, 1});            // (B, 1)
      hidden = sum * inverse + (sum - sum.detach()) * (1.0 - inverse);
    } else {
      hidden = input_(from_vector(batch.inputs, {b}));
    }
    // The scores of the output vectors each example meets, without gathering them (embedding_dot):
    // the losses of nn::hierarchical_softmax_loss and nn::negative_sampling_loss, written on scores.
    Tensor loss;
    if (hs_) {
      const nn::HuffmanPaths paths = tree_.paths(targets);
      const Tensor scores = embedding_dot(output_->weight(), paths.nodes, hidden, /*sparse=*/true);  // (B, L)
      const Tensor per_node = nn::binary_cross_entropy_with_logits(scores, 1.0 - paths.codes, nn::Reduction::None);
      loss = where(paths.mask, per_node, 0.0).sum();
    } else {
      // Column 0 the target (label 1), then the noise words (label 0).
      const Tensor scores = embedding_dot(output_->weight(), noise_words(batch.targets, gen), hidden, true);
      loss = nn::binary_cross_entropy_with_logits(scores, labels(b), nn::Reduction::Sum);
    }
    optimizer_.set_lr(0, lr);
    loss.backward();
    optimizer_.step();
    optimizer_.zero_grad(true);
    return loss.item<double>();
  }

 private:
  // (B, 1 + negative): each target followed by its draws from the noise distribution, a draw
  // redrawn while it is the target (as word2vec.c skips such a draw).
  Tensor noise_words(const std::vector<std::int64_t>& targets, Generator& gen) const {
    const std::int64_t b = static_cast<std::int64_t>(targets.size()), k = c_.negative;
    std::vector<std::int64_t> words(static_cast<std::size_t>(b * (k + 1)));
    for (std::int64_t i = 0; i < b; ++i) {
      const std::int64_t target = targets[static_cast<std::size_t>(i)];
      words[static_cast<std::size_t>(i * (k + 1))] = target;
      for (std::int64_t j = 1; j <= k; ++j) {
        std::int64_t w = noise_.sample(gen);
        while (w == target && vocab_size_ > 1) w = noise_.sample(gen);
        words[static_cast<std::size_t>(i * (k + 1) + j)] = w;
      }
    }
    return from_vector(words, {b, k + 1});
  }

  // (B, 1 + negative): 1 for the target, 0 for the noise words.
  const Tensor& labels(std::int64_t b) {
    if (labels_.defined() && labels_.shape()[0] == b) return labels_;
    std::vector<float> values(static_cast<std::size_t>(b * (c_.negative + 1)), 0.0f);
    for (std::int64_t i = 0; i < b; ++i) values[static_cast<std::size_t>(i * (c_.negative + 1))] = 1.0f;
    labels_ = from_vector(values, {b, c_.negative + 1});
    return labels_;
  }

  Word2VecOptions c_;
  std::int64_t vocab_size_;
  bool cbow_;
  bool hs_;
  std::int64_t width_;
  AliasTable noise_;
  nn::HuffmanTree tree_;
  nn::Embedding input_;
  nn::Embedding output_;
  optim::SGD optimizer_;
  Tensor labels_;
};

// Appends a sentence's examples to the batch, calling flush whenever it is full.
template <class Flush>
void add_examples(const std::vector<std::int64_t>& kept, const Word2Vec& model, std::int64_t window,
                  std::int64_t batch_size, Generator& gen, Batch& batch, Flush&& flush) {
  const std::int64_t n = static_cast<std::int64_t>(kept.size());
  if (!model.cbow()) {
    for (const auto& [center, context] : context_pairs(kept, window, gen)) {
      batch.inputs.push_back(center);
      batch.targets.push_back(context);
      if (batch.size() == batch_size) flush();
    }
    return;
  }
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t radius = 1 + static_cast<std::int64_t>(gen.randint(static_cast<std::uint64_t>(window)));
    std::int64_t count = 0;
    for (std::int64_t j = std::max<std::int64_t>(0, i - radius); j <= std::min(n - 1, i + radius); ++j) {
      if (j == i) continue;
      batch.inputs.push_back(kept[static_cast<std::size_t>(j)]);
      ++count;
    }
    if (count == 0) continue;  // a one-word sentence predicts nothing
    batch.inputs.insert(batch.inputs.end(), static_cast<std::size_t>(model.width() - count), model.pad());
    batch.targets.push_back(kept[static_cast<std::size_t>(i)]);
    batch.inverse_counts.push_back(1.0f / static_cast<float>(count));
    if (batch.size() == batch_size) flush();
  }
}

void validate(const Word2VecOptions& o) {
  auto require = [](bool ok, const std::string& message) {
    if (!ok) throw ValueError("train_word2vec: " + message);
  };
  require(o.model == "skipgram" || o.model == "cbow",
          "model must be \"skipgram\" or \"cbow\", got \"" + o.model + "\"");
  require(o.loss == "ns" || o.loss == "hs", "loss must be \"ns\" or \"hs\", got \"" + o.loss + "\"");
  require(o.dim >= 1 && o.window >= 1 && o.negative >= 1 && o.epochs >= 1,
          "dim, window, negative and epochs must be at least 1, got " + std::to_string(o.dim) + ", " +
              std::to_string(o.window) + ", " + std::to_string(o.negative) + " and " + std::to_string(o.epochs));
  require(o.sample >= 0 && o.lr >= 0 && o.batch_size >= 0, "sample, lr and batch_size must be >= 0, got " +
                                                               format_number(o.sample) + ", " + format_number(o.lr) +
                                                               " and " + std::to_string(o.batch_size));
}

}  // namespace

Word2VecResult train_word2vec(const std::vector<std::vector<std::int64_t>>& sentences, const Vocabulary& vocab,
                              const Word2VecOptions& options, const Word2VecCallbacks& callbacks) {
  validate(options);
  const std::int64_t batch_size = options.batch();
  Generator gen(options.seed);
  Word2Vec model(options, vocab, gen);
  const double lr0 = options.start_lr();
  const double all_words = static_cast<double>(options.epochs) * static_cast<double>(vocab.total);

  Word2VecResult result;
  double epoch_loss = 0.0, log_loss = 0.0;
  std::int64_t epoch_examples = 0, log_examples = 0;
  Batch batch;
  const auto start = std::chrono::steady_clock::now();
  const auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  auto flush = [&] {
    if (batch.size() == 0) return;
    const double lr = lr0 * std::max(1.0 - static_cast<double>(result.words) / (all_words + 1.0), 1e-4);
    const double loss = model.step(batch, lr, gen);
    epoch_loss += loss;
    log_loss += loss;
    epoch_examples += batch.size();
    log_examples += batch.size();
    ++result.steps;
    if (callbacks.log_every > 0 && result.steps % callbacks.log_every == 0) {
      const double t = seconds();
      if (callbacks.on_log)
        callbacks.on_log({result.steps, result.words, lr, log_loss / static_cast<double>(log_examples), t,
                          static_cast<double>(result.words) / t});
      log_loss = 0.0;
      log_examples = 0;
    }
    batch.clear();
  };
  for (std::int64_t epoch = 0; epoch < options.epochs; ++epoch) {
    epoch_loss = 0.0;
    epoch_examples = 0;
    for (const std::vector<std::int64_t>& sentence : sentences) {
      result.words += static_cast<std::int64_t>(sentence.size());
      add_examples(subsample(sentence, vocab, options.sample, gen), model, options.window, batch_size, gen, batch,
                   flush);
    }
    flush();
    result.epoch_losses.push_back(epoch_loss / static_cast<double>(std::max<std::int64_t>(epoch_examples, 1)));
    if (callbacks.on_epoch)
      callbacks.on_epoch(epoch + 1, result.epoch_losses.back(), static_cast<double>(result.words) / seconds());
  }
  result.seconds = seconds();
  result.words_per_second = static_cast<double>(result.words) / result.seconds;
  result.vectors = model.vectors();
  return result;
}

}  // namespace tapegrad::examples::word2vec
