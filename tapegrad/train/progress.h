#pragma once
// The Trainer's progress display: how it is chosen (Progress, parsed from "auto", "bar", "lines", "off")
// and how it is drawn (ProgressDisplay).
//
//   Lines:  step 6/12 epoch 1.50 loss 0.6931 lr 1.00e-03 grad_norm 0.4121 12.50 it/s eta 0:04
//           (one line per logged step; "epoch" only when steps_per_epoch is known)
//   Bar:    \r6/12 [############............]  50% loss 0.6931 lr 1.00e-03 12.50 it/s ETA 0:04
//           (one line redrawn in place, at most ten times a second and at every logged step)
// Rates are averaged over the steps of this call, which keeps the ETA steady.

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace tapegrad::train {

// Auto: a one-line bar redrawn with '\r' if the stream is std::cerr/std::clog/std::cout on a terminal,
// else Lines (one plain line every log_every steps, as wanted in CI logs).
enum class Progress { Auto, Bar, Lines, Off };

// "auto", "bar", "lines", "off", in the order of the enum.
const std::vector<std::string>& progress_names();
// The Progress named `name` (one of progress_names()); ValueError naming the value otherwise.
Progress parse_progress(const std::string& name);
const char* progress_name(Progress mode);

class ProgressDisplay {
 public:
  // out == nullptr shows nothing. Auto is resolved here, from out.
  ProgressDisplay(Progress mode, std::ostream* out, std::int64_t max_steps, std::int64_t first_step,
                  std::int64_t steps_per_epoch);

  // A run bounded by time too: the bar's fraction and the ETA are those of whichever bound comes first,
  // the steps or `seconds` of training time (of which `elapsed_before` were spent by earlier calls).
  void set_time_budget(double seconds, double elapsed_before);
  // Called after every step (step = steps done); is_log marks the steps that write a metrics line.
  void update(std::int64_t step, double loss, double lr, double grad_norm, bool is_log);
  // A message on its own line (above the bar in Bar mode).
  void message(const std::string& text);
  // Ends the bar's line so later output starts on a fresh one.
  void finish();
  // Bar, Lines or Off: never Auto.
  Progress mode() const { return mode_; }

 private:
  using Clock = std::chrono::steady_clock;
  std::string epoch_text(std::int64_t step) const;

  std::ostream* out_;
  Progress mode_ = Progress::Off;
  std::int64_t max_steps_;
  std::int64_t first_step_;
  std::int64_t steps_per_epoch_;
  double time_budget_ = 0.0;  // 0: none
  double elapsed_before_ = 0.0;
  Clock::time_point start_;
  Clock::time_point last_draw_;
  bool bar_open_ = false;
  std::string last_bar_;
};

}  // namespace tapegrad::train
