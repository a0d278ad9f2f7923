// ReduceLROnPlateau, following torch.optim.lr_scheduler.ReduceLROnPlateau: lowers every group's lr
// by `factor` once a validation metric has stopped improving for more than `patience` evaluations.
// After each evaluation, step(metric):
//   better = min, rel: metric < best * (1 - threshold)     max, rel: metric > best * (1 + threshold)
//            min, abs: metric < best - threshold           max, abs: metric > best + threshold
//   better: best = metric, bad_evals = 0; otherwise bad_evals += 1 (NaN is never better)
//   in cooldown (cooldown_counter > 0): cooldown_counter -= 1, bad_evals = 0
//   bad_evals > patience: lr = max(lr * factor, min_lr) in each group whose lr that lowers by more than
//   eps; then cooldown_counter = cooldown, bad_evals = 0
// best starts at +inf (min) or -inf (max).
//
//   optim::ReduceLROnPlateau plateau(opt, optim::ReduceLROnPlateauOptions().patience(2).factor(0.5));
//   for (...) { train an epoch; plateau.step(validation_loss); }
#pragma once

#include <cstdint>
#include <vector>

#include "tapegrad/autograd/arg.h"
#include "tapegrad/optim/optimizer.h"

namespace tapegrad::optim {

// Whether a lower (Min, a loss) or a higher (Max, an accuracy) metric is better.
enum class PlateauMode { Min, Max };
// Whether threshold is relative to best (Rel) or in the metric's units (Abs).
enum class ThresholdMode { Rel, Abs };

// torch's options and defaults. min_lrs, when not empty, gives one floor per parameter group and
// replaces min_lr.
struct ReduceLROnPlateauOptions {
  TAPEGRAD_ARG(PlateauMode, mode) = PlateauMode::Min;
  TAPEGRAD_ARG(double, factor) = 0.1;
  TAPEGRAD_ARG(std::int64_t, patience) = 10;
  TAPEGRAD_ARG(double, threshold) = 1e-4;
  TAPEGRAD_ARG(ThresholdMode, threshold_mode) = ThresholdMode::Rel;
  TAPEGRAD_ARG(std::int64_t, cooldown) = 0;
  TAPEGRAD_ARG(double, min_lr) = 0.0;
  TAPEGRAD_ARG(std::vector<double>, min_lrs);
  TAPEGRAD_ARG(double, eps) = 1e-8;
};

// What step() has counted: restore it with load_state to continue a run.
struct PlateauState {
  double best = 0.0;  // +inf / -inf before the first evaluation
  std::int64_t bad_evals = 0;
  std::int64_t cooldown_counter = 0;
  std::int64_t evals = 0;  // step() calls
};

class ReduceLROnPlateau {
 public:
  // ValueError for factor outside [0, 1), a negative patience, threshold, cooldown, min_lr or eps, or
  // min_lrs not one per group (naming the value).
  explicit ReduceLROnPlateau(Optimizer& optimizer,
                             const ReduceLROnPlateauOptions& options = ReduceLROnPlateauOptions());

  // Records one evaluation's metric; true when it lowered at least one group's lr. ValueError when
  // the optimiser has gained parameter groups since (their floors would be unknown).
  bool step(double metric);

  const PlateauState& state() const { return state_; }
  // Back to the state before the first step (best +-inf, counters 0); the rates are left as they are.
  void reset();
  // ValueError for negative counters or a NaN best (the rates themselves live in the optimiser's groups).
  void load_state(const PlateauState& state);
  const ReduceLROnPlateauOptions& options() const { return options_; }
  // The optimiser whose rates it lowers.
  const Optimizer& optimizer() const { return optimizer_; }

 private:
  bool is_better(double metric) const;

  Optimizer& optimizer_;
  ReduceLROnPlateauOptions options_;
  std::vector<double> min_lrs_;  // one per group
  PlateauState state_;
};

}  // namespace tapegrad::optim
