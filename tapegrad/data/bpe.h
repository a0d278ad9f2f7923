#pragma once
// Byte-level byte pair encoding: tokens are byte strings, the 256 single bytes first, then one new
// token per merge learned from a corpus, so any byte string encodes and decodes back exactly.
//
//   data::BpeTokenizer bpe = data::BpeTokenizer::train(text, 1024, {"<|endoftext|>"});
//   std::vector<std::int64_t> ids = bpe.encode("In the beginning");
//   bpe.decode(ids) == "In the beginning";
//   bpe.save("bpe.json");  data::BpeTokenizer::load("bpe.json");
//
// Pre-tokens: the text is first cut into pieces no merge crosses: a run of letters (ASCII letters
// and every byte >= 0x80, so UTF-8 characters stay whole), a run of digits, a run of other
// printable ASCII (punctuation), each with the one space before it when there is one, and runs of
// whitespace. Special tokens are matched in the text before that, longest first, and never split.
//
// Training counts the pre-tokens once, then repeats: merge the most frequent adjacent pair of
// tokens (ties: the pair of smaller ids), updating the pair counts of only the distinct pre-tokens
// that held it, never rescanning the text. Encoding applies the merges in the order they were
// learned (the lowest-ranked adjacent pair first), as training did, with a cache of pre-tokens:
// one tokenizer must not encode on two threads at once (copies may).

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tapegrad::data {

class BpeTokenizer {
 public:
  // The 256 byte tokens and no merges.
  BpeTokenizer();

  // Learns merges from text until the vocabulary (bytes, merges and special tokens) has vocab_size
  // tokens, or no pair occurs twice. ValueError when vocab_size is below 256 + the special tokens,
  // or a special token is empty or given twice.
  static BpeTokenizer train(std::string_view text, std::int64_t vocab_size,
                            const std::vector<std::string>& special_tokens = {});

  std::vector<std::int64_t> encode(std::string_view text) const;
  // IndexError naming the id when one is outside the vocabulary (as Vocab::decode).
  std::string decode(const std::vector<std::int64_t>& ids) const;

  std::int64_t vocab_size() const { return static_cast<std::int64_t>(tokens_.size()); }
  // The bytes of token id (a special token's text); IndexError outside the vocabulary.
  const std::string& token(std::int64_t id) const;
  // The id of a special token; ValueError when it is not one.
  std::int64_t special_id(const std::string& special) const;
  // The merges in the order learned: the token ids each joins; merge r makes token 256 + r.
  const std::vector<std::pair<std::int64_t, std::int64_t>>& merges() const { return merges_; }

  // JSON {"format": "tapegrad-bpe", "merges": [[a, b], ...], "special_tokens": [...]}, written
  // atomically. load: IoError when the file cannot be read or is not JSON; ValueError naming the
  // file and the field for any other departure from that form, or merges that spell more than 2^28
  // bytes of tokens in all.
  void save(const std::string& path) const;
  static BpeTokenizer load(const std::string& path);

 private:
  // Builds tokens_, ranks_ and the special tokens' ids from merges_ and special_.
  void finish();
  // Appends the ids of one pre-token (a piece no merge crosses).
  void encode_piece(std::string_view piece, std::vector<std::int64_t>& out) const;
  // token(id) for op, whose name the IndexError carries.
  const std::string& token_of(std::int64_t id, const char* op) const;

  std::vector<std::pair<std::int64_t, std::int64_t>> merges_;
  std::vector<std::string> special_;                       // in id order, after the merges' tokens
  std::vector<std::string> tokens_;                        // bytes of each id
  std::unordered_map<std::uint64_t, std::int64_t> ranks_;  // (a << 32 | b) -> merge rank
  std::vector<std::size_t> special_by_length_;             // positions in special_, longest first
  mutable std::unordered_map<std::string, std::vector<std::int64_t>> cache_;
};

// The pre-tokens of text (see above), in order; their concatenation is text.
std::vector<std::string_view> bpe_pieces(std::string_view text);

}  // namespace tapegrad::data
