// The training loop, its metrics file, progress display and checkpoints. See trainer.h for the layout.

#include "tapegrad/train/trainer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <limits>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tapegrad/optim/clip.h"
#include "tapegrad/io/safetensors.h"

namespace tapegrad::train {

namespace {

constexpr const char* kModelGeneratorPrefix = "model.";

namespace fs = std::filesystem;
using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

constexpr const char* kFormat = "tapegrad.trainer";
constexpr int kVersion = 1;
constexpr const char* kTmpPrefix = "checkpoint.tmp-";

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string num(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

std::string errno_text() { return std::strerror(errno); }

void fsync_path(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) throw IoError("Trainer: cannot open " + path + " to sync it: " + errno_text());
  const bool ok = ::fsync(fd) == 0;
  const std::string reason = ok ? "" : errno_text();
  ::close(fd);
  if (!ok) throw IoError("Trainer: cannot fsync " + path + ": " + reason);
}

// Writes text to path and fsyncs it (no rename: used inside a directory that is itself swapped in).
void write_synced(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw IoError("Trainer: cannot create " + path + ": " + errno_text());
  const char* data = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const ssize_t w = ::write(fd, data, left);
    if (w < 0) {
      if (errno == EINTR) continue;
      const std::string reason = errno_text();
      ::close(fd);
      throw IoError("Trainer: cannot write " + path + ": " + reason);
    }
    data += w;
    left -= static_cast<std::size_t>(w);
  }
  if (::fsync(fd) != 0) {
    const std::string reason = errno_text();
    ::close(fd);
    throw IoError("Trainer: cannot fsync " + path + ": " + reason);
  }
  if (::close(fd) != 0) throw IoError("Trainer: cannot close " + path + ": " + errno_text());
}

// Replaces path by text via a synced temporary file and a rename.
void write_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  try {
    write_synced(tmp, text);
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string reason = errno_text();
    ::unlink(tmp.c_str());
    throw IoError("Trainer: cannot rename " + tmp + " to " + path + ": " + reason);
  }
}

// Prefixes the message of a typed load error with the checkpoint file, keeping its type.
template <class F>
void with_file(const std::string& path, F f) {
  const std::string where = "Trainer: checkpoint file " + path + ": ";
  try {
    f();
  } catch (const ShapeError& e) {
    throw ShapeError(where + e.what());
  } catch (const TypeError& e) {
    throw TypeError(where + e.what());
  } catch (const ValueError& e) {
    throw ValueError(where + e.what());
  }
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<long long>(seconds + 0.5);
  std::ostringstream out;
  out << std::setfill('0');
  if (s >= 3600) out << s / 3600 << ':' << std::setw(2) << (s / 60) % 60 << ':' << std::setw(2) << s % 60;
  else out << s / 60 << ':' << std::setw(2) << s % 60;
  return out.str();
}

bool stream_is_terminal(const std::ostream* out) {
  if (out == &std::cerr || out == &std::clog) return ::isatty(::fileno(stderr)) == 1;
  if (out == &std::cout) return ::isatty(::fileno(stdout)) == 1;
  return false;
}

// The bar or the plain lines. Rates are averaged over this call's steps, which keeps the ETA steady.
class ProgressPrinter {
 public:
  ProgressPrinter(Progress mode, std::ostream* out, std::int64_t max_steps, std::int64_t first_step,
                  std::int64_t steps_per_epoch)
      : out_(out),
        max_steps_(max_steps),
        first_step_(first_step),
        steps_per_epoch_(steps_per_epoch),
        start_(Clock::now()),
        last_draw_(start_) {
    if (out_ == nullptr) mode = Progress::Off;
    if (mode == Progress::Auto) mode = stream_is_terminal(out_) ? Progress::Bar : Progress::Lines;
    mode_ = mode;
  }

