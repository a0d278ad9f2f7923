#include "tapegrad/optim/lbfgs.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/ops.h"

namespace tapegrad::optim {

namespace {

double dot(const Tensor& a, const Tensor& b) { return sum(mul(a, b)).item(); }

double abs_max(const Tensor& a) { return a.numel() == 0 ? 0.0 : max(abs(a)).item(); }

// The minimiser of the cubic through (x1, f1) and (x2, f2) with slopes g1 and g2, clamped to `bounds` (by
// default the interval the two points span); the middle of the bounds when the cubic has no minimum.
double cubic_minimum(double x1, double f1, double g1, double x2, double f2, double g2,
                     std::optional<std::pair<double, double>> bounds = std::nullopt) {
  const auto [lo, hi] = bounds ? *bounds : (x1 <= x2 ? std::pair{x1, x2} : std::pair{x2, x1});
  const double d1 = g1 + g2 - 3.0 * (f1 - f2) / (x1 - x2);
  const double d2_square = d1 * d1 - g1 * g2;
  if (!(d2_square >= 0.0)) return (lo + hi) / 2.0;
  const double d2 = std::sqrt(d2_square);
  const double at = x1 <= x2 ? x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2.0 * d2))
                             : x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2.0 * d2));
  return std::min(std::max(at, lo), hi);
}

// A trial step: its size, the loss there, the gradient and its slope along the direction.
struct Trial {
  double t;
  double f;
  Tensor g;
  double gtd;
};

struct LineSearchResult {
  Trial best;
  std::int64_t evals;
};

// The loss and gradient at step t along the search direction.
using Objective = std::function<std::pair<double, Tensor>(double t)>;

// A step along d satisfying the strong Wolfe conditions (sufficient decrease c1, curvature c2), from the
// point (0, f, g, gtd) and a first trial t: trials grow by cubic extrapolation until they bracket such a
// step, then the bracket shrinks by safeguarded cubic interpolation (Nocedal and Wright, algorithms 3.5
// and 3.6, as torch's _strong_wolfe). At most 25 evaluations after the first; the best trial found is
// returned.
LineSearchResult strong_wolfe(const Objective& objective, double t, const Tensor& d, const Trial& start) {
  constexpr double c1 = 1e-4, c2 = 0.9;
  constexpr double tolerance_change = 1e-9;  // torch's, whatever the optimiser's tolerance_change
  constexpr int max_evals = 25;
  const double d_norm = abs_max(d);
  auto evaluate = [&](double at) {
    auto [f, g] = objective(at);
    const double gtd = dot(g, d);
    return Trial{at, f, std::move(g), gtd};
  };
  auto too_high = [&](const Trial& trial) { return trial.f > start.f + c1 * trial.t * start.gtd; };
  auto curvature = [&](const Trial& trial) { return std::abs(trial.gtd) <= -c2 * start.gtd; };

  Trial current = evaluate(t);
  std::int64_t evals = 1;
  Trial previous = start;
  previous.t = 0.0;
  std::vector<Trial> bracket;
  bool done = false;
  int iteration = 0;
  while (iteration < max_evals) {
    if (too_high(current) || (iteration > 1 && current.f >= previous.f)) {
      bracket = {previous, current};
      break;
    }
    if (curvature(current)) {
      bracket = {current};
      done = true;
      break;
    }
    if (current.gtd >= 0.0) {
      bracket = {previous, current};
      break;
    }
    const double next = cubic_minimum(previous.t, previous.f, previous.gtd, current.t, current.f, current.gtd,
                                      std::pair{current.t + 0.01 * (current.t - previous.t), current.t * 10.0});
    previous = current;
    current = evaluate(next);
    ++evals;
    ++iteration;
  }
  if (iteration == max_evals) bracket = {start, current};

  // Zoom: the bracket's low end has the lower loss; interpolate between the ends, kept off them by a tenth
  // of the bracket once a trial lands that close twice in a row.
  auto ends = [&] { return bracket[0].f <= bracket.back().f ? std::pair{0, 1} : std::pair{1, 0}; };
  auto [low, high] = ends();
  bool insufficient_progress = false;
  while (!done && iteration < max_evals) {
    if (std::abs(bracket[1].t - bracket[0].t) * d_norm < tolerance_change) break;
    double at = cubic_minimum(bracket[0].t, bracket[0].f, bracket[0].gtd, bracket[1].t, bracket[1].f, bracket[1].gtd);
    const double top = std::max(bracket[0].t, bracket[1].t), bottom = std::min(bracket[0].t, bracket[1].t);
    const double margin = 0.1 * (top - bottom);
    if (std::min(top - at, at - bottom) < margin) {
      if (insufficient_progress || at >= top || at <= bottom) {
        at = std::abs(at - top) < std::abs(at - bottom) ? top - margin : bottom + margin;
        insufficient_progress = false;
      } else {
        insufficient_progress = true;
      }
    } else {
      insufficient_progress = false;
    }
    Trial trial = evaluate(at);
    ++evals;
    ++iteration;
    if (too_high(trial) || trial.f >= bracket[low].f) {
      bracket[high] = std::move(trial);
      std::tie(low, high) = ends();
    } else {
      if (curvature(trial)) done = true;
      else if (trial.gtd * (bracket[high].t - bracket[low].t) >= 0.0) bracket[high] = bracket[low];
      bracket[low] = std::move(trial);
    }
  }
  return {bracket[low], evals};
}

