#include "examples/language_model/corpus.h"

#include <algorithm>

#include "tapegrad/autograd/error.h"

namespace tapegrad::examples {

LmCorpus kjv_corpus(const Bible& bible, const std::vector<std::string>& heldout_books) {
  if (heldout_books.empty()) throw ValueError("kjv_corpus: no held-out books given");
  for (const std::string& book : heldout_books) {
    if (std::find(bible.books.begin(), bible.books.end(), book) != bible.books.end()) continue;
    std::string known;
    for (const std::string& b : bible.books) known += (known.empty() ? "" : " ") + b;
    throw ValueError("kjv_corpus: held-out book \"" + book.substr(0, 40) +
                     "\" is not in the text; its books are: " + known);
  }
  LmCorpus corpus;
  for (const BibleVerse& verse : bible.verses) {
    const bool held_out = std::find(heldout_books.begin(), heldout_books.end(), verse.book) != heldout_books.end();
    std::string& side = held_out ? corpus.heldout_text : corpus.train_text;
    side += verse.text;
    side += '\n';
    ++(held_out ? corpus.heldout_verses : corpus.train_verses);
  }
  return corpus;
}

std::vector<std::int64_t> byte_tokens(const std::string& text) {
  std::vector<std::int64_t> ids(text.size());
  std::transform(text.begin(), text.end(), ids.begin(),
                 [](char c) { return static_cast<std::int64_t>(static_cast<unsigned char>(c)); });
  return ids;
}

std::string bytes_text(const std::vector<std::int64_t>& ids) {
  std::string text(ids.size(), '\0');
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] > 255) throw ValueError(message("bytes_text: id ", ids[i], " at ", i, " is not a byte"));
    text[i] = static_cast<char>(static_cast<unsigned char>(ids[i]));
  }
  return text;
}

std::vector<std::string> split_books(const std::string& list) {
  std::vector<std::string> books;
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    std::string name = list.substr(start, end - start);
    name.erase(0, name.find_first_not_of(' '));
    name.erase(name.find_last_not_of(' ') + 1);
    if (!name.empty()) books.push_back(name);
    start = end + 1;
  }
  return books;
}

}  // namespace tapegrad::examples
