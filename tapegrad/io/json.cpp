// The JSON reader for untrusted text: depth limit, duplicate keys, typed errors. See json.h.

#include "tapegrad/io/json.h"

#include <set>
#include <vector>

#include "tapegrad/autograd/error.h"
#include "tapegrad/io/file.h"

namespace tapegrad::io {

namespace {

using json = nlohmann::json;

// Longest piece of nlohmann's own message kept: it quotes the token it stopped at, which in a
// hostile file can be megabytes long.
constexpr std::size_t kMaxReasonChars = 160;

std::string cut(std::string text, std::size_t max_chars) {
  if (text.size() > max_chars) text = text.substr(0, max_chars > 3 ? max_chars - 3 : 0) + "...";
  return text;
}

// nlohmann's message without its "[json.exception.parse_error.101] " prefix, cut short.
std::string reason(const json::exception& e) {
  std::string text = e.what();
  if (!text.empty() && text[0] == '[') {
    const auto close = text.find("] ");
    if (close != std::string::npos) text = text.substr(close + 2);
  }
  return cut(text, kMaxReasonChars);
}

// One open array or object while parsing, to name where a problem is and to find duplicate keys.
struct Level {
  bool object = false;
  std::set<std::string> keys;  // objects: the keys seen so far
  std::string key;             // objects: the key whose value is being read
  std::size_t index = 0;       // arrays: the index of the element being read
};

// The path to the value being read ("a.b[2].c"), its last kMaxPathChars characters when longer
// (keys may be of any length).
constexpr std::size_t kMaxPathChars = 120;
std::string path_of(const std::vector<Level>& levels) {
  std::string path;
  for (const Level& level : levels) {
    if (level.object) {
      if (!level.key.empty()) path += (path.empty() ? "" : ".") + level.key;
    } else {
      path += "[" + std::to_string(level.index) + "]";
    }
  }
  return path.size() > kMaxPathChars ? "..." + path.substr(path.size() - (kMaxPathChars - 3)) : path;
}

void append_excerpt(const json& value, std::string& out, std::size_t limit) {
  if (out.size() > limit) return;
  if (value.is_array()) {
    out += '[';
    bool first = true;
    for (const json& element : value) {
      if (out.size() > limit) return;
      if (!first) out += ',';
      first = false;
      append_excerpt(element, out, limit);
    }
    out += ']';
  } else if (value.is_object()) {
    out += '{';
    bool first = true;
    for (auto it = value.begin(); it != value.end(); ++it) {
      if (out.size() > limit) return;
      if (!first) out += ',';
      first = false;
      append_excerpt(json(it.key()), out, limit);
      out += ':';
      append_excerpt(it.value(), out, limit);
    }
    out += '}';
  } else if (value.is_string()) {
    // Only the first characters are rendered; a cut inside a UTF-8 sequence is replaced, not thrown.
    const std::string& s = value.get_ref<const std::string&>();
    out += json(s.substr(0, limit + 1)).dump(-1, ' ', false, json::error_handler_t::replace);
  } else {
    out += value.dump();
  }
}

}  // namespace

json parse_json(std::string_view text, const std::string& source, int max_depth) {
  std::vector<Level> levels;
  auto fail = [&](const std::string& why) -> IoError {
    const std::string path = path_of(levels);
    return IoError(source + ": " + why + (path.empty() ? "" : " (at " + path + ")"));
  };
  // Counts a finished value as one element of the array it is in.
  auto next_element = [&]() {
    if (!levels.empty() && !levels.back().object) ++levels.back().index;
  };
  try {
    return json::parse(text.begin(), text.end(), [&](int depth, json::parse_event_t event, json& parsed) {
      switch (event) {
        case json::parse_event_t::object_start:
        case json::parse_event_t::array_start:
          if (depth + 1 > max_depth) throw fail("JSON nested more than " + std::to_string(max_depth) + " levels deep");
          levels.push_back(Level{event == json::parse_event_t::object_start, {}, {}, 0});
          break;
        case json::parse_event_t::key: {
          Level& level = levels.back();
          level.key = parsed.get<std::string>();
          if (!level.keys.insert(level.key).second)
            throw fail("duplicate key " + json_excerpt(parsed) + " in one object");
          break;
        }
        case json::parse_event_t::object_end:
        case json::parse_event_t::array_end:
          levels.pop_back();
          next_element();
          break;
        case json::parse_event_t::value:
          next_element();
          break;
      }
      return true;
    });
  } catch (const json::parse_error& e) {
    throw fail("not valid JSON: " + reason(e));
  } catch (const json::exception& e) {
    // out_of_range 406: a number beyond a double's range.
    throw fail(reason(e));
  }
}

json read_json_file(const std::string& path, int max_depth) { return parse_json(read_file(path), path, max_depth); }

std::string json_excerpt(const json& value, std::size_t max_chars) {
  std::string out;
  append_excerpt(value, out, max_chars);
  return cut(std::move(out), max_chars);
}

}  // namespace tapegrad::io
