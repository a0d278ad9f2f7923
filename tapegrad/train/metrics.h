#pragma once
// run_dir/metrics.jsonl, the Trainer's log: one JSON object per line (the line formats are in trainer.h).
// Lines are appended as they come; when a run resumes from the checkpoint at step k, the lines an
// uninterrupted run would not have (step > k, end_of_run, a torn last line) are dropped first.

#include <cstdint>
#include <string>
#include <utility>

namespace tapegrad::train {

class MetricsFile {
 public:
  // path empty: nothing is ever written.
  explicit MetricsFile(std::string path) : path_(std::move(path)) {}

  // Appends line and a newline; IoError naming the file when that fails.
  void append(const std::string& line) const;
  // Keeps the lines with an integer "step" <= step and no "end_of_run" other than false, rewriting the
  // file atomically when anything is dropped, and removes temporary files an interrupted rewrite left.
  // A missing file is left missing.
  void truncate_after(std::int64_t step) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace tapegrad::train
