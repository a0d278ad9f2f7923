#include "tapegrad/optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/format.h"

namespace tapegrad::optim {

namespace {

[[noreturn]] void fail(const char* schedule, const char* what, double v) {
  throw ValueError(message(schedule, ": invalid ", what, " ", v));
}

constexpr double kPi = 3.14159265358979323846;

}  // namespace

Schedule constant() {
  return [](std::int64_t) { return 1.0; };
}

Schedule step_decay(std::int64_t step_size, double gamma) {
  if (step_size <= 0) fail("step_decay", "step_size", static_cast<double>(step_size));
  if (!(gamma >= 0.0)) fail("step_decay", "gamma", gamma);
  return [step_size, gamma](std::int64_t step) {
    const std::int64_t decays = step / step_size;  // whole periods completed
    return std::pow(gamma, static_cast<double>(decays));
  };
}

Schedule exponential(double gamma) {
  if (!(gamma >= 0.0)) fail("exponential", "gamma", gamma);
  return [gamma](std::int64_t step) { return std::pow(gamma, static_cast<double>(step)); };
}

Schedule multi_step(std::vector<std::int64_t> milestones, double gamma) {
  for (const std::int64_t m : milestones)
    if (m < 0) fail("multi_step", "milestone", static_cast<double>(m));
  if (!(gamma >= 0.0)) fail("multi_step", "gamma", gamma);
  std::sort(milestones.begin(), milestones.end());
  return [milestones = std::move(milestones), gamma](std::int64_t step) {
    const auto passed = std::upper_bound(milestones.begin(), milestones.end(), step) - milestones.begin();
    return std::pow(gamma, static_cast<double>(passed));
  };
}

Schedule cosine_with_restarts(std::int64_t period, std::int64_t period_mult, double min_ratio) {
  if (period < 1) fail("cosine_with_restarts", "period", static_cast<double>(period));
  if (period_mult < 1) fail("cosine_with_restarts", "period_mult", static_cast<double>(period_mult));
  if (!(min_ratio >= 0.0 && min_ratio <= 1.0)) fail("cosine_with_restarts", "min_ratio", min_ratio);
  return [period, period_mult, min_ratio](std::int64_t step) {
    // t: steps into the current period; length: its length (a double: past int64 it only needs to exceed t).
    std::int64_t t = step;
    double length = static_cast<double>(period);
    if (period_mult == 1) {
      t %= period;
    } else {
      std::int64_t current = period;
      while (t >= current) {
        t -= current;
        length = static_cast<double>(current) * static_cast<double>(period_mult);
        if (current > std::numeric_limits<std::int64_t>::max() / period_mult) break;  // the next one outlasts any t
        current *= period_mult;
      }
    }
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + std::cos(kPi * static_cast<double>(t) / length));
  };
}

Schedule linear_ramp(double start_factor, double end_factor, std::int64_t total_steps) {
  if (!(start_factor > 0.0 && start_factor <= 1.0))
    fail("linear_ramp", "start_factor (must be in (0, 1])", start_factor);
  if (!(end_factor >= 0.0 && end_factor <= 1.0)) fail("linear_ramp", "end_factor (must be in [0, 1])", end_factor);
  if (total_steps < 1) fail("linear_ramp", "total_steps", static_cast<double>(total_steps));
  return [start_factor, end_factor, total_steps](std::int64_t step) {
    const double progress = static_cast<double>(std::min(step, total_steps)) / static_cast<double>(total_steps);
    return start_factor + (end_factor - start_factor) * progress;
  };
}

Schedule polynomial(std::int64_t total_steps, double power) {
  if (total_steps < 1) fail("polynomial", "total_steps", static_cast<double>(total_steps));
  if (!(power >= 0.0 && std::isfinite(power))) fail("polynomial", "power", power);
  return [total_steps, power](std::int64_t step) {
    const double progress = static_cast<double>(std::min(step, total_steps)) / static_cast<double>(total_steps);
    return std::pow(1.0 - progress, power);
  };
}

