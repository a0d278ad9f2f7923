// The checkpoint directory: writing it with a directory swap, finding and reading it, and
// Trainer::save_checkpoint / load_checkpoint on top. See checkpoint.h for the layout.

#include "tapegrad/train/checkpoint.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>

#include <nlohmann/json.hpp>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/format.h"
#include "tapegrad/io/file.h"
#include "tapegrad/io/json.h"
#include "tapegrad/io/safetensors.h"
#include "tapegrad/train/average.h"
#include "tapegrad/train/trainer.h"

namespace tapegrad::train {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kFormat = "tapegrad.trainer";
constexpr int kVersion = 2;  // 2: optimizer_steps and checksum added; 1 is still read
constexpr const char* kTmpPrefix = "checkpoint.tmp-";

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

// A trainer.json field, checked: throws IoError naming the file and the field.
const json& field(const json& j, const std::string& file, const char* name) {
  const auto it = j.find(name);
  if (it == j.end()) throw IoError("Trainer: checkpoint file " + file + ": missing field '" + name + "'");
  return *it;
}

std::int64_t int_field(const json& j, const std::string& file, const char* name) {
  const json& v = field(j, file, name);
  if (!v.is_number_integer()) bad_field(file, name, "must be an integer, got " + io::json_excerpt(v));
  const auto value = v.get<std::int64_t>();
  if (value < 0) bad_field(file, name, "must not be negative, got " + io::json_excerpt(v));
  return value;
}

double double_field(const json& j, const std::string& file, const char* name) {
  const json& v = field(j, file, name);
  if (!v.is_number()) bad_field(file, name, "must be a number, got " + io::json_excerpt(v));
  return v.get<double>();
}

// The checksum of trainer.json: CRC-32 of the compact dump of every field but "checksum" (nlohmann's
// json sorts keys, and its numbers read back to the same text), as 8 hex digits.
std::string content_checksum(json j) {
  j.erase("checksum");
  return io::crc32_hex(j.dump());
}

std::string trainer_json_text(const CheckpointState& state) {
  json j;
  j["format"] = kFormat;
  j["version"] = kVersion;
  j["step"] = state.step;
  j["scheduler_step"] = state.scheduler_step >= 0 ? json(state.scheduler_step) : json(nullptr);
  j["optimizer_steps"] = state.optimizer_steps;
  j["generators"] = json::object();
  for (const auto& [name, value] : state.generators) j["generators"][name] = value;
  j["lrs"] = state.lrs;
  j["loss"] = state.loss;
  j["elapsed_s"] = state.elapsed_s;
  if (state.early_metric.empty()) {
    j["early_stopping"] = nullptr;
  } else {
    j["early_stopping"] = {{"metric", state.early_metric},
                           {"best", state.best_step >= 0 ? json(state.best) : json(nullptr)},
                           {"best_step", state.best_step},
                           {"bad_evals", state.bad_evals}};
  }
  if (state.plateau_metric.empty()) {
    j["plateau"] = nullptr;
  } else {
    // JSON has no infinities: best before any evaluation improved on it is "inf" or "-inf".
    const double best = state.plateau.best;
    j["plateau"] = {{"metric", state.plateau_metric},
                    {"mode", state.plateau_mode == optim::PlateauMode::Max ? "max" : "min"},
                    {"best", std::isfinite(best) ? json(best) : json(best > 0 ? "inf" : "-inf")},
                    {"bad_evals", state.plateau.bad_evals},
                    {"cooldown_counter", state.plateau.cooldown_counter},
                    {"evals", state.plateau.evals}};
  }
  j["log_interval"] = {{"steps", state.interval_steps}, {"loss_sum", state.interval_loss_sum}};
  j["accumulation_steps"] = state.accumulation_steps;
  j["ema"] = state.ema;
  j["checksum"] = content_checksum(j);
  return j.dump(2) + "\n";
}

void remove_stale_tmp_dirs(const fs::path& run_dir) {
  std::error_code ec;
  if (!fs::is_directory(run_dir, ec)) return;
  for (const auto& entry : fs::directory_iterator(run_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kTmpPrefix, 0) == 0) fs::remove_all(entry.path(), ec);
  }
}

