// The word2vec example's corpus pipeline (examples/word2vec/corpus.h): the vocabulary's
// order and min_count, word2vec.c's keep probability and its effect, dynamic windows, the
// unigram^0.75 noise distribution.

#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "examples/word2vec/corpus.h"

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
  const double kept = static_cast<double>(subsample(sentence, vocab, 1e-3, gen).size()) / 1e5;
  CHECK(std::abs(kept - 0.11) < 5 * std::sqrt(0.11 * 0.89 / 1e5));
  CHECK(subsample(std::vector<std::int64_t>(50, 1), vocab, 1e-3, gen).size() == 50);
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