Schedule cyclic(double max_factor, std::int64_t step_size_up, const CyclicOptions& options) {
  if (!(max_factor >= 1.0 && std::isfinite(max_factor)))
    throw ValueError(message("cyclic: invalid max_factor ", max_factor, " (must be finite and >= 1)"));
  if (step_size_up < 1) fail("cyclic", "step_size_up", static_cast<double>(step_size_up));
  const std::int64_t step_size_down = options.step_size_down.value_or(step_size_up);
  if (step_size_down < 0) fail("cyclic", "step_size_down", static_cast<double>(step_size_down));
  if (!(options.gamma > 0.0 && std::isfinite(options.gamma))) fail("cyclic", "gamma", options.gamma);
  const double total = static_cast<double>(step_size_up) + static_cast<double>(step_size_down);
  const double up_ratio = static_cast<double>(step_size_up) / total;
  const CyclicMode mode = options.mode;
  const double gamma = options.gamma;
  return [=](std::int64_t step) {
    const double position = static_cast<double>(step) / total;
    const double cycle = std::floor(1.0 + position);
    const double x = 1.0 + position - cycle;
    double height = x <= up_ratio ? x / up_ratio : (x - 1.0) / (up_ratio - 1.0);
    if (mode == CyclicMode::Triangular2) height /= std::pow(2.0, cycle - 1.0);
    if (mode == CyclicMode::ExpRange) height *= std::pow(gamma, static_cast<double>(step));
    return 1.0 + (max_factor - 1.0) * height;
  };
}

Schedule one_cycle(std::int64_t total_steps, const OneCycleOptions& options) {
  const OneCycleOptions& o = options;
  if (total_steps < 1) fail("one_cycle", "total_steps", static_cast<double>(total_steps));
  const double pct_limit = o.three_phase ? 0.5 : 1.0;
  if (!(o.pct_start >= 0.0 && o.pct_start <= pct_limit))
    fail("one_cycle",
         o.three_phase ? "pct_start (must be in [0, 0.5] with three_phase)" : "pct_start (must be in [0, 1])",
         o.pct_start);
  if (!(o.div_factor > 0.0 && std::isfinite(o.div_factor))) fail("one_cycle", "div_factor", o.div_factor);
  if (!(o.final_div_factor > 0.0 && std::isfinite(o.final_div_factor)))
    fail("one_cycle", "final_div_factor", o.final_div_factor);
  // A phase ends once `steps` steps are done (torch's end_step + 1). The rise's end is the product
  // pct_start * total_steps alone, rounded before anything is taken off it, as torch's Python
  // computes it: a fused multiply-add would put pct_start = 0.1 over 10 steps 5.6e-17 past the first.
  struct Phase {
    double steps, from, to;
  };
  const double initial = 1.0 / o.div_factor, last = initial / o.final_div_factor;
  const double rise_steps = o.pct_start * static_cast<double>(total_steps);
  const auto total = static_cast<double>(total_steps);
  std::vector<Phase> phases{{rise_steps, initial, 1.0}};
  if (o.three_phase) {
    phases.push_back({2.0 * rise_steps - 1.0, 1.0, initial});  // torch: 2 * pct_start * total_steps - 2
    phases.push_back({total, initial, last});
  } else {
    phases.push_back({total, 1.0, last});
  }
  return [phases = std::move(phases), anneal = o.anneal, total](std::int64_t step) {
    const double done = std::min(static_cast<double>(step), total - 1.0) + 1.0;  // steps done after this one
    double start = 1.0;
    for (std::size_t i = 0;; ++i) {
      const Phase& p = phases[i];
      if (done <= p.steps || i + 1 == phases.size()) {
        const double pct = p.steps > start ? (done - start) / (p.steps - start) : 1.0;
        if (anneal == Anneal::Linear) return p.from + (p.to - p.from) * pct;
        return p.to + (p.from - p.to) * 0.5 * (1.0 + std::cos(kPi * pct));
      }
      start = p.steps;
    }
  };
}

