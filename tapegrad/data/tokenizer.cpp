#include "tapegrad/data/tokenizer.h"

#include <cstdint>

namespace tapegrad::data {

namespace {

bool is_word_byte(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0x80;
}

// Length of the well-formed UTF-8 sequence starting at s[i], or 0 if there is none.
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  std::size_t n;
  std::uint32_t min;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) n = 2, min = 0x80;
  else if ((c & 0xF0) == 0xE0) n = 3, min = 0x800;
  else if ((c & 0xF8) == 0xF0) n = 4, min = 0x10000;
  else return 0;
  if (i + n > s.size()) return 0;
  std::uint32_t cp = c & (0x7F >> n);
  for (std::size_t k = 1; k < n; ++k) {
    const auto cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (cc & 0x3F);
  }
  // Overlong forms, surrogates and values past U+10FFFF are not well-formed.
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

}  // namespace

std::vector<std::string> word_tokenize(std::string_view text, std::size_t max_words) {
  std::vector<std::string> words;
  std::string word;
  for (std::size_t i = 0; i < text.size() && words.size() < max_words; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (is_word_byte(c)) {
      word.push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : static_cast<char>(c));
    } else if (c == '\'' && !word.empty() && i + 1 < text.size() &&
               is_word_byte(static_cast<unsigned char>(text[i + 1]))) {
      word.push_back('\'');
    } else if (!word.empty()) {
      words.push_back(std::move(word));
      word.clear();
    }
  }
  if (!word.empty() && words.size() < max_words) words.push_back(std::move(word));
  return words;
}

std::vector<std::string> char_tokenize(std::string_view text) {
  std::vector<std::string> chars;
  chars.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = utf8_length(text, i);
    const std::size_t take = n == 0 ? 1 : n;
    chars.emplace_back(text.substr(i, take));
    i += take;
  }
  return chars;
}

}  // namespace tapegrad::data
