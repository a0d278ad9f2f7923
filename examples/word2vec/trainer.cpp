// word2vec training: the shards' batches, the two tables and their SGD steps. See trainer.h.

#include "examples/word2vec/trainer.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <unordered_map>

#include "tapegrad/nn/nn.h"
#include "tapegrad/optim/optim.h"

namespace tapegrad::examples::word2vec {

namespace {

// Row b the mean of table's rows bags[b] (zeros for an empty bag), without gradient.
Tensor mean_of_bags(const Tensor& table, const std::vector<std::vector<std::int64_t>>& bags) {
  const NoGradGuard no_grad;
  std::vector<std::int64_t> rows, offsets;
  for (const std::vector<std::int64_t>& b : bags) {
    offsets.push_back(static_cast<std::int64_t>(rows.size()));
    rows.insert(rows.end(), b.begin(), b.end());
  }
  return nn::embedding_bag(table, from_vector(rows, {static_cast<std::int64_t>(rows.size())}),
                           from_vector(offsets, {static_cast<std::int64_t>(bags.size())}), nn::BagMode::Mean);
}

// A shard's examples: what predicts and the word predicted. What predicts is the center word
// (skip-gram), or for CBOW a bag of input rows per example (its context words' rows, and their
// n-grams' rows with subwords), the bags back to back in `inputs`, example i's from offsets[i].
struct Batch {
  std::vector<std::int64_t> inputs;   // skip-gram: (B) centers; CBOW: the bags
  std::vector<std::int64_t> offsets;  // CBOW: (B)
  std::vector<std::int64_t> targets;  // (B)
  std::vector<float> inverse_counts;  // CBOW: 1 / the rows averaged per example
  std::int64_t size() const { return static_cast<std::int64_t>(targets.size()); }
  void clear() {
    inputs.clear();
    offsets.clear();
    targets.clear();
    inverse_counts.clear();
  }
  // Moves the examples from `first` on to the end of `rest`, in order.
  void split_off(std::int64_t first, Batch& rest) {
    const auto move_tail = [](auto& from, auto& to, std::size_t at) {
      to.insert(to.end(), from.begin() + static_cast<std::ptrdiff_t>(at), from.end());
      from.resize(at);
    };
    const auto at = static_cast<std::size_t>(first);
    if (offsets.empty()) {
      move_tail(inputs, rest.inputs, at);
    } else {
      const std::int64_t from = offsets[at], base = static_cast<std::int64_t>(rest.inputs.size());
      for (std::size_t i = at; i < offsets.size(); ++i) rest.offsets.push_back(offsets[i] - from + base);
      offsets.resize(at);
      move_tail(inputs, rest.inputs, static_cast<std::size_t>(from));
    }
    move_tail(targets, rest.targets, at);
    if (!inverse_counts.empty()) move_tail(inverse_counts, rest.inverse_counts, at);
  }
};

// What a step's forward reads besides the weights, made from a shard's batch before the step
// (Word2Vec::prepare): an epoch's first before its first step, the others while the previous
// step's update runs.
struct StepInputs {
  // Skip-gram without subwords: the centers (B). Otherwise the bags of input rows: `rows` summed per
  // bag (bags starting at `starts`), times `scale` (bags, 1) for their means; skip-gram with subwords
  // has a bag per distinct center, `pick` (B) giving each example's.
  Tensor centers;
  Tensor rows, scale, pick;
  std::vector<std::int64_t> starts;
  // The output rows each example meets (B, L), their labels and, for hierarchical softmax, the
  // weights of the path entries (0 for the padding).
  Tensor outputs, labels, weights;
};

// One worker's share of the corpus: a contiguous run of the sentences, read in order each epoch,
// its own generator (subsampling, windows, noise words), and its own leaves on the two tables:
// tensors sharing the tables' storage, so the shard's backward writes its row-sparse gradients
// there and no other shard's.
struct Shard {
  std::size_t begin = 0, end = 0, next = 0;  // sentences [begin, end); the next one to read
  Generator gen;
  Batch pending;              // examples made and not yet in a step
  Batch batch;                // this step's
  StepInputs step;            // this step's, made from batch
  std::int64_t words = 0;     // corpus words read so far, all epochs (up to this step's batch)
  std::int64_t examples = 0;  // this step's examples
  Tensor input, output;
  Tensor noise_labels;  // negative sampling: (B, 1 + negative), 1 for the target
  double loss = 0.0;    // this step's, summed
};

class Word2Vec {
 public:
  Word2Vec(const Word2VecOptions& c, const Vocabulary& vocab, Generator& gen)
      : c_(c),
        vocab_size_(vocab.size()),
        cbow_(c.model == "cbow"),
        hs_(c.loss == "hs"),
        subwords_(c.subwords()),
        subsample_(vocab, c.sample),
        bags_(input_bags(vocab, c)),
        noise_(noise_distribution(vocab)),
        tree_(nn::huffman_tree(vocab.counts)),
        // Subwords add the n-grams' rows.
        input_(nn::EmbeddingOptions(vocab.size() + (subwords_ ? c.buckets : 0), c.dim)
                   .init(nn::EmbeddingInit::Uniform)
                   .sparse(true)
                   .generator(&gen)),
        // Hierarchical softmax: a row per inner node and a padding row after them.
        output_(nn::EmbeddingOptions(hs_ ? std::max<std::int64_t>(vocab.size() - 1, 1) + 1 : vocab.size(), c.dim)
                    .init(nn::EmbeddingInit::Zeros)
                    .sparse(true)) {}

