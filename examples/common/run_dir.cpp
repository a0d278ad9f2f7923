#include "examples/common/run_dir.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "examples/common/svg.h"
#include "tapegrad/autograd/error.h"
#include "tapegrad/io/file.h"
#include "tapegrad/io/json.h"

namespace tapegrad::examples {

namespace fs = std::filesystem;

void write_json_atomic(const std::string& path, const nlohmann::json& value) {
  io::write_file_atomic(path, value.dump(2) + "\n");
}

std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::istringstream in(io::read_file(path));
  std::vector<nlohmann::json> lines;
  std::string line;
  for (std::size_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    lines.push_back(io::parse_json(line, path + ":" + std::to_string(number)));
    if (!lines.back().is_object()) throw IoError(message(path, ":", number, ": expected a JSON object"));
  }
  return lines;
}

std::string loss_plot_from_metrics(const std::vector<nlohmann::json>& lines, const std::string& title,
                                   const std::vector<std::string>& eval_keys, bool log_y) {
  LinePlot plot;
  plot.title = title;
  plot.x_label = "step";
  plot.y_label = "loss";
  plot.log_y = log_y;
  Series train{"train loss", {}, {}};
  std::vector<Series> evals;
  for (const std::string& key : eval_keys) evals.push_back({key, {}, {}});
  for (const nlohmann::json& line : lines) {
    if (!line.contains("step") || !line["step"].is_number()) continue;
    // Steps are logged after the update: step s has s updates done, so the curve starts near 1.
    const double step = line["step"].get<double>();
    if (line.contains("loss") && line["loss"].is_number()) {
      train.x.push_back(step);
      train.y.push_back(line["loss"].get<double>());
    }
    if (line.contains("eval") && line["eval"].is_object()) {
      for (Series& s : evals) {
        const auto it = line["eval"].find(s.name);
        if (it != line["eval"].end() && it->is_number()) {
          s.x.push_back(step);
          s.y.push_back(it->get<double>());
        }
      }
    }
  }
  plot.series.push_back(std::move(train));
  for (Series& s : evals)
    if (!s.x.empty()) plot.series.push_back(std::move(s));
  return line_plot_svg(plot);
}

RunDir::RunDir(std::string path) : path_(std::move(path)) {
  if (path_.empty()) throw IoError("RunDir: empty run directory path");
  std::error_code error;
  fs::create_directories(path_, error);
  if (error || !fs::is_directory(path_)) throw IoError("cannot create run directory " + path_ + ": " + error.message());
}

std::string RunDir::file(const std::string& name) const { return (fs::path(path_) / name).string(); }

bool RunDir::exists(const std::string& name) const { return fs::exists(file(name)); }

void RunDir::check_same_config(const Config& config, const std::vector<std::string>& free_keys) const {
  if (!exists("config.json"))
    throw ConfigError("cannot resume " + path_ + ": it holds no config.json (no earlier run to continue)");
  const nlohmann::json saved = io::read_json_file(file("config.json"));
  const nlohmann::json now = config.to_json();
  auto is_free = [&](const std::string& key) {
    return std::find(free_keys.begin(), free_keys.end(), key) != free_keys.end();
  };
  for (const auto& [key, value] : now.items()) {
    if (is_free(key)) continue;
    if (!saved.contains(key) || saved.at(key) != value)
      throw ConfigError("cannot resume " + path_ + ": --" + key + " is " + io::json_excerpt(value) +
                        " but the run used " +
                        (saved.contains(key) ? io::json_excerpt(saved.at(key)) : std::string("no such key")));
  }
  for (const auto& [key, value] : saved.items())
    if (!now.contains(key) && !is_free(key))
      throw ConfigError("cannot resume " + path_ + ": its config.json has the unknown key '" + key + "'");
}

void RunDir::clear_previous_run() const {
  for (const char* name : {"metrics.jsonl", "summary.json", "loss.svg", "checkpoint"}) {
    std::error_code error;
    fs::remove_all(file(name), error);
    if (error) throw IoError("cannot remove " + file(name) + ": " + error.message());
  }
}

bool RunDir::write_loss_plot(const std::string& title) const {
  if (!exists("metrics.jsonl")) return false;
  write_svg(file("loss.svg"), loss_plot_from_metrics(read_jsonl(file("metrics.jsonl")), title));
  return true;
}

}  // namespace tapegrad::examples
