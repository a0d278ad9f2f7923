#pragma once
// Vocab: a bijection between tokens and integer ids. Ids 0..3 are always the specials
//   <pad> (kPad)  <unk> (kUnk)  <sos> (kSos)  <eos> (kEos)
// and the other tokens follow, most frequent first.
//
//   Vocab vocab = Vocab::build(docs, VocabOptions{/*min_freq=*/2, /*max_size=*/10000});
//   std::vector<std::int64_t> ids = vocab.encode(word_tokenize("free money"), false, true);
//   vocab.save("run/vocab.json");
//
// The file is JSON: {"format": "tapegrad.vocab", "version": 1, "tokens": ["<pad>", ...]}, the
// position in "tokens" being the id.

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace tapegrad::data {

struct VocabOptions {
  std::int64_t min_freq = 1;  // tokens seen fewer times are left out (read as <unk>)
  std::int64_t max_size = 0;  // 0: no limit; otherwise the size including the 4 specials (>= 4)
};

class Vocab {
 public:
  static constexpr std::int64_t kPad = 0, kUnk = 1, kSos = 2, kEos = 3;
  static constexpr std::int64_t kNumSpecials = 4;

  // Only the 4 specials.
  Vocab();
  // Counts the tokens of all docs and keeps those seen at least min_freq times, ordered by count
  // (descending), ties by token (ascending bytewise), cut to max_size. Occurrences of the special
  // tokens' spellings in docs are not counted: the specials are always at 0..3.
  static Vocab build(const std::vector<std::vector<std::string>>& docs, const VocabOptions& options = {});
  // The tokens of counts the caller made (document frequencies, say), kept and ordered as build
  // keeps and orders its own; the specials' spellings among them are left out.
  static Vocab from_counts(const std::unordered_map<std::string, std::int64_t>& counts,
                           const VocabOptions& options = {});
  // The specials, then `tokens` in order; a repeated token (or a special's spelling) is a ValueError.
  static Vocab from_tokens(const std::vector<std::string>& tokens);

  std::int64_t size() const { return static_cast<std::int64_t>(tokens_.size()); }
  // kUnk if the token is not in the vocabulary.
  std::int64_t id(const std::string& token) const;
  // IndexError if id is outside [0, size()).
  const std::string& token(std::int64_t id) const;
  bool contains(const std::string& token) const { return ids_.count(token) != 0; }
  const std::vector<std::string>& tokens() const { return tokens_; }

  std::vector<std::int64_t> encode(const std::vector<std::string>& tokens, bool add_sos = false,
                                   bool add_eos = false) const;
  // skip_special leaves out <pad>, <sos> and <eos>; <unk> is kept because it stands for a real
  // token. An id outside the vocabulary is an IndexError.
  std::vector<std::string> decode(const std::vector<std::int64_t>& ids, bool skip_special = true) const;

  // Writes the JSON file atomically and durably (io::write_file_atomic), so a crash never leaves
  // a half-written vocabulary. A token that is not valid UTF-8 cannot be stored in JSON: ValueError.
  void save(const std::string& path) const;
  // IoError if the file cannot be read or is not JSON; ValueError naming the file and the field if it
  // lacks "tokens", has a non-string token, specials not at 0..3, or a repeated token.
  static Vocab load(const std::string& path);

  bool operator==(const Vocab& other) const { return tokens_ == other.tokens_; }
  bool operator!=(const Vocab& other) const { return !(*this == other); }

 private:
  void add(const std::string& token, const char* where);
  // build's and from_counts' common part: ValueError naming `where` for a min_freq below 1 or a
  // max_size below the specials.
  static Vocab from_counts_named(const std::unordered_map<std::string, std::int64_t>& counts,
                                 const VocabOptions& options, const char* where);
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, std::int64_t> ids_;
};

}  // namespace tapegrad::data