// The three files of a checkpoint come from one save, and the step counts agree: each Trainer step
// steps the optimiser and the scheduler once, so neither count can be below the Trainer's.
void check_step_counts(const CheckpointState& state, const std::string& json_file, const std::string& model_file,
                       const io::SafetensorsFile& model, const std::string& optimizer_file,
                       const io::SafetensorsFile& optimizer) {
  const std::string step = std::to_string(state.step);
  const std::string where = "Trainer: checkpoint files disagree: ";
  for (const auto& [file, contents] : {std::pair{&model_file, &model}, std::pair{&optimizer_file, &optimizer}}) {
    const auto it = contents->metadata.find("step");
    if (it == contents->metadata.end() || it->second != step)
      throw IoError(
          where + *file + " is from step " +
          (it == contents->metadata.end() ? std::string("(none in its metadata)") : it->second.substr(0, 24)) +
          " but " + json_file + " from step " + step);
  }
  if (state.optimizer_steps < 0) return;  // version 1: no optimiser count in trainer.json
  const auto count = std::find_if(optimizer.tensors.begin(), optimizer.tensors.end(),
                                  [](const auto& entry) { return entry.first == "stepcount"; });
  if (count != optimizer.tensors.end() && count->second.numel() == 1 &&
      count->second.item() != static_cast<double>(state.optimizer_steps))
    throw IoError(message(where, optimizer_file, " has stepcount ", count->second.item(), " but ", json_file,
                          " has optimizer_steps ", state.optimizer_steps));
  if (state.optimizer_steps < state.step)
    throw IoError(message(where, json_file, ": optimizer_steps ", state.optimizer_steps, " is below step ", step,
                          " (every step steps the optimiser)"));
  if (state.scheduler_step >= 0 && state.scheduler_step < state.step)
    throw IoError(message(where, json_file, ": scheduler_step ", state.scheduler_step, " is below step ", step,
                          " (every step steps the scheduler)"));
}

}  // namespace

[[noreturn]] void bad_field(const std::string& file, const std::string& name, const std::string& why) {
  throw IoError("Trainer: checkpoint file " + file + ": field '" + name + "' " + why);
}

namespace {

// An object field of trainer.json that a metric-watching part of the Trainer wrote (early_stopping,
// plateau): its members read with errors that name the field.
class MetricField {
 public:
  MetricField(const json& object, const std::string& file, const char* name)
      : object_(object), file_(file), name_(name) {
    if (!object_.is_object()) bad("must be null or an object, got " + io::json_excerpt(object_));
  }
  [[noreturn]] void bad(const std::string& why) const { bad_field(file_, name_, why); }
  const json& member(const char* key) const {
    const auto it = object_.find(key);
    if (it == object_.end()) bad(std::string("has no '") + key + "'");
    return *it;
  }
  // The watched metric's name: a non-empty string.
  std::string metric() const {
    const json& metric = member("metric");
    if (!metric.is_string() || metric.get<std::string>().empty())
      bad("metric must be a non-empty string, got " + io::json_excerpt(metric));
    return metric.get<std::string>();
  }
  // An integer member, at least lowest.
  std::int64_t integer(const char* key, std::int64_t lowest) const {
    const json& v = member(key);
    if (!v.is_number_integer() || v.get<std::int64_t>() < lowest)
      bad(message(key, " must be an integer >= ", lowest, ", got ", io::json_excerpt(v)));
    return v.get<std::int64_t>();
  }

 private:
  const json& object_;
  const std::string& file_;
  const char* name_;
};

}  // namespace