  // Called after every step; is_log marks the steps that write a metrics line.
  void update(std::int64_t step, double loss, double lr, double grad_norm, bool is_log) {
    if (mode_ == Progress::Off) return;
    const double elapsed = seconds_since(start_);
    const double rate = elapsed > 0 ? static_cast<double>(step - first_step_) / elapsed : 0.0;
    const double eta = rate > 0 ? static_cast<double>(max_steps_ - step) / rate : -1.0;
    std::ostringstream text;
    text << std::setprecision(4);
    if (mode_ == Progress::Lines) {
      if (!is_log) return;
      text << "step " << step << '/' << max_steps_;
      if (steps_per_epoch_ > 0) text << " epoch " << epoch_text(step);
      text << " loss " << loss << " lr " << std::scientific
           << std::setprecision(2) << lr << std::defaultfloat << std::setprecision(4) << " grad_norm " << grad_norm
           << ' ' << std::fixed << std::setprecision(2) << rate << " it/s eta " << format_duration(eta);
      *out_ << text.str() << '\n' << std::flush;
      return;
    }
    // Redrawing a terminal line costs more than a small step: at most ten times a second.
    if (!is_log && step != max_steps_ && std::chrono::duration<double>(Clock::now() - last_draw_).count() < 0.1) return;
    last_draw_ = Clock::now();
    constexpr int kWidth = 24;
    const double frac = max_steps_ > 0 ? static_cast<double>(step) / static_cast<double>(max_steps_) : 1.0;
    const int filled = std::clamp(static_cast<int>(frac * kWidth), 0, kWidth);
    text << '\r' << step << '/' << max_steps_ << " [" << std::string(filled, '#') << std::string(kWidth - filled, '.')
         << "] " << std::setw(3) << static_cast<int>(frac * 100) << '%';
    if (steps_per_epoch_ > 0) text << " epoch " << epoch_text(step);
    text << " loss " << loss << " lr " << std::scientific
         << std::setprecision(2) << lr << std::fixed << ' ' << rate << " it/s ETA " << format_duration(eta)
         << "\033[K";
    last_bar_ = text.str();
    *out_ << last_bar_ << std::flush;
    bar_open_ = true;
  }

  // A message on its own line (above the bar in Bar mode).
  void message(const std::string& text) {
    if (mode_ == Progress::Off) return;
    if (bar_open_) *out_ << "\r\033[K";
    *out_ << text << '\n';
    if (bar_open_) *out_ << last_bar_;  // the bar stays below the messages
    *out_ << std::flush;
  }

  // Ends the bar's line so later output starts on a fresh one.
  void finish() {
    if (bar_open_ && out_ != nullptr) *out_ << '\n' << std::flush;
    bar_open_ = false;
  }

  Progress mode() const { return mode_; }

 private:
  // "2.35": epochs done after `step` steps.
  std::string epoch_text(std::int64_t step) const {
    std::ostringstream text;
    text << std::fixed << std::setprecision(2) << static_cast<double>(step) / static_cast<double>(steps_per_epoch_);
    return text.str();
  }

  std::ostream* out_;
  Progress mode_ = Progress::Off;
  std::int64_t max_steps_;
  std::int64_t first_step_;
  std::int64_t steps_per_epoch_;
  Clock::time_point start_;
  Clock::time_point last_draw_;
  bool bar_open_ = false;
  std::string last_bar_;
};

// A trainer.json field, checked: throws IoError naming the file and the field.
const json& field(const json& j, const std::string& file, const char* name) {
  const auto it = j.find(name);
  if (it == j.end()) throw IoError("Trainer: checkpoint file " + file + ": missing field '" + name + "'");
  return *it;
}

[[noreturn]] void bad_field(const std::string& file, const std::string& name, const std::string& why) {
  throw IoError("Trainer: checkpoint file " + file + ": field '" + name + "' " + why);
}

std::int64_t int_field(const json& j, const std::string& file, const char* name) {
  const json& v = field(j, file, name);
  if (!v.is_number_integer()) bad_field(file, name, "must be an integer, got " + v.dump());
  const auto value = v.get<std::int64_t>();
  if (value < 0) bad_field(file, name, "must not be negative, got " + v.dump());
  return value;
}

