// Trainer: the training loop. It runs max_steps optimiser steps, logs metrics as JSON lines, shows
// progress, evaluates and checkpoints on a schedule, and resumes from the last checkpoint so that an
// interrupted run continues bit-identically.
//
//   train::TrainerOptions o; o.max_steps = 2000; o.eval_every = 200; o.checkpoint_every = 500;
//   o.run_dir = "runs/lm"; o.clip_grad_norm = 1.0;
//   train::Trainer trainer(model, adam, o);
//   trainer.set_scheduler(&sched);
//   trainer.track_generator("data", data_gen);   // the model's own generators are tracked already
//   auto result = trainer.fit([&](std::int64_t step) {
//     data::Batch b = loader.batch_at(step);
//     return train::StepOutput{nn::cross_entropy(model(b.input), b.labels), b.size(), b.tokens};
//   });
//
// Stopping: a run ends at max_steps, or earlier when its training time reaches time_budget_s, when early
// stopping sees no improvement of a validation metric for `patience` evaluations, or when the stop callback
// says so (TrainResult::stop_reason tells which). The step that stops it is logged, evaluated and checkpointed
// as the last step is. A run that stopped early stays stopped when fit is called again on its run_dir.
//
// One step (global index s, 0-based): zero_grad; out = step_fn(s); a NaN/inf loss throws NonFiniteLoss;
// backward; the global L2 gradient norm (clipped if clip_grad_norm > 0; a NaN/inf norm throws
// NonFiniteLoss); optimizer.step(); scheduler step; the moving average's update (set_ema). With accumulation_steps k >
// 1 a step runs k micro-batches, step_fn(s * k) .. step_fn(s * k + k - 1), each loss scaled by 1/k before its backward,
// so the gradients summed before the optimiser step are those of the mean loss: with mean-reduced losses over equal
// micro-batches, one step of a k-times batch up to rounding. The step's loss is the micro-batches' mean. After it,
// step() == s + 1, and logging, evaluation and checkpointing happen when step() is a multiple of their interval and at
// max_steps.
//
// Determinism: step_fn must be a pure function of (step, model, tracked generators), e.g. a batch drawn by
// DataLoader::batch_at(step). eval_fn runs in eval mode under NoGradGuard and must not draw from a
// tracked generator (the end-of-call evaluation of an interrupted run would otherwise shift it).
//
// Files in run_dir:
//   metrics.jsonl  one JSON object per line:
//     {"step":s,"loss":..,"step_loss":..,"lr":..,"grad_norm":..,"examples_per_s":..,"tokens_per_s":..,"elapsed_s":..}
//     {"step":s,"eval":{"val_loss":..},"elapsed_s":..}
//     with "epoch": s / steps_per_epoch when steps_per_epoch is set (epochs are counted in steps: an epoch
//     is steps_per_epoch batches, e.g. loader.batches_per_epoch(), and max_epochs sets max_steps from it);
//     s counts the optimiser steps done (1 after the first); loss, lr and grad_norm are those of step s
//     (lr is the rate step s used) except loss, the mean over the steps since the previous scheduled line
//     (the last step's own loss is "step_loss"); the rates are over the steps since the previous line. A line written
//     only because the call ended off the logging schedule carries "end_of_run":true. When a run resumes
//     from the checkpoint at step k, lines with step > k and end_of_run lines are dropped, so the file
//     reads like that of an uninterrupted run (elapsed and throughput aside).
//   checkpoint/    model, optimiser and trainer state (layout and crash safety: checkpoint.h).
//
// The pieces: this loop (trainer.cpp), metrics.jsonl (metrics.h), the progress display (progress.h) and
// the checkpoint directory (checkpoint.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/generator.h"
#include "tapegrad/autograd/tensor.h"
#include "tapegrad/nn/module.h"
#include "tapegrad/optim/optimizer.h"
#include "tapegrad/optim/plateau.h"
#include "tapegrad/optim/schedule.h"
#include "tapegrad/train/ema.h"
#include "tapegrad/train/metrics.h"
#include "tapegrad/train/progress.h"
#include "tapegrad/train/tensorboard.h"

