// The word2vec example's corpus pipeline (examples/word2vec/corpus.h): the vocabulary's
// order and min_count, word2vec.c's keep probability and its effect, dynamic windows, the
// unigram^0.75 noise distribution; and its training (examples/word2vec/trainer.h) on a corpus of
// two topics that never share a sentence.

#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "examples/word2vec/corpus.h"
#include "examples/word2vec/glove.h"
#include "examples/word2vec/trainer.h"
#include "tapegrad/nn/nn.h"
#include "tests/testing.h"

using namespace tapegrad;
using namespace tapegrad::examples::word2vec;

TEST_CASE("word2vec corpus: a vocabulary by frequency with min_count") {
  const std::vector<std::vector<std::string>> sentences{{"b", "a", "c", "a"}, {"d", "c", "a", "b"}, {"e"}};
  const Vocabulary vocab = build_vocabulary(sentences, 2);
  CHECK(vocab.words == std::vector<std::string>{"a", "b", "c"});  // 3, then 2 and 2 alphabetical
  CHECK(vocab.counts == std::vector<std::int64_t>{3, 2, 2});
  CHECK(vocab.total == 7);
  CHECK(vocab.id("c") == 2);
  CHECK(vocab.id("d") == -1);
  CHECK(vocab.encode(sentences) == std::vector<std::vector<std::int64_t>>{{1, 0, 2, 0}, {2, 0, 1}, {}});
  CHECK_THROWS_WITH_AS(build_vocabulary(sentences, 4), "build_vocabulary: no word occurs 4 times in 5 distinct words",
                       ValueError);
  CHECK_THROWS_WITH_AS(build_vocabulary(sentences, 0), "build_vocabulary: min_count must be at least 1, got 0",
                       ValueError);
}

TEST_CASE("word2vec corpus: subsampling keeps a word with probability sqrt(t/f) + t/f") {
  // f = 0.1, t = 1e-3: sqrt(0.01) + 0.01 = 0.11; rare words are always kept.
  CHECK(keep_probability(100, 1000, 1e-3) == doctest::Approx(0.11));
  CHECK(keep_probability(1, 1000, 1e-3) == 1.0);
  CHECK(keep_probability(100, 1000, 0.0) == 1.0);
  Vocabulary vocab;
  vocab.words = {"the", "ark"};
  vocab.counts = {100, 1};
  vocab.total = 1000;
  const std::vector<std::int64_t> sentence(100000, 0);
  Generator gen(1);
  const Subsampler subsample(vocab, 1e-3);
  const double kept = static_cast<double>(subsample(sentence, gen).size()) / 1e5;
  CHECK(std::abs(kept - 0.11) < 5 * std::sqrt(0.11 * 0.89 / 1e5));
  CHECK(subsample(std::vector<std::int64_t>(50, 1), gen).size() == 50);
  CHECK_THROWS_WITH_AS(subsample({0, 2}, gen), "Subsampler: word id 2 is outside the vocabulary's [0, 2)", IndexError);
  CHECK_THROWS_WITH_AS(subsample({-1}, gen), "Subsampler: word id -1 is outside the vocabulary's [0, 2)", IndexError);
}