double double_field(const json& j, const std::string& file, const char* name) {
  const json& v = field(j, file, name);
  if (!v.is_number()) bad_field(file, name, "must be a number, got " + v.dump());
  return v.get<double>();
}

// Everything trainer.json holds, read and checked before any state is touched.
struct TrainerState {
  std::int64_t step = 0;
  std::int64_t scheduler_step = -1;  // -1: null in the file
  std::vector<std::pair<std::string, std::string>> generators;
  std::vector<double> lrs;
  double loss = 0.0;
  double elapsed_s = 0.0;
};

TrainerState read_trainer_json(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw IoError("Trainer: cannot open checkpoint file " + file + ": " + errno_text());
  std::stringstream buffer;
  buffer << in.rdbuf();
  json j;
  try {
    j = json::parse(buffer.str());
  } catch (const json::parse_error& e) {
    throw IoError("Trainer: checkpoint file " + file + " is not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw IoError("Trainer: checkpoint file " + file + ": expected a JSON object, got " + std::string(j.type_name()));
  const json& format = field(j, file, "format");
  if (!format.is_string() || format.get<std::string>() != kFormat)
    bad_field(file, "format", "must be \"" + std::string(kFormat) + "\", got " + format.dump());
  const json& version = field(j, file, "version");
  if (!version.is_number_integer() || version.get<std::int64_t>() != kVersion)
    bad_field(file, "version", "must be " + std::to_string(kVersion) + ", got " + version.dump());

  TrainerState state;
  state.step = int_field(j, file, "step");
  if (!field(j, file, "scheduler_step").is_null()) state.scheduler_step = int_field(j, file, "scheduler_step");
  const json& gens = field(j, file, "generators");
  if (!gens.is_object()) bad_field(file, "generators", "must be an object of name -> state string");
  for (const auto& [name, value] : gens.items()) {
    if (!value.is_string()) bad_field(file, "generators." + name, "must be a string");
    state.generators.emplace_back(name, value.get<std::string>());
  }
  const json& lrs = field(j, file, "lrs");
  if (!lrs.is_array()) bad_field(file, "lrs", "must be an array of numbers");
  for (std::size_t i = 0; i < lrs.size(); ++i) {
    if (!lrs[i].is_number() || !(lrs[i].get<double>() >= 0.0))
      bad_field(file, "lrs[" + std::to_string(i) + "]", "must be a non-negative number, got " + lrs[i].dump());
    state.lrs.push_back(lrs[i].get<double>());
  }
  state.loss = double_field(j, file, "loss");
  state.elapsed_s = double_field(j, file, "elapsed_s");
  return state;
}

void remove_stale_tmp_dirs(const fs::path& run_dir, const fs::path& keep = {}) {
  std::error_code ec;
  if (!fs::is_directory(run_dir, ec)) return;
  for (const auto& entry : fs::directory_iterator(run_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kTmpPrefix, 0) == 0 && entry.path() != keep) fs::remove_all(entry.path(), ec);
  }
}

}  // namespace

Trainer::Trainer(nn::Module& model, optim::Optimizer& optimizer, TrainerOptions options)
    : model_(model), optimizer_(optimizer), options_(std::move(options)) {
  const TrainerOptions& o = options_;
  if (o.max_steps < 0) throw ValueError("Trainer: max_steps must be >= 0, got " + std::to_string(o.max_steps));
  if (o.log_every < 1) throw ValueError("Trainer: log_every must be >= 1, got " + std::to_string(o.log_every));
  if (o.eval_every < 0) throw ValueError("Trainer: eval_every must be >= 0, got " + std::to_string(o.eval_every));
  if (o.checkpoint_every < 0)
    throw ValueError("Trainer: checkpoint_every must be >= 0, got " + std::to_string(o.checkpoint_every));
  if (!(o.clip_grad_norm >= 0.0)) throw ValueError("Trainer: clip_grad_norm must be >= 0, got " + num(o.clip_grad_norm));
  if (o.steps_per_epoch < 0 || o.max_epochs < 0)
    throw ValueError("Trainer: steps_per_epoch and max_epochs must be >= 0, got " + std::to_string(o.steps_per_epoch) +
                     " and " + std::to_string(o.max_epochs));
  if (o.max_epochs > 0) {
    if (o.steps_per_epoch == 0)
      throw ValueError("Trainer: max_epochs " + std::to_string(o.max_epochs) + " needs steps_per_epoch");
    options_.max_steps = o.max_epochs * o.steps_per_epoch;
  }
  // The model's own random state (dropout masks) is part of the run: without it a resumed run would draw
  // different masks. The prefix keeps these apart from the caller's names.
  for (const auto& [name, gen] : model_.named_generators()) generators_.emplace_back(kModelGeneratorPrefix + name, gen);
}

