// word2vec: word vectors trained on the King James Bible (Debian's bible-kjv-text, decoded by
// examples/common/kjv.h), as word2vec.c trains them, on tapegrad's tape.
//
//   corpus   each verse a sentence of data::word_tokenize's lowercase words; words seen fewer than
//            min_count times dropped; frequent words subsampled (keep probability sqrt(t/f) + t/f);
//            per center word a window radius uniform in [1, window] (examples/word2vec/corpus.h)
//   training examples/word2vec/trainer.h: skip-gram or CBOW, negative sampling or hierarchical
//            softmax, row-sparse SGD with word2vec.c's learning rate and its linear decay; or
//            (--model glove) examples/word2vec/glove.h: GloVe's weighted least squares on the
//            windowed co-occurrence counts (no subsampling), row-sparse Adagrad; with --maxn 6
//            (examples/configs/fasttext.json) fastText's subwords: character n-grams of 3 to 6
//            characters in --buckets hash rows, and vectors for words outside the vocabulary
//
// Files (run_dir, default runs/word2vec/): config.json, corpus.txt (the tokenised verses it trained
// on, one per line: other tools train on the same input), metrics.jsonl, loss.svg, vectors.txt
// (word2vec text format, readable by gensim), summary.json. Prints nearest neighbours of the probe
// words and the analogies' answers, and with subwords those of words it never saw (--oov_probes).
//
// Under `mpirun -np N` (N dividing --shards) the processes train the same vectors as one process,
// each computing its share of the shards (GloVe: of each batch); rank 0 writes the files.
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
#include "examples/word2vec/glove.h"
#include "examples/word2vec/trainer.h"
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
  std::int64_t shards = 2;
  std::int64_t minn = 3;
  std::int64_t maxn = 0;
  std::int64_t buckets = 2000000;
  double x_max = 100.0;
  double alpha = 0.75;
  std::int64_t threads = 2;
  std::int64_t log_every = 100;
  std::string probes = "god,king,water,bread,sword,wine";
  std::string analogies = "king:queen:man:woman,father:son:mother:daughter,brother:brethren:son:sons";
  std::string oov_probes = "kingship,swordsmen,waterless,shepherding";
  std::string run_dir = "runs/word2vec";

  template <class F>
  static void fields(F& f) {
    using C = W2vConfig;
    f("seed", &C::seed, "seed of the initial vectors, subsampling, windows and noise words");
    f("data", &C::data, "bible.data of Debian's bible-kjv-text");
    f("model", &C::model, "skip-gram, continuous bag of words, or GloVe", {"skipgram", "cbow", "glove"});
    f("loss", &C::loss, "negative sampling or hierarchical softmax (skip-gram and CBOW)", {"ns", "hs"});
    f("dim", &C::dim, "vector size");
    f("window", &C::window,
      "largest window radius (each center draws one in [1, window]; GloVe counts every word within it)");
    f("negative", &C::negative, "noise words per example (ns)");
    f("sample", &C::sample, "subsampling threshold t (0: keep every word)");
    f("min_count", &C::min_count, "words seen fewer times are dropped");
    f("epochs", &C::epochs, "passes over the corpus");
    f("lr", &C::lr, "starting learning rate (0: word2vec.c's, 0.025 skip-gram and 0.05 CBOW; GloVe's Adagrad 0.05)");
    f("batch_size", &C::batch_size,
      "examples per shard and step: (center, context) pairs for skip-gram, centers for CBOW (0: 256, 64 for CBOW "
      "with hs); co-occurrence pairs for GloVe (0: 4096)");
    f("shards", &C::shards,
      "runs of the sentences whose batches each step computes at once, in parallel (the vectors depend on it, "
      "not on threads)");
    f("minn", &C::minn, "subwords: shortest character n-gram");
    f("maxn", &C::maxn, "subwords: longest character n-gram (0: none, word2vec; fastText's 6 with minn 3)");
    f("buckets", &C::buckets, "subwords: hash buckets the n-grams share");
    f("x_max", &C::x_max, "GloVe: co-occurrence counts above it weigh 1");
    f("alpha", &C::alpha, "GloVe: the weight's exponent, (x / x_max)^alpha below x_max");
    f("threads", &C::threads, "threads of tapegrad's pool (under mpirun each process takes its share of the node's)");
    f("log_every", &C::log_every, "steps between metrics.jsonl lines");
    f("probes", &C::probes, "words whose nearest neighbours are printed, comma-separated");
    f("analogies", &C::analogies, "a:b:c:d, comma-separated: is d nearest to b - a + c?");
    f("oov_probes", &C::oov_probes,
      "subwords: words outside the vocabulary whose nearest neighbours (from their n-grams) are printed");
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
  examples::require_positive("word2vec", c, &C::dim, &C::window, &C::negative, &C::min_count, &C::epochs, &C::shards,
                             &C::threads, &C::log_every);
  examples::require_non_negative("word2vec", c, &C::sample, &C::lr, &C::batch_size, &C::maxn);
  examples::require_positive("word2vec", c, &C::minn, &C::buckets);
  examples::require(c.maxn == 0 || c.maxn >= c.minn, "word2vec",
                    "--maxn must be 0 (no subwords) or at least --minn " + std::to_string(c.minn) + ", got " +
                        std::to_string(c.maxn));
  examples::require(c.maxn == 0 || c.model != "glove", "word2vec", "--maxn: GloVe has no subwords");
  examples::require_positive("word2vec", c, &C::x_max, &C::alpha);
  for (const std::string& a : split(c.analogies, ','))
    examples::require(split(a, ':').size() == 4, "word2vec", "--analogies: expected a:b:c:d, got \"" + a + "\"");
}