namespace tapegrad::train {

// Early stopping on an evaluation metric: an evaluation improves on the best so far when its value is lower
// (higher with maximize) by more than min_delta; after `patience` evaluations in a row without improvement,
// training stops. Its state (best value and step, evaluations without improvement) is checkpointed.
struct EarlyStopping {
  std::string metric;         // a key eval_fn returns, e.g. "val_loss"; empty: off
  std::int64_t patience = 5;  // >= 1
  double min_delta = 0.0;     // >= 0
  bool maximize = false;      // true for accuracy-like metrics
};

// The processes of a data-parallel run (dist::DistributedDataParallel) as the Trainer sees them;
// dist::replicas(world) makes one. With world_size > 1 every rank runs fit() with the same options and
// run_dir: only rank 0 writes run_dir (metrics.jsonl, checkpoints), TensorBoard files and progress, and
// every rank reads the checkpoint when it resumes (then all wait for each other, so rank 0 overwrites
// nothing another rank still reads). Each step's loss is the mean over the ranks (so a NaN on one rank
// stops every rank at the same step), evaluation metrics are averaged over the ranks, the training time
// is the slowest rank's, and a stop callback stops the run when it says so on any rank: every rank stops
// at the same step. A checkpoint holds nothing of the world size, so a run resumes on any number of
// processes that divides its global batch. StepOutput's examples and tokens are logged as rank 0
// reports them (return the global batch's counts for global throughput figures). Every rank must set
// the same callbacks and return the same eval_fn keys.
struct Replicas {
  int rank = 0;
  int world_size = 1;
  std::function<double(double)> mean;  // a number averaged over the ranks
  std::function<double(double)> max;   // the largest value over the ranks
  std::function<void()> barrier;       // returns once every rank has called it
};

// What step_fn's and eval_fn's forward passes run in. BFloat16 runs them under autocast
// (autograd/autocast.h: matrix products in bfloat16, precision-sensitive ops in float32) while the
// parameters, their gradients and the optimiser's state stay float32; backward runs outside the
// autocast scope. "float32" and "bf16" in configs (to_string, parse_precision).
enum class Precision { Float32, BFloat16 };
const char* to_string(Precision precision);
// "float32" or "bf16" (also "bfloat16"); ValueError naming the choices otherwise.
Precision parse_precision(const std::string& name);

struct TrainerOptions {
  std::int64_t max_steps = 1000;             // total optimiser steps of the run (not of this call)
  std::int64_t steps_per_epoch = 0;          // 0: unknown; else metrics lines carry "epoch" (fractional) and the
                                             // progress shows it (e.g. DataLoader::batches_per_epoch(), divided by
                                             // accumulation_steps when step_fn's index is a micro-batch's)
  std::int64_t max_epochs = 0;               // > 0 (needs steps_per_epoch): max_steps = max_epochs * steps_per_epoch
  std::int64_t log_every = 10;               // a metrics.jsonl line and a progress update every N steps (>= 1)
  std::int64_t eval_every = 0;               // 0: never (the last step is always evaluated if eval given)
  std::int64_t checkpoint_every = 0;         // 0: only at the end (when run_dir is set)
  std::int64_t accumulation_steps = 1;       // micro-batches (step_fn calls) per optimiser step (>= 1)
  std::int64_t keep_checkpoints = 0;         // > 0: keep the models of the last N checkpoints for averaging
                                             // (run_dir/checkpoints/model-<step>.safetensors; average.h)
  double clip_grad_norm = 0.0;               // 0: off; else global L2 clip, the norm is logged either way
  Precision precision = Precision::Float32;  // BFloat16: step_fn and eval_fn run under autocast
  std::string run_dir;                       // empty: no files; else metrics.jsonl + checkpoint/ inside
  std::string tensorboard_dir;         // not empty: every metrics.jsonl line's numbers also go to a TensorBoard event
                                       // file there (tensorboard.h), as "train/<key>" and "eval/<name>"; a resumed
                                       // run writes a new file, so steps between its checkpoint and the
                                       // interruption show twice
  bool resume = true;                  // continue from run_dir's last good checkpoint if present
  double time_budget_s = 0.0;          // > 0: stop after the step that brings the run's training time (this
                                       // call and those it resumed) to this many seconds
  EarlyStopping early_stopping;        // off unless early_stopping.metric is set (needs an eval_fn)
  Progress progress = Progress::Auto;  // see progress.h
  std::ostream* out = &std::cerr;      // where the bar / lines / messages go (nullptr: nowhere)
  Replicas replicas;                   // data parallelism (see Replicas); one process by default
};

// What step_fn returns: the scalar loss to minimise, and how many examples / tokens it covered
// (for the throughput figures; 0 if not meaningful).
struct StepOutput {
  Tensor loss;
  std::int64_t examples = 0;
  std::int64_t tokens = 0;
};

// step = 0-based global index of the micro-batch: the optimiser step's index times accumulation_steps, plus
// the micro-batch's place in it (the optimiser step's index when accumulation_steps is 1).
using StepFn = std::function<StepOutput(std::int64_t step)>;
using EvalFn = std::function<std::map<std::string, double>(std::int64_t step)>;  // step = steps done; {"val_loss":..}

enum class StopReason { MaxSteps, TimeBudget, EarlyStopping, Callback };
// "max_steps", "time_budget", "early_stopping", "callback".
const char* to_string(StopReason reason);

// What the stop callback sees after each step (and its logging and evaluation).
struct StepInfo {
  std::int64_t step = 0;  // steps done
  double loss = 0.0;      // this step's loss
  double lr = 0.0;
  double grad_norm = 0.0;
  double elapsed_s = 0.0;                               // the run's training time so far
  const std::map<std::string, double>* eval = nullptr;  // this step's evaluation, null if none ran
};
// Returns true to stop training after this step.
using StopFn = std::function<bool(const StepInfo& info)>;

struct TrainResult {
  std::int64_t steps = 0;          // global steps done when fit returned (= max_steps unless resumed past it)
  double final_loss = 0;           // loss of the last step (from the checkpoint if this call ran none)
  double seconds = 0;              // wall time of this call
  double total_seconds = 0;        // training time of the whole run: this call and those it resumed
  std::int64_t resumed_from = -1;  // the checkpoint's step, or -1 if this call did not resume
  std::vector<double> losses;      // this call's per-step losses, losses[i] of global step resumed_from + i
  StopReason stop_reason = StopReason::MaxSteps;
  double best_metric = 0.0;     // early stopping's best value (of the whole run), when best_step >= 0
  std::int64_t best_step = -1;  // the step whose evaluation gave it; -1 without early stopping or evaluations
};

// A NaN or infinite loss, or gradient norm, at some step. Thrown before the optimiser step, so parameters
// are those after the previous step; nothing is written for the failing step and the checkpoint directory
// is left as it was.
class NonFiniteLoss : public Error {
 public:
  NonFiniteLoss(const std::string& message, std::int64_t step, double value, std::string quantity,
                std::int64_t checkpoint_step)
      : Error(message), step_(step), value_(value), quantity_(std::move(quantity)), checkpoint_step_(checkpoint_step) {}
  // 0-based index of the failing optimiser step (the argument step_fn received when accumulation_steps is 1).
  std::int64_t step() const { return step_; }
  double value() const { return value_; }
  // "loss" or "gradient norm".
  const std::string& quantity() const { return quantity_; }
  // Step of the last good checkpoint on disk, -1 if there is none.
  std::int64_t checkpoint_step() const { return checkpoint_step_; }

