// The Trainer's progress bar and progress lines. See progress.h.

#include "tapegrad/train/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/format.h"

namespace tapegrad::train {

namespace {

// "1:05" or "1:02:05"; "?" when unknown.
std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<long long>(seconds + 0.5);
  auto two = [](long long v) { return (v < 10 ? "0" : "") + std::to_string(v); };
  if (s >= 3600) return std::to_string(s / 3600) + ':' + two((s / 60) % 60) + ':' + two(s % 60);
  return std::to_string(s / 60) + ':' + two(s % 60);
}

bool stream_is_terminal(const std::ostream* out) {
  if (out == &std::cerr || out == &std::clog) return ::isatty(::fileno(stderr)) == 1;
  if (out == &std::cout) return ::isatty(::fileno(stdout)) == 1;
  return false;
}

}  // namespace

const std::vector<std::string>& progress_names() {
  static const std::vector<std::string> names = {"auto", "bar", "lines", "off"};
  return names;
}

Progress parse_progress(const std::string& name) {
  const std::vector<std::string>& names = progress_names();
  const auto it = std::find(names.begin(), names.end(), name);
  if (it == names.end()) throw ValueError("progress: expected one of auto, bar, lines, off, got \"" + name + "\"");
  return static_cast<Progress>(it - names.begin());
}

const char* progress_name(Progress mode) { return progress_names()[static_cast<std::size_t>(mode)].c_str(); }

ProgressDisplay::ProgressDisplay(Progress mode, std::ostream* out, std::int64_t max_steps, std::int64_t first_step,
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

void ProgressDisplay::set_time_budget(double seconds, double elapsed_before) {
  time_budget_ = seconds;
  elapsed_before_ = elapsed_before;
}

void ProgressDisplay::update(std::int64_t step, double loss, double lr, double grad_norm, bool is_log) {
  if (mode_ == Progress::Off) return;
  const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
  const double rate = elapsed > 0 ? static_cast<double>(step - first_step_) / elapsed : 0.0;
  double eta = rate > 0 ? static_cast<double>(max_steps_ - step) / rate : -1.0;
  double frac = max_steps_ > 0 ? static_cast<double>(step) / static_cast<double>(max_steps_) : 1.0;
  if (time_budget_ > 0) {
    const double left = std::max(0.0, time_budget_ - elapsed_before_ - elapsed);
    eta = eta < 0 ? left : std::min(eta, left);
    frac = std::max(frac, (elapsed_before_ + elapsed) / time_budget_);
  }
  const std::string steps = std::to_string(step) + '/' + std::to_string(max_steps_);
  const std::string epoch = steps_per_epoch_ > 0 ? " epoch " + epoch_text(step) : "";
  if (mode_ == Progress::Lines) {
    if (!is_log) return;
    *out_ << "step " << steps << epoch << " loss " << format_significant(loss, 4) << " lr " << format_scientific(lr, 2)
          << " grad_norm " << format_significant(grad_norm, 4) << ' ' << format_fixed(rate, 2) << " it/s eta "
          << format_duration(eta) << '\n'
          << std::flush;
    return;
  }
  // Redrawing a terminal line costs more than a small step: at most ten times a second.
  if (!is_log && step != max_steps_ && std::chrono::duration<double>(Clock::now() - last_draw_).count() < 0.1) return;
  last_draw_ = Clock::now();
  constexpr int kWidth = 24;
  frac = std::min(frac, 1.0);
  const int filled = std::clamp(static_cast<int>(frac * kWidth), 0, kWidth);
  std::string percent = std::to_string(static_cast<int>(frac * 100));
  percent.insert(0, percent.size() < 3 ? 3 - percent.size() : 0, ' ');
  last_bar_ = '\r' + steps + " [" + std::string(filled, '#') + std::string(kWidth - filled, '.') + "] " + percent +
              '%' + epoch + " loss " + format_significant(loss, 4) + " lr " + format_scientific(lr, 2) + ' ' +
              format_fixed(rate, 2) + " it/s ETA " + format_duration(eta) + "\033[K";
  *out_ << last_bar_ << std::flush;
  bar_open_ = true;
}

void ProgressDisplay::message(const std::string& text) {
  if (mode_ == Progress::Off) return;
  if (bar_open_) *out_ << "\r\033[K";
  *out_ << text << '\n';
  if (bar_open_) *out_ << last_bar_;  // the bar stays below the messages
  *out_ << std::flush;
}

void ProgressDisplay::finish() {
  if (bar_open_ && out_ != nullptr) *out_ << '\n' << std::flush;
  bar_open_ = false;
}

// "2.35": epochs done after `step` steps.
std::string ProgressDisplay::epoch_text(std::int64_t step) const {
  return format_fixed(static_cast<double>(step) / static_cast<double>(steps_per_epoch_), 2);
}

}  // namespace tapegrad::train
