// The word2vec corpus pipeline. See corpus.h.

#include "examples/word2vec/corpus.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace tapegrad::examples::word2vec {

std::int64_t Vocabulary::id(const std::string& word) const {
  const auto it = index.find(word);
  return it == index.end() ? -1 : it->second;
}

std::vector<std::vector<std::int64_t>> Vocabulary::encode(
    const std::vector<std::vector<std::string>>& sentences) const {
  std::vector<std::vector<std::int64_t>> out;
  out.reserve(sentences.size());
  for (const auto& sentence : sentences) {
    std::vector<std::int64_t>& ids = out.emplace_back();
    for (const auto& word : sentence)
      if (const std::int64_t i = id(word); i >= 0) ids.push_back(i);
  }
  return out;
}

Vocabulary build_vocabulary(const std::vector<std::vector<std::string>>& sentences, std::int64_t min_count) {
  if (min_count < 1) throw ValueError(message("build_vocabulary: min_count must be at least 1, got ", min_count));
  std::unordered_map<std::string, std::int64_t> counts;
  for (const auto& sentence : sentences)
    for (const auto& word : sentence) ++counts[word];
  std::vector<std::pair<std::string, std::int64_t>> kept;
  for (auto& [word, count] : counts)
    if (count >= min_count) kept.emplace_back(word, count);
  if (kept.empty())
    throw ValueError(
        message("build_vocabulary: no word occurs ", min_count, " times in ", counts.size(), " distinct words"));
  std::sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  Vocabulary vocab;
  for (auto& [word, count] : kept) {
    vocab.index.emplace(word, vocab.size());
    vocab.words.push_back(word);
    vocab.counts.push_back(count);
    vocab.total += count;
  }
  return vocab;
}

double keep_probability(std::int64_t count, std::int64_t total, double sample) {
  if (sample <= 0) return 1.0;
  const double ratio = sample / (static_cast<double>(count) / static_cast<double>(total));  // t / f
  return std::min(1.0, std::sqrt(ratio) + ratio);
}

Subsampler::Subsampler(const Vocabulary& vocab, double sample) {
  keep_.reserve(vocab.counts.size());
  for (const std::int64_t count : vocab.counts) keep_.push_back(keep_probability(count, vocab.total, sample));
}

std::vector<std::int64_t> Subsampler::operator()(const std::vector<std::int64_t>& sentence, Generator& gen) const {
  std::vector<std::int64_t> kept;
  kept.reserve(sentence.size());
  for (const std::int64_t w : sentence) {
    if (w < 0 || w >= static_cast<std::int64_t>(keep_.size()))
      throw IndexError(message("Subsampler: word id ", w, " is outside the vocabulary's [0, ", keep_.size(), ")"));
    if (gen.uniform() < keep_[static_cast<std::size_t>(w)]) kept.push_back(w);
  }
  return kept;
}

std::vector<std::pair<std::int64_t, std::int64_t>> context_pairs(const std::vector<std::int64_t>& sentence,
                                                                 std::int64_t window, Generator& gen) {
  if (window < 1) throw ValueError(message("context_pairs: window must be at least 1, got ", window));
  std::vector<std::pair<std::int64_t, std::int64_t>> pairs;
  const std::int64_t n = static_cast<std::int64_t>(sentence.size());
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t radius = 1 + static_cast<std::int64_t>(gen.randint(static_cast<std::uint64_t>(window)));
    for (std::int64_t j = std::max<std::int64_t>(0, i - radius); j <= std::min(n - 1, i + radius); ++j)
      if (j != i) pairs.emplace_back(sentence[static_cast<std::size_t>(i)], sentence[static_cast<std::size_t>(j)]);
  }
  return pairs;
}

AliasTable noise_distribution(const Vocabulary& vocab, double power) {
  std::vector<double> weights;
  weights.reserve(vocab.counts.size());
  for (const std::int64_t c : vocab.counts) weights.push_back(std::pow(static_cast<double>(c), power));
  return AliasTable(weights);
}

}  // namespace tapegrad::examples::word2vec