// Rows of a (k, n) tensor built from k vectors of n elements.
Tensor stack_rows(const std::vector<Tensor>& rows, std::int64_t n, DType dtype) {
  Tensor out = zeros(Shape{static_cast<std::int64_t>(rows.size()), n}, dtype);
  for (std::size_t i = 0; i < rows.size(); ++i) out.select(0, static_cast<std::int64_t>(i)).copy_(rows[i]);
  return out;
}

}  // namespace

LBFGS::LBFGS(const TensorList& params, const LBFGSOptions& options) : LBFGS(single_group(params), options) {}

LBFGS::LBFGS(std::vector<ParamGroup> groups, const LBFGSOptions& options)
    : Optimizer(std::move(groups), GroupDefaults{options.lr(), 0.0}, "LBFGS"), options_(options) {
  if (options_.max_iter() < 1)
    throw ValueError(message("LBFGS: invalid max_iter ", options_.max_iter(), " (must be >= 1)"));
  if (!options_.max_eval()) options_.max_eval(options_.max_iter() * 5 / 4);
  if (*options_.max_eval() < 1)
    throw ValueError(message("LBFGS: invalid max_eval ", *options_.max_eval(), " (must be >= 1)"));
  if (options_.history_size() < 1)
    throw ValueError(message("LBFGS: invalid history_size ", options_.history_size(), " (must be >= 1)"));
  if (!(options_.tolerance_grad() >= 0.0))
    throw ValueError(message("LBFGS: invalid tolerance_grad ", options_.tolerance_grad(), " (must be >= 0)"));
  if (!(options_.tolerance_change() >= 0.0))
    throw ValueError(message("LBFGS: invalid tolerance_change ", options_.tolerance_change(), " (must be >= 0)"));
  if (param_groups().size() != 1)
    throw ValueError(message("LBFGS: ", param_groups().size(),
                             " parameter groups given; LBFGS treats all parameters as one vector and takes one"));
  const TensorList& params = param_groups()[0].params;
  if (params.empty()) throw ValueError("LBFGS: no parameters given");
  dtype_ = params[0].dtype();
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (params[i].dtype() != kFloat32 && params[i].dtype() != kFloat64)
      throw ValueError(message("LBFGS: parameter ", i, " is ", dtype_name(params[i].dtype()),
                               "; LBFGS takes float32 or float64 parameters"));
    if (params[i].dtype() != dtype_)
      throw ValueError(message("LBFGS: parameter ", i, " is ", dtype_name(params[i].dtype()), " but parameter 0 is ",
                               dtype_name(dtype_), "; LBFGS needs one dtype for all parameters"));
    n_ += params[i].numel();
  }
}

void LBFGS::check_before_step() const {
  const std::vector<ParamGroup>& groups = param_groups();
  if (groups.size() != 1) throw ValueError(message("LBFGS: ", groups.size(), " parameter groups; LBFGS takes one"));
  if (!groups[0].lr || !groups[0].weight_decay) throw ValueError("LBFGS: the group has no lr or weight_decay set");
  if (*groups[0].weight_decay != 0.0)
    throw ValueError(message("LBFGS takes no weight_decay (the group has ", *groups[0].weight_decay, ")"));
  std::int64_t n = 0;
  for (const Tensor& p : groups[0].params) n += p.numel();
  if (n != n_)
    throw ValueError(
        message("LBFGS: the group's parameters have ", n, " elements but held ", n_, " when the optimiser was built"));
}

