#include "tapegrad/data/bpe.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <queue>
#include <set>
#include <tuple>

#include "tapegrad/autograd/error.h"
#include "tapegrad/io/file.h"
#include "tapegrad/io/json.h"

namespace tapegrad::data {

namespace {

constexpr std::int64_t kByteTokens = 256;

enum class ByteClass { kLetter, kDigit, kSpace, kOther };

ByteClass byte_class(unsigned char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80) return ByteClass::kLetter;
  if (c >= '0' && c <= '9') return ByteClass::kDigit;
  if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f') return ByteClass::kSpace;
  return ByteClass::kOther;
}

std::uint64_t pair_key(std::int64_t a, std::int64_t b) {
  return (static_cast<std::uint64_t>(a) << 32) | static_cast<std::uint64_t>(b);
}

// The text cut at the special tokens: emit(piece, -1) for the text between them and
// emit(special, s) for special_tokens[s], in order. `longest_first` lists the specials' positions
// in special_tokens, longest first, so that a special containing another is matched whole.
template <class F>
void split_specials(std::string_view text, const std::vector<std::string>& special_tokens,
                    const std::vector<std::size_t>& longest_first, F emit) {
  std::size_t start = 0, i = 0;
  while (i < text.size()) {
    std::int64_t found = -1;
    for (const std::size_t s : longest_first)
      if (text.compare(i, special_tokens[s].size(), special_tokens[s]) == 0) {
        found = static_cast<std::int64_t>(s);
        break;
      }
    if (found < 0) {
      ++i;
      continue;
    }
    const std::string& special = special_tokens[static_cast<std::size_t>(found)];
    if (i > start) emit(text.substr(start, i - start), std::int64_t{-1});
    emit(std::string_view(special), found);
    i += special.size();
    start = i;
  }
  if (start < text.size()) emit(text.substr(start), std::int64_t{-1});
}

// A piece's bytes as token ids 0..255.
std::vector<std::int64_t> byte_ids(std::string_view piece) {
  std::vector<std::int64_t> ids;
  ids.reserve(piece.size());
  for (const char c : piece) ids.push_back(static_cast<unsigned char>(c));
  return ids;
}

// Merges every non-overlapping occurrence of (a, b) in symbols, left to right, into merged.
bool merge_pair(std::vector<std::int64_t>& symbols, std::int64_t a, std::int64_t b, std::int64_t merged) {
  std::size_t out = 0;
  bool changed = false;
  for (std::size_t i = 0; i < symbols.size(); ++i) {
    if (i + 1 < symbols.size() && symbols[i] == a && symbols[i + 1] == b) {
      symbols[out++] = merged;
      ++i;
      changed = true;
    } else {
      symbols[out++] = symbols[i];
    }
  }
  symbols.resize(out);
  return changed;
}

}  // namespace

std::vector<std::string_view> bpe_pieces(std::string_view text) {
  std::vector<std::string_view> pieces;
  const std::size_t n = text.size();
  const auto cls = [&](std::size_t i) { return byte_class(static_cast<unsigned char>(text[i])); };
  std::size_t i = 0;
  while (i < n) {
    std::size_t j = i;
    if (text[i] == ' ' && i + 1 < n && cls(i + 1) != ByteClass::kSpace) {
      // A word, number or run of punctuation with the space before it.
      const ByteClass run = cls(i + 1);
      j = i + 1;
      while (j < n && cls(j) == run) ++j;
    } else if (cls(i) == ByteClass::kSpace) {
      while (j < n && cls(j) == ByteClass::kSpace) ++j;
      // The last space of a run goes with the word after it.
      if (j < n && j - i > 1 && text[j - 1] == ' ') --j;
    } else {
      const ByteClass run = cls(i);
      while (j < n && cls(j) == run) ++j;
    }
    pieces.push_back(text.substr(i, j - i));
    i = j;
  }
  return pieces;
}

BpeTokenizer::BpeTokenizer() { finish(); }

