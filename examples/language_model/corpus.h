#pragma once
// The language model's text: the King James Bible (examples/common/kjv.h), split by books into a
// training text and a held-out text, as bytes. Whole books are held out, so no verse of the
// held-out side has a near-duplicate on the training side.
//
//   examples::LmCorpus corpus = examples::kjv_corpus(examples::load_bible(), {"Ruth", "Prv", "Mark"});
//   std::vector<std::int64_t> ids = examples::byte_tokens(corpus.train_text);   // 0..255

#include <cstdint>
#include <string>
#include <vector>

#include "examples/common/kjv.h"

namespace tapegrad::examples {

// Narrative, wisdom, prophecy, gospel and letter: about 4.7% of the text.
inline const std::vector<std::string> kDefaultHeldOutBooks = {"Ruth", "Prv", "Joel", "Mark", "Jas"};

struct LmCorpus {
  std::string train_text;    // the verses of the other books, one per line ("<text>\n")
  std::string heldout_text;  // the verses of the held-out books, in the same form
  std::int64_t train_verses = 0;
  std::int64_t heldout_verses = 0;
};

// ValueError naming a held-out book that is not among bible.books (and listing those), or an empty list.
LmCorpus kjv_corpus(const Bible& bible, const std::vector<std::string>& heldout_books);

// A text as byte ids 0..255, and back.
std::vector<std::int64_t> byte_tokens(const std::string& text);
std::string bytes_text(const std::vector<std::int64_t>& ids);

// Parses a comma-separated list of book names ("Ruth,Prv,Mark"); empty names are dropped.
std::vector<std::string> split_books(const std::string& list);

}  // namespace tapegrad::examples