void LBFGS::step() {
  throw ValueError(
      "LBFGS: step() needs a closure that re-evaluates the loss: opt.step([&] { opt.zero_grad(); Tensor loss = ...; "
      "loss.backward(); return loss; })");
}

void LBFGS::update(const ParamGroup& /*group*/, const Tensor& /*p*/, const Tensor& /*g*/, ParamState& /*state*/) {
  step();  // never reached: LBFGS's steps go through step(closure)
}

Tensor LBFGS::gather_flat_grad() const {
  Tensor flat = zeros(Shape{n_}, dtype_);
  std::int64_t offset = 0;
  const TensorList& params = param_groups()[0].params;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    const std::int64_t numel = p.numel();
    Tensor grad = p.has_sparse_grad() ? p.sparse_grad().to_dense() : p.grad();
    if (grad.defined()) {
      if (grad.shape() != p.shape() || grad.dtype() != p.dtype())
        throw ValueError(message("LBFGS: the gradient of parameter ", i, " (", grad.shape().str(), " ",
                                 dtype_name(grad.dtype()), ") does not match the parameter (", p.shape().str(), " ",
                                 dtype_name(p.dtype()), ")"));
      flat.narrow(0, offset, numel).copy_(grad.reshape(Shape{numel}));
    }
    offset += numel;
  }
  return flat;
}

void LBFGS::add_to_params(double step, const Tensor& direction) const {
  std::int64_t offset = 0;
  for (const Tensor& p : param_groups()[0].params) {
    const std::int64_t numel = p.numel();
    p.add_(direction.narrow(0, offset, numel).reshape(p.shape()), step);
    offset += numel;
  }
}

double LBFGS::call_closure(const Closure& closure, Tensor* loss) {
  Tensor value;
  {
    GradModeGuard grad_mode(true);
    value = closure();
  }
  if (!value.defined() || value.numel() != 1)
    throw ValueError(message("LBFGS: the closure must return the loss, a tensor of one element (it returned ",
                             value.defined() ? "shape " + value.shape().str() : std::string("an undefined tensor"),
                             ")"));
  if (loss) *loss = value;
  return value.item();
}

std::pair<double, Tensor> LBFGS::evaluate_along(const Closure& closure, const std::vector<Tensor>& start, double step,
                                                const Tensor& direction) {
  const TensorList& params = param_groups()[0].params;
  auto restore = [&] {
    for (std::size_t i = 0; i < params.size(); ++i) params[i].copy_(start[i]);
  };
  add_to_params(step, direction);
  try {
    const double loss = call_closure(closure);
    Tensor grad = gather_flat_grad();
    restore();
    return {loss, std::move(grad)};
  } catch (...) {
    restore();  // a closure that throws leaves the parameters where the line search started
    throw;
  }
}

