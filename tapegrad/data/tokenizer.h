#pragma once
// Tokenizers: text (UTF-8) to a list of string tokens, to be mapped to ids by a Vocab.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tapegrad::data {

// Words: maximal runs of ASCII letters and digits and of non-ASCII bytes (so UTF-8 letters stay
// inside their word), with ASCII letters lowercased. An apostrophe between two word characters
// stays in the word ("don't", "o'neil"); everything else separates words and is dropped.
// At most max_words words are returned: the scan stops there, so a huge text costs no more than
// its first words.
//   word_tokenize("Don't WAIT: 100% free!") == {"don't", "wait", "100", "free"}
//   word_tokenize("Don't WAIT: 100% free!", 2) == {"don't", "wait"}
std::vector<std::string> word_tokenize(std::string_view text, std::size_t max_words = SIZE_MAX);

// One token per UTF-8 code point, whitespace and punctuation included. A byte that does not
// start a well-formed UTF-8 sequence becomes a token of its own.
//   char_tokenize("né") == {"n", "é"}
std::vector<std::string> char_tokenize(std::string_view text);

}  // namespace tapegrad::data