CheckpointState read_trainer_json(const std::string& file) {
  const json j = io::with_caller("Trainer: checkpoint file", [&] { return io::read_json_file(file); });
  if (!j.is_object())
    throw IoError(message("Trainer: checkpoint file ", file, ": expected a JSON object, got ", j.type_name()));
  const json& format = field(j, file, "format");
  if (!format.is_string() || format.get<std::string>() != kFormat)
    bad_field(file, "format", "must be \"" + std::string(kFormat) + "\", got " + io::json_excerpt(format));
  const json& version = field(j, file, "version");
  if (!version.is_number_integer() || version.get<std::int64_t>() < 1 || version.get<std::int64_t>() > kVersion)
    bad_field(file, "version", "must be 1 or " + std::to_string(kVersion) + ", got " + io::json_excerpt(version));

  CheckpointState state;
  if (version.get<std::int64_t>() >= 2) {
    const json& checksum = field(j, file, "checksum");
    if (!checksum.is_string()) bad_field(file, "checksum", "must be a string, got " + io::json_excerpt(checksum));
    const std::string actual = content_checksum(j);
    if (checksum.get<std::string>() != actual)
      bad_field(
          file, "checksum",
          "is " + io::json_excerpt(checksum) + " but the contents have CRC-32 \"" + actual + "\": the file is corrupt");
    state.optimizer_steps = int_field(j, file, "optimizer_steps");
  }
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
      bad_field(file, "lrs[" + std::to_string(i) + "]",
                "must be a non-negative number, got " + io::json_excerpt(lrs[i]));
    state.lrs.push_back(lrs[i].get<double>());
  }
  state.loss = double_field(j, file, "loss");
  state.elapsed_s = double_field(j, file, "elapsed_s");
  const auto early = j.find("early_stopping");
  if (early != j.end() && !early->is_null()) {
    const MetricField f(*early, file, "early_stopping");
    state.early_metric = f.metric();
    state.best_step = f.integer("best_step", -1);
    const json& best = f.member("best");
    if (state.best_step >= 0 && !best.is_number()) f.bad("best must be a number, got " + io::json_excerpt(best));
    if (state.best_step >= 0) state.best = best.get<double>();
    state.bad_evals = f.integer("bad_evals", 0);
  }
  const auto plateau = j.find("plateau");
  if (plateau != j.end() && !plateau->is_null()) {
    const MetricField f(*plateau, file, "plateau");
    state.plateau_metric = f.metric();
    const json& mode = f.member("mode");
    if (mode != "min" && mode != "max") f.bad("mode must be \"min\" or \"max\", got " + io::json_excerpt(mode));
    state.plateau_mode = mode == "max" ? optim::PlateauMode::Max : optim::PlateauMode::Min;
    const json& best = f.member("best");
    if (best.is_number()) {
      state.plateau.best = best.get<double>();
    } else if (best == "inf" || best == "-inf") {
      state.plateau.best = (best == "inf" ? 1.0 : -1.0) * std::numeric_limits<double>::infinity();
    } else {
      f.bad("best must be a number, \"inf\" or \"-inf\", got " + io::json_excerpt(best));
    }
    state.plateau.bad_evals = f.integer("bad_evals", 0);
    state.plateau.cooldown_counter = f.integer("cooldown_counter", 0);
    state.plateau.evals = f.integer("evals", 0);
  }
  const auto interval = j.find("log_interval");
  if (interval != j.end()) {
    if (!interval->is_object())
      bad_field(file, "log_interval", "must be an object, got " + io::json_excerpt(*interval));
    state.interval_steps = int_field(*interval, file, "steps");
    state.interval_loss_sum = double_field(*interval, file, "loss_sum");
  }
  if (const auto ema = j.find("ema"); ema != j.end()) {
    if (!ema->is_boolean()) bad_field(file, "ema", "must be true or false, got " + io::json_excerpt(*ema));
    state.ema = ema->get<bool>();
  }
  if (j.contains("accumulation_steps")) {
    state.accumulation_steps = int_field(j, file, "accumulation_steps");
    if (state.accumulation_steps < 1)
      bad_field(file, "accumulation_steps", "must be >= 1, got " + std::to_string(state.accumulation_steps));
  }
  return state;
}

std::string find_checkpoint(const std::string& run_dir) {
  remove_stale_tmp_dirs(run_dir);
  std::error_code ec;
  for (const char* name : {"checkpoint", "checkpoint.old"}) {
    // A crash between the two renames of a save leaves only the old checkpoint.
    const fs::path dir = fs::path(run_dir) / name;
    if (fs::is_directory(dir, ec)) return dir.string();
  }
  return "";
}