BpeTokenizer BpeTokenizer::train(std::string_view text, std::int64_t vocab_size,
                                 const std::vector<std::string>& special_tokens) {
  BpeTokenizer bpe;
  for (const std::string& special : special_tokens) {
    if (special.empty()) throw ValueError("BpeTokenizer::train: a special token is empty");
    if (std::count(special_tokens.begin(), special_tokens.end(), special) > 1)
      throw ValueError("BpeTokenizer::train: the special token \"" + special + "\" is given twice");
  }
  const auto specials = static_cast<std::int64_t>(special_tokens.size());
  if (vocab_size < kByteTokens + specials)
    throw ValueError(message("BpeTokenizer::train: vocab_size ", vocab_size, " is below the 256 bytes and ", specials,
                             " special tokens"));
  bpe.special_ = special_tokens;
  bpe.finish();  // the specials' matching order, for the split below

  // Each distinct pre-token once, with its count; the text is not read again.
  std::unordered_map<std::string_view, std::int64_t> piece_counts;
  split_specials(text, bpe.special_, bpe.special_by_length_, [&](std::string_view part, std::int64_t special) {
    if (special >= 0) return;
    for (std::string_view piece : bpe_pieces(part)) ++piece_counts[piece];
  });
  std::vector<std::vector<std::int64_t>> words;
  std::vector<std::int64_t> counts;
  words.reserve(piece_counts.size());
  for (const auto& [piece, count] : piece_counts) {
    words.push_back(byte_ids(piece));
    counts.push_back(count);
  }

  // Pair counts over the distinct words, which words hold each pair (possibly stale: checked when
  // used), and a max-heap of (count, pair) whose stale entries are re-pushed when popped.
  std::unordered_map<std::uint64_t, std::int64_t> pair_counts;
  std::unordered_map<std::uint64_t, std::vector<std::int32_t>> holders;
  const auto add_pairs = [&](std::size_t w, std::int64_t sign) {
    const std::vector<std::int64_t>& symbols = words[w];
    for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
      const std::uint64_t key = pair_key(symbols[i], symbols[i + 1]);
      pair_counts[key] += sign * counts[w];
      if (sign > 0) holders[key].push_back(static_cast<std::int32_t>(w));
    }
  };
  for (std::size_t w = 0; w < words.size(); ++w) add_pairs(w, 1);
  // Highest count first; among equal counts the smaller key (the pair of smaller ids).
  using Entry = std::tuple<std::int64_t, std::uint64_t>;
  std::priority_queue<Entry> heap;
  const auto push = [&](std::uint64_t key) {
    heap.emplace(pair_counts[key], std::numeric_limits<std::uint64_t>::max() - key);
  };
  for (const auto& entry : pair_counts) push(entry.first);

  std::vector<std::int64_t> last_merge_seen(words.size(), -1);
  while (kByteTokens + static_cast<std::int64_t>(bpe.merges_.size()) + specials < vocab_size && !heap.empty()) {
    const auto [count, inverted] = heap.top();
    heap.pop();
    const std::uint64_t key = std::numeric_limits<std::uint64_t>::max() - inverted;
    const std::int64_t current = pair_counts[key];
    if (current != count) {
      if (current > 0) push(key);
      continue;
    }
    if (count < 2) break;
    const auto a = static_cast<std::int64_t>(key >> 32), b = static_cast<std::int64_t>(key & 0xFFFFFFFFu);
    const std::int64_t merged = kByteTokens + static_cast<std::int64_t>(bpe.merges_.size());
    const auto rank = static_cast<std::int64_t>(bpe.merges_.size());
    bpe.merges_.emplace_back(a, b);
    std::vector<std::int32_t> held = std::move(holders[key]);
    holders.erase(key);
    for (std::int32_t w32 : held) {
      const auto w = static_cast<std::size_t>(w32);
      if (last_merge_seen[w] == rank) continue;  // listed twice
      last_merge_seen[w] = rank;
      std::vector<std::int64_t> before = words[w];
      if (!merge_pair(before, a, b, merged)) continue;  // a stale listing
      add_pairs(w, -1);
      words[w] = std::move(before);
      add_pairs(w, 1);
      for (std::size_t i = 0; i + 1 < words[w].size(); ++i)
        if (words[w][i] == merged || words[w][i + 1] == merged) push(pair_key(words[w][i], words[w][i + 1]));
    }
    pair_counts.erase(key);
  }
  bpe.finish();
  return bpe;
}

