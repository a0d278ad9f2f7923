#include "tapegrad/train/lr_finder.h"

#include <algorithm>
#include <cmath>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/format.h"
#include "tapegrad/io/svg.h"

namespace tapegrad::train {

namespace {

void check(const LrRangeTestOptions& o) {
  if (!(o.start_lr() > 0.0) || !(o.end_lr() > o.start_lr()))
    throw ValueError(
        message("lr_range_test: need 0 < start_lr < end_lr, got start_lr ", o.start_lr(), " and end_lr ", o.end_lr()));
  if (o.steps() < 2) throw ValueError(message("lr_range_test: steps must be at least 2, got ", o.steps()));
  if (!(o.smoothing() >= 0.0 && o.smoothing() < 1.0))
    throw ValueError(message("lr_range_test: smoothing must be in [0, 1), got ", o.smoothing()));
  if (!(o.divergence() > 1.0))
    throw ValueError(message("lr_range_test: divergence must be above 1, got ", o.divergence()));
}

// What the test changes, to put back: the module's state, the optimiser's state and its groups' rates.
struct Snapshot {
  NamedTensors model;
  NamedTensors optimizer;
  std::vector<double> lrs;

  Snapshot(const nn::Module& m, const optim::Optimizer& opt) : optimizer(opt.state_tensors()) {
    for (const auto& [name, t] : m.state_dict()) model.emplace_back(name, t.detach().clone());
    for (const auto& group : opt.param_groups()) lrs.push_back(group.lr.value_or(0.0));
  }
  void restore(nn::Module& m, optim::Optimizer& opt) const {
    m.load_state_dict(model);
    opt.load_state(optimizer);
    for (std::size_t g = 0; g < lrs.size(); ++g) opt.set_lr(g, lrs[g]);
  }
};

void suggest(LrRangeTest& result) {
  const auto& s = result.smoothed;
  const std::size_t best = static_cast<std::size_t>(std::min_element(s.begin(), s.end()) - s.begin());
  result.min_loss_lr = result.lrs[best];
  if (best < 2) {
    result.suggested_lr = result.min_loss_lr / 10.0;
    return;
  }
  // d(smoothed) / d(log lr) by central differences at the interior points before the minimum.
  double steepest = 0.0;
  std::size_t at = 0;
  for (std::size_t i = 1; i < best; ++i) {
    const double slope = (s[i + 1] - s[i - 1]) / (std::log(result.lrs[i + 1]) - std::log(result.lrs[i - 1]));
    if (at == 0 || slope < steepest) steepest = slope, at = i;
  }
  result.suggested_lr = result.lrs[at];
}

}  // namespace

LrRangeTest lr_range_test(nn::Module& model, optim::Optimizer& optimizer,
                          const std::function<Tensor(std::int64_t step)>& loss_fn, const LrRangeTestOptions& options) {
  check(options);
  if (!loss_fn) throw ValueError("lr_range_test: the loss function is empty");
  const Snapshot snapshot(model, optimizer);
  LrRangeTest result;
  const double ratio = options.end_lr() / options.start_lr();
  double average = 0.0, lowest = 0.0;
  try {
    for (std::int64_t i = 0; i < options.steps(); ++i) {
      const double lr =
          options.start_lr() * std::pow(ratio, static_cast<double>(i) / static_cast<double>(options.steps() - 1));
      for (std::size_t g = 0; g < optimizer.param_groups().size(); ++g) optimizer.set_lr(g, lr);
      optimizer.zero_grad();
      const Tensor loss = loss_fn(i);
      if (!loss.defined() || loss.numel() != 1)
        throw ValueError(message("lr_range_test: the loss of step ", i, " is not a scalar"));
      const double value = loss.item();
      result.lrs.push_back(lr);
      result.losses.push_back(value);
      if (!std::isfinite(value)) {
        result.smoothed.push_back(value);
        result.diverged = true;
        break;
      }
      average = options.smoothing() * average + (1.0 - options.smoothing()) * value;
      const double smoothed = average / (1.0 - std::pow(options.smoothing(), static_cast<double>(i + 1)));
      result.smoothed.push_back(smoothed);
      if (i == 0 || smoothed < lowest) lowest = smoothed;
      if (smoothed > options.divergence() * lowest) {
        result.diverged = true;
        break;
      }
      loss.backward();
      optimizer.step();
    }
  } catch (...) {
    if (options.restore()) snapshot.restore(model, optimizer);
    throw;
  }
  if (options.restore()) snapshot.restore(model, optimizer);
  // A last non-finite loss takes no part in the suggestion.
  LrRangeTest finite = result;
  while (!finite.smoothed.empty() && !std::isfinite(finite.smoothed.back())) {
    finite.smoothed.pop_back();
    finite.lrs.pop_back();
  }
  if (finite.smoothed.empty())
    throw ValueError(message("lr_range_test: the first loss is not finite (", result.losses.front(), ")"));
  suggest(finite);
  result.suggested_lr = finite.suggested_lr;
  result.min_loss_lr = finite.min_loss_lr;
  return result;
}

std::string LrRangeTest::svg() const {
  io::LinePlot plot;
  plot.title = "learning-rate range test (suggested lr " + format_number(suggested_lr) + ")";
  plot.x_label = "learning rate";
  plot.y_label = "loss";
  plot.log_x = true;
  plot.series.push_back({"loss", lrs, losses});
  plot.series.push_back({"smoothed", lrs, smoothed});
  // The suggestion as a vertical line over the smoothed loss's range.
  double lo = 0.0, hi = 0.0;
  bool any = false;
  for (const double v : smoothed)
    if (std::isfinite(v)) lo = any ? std::min(lo, v) : v, hi = any ? std::max(hi, v) : v, any = true;
  if (any && suggested_lr > 0.0) plot.series.push_back({"suggested", {suggested_lr, suggested_lr}, {lo, hi}});
  return io::line_plot_svg(plot);
}

void LrRangeTest::save_svg(const std::string& path) const { io::write_svg(path, svg()); }

}  // namespace tapegrad::train