std::int64_t checkpoint_step_on_disk(const std::string& run_dir) {
  for (const char* name : {"checkpoint", "checkpoint.old"}) {
    const std::string file = (fs::path(run_dir) / name / "trainer.json").string();
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

void write_checkpoint(const std::string& run_dir_name, const NamedTensors& model, const NamedTensors& optimizer,
                      const CheckpointState& state, const NamedTensors& ema) {
  const fs::path run_dir(run_dir_name);
  std::error_code ec;
  fs::create_directories(run_dir, ec);
  if (ec) throw IoError("Trainer: cannot create run_dir " + run_dir.string() + ": " + ec.message());
  remove_stale_tmp_dirs(run_dir);

  std::string templ = (run_dir / (std::string(kTmpPrefix) + "XXXXXX")).string();
  if (::mkdtemp(templ.data()) == nullptr)
    throw IoError("Trainer: cannot create a temporary checkpoint directory in " + run_dir.string() + ": " +
                  std::strerror(errno));
  const fs::path tmp(templ);
  // mkdtemp makes the directory private; the checkpoint is as readable as the files in it.
  ::chmod(tmp.c_str(), 0755);
  const fs::path final_dir = run_dir / "checkpoint";
  const fs::path old_dir = run_dir / "checkpoint.old";
  const std::string step = std::to_string(state.step);
  try {
    io::save_safetensors((tmp / "model.safetensors").string(), model, {{"step", step}});
    io::save_safetensors((tmp / "optimizer.safetensors").string(), optimizer, {{"step", step}});
    if (state.ema) io::save_safetensors((tmp / "ema.safetensors").string(), ema, {{"step", step}});
    io::with_caller("Trainer", [&] {
      io::write_file_synced((tmp / "trainer.json").string(), trainer_json_text(state));
      io::sync_directory(tmp.string());
      // When checkpoint/ is missing, checkpoint.old/ may be the only good copy: it stays until the new one is in place.
      if (fs::exists(final_dir, ec)) {
        fs::remove_all(old_dir, ec);
        if (ec) throw IoError("cannot remove " + old_dir.string() + ": " + ec.message());
        io::rename_path(final_dir.string(), old_dir.string());
      }
      io::rename_path(tmp.string(), final_dir.string());
    });
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  io::with_caller("Trainer", [&] { io::sync_directory(run_dir.string()); });
  fs::remove_all(old_dir, ec);
}

void Trainer::save_checkpoint() {
  if (options_.run_dir.empty()) throw ValueError("Trainer::save_checkpoint: run_dir is not set");
  if (!writes_files()) return;  // rank 0 writes for every replica
  CheckpointState state;
  state.step = step_;
  state.scheduler_step = scheduler_ ? scheduler_->current_step() : -1;
  state.optimizer_steps = optimizer_.steps_taken();
  for (const auto& [name, gen] : generators_) state.generators.emplace_back(name, gen->state());
  for (const optim::ParamGroup& g : optimizer_.param_groups()) state.lrs.push_back(*g.lr);
  state.loss = last_loss_;
  state.elapsed_s = elapsed_before_ + elapsed_now_;
  state.early_metric = options_.early_stopping.metric;
  state.best = best_.value;
  state.best_step = best_.step;
  state.bad_evals = best_.bad_evals;
  if (plateau_) {
    state.plateau_metric = plateau_metric_;
    state.plateau_mode = plateau_->options().mode();
    state.plateau = plateau_->state();
  }
  state.interval_steps = interval_steps_;
  state.interval_loss_sum = interval_loss_sum_;
  state.accumulation_steps = options_.accumulation_steps;
  state.ema = ema_ != nullptr;
  const NamedTensors model_state = model_.state_dict();
  write_checkpoint(options_.run_dir, model_state, optimizer_.state_tensors(), state,
                   ema_ ? ema_->state() : NamedTensors());
  if (options_.keep_checkpoints > 0) {
    // After the checkpoint, so a kept model is never from a step the checkpoint has not reached.
    const fs::path kept = fs::path(options_.run_dir) / "checkpoints";
    std::error_code ec;
    fs::create_directories(kept, ec);
    if (ec) throw IoError("Trainer: cannot create " + kept.string() + ": " + ec.message());
    // The checkpoint's model file, written once: a second name for it (a hard link; a copy where the
    // file system has none), made under a temporary name and renamed into place. Checkpoint files are
    // never rewritten, only replaced, so the kept name keeps this step's bytes.
    const fs::path source = fs::path(options_.run_dir) / "checkpoint" / "model.safetensors";
    const fs::path target = kept / ("model-" + std::to_string(step_) + ".safetensors");
    const fs::path staged = kept / ("model-" + std::to_string(step_) + ".safetensors.tmp");
    fs::remove(staged, ec);
    fs::create_hard_link(source, staged, ec);
    if (ec) {
      ec.clear();
      fs::copy_file(source, staged, fs::copy_options::overwrite_existing, ec);
      if (ec) throw IoError("Trainer: cannot keep " + source.string() + " as " + target.string() + ": " + ec.message());
    }
    io::rename_path(staged.string(), target.string());
    std::vector<std::string> all = kept_checkpoints(options_.run_dir);
    for (std::size_t i = 0; i + static_cast<std::size_t>(options_.keep_checkpoints) < all.size(); ++i)
      fs::remove(all[i], ec);
  }
}

bool Trainer::load_checkpoint() {
  if (options_.run_dir.empty()) return false;
  const std::string found = find_checkpoint(options_.run_dir);
  if (found.empty()) return false;
  const fs::path dir(found);
  const std::string json_file = (dir / "trainer.json").string();
  const std::string model_file = (dir / "model.safetensors").string();
  const std::string optimizer_file = (dir / "optimizer.safetensors").string();

  // Read and check everything first; state is changed only once nothing can fail.
  const CheckpointState state = read_trainer_json(json_file);
  const io::SafetensorsFile model_state = io::load_safetensors(model_file);
  const io::SafetensorsFile optimizer_state = io::load_safetensors(optimizer_file);
  if (state.lrs.size() != optimizer_.param_groups().size())
    bad_field(json_file, "lrs",
              "has " + std::to_string(state.lrs.size()) + " entries but the optimiser has " +
                  std::to_string(optimizer_.param_groups().size()) + " parameter groups");
  if (scheduler_ && state.scheduler_step < 0) bad_field(json_file, "scheduler_step", "is null but a scheduler is set");
  // step_fn's micro-batch indices continue the run only with the same number per step.
  if (state.accumulation_steps != options_.accumulation_steps)
    bad_field(json_file, "accumulation_steps",
              "is " + std::to_string(state.accumulation_steps) + " but this trainer's accumulation_steps is " +
                  std::to_string(options_.accumulation_steps));
  check_step_counts(state, json_file, model_file, model_state, optimizer_file, optimizer_state);
  // A run that gains an average on resume would start it from the resumed weights, not from the run's start.
  io::SafetensorsFile ema_state;
  if (!ema_ && state.ema)
    bad_field(json_file, "ema", "is true but the trainer has no ModelEma (set_ema): resuming would drop the average");
  if (ema_) {
    if (!state.ema) bad_field(json_file, "ema", "is false but the trainer has a ModelEma (set_ema)");
    const std::string ema_file = (dir / "ema.safetensors").string();
    ema_state = io::load_safetensors(ema_file);
    const auto it = ema_state.metadata.find("step");
    if (it == ema_state.metadata.end() || it->second != std::to_string(state.step))
      throw IoError(message("Trainer: checkpoint files disagree: ", ema_file, " is not from step ", state.step, " as ",
                            json_file, " is"));
  }
  std::vector<Generator> restored(generators_.size());
  for (std::size_t i = 0; i < generators_.size(); ++i) {
    const std::string& name = generators_[i].first;
    const auto it = std::find_if(state.generators.begin(), state.generators.end(),
                                 [&](const auto& entry) { return entry.first == name; });
    if (it == state.generators.end())
      bad_field(json_file, "generators." + name, "is missing (the generator is tracked)");
    try {
      restored[i].set_state(it->second);
    } catch (const ValueError& e) {
      bad_field(json_file, "generators." + name, std::string("is not a generator state: ") + e.what());
    }
  }
  for (const auto& saved : state.generators) {
    const std::string& name = saved.first;
    const bool tracked =
        std::any_of(generators_.begin(), generators_.end(), [&](const auto& entry) { return entry.first == name; });
    if (!tracked) bad_field(json_file, "generators." + name, "names a generator that is not tracked");
  }

  // Both loads check before they copy; if the optimiser's fails, the model's values are put back.
  NamedTensors model_before;
  for (const auto& [name, t] : model_.state_dict()) model_before.emplace_back(name, t.detach().clone());
  // The average first: its load checks everything before it copies, and it is put back if a later load fails.
  NamedTensors ema_before;
  if (ema_) {
    ema_before = ema_->state();
    with_file((dir / "ema.safetensors").string(), [&] { ema_->load_state(ema_state.tensors); });
  }
  const auto put_back = [&](bool model) {
    if (model) model_.load_state_dict(model_before);
    if (ema_) ema_->load_state(ema_before);
  };
  try {
    with_file(model_file, [&] { model_.load_state_dict(model_state.tensors); });
  } catch (...) {
    put_back(false);
    throw;
  }
  try {
    with_file(optimizer_file, [&] { optimizer_.load_state(optimizer_state.tensors); });
  } catch (...) {
    put_back(true);
    throw;
  }
  for (std::size_t g = 0; g < state.lrs.size(); ++g) optimizer_.param_groups()[g].lr = state.lrs[g];
  if (scheduler_) scheduler_->set_step(state.scheduler_step);
  // The plateau scheduler continues when it watches the same metric the same way, and starts afresh otherwise.
  if (plateau_ && state.plateau_metric == plateau_metric_ && state.plateau_mode == plateau_->options().mode()) {
    plateau_->load_state(state.plateau);
  } else if (plateau_) {
    plateau_->reset();
  }
  for (std::size_t i = 0; i < generators_.size(); ++i) *generators_[i].second = restored[i];
  step_ = state.step;
  last_loss_ = state.loss;
  elapsed_before_ = state.elapsed_s;
  elapsed_now_ = 0.0;
  // Early stopping continues where it was when it watches the same metric, and starts afresh otherwise.
  interval_steps_ = state.interval_steps;
  interval_loss_sum_ = state.interval_loss_sum;
  best_ = BestMetric();
  if (!options_.early_stopping.metric.empty() && state.early_metric == options_.early_stopping.metric)
    best_ = BestMetric{state.best, state.best_step, state.bad_evals};
  return true;
}

}  // namespace tapegrad::train