 private:
  std::int64_t step_;
  double value_;
  std::string quantity_;
  std::int64_t checkpoint_step_;
};

class Trainer {
 public:
  // Keeps references to model and optimizer; they must outlive the trainer. ValueError on bad options.
  Trainer(nn::Module& model, optim::Optimizer& optimizer, TrainerOptions options);
  // A module handle (nn::Sequential, any TAPEGRAD_MODULE): trains the module it holds.
  template <class Impl>
  Trainer(const nn::ModuleHolder<Impl>& model, optim::Optimizer& optimizer, TrainerOptions options)
      : Trainer(*model, optimizer, std::move(options)) {}

  // Stepped after every optimiser step; its step is checkpointed. nullptr: none.
  void set_scheduler(optim::Scheduler* scheduler);
  // Sets every group's lr to base * schedule(progress()) before each step, base being the group's lr now.
  // Defined on the fraction of training done, it suits a time budget. ValueError together with a scheduler.
  void set_schedule(optim::FractionSchedule schedule);
  // Steps `plateau` with eval_fn's `metric` after every scheduled evaluation (every eval_every steps; not
  // the extra one that ends a call off that schedule, so an interrupted run lowers its rates where an
  // uninterrupted one does); the lowered rates apply from the next step. Its counters are checkpointed
  // and restored when the checkpoint's plateau watched the same metric in the same mode (reset
  // otherwise); the rates are the optimiser's, checkpointed as they are. ValueError for an empty metric,
  // a scheduler of another optimiser, or together with a scheduler or a fraction schedule (each sets
  // the rates); fit refuses it without an eval_fn or with eval_every 0. nullptr: none. It must outlive
  // the trainer.
  void set_plateau_scheduler(optim::ReduceLROnPlateau* plateau, std::string metric);
  // A moving average of the model's weights (ema.h), updated after every optimiser step and kept in the
  // checkpoint (ema.safetensors); with evaluate_on_ema, eval_fn sees the averaged weights (the model's own
  // are put back after it). Set before training; a resumed run needs it if the checkpoint has one and
  // refuses a checkpoint without one. nullptr: none. It must outlive the trainer.
  void set_ema(ModelEma* ema, bool evaluate_on_ema = false);
  // Called after every step that does not already end the run (max_steps, the time budget, early
  // stopping); training stops when it returns true. Empty: none.
  void set_stop_callback(StopFn stop);
  // The generator's state is checkpointed under name and restored on resume (ValueError on an empty or
  // repeated name, or one starting with "model."). The generator must outlive the trainer. The model's
  // own generators (model.named_generators(), e.g. dropout) are tracked by the constructor as
  // "model.<name>"; this is for the caller's (data order, sampling).
  void track_generator(std::string name, Generator& gen);

