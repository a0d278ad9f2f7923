#include "tapegrad/optim/optimizer.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <utility>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/format.h"
#include "tapegrad/autograd/storage.h"

namespace tapegrad::optim {

std::vector<ParamGroup> single_group(const TensorList& params) {
  return {ParamGroup{params, std::nullopt, std::nullopt}};
}

Optimizer::Optimizer(std::vector<ParamGroup> groups, const GroupDefaults& defaults, const char* name)
    : name_(name), defaults_(defaults) {
  if (!(defaults.lr >= 0.0)) throw ValueError(message(name_, ": invalid learning rate ", defaults.lr));
  if (!(defaults.weight_decay >= 0.0))
    throw ValueError(message(name_, ": invalid weight_decay ", defaults.weight_decay));
  if (groups.empty()) throw ValueError(message(name_, ": no parameter groups given"));
  for (ParamGroup& group : groups) append_group(std::move(group));
}

void Optimizer::add_param_group(ParamGroup group) { append_group(std::move(group)); }

void Optimizer::append_group(ParamGroup group) {
  const std::size_t g = groups_.size();
  if (!group.lr) group.lr = defaults_.lr;
  if (!group.weight_decay) group.weight_decay = defaults_.weight_decay;
  if (!(*group.lr >= 0.0)) throw ValueError(message(name_, ": group ", g, " invalid learning rate ", *group.lr));
  if (!(*group.weight_decay >= 0.0))
    throw ValueError(message(name_, ": group ", g, " invalid weight_decay ", *group.weight_decay));
  // Where each parameter already held sits, to name the first place of a repeated one.
  std::map<const TensorImpl*, std::pair<std::size_t, std::size_t>> held;
  for (std::size_t h = 0; h < groups_.size(); ++h)
    for (std::size_t i = 0; i < groups_[h].params.size(); ++i)
      held.emplace(groups_[h].params[i].impl(), std::pair{h, i});
  for (std::size_t i = 0; i < group.params.size(); ++i) {
    const Tensor& p = group.params[i];
    if (!p.defined()) throw ValueError(message(name_, ": group ", g, " parameter ", i, " is undefined"));
    if (!p.is_floating_point() || !p.is_contiguous())
      throw ValueError(message(name_, ": group ", g, " parameter ", i, " must be a contiguous floating-point tensor"));
    const auto [it, added] = held.emplace(p.impl(), std::pair{g, i});
    if (!added)
      throw ValueError(message(name_, ": group ", g, " parameter ", i, " (shape ", p.shape().str(),
                               ") is the same tensor as group ", it->second.first, " parameter ", it->second.second,
                               "; a parameter may appear only once across all parameter groups"));
  }
  state_.emplace_back(group.params.size());
  groups_.push_back(std::move(group));
}

void Optimizer::set_lr(std::size_t group, double lr) {
  if (group >= groups_.size())
    throw ValueError(message(name_, ": set_lr group ", group, " out of range (", groups_.size(), " groups)"));
  if (!(lr >= 0.0)) throw ValueError(message(name_, ": invalid learning rate ", lr));
  groups_[group].lr = lr;
}

void Optimizer::step() {
  // param_groups() hands out the groups mutably: checked before anything is updated, so a bad group leaves every
  // parameter as it was. An lr or weight_decay reset to nullopt there has no default left, and parameters added
  // there (not through add_param_group) have no state and were never checked for repeats.
  if (groups_.size() != state_.size())
    throw ValueError(message(name_, ": ", groups_.size(), " parameter groups but ", state_.size(),
                             " were added (add groups with add_param_group)"));
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    if (!groups_[g].lr || !groups_[g].weight_decay)
      throw ValueError(message(name_, ": group ", g, " has no lr or weight_decay set"));
    if (groups_[g].params.size() != state_[g].size())
      throw ValueError(message(name_, ": group ", g, " holds ", groups_[g].params.size(), " parameters but ",
                               state_[g].size(), " were added (add parameters with add_param_group)"));
  }
  NoGradGuard no_grad;
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    for (std::size_t i = 0; i < groups_[g].params.size(); ++i) {
      const Tensor& p = groups_[g].params[i];
      const bool sparse = p.has_sparse_grad();
      if (!sparse && !p.impl()->grad) continue;
      const std::string refusal = sparse ? sparse_refusal(groups_[g]) : dense_refusal(groups_[g]);
      if (!refusal.empty())
        throw ValueError(message(name_, ": group ", g, " parameter ", i, " (shape ", p.shape().str(), ") has a ",
                                 (sparse ? "row-sparse" : "dense"), " gradient, but ", refusal));
    }
  }
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    for (std::size_t i = 0; i < groups_[g].params.size(); ++i) {
      const Tensor& p = groups_[g].params[i];
      if (p.has_sparse_grad()) {
        const SparseRows rows = p.sparse_grad();
        if (rows.shape() != p.shape() || rows.dtype() != p.dtype())
          throw ValueError(message(name_, ": row-sparse gradient of group ", g, " parameter ", i,
                                   " does not match the parameter's shape or dtype"));
        ParamState& state = state_[g][i];
        ++state.step;
        update_sparse(groups_[g], p, rows, state);
        p.impl()->storage->bump_version();
        continue;
      }
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      if (grad.shape() != p.shape() || grad.dtype() != p.dtype())
        throw ValueError(message(name_, ": gradient of group ", g, " parameter ", i,
                                 " does not match the parameter's shape or dtype"));
      if (!grad.is_contiguous()) grad = grad.contiguous();
      ParamState& state = state_[g][i];
      ++state.step;
      update(groups_[g], p, grad, state);
      // update() wrote p's data directly: count it as an in-place write, so a graph that saved p sees the change.
      p.impl()->storage->bump_version();
    }
  }
  ++steps_taken_;
}