// Prints "  word: other 0.93, ..." for the neighbours found and returns [[other, cosine], ...].
nlohmann::json report_neighbours(const std::string& word, const nn::Neighbors& near, const Vocabulary& vocab) {
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
  return list;
}

nlohmann::json neighbours(const Tensor& unit, const Vocabulary& vocab, const std::vector<std::string>& probes) {
  nlohmann::json out = nlohmann::json::object();
  for (const std::string& word : probes) {
    const std::int64_t id = vocab.id(word);
    if (id < 0) {
      std::cout << "  " << word << ": not in the vocabulary\n";
      continue;
    }
    out[word] = report_neighbours(word,
                                  nn::nearest_neighbors(unit, unit.select(0, id).unsqueeze(0), 8,
                                                        from_vector(std::vector<std::int64_t>{id}, {1})),
                                  vocab);
  }
  return out;
}

// The vocabulary words nearest to each probe's vector from its n-grams (fastText's vector of a word
// it has not seen); a probe in the vocabulary is reported and skipped.
nlohmann::json oov_neighbours(const Tensor& ngram_rows, const Tensor& unit, const Vocabulary& vocab,
                              const Word2VecOptions& options, const std::vector<std::string>& probes) {
  nlohmann::json out = nlohmann::json::object();
  const data::Subwords subwords(options.subword_options());
  for (const std::string& word : probes) {
    if (vocab.id(word) >= 0) {
      std::cout << "  " << word << ": in the vocabulary\n";
      continue;
    }
    const Tensor query = nn::normalize(ngram_vectors(ngram_rows, subwords, {word}));
    out[word] = report_neighbours(word, nn::nearest_neighbors(unit, query, 8), vocab);
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
  // Under mpirun every process trains its share of the shards (or of GloVe's batches) and gets
  // its share of the node's CPUs; rank 0 prints and writes the files.
  examples::DataParallel parallel = examples::DataParallel::from_environment();
  if (parallel.size() == 1) set_num_threads(static_cast<int>(c.threads));
  if (c.model != "glove" && c.shards % parallel.size() != 0) {  // every rank stops here alike
    if (parallel.is_main())  // one write, so that mpirun's own lines cannot fall between the pieces
      std::cerr << ("word2vec: --shards " + std::to_string(c.shards) + " must be a multiple of the processes, " +
                    std::to_string(parallel.size()) + "\n");
    return examples::kConfigErrorExit;
  }
  std::ostringstream quiet;
  std::ostream& out = parallel.is_main() ? std::cout : quiet;
  examples::RunDir dir(c.run_dir);
  if (parallel.is_main()) {
    dir.clear_previous_run();
    dir.write_config(config);
  }

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
  if (parallel.is_main()) io::write_file_atomic(dir.file("corpus.txt"), corpus_text);
  const Vocabulary vocab = build_vocabulary(sentences, c.min_count);
  const std::vector<std::vector<std::int64_t>> encoded = vocab.encode(sentences);
  const bool glove = c.model == "glove";
  out << "word2vec: " << c.model
      << (glove            ? ""
          : c.loss == "ns" ? " with negative sampling"
                           : " with hierarchical softmax")
      << ", " << bible.verses.size() << " verses, " << corpus_tokens << " tokens, vocabulary " << vocab.size()
      << " (min_count " << c.min_count << ", " << vocab.total << " tokens kept)"
      << (parallel.size() > 1 ? ", on " + std::to_string(parallel.size()) + " processes" : std::string()) << "\n";

  Word2VecOptions options;
  options.model = c.model;
  options.loss = c.loss;
  options.dim = c.dim;
  options.window = c.window;
  options.negative = c.negative;
  options.sample = c.sample;
  options.epochs = c.epochs;
  options.lr = c.lr;
  options.batch_size = c.batch_size;
  options.shards = c.shards;
  options.seed = static_cast<std::uint64_t>(c.seed);
  options.minn = c.minn;
  options.maxn = c.maxn;
  options.buckets = c.buckets;
  std::string metrics;
  Word2VecCallbacks callbacks;
  callbacks.log_every = c.log_every;
  callbacks.on_log = [&](const Word2VecLog& log) {
    const nlohmann::json line = {{"step", log.step},       {"words", log.words},
                                 {"lr", log.lr},           {"loss", log.loss},
                                 {"seconds", log.seconds}, {"words_per_second", log.words_per_second}};
    metrics += line.dump() + "\n";
  };
  callbacks.on_epoch = [&](std::int64_t epoch, double loss, double words_per_second) {
    out << "epoch " << epoch << "/" << c.epochs << ": loss " << format_number(loss) << " per example, "
        << static_cast<std::int64_t>(words_per_second) << " words/s\n";
  };
  nlohmann::json model_summary = nlohmann::json::object();
  Word2VecResult result;
  if (glove) {
    const auto count_start = std::chrono::steady_clock::now();
    const Cooccurrences x = count_cooccurrences(encoded, vocab.size(), c.window);
    const double count_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - count_start).count();
    out << "co-occurrences: " << x.size() << " nonzero counts within " << c.window << " words ("
        << format_number(std::round(count_seconds * 100) / 100) << " s)\n";
    GloveOptions glove_options;
    glove_options.dim = c.dim;
    glove_options.x_max = c.x_max;
    glove_options.alpha = c.alpha;
    if (c.lr > 0) glove_options.lr = c.lr;
    glove_options.epochs = c.epochs;
    if (c.batch_size > 0) glove_options.batch_size = c.batch_size;
    glove_options.seed = static_cast<std::uint64_t>(c.seed);
    result = train_glove(x, vocab.size(), glove_options, callbacks, parallel);
    // Speed as for word2vec: the corpus words of all epochs over the time, the counting included.
    const double seconds = count_seconds + result.seconds;
    model_summary = {{"cooccurrence_pairs", x.size()},
                     {"cooccurrence_seconds", count_seconds},
                     {"pairs_per_second", result.words_per_second},
                     {"x_max", c.x_max},
                     {"alpha", c.alpha},
                     {"lr", glove_options.lr},
                     {"batch_size", glove_options.batch_size}};
    result.words = vocab.total * c.epochs;
    result.seconds = seconds;
    result.words_per_second = static_cast<double>(result.words) / seconds;
  } else {
    result = train_word2vec(encoded, vocab, options, callbacks, parallel);
    model_summary = {{"loss", c.loss}, {"batch_size", options.batch()}, {"shards", options.shards}};
    if (options.subwords()) model_summary.update({{"minn", c.minn}, {"maxn", c.maxn}, {"buckets", c.buckets}});
  }
  if (!parallel.is_main()) return 0;  // rank 0 writes the files and prints the neighbours
  io::write_file_atomic(dir.file("metrics.jsonl"), metrics);
  dir.write_loss_plot(glove ? std::string("GloVe: weighted squared error per co-occurrence pair")
                            : "word2vec " + c.model + " " + c.loss + ": loss per example");

  const Tensor& vectors = result.vectors;
  io::save_word2vec(dir.file("vectors.txt"), vocab.words, vectors, io::Word2VecFormat::Text);
  const Tensor unit = nn::normalize(vectors);
  std::cout << "nearest neighbours (cosine):\n";
  const nlohmann::json near = neighbours(unit, vocab, split(c.probes, ','));
  std::cout << "analogies (3CosAdd):\n";
  const nlohmann::json answers = analogies(unit, vocab, split(c.analogies, ','));
  if (result.ngram_rows.defined()) {
    std::cout << "words outside the vocabulary, from their n-grams (cosine):\n";
    model_summary["oov_neighbours"] = oov_neighbours(result.ngram_rows, unit, vocab, options, split(c.oov_probes, ','));
  }

  nlohmann::json summary = {{"model", c.model},
                            {"vocab_size", vocab.size()},
                            {"corpus_tokens", corpus_tokens},
                            {"train_words", vocab.total},
                            {"epochs", c.epochs},
                            {"steps", result.steps},
                            {"threads", num_threads()},
                            {"processes", parallel.size()},
                            {"train_seconds", result.seconds},
                            {"words_per_second", result.words_per_second},
                            {"final_loss", result.epoch_losses.back()},
                            {"epoch_losses", result.epoch_losses},
                            {"vectors_path", dir.file("vectors.txt")},
                            {"corpus_path", dir.file("corpus.txt")},
                            {"neighbours", near},
                            {"analogies", answers}};
  summary.update(model_summary);
  dir.write_summary(summary);
  std::cout << "trained " << result.words << " words in " << format_number(std::round(result.seconds * 10) / 10)
            << " s (" << static_cast<std::int64_t>(result.words_per_second) << " words/s); files in " << dir.path()
            << "/\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Config config = examples::make_config<W2vConfig>(
      "word2vec",
      "word vectors (skip-gram or CBOW, negative sampling or hierarchical softmax; or GloVe) on the King James Bible");
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
