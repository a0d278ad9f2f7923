#include "tapegrad/data/vocab.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tapegrad/autograd/error.h"
#include "tapegrad/io/file.h"
#include "tapegrad/io/json.h"

namespace tapegrad::data {

namespace {

const char* const kSpecials[Vocab::kNumSpecials] = {"<pad>", "<unk>", "<sos>", "<eos>"};

}  // namespace

Vocab::Vocab() {
  for (const char* special : kSpecials) add(special, "Vocab");
}

void Vocab::add(const std::string& token, const char* where) {
  if (!ids_.emplace(token, size()).second)
    throw ValueError(message(where, ": token '", token, "' appears more than once"));
  tokens_.push_back(token);
}

Vocab Vocab::build(const std::vector<std::vector<std::string>>& docs, const VocabOptions& options) {
  std::unordered_map<std::string, std::int64_t> counts;
  for (const auto& doc : docs)
    for (const auto& token : doc) ++counts[token];
  return from_counts_named(counts, options, "Vocab::build");
}

Vocab Vocab::from_counts(const std::unordered_map<std::string, std::int64_t>& counts, const VocabOptions& options) {
  return from_counts_named(counts, options, "Vocab::from_counts");
}

Vocab Vocab::from_counts_named(const std::unordered_map<std::string, std::int64_t>& counts, const VocabOptions& options,
                               const char* where) {
  if (options.min_freq < 1) throw ValueError(message(where, ": min_freq must be >= 1, got ", options.min_freq));
  if (options.max_size != 0 && options.max_size < kNumSpecials)
    throw ValueError(message(where, ": max_size must be 0 (no limit) or >= 4 (the specials), got ", options.max_size));
  Vocab vocab;
  std::vector<std::pair<std::string, std::int64_t>> kept;
  for (const auto& [token, count] : counts)
    if (count >= options.min_freq && !vocab.contains(token)) kept.emplace_back(token, count);
  // The order must not depend on the hash map's iteration order, hence the full tie-break.
  std::sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  if (options.max_size > 0 && static_cast<std::int64_t>(kept.size()) > options.max_size - kNumSpecials)
    kept.resize(static_cast<std::size_t>(options.max_size - kNumSpecials));
  for (const auto& entry : kept) vocab.add(entry.first, where);
  return vocab;
}

Vocab Vocab::from_tokens(const std::vector<std::string>& tokens) {
  Vocab vocab;
  for (const auto& token : tokens) vocab.add(token, "Vocab::from_tokens");
  return vocab;
}

std::int64_t Vocab::id(const std::string& token) const {
  auto it = ids_.find(token);
  return it == ids_.end() ? kUnk : it->second;
}

const std::string& Vocab::token(std::int64_t id) const {
  if (id < 0 || id >= size())
    throw IndexError(message("Vocab::token: id ", id, " is out of range for a vocabulary of size ", size()));
  return tokens_[static_cast<std::size_t>(id)];
}

std::vector<std::int64_t> Vocab::encode(const std::vector<std::string>& tokens, bool add_sos, bool add_eos) const {
  std::vector<std::int64_t> ids;
  ids.reserve(tokens.size() + 2);
  if (add_sos) ids.push_back(kSos);
  for (const auto& token : tokens) ids.push_back(id(token));
  if (add_eos) ids.push_back(kEos);
  return ids;
}

std::vector<std::string> Vocab::decode(const std::vector<std::int64_t>& ids, bool skip_special) const {
  std::vector<std::string> out;
  out.reserve(ids.size());
  for (std::int64_t i : ids) {
    if (i < 0 || i >= size())
      throw IndexError(message("Vocab::decode: id ", i, " is out of range for a vocabulary of size ", size()));
    if (skip_special && (i == kPad || i == kSos || i == kEos)) continue;
    out.push_back(tokens_[static_cast<std::size_t>(i)]);
  }
  return out;
}

void Vocab::save(const std::string& path) const {
  nlohmann::json j;
  j["format"] = "tapegrad.vocab";
  j["version"] = 1;
  j["tokens"] = tokens_;
  std::string text;
  try {
    text = j.dump(1, '\t');
  } catch (const nlohmann::json::exception& e) {
    throw ValueError("Vocab::save: '" + path + "': a token is not valid UTF-8 (" + e.what() + ")");
  }
  io::write_file_atomic(path, text + "\n");
}

Vocab Vocab::load(const std::string& path) {
  nlohmann::json j = io::with_caller("Vocab::load", [&] { return io::read_json_file(path); });
  const std::string where = "Vocab::load: '" + path + "': ";
  if (!j.is_object()) throw ValueError(where + "the top level must be a JSON object");
  if (j.contains("format") && j["format"] != "tapegrad.vocab")
    throw ValueError(where + "field 'format' must be \"tapegrad.vocab\", got " + io::json_excerpt(j["format"]));
  if (j.contains("version") && j["version"] != 1)
    throw ValueError(where + "field 'version' must be 1, got " + io::json_excerpt(j["version"]));
  if (!j.contains("tokens")) throw ValueError(where + "field 'tokens' is missing");
  const auto& tokens = j["tokens"];
  if (!tokens.is_array()) throw ValueError(where + "field 'tokens' must be an array");
  if (tokens.size() < static_cast<std::size_t>(kNumSpecials))
    throw ValueError(message(where, "field 'tokens' has ", tokens.size(), " entries, fewer than the 4 specials"));
  Vocab vocab;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const std::string field = "tokens[" + std::to_string(i) + "]";
    if (!tokens[i].is_string()) throw ValueError(where + "field '" + field + "' must be a string");
    const std::string token = tokens[i].get<std::string>();
    if (i < static_cast<std::size_t>(kNumSpecials)) {
      if (token != kSpecials[i])
        throw ValueError(where + "field '" + field + "' must be the special \"" + kSpecials[i] + "\", got " +
                         io::json_excerpt(nlohmann::json(token), 60));
      continue;
    }
    if (vocab.contains(token))
      throw ValueError(message(where, "field '", field, "' repeats the token ",
                               io::json_excerpt(nlohmann::json(token), 60), " (id ", vocab.id(token), ")"));
    vocab.add(token, "Vocab::load");
  }
  return vocab;
}

}  // namespace tapegrad::data