  // Trains until step() == max_steps (resuming first if options.resume and a checkpoint exists).
  TrainResult fit(const StepFn& step_fn, const EvalFn& eval_fn = {});

  // Optimiser steps done so far (restored by load_checkpoint).
  std::int64_t step() const { return step_; }
  // The fraction of training done once the next step ends, in [0, 1]: (step() + 1) / max_steps, or, with a
  // time budget, the training time so far over the budget when that is larger.
  double progress() const;
  const TrainerOptions& options() const { return options_; }

  // Writes run_dir/checkpoint atomically (ValueError if run_dir is empty, IoError on a failed write). On a
  // data-parallel rank other than 0, does nothing.
  void save_checkpoint();
  // Restores model, optimizer, scheduler, tracked generators and step from run_dir's checkpoint. False if
  // there is none (or run_dir is empty). A corrupt or mismatching checkpoint throws (IoError for unreadable
  // files and bad trainer.json fields, ValueError/ShapeError/TypeError for mismatching entries), naming the
  // file and the field, and changes nothing.
  bool load_checkpoint();

  // run_dir/checkpoint, run_dir/metrics.jsonl (empty strings when run_dir is empty).
  std::string checkpoint_dir() const;
  std::string metrics_path() const;

 private:
  using Clock = std::chrono::steady_clock;
  // What one optimiser step reports.
  struct StepRecord {
    double loss = 0.0;
    double lr = 0.0;  // the rate the step used (group 0)
    double grad_norm = 0.0;
  };
  // Throughput since the previous metrics line.
  struct Window {
    Clock::time_point start = Clock::now();
    std::int64_t examples = 0;
    std::int64_t tokens = 0;
  };
  // Early stopping's state (checkpointed).
  struct BestMetric {
    double value = 0.0;
    std::int64_t step = -1;  // -1: no evaluation yet
    std::int64_t bad_evals = 0;
  };

