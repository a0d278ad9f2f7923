#pragma once
// The word2vec experiment's corpus, as word2vec.c prepares its training text:
//
//   tokens      data::word_tokenize's lowercase words
//   vocabulary  the words seen at least min_count times, most frequent first (ties alphabetical);
//               the others are dropped from the text
//   subsampling each occurrence of a word of frequency f (its count over all kept tokens) is kept
//               with probability min(1, sqrt(t / f) + t / f), t = sample (0: keep all)
//   windows     per center word a radius drawn uniformly from [1, window]; its contexts are the
//               words within that radius in the same sentence
//   noise       negatives drawn with probability proportional to count^0.75 (an AliasTable)
//
//   sentences.push_back(data::word_tokenize(verse.text));
//   Vocabulary vocab = build_vocabulary(sentences, 5);
//   auto ids = vocab.encode(sentences);                          // ids per sentence, OOV dropped
//   auto kept = Subsampler(vocab, 1e-3)(ids[0], gen);
//   auto pairs = context_pairs(kept, 5, gen);                     // (center, context)

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tapegrad/tapegrad.h"

namespace tapegrad::examples::word2vec {

struct Vocabulary {
  std::vector<std::string> words;                       // most frequent first, ties alphabetical
  std::vector<std::int64_t> counts;                     // counts[i]: occurrences of words[i]
  std::int64_t total = 0;                               // sum of counts: the tokens the vocabulary keeps
  std::unordered_map<std::string, std::int64_t> index;  // word -> id

  std::int64_t size() const { return static_cast<std::int64_t>(words.size()); }
  // The id of word, or -1.
  std::int64_t id(const std::string& word) const;
  // Each sentence as ids, words outside the vocabulary dropped.
  std::vector<std::vector<std::int64_t>> encode(const std::vector<std::vector<std::string>>& sentences) const;
};

// ValueError (naming the values) for min_count below 1 or a corpus with no word that often.
Vocabulary build_vocabulary(const std::vector<std::vector<std::string>>& sentences, std::int64_t min_count);

// The probability that subsampling keeps an occurrence of a word with `count` occurrences among
// `total`: min(1, sqrt(t / f) + t / f) with f = count / total; 1 when sample is 0.
double keep_probability(std::int64_t count, std::int64_t total, double sample);

// Subsampling at threshold `sample`, each word's keep_probability computed once.
class Subsampler {
 public:
  Subsampler(const Vocabulary& vocab, double sample);
  // The sentence (ids of the vocabulary) with each occurrence kept with its word's probability (one
  // gen.uniform() per token). IndexError naming the id for an id outside the vocabulary.
  std::vector<std::int64_t> operator()(const std::vector<std::int64_t>& sentence, Generator& gen) const;

 private:
  std::vector<double> keep_;  // per id
};

// (center, context) pairs of a sentence, centers in order, each with a radius uniform in
// [1, window] (one gen.randint per center) and its contexts left to right. ValueError for window < 1.
std::vector<std::pair<std::int64_t, std::int64_t>> context_pairs(const std::vector<std::int64_t>& sentence,
                                                                 std::int64_t window, Generator& gen);

// word2vec's noise distribution: P(w) proportional to count(w)^power (0.75).
AliasTable noise_distribution(const Vocabulary& vocab, double power = 0.75);

}  // namespace tapegrad::examples::word2vec
