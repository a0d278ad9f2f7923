// Appending to and truncating metrics.jsonl. See metrics.h.

#include "tapegrad/train/metrics.h"

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tapegrad/autograd/error.h"
#include "tapegrad/io/file.h"
#include "tapegrad/io/json.h"

namespace tapegrad::train {

void MetricsFile::append(const std::string& line) const {
  if (path_.empty()) return;
  std::ofstream out(path_, std::ios::app | std::ios::binary);
  out << line << '\n';
  out.flush();
  if (!out) throw IoError("Trainer: cannot append to " + path_);
}

namespace {

// Whether a line of metrics.jsonl stays on a resume from `step`: a JSON object with an integer
// "step" <= step (an unsigned one beyond int64 is not <= anything) and "end_of_run", if present,
// false. Lines torn by a crash, or not of this shape, go.
bool kept_line(const std::string& line, const std::string& path, std::int64_t step) {
  nlohmann::json j;
  try {
    j = io::parse_json(line, path);
  } catch (const IoError&) {
    return false;
  }
  if (!j.is_object()) return false;
  const auto s = j.find("step");
  if (s == j.end() || !s->is_number_integer()) return false;
  if (s->is_number_unsigned() ? s->get<std::uint64_t>() > static_cast<std::uint64_t>(step)
                              : s->get<std::int64_t>() > step)
    return false;
  const auto end = j.find("end_of_run");
  return end == j.end() || (end->is_boolean() && !end->get<bool>());
}

// Removes what an interrupted write_file_atomic of path left: "<path>.tmp.<pid>.<n>" files.
void remove_stale_temporaries(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path file(path);
  const std::string prefix = file.filename().string() + ".tmp.";
  std::error_code ec;
  const fs::path dir = file.has_parent_path() ? file.parent_path() : fs::path(".");
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.path().filename().string().rfind(prefix, 0) == 0) fs::remove(entry.path(), ec);
}

}  // namespace

void MetricsFile::truncate_after(std::int64_t step) const {
  if (path_.empty()) return;
  remove_stale_temporaries(path_);
  std::ifstream in(path_, std::ios::binary);
  if (!in) return;
  std::string kept, line;
  bool changed = false;
  while (std::getline(in, line)) {
    if (kept_line(line, path_, step)) kept += line + '\n';
    else changed = true;
  }
  in.close();
  if (!changed) return;
  io::with_caller("Trainer", [&] { io::write_file_atomic(path_, kept); });
}

}  // namespace tapegrad::train