  // Resumes if asked and possible (result.resumed_from), creates run_dir, drops metrics lines past the step.
  void begin_fit(TrainResult& result);
  // zero_grad, step_fn, checks, backward, clipping, optimiser and scheduler steps; step_ advances by one.
  StepRecord run_step(const StepFn& step_fn, const TensorList& params, Window& window);
  // The metrics.jsonl line of the step just done; starts a new throughput window.
  void log_step(const StepRecord& record, bool end_of_run, Window& window);
  // eval_fn in eval mode without gradients; its metrics line and a progress message. Returns the metrics.
  std::map<std::string, double> evaluate(const EvalFn& eval_fn, bool end_of_run, ProgressDisplay& progress);
  // Records an evaluation for early stopping; true when patience has run out.
  bool update_early_stopping(const std::map<std::string, double>& metrics);
  // Steps the plateau scheduler, if one is set, with its metric.
  void update_plateau(const std::map<std::string, double>& metrics);
  // The run's training time so far.
  double elapsed() const { return elapsed_before_ + elapsed_now_; }
  // Why the run should stop before taking another step (max steps, time budget, early stopping), if it should.
  std::optional<StopReason> stop_before_step() const;
  // NonFiniteLoss for optimiser step `step` (its micro-batch step_fn(micro), or -1 for the step as a whole),
  // saying which checkpoint is kept.
  // detail follows the value in the message (with replicas: the mean's ranks and this rank's own loss).
  NonFiniteLoss non_finite(std::int64_t step, std::int64_t micro, double value, const std::string& quantity,
                           const std::string& detail = std::string()) const;
  // Restores the training mode and adds this call's time to the run's (agreed over the ranks unless
  // agree is false: after an error).
  double end_fit(Clock::time_point call_start, bool was_training, bool agree);
  // Data parallelism (options_.replicas): whether this process writes files, and values over the ranks.
  bool writes_files() const { return options_.replicas.rank == 0; }
  bool replicated() const { return options_.replicas.world_size > 1; }
  double mean_over_ranks(double value) const { return replicated() ? options_.replicas.mean(value) : value; }
  double max_over_ranks(double value) const { return replicated() ? options_.replicas.max(value) : value; }
  // Whether every rank passed the same value: the same answer on every rank (a collective: every
  // rank must call it). Both reductions run unconditionally, so the ranks' collectives stay paired.
  bool same_on_every_rank(double value) const {
    const double highest = max_over_ranks(value);
    const double lowest = -max_over_ranks(-value);
    return highest == lowest;
  }

  nn::Module& model_;
  optim::Optimizer& optimizer_;
  TrainerOptions options_;
  optim::Scheduler* scheduler_ = nullptr;
  optim::ReduceLROnPlateau* plateau_ = nullptr;
  std::string plateau_metric_;
  ModelEma* ema_ = nullptr;
  bool evaluate_on_ema_ = false;
  optim::FractionSchedule schedule_;
  std::vector<double> schedule_base_lrs_;
  StopFn stop_fn_;
  BestMetric best_;
  // The losses since the last metrics line, for its mean (checkpointed, so a resumed run logs the same means).
  double interval_loss_sum_ = 0.0;
  std::int64_t interval_steps_ = 0;
  std::vector<std::pair<std::string, Generator*>> generators_;
  std::int64_t step_ = 0;
  double last_loss_ = 0.0;
  double elapsed_before_ = 0.0;                 // training seconds of earlier calls (restored from checkpoints)
  double elapsed_now_ = 0.0;                    // seconds of the running call, kept current for checkpoints
  MetricsFile metrics_;                         // run_dir/metrics.jsonl
  std::unique_ptr<SummaryWriter> tensorboard_;  // options_.tensorboard_dir's event file, from the first fit
};

}  // namespace tapegrad::train