Tensor Optimizer::step(const Closure& closure) {
  if (!closure) throw ValueError(message(name_, ": step(closure) was given an empty closure"));
  Tensor loss;
  {
    GradModeGuard grad_mode(true);
    loss = closure();
  }
  step();
  return loss;
}

void Optimizer::update_sparse(const ParamGroup& /*group*/, const Tensor& p, const SparseRows& /*g*/,
                              ParamState& /*state*/) {
  throw ValueError(message(name_, ": cannot update the ", p.shape().str(), " parameter from a row-sparse gradient"));
}

std::string Optimizer::sparse_refusal(const ParamGroup& /*group*/) const {
  return std::string(name_) +
         " takes dense gradients only; step embeddings with sparse gradients with optim::SGD (no momentum or weight "
         "decay), optim::Adagrad (no weight decay) or optim::SparseAdam";
}

std::string Optimizer::dense_refusal(const ParamGroup& /*group*/) const { return {}; }

std::string Optimizer::weight_decay_refusal(const ParamGroup& group) {
  if (*group.weight_decay == 0.0) return {};
  return "weight decay changes every row (weight_decay " + format_number(*group.weight_decay) +
         "); sparse gradients need weight_decay 0";
}

const ParamState& Optimizer::param_state(std::size_t group, std::size_t index) const {
  if (group >= state_.size() || index >= state_[group].size())
    throw ValueError(message(name_, ": no parameter ", index, " in group ", group, " (", state_.size(), " groups)"));
  return state_[group][index];
}

void Optimizer::zero_grad(bool set_to_none) {
  for (const ParamGroup& group : groups_)
    for (const Tensor& p : group.params) p.zero_grad(set_to_none);
}

Tensor Optimizer::state_scalar(double v) { return from_vector(std::vector<double>{v}, Shape{1}); }

double Optimizer::read_state_scalar(const std::string& entry, const Tensor& t) const {
  if (!t.defined() || t.numel() != 1 || !t.is_floating_point())
    throw ValueError(message(name_, ": load_state entry '", entry, "': expected a floating-point scalar"));
  return t.contiguous().to_vector<double>()[0];
}

