// word2vec: word vectors trained on the King James Bible (Debian's bible-kjv-text, decoded by
// examples/common/kjv.h), as word2vec.c trains them, on tapegrad's tape.
//
//   corpus   each verse a sentence of data::word_tokenize's lowercase words; words seen fewer than
//            min_count times dropped; frequent words subsampled (keep probability sqrt(t/f) + t/f);
//            per center word a window radius uniform in [1, window] (examples/word2vec/corpus.h)
//   models   skip-gram (the center word's input vector predicts each context word) or CBOW (the
//            mean of the context's input vectors predicts the center word)
//   losses   negative sampling (negative noise words per example from count^0.75, an AliasTable)
//            or hierarchical softmax over a Huffman tree of the counts (nn::huffman_tree)
//   training batches of 256 examples (64 with hierarchical softmax); both tables are Embeddings
//            with row-sparse gradients, stepped by SGD at word2vec.c's learning rate (0.025
//            skip-gram, 0.05 CBOW), decayed linearly to 1e-4 of it over the words of all epochs. A
//            batch's gradients are summed, computed before any of its updates, so the nodes near the
//            root of the Huffman tree, on nearly every path, take a batch's updates at once: with
//            1024 examples hierarchical softmax diverged, with 256 CBOW's sometimes did early on
//
// Files (run_dir, default runs/word2vec/): config.json, corpus.txt (the tokenised verses it trained
// on, one per line: other tools train on the same input), metrics.jsonl, loss.svg, vectors.txt
// (word2vec text format, readable by gensim), summary.json. Prints nearest neighbours of the probe
// words and the analogies' answers.
//
// Usage: word2vec [--config FILE] [--key value ...]   (--help lists the keys)

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "examples/common/kjv.h"
#include "examples/common/run_dir.h"
#include "examples/word2vec/corpus.h"
#include "tapegrad/data/tokenizer.h"
#include "tapegrad/io/file.h"
#include "tapegrad/io/word2vec.h"
#include "tapegrad/nn/nn.h"
#include "tapegrad/optim/optim.h"

using namespace tapegrad;
using namespace tapegrad::examples::word2vec;
using examples::Config;
using examples::ConfigError;

namespace {

struct W2vConfig {
  std::int64_t seed = 0;
  std::string data = examples::kBibleDataPath;
  std::string model = "skipgram";
  std::string loss = "ns";
  std::int64_t dim = 100;
  std::int64_t window = 5;
  std::int64_t negative = 5;
  double sample = 1e-3;
  std::int64_t min_count = 5;
  std::int64_t epochs = 5;
  double lr = 0.0;
  std::int64_t batch_size = 0;
  std::int64_t threads = 2;
  std::int64_t log_every = 100;
  std::string probes = "god,king,water,bread,sword,wine";
  std::string analogies = "king:queen:man:woman,father:son:mother:daughter,brother:brethren:son:sons";
  std::string run_dir = "runs/word2vec";

  template <class F>
  static void fields(F& f) {
    using C = W2vConfig;
    f("seed", &C::seed, "seed of the initial vectors, subsampling, windows and noise words");
    f("data", &C::data, "bible.data of Debian's bible-kjv-text");
    f("model", &C::model, "skip-gram or continuous bag of words", {"skipgram", "cbow"});
    f("loss", &C::loss, "negative sampling or hierarchical softmax", {"ns", "hs"});
    f("dim", &C::dim, "vector size");
    f("window", &C::window, "largest window radius (each center draws one in [1, window])");
    f("negative", &C::negative, "noise words per example (ns)");
    f("sample", &C::sample, "subsampling threshold t (0: keep every word)");
    f("min_count", &C::min_count, "words seen fewer times are dropped");
    f("epochs", &C::epochs, "passes over the corpus");
    f("lr", &C::lr, "starting learning rate (0: word2vec.c's, 0.025 skip-gram and 0.05 CBOW)");
    f("batch_size", &C::batch_size,
      "examples per step: (center, context) pairs for skip-gram, centers for CBOW (0: 256 for ns, 64 for hs)");
    f("threads", &C::threads, "threads of tapegrad's pool");
    f("log_every", &C::log_every, "steps between metrics.jsonl lines");
    f("probes", &C::probes, "words whose nearest neighbours are printed, comma-separated");
    f("analogies", &C::analogies, "a:b:c:d, comma-separated: is d nearest to b - a + c?");
    f("run_dir", &C::run_dir, "where the run's files go");
  }
};
using C = W2vConfig;

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, separator))
    if (!item.empty()) out.push_back(item);
  return out;
}