  bool cbow() const { return cbow_; }
  std::vector<std::int64_t> subsample(const std::vector<std::int64_t>& sentence, Generator& gen) const {
    return subsample_(sentence, gen);
  }
  bool subwords() const { return subwords_; }
  // Hierarchical softmax: the output table's padding row, after the inner nodes' rows.
  std::int64_t padding_node() const { return std::max<std::int64_t>(vocab_size_ - 1, 1); }
  // Word id's input rows: itself, and its n-grams with subwords (CBOW or subwords only).
  const std::vector<std::int64_t>& bag(std::int64_t id) const { return bags_[static_cast<std::size_t>(id)]; }
  const Tensor& input_table() const { return input_->weight(); }
  const Tensor& output_table() const { return output_->weight(); }
  // The input vectors, one per vocabulary word; with subwords the mean of each word's bag.
  Tensor vectors() const {
    if (!subwords_) return input_->weight().narrow(0, 0, vocab_size_).detach();
    return mean_of_bags(input_->weight(), bags_);
  }
  // The n-grams' rows (subwords only).
  Tensor ngram_rows() const { return input_->weight().narrow(0, vocab_size_, c_.buckets).detach(); }

  // The shard's step inputs from its batch: all of the step that reads no weights (and the noise
  // words drawn), so it can run while the previous step's update does.
  void prepare(Shard& shard) const {
    const Batch& batch = shard.batch;
    const std::int64_t b = batch.size();
    StepInputs& step = shard.step;
    step = StepInputs();
    if (b == 0) return;
    if (cbow_ || subwords_) {
      prepare_bags(batch, step);
    } else {
      step.centers = from_vector(batch.inputs, {b});
    }
    if (hs_) {
      // Paths are padded to the longest with the padding row, which embedding_dot skips and whose
      // entries weigh 0.
      const nn::HuffmanPaths paths = tree_.paths(from_vector(batch.targets, {b}), padding_node());
      step.outputs = paths.nodes;
      step.labels = 1.0 - paths.codes;
      step.weights = paths.mask.to(step.labels.dtype());
    } else {
      // Column 0 the target (label 1), then the noise words (label 0).
      step.outputs = noise_words(batch.targets, shard.gen);
      step.labels = noise_labels(shard, b);
    }
  }

