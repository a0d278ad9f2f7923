// Appending to and truncating metrics.jsonl. See metrics.h.

#include "tapegrad/train/metrics.h"

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

void MetricsFile::truncate_after(std::int64_t step) const {
  if (path_.empty()) return;
  std::ifstream in(path_, std::ios::binary);
  if (!in) return;
  std::string kept, line;
  bool changed = false;
  while (std::getline(in, line)) {
    bool keep = false;
    try {
      const nlohmann::json j = io::parse_json(line, path_);
      keep = j.is_object() && j.contains("step") && j["step"].is_number_integer() &&
             j["step"].get<std::int64_t>() <= step && !j.value("end_of_run", false);
    } catch (const IoError&) {
      keep = false;  // a line torn by a crash
    }
    if (keep) kept += line + '\n';
    else changed = true;
  }
  in.close();
  if (!changed) return;
  try {
    io::write_file_atomic(path_, kept);
  } catch (const IoError& e) {
    throw IoError(std::string("Trainer: ") + e.what());
  }
}

}  // namespace tapegrad::train