Tensor LBFGS::step(const Closure& closure) {
  if (!closure) throw ValueError("LBFGS: step(closure) was given an empty closure");
  check_before_step();
  NoGradGuard no_grad;
  const double lr = *param_groups()[0].lr;
  const double tolerance_grad = options_.tolerance_grad(), tolerance_change = options_.tolerance_change();
  const std::int64_t max_iter = options_.max_iter(), max_eval = *options_.max_eval();
  const auto history_size = static_cast<std::size_t>(options_.history_size());

  Tensor first_loss;
  double loss = call_closure(closure, &first_loss);
  std::int64_t evals_this_step = 1;
  ++func_evals_;
  Tensor flat_grad = gather_flat_grad();
  bool optimal = abs_max(flat_grad) <= tolerance_grad;
  ++steps_taken_;
  if (optimal) return first_loss;

  for (std::int64_t iteration = 1; iteration <= max_iter; ++iteration) {
    ++n_iter_;
    if (n_iter_ == 1) {
      d_ = neg(flat_grad);
      old_dirs_.clear();
      old_steps_.clear();
      ro_.clear();
      h_diag_ = 1.0;
    } else {
      // Add the last pair (s, y) when the curvature along it is positive, then d = -H g by the two-loop
      // recursion over the pairs held.
      Tensor y = sub(flat_grad, prev_flat_grad_);
      Tensor s = mul(d_, t_);
      const double ys = dot(y, s);
      if (ys > 1e-10) {
        if (old_dirs_.size() == history_size) {
          old_dirs_.erase(old_dirs_.begin());
          old_steps_.erase(old_steps_.begin());
          ro_.erase(ro_.begin());
        }
        h_diag_ = ys / dot(y, y);
        old_dirs_.push_back(std::move(y));
        old_steps_.push_back(std::move(s));
        ro_.push_back(1.0 / ys);
      }
      const std::size_t k = old_dirs_.size();
      std::vector<double> alpha(k);
      Tensor q = neg(flat_grad);
      for (std::size_t i = k; i-- > 0;) {
        alpha[i] = dot(old_steps_[i], q) * ro_[i];
        q.add_(old_dirs_[i], -alpha[i]);
      }
      Tensor r = mul(q, h_diag_);
      for (std::size_t i = 0; i < k; ++i) {
        const double beta = dot(old_dirs_[i], r) * ro_[i];
        r.add_(old_steps_[i], alpha[i] - beta);
      }
      d_ = std::move(r);
    }
    prev_flat_grad_ = flat_grad;
    prev_loss_ = loss;
    t_ = n_iter_ == 1 ? std::min(1.0, 1.0 / sum(abs(flat_grad)).item()) * lr : lr;

    const double gtd = dot(flat_grad, d_);
    if (gtd > -tolerance_change) break;  // not a descent direction (any more)

    std::int64_t evals = 0;
    if (options_.line_search() == LineSearch::StrongWolfe) {
      std::vector<Tensor> start;
      for (const Tensor& p : param_groups()[0].params) start.push_back(p.detach().clone());
      const LineSearchResult found = strong_wolfe([&](double step) { return evaluate_along(closure, start, step, d_); },
                                                  t_, d_, Trial{0.0, loss, flat_grad, gtd});
      loss = found.best.f;
      flat_grad = found.best.g;
      t_ = found.best.t;
      evals = found.evals;
      add_to_params(t_, d_);
      optimal = abs_max(flat_grad) <= tolerance_grad;
    } else {
      add_to_params(t_, d_);
      if (iteration != max_iter) {
        loss = call_closure(closure);
        flat_grad = gather_flat_grad();
        optimal = abs_max(flat_grad) <= tolerance_grad;
        evals = 1;
      }
    }
    evals_this_step += evals;
    func_evals_ += evals;

    if (iteration == max_iter || evals_this_step >= max_eval || optimal) break;
    if (abs_max(d_) * std::abs(t_) <= tolerance_change) break;
    if (std::abs(loss - prev_loss_) < tolerance_change) break;
  }
  return first_loss;
}

NamedTensors LBFGS::state_tensors() const {
  NamedTensors out;
  out.emplace_back("stepcount", state_scalar(static_cast<double>(steps_taken_)));
  out.emplace_back("lbfgs.func_evals", state_scalar(static_cast<double>(func_evals_)));
  out.emplace_back("lbfgs.n_iter", state_scalar(static_cast<double>(n_iter_)));
  if (n_iter_ == 0) return out;
  out.emplace_back("lbfgs.d", d_.clone());
  out.emplace_back("lbfgs.t", state_scalar(t_));
  out.emplace_back("lbfgs.old_dirs", stack_rows(old_dirs_, n_, dtype_));
  out.emplace_back("lbfgs.old_steps", stack_rows(old_steps_, n_, dtype_));
  out.emplace_back("lbfgs.ro", from_vector(ro_, Shape{static_cast<std::int64_t>(ro_.size())}));
  out.emplace_back("lbfgs.h_diag", state_scalar(h_diag_));
  out.emplace_back("lbfgs.prev_flat_grad", prev_flat_grad_.clone());
  out.emplace_back("lbfgs.prev_loss", state_scalar(prev_loss_));
  return out;
}