  // The shard's prepared step through the model and back: its gradients on the shard's leaves and
  // its summed loss in shard.loss. Touches nothing another shard uses, so shards run at once.
  void forward_backward(Shard& shard) const {
    const StepInputs& step = shard.step;
    shard.loss = 0.0;
    if (!step.outputs.defined()) return;  // an empty batch
    Tensor hidden;                        // (B, D)
    if (cbow_ || subwords_) {
      hidden = bag_hidden(shard.input, step);
    } else {
      hidden = embedding(shard.input, step.centers, std::nullopt, /*sparse=*/true);
    }
    // The scores of the output vectors each example meets, without gathering them (embedding_dot):
    // the losses of nn::hierarchical_softmax_loss and nn::negative_sampling_loss, written on scores.
    const Tensor scores = hs_ ? embedding_dot(shard.output, step.outputs, hidden, /*sparse=*/true, padding_node(),
                                              /*sum_repeated=*/true)
                              : embedding_dot(shard.output, step.outputs, hidden, /*sparse=*/true);
    const Tensor loss =
        nn::binary_cross_entropy_with_logits(scores, step.labels, nn::Reduction::Sum, Tensor(), step.weights);
    loss.backward();
    shard.loss = loss.item<double>();
  }

 private:
  // The bags of input rows of a batch: CBOW's as made, skip-gram's one per distinct center (its
  // examples share it), each center's taken once and picked for its examples.
  void prepare_bags(const Batch& batch, StepInputs& step) const {
    std::vector<std::int64_t> rows, pick;  // skip-gram's
    std::vector<float> inverse;
    if (cbow_) {
      step.starts = batch.offsets;
    } else {
      std::unordered_map<std::int64_t, std::int64_t> slot;  // center -> its bag
      for (const std::int64_t center : batch.inputs) {
        const auto [at, added] = slot.try_emplace(center, static_cast<std::int64_t>(step.starts.size()));
        pick.push_back(at->second);
        if (!added) continue;
        const std::vector<std::int64_t>& b = bag(center);
        step.starts.push_back(static_cast<std::int64_t>(rows.size()));
        rows.insert(rows.end(), b.begin(), b.end());
        inverse.push_back(1.0f / static_cast<float>(b.size()));
      }
      step.pick = from_vector(pick, {static_cast<std::int64_t>(pick.size())});
    }
    const std::vector<std::int64_t>& all_rows = cbow_ ? batch.inputs : rows;
    step.rows = from_vector(all_rows, {static_cast<std::int64_t>(all_rows.size())});
    step.scale =
        from_vector(cbow_ ? batch.inverse_counts : inverse, {static_cast<std::int64_t>(step.starts.size()), 1});
  }

  // The mean of each example's bag of input rows (B, D), each row receiving the mean's whole
  // gradient (not a 1/count share), as word2vec.c, gensim and fastText update them: the value of sum
  // times 1 / count, the gradient of sum.
  Tensor bag_hidden(const Tensor& input, const StepInputs& step) const {
    // A word is in the bag of every center within a window of it: one gradient row per distinct row.
    const Tensor sum = embedding_bag_sum(input, step.rows, step.starts, Tensor(), /*sparse=*/true,
                                         /*sum_repeated=*/true);  // (bags, D)
    const Tensor mean = custom_op(
        "word2vec_bag_mean", {sum, step.scale}, [](const TensorList& in) { return in[0] * in[1]; },
        [](const Tensor& grad, const TensorList& /*in*/, const Tensor& /*out*/) -> TensorList {
          return {grad, Tensor()};
        });
    if (cbow_) return mean;
    return index_select(mean, 0, step.pick);
  }

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

  const Tensor& noise_labels(Shard& shard, std::int64_t b) const {
    if (shard.noise_labels.defined() && shard.noise_labels.shape()[0] == b) return shard.noise_labels;
    std::vector<float> values(static_cast<std::size_t>(b * (c_.negative + 1)), 0.0f);
    for (std::int64_t i = 0; i < b; ++i) values[static_cast<std::size_t>(i * (c_.negative + 1))] = 1.0f;
    shard.noise_labels = from_vector(values, {b, c_.negative + 1});
    return shard.noise_labels;
  }