void BpeTokenizer::finish() {
  tokens_.clear();
  ranks_.clear();
  cache_.clear();
  for (std::int64_t byte = 0; byte < kByteTokens; ++byte) tokens_.emplace_back(1, static_cast<char>(byte));
  for (std::size_t r = 0; r < merges_.size(); ++r) {
    const auto [a, b] = merges_[r];
    tokens_.push_back(tokens_[static_cast<std::size_t>(a)] + tokens_[static_cast<std::size_t>(b)]);
    ranks_[pair_key(a, b)] = static_cast<std::int64_t>(r);
  }
  for (const std::string& special : special_) tokens_.push_back(special);
  special_by_length_.resize(special_.size());
  std::iota(special_by_length_.begin(), special_by_length_.end(), std::size_t{0});
  std::stable_sort(special_by_length_.begin(), special_by_length_.end(),
                   [&](std::size_t x, std::size_t y) { return special_[x].size() > special_[y].size(); });
}

void BpeTokenizer::encode_piece(std::string_view piece, std::vector<std::int64_t>& out) const {
  const std::string key(piece);
  if (const auto found = cache_.find(key); found != cache_.end()) {
    out.insert(out.end(), found->second.begin(), found->second.end());
    return;
  }
  std::vector<std::int64_t> symbols = byte_ids(piece);
  for (;;) {
    // The adjacent pair merged earliest in training; merging all its occurrences repeats training.
    std::int64_t best = std::numeric_limits<std::int64_t>::max();
    for (std::size_t i = 0; i + 1 < symbols.size(); ++i)
      if (const auto r = ranks_.find(pair_key(symbols[i], symbols[i + 1])); r != ranks_.end())
        best = std::min(best, r->second);
    if (best == std::numeric_limits<std::int64_t>::max()) break;
    const auto [a, b] = merges_[static_cast<std::size_t>(best)];
    merge_pair(symbols, a, b, kByteTokens + best);
  }
  out.insert(out.end(), symbols.begin(), symbols.end());
  cache_.emplace(key, std::move(symbols));
}

std::vector<std::int64_t> BpeTokenizer::encode(std::string_view text) const {
  std::vector<std::int64_t> ids;
  const std::int64_t first_special = kByteTokens + static_cast<std::int64_t>(merges_.size());
  split_specials(text, special_, special_by_length_, [&](std::string_view part, std::int64_t special) {
    if (special >= 0) {
      ids.push_back(first_special + special);
      return;
    }
    for (std::string_view piece : bpe_pieces(part)) encode_piece(piece, ids);
  });
  return ids;
}

std::string BpeTokenizer::decode(const std::vector<std::int64_t>& ids) const {
  std::string text;
  for (std::int64_t id : ids) text += token_of(id, "BpeTokenizer::decode");
  return text;
}

const std::string& BpeTokenizer::token(std::int64_t id) const { return token_of(id, "BpeTokenizer::token"); }

const std::string& BpeTokenizer::token_of(std::int64_t id, const char* op) const {
  if (id < 0 || id >= vocab_size())
    throw IndexError(message(op, ": token id ", id, " is outside the vocabulary of ", vocab_size()));
  return tokens_[static_cast<std::size_t>(id)];
}

std::int64_t BpeTokenizer::special_id(const std::string& special) const {
  const auto found = std::find(special_.begin(), special_.end(), special);
  if (found == special_.end()) throw ValueError("BpeTokenizer: \"" + special + "\" is not a special token");
  return kByteTokens + static_cast<std::int64_t>(merges_.size()) + (found - special_.begin());
}