void validate(const W2vConfig& c) {
  examples::require_positive("word2vec", c, &C::dim, &C::window, &C::negative, &C::min_count, &C::epochs, &C::threads,
                             &C::log_every);
  examples::require_non_negative("word2vec", c, &C::sample, &C::lr, &C::batch_size);
  for (const std::string& a : split(c.analogies, ','))
    examples::require(split(a, ':').size() == 4, "word2vec", "--analogies: expected a:b:c:d, got \"" + a + "\"");
}

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
  Word2Vec(const W2vConfig& c, const Vocabulary& vocab, Generator& gen)
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
        optimizer_(TensorList{input_->weight(), output_->weight()}, optim::SGDOptions(start_lr(c))) {}

  static double start_lr(const W2vConfig& c) { return c.lr > 0.0 ? c.lr : (c.model == "cbow" ? 0.05 : 0.025); }
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

  const W2vConfig& c_;
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

nlohmann::json neighbours(const Tensor& unit, const Vocabulary& vocab, const std::vector<std::string>& probes) {
  nlohmann::json out = nlohmann::json::object();
  for (const std::string& word : probes) {
    const std::int64_t id = vocab.id(word);
    if (id < 0) {
      std::cout << "  " << word << ": not in the vocabulary\n";
      continue;
    }
    const nn::Neighbors near = nn::nearest_neighbors(unit, unit.select(0, id).unsqueeze(0), 8,
                                                     from_vector(std::vector<std::int64_t>{id}, {1}));
    const std::vector<std::int64_t> rows = near.indices.to_vector<std::int64_t>();
    const std::vector<float> sims = near.similarities.to_vector<float>();
    std::cout << "  " << word << ":";
    nlohmann::json list = nlohmann::json::array();
    for (std::size_t k = 0; k < rows.size(); ++k) {
      const std::string& other = vocab.words[static_cast<std::size_t>(rows[k])];
      std::cout << (k == 0 ? " " : ", ") << other << " "
                << format_number(std::round(static_cast<double>(sims[k]) * 100) / 100);
      list.push_back({other, sims[k]});
    }
    std::cout << "\n";
    out[word] = list;
  }
  return out;
}

// 3CosAdd: the word nearest to b - a + c (unit vectors), a, b and c excluded.
nlohmann::json analogies(const Tensor& unit, const Vocabulary& vocab, const std::vector<std::string>& items) {
  nlohmann::json out = nlohmann::json::array();
  for (const std::string& item : items) {
    const std::vector<std::string> w = split(item, ':');
    std::vector<std::int64_t> ids;
    for (const std::string& word : w) ids.push_back(vocab.id(word));
    if (std::count(ids.begin(), ids.end(), -1) > 0) {
      std::cout << "  " << w[0] << " : " << w[1] << " :: " << w[2] << " : ? (a word is not in the vocabulary)\n";
      continue;
    }
    const Tensor query = unit.select(0, ids[1]) - unit.select(0, ids[0]) + unit.select(0, ids[2]);
    const nn::Neighbors near = nn::nearest_neighbors(unit, query.unsqueeze(0), 4);
    std::string answer;
    for (std::int64_t row : near.indices.to_vector<std::int64_t>()) {
      if (row == ids[0] || row == ids[1] || row == ids[2]) continue;
      answer = vocab.words[static_cast<std::size_t>(row)];
      break;
    }
    std::cout << "  " << w[0] << " : " << w[1] << " :: " << w[2] << " : " << answer
              << (answer == w[3] ? "  (expected)" : "  (expected " + w[3] + ")") << "\n";
    out.push_back({{"question", w[0] + ":" + w[1] + "::" + w[2] + ":?"}, {"expected", w[3]}, {"answer", answer}});
  }
  return out;
}