std::int64_t Optimizer::read_state_count(const std::string& entry, const Tensor& t) const {
  const double v = read_state_scalar(entry, t);
  if (!(v >= 0.0 && v <= 9007199254740992.0) || v != std::floor(v))
    throw ValueError(message(name_, ": load_state entry '", entry, "': invalid count ", format_number(v)));
  return static_cast<std::int64_t>(v);
}

NamedTensors Optimizer::state_tensors() const {
  NamedTensors out;
  out.emplace_back("stepcount", state_scalar(static_cast<double>(steps_taken_)));
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    for (std::size_t i = 0; i < state_[g].size(); ++i) {
      const ParamState& state = state_[g][i];
      if (state.step == 0 && state.buffers.empty()) continue;
      const std::string prefix = "group" + std::to_string(g) + ".param" + std::to_string(i) + ".";
      out.emplace_back(prefix + "step", state_scalar(static_cast<double>(state.step)));
      for (const auto& [key, buffer] : state.buffers) out.emplace_back(prefix + key, buffer.clone());
    }
  }
  return out;
}

void Optimizer::load_state(const NamedTensors& state) {
  std::vector<std::vector<ParamState>> loaded(groups_.size());
  for (std::size_t g = 0; g < groups_.size(); ++g) loaded[g].resize(groups_[g].params.size());
  std::int64_t steps_taken = -1;
  std::set<std::string> seen;
  auto fail = [&](const std::string& entry, const std::string& why) {
    throw ValueError(message(name_, ": load_state entry '", entry, "': ", why));
  };
  for (const auto& [entry, t] : state) {
    if (!seen.insert(entry).second) fail(entry, "duplicate name");
    if (entry == "stepcount") {
      steps_taken = read_state_count(entry, t);
      continue;
    }
    // group{g}.param{i}.{key}
    std::size_t g = 0, i = 0;
    int consumed = 0;
    if (std::sscanf(entry.c_str(), "group%zu.param%zu.%n", &g, &i, &consumed) != 2 || consumed == 0)
      fail(entry, "unexpected name (expected group<g>.param<i>.<buffer>)");
    const std::string buffer_name = entry.substr(static_cast<std::size_t>(consumed));
    if (g >= groups_.size() || i >= groups_[g].params.size()) fail(entry, "no such parameter in this optimiser");
    if (buffer_name == "step") {
      loaded[g][i].step = read_state_count(entry, t);
      continue;
    }
    const Tensor& p = groups_[g].params[i];
    if (!t.defined() || t.shape() != p.shape() || t.dtype() != p.dtype())
      fail(entry, "shape or dtype does not match the parameter");
    loaded[g][i].buffers[buffer_name] = t.contiguous().clone();
  }
  if (steps_taken < 0) fail("stepcount", "missing");
  const std::vector<std::string> expected = state_buffer_names();
  auto list = [](const std::vector<std::string>& names) {
    std::string out;
    for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
    return "{" + out + "}";
  };
  for (std::size_t g = 0; g < loaded.size(); ++g)
    for (std::size_t i = 0; i < loaded[g].size(); ++i) {
      const std::string prefix = "group" + std::to_string(g) + ".param" + std::to_string(i) + ".";
      const ParamState& s = loaded[g][i];
      if (!s.buffers.empty() && s.step == 0) fail(prefix + "step", "missing");
      if (s.step == 0) continue;
      std::vector<std::string> got;
      for (const auto& entry : s.buffers) got.push_back(entry.first);  // std::map: sorted
      if (got != expected)
        fail(prefix + "*", std::string("holds the buffers ") + list(got) + " but " + name_ + " keeps " +
                               list(expected) + " (state saved by another optimiser or with other options)");
    }
  state_ = std::move(loaded);
  steps_taken_ = steps_taken;
}

}  // namespace tapegrad::optim
