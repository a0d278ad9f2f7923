#include "tapegrad/nn/key_map.h"

#include <algorithm>

#include "tapegrad/autograd/error.h"

namespace tapegrad::nn {

namespace {

std::vector<std::string> split_components(const std::string& name, const char* what) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = name.find('.', start);
    parts.push_back(name.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (parts.back().empty())
      throw ValueError(message("KeyMap::", what, ": \"", name, "\" has an empty path component"));
    if (dot == std::string::npos) return parts;
    start = dot + 1;
  }
}

std::string join_components(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& part : parts) {
    if (!out.empty()) out += '.';
    out += part;
  }
  return out;
}

// Replaces every non-overlapping run of `from` in key's components by `to`, left to right.
std::string replace_components(const std::string& key, const std::vector<std::string>& from,
                               const std::vector<std::string>& to) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = key.find('.', start);
    parts.push_back(key.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < parts.size()) {
    if (i + from.size() <= parts.size() && std::equal(from.begin(), from.end(), parts.begin() + i)) {
      out.insert(out.end(), to.begin(), to.end());
      i += from.size();
    } else {
      out.push_back(parts[i++]);
    }
  }
  return join_components(out);
}

Tensor transposed(const Tensor& t, const std::string& key) {
  if (t.dim() != 2)
    throw ShapeError("KeyMap: \"" + key + "\" is to be transposed but has shape " + t.shape().str() +
                     "; only 2-D entries can be");
  return t.transpose(0, 1).contiguous();
}

}  // namespace

bool glob_match(const std::string& pattern, const std::string& key) {
  // Greedy matching with backtracking to the last '*': linear in practice for short patterns.
  std::size_t p = 0, k = 0, star = std::string::npos, resume = 0;
  while (k < key.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = k;
    } else if (p < pattern.size() && pattern[p] == key[k]) {
      ++p;
      ++k;
    } else if (star != std::string::npos) {
      p = star + 1;
      k = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

KeyMap& KeyMap::rename(const std::string& from, const std::string& to) {
  renames_.push_back({split_components(from, "rename"), split_components(to, "rename")});
  return *this;
}

KeyMap& KeyMap::map(KeyFunction to_module, KeyFunction to_source) {
  if (!to_module) throw ValueError("KeyMap::map: the function is empty");
  to_module_ = std::move(to_module);
  to_source_ = std::move(to_source);
  return *this;
}

KeyMap& KeyMap::ignore(const std::string& pattern) {
  ignores_.push_back(pattern);
  return *this;
}

KeyMap& KeyMap::transpose(const std::string& pattern) {
  transposes_.push_back(pattern);
  return *this;
}

std::string KeyMap::to_module_key(const std::string& source_key) const {
  std::string key = source_key;
  for (const Rename& r : renames_) key = replace_components(key, r.from, r.to);
  return to_module_ ? to_module_(key) : key;
}

std::string KeyMap::to_source_key(const std::string& module_key) const {
  std::string key = module_key;
  if (to_module_) {
    if (!to_source_)
      throw ValueError("KeyMap: cannot name \"" + module_key +
                       "\" in the source: the map's function has no inverse (map(to_module, to_source))");
    key = to_source_(key);
  }
  for (auto r = renames_.rbegin(); r != renames_.rend(); ++r) key = replace_components(key, r->to, r->from);
  return key;
}

bool KeyMap::ignores(const std::string& source_key) const {
  return std::any_of(ignores_.begin(), ignores_.end(),
                     [&](const std::string& pattern) { return glob_match(pattern, source_key); });
}

bool KeyMap::transposes(const std::string& module_key) const {
  return std::any_of(transposes_.begin(), transposes_.end(),
                     [&](const std::string& pattern) { return glob_match(pattern, module_key); });
}

NamedTensors KeyMap::to_module(const NamedTensors& source) const {
  NamedTensors out;
  out.reserve(source.size());
  for (const auto& [name, tensor] : source) {
    if (ignores(name)) continue;
    std::string key = to_module_key(name);
    Tensor value = transposes(key) ? transposed(tensor, name) : tensor;
    out.emplace_back(std::move(key), std::move(value));
  }
  return out;
}

NamedTensors KeyMap::to_source(const NamedTensors& module_state) const {
  NamedTensors out;
  out.reserve(module_state.size());
  for (const auto& [name, tensor] : module_state)
    out.emplace_back(to_source_key(name), transposes(name) ? transposed(tensor, name) : tensor);
  return out;
}

KeyMap pytorch_key_map() {
  return KeyMap().rename("linear1", "ff.fc1").rename("linear2", "ff.fc2").rename("multihead_attn", "cross_attn");
}

}  // namespace tapegrad::nn