int run(const Config& config) {
  const W2vConfig c = examples::read_config<W2vConfig>(config);
  validate(c);
  set_num_threads(static_cast<int>(c.threads));
  examples::RunDir dir(c.run_dir);
  dir.clear_previous_run();
  dir.write_config(config);

  const examples::Bible bible = examples::load_bible(c.data);
  std::vector<std::vector<std::string>> sentences;
  std::string corpus_text;
  std::int64_t corpus_tokens = 0;
  for (const examples::BibleVerse& verse : bible.verses) {
    std::vector<std::string> words = data::word_tokenize(verse.text);
    if (words.empty()) continue;
    for (std::size_t i = 0; i < words.size(); ++i) corpus_text += (i == 0 ? "" : " ") + words[i];
    corpus_text += "\n";
    corpus_tokens += static_cast<std::int64_t>(words.size());
    sentences.push_back(std::move(words));
  }
  io::write_file_atomic(dir.file("corpus.txt"), corpus_text);
  const Vocabulary vocab = build_vocabulary(sentences, c.min_count);
  const std::vector<std::vector<std::int64_t>> encoded = vocab.encode(sentences);
  std::cout << "word2vec: " << c.model << " with " << (c.loss == "ns" ? "negative sampling" : "hierarchical softmax")
            << ", " << bible.verses.size() << " verses, " << corpus_tokens << " tokens, vocabulary " << vocab.size()
            << " (min_count " << c.min_count << ", " << vocab.total << " tokens kept)\n";

  const std::int64_t batch_size = c.batch_size > 0 ? c.batch_size : (c.loss == "hs" ? 64 : 256);
  Generator gen(static_cast<std::uint64_t>(c.seed));
  Word2Vec model(c, vocab, gen);
  const double lr0 = Word2Vec::start_lr(c);
  const double all_words = static_cast<double>(c.epochs) * static_cast<double>(vocab.total);

  std::string metrics;
  std::int64_t steps = 0, words_done = 0;
  double epoch_loss = 0.0, log_loss = 0.0;
  std::int64_t epoch_examples = 0, log_examples = 0;
  std::vector<double> epoch_losses;
  Batch batch;
  const auto start = std::chrono::steady_clock::now();
  const auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  auto flush = [&] {
    if (batch.size() == 0) return;
    const double lr = lr0 * std::max(1.0 - static_cast<double>(words_done) / (all_words + 1.0), 1e-4);
    const double loss = model.step(batch, lr, gen);
    epoch_loss += loss;
    log_loss += loss;
    epoch_examples += batch.size();
    log_examples += batch.size();
    ++steps;
    if (steps % c.log_every == 0) {
      const double t = seconds();
      const nlohmann::json line = {{"step", steps}, {"words", words_done},
                                   {"lr", lr},      {"loss", log_loss / static_cast<double>(log_examples)},
                                   {"seconds", t},  {"words_per_second", static_cast<double>(words_done) / t}};
      metrics += line.dump() + "\n";
      log_loss = 0.0;
      log_examples = 0;
    }
    batch.clear();
  };
  for (std::int64_t epoch = 0; epoch < c.epochs; ++epoch) {
    epoch_loss = 0.0;
    epoch_examples = 0;
    for (const std::vector<std::int64_t>& sentence : encoded) {
      words_done += static_cast<std::int64_t>(sentence.size());
      add_examples(subsample(sentence, vocab, c.sample, gen), model, c.window, batch_size, gen, batch, flush);
    }
    flush();
    epoch_losses.push_back(epoch_loss / static_cast<double>(std::max<std::int64_t>(epoch_examples, 1)));
    std::cout << "epoch " << epoch + 1 << "/" << c.epochs << ": loss " << format_number(epoch_losses.back())
              << " per example, " << static_cast<std::int64_t>(static_cast<double>(words_done) / seconds())
              << " words/s\n";
  }
  const double train_seconds = seconds();
  const double words_per_second = static_cast<double>(words_done) / train_seconds;
  io::write_file_atomic(dir.file("metrics.jsonl"), metrics);
  dir.write_loss_plot("word2vec " + c.model + " " + c.loss + ": loss per example");

  const Tensor vectors = model.vectors();
  io::save_word2vec(dir.file("vectors.txt"), vocab.words, vectors, io::Word2VecFormat::Text);
  const Tensor unit = nn::normalize(vectors);
  std::cout << "nearest neighbours (cosine):\n";
  const nlohmann::json near = neighbours(unit, vocab, split(c.probes, ','));
  std::cout << "analogies (3CosAdd):\n";
  const nlohmann::json answers = analogies(unit, vocab, split(c.analogies, ','));

  dir.write_summary({{"model", c.model},
                     {"loss", c.loss},
                     {"vocab_size", vocab.size()},
                     {"corpus_tokens", corpus_tokens},
                     {"train_words", vocab.total},
                     {"epochs", c.epochs},
                     {"steps", steps},
                     {"batch_size", batch_size},
                     {"threads", c.threads},
                     {"train_seconds", train_seconds},
                     {"words_per_second", words_per_second},
                     {"final_loss", epoch_losses.back()},
                     {"epoch_losses", epoch_losses},
                     {"vectors_path", dir.file("vectors.txt")},
                     {"corpus_path", dir.file("corpus.txt")},
                     {"neighbours", near},
                     {"analogies", answers}});
  std::cout << "trained " << words_done << " words in " << format_number(std::round(train_seconds * 10) / 10) << " s ("
            << static_cast<std::int64_t>(words_per_second) << " words/s); files in " << dir.path() << "/\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Config config = examples::make_config<W2vConfig>(
      "word2vec",
      "word vectors (skip-gram or CBOW, negative sampling or hierarchical softmax) on the King James Bible");
  if (const int status = examples::parse_command_line(config, argc, argv, 1, nullptr); status >= 0) return status;
  try {
    return run(config);
  } catch (const ConfigError& e) {
    std::cerr << e.what() << "\n";
    return examples::kConfigErrorExit;
  } catch (const std::exception& e) {
    std::cerr << "word2vec: " << e.what() << "\n";
    return 1;
  }
}