void LBFGS::load_state(const NamedTensors& state) {
  auto fail = [](const std::string& entry, const std::string& why) {
    throw ValueError(message("LBFGS: load_state entry '", entry, "': ", why));
  };
  static const std::set<std::string> kNames = {"stepcount",    "lbfgs.func_evals",     "lbfgs.n_iter",    "lbfgs.d",
                                               "lbfgs.t",      "lbfgs.old_dirs",       "lbfgs.old_steps", "lbfgs.ro",
                                               "lbfgs.h_diag", "lbfgs.prev_flat_grad", "lbfgs.prev_loss"};
  std::map<std::string, Tensor> entries;
  for (const auto& [name, t] : state) {
    if (!kNames.count(name)) fail(name, "unexpected name (not LBFGS state)");
    if (!entries.emplace(name, t).second) fail(name, "duplicate name");
    if (!t.defined()) fail(name, "undefined tensor");
  }
  auto get = [&](const std::string& name) -> const Tensor& {
    auto it = entries.find(name);
    if (it == entries.end()) fail(name, "missing");
    return it->second;
  };
  auto scalar = [&](const std::string& name) { return read_state_scalar(name, get(name)); };
  auto count = [&](const std::string& name) { return read_state_count(name, get(name)); };
  auto vector = [&](const std::string& name) {
    const Tensor& t = get(name);
    if (t.shape() != Shape{n_} || t.dtype() != dtype_)
      fail(name, message("expected a ", dtype_name(dtype_), " vector of ", n_, " elements, got ", t.shape().str(), " ",
                         dtype_name(t.dtype())));
    return t.contiguous().clone();
  };
  const std::int64_t steps_taken = count("stepcount"), func_evals = count("lbfgs.func_evals"),
                     n_iter = count("lbfgs.n_iter");
  if (n_iter == 0) {
    for (const auto& entry : entries)
      if (entry.first != "stepcount" && entry.first != "lbfgs.func_evals" && entry.first != "lbfgs.n_iter")
        fail(entry.first, "an iteration's state, but lbfgs.n_iter is 0");
    steps_taken_ = steps_taken;
    func_evals_ = func_evals;
    n_iter_ = 0;
    d_ = prev_flat_grad_ = Tensor();
    old_dirs_.clear();
    old_steps_.clear();
    ro_.clear();
    t_ = prev_loss_ = 0.0;
    h_diag_ = 1.0;
    return;
  }
  Tensor d = vector("lbfgs.d"), prev_flat_grad = vector("lbfgs.prev_flat_grad");
  const Tensor& dirs = get("lbfgs.old_dirs");
  const Tensor& steps = get("lbfgs.old_steps");
  const Tensor& ro = get("lbfgs.ro");
  const std::int64_t k = ro.dim() == 1 ? ro.shape()[0] : -1;
  if (k < 0 || !ro.is_floating_point()) fail("lbfgs.ro", "expected a floating-point vector");
  if (k > options_.history_size())
    fail("lbfgs.ro", message(k, " pairs, more than history_size ", options_.history_size()));
  for (const auto* name : {"lbfgs.old_dirs", "lbfgs.old_steps"}) {
    const Tensor& t = get(name);
    if (t.shape() != Shape{k, n_} || t.dtype() != dtype_)
      fail(name, message("expected (", k, ", ", n_, ") ", dtype_name(dtype_), " (one row per entry of lbfgs.ro), got ",
                         t.shape().str(), " ", dtype_name(t.dtype())));
  }
  const double t = scalar("lbfgs.t"), h_diag = scalar("lbfgs.h_diag"), prev_loss = scalar("lbfgs.prev_loss");
  std::vector<Tensor> old_dirs, old_steps;
  for (std::int64_t i = 0; i < k; ++i) {
    old_dirs.push_back(dirs.select(0, i).contiguous().clone());
    old_steps.push_back(steps.select(0, i).contiguous().clone());
  }
  steps_taken_ = steps_taken;
  func_evals_ = func_evals;
  n_iter_ = n_iter;
  d_ = std::move(d);
  prev_flat_grad_ = std::move(prev_flat_grad);
  old_dirs_ = std::move(old_dirs);
  old_steps_ = std::move(old_steps);
  ro_ = ro.contiguous().to_vector<double>();
  t_ = t;
  h_diag_ = h_diag;
  prev_loss_ = prev_loss;
}

}  // namespace tapegrad::optim