Schedule linear_warmup(std::int64_t warmup_steps) {
  if (warmup_steps <= 0) fail("linear_warmup", "warmup_steps", static_cast<double>(warmup_steps));
  return [warmup_steps](std::int64_t step) {
    return std::min(1.0, static_cast<double>(step + 1) / static_cast<double>(warmup_steps));
  };
}

Schedule cosine_with_warmup(std::int64_t warmup_steps, std::int64_t total_steps, double min_ratio) {
  if (warmup_steps < 0) fail("cosine_with_warmup", "warmup_steps", static_cast<double>(warmup_steps));
  if (total_steps <= warmup_steps)
    fail("cosine_with_warmup", "total_steps (must exceed warmup_steps)", static_cast<double>(total_steps));
  if (!(min_ratio >= 0.0 && min_ratio <= 1.0)) fail("cosine_with_warmup", "min_ratio", min_ratio);
  return [warmup_steps, total_steps, min_ratio](std::int64_t step) {
    if (step < warmup_steps) return static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
    const double progress =
        std::min(1.0, static_cast<double>(step - warmup_steps) / static_cast<double>(total_steps - warmup_steps));
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + std::cos(kPi * progress));
  };
}

namespace {

void check_fraction_schedule(const char* name, double warmup_fraction, double min_ratio) {
  if (!(warmup_fraction >= 0.0 && warmup_fraction < 1.0))
    fail(name, "warmup_fraction (must be in [0, 1))", warmup_fraction);
  if (!(min_ratio >= 0.0 && min_ratio <= 1.0)) fail(name, "min_ratio (must be in [0, 1])", min_ratio);
}

// Where in the decay a fraction lies, in [0, 1], or -1 during warmup.
double decay_progress(double fraction, double warmup_fraction) {
  if (fraction < warmup_fraction) return -1.0;
  return std::clamp((fraction - warmup_fraction) / (1.0 - warmup_fraction), 0.0, 1.0);
}

}  // namespace

FractionSchedule warmup_cosine(double warmup_fraction, double min_ratio) {
  check_fraction_schedule("warmup_cosine", warmup_fraction, min_ratio);
  return [warmup_fraction, min_ratio](double fraction) {
    const double p = decay_progress(fraction, warmup_fraction);
    if (p < 0) return std::clamp(fraction / warmup_fraction, 0.0, 1.0);
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + std::cos(kPi * p));
  };
}

FractionSchedule warmup_linear(double warmup_fraction, double min_ratio) {
  check_fraction_schedule("warmup_linear", warmup_fraction, min_ratio);
  return [warmup_fraction, min_ratio](double fraction) {
    const double p = decay_progress(fraction, warmup_fraction);
    if (p < 0) return std::clamp(fraction / warmup_fraction, 0.0, 1.0);
    return 1.0 - (1.0 - min_ratio) * p;
  };
}

Schedule over_steps(FractionSchedule schedule, std::int64_t total_steps) {
  if (total_steps <= 0) fail("over_steps", "total_steps", static_cast<double>(total_steps));
  if (!schedule) throw ValueError("over_steps: the schedule is empty");
  return [schedule = std::move(schedule), total_steps](std::int64_t step) {
    return schedule(static_cast<double>(step + 1) / static_cast<double>(total_steps));
  };
}

Scheduler::Scheduler(Optimizer& optimizer, Schedule schedule) : optimizer_(optimizer), schedule_(std::move(schedule)) {
  for (const ParamGroup& group : optimizer_.param_groups()) base_lrs_.push_back(*group.lr);
  apply();
}

void Scheduler::step() {
  ++step_;
  apply();
}

void Scheduler::set_step(std::int64_t step) {
  if (step < 0) fail("Scheduler", "step", static_cast<double>(step));
  step_ = step;
  apply();
}

void Scheduler::apply() {
  const double multiplier = schedule_(step_);
  for (std::size_t g = 0; g < base_lrs_.size(); ++g) optimizer_.set_lr(g, base_lrs_[g] * multiplier);
}

}  // namespace tapegrad::optim
