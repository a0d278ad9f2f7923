#include "tapegrad/data/subwords.h"

#include "tapegrad/autograd/error.h"

namespace tapegrad::data {

namespace {

bool continuation_byte(char c) { return (static_cast<unsigned char>(c) & 0xC0U) == 0x80U; }

}  // namespace

Subwords::Subwords(const SubwordOptions& options) : options_(options) {
  if (options.minn() < 1 || options.maxn() < options.minn() || options.buckets() < 1 ||
      options.buckets() > (std::int64_t{1} << 32))
    throw ValueError(message("Subwords: expected 1 <= minn <= maxn and 1 <= buckets <= 2^32, got minn ", options.minn(),
                             ", maxn ", options.maxn(), " and buckets ", options.buckets()));
}

std::uint32_t Subwords::hash(std::string_view text) {
  std::uint32_t h = 2166136261U;
  for (const char c : text) {
    h ^= static_cast<std::uint32_t>(static_cast<std::int32_t>(static_cast<std::int8_t>(c)));
    h *= 16777619U;
  }
  return h;
}

template <class Emit>
void Subwords::each_ngram(std::string_view word, Emit&& emit) const {
  std::string marked;
  marked.reserve(word.size() + 2);
  marked += '<';
  marked += word;
  marked += '>';
  const std::string_view text = marked;
  for (std::size_t start = 0; start < text.size(); ++start) {
    if (continuation_byte(text[start])) continue;
    std::size_t end = start;
    for (std::int64_t n = 1; n <= options_.maxn() && end < text.size(); ++n) {
      ++end;
      while (end < text.size() && continuation_byte(text[end])) ++end;
      const bool marker_alone = n == 1 && (start == 0 || end == text.size());
      if (n >= options_.minn() && !marker_alone) emit(text.substr(start, end - start));
    }
  }
}

std::vector<std::string> Subwords::ngrams(std::string_view word) const {
  std::vector<std::string> out;
  each_ngram(word, [&](std::string_view ngram) { out.emplace_back(ngram); });
  return out;
}

std::vector<std::int64_t> Subwords::buckets(std::string_view word) const {
  std::vector<std::int64_t> out;
  const auto count = static_cast<std::uint64_t>(options_.buckets());
  each_ngram(word, [&](std::string_view ngram) { out.push_back(static_cast<std::int64_t>(hash(ngram) % count)); });
  return out;
}

}  // namespace tapegrad::data
