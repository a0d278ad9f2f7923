#pragma once
// JSON from files a user or another program wrote: the library's one JSON reader. Untrusted text
// either parses into a value that is safe to walk, or throws IoError naming the source and what
// is wrong; nlohmann's own exceptions never escape. For the library and the examples; not
// installed, since the public headers do not include nlohmann_json.
//
//   nlohmann::json j = io::parse_json(text, "runs/x/trainer.json");
//   nlohmann::json c = io::read_json_file("configs/spam.json");
//   throw IoError("field 'step' must be an integer, got " + io::json_excerpt(j["step"]));
//
// Beyond plain JSON, parse_json rejects
//   - nesting deeper than max_depth arrays and objects (a value 100,000 levels deep would
//     overflow the stack of anything that walks it recursively, dump() included);
//   - a key given twice in one object (nlohmann would keep the last silently);
//   - numbers outside the range of a double (1e400), which nlohmann reports as out_of_range.

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace tapegrad::io {

// Deep enough for every file tapegrad reads or writes (they nest 3 levels at most).
constexpr int kMaxJsonDepth = 64;

// Parses text; source names it in messages ("<source>: not valid JSON: ...").
nlohmann::json parse_json(std::string_view text, const std::string& source, int max_depth = kMaxJsonDepth);

// read_file(path) then parse_json; IoError for either step, naming path.
nlohmann::json read_json_file(const std::string& path, int max_depth = kMaxJsonDepth);

// A value as short JSON text for a message: at most max_chars characters (cut with "..."),
// without rendering a large array or object whole.
std::string json_excerpt(const nlohmann::json& value, std::size_t max_chars = 80);

}  // namespace tapegrad::io