void BpeTokenizer::save(const std::string& path) const {
  nlohmann::json j;
  j["format"] = "tapegrad-bpe";
  j["merges"] = nlohmann::json::array();
  for (const auto& [a, b] : merges_) j["merges"].push_back({a, b});
  j["special_tokens"] = special_;
  std::string text;
  try {
    text = j.dump();  // one line: a merge per array of two ids
  } catch (const nlohmann::json::exception& e) {
    throw ValueError("BpeTokenizer::save: '" + path + "': a special token is not valid UTF-8 (" + e.what() + ")");
  }
  io::write_file_atomic(path, text + "\n");
}

BpeTokenizer BpeTokenizer::load(const std::string& path) {
  nlohmann::json j = io::with_caller("BpeTokenizer::load", [&] { return io::read_json_file(path); });
  const std::string where = "BpeTokenizer::load: '" + path + "': ";
  if (!j.is_object()) throw ValueError(where + "the top level must be a JSON object");
  if (!j.contains("format") || j["format"] != "tapegrad-bpe")
    throw ValueError(where + "field 'format' must be \"tapegrad-bpe\", got " +
                     (j.contains("format") ? io::json_excerpt(j["format"]) : std::string("nothing")));
  if (!j.contains("merges") || !j["merges"].is_array()) throw ValueError(where + "field 'merges' must be an array");
  BpeTokenizer bpe;
  const auto& merges = j["merges"];
  // Each merge's token is its two parts spelled out: a chain of merges that doubles one token each
  // time asks for 2^r bytes from a file of a few hundred, so the spelled-out bytes are bounded.
  constexpr std::int64_t kMaxSpelledBytes = std::int64_t{1} << 28;
  std::vector<std::int64_t> token_bytes(static_cast<std::size_t>(kByteTokens), 1);
  std::int64_t spelled_bytes = kByteTokens;
  std::set<std::pair<std::int64_t, std::int64_t>> seen;
  for (std::size_t r = 0; r < merges.size(); ++r) {
    const std::string field = "merges[" + std::to_string(r) + "]";
    const auto& m = merges[r];
    const std::int64_t known = kByteTokens + static_cast<std::int64_t>(r);
    const auto is_id = [&](const nlohmann::json& v) {
      return v.is_number_integer() && v.get<std::int64_t>() >= 0 && v.get<std::int64_t>() < known;
    };
    if (!m.is_array() || m.size() != 2 || !is_id(m[0]) || !is_id(m[1]))
      throw ValueError(
          message(where, "field '", field, "' must be two ids below ", known, ", got ", io::json_excerpt(m)));
    const std::pair<std::int64_t, std::int64_t> merge{m[0].get<std::int64_t>(), m[1].get<std::int64_t>()};
    if (!seen.insert(merge).second)
      throw ValueError(where + "field '" + field + "' repeats an earlier merge " + io::json_excerpt(m));
    const std::int64_t bytes =
        token_bytes[static_cast<std::size_t>(merge.first)] + token_bytes[static_cast<std::size_t>(merge.second)];
    spelled_bytes += bytes;
    if (spelled_bytes > kMaxSpelledBytes)
      throw ValueError(message(where, "field '", field, "' makes the merged tokens ", spelled_bytes,
                               " bytes long in all, more than ", kMaxSpelledBytes,
                               " (merges that keep doubling a token?)"));
    token_bytes.push_back(bytes);
    bpe.merges_.push_back(merge);
  }
  if (j.contains("special_tokens")) {
    const auto& specials = j["special_tokens"];
    if (!specials.is_array()) throw ValueError(where + "field 'special_tokens' must be an array");
    for (std::size_t s = 0; s < specials.size(); ++s) {
      const std::string field = "special_tokens[" + std::to_string(s) + "]";
      if (!specials[s].is_string() || specials[s].get<std::string>().empty())
        throw ValueError(where + "field '" + field + "' must be a non-empty string");
      const std::string special = specials[s].get<std::string>();
      if (std::find(bpe.special_.begin(), bpe.special_.end(), special) != bpe.special_.end())
        throw ValueError(where + "field '" + field + "' repeats the special token \"" + special + "\"");
      bpe.special_.push_back(special);
    }
  }
  bpe.finish();
  return bpe;
}

}  // namespace tapegrad::data