TEST_CASE("word2vec corpus: context windows have a radius uniform in [1, window] and stay in the sentence") {
  Generator gen(2);
  const std::vector<std::int64_t> sentence{10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
  // Every pair is within the window, and the middle word's number of contexts is 2r for its radius r.
  std::map<std::int64_t, int> radius_seen;
  for (int trial = 0; trial < 4000; ++trial) {
    int middle = 0;
    for (const auto& [center, context] : context_pairs(sentence, 3, gen)) {
      CHECK(center != context);
      CHECK(std::abs(center - context) <= 3);
      middle += center == 15;
    }
    ++radius_seen[middle / 2];
  }
  REQUIRE(radius_seen.size() == 3);
  for (const auto& [r, n] : radius_seen) {
    CAPTURE(r);
    CHECK(r >= 1);
    CHECK(r <= 3);
    CHECK(std::abs(n / 4000.0 - 1.0 / 3) < 5 * std::sqrt(2.0 / 9 / 4000));
  }
  CHECK(context_pairs({7}, 5, gen).empty());
  CHECK_THROWS_WITH_AS(context_pairs(sentence, 0, gen), "context_pairs: window must be at least 1, got 0", ValueError);
}

TEST_CASE("word2vec corpus: the noise distribution is proportional to count^0.75") {
  Vocabulary vocab;
  vocab.words = {"a", "b", "c"};
  vocab.counts = {81, 16, 1};
  vocab.total = 98;
  const AliasTable noise = noise_distribution(vocab);
  const double z = 27.0 + 8.0 + 1.0;  // 81^0.75, 16^0.75, 1
  CHECK(noise.probability(0) == doctest::Approx(27.0 / z));
  CHECK(noise.probability(1) == doctest::Approx(8.0 / z));
  CHECK(noise.probability(2) == doctest::Approx(1.0 / z));
}

namespace {

// 400 sentences of 8 words, each drawn from one of two disjoint topics of 6 words.
std::vector<std::vector<std::string>> two_topics() {
  Generator gen(7);
  std::vector<std::vector<std::string>> sentences;
  for (int s = 0; s < 400; ++s) {
    const std::string topic = s % 2 == 0 ? "a" : "b";
    std::vector<std::string>& words = sentences.emplace_back();
    for (int w = 0; w < 8; ++w) words.push_back(topic + std::to_string(gen.randint(6)));
  }
  return sentences;
}

// Mean cosine similarity between words of the same topic minus that between words of different topics.
double topic_margin(const Tensor& vectors, const Vocabulary& vocab) {
  const Tensor unit = nn::normalize(vectors);
  double same = 0, other = 0;
  std::int64_t n_same = 0, n_other = 0;
  for (std::int64_t i = 0; i < vocab.size(); ++i)
    for (std::int64_t j = i + 1; j < vocab.size(); ++j) {
      const double cosine = (unit.select(0, i) * unit.select(0, j)).sum().item<double>();
      const bool same_topic =
          vocab.words[static_cast<std::size_t>(i)][0] == vocab.words[static_cast<std::size_t>(j)][0];
      (same_topic ? same : other) += cosine;
      ++(same_topic ? n_same : n_other);
    }
  return same / static_cast<double>(n_same) - other / static_cast<double>(n_other);
}

// What the two-topic training tests train with: 16 dimensions, 4 epochs, no subsampling, batches of 32.
Word2VecOptions topic_options(const std::string& model) {
  Word2VecOptions options;
  options.model = model;
  options.dim = 16;
  options.epochs = 4;
  options.sample = 0;
  options.batch_size = 32;
  return options;
}

}  // namespace

TEST_CASE("word2vec training: every model and loss separates the two topics, and the loss falls") {
  const auto sentences = two_topics();
  const Vocabulary vocab = build_vocabulary(sentences, 1);
  REQUIRE(vocab.size() == 12);
  for (const std::string model : {"skipgram", "cbow"})
    for (const std::string loss : {"ns", "hs"}) {
      CAPTURE(model);
      CAPTURE(loss);
      Word2VecOptions options = topic_options(model);
      options.loss = loss;
      std::int64_t logs = 0;
      Word2VecCallbacks callbacks;
      callbacks.log_every = 10;
      callbacks.on_log = [&](const Word2VecLog& log) {
        ++logs;
        CHECK(log.step == 10 * logs);
        CHECK(std::isfinite(log.loss));
      };
      const Word2VecResult r = train_word2vec(vocab.encode(sentences), vocab, options, callbacks);
      CHECK(r.vectors.shape() == Shape{12, 16});
      CHECK(r.words == 4 * 400 * 8);
      CHECK(logs == r.steps / 10);
      REQUIRE(r.epoch_losses.size() == 4);
      CHECK(r.epoch_losses.back() < r.epoch_losses.front());
      CHECK(topic_margin(r.vectors, vocab) > 0.5);
    }
}

TEST_CASE("word2vec training: a seed gives the same vectors, another seed others") {
  const auto sentences = two_topics();
  const Vocabulary vocab = build_vocabulary(sentences, 1);
  Word2VecOptions options;
  options.dim = 8;
  options.epochs = 1;
  const Tensor first = train_word2vec(vocab.encode(sentences), vocab, options).vectors;
  const Tensor again = train_word2vec(vocab.encode(sentences), vocab, options).vectors;
  options.seed = 1;
  const Tensor other = train_word2vec(vocab.encode(sentences), vocab, options).vectors;
  CHECK(first.to_vector<float>() == again.to_vector<float>());
  CHECK(first.to_vector<float>() != other.to_vector<float>());
}

TEST_CASE("word2vec training: the vectors depend on the shards and not on the thread count") {
  const auto sentences = two_topics();
  const Vocabulary vocab = build_vocabulary(sentences, 1);
  const int threads = num_threads();
  for (const std::string model : {"skipgram", "cbow"}) {
    CAPTURE(model);
    Word2VecOptions options;
    options.model = model;
    options.dim = 8;
    options.epochs = 1;
    options.batch_size = 16;
    options.shards = 3;
    set_num_threads(1);
    const Word2VecResult one = train_word2vec(vocab.encode(sentences), vocab, options);
    set_num_threads(2);  // the step on one thread, the next batches on the other
    const Word2VecResult two = train_word2vec(vocab.encode(sentences), vocab, options);
    set_num_threads(3);  // the step, then the next batches of the shards in parallel
    const Word2VecResult three = train_word2vec(vocab.encode(sentences), vocab, options);
    set_num_threads(2);
    options.shards = 1;
    const Word2VecResult single = train_word2vec(vocab.encode(sentences), vocab, options);
    set_num_threads(threads);
    CHECK(one.vectors.to_vector<float>() == two.vectors.to_vector<float>());
    CHECK(one.vectors.to_vector<float>() == three.vectors.to_vector<float>());
    CHECK(one.steps == two.steps);
    CHECK(one.words == 400 * 8);
    CHECK(single.words == 400 * 8);
    CHECK(one.vectors.to_vector<float>() != single.vectors.to_vector<float>());
    // Three shards take three batches a step: about a third of one shard's steps.
    CHECK(one.steps * 3 >= single.steps);
    CHECK(one.steps * 2 < single.steps);
  }
}

namespace {

// Like two_topics, but each topic's words share a stem ("apple0" .. "apple5", "berry0" .. "berry5"),
// so their character n-grams carry the topic.
std::vector<std::vector<std::string>> two_stemmed_topics() {
  std::vector<std::vector<std::string>> sentences = two_topics();
  for (auto& sentence : sentences)
    for (std::string& word : sentence) word = (word[0] == 'a' ? "apple" : "berry") + word.substr(1);
  return sentences;
}

double mean_cosine(const Tensor& unit, const Tensor& query, const Vocabulary& vocab, char topic) {
  double sum = 0;
  int n = 0;
  for (std::int64_t i = 0; i < vocab.size(); ++i)
    if (vocab.words[static_cast<std::size_t>(i)][0] == topic) {
      sum += (unit.select(0, i) * query).sum().item<double>();
      ++n;
    }
  return sum / n;
}

}  // namespace

TEST_CASE("word2vec training: CBOW with hierarchical softmax is word2vec.c's update written out step by step") {
  // Window 1 (every radius 1), no subsampling, one shard: 6 examples an epoch, the first sentence's 4
  // then the second's 2. A batch of 100 makes a step of each epoch; a batch of 4 a step of each
  // sentence, at the learning rates of the words read before it (0, 4, 6 and 10 of 2 x 6, over 13).
  const std::vector<std::vector<std::string>> sentences = {{"x", "y", "z", "x"}, {"y", "z"}};
  const Vocabulary vocab = build_vocabulary(sentences, 1);
  const auto ids = vocab.encode(sentences);
  const nn::HuffmanTree tree = nn::huffman_tree(vocab.counts);
  struct Step {
    std::vector<std::size_t> sentences;
    double words_before;
  };
  const std::vector<std::pair<std::int64_t, std::vector<Step>>> runs = {{100, {{{0, 1}, 0}, {{0, 1}, 6}}},
                                                                        {4, {{{0}, 0}, {{1}, 4}, {{0}, 6}, {{1}, 10}}}};
  for (const auto& [batch_size, steps] : runs) {
    CAPTURE(batch_size);
    Word2VecOptions options;
    options.model = "cbow";
    options.loss = "hs";
    options.dim = 4;
    options.window = 1;
    options.sample = 0;
    options.epochs = 2;
    options.shards = 1;
    options.batch_size = batch_size;
    options.seed = 3;
    const Word2VecResult r = train_word2vec(ids, vocab, options);
    REQUIRE(r.steps == static_cast<std::int64_t>(steps.size()));

    // The input table as the Embedding draws it (U(-0.5 / dim, 0.5 / dim), the seed generator's first
    // draws): what one epoch leaves, since the first steps meet the nodes' rows at zero.
    Generator gen(options.seed);
    const std::vector<float> drawn = uniform({3, 4}, -0.125, 0.125, gen).to_vector<float>();
    Word2VecOptions one_epoch = options;
    one_epoch.epochs = 1;
    one_epoch.batch_size = 100;
    REQUIRE(train_word2vec(ids, vocab, one_epoch).vectors.to_vector<float>() == drawn);

    // The same steps in float64: the inner nodes' rows from zero; per example h the mean of its
    // context's rows, g = 1 - code - sigmoid(h . v) at each node of the target's path, each node's row
    // moved by lr g h and each context row by lr times the sum of g v (the mean's whole gradient, not a
    // share), every example of a step computed from the weights the step started from.
    std::vector<std::vector<double>> in(3, std::vector<double>(4)), out(2, std::vector<double>(4, 0.0));
    for (std::size_t i = 0; i < 12; ++i) in[i / 4][i % 4] = drawn[i];
    for (const Step& step : steps) {
      const double lr = 0.05 * (1.0 - step.words_before / 13.0);
      auto next_in = in;
      auto next_out = out;
      for (const std::size_t s : step.sentences) {
        const std::vector<std::int64_t>& sentence = ids[s];
        for (std::size_t i = 0; i < sentence.size(); ++i) {
          std::vector<std::int64_t> context;
          if (i > 0) context.push_back(sentence[i - 1]);
          if (i + 1 < sentence.size()) context.push_back(sentence[i + 1]);
          if (context.empty()) continue;
          std::vector<double> h(4, 0.0), to_context(4, 0.0);
          for (const std::int64_t c : context)
            for (int d = 0; d < 4; ++d) h[d] += in[c][d] / static_cast<double>(context.size());
          const auto word = static_cast<std::size_t>(sentence[i]);
          for (std::size_t k = 0; k < tree.nodes[word].size(); ++k) {
            const auto node = static_cast<std::size_t>(tree.nodes[word][k]);
            double score = 0.0;
            for (int d = 0; d < 4; ++d) score += h[d] * out[node][d];
            const double g = 1.0 - tree.codes[word][k] - 1.0 / (1.0 + std::exp(-score));
            for (int d = 0; d < 4; ++d) {
              to_context[d] += g * out[node][d];
              next_out[node][d] += lr * g * h[d];
            }
          }
          for (const std::int64_t c : context)
            for (int d = 0; d < 4; ++d) next_in[c][d] += lr * to_context[d];
        }
      }
      in = next_in;
      out = next_out;
    }
    const std::vector<float> got = r.vectors.to_vector<float>();
    double moved = 0.0;
    for (std::size_t i = 0; i < 12; ++i) {
      CAPTURE(i);
      CHECK(std::abs(got[i] - in[i / 4][i % 4]) < 1e-7);  // float32 rounding; a 1/count share: 4.5e-5
      moved = std::max(moved, std::abs(in[i / 4][i % 4] - drawn[i]));
    }
    CHECK(moved > 1e-5);  // the later steps moved the input rows
  }
}

TEST_CASE("word2vec training with subwords: both models separate the topics and unseen words land near their stem") {
  const auto sentences = two_stemmed_topics();
  const Vocabulary vocab = build_vocabulary(sentences, 1);
  REQUIRE(vocab.size() == 12);
  for (const std::string model : {"skipgram", "cbow"}) {
    CAPTURE(model);
    Word2VecOptions options = topic_options(model);
    options.maxn = 6;  // minn 3
    options.buckets = 5000;
    // Every word shares its stem's n-grams, so a CBOW window holds each of them about 7 times, and a
    // batch of 32 windows steps them with about 200 examples' gradients at once: 0.05 diverges.
    if (model == "cbow") options.lr = 0.005;
    const Word2VecResult r = train_word2vec(vocab.encode(sentences), vocab, options);
    CHECK(r.vectors.shape() == Shape{12, 16});
    REQUIRE(r.ngram_rows.shape() == Shape{5000, 16});
    CHECK(r.epoch_losses.back() < r.epoch_losses.front());
    CHECK(topic_margin(r.vectors, vocab) > 0.5);
    // Words never seen, from their n-grams alone: each is nearer its stem's topic.
    const data::Subwords subwords(data::SubwordOptions().minn(3).maxn(6).buckets(5000));
    const Tensor unseen = nn::normalize(ngram_vectors(r.ngram_rows, subwords, {"apple9", "berry9"}));
    const Tensor unit = nn::normalize(r.vectors);
    CHECK(mean_cosine(unit, unseen.select(0, 0), vocab, 'a') >
          mean_cosine(unit, unseen.select(0, 0), vocab, 'b') + 0.3);
    CHECK(mean_cosine(unit, unseen.select(0, 1), vocab, 'b') >
          mean_cosine(unit, unseen.select(0, 1), vocab, 'a') + 0.3);
  }
}

TEST_CASE("word2vec training with subwords: a word's vector from its n-grams is the mean of their rows") {
  Generator gen(3);
  const Tensor rows = randn({50, 4}, gen);
  const data::Subwords subwords(data::SubwordOptions().minn(3).maxn(4).buckets(50));
  const Tensor vectors = ngram_vectors(rows, subwords, {"abc", "xy"});
  REQUIRE(vectors.shape() == Shape{2, 4});
  for (const auto& [i, word] : {std::pair<std::int64_t, std::string>{0, "abc"}, {1, "xy"}}) {
    const std::vector<std::int64_t> buckets = subwords.buckets(word);
    Tensor expected = zeros({4});
    for (const std::int64_t b : buckets) expected = expected + rows.select(0, b);
    expected = expected / static_cast<double>(buckets.size());
    testing::check_close(vectors.select(0, i), expected, 1e-6);
  }
  const std::string message =
      "ngram_vectors: expected the n-grams' rows of a model trained with subwords, (50, dim), "
      "got (40,4)";
  CHECK_THROWS_WITH_AS(ngram_vectors(rows.narrow(0, 0, 40), subwords, {"abc"}), message.c_str(), ValueError);
}

TEST_CASE("word2vec training: options out of range are a ValueError naming them") {
  const auto sentences = two_topics();
  const Vocabulary vocab = build_vocabulary(sentences, 1);
  const auto encoded = vocab.encode(sentences);
  Word2VecOptions bad_model;
  bad_model.model = "glove";
  CHECK_THROWS_WITH_AS(train_word2vec(encoded, vocab, bad_model), doctest::Contains("\"glove\""), ValueError);
  Word2VecOptions bad_loss;
  bad_loss.loss = "softmax";
  CHECK_THROWS_WITH_AS(train_word2vec(encoded, vocab, bad_loss), doctest::Contains("\"softmax\""), ValueError);
  Word2VecOptions bad_dim;
  bad_dim.dim = 0;
  CHECK_THROWS_WITH_AS(train_word2vec(encoded, vocab, bad_dim),
                       doctest::Contains("dim, window, negative, epochs and shards must be at least 1, got 0"),
                       ValueError);
  Word2VecOptions bad_shards;
  bad_shards.shards = 0;
  CHECK_THROWS_WITH_AS(train_word2vec(encoded, vocab, bad_shards), doctest::Contains("5 and 0"), ValueError);
  Word2VecOptions bad_sample;
  bad_sample.sample = -1;
  CHECK_THROWS_WITH_AS(train_word2vec(encoded, vocab, bad_sample), doctest::Contains("sample, lr and batch_size"),
                       ValueError);
  Word2VecOptions bad_subwords;
  bad_subwords.minn = 7;
  bad_subwords.maxn = 6;
  CHECK_THROWS_WITH_AS(train_word2vec(encoded, vocab, bad_subwords),
                       doctest::Contains("train_word2vec: subwords: Subwords: expected 1 <= minn <= maxn"), ValueError);
}

TEST_CASE("GloVe: co-occurrence counts weigh each pair within the window by 1 / distance, both ways") {
  // Sentence 0 1 2 0, window 2: (0, 1) at distance 1 and (1, 0) at 2; (0, 2) at 2 and (2, 0) at 1;
  // (1, 2) at 1. The two 0s are 3 apart, outside the window.
  const Cooccurrences x = count_cooccurrences({{0, 1, 2, 0}, {}}, 3, 2);
  std::map<std::pair<std::int64_t, std::int64_t>, double> got;
  for (std::int64_t k = 0; k < x.size(); ++k)
    got[{x.rows[static_cast<std::size_t>(k)], x.cols[static_cast<std::size_t>(k)]}] =
        x.counts[static_cast<std::size_t>(k)];
  const std::map<std::pair<std::int64_t, std::int64_t>, double> want{{{0, 1}, 1.5}, {{1, 0}, 1.5}, {{0, 2}, 1.5},
                                                                     {{2, 0}, 1.5}, {{1, 2}, 1.0}, {{2, 1}, 1.0}};
  CHECK(got == want);
  // Entries come ordered by (row, col).
  CHECK(x.rows == std::vector<std::int64_t>{0, 0, 1, 1, 2, 2});
  CHECK(x.cols == std::vector<std::int64_t>{1, 2, 0, 2, 0, 1});
  // Window 3 reaches the other 0: a diagonal entry, counted in both orders.
  const Cooccurrences wide = count_cooccurrences({{0, 1, 2, 0}}, 3, 3);
  CHECK(wide.rows.front() == 0);
  CHECK(wide.cols.front() == 0);
  CHECK(wide.counts.front() == doctest::Approx(2.0 / 3.0));
  CHECK_THROWS_WITH_AS(count_cooccurrences({{0, 5}}, 3, 2),
                       "count_cooccurrences: word id 5 outside the vocabulary of 3", ValueError);
  CHECK_THROWS_WITH_AS(count_cooccurrences({{0}}, 3, 0), "count_cooccurrences: window must be at least 1, got 0",
                       ValueError);
}

TEST_CASE("GloVe: the first step's loss is the weighted least squares of the initial vectors") {
  const auto sentences = two_topics();
  const Vocabulary vocab = build_vocabulary(sentences, 1);
  const Cooccurrences x = count_cooccurrences(vocab.encode(sentences), vocab.size(), 3);
  GloveOptions options;
  options.dim = 8;
  options.epochs = 1;
  options.batch_size = x.size();  // one step over every pair
  options.x_max = 10.0;
  options.seed = 3;
  const Word2VecResult r = train_glove(x, vocab.size(), options);
  REQUIRE(r.steps == 1);
  // The tables as train_glove draws them: words, contexts, then the two biases, from the seed.
  Generator gen(3);
  const double half = 0.5 / 8.0;
  const std::vector<double> w = uniform({12, 8}, -half, half, gen).to_vector<double>();
  const std::vector<double> c = uniform({12, 8}, -half, half, gen).to_vector<double>();
  const std::vector<double> bw = uniform({12, 1}, -half, half, gen).to_vector<double>();
  const std::vector<double> bc = uniform({12, 1}, -half, half, gen).to_vector<double>();
  double loss = 0.0;
  for (std::int64_t k = 0; k < x.size(); ++k) {
    const auto i = static_cast<std::size_t>(x.rows[static_cast<std::size_t>(k)]);
    const auto j = static_cast<std::size_t>(x.cols[static_cast<std::size_t>(k)]);
    const double count = x.counts[static_cast<std::size_t>(k)];
    double dot = 0.0;
    for (std::size_t e = 0; e < 8; ++e) dot += w[i * 8 + e] * c[j * 8 + e];
    const double diff = dot + bw[i] + bc[j] - std::log(count);
    loss += 0.5 * std::min(1.0, std::pow(count / 10.0, 0.75)) * diff * diff;
  }
  REQUIRE(r.epoch_losses.size() == 1);
  CHECK(r.epoch_losses[0] == doctest::Approx(loss / static_cast<double>(x.size())).epsilon(1e-5));
}

TEST_CASE("GloVe: training separates the two topics and the loss falls") {
  const auto sentences = two_topics();
  const Vocabulary vocab = build_vocabulary(sentences, 1);
  const Cooccurrences x = count_cooccurrences(vocab.encode(sentences), vocab.size(), 5);
  GloveOptions options;
  options.dim = 16;
  options.epochs = 30;
  options.batch_size = 16;
  options.x_max = 20.0;
  const Word2VecResult r = train_glove(x, vocab.size(), options);
  CHECK(r.vectors.shape() == Shape{12, 16});
  CHECK(r.words == 30 * x.size());
  REQUIRE(r.epoch_losses.size() == 30);
  CHECK(r.epoch_losses.back() < 0.5 * r.epoch_losses.front());
  CHECK(topic_margin(r.vectors, vocab) > 0.5);
  options.lr = 0.0;
  CHECK_THROWS_WITH_AS(train_glove(x, vocab.size(), options),
                       "train_glove: x_max, alpha and lr must be above 0, got 20, 0.75 and 0", ValueError);
}