  // Each word's input rows for CBOW or subwords: its own, then with subwords its n-grams'
  // (vocab_size + bucket).
  static std::vector<std::vector<std::int64_t>> input_bags(const Vocabulary& vocab, const Word2VecOptions& c) {
    if (!c.subwords() && c.model != "cbow") return {};
    std::vector<std::vector<std::int64_t>> bags(vocab.words.size());
    for (std::size_t id = 0; id < bags.size(); ++id) bags[id].push_back(static_cast<std::int64_t>(id));
    if (!c.subwords()) return bags;
    const data::Subwords subwords(c.subword_options());
    for (std::size_t id = 0; id < bags.size(); ++id)
      for (const std::int64_t bucket : subwords.buckets(vocab.words[id])) bags[id].push_back(vocab.size() + bucket);
    return bags;
  }

  Word2VecOptions c_;
  std::int64_t vocab_size_;
  bool cbow_;
  bool hs_;
  bool subwords_;
  Subsampler subsample_;
  std::vector<std::vector<std::int64_t>> bags_;
  AliasTable noise_;
  nn::HuffmanTree tree_;
  nn::Embedding input_;
  nn::Embedding output_;
};

// Appends a sentence's CBOW examples to the batch: each example's bag holds the rows of every
// context word.
void add_bag_examples(const std::vector<std::int64_t>& kept, const Word2Vec& model, std::int64_t window, Generator& gen,
                      Batch& batch) {
  const std::int64_t n = static_cast<std::int64_t>(kept.size());
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t radius = 1 + static_cast<std::int64_t>(gen.randint(static_cast<std::uint64_t>(window)));
    const std::size_t start = batch.inputs.size();
    for (std::int64_t j = std::max<std::int64_t>(0, i - radius); j <= std::min(n - 1, i + radius); ++j) {
      if (j == i) continue;
      const std::int64_t word = kept[static_cast<std::size_t>(j)];
      if (!model.subwords()) {  // its own row alone
        batch.inputs.push_back(word);
        continue;
      }
      const std::vector<std::int64_t>& rows = model.bag(word);
      batch.inputs.insert(batch.inputs.end(), rows.begin(), rows.end());
    }
    if (batch.inputs.size() == start) continue;  // a one-word sentence predicts nothing
    batch.offsets.push_back(static_cast<std::int64_t>(start));
    batch.targets.push_back(kept[static_cast<std::size_t>(i)]);
    batch.inverse_counts.push_back(1.0f / static_cast<float>(batch.inputs.size() - start));
  }
}

// Appends a sentence's examples to the batch.
void add_examples(const std::vector<std::int64_t>& kept, const Word2Vec& model, std::int64_t window, Generator& gen,
                  Batch& batch) {
  if (model.cbow()) {
    add_bag_examples(kept, model, window, gen, batch);
    return;
  }
  for (const auto& [center, context] : context_pairs(kept, window, gen)) {
    batch.inputs.push_back(center);
    batch.targets.push_back(context);
  }
}

// Fills the shard's batch with its next batch_size examples (fewer at the end of its sentences),
// reading sentences as needed, and prepares the step's inputs from it.
void next_batch(Shard& shard, const std::vector<std::vector<std::int64_t>>& sentences, const Word2Vec& model,
                const Word2VecOptions& options, std::int64_t batch_size) {
  while (shard.pending.size() < batch_size && shard.next < shard.end) {
    const std::vector<std::int64_t>& sentence = sentences[shard.next++];
    shard.words += static_cast<std::int64_t>(sentence.size());
    add_examples(model.subsample(sentence, shard.gen), model, options.window, shard.gen, shard.pending);
  }
  shard.batch.clear();
  std::swap(shard.batch, shard.pending);
  if (shard.batch.size() > batch_size) shard.batch.split_off(batch_size, shard.pending);
  shard.examples = shard.batch.size();
  model.prepare(shard);
}

// Several processes: the words read, examples and loss of the shards [own_first, own_last) this
// process computed, summed over the processes, so that every process holds every shard's.
void share_statistics(std::vector<Shard>& shards, std::int64_t own_first, std::int64_t own_last,
                      const DataParallel& parallel) {
  const auto n = static_cast<std::int64_t>(shards.size());
  Tensor stats = zeros({n, 3}, kFloat64);
  double* values = stats.data_ptr<double>();
  for (std::int64_t s = own_first; s < own_last; ++s) {
    const Shard& shard = shards[static_cast<std::size_t>(s)];
    values[3 * s] = static_cast<double>(shard.words);
    values[3 * s + 1] = static_cast<double>(shard.examples);
    values[3 * s + 2] = shard.loss;
  }
  parallel.all_reduce_sum(stats);
  for (std::int64_t s = 0; s < n; ++s) {
    Shard& shard = shards[static_cast<std::size_t>(s)];
    shard.words = static_cast<std::int64_t>(values[3 * s]);
    shard.examples = static_cast<std::int64_t>(values[3 * s + 1]);
    shard.loss = values[3 * s + 2];
  }
}

void validate(const Word2VecOptions& o, int processes) {
  auto require = [](bool ok, const std::string& message) {
    if (!ok) throw ValueError("train_word2vec: " + message);
  };
  require(o.model == "skipgram" || o.model == "cbow",
          "model must be \"skipgram\" or \"cbow\", got \"" + o.model + "\"");
  require(o.loss == "ns" || o.loss == "hs", "loss must be \"ns\" or \"hs\", got \"" + o.loss + "\"");
  require(o.dim >= 1 && o.window >= 1 && o.negative >= 1 && o.epochs >= 1 && o.shards >= 1,
          "dim, window, negative, epochs and shards must be at least 1, got " + std::to_string(o.dim) + ", " +
              std::to_string(o.window) + ", " + std::to_string(o.negative) + ", " + std::to_string(o.epochs) + " and " +
              std::to_string(o.shards));
  if (o.subwords()) {
    try {
      const data::Subwords check(o.subword_options());
    } catch (const ValueError& e) {
      require(false, std::string("subwords: ") + e.what());
    }
  }
  require(o.shards % processes == 0, "shards must be a multiple of the processes, got " + std::to_string(o.shards) +
                                         " shards on " + std::to_string(processes) + " processes");
  require(o.sample >= 0 && o.lr >= 0 && o.batch_size >= 0, "sample, lr and batch_size must be >= 0, got " +
                                                               format_number(o.sample) + ", " + format_number(o.lr) +
                                                               " and " + std::to_string(o.batch_size));
}

}  // namespace

