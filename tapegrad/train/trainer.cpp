// The training loop: fit() and the pieces of one step (run, log, evaluate, checkpoint). See trainer.h.

#include "tapegrad/train/trainer.h"

#include "tapegrad/train/average.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include <nlohmann/json.hpp>

#include "tapegrad/autograd/autocast.h"
#include "tapegrad/autograd/format.h"
#include "tapegrad/io/hash.h"
#include "tapegrad/optim/clip.h"
#include "tapegrad/train/checkpoint.h"

namespace tapegrad::train {

namespace {

// metrics[metric], which `watcher` reads; ValueError listing what eval_fn returned when it is missing.
double watched_metric(const std::map<std::string, double>& metrics, const char* watcher, const std::string& metric) {
  const auto it = metrics.find(metric);
  if (it != metrics.end()) return it->second;
  std::string keys;
  for (const auto& entry : metrics) keys += (keys.empty() ? "" : ", ") + entry.first;
  throw ValueError(message("Trainer: ", watcher, " watches '", metric, "' but eval_fn returned only {", keys, "}"));
}

namespace fs = std::filesystem;
using ordered_json = nlohmann::ordered_json;

constexpr const char* kModelGeneratorPrefix = "model.";

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

const char* to_string(Precision precision) { return precision == Precision::BFloat16 ? "bf16" : "float32"; }

Precision parse_precision(const std::string& name) {
  if (name == "float32") return Precision::Float32;
  if (name == "bf16" || name == "bfloat16") return Precision::BFloat16;
  throw ValueError("precision: expected \"float32\" or \"bf16\", got \"" + name + "\"");
}

const char* to_string(StopReason reason) {
  switch (reason) {
    case StopReason::MaxSteps:
      return "max_steps";
    case StopReason::TimeBudget:
      return "time_budget";
    case StopReason::EarlyStopping:
      return "early_stopping";
    case StopReason::Callback:
      return "callback";
  }
  return "unknown";
}

Trainer::Trainer(nn::Module& model, optim::Optimizer& optimizer, TrainerOptions options)
    : model_(model),
      optimizer_(optimizer),
      options_(std::move(options)),
      metrics_(options_.run_dir.empty() || options_.replicas.rank != 0
                   ? std::string()
                   : (fs::path(options_.run_dir) / "metrics.jsonl").string()) {
  const TrainerOptions& o = options_;
  const Replicas& r = o.replicas;
  if (r.world_size < 1 || r.rank < 0 || r.rank >= r.world_size)
    throw ValueError(message("Trainer: replicas: rank ", r.rank, " of world_size ", r.world_size, " is not a rank"));
  if (r.world_size > 1 && (!r.mean || !r.max || !r.barrier))
    throw ValueError(message("Trainer: replicas: world_size ", r.world_size,
                             " needs the mean, max and barrier functions (dist::replicas(world) makes them)"));
  if (!writes_files()) {
    // Only rank 0 shows progress and writes TensorBoard files.
    options_.out = nullptr;
    options_.tensorboard_dir.clear();
  }
  if (o.max_steps < 0) throw ValueError(message("Trainer: max_steps must be >= 0, got ", o.max_steps));
  if (o.log_every < 1) throw ValueError(message("Trainer: log_every must be >= 1, got ", o.log_every));
  if (o.eval_every < 0) throw ValueError(message("Trainer: eval_every must be >= 0, got ", o.eval_every));
  if (o.checkpoint_every < 0)
    throw ValueError(message("Trainer: checkpoint_every must be >= 0, got ", o.checkpoint_every));
  if (o.keep_checkpoints < 0)
    throw ValueError(message("Trainer: keep_checkpoints must be >= 0, got ", o.keep_checkpoints));
  if (o.accumulation_steps < 1)
    throw ValueError(message("Trainer: accumulation_steps must be >= 1, got ", o.accumulation_steps));
  if (!(o.clip_grad_norm >= 0.0))
    throw ValueError(message("Trainer: clip_grad_norm must be >= 0, got ", o.clip_grad_norm));
  if (o.steps_per_epoch < 0 || o.max_epochs < 0)
    throw ValueError(message("Trainer: steps_per_epoch and max_epochs must be >= 0, got ", o.steps_per_epoch, " and ",
                             o.max_epochs));
  if (!(o.time_budget_s >= 0.0) || !std::isfinite(o.time_budget_s))
    throw ValueError(message("Trainer: time_budget_s must be a finite number >= 0, got ", o.time_budget_s));
  if (!o.early_stopping.metric.empty() && (o.early_stopping.patience < 1 || !(o.early_stopping.min_delta >= 0.0)))
    throw ValueError(message("Trainer: early stopping on '", o.early_stopping.metric,
                             "' needs patience >= 1 and min_delta >= 0, got ", o.early_stopping.patience, " and ",
                             o.early_stopping.min_delta));
  if (o.max_epochs > 0) {
    if (o.steps_per_epoch == 0)
      throw ValueError(message("Trainer: max_epochs ", o.max_epochs, " needs steps_per_epoch"));
    options_.max_steps = o.max_epochs * o.steps_per_epoch;
  }
  // The model's own random state (dropout masks) is part of the run: without it a resumed run would draw
  // different masks. The prefix keeps these apart from the caller's names.
  for (const auto& [name, gen] : model_.named_generators()) generators_.emplace_back(kModelGeneratorPrefix + name, gen);
}

void Trainer::set_ema(ModelEma* ema, bool evaluate_on_ema) {
  if (ema && step_ > 0)
    throw ValueError(
        message("Trainer::set_ema: the trainer has taken ", step_, " steps; set the average before training"));
  ema_ = ema;
  evaluate_on_ema_ = ema && evaluate_on_ema;
}

void Trainer::set_scheduler(optim::Scheduler* scheduler) {
  if (scheduler && schedule_)
    throw ValueError("Trainer::set_scheduler: a fraction schedule is set (set_schedule); use one or the other");
  if (scheduler && plateau_)
    throw ValueError(
        "Trainer::set_scheduler: a plateau scheduler is set (set_plateau_scheduler); use one or the other");
  scheduler_ = scheduler;
}

void Trainer::set_schedule(optim::FractionSchedule schedule) {
  if (schedule && scheduler_)
    throw ValueError("Trainer::set_schedule: a step scheduler is set (set_scheduler); use one or the other");
  if (schedule && plateau_)
    throw ValueError("Trainer::set_schedule: a plateau scheduler is set (set_plateau_scheduler); use one or the other");
  schedule_ = std::move(schedule);
  schedule_base_lrs_.clear();
  for (const optim::ParamGroup& g : optimizer_.param_groups()) schedule_base_lrs_.push_back(*g.lr);
}

void Trainer::set_plateau_scheduler(optim::ReduceLROnPlateau* plateau, std::string metric) {
  if (plateau && metric.empty()) throw ValueError("Trainer::set_plateau_scheduler: the metric to watch is empty");
  if (plateau && &plateau->optimizer() != &optimizer_)
    throw ValueError("Trainer::set_plateau_scheduler: the plateau scheduler lowers another optimiser's rates");
  if (plateau && scheduler_)
    throw ValueError("Trainer::set_plateau_scheduler: a step scheduler is set (set_scheduler); use one or the other");
  if (plateau && schedule_)
    throw ValueError("Trainer::set_plateau_scheduler: a fraction schedule is set (set_schedule); use one or the other");
  plateau_ = plateau;
  plateau_metric_ = plateau ? std::move(metric) : std::string();
}

void Trainer::set_stop_callback(StopFn stop) { stop_fn_ = std::move(stop); }

double Trainer::progress() const {
  double done = options_.max_steps > 0 ? static_cast<double>(step_ + 1) / static_cast<double>(options_.max_steps) : 1.0;
  if (options_.time_budget_s > 0) done = std::max(done, elapsed() / options_.time_budget_s);
  return std::clamp(done, 0.0, 1.0);
}

std::optional<StopReason> Trainer::stop_before_step() const {
  if (step_ >= options_.max_steps) return StopReason::MaxSteps;
  if (options_.time_budget_s > 0 && elapsed() >= options_.time_budget_s) return StopReason::TimeBudget;
  if (!options_.early_stopping.metric.empty() && best_.bad_evals >= options_.early_stopping.patience)
    return StopReason::EarlyStopping;
  return std::nullopt;
}

bool Trainer::update_early_stopping(const std::map<std::string, double>& metrics) {
  const EarlyStopping& e = options_.early_stopping;
  if (e.metric.empty()) return false;
  const double value = watched_metric(metrics, "early stopping", e.metric);
  const bool improved =
      best_.step < 0 || (e.maximize ? value > best_.value + e.min_delta : value < best_.value - e.min_delta);
  if (improved) {
    best_ = BestMetric{value, step_, 0};
  } else {
    ++best_.bad_evals;
  }
  return best_.bad_evals >= e.patience;
}

void Trainer::update_plateau(const std::map<std::string, double>& metrics) {
  if (plateau_) plateau_->step(watched_metric(metrics, "the plateau scheduler", plateau_metric_));
}

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

std::string Trainer::metrics_path() const { return metrics_.path(); }

void Trainer::begin_fit(TrainResult& result) {
  if (options_.resume && load_checkpoint()) result.resumed_from = step_;
  if (replicated()) {
    // Every rank has read the checkpoint before rank 0 may write the next one, and read the same one.
    if (!same_on_every_rank(static_cast<double>(step_)))
      throw ValueError(message(
          "Trainer: rank ", options_.replicas.rank, " resumed at step ", step_,
          " but another rank at another step; every rank must read the same run_dir (a filesystem they share)"));
  }
  if (!writes_files()) return;
  if (options_.keep_checkpoints > 0) {
    // Kept models the run did not reach (an earlier run's, or past the checkpoint a resume starts
    // from) would be averaged with this run's.
    std::error_code ec;
    for (const std::string& file : kept_checkpoints(options_.run_dir))
      if (kept_checkpoint_step(file) > step_ || step_ == 0) fs::remove(file, ec);
  }
  if (!options_.tensorboard_dir.empty() && !tensorboard_) {
    tensorboard_ = std::make_unique<SummaryWriter>(options_.tensorboard_dir);
    // TensorBoard drops the points of earlier files past this run's start: those an interrupted run
    // logged after its checkpoint, or an earlier run's in the same directory.
    tensorboard_->add_session_start(step_ + 1);
  }
  if (options_.run_dir.empty()) return;
  std::error_code ec;
  fs::create_directories(options_.run_dir, ec);
  if (ec) throw IoError("Trainer: cannot create run_dir " + options_.run_dir + ": " + ec.message());
  metrics_.truncate_after(step_);
}

NonFiniteLoss Trainer::non_finite(std::int64_t step, std::int64_t micro, double value, const std::string& quantity,
                                  const std::string& detail) const {
  const std::int64_t on_disk = options_.run_dir.empty() ? -1 : checkpoint_step_on_disk(options_.run_dir);
  std::string kept;
  if (options_.run_dir.empty()) kept = "no checkpoint is kept (run_dir is not set)";
  else if (on_disk < 0) kept = "no checkpoint has been written in " + options_.run_dir + " yet";
  else kept = "the last good checkpoint (step " + std::to_string(on_disk) + ", " + checkpoint_dir() + ") is kept";
  // Numbered as metrics.jsonl numbers steps (steps done once this one ends), with step_fn's index.
  const std::int64_t k = options_.accumulation_steps;
  const std::string calls =
      micro >= 0 ? "step_fn(" + std::to_string(micro) + ")"
      : k == 1   ? "step_fn(" + std::to_string(step) + ")"
                 : "step_fn(" + std::to_string(step * k) + ") .. step_fn(" + std::to_string(step * k + k - 1) + ")";
  return NonFiniteLoss("Trainer: non-finite " + quantity + " " + format_number(value) + detail + " at step " +
                           std::to_string(step + 1) + " (" + calls + ")" + "; the optimiser step was not taken and " +
                           kept,
                       step, value, quantity, on_disk);
}

Trainer::StepRecord Trainer::run_step(const StepFn& step_fn, const TensorList& params, Window& window) {
  const std::int64_t s = step_;
  const double max_norm =
      options_.clip_grad_norm > 0 ? options_.clip_grad_norm : std::numeric_limits<double>::infinity();
  optimizer_.zero_grad();
  if (schedule_) {
    const double multiplier = schedule_(progress());
    for (std::size_t g = 0; g < schedule_base_lrs_.size(); ++g)
      optimizer_.set_lr(g, schedule_base_lrs_[g] * multiplier);
  }
  StepRecord record;
  const std::int64_t k = options_.accumulation_steps;
  double loss_sum = 0.0;
  std::int64_t examples = 0, tokens = 0;
  for (std::int64_t i = 0; i < k; ++i) {
    const std::int64_t micro = s * k + i;
    StepOutput out;
    {
      std::optional<AutocastGuard> autocast;
      if (options_.precision == Precision::BFloat16) autocast.emplace(kBFloat16);
      out = step_fn(micro);
    }
    if (!out.loss.defined() || out.loss.numel() != 1)
      throw ValueError(message("Trainer::fit: step_fn must return a one-element loss, got ",
                               (out.loss.defined() ? out.loss.shape().str() : std::string("an undefined tensor")),
                               " at step ", s + 1, " (step_fn(", micro, "))"));
    // Averaged over the ranks first: a NaN on one rank stops every rank here.
    const double own = out.loss.item();
    const double loss = mean_over_ranks(own);
    if (!std::isfinite(loss))
      throw non_finite(s, micro, loss, "loss",
                       replicated()
                           ? " (the mean over " + std::to_string(options_.replicas.world_size) + " ranks; rank " +
                                 std::to_string(options_.replicas.rank) + "'s own " + format_number(own) + ")"
                           : std::string());
    (k == 1 ? out.loss : out.loss * (1.0 / static_cast<double>(k))).backward();
    loss_sum += loss;
    examples += out.examples;
    tokens += out.tokens;
  }
  record.loss = loss_sum / static_cast<double>(k);
  record.grad_norm = optim::clip_grad_norm(params, max_norm);
  if (!std::isfinite(record.grad_norm)) throw non_finite(s, -1, record.grad_norm, "gradient norm");
  window.examples += examples;
  window.tokens += tokens;
  interval_loss_sum_ += record.loss;
  ++interval_steps_;
  if (!optimizer_.param_groups().empty()) record.lr = *optimizer_.param_groups()[0].lr;
  optimizer_.step();
  if (scheduler_) scheduler_->step();
  if (ema_) ema_->update();
  step_ = s + 1;
  last_loss_ = record.loss;
  return record;
}

void Trainer::log_step(const StepRecord& record, bool end_of_run, Window& window) {
  const double seconds = std::max(seconds_since(window.start), 1e-9);
  ordered_json line;
  line["step"] = step_;
  if (options_.steps_per_epoch > 0)
    line["epoch"] = static_cast<double>(step_) / static_cast<double>(options_.steps_per_epoch);
  line["loss"] = interval_steps_ > 0 ? interval_loss_sum_ / static_cast<double>(interval_steps_) : record.loss;
  line["step_loss"] = record.loss;
  line["lr"] = record.lr;
  line["grad_norm"] = record.grad_norm;
  line["examples_per_s"] = static_cast<double>(window.examples) / seconds;
  line["tokens_per_s"] = static_cast<double>(window.tokens) / seconds;
  line["elapsed_s"] = elapsed_before_ + elapsed_now_;
  if (end_of_run) line["end_of_run"] = true;
  metrics_.append(line.dump());
  if (tensorboard_) {
    for (const auto& [key, value] : line.items())
      if (key != "step" && value.is_number()) tensorboard_->add_scalar("train/" + key, value.get<double>(), step_);
    tensorboard_->flush();
  }
  window = Window();
  // An end-of-run line is dropped when the run resumes, so the next scheduled line still averages from the
  // previous scheduled one, as in a run never interrupted.
  if (!end_of_run) {
    interval_loss_sum_ = 0.0;
    interval_steps_ = 0;
  }
}

std::map<std::string, double> Trainer::evaluate(const EvalFn& eval_fn, bool end_of_run, ProgressDisplay& progress) {
  std::map<std::string, double> metrics;
  {
    NoGradGuard no_grad;
    std::optional<AutocastGuard> autocast;
    if (options_.precision == Precision::BFloat16) autocast.emplace(kBFloat16);
    model_.eval();
    try {
      if (ema_ && evaluate_on_ema_) {
        const ModelEma::Applied averaged = ema_->apply();
        metrics = eval_fn(step_);
      } else {
        metrics = eval_fn(step_);
      }
    } catch (...) {
      model_.train();
      throw;
    }
    model_.train();
  }
  if (replicated()) {
    // One collective per metric: every rank must return the same keys, or they would reduce different ones.
    io::Fnv1a keys;
    for (const auto& entry : metrics) {
      keys.add(entry.first);
      keys.add(std::uint64_t{0});  // ends the name: {"ab", "c"} and {"a", "bc"} differ
    }
    if (!same_on_every_rank(static_cast<double>(keys.value() >> 12)))  // exact in a double
      throw ValueError(message("Trainer: eval_fn returned other metric names on rank ", options_.replicas.rank,
                               " than on another rank; every rank must return the same keys"));
    for (auto& entry : metrics) entry.second = mean_over_ranks(entry.second);
  }
  ordered_json line;
  line["step"] = step_;
  line["eval"] = metrics;
  line["elapsed_s"] = elapsed_before_ + elapsed_now_;
  if (end_of_run) line["end_of_run"] = true;
  metrics_.append(line.dump());
  if (tensorboard_) {
    for (const auto& [name, value] : metrics) tensorboard_->add_scalar("eval/" + name, value, step_);
    tensorboard_->flush();
  }
  std::string text = "eval step " + std::to_string(step_) + ':';
  for (const auto& [name, value] : metrics) text += ' ' + name + ' ' + format_significant(value, 5);
  progress.message(text);
  return metrics;
}

double Trainer::end_fit(Clock::time_point call_start, bool was_training, bool agree) {
  model_.train(was_training);
  // Every rank adds the same time (the slowest rank's), or a later fit's time budget and schedule would
  // differ between the ranks. After an error (agree false) there is no collective to make.
  const double call_seconds = agree ? max_over_ranks(seconds_since(call_start)) : seconds_since(call_start);
  elapsed_before_ += call_seconds;
  elapsed_now_ = 0.0;
  return call_seconds;
}

TrainResult Trainer::fit(const StepFn& step_fn, const EvalFn& eval_fn) {
  if (!step_fn) throw ValueError("Trainer::fit: step_fn is empty");
  if (!options_.early_stopping.metric.empty() && !eval_fn)
    throw ValueError("Trainer::fit: early stopping on '" + options_.early_stopping.metric + "' needs an eval_fn");
  if (plateau_ && (!eval_fn || options_.eval_every <= 0))
    throw ValueError("Trainer::fit: the plateau scheduler on '" + plateau_metric_ +
                     "' needs an eval_fn and eval_every > 0 (it counts scheduled evaluations)");
  const Clock::time_point call_start = Clock::now();
  TrainResult result;
  begin_fit(result);
  ProgressDisplay progress(options_.progress, options_.out, options_.max_steps, step_, options_.steps_per_epoch);
  if (options_.time_budget_s > 0) progress.set_time_budget(options_.time_budget_s, elapsed_before_);
  if (result.resumed_from >= 0)
    progress.message("resumed from " + checkpoint_dir() + " at step " + std::to_string(step_));

  TensorList params;
  for (const optim::ParamGroup& g : optimizer_.param_groups())
    params.insert(params.end(), g.params.begin(), g.params.end());
  const bool was_training = model_.is_training();
  model_.train();
  Window window;
  std::optional<StopReason> stop = stop_before_step();
  if (stop && *stop != StopReason::MaxSteps)
    progress.message(std::string("the run has already stopped (") + to_string(*stop) + ") at step " +
                     std::to_string(step_));
  try {
    while (!stop) {
      const StepRecord record = run_step(step_fn, params, window);
      result.losses.push_back(record.loss);
      elapsed_now_ = max_over_ranks(seconds_since(call_start));  // one clock for every rank's stop decision
      stop = stop_before_step();                                 // max steps or time budget

      const bool log_due = step_ % options_.log_every == 0;
      bool logged = false;
      if (log_due || stop) {
        log_step(record, !log_due, window);
        logged = true;
      }
      progress.update(step_, record.loss, record.lr, record.grad_norm, logged);

      const bool eval_due = options_.eval_every > 0 && step_ % options_.eval_every == 0;
      std::optional<std::map<std::string, double>> metrics;
      const auto run_eval = [&] {
        metrics = evaluate(eval_fn, !eval_due, progress);
        if (update_early_stopping(*metrics) && !stop) stop = StopReason::EarlyStopping;
        if (eval_due) update_plateau(*metrics);
      };
      if (eval_fn && (eval_due || stop)) run_eval();
      // With replicas every rank takes part, with a callback or without: any rank's "stop" stops all.
      if (!stop && (stop_fn_ || replicated())) {
        StepInfo info{step_, record.loss, record.lr, record.grad_norm, elapsed(), metrics ? &*metrics : nullptr};
        const bool local = stop_fn_ && stop_fn_(info);
        if (max_over_ranks(local ? 1.0 : 0.0) > 0) stop = StopReason::Callback;
      }
      // A step that stops the run early is its last: logged and evaluated like one.
      if (stop && !logged) log_step(record, !log_due, window);
      if (stop && eval_fn && !metrics) run_eval();

      const bool checkpoint_due = options_.checkpoint_every > 0 && step_ % options_.checkpoint_every == 0;
      if (!options_.run_dir.empty() && writes_files() && (checkpoint_due || stop)) {
        save_checkpoint();
        if (progress.mode() == Progress::Lines)
          progress.message("checkpoint at step " + std::to_string(step_) + " in " + checkpoint_dir());
      }
    }
  } catch (...) {
    progress.finish();
    end_fit(call_start, was_training, false);
    throw;
  }
  if (*stop != StopReason::MaxSteps)
    progress.message(std::string("stopped at step ") + std::to_string(step_) + ": " + to_string(*stop));
  result.stop_reason = *stop;
  result.best_metric = best_.value;
  result.best_step = best_.step;
  progress.finish();
  result.seconds = end_fit(call_start, was_training, true);
  result.steps = step_;
  result.final_loss = last_loss_;
  result.total_seconds = elapsed_before_;
  return result;
}

}  // namespace tapegrad::train