void Trainer::set_scheduler(optim::Scheduler* scheduler) { scheduler_ = scheduler; }

void Trainer::track_generator(std::string name, Generator& gen) {
  if (name.empty()) throw ValueError("Trainer::track_generator: empty name");
  if (name.rfind(kModelGeneratorPrefix, 0) == 0)
    throw ValueError("Trainer::track_generator: the name '" + name + "' starts with '" + kModelGeneratorPrefix +
                     "', which is kept for the model's own generators (tracked automatically)");
  for (const auto& entry : generators_)
    if (entry.first == name) throw ValueError("Trainer::track_generator: the name '" + name + "' is already tracked");
  generators_.emplace_back(std::move(name), &gen);
}

std::string Trainer::checkpoint_dir() const {
  return options_.run_dir.empty() ? std::string() : (fs::path(options_.run_dir) / "checkpoint").string();
}

std::string Trainer::metrics_path() const {
  return options_.run_dir.empty() ? std::string() : (fs::path(options_.run_dir) / "metrics.jsonl").string();
}

void Trainer::write_metrics_line(const std::string& line) {
  if (options_.run_dir.empty()) return;
  std::ofstream out(metrics_path(), std::ios::app | std::ios::binary);
  out << line << '\n';
  out.flush();
  if (!out) throw IoError("Trainer: cannot append to " + metrics_path());
}

// Keeps the lines of steps already done (up to the checkpoint the run continues from) that an
// uninterrupted run would also have; a torn last line from a crash is dropped too.
void Trainer::truncate_metrics() {
  const std::string path = metrics_path();
  std::ifstream in(path, std::ios::binary);
  if (!in) return;
  std::string kept, line;
  bool changed = false;
  while (std::getline(in, line)) {
    bool keep = false;
    try {
      const json j = json::parse(line);
      keep = j.is_object() && j.contains("step") && j["step"].is_number_integer() &&
             j["step"].get<std::int64_t>() <= step_ && !j.value("end_of_run", false);
    } catch (const json::exception&) {
      keep = false;
    }
    if (keep) kept += line + '\n';
    else changed = true;
  }
  in.close();
  if (changed) write_atomic(path, kept);
}

std::int64_t Trainer::checkpoint_step_on_disk() const {
  if (options_.run_dir.empty()) return -1;
  for (const char* name : {"checkpoint", "checkpoint.old"}) {
    const std::string file = (fs::path(options_.run_dir) / name / "trainer.json").string();
    std::error_code ec;
    if (!fs::exists(file, ec)) continue;
    try {
      return read_trainer_json(file).step;
    } catch (const Error&) {
      return -1;
    }
  }
  return -1;
}

