#pragma once
// Files of one example run and how they are written. A run directory runs/<name>/ holds
//   config.json    the resolved configuration the run used
//   metrics.jsonl  one JSON object per logged step / evaluation (written by train::Trainer)
//   checkpoint/    the Trainer's last checkpoint (model, optimiser, trainer state)
//   summary.json   the run's results (what the README's tables quote)
//   loss.svg       the loss curve drawn from metrics.jsonl
// plus whatever the example adds (vocabulary, best model, attention pictures). Every file is
// written with io::write_file_atomic (tapegrad/io/file.h), so a crash never leaves a half-written
// file behind.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "examples/common/config.h"

namespace tapegrad::examples {

// Pretty-printed JSON (indent 2) plus a newline, atomically.
void write_json_atomic(const std::string& path, const nlohmann::json& value);
// Parses one JSON object per non-empty line; IoError naming the file and line on a bad line.
std::vector<nlohmann::json> read_jsonl(const std::string& path);

// The loss curve of a metrics.jsonl: the training "loss" per step and, when evaluation lines
// carry one of `eval_keys` (e.g. "val_loss"), that series too. Returns the SVG text.
std::string loss_plot_from_metrics(const std::vector<nlohmann::json>& lines, const std::string& title,
                                   const std::vector<std::string>& eval_keys = {"val_loss"}, bool log_y = true);

class RunDir {
 public:
  // Creates the directory (and its parents) if needed; IoError when that fails.
  explicit RunDir(std::string path);
  const std::string& path() const { return path_; }
  // path/name.
  std::string file(const std::string& name) const;
  bool exists(const std::string& name) const;

  // Removes what an earlier run left (metrics.jsonl, checkpoint/, summary.json, loss.svg), so a
  // fresh run does not resume or append to it. Other files are left alone.
  void clear_previous_run() const;
  void write_config(const Config& config) const { write_json_atomic(file("config.json"), config.to_json()); }
  // Before resuming: config.json must exist and equal config on every key but `free_keys` (those that
  // do not change the result, e.g. resume, progress). ConfigError naming the first differing key.
  void check_same_config(const Config& config, const std::vector<std::string>& free_keys) const;
  void write_summary(const nlohmann::json& summary) const { write_json_atomic(file("summary.json"), summary); }
  // Draws metrics.jsonl into loss.svg; false (and nothing written) when there is no metrics file.
  bool write_loss_plot(const std::string& title) const;

 private:
  std::string path_;
};

}  // namespace tapegrad::examples