Word2VecResult train_word2vec(const std::vector<std::vector<std::int64_t>>& sentences, const Vocabulary& vocab,
                              const Word2VecOptions& options, const Word2VecCallbacks& callbacks,
                              const DataParallel& parallel) {
  validate(options, parallel.size());
  const std::int64_t batch_size = options.batch();
  Generator gen(options.seed);
  const Word2Vec model(options, vocab, gen);
  std::vector<Shard> shards(static_cast<std::size_t>(options.shards));
  const std::int64_t own_first = options.shards * parallel.rank() / parallel.size();
  const std::int64_t own_last = options.shards * (parallel.rank() + 1) / parallel.size();
  TensorList leaves;
  for (std::size_t s = 0; s < shards.size(); ++s) {
    Shard& shard = shards[s];
    shard.begin = sentences.size() * s / shards.size();
    shard.end = sentences.size() * (s + 1) / shards.size();
    shard.gen = Generator(derive_seed(options.seed, s + 1));
    shard.input = model.input_table().detach().requires_grad_();
    shard.output = model.output_table().detach().requires_grad_();
    leaves.push_back(shard.input);
    leaves.push_back(shard.output);
  }
  // Every shard's gradients, each applied once to the storage all the leaves share.
  optim::SGD optimizer(leaves, optim::SGDOptions(options.start_lr()));
  const double lr0 = options.start_lr();
  const double all_words = static_cast<double>(options.epochs) * static_cast<double>(vocab.total);

  Word2VecResult result;
  double epoch_loss = 0.0, log_loss = 0.0;
  std::int64_t epoch_examples = 0, log_examples = 0;
  const auto start = std::chrono::steady_clock::now();
  const auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  // Words read up to the end of the current step's batches, all shards (read before the next
  // batches are made).
  const auto words_read = [&] {
    std::int64_t words = 0;
    for (const Shard& shard : shards) words += shard.words;
    return words;
  };
  // The next batches of the shards [lo, hi).
  const auto next_batches = [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t s = lo; s < hi; ++s)
      next_batch(shards[static_cast<std::size_t>(s)], sentences, model, options, batch_size);
  };
  for (std::int64_t epoch = 0; epoch < options.epochs; ++epoch) {
    epoch_loss = 0.0;
    epoch_examples = 0;
    std::int64_t words_before = words_read();  // before the step's batches
    for (Shard& shard : shards) shard.next = shard.begin;
    next_batches(own_first, own_last);
    for (;;) {
      const double lr = lr0 * std::max(1.0 - static_cast<double>(words_before) / (all_words + 1.0), 1e-4);
      // Each shard's gradients, the shards in parallel (their ops run inline on their threads), all
      // computed from the same weights; then one SGD step with all of them, and beside it the next
      // batches, which read no weights.
      // Under several processes each computes its own shards, then every shard's words read,
      // examples and loss, and the rows of its gradients, reach every process.
      parallel_for(own_first, own_last, 1, [&](std::int64_t lo, std::int64_t hi) {
        for (std::int64_t s = lo; s < hi; ++s) model.forward_backward(shards[static_cast<std::size_t>(s)]);
      });
      if (parallel.size() > 1) share_statistics(shards, own_first, own_last, parallel);
      std::int64_t examples = 0;
      double loss = 0.0;
      for (const Shard& shard : shards) {
        examples += shard.examples;
        loss += shard.loss;
      }
      if (examples == 0) break;  // every shard has read its sentences
      parallel.gather_sparse_grads(leaves);
      optimizer.set_lr(0, lr);
      result.words = words_before = words_read();
      if (num_threads() <= 2) {
        // The step on one thread, the next batches on the other.
        parallel_for(0, 2, 1, [&](std::int64_t lo, std::int64_t hi) {
          for (std::int64_t task = lo; task < hi; ++task) {
            if (task == 0) {
              optimizer.step();
              optimizer.zero_grad(true);
            } else {
              next_batches(own_first, own_last);
            }
          }
        });
      } else {
        // More threads: the step split among them (by SGD), then the shards' next batches in parallel.
        optimizer.step();
        optimizer.zero_grad(true);
        parallel_for(own_first, own_last, 1, next_batches);
      }
      epoch_loss += loss;
      log_loss += loss;
      epoch_examples += examples;
      log_examples += examples;
      ++result.steps;
      if (callbacks.log_every > 0 && result.steps % callbacks.log_every == 0) {
        const double t = seconds();
        if (callbacks.on_log)
          callbacks.on_log({result.steps, result.words, lr, log_loss / static_cast<double>(log_examples), t,
                            static_cast<double>(result.words) / t});
        log_loss = 0.0;
        log_examples = 0;
      }
    }
    result.words = words_read();
    result.epoch_losses.push_back(epoch_loss / static_cast<double>(std::max<std::int64_t>(epoch_examples, 1)));
    if (callbacks.on_epoch)
      callbacks.on_epoch(epoch + 1, result.epoch_losses.back(), static_cast<double>(result.words) / seconds());
  }
  result.seconds = seconds();
  result.words_per_second = static_cast<double>(result.words) / result.seconds;
  result.vectors = model.vectors();
  if (model.subwords()) result.ngram_rows = model.ngram_rows();
  return result;
}

Tensor ngram_vectors(const Tensor& ngram_rows, const data::Subwords& subwords, const std::vector<std::string>& words) {
  if (!ngram_rows.defined() || ngram_rows.dim() != 2 || ngram_rows.shape()[0] != subwords.options().buckets())
    throw ValueError(message("ngram_vectors: expected the n-grams' rows of a model trained with subwords, (",
                             subwords.options().buckets(), ", dim), got ",
                             (ngram_rows.defined() ? ngram_rows.shape().str() : std::string("an undefined tensor"))));
  std::vector<std::vector<std::int64_t>> bags;
  for (const std::string& word : words) bags.push_back(subwords.buckets(word));
  return mean_of_bags(ngram_rows, bags);
}

}  // namespace tapegrad::examples::word2vec