void Trainer::save_checkpoint() {
  if (options_.run_dir.empty()) throw ValueError("Trainer::save_checkpoint: run_dir is not set");
  const fs::path run_dir(options_.run_dir);
  std::error_code ec;
  fs::create_directories(run_dir, ec);
  if (ec) throw IoError("Trainer: cannot create run_dir " + run_dir.string() + ": " + ec.message());
  remove_stale_tmp_dirs(run_dir);

  std::string templ = (run_dir / (std::string(kTmpPrefix) + "XXXXXX")).string();
  if (::mkdtemp(templ.data()) == nullptr)
    throw IoError("Trainer: cannot create a temporary checkpoint directory in " + run_dir.string() + ": " + errno_text());
  const fs::path tmp(templ);
  // mkdtemp makes the directory private; the checkpoint is as readable as the files in it.
  ::chmod(tmp.c_str(), 0755);
  const fs::path final_dir = run_dir / "checkpoint";
  const fs::path old_dir = run_dir / "checkpoint.old";
  try {
    io::save_safetensors((tmp / "model.safetensors").string(), model_.state_dict(), {{"step", std::to_string(step_)}});
    io::save_safetensors((tmp / "optimizer.safetensors").string(), optimizer_.state_tensors(),
                     {{"step", std::to_string(step_)}});
    ordered_json j;
    j["format"] = kFormat;
    j["version"] = kVersion;
    j["step"] = step_;
    j["scheduler_step"] = scheduler_ ? json(scheduler_->current_step()) : json(nullptr);
    j["generators"] = ordered_json::object();
    for (const auto& [name, gen] : generators_) j["generators"][name] = gen->state();
    std::vector<double> lrs;
    for (const optim::ParamGroup& g : optimizer_.param_groups()) lrs.push_back(g.lr);
    j["lrs"] = lrs;
    j["loss"] = last_loss_;
    j["elapsed_s"] = elapsed_before_ + elapsed_now_;
    write_synced((tmp / "trainer.json").string(), j.dump(2) + "\n");
    fsync_path(tmp.string(), true);

    // When checkpoint/ is missing, checkpoint.old/ may be the only good copy: it stays until the new one is in place.
    if (fs::exists(final_dir, ec)) {
      fs::remove_all(old_dir, ec);
      if (ec) throw IoError("Trainer: cannot remove " + old_dir.string() + ": " + ec.message());
      if (::rename(final_dir.c_str(), old_dir.c_str()) != 0)
        throw IoError("Trainer: cannot rename " + final_dir.string() + " to " + old_dir.string() + ": " + errno_text());
    }
    if (::rename(tmp.c_str(), final_dir.c_str()) != 0)
      throw IoError("Trainer: cannot rename " + tmp.string() + " to " + final_dir.string() + ": " + errno_text());
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  fsync_path(run_dir.string(), true);
  fs::remove_all(old_dir, ec);
}

bool Trainer::load_checkpoint() {
  if (options_.run_dir.empty()) return false;
  const fs::path run_dir(options_.run_dir);
  remove_stale_tmp_dirs(run_dir);
  std::error_code ec;
  fs::path dir = run_dir / "checkpoint";
  if (!fs::is_directory(dir, ec)) {
    // A crash between the two renames of a save leaves only the old checkpoint.
    dir = run_dir / "checkpoint.old";
    if (!fs::is_directory(dir, ec)) return false;
  }
  const std::string json_file = (dir / "trainer.json").string();
  const std::string model_file = (dir / "model.safetensors").string();
  const std::string optimizer_file = (dir / "optimizer.safetensors").string();

  // Read and check everything first; state is changed only once nothing can fail.
  const TrainerState state = read_trainer_json(json_file);
  const io::SafetensorsFile model_state = io::load_safetensors(model_file);
  const io::SafetensorsFile optimizer_state = io::load_safetensors(optimizer_file);
  if (state.lrs.size() != optimizer_.param_groups().size())
    bad_field(json_file, "lrs", "has " + std::to_string(state.lrs.size()) + " entries but the optimiser has " +
                                    std::to_string(optimizer_.param_groups().size()) + " parameter groups");
  if (scheduler_ && state.scheduler_step < 0)
    bad_field(json_file, "scheduler_step", "is null but a scheduler is set");
  std::vector<Generator> restored(generators_.size());
  for (std::size_t i = 0; i < generators_.size(); ++i) {
    const std::string& name = generators_[i].first;
    const auto it = std::find_if(state.generators.begin(), state.generators.end(),
                                 [&](const auto& entry) { return entry.first == name; });
    if (it == state.generators.end()) bad_field(json_file, "generators." + name, "is missing (the generator is tracked)");
    try {
      restored[i].set_state(it->second);
    } catch (const ValueError& e) {
      bad_field(json_file, "generators." + name, std::string("is not a generator state: ") + e.what());
    }
  }
  for (const auto& [name, value] : state.generators) {
    const bool tracked = std::any_of(generators_.begin(), generators_.end(),
                                     [&](const auto& entry) { return entry.first == name; });
    if (!tracked) bad_field(json_file, "generators." + name, "names a generator that is not tracked");
  }

  // Both loads check before they copy; if the optimiser's fails, the model's values are put back.
  NamedTensors model_before;
  for (const auto& [name, t] : model_.state_dict()) model_before.emplace_back(name, t.detach().clone());
  with_file(model_file, [&] { model_.load_state_dict(model_state.tensors); });
  try {
    with_file(optimizer_file, [&] { optimizer_.load_state(optimizer_state.tensors); });
  } catch (...) {
    model_.load_state_dict(model_before);
    throw;
  }
  for (std::size_t g = 0; g < state.lrs.size(); ++g) optimizer_.param_groups()[g].lr = state.lrs[g];
  if (scheduler_) scheduler_->set_step(state.scheduler_step);
  for (std::size_t i = 0; i < generators_.size(); ++i) *generators_[i].second = restored[i];
  step_ = state.step;
  last_loss_ = state.loss;
  elapsed_before_ = state.elapsed_s;
  elapsed_now_ = 0.0;
  return true;
}

TrainResult Trainer::fit(const StepFn& step_fn, const EvalFn& eval_fn) {
  if (!step_fn) throw ValueError("Trainer::fit: step_fn is empty");
  const Clock::time_point call_start = Clock::now();
  TrainResult result;
  if (options_.resume && load_checkpoint()) result.resumed_from = step_;
  if (!options_.run_dir.empty()) {
    std::error_code ec;
    fs::create_directories(options_.run_dir, ec);
    if (ec) throw IoError("Trainer: cannot create run_dir " + options_.run_dir + ": " + ec.message());
    truncate_metrics();
  }

  ProgressPrinter progress(options_.progress, options_.out, options_.max_steps, step_, options_.steps_per_epoch);
  if (result.resumed_from >= 0)
    progress.message("resumed from " + checkpoint_dir() + " at step " + std::to_string(step_));

  TensorList params;
  for (const optim::ParamGroup& g : optimizer_.param_groups()) params.insert(params.end(), g.params.begin(), g.params.end());
  const double max_norm = options_.clip_grad_norm > 0 ? options_.clip_grad_norm : std::numeric_limits<double>::infinity();

  auto elapsed = [&] { return elapsed_before_ + elapsed_now_; };
  auto non_finite = [&](std::int64_t step, double value, const std::string& quantity) {
    const std::int64_t on_disk = checkpoint_step_on_disk();
    std::string kept;
    if (options_.run_dir.empty()) kept = "no checkpoint is kept (run_dir is not set)";
    else if (on_disk < 0) kept = "no checkpoint has been written in " + options_.run_dir + " yet";
    else kept = "the last good checkpoint (step " + std::to_string(on_disk) + ", " + checkpoint_dir() + ") is kept";
    // Numbered as metrics.jsonl numbers steps (steps done once this one ends), with step_fn's index.
    return NonFiniteLoss("Trainer: non-finite " + quantity + " " + num(value) + " at step " + std::to_string(step + 1) +
                             " (step_fn(" + std::to_string(step) + "))" +
                             "; the optimiser step was not taken and " + kept,
                         step, value, quantity, on_disk);
  };

  // Throughput window: since the previous metrics line.
  Clock::time_point window_start = Clock::now();
  std::int64_t window_examples = 0, window_tokens = 0;
  const bool was_training = model_.is_training();
  model_.train();
  try {
    while (step_ < options_.max_steps) {
      const std::int64_t s = step_;
      optimizer_.zero_grad();
      double loss = 0.0, grad_norm = 0.0, lr = 0.0;
      {
        StepOutput out = step_fn(s);
        if (!out.loss.defined() || out.loss.numel() != 1)
          throw ValueError("Trainer::fit: step_fn must return a one-element loss, got " +
                           (out.loss.defined() ? out.loss.shape().str() : std::string("an undefined tensor")) +
                           " at step " + std::to_string(s + 1) + " (step_fn(" + std::to_string(s) + "))");
        loss = out.loss.item();
        if (!std::isfinite(loss)) throw non_finite(s, loss, "loss");
        out.loss.backward();
        grad_norm = optim::clip_grad_norm(params, max_norm);
        if (!std::isfinite(grad_norm)) throw non_finite(s, grad_norm, "gradient norm");
        window_examples += out.examples;
        window_tokens += out.tokens;
      }
      if (!optimizer_.param_groups().empty()) lr = optimizer_.param_groups()[0].lr;
      optimizer_.step();
      if (scheduler_) scheduler_->step();
      step_ = s + 1;
      last_loss_ = loss;
      result.losses.push_back(loss);
      elapsed_now_ = seconds_since(call_start);

      const bool last = step_ == options_.max_steps;
      const bool log_due = step_ % options_.log_every == 0;
      if (log_due || last) {
        const double window = std::max(seconds_since(window_start), 1e-9);
        ordered_json line;
        line["step"] = step_;
        if (options_.steps_per_epoch > 0)
          line["epoch"] = static_cast<double>(step_) / static_cast<double>(options_.steps_per_epoch);
        line["loss"] = loss;
        line["lr"] = lr;
        line["grad_norm"] = grad_norm;
        line["examples_per_s"] = static_cast<double>(window_examples) / window;
        line["tokens_per_s"] = static_cast<double>(window_tokens) / window;
        line["elapsed_s"] = elapsed();
        if (!log_due) line["end_of_run"] = true;
        write_metrics_line(line.dump());
        window_start = Clock::now();
        window_examples = window_tokens = 0;
      }
      progress.update(step_, loss, lr, grad_norm, log_due || last);

      const bool eval_due = options_.eval_every > 0 && step_ % options_.eval_every == 0;
      if (eval_fn && (eval_due || last)) {
        std::map<std::string, double> metrics;
        {
          NoGradGuard no_grad;
          model_.eval();
          try {
            metrics = eval_fn(step_);
          } catch (...) {
            model_.train();
            throw;
          }
          model_.train();
        }
        ordered_json line;
        line["step"] = step_;
        line["eval"] = metrics;
        line["elapsed_s"] = elapsed();
        if (!eval_due) line["end_of_run"] = true;
        write_metrics_line(line.dump());
        std::ostringstream text;
        text << "eval step " << step_ << ':' << std::setprecision(5);
        for (const auto& [name, value] : metrics) text << ' ' << name << ' ' << value;
        progress.message(text.str());
      }

      if (!options_.run_dir.empty() &&
          ((options_.checkpoint_every > 0 && step_ % options_.checkpoint_every == 0) || last)) {
        save_checkpoint();
        if (progress.mode() == Progress::Lines)
          progress.message("checkpoint at step " + std::to_string(step_) + " in " + checkpoint_dir());
      }
    }
  } catch (...) {
    progress.finish();
    model_.train(was_training);
    elapsed_before_ += seconds_since(call_start);
    elapsed_now_ = 0.0;
    throw;
  }
  progress.finish();
  model_.train(was_training);
  const double call_seconds = seconds_since(call_start);
  elapsed_before_ += call_seconds;
  elapsed_now_ = 0.0;
  result.steps = step_;
  result.final_loss = last_loss_;
  result.seconds = call_seconds;
  result.total_seconds = elapsed_before_;
  return result;
}

}  // namespace tapegrad::train
