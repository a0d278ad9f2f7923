#include "tapegrad/optim/plateau.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tapegrad/autograd/error.h"

namespace tapegrad::optim {

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& optimizer, const ReduceLROnPlateauOptions& options)
    : optimizer_(optimizer), options_(options) {
  const ReduceLROnPlateauOptions& o = options_;
  if (!(o.factor() >= 0.0 && o.factor() < 1.0))
    throw ValueError(message("ReduceLROnPlateau: factor must be in [0, 1), got ", o.factor()));
  auto non_negative = [](const char* what, double v) {
    if (!(v >= 0.0)) throw ValueError(message("ReduceLROnPlateau: ", what, " must be >= 0, got ", v));
  };
  if (o.patience() < 0) throw ValueError(message("ReduceLROnPlateau: patience must be >= 0, got ", o.patience()));
  if (o.cooldown() < 0) throw ValueError(message("ReduceLROnPlateau: cooldown must be >= 0, got ", o.cooldown()));
  non_negative("threshold", o.threshold());
  non_negative("eps", o.eps());
  const std::size_t groups = optimizer_.param_groups().size();
  if (o.min_lrs().empty()) {
    non_negative("min_lr", o.min_lr());
    min_lrs_.assign(groups, o.min_lr());
  } else {
    if (o.min_lrs().size() != groups)
      throw ValueError(
          message("ReduceLROnPlateau: min_lrs has ", o.min_lrs().size(), " rates for ", groups, " parameter groups"));
    for (const double v : o.min_lrs()) non_negative("every min_lrs rate", v);
    min_lrs_ = o.min_lrs();
  }
  reset();
}

void ReduceLROnPlateau::reset() {
  state_ = PlateauState();
  state_.best = options_.mode() == PlateauMode::Min ? std::numeric_limits<double>::infinity()
                                                    : -std::numeric_limits<double>::infinity();
}

bool ReduceLROnPlateau::is_better(double metric) const {
  const double best = state_.best, t = options_.threshold();
  const bool rel = options_.threshold_mode() == ThresholdMode::Rel;
  if (options_.mode() == PlateauMode::Min) return rel ? metric < best * (1.0 - t) : metric < best - t;
  return rel ? metric > best * (t + 1.0) : metric > best + t;
}

bool ReduceLROnPlateau::step(double metric) {
  const std::size_t groups = optimizer_.param_groups().size();
  if (groups != min_lrs_.size())
    throw ValueError(message("ReduceLROnPlateau::step: the optimiser has ", groups, " parameter groups, ",
                             min_lrs_.size(), " when the scheduler was made (make it after add_param_group)"));
  ++state_.evals;
  if (is_better(metric)) {
    state_.best = metric;
    state_.bad_evals = 0;
  } else {
    ++state_.bad_evals;
  }
  if (state_.cooldown_counter > 0) {
    --state_.cooldown_counter;
    state_.bad_evals = 0;
  }
  if (state_.bad_evals <= options_.patience()) return false;
  bool lowered = false;
  for (std::size_t g = 0; g < min_lrs_.size(); ++g) {
    const double old_lr = *optimizer_.param_groups()[g].lr;
    const double new_lr = std::max(old_lr * options_.factor(), min_lrs_[g]);
    if (old_lr - new_lr > options_.eps()) {
      optimizer_.set_lr(g, new_lr);
      lowered = true;
    }
  }
  state_.cooldown_counter = options_.cooldown();
  state_.bad_evals = 0;
  return lowered;
}

void ReduceLROnPlateau::load_state(const PlateauState& state) {
  if (std::isnan(state.best)) throw ValueError("ReduceLROnPlateau::load_state: best is NaN");
  if (state.bad_evals < 0 || state.cooldown_counter < 0 || state.evals < 0)
    throw ValueError(message("ReduceLROnPlateau::load_state: counters must be >= 0, got bad_evals ", state.bad_evals,
                             ", cooldown_counter ", state.cooldown_counter, ", evals ", state.evals));
  state_ = state;
}

}  // namespace tapegrad::optim
