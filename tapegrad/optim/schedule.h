// Learning-rate schedules: pure functions of the step (0 for the first optimiser step) giving a multiplier of
// the base lr, and a Scheduler that writes base_lr * multiplier into each group.
//
//   optim::Scheduler sched(opt, optim::cosine_with_warmup(100, 10000, 0.1));
//   for (...) { ...; opt.step(); sched.step(); }
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "tapegrad/optim/optimizer.h"

namespace tapegrad::optim {

// multiplier(step) -> lr / base_lr
using Schedule = std::function<double(std::int64_t step)>;

// 1 at every step.
Schedule constant();
// gamma^floor(step / step_size). ValueError for step_size <= 0 or gamma < 0.
Schedule step_decay(std::int64_t step_size, double gamma);
// gamma^step. ValueError for gamma < 0.
Schedule exponential(double gamma);
// gamma^(the milestones <= step), a milestone given k times counting k times (torch's MultiStepLR).
// ValueError for a negative milestone or gamma < 0.
Schedule multi_step(std::vector<std::int64_t> milestones, double gamma);
// Cosine from 1 down towards min_ratio over `period` steps, then back to 1 and down again, each period
// period_mult times as long as the one before: with t the steps into the current period of length T,
// min_ratio + (1 - min_ratio) * (1 + cos(pi * t / T)) / 2 (torch's CosineAnnealingWarmRestarts with
// T_0 = period, T_mult = period_mult, eta_min = min_ratio * base lr). ValueError unless period >= 1,
// period_mult >= 1 and 0 <= min_ratio <= 1.
Schedule cosine_with_restarts(std::int64_t period, std::int64_t period_mult = 1, double min_ratio = 0.0);
// From start_factor to end_factor in a straight line over total_steps steps, then end_factor (torch's
// LinearLR): start + (end - start) * min(step, total_steps) / total_steps. ValueError unless
// 0 < start_factor <= 1, 0 <= end_factor <= 1 and total_steps >= 1.
Schedule linear_ramp(double start_factor, double end_factor, std::int64_t total_steps);
// (1 - min(step, total_steps) / total_steps)^power: down to 0 at total_steps and 0 after (torch's
// PolynomialLR). ValueError unless total_steps >= 1 and power is finite and >= 0.
Schedule polynomial(std::int64_t total_steps, double power = 1.0);

// How one_cycle moves between two rates: half a cosine or a straight line.
enum class Anneal { Cosine, Linear };

// torch's OneCycleLR defaults (its cycle_momentum aside: one_cycle sets the rate alone).
struct OneCycleOptions {
  double pct_start = 0.3;         // the fraction of the steps spent rising to the peak
  double div_factor = 25.0;       // the first rate is the peak / div_factor
  double final_div_factor = 1e4;  // the last is the first / final_div_factor
  Anneal anneal = Anneal::Cosine;
  bool three_phase = false;  // fall back to the first rate as long as the rise took, then to the last
};

// Smith's one-cycle policy as torch's OneCycleLR computes it, the group's base lr being the peak
// (torch's max_lr): from 1 / div_factor up to 1 by step pct_start * total_steps - 1, then down to
// 1 / (div_factor * final_div_factor) at step total_steps - 1 (three_phase: down to 1 / div_factor by
// step 2 * pct_start * total_steps - 2 first). Phase ends are fractional steps, as torch's are; a
// phase of no length is at its end. Steps past the last keep the last rate (torch extrapolates the
// last phase one step further, then raises).
// ValueError unless total_steps >= 1, 0 <= pct_start <= 1 (three_phase: <= 0.5) and both factors are
// finite and > 0.
Schedule one_cycle(std::int64_t total_steps, const OneCycleOptions& options = {});
// How cyclic scales the height of each cycle (torch's CyclicLR modes): kept; halved every cycle; times
// gamma^step.
enum class CyclicMode { Triangular, Triangular2, ExpRange };

struct CyclicOptions {
  std::optional<std::int64_t> step_size_down;  // steps from the top back to the bottom; unset: step_size_up
  CyclicMode mode = CyclicMode::Triangular;
  double gamma = 1.0;  // ExpRange's factor per step
};

// Cyclical learning rates (Smith 2017) as torch's CyclicLR computes them, the group's base lr being the
// bottom of the cycle (torch's base_lr) and max_factor times it the top (torch's max_lr / base_lr): a
// straight line up over step_size_up steps and down over step_size_down, again and again. With u and d
// the two sizes, c = floor(1 + step / (u + d)) the cycle and x = 1 + step / (u + d) - c its fraction
// done, the height is x / r on the way up (x <= r = u / (u + d)) and (x - 1) / (r - 1) on the way down,
// times 1 (Triangular), 1 / 2^(c - 1) (Triangular2) or gamma^step (ExpRange); the multiplier is
// 1 + (max_factor - 1) * height. torch's cycle_momentum is not followed: the schedule sets the rate
// alone. ValueError unless max_factor is finite and >= 1, step_size_up >= 1, step_size_down >= 0 and
// gamma is finite and > 0.
//
//   optim::SGD opt(params, optim::SGDOptions(0.001));                  // the bottom
//   optim::Scheduler sched(opt, optim::cyclic(/*max_factor=*/6.0, /*step_size_up=*/2000));  // top 0.006
Schedule cyclic(double max_factor, std::int64_t step_size_up, const CyclicOptions& options = {});
// min(1, (step + 1) / warmup_steps): the first step already uses lr / warmup_steps. ValueError for warmup_steps <= 0.
Schedule linear_warmup(std::int64_t warmup_steps);
// (step + 1) / warmup_steps for step < warmup_steps, then with progress = min(1, (step - warmup) / (total - warmup))
// min_ratio + (1 - min_ratio) * (1 + cos(pi * progress)) / 2, min_ratio = min_lr / base lr is expressed as a
// fraction of each group's base lr. ValueError unless 0 <= warmup_steps < total_steps and 0 <= min_ratio <= 1.
Schedule cosine_with_warmup(std::int64_t warmup_steps, std::int64_t total_steps, double min_ratio = 0.0);

// Schedules defined on the fraction of training done, in [0, 1], instead of the step: one schedule fits a run of
// any length, also one whose end is a time budget (train::Trainer::set_schedule computes the fraction from the
// steps and the time). multiplier(fraction) -> lr / base_lr.
//
//   trainer.set_schedule(optim::warmup_cosine(/*warmup_fraction=*/0.02, /*min_ratio=*/0.1));
//   optim::Scheduler sched(opt, optim::over_steps(optim::warmup_cosine(0.02), 5000));   // the same by steps
using FractionSchedule = std::function<double(double fraction)>;

// fraction / warmup_fraction (at most 1) during warmup, then
// min_ratio + (1 - min_ratio) * (1 + cos(pi * p)) / 2 with p = (fraction - warmup_fraction) / (1 - warmup_fraction).
// ValueError unless 0 <= warmup_fraction < 1 and 0 <= min_ratio <= 1.
FractionSchedule warmup_cosine(double warmup_fraction, double min_ratio = 0.0);
// The same warmup, then a straight line from 1 down to min_ratio at fraction 1.
FractionSchedule warmup_linear(double warmup_fraction, double min_ratio = 0.0);
// The step schedule of a run of total_steps steps: multiplier(step) = schedule((step + 1) / total_steps), the
// fraction done once the step ends (so the first step of a warmup does not run at lr 0). ValueError for
// total_steps <= 0.
Schedule over_steps(FractionSchedule schedule, std::int64_t total_steps);

// Holds each group's base lr (read at construction) and sets group lr = base * schedule(step) for the current step;
// the constructor applies step 0, step() advances and applies the next one.
class Scheduler {
 public:
  Scheduler(Optimizer& optimizer, Schedule schedule);
  void step();
  std::int64_t current_step() const { return step_; }
  // Restores a saved step (and re-applies it). ValueError for step < 0.
  void set_step(std::int64_t step);
  const std::vector<double>& base_lrs() const { return base_lrs_; }

 private:
  void apply();
  Optimizer& optimizer_;
  Schedule schedule_;
  std::vector<double> base_lrs_;
  std::int64_t step_ = 0;
};

}  // namespace tapegrad::optim
