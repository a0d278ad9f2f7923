// Optimizer base class: parameter groups, step() under no-grad, zero_grad, per-parameter state
// that can be saved and loaded as named tensors.
//
//   optim::SGD opt(model.parameters(), optim::SGDOptions(0.1).momentum(0.9));
//   loss.backward(); opt.step(); opt.zero_grad();
//
// Subclasses implement update(): one parameter p (contiguous leaf) with its gradient g (same shape and dtype)
// and that parameter's state (step count and named buffers such as "momentum_buffer" or "exp_avg"); those that
// take row-sparse gradients (Tensor::sparse_grad, from embeddings with sparse gradients) implement
// update_sparse() too, and say which they take through sparse_refusal() / dense_refusal().
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tapegrad/autograd/graph.h"
#include "tapegrad/autograd/sparse_rows.h"
#include "tapegrad/autograd/tensor.h"

namespace tapegrad::optim {

// A set of parameters sharing a learning rate and weight decay. As in torch.optim, a field left unset takes the
// optimiser's default (its options' lr() and weight_decay()) when the optimiser is built; after that both are set
// in every group of param_groups(). The other options (momentum, betas, eps ...) are the optimiser's, shared by
// all groups. Schedules overwrite lr.
//
//   std::vector<optim::ParamGroup> groups{{decayed}, {not_decayed, /*lr=*/std::nullopt, /*weight_decay=*/0.0}};
//   optim::AdamW opt(groups, optim::AdamWOptions(3e-4).weight_decay(0.1));  // lr 3e-4 in both, decay 0.1 and 0
struct ParamGroup {
  ParamGroup() = default;
  ParamGroup(TensorList params_, std::optional<double> lr_ = std::nullopt,
             std::optional<double> weight_decay_ = std::nullopt)
      : params(std::move(params_)), lr(lr_), weight_decay(weight_decay_) {}
  TensorList params;
  std::optional<double> lr;
  std::optional<double> weight_decay;
};

// The values a ParamGroup's unset fields take.
struct GroupDefaults {
  double lr = 0.0;
  double weight_decay = 0.0;
};

// What step(closure) calls: zeroes the gradients, computes the loss, backpropagates it and returns it.
using Closure = std::function<Tensor()>;

// Per-parameter state. step counts the updates this parameter received (skipped steps do not count).
struct ParamState {
  std::int64_t step = 0;
  std::map<std::string, Tensor> buffers;
};

class Optimizer {
 public:
  // Fills the groups' unset fields from `defaults`; ValueError for a negative lr or weight_decay (in the defaults
  // or a group), an empty group list, a parameter that is not a contiguous floating-point tensor, or a parameter
  // given more than once (in one group or in two), which would otherwise be stepped twice per step().
  Optimizer(std::vector<ParamGroup> groups, const GroupDefaults& defaults, const char* name);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter with a gradient (dense or row-sparse), under NoGradGuard. A ValueError naming
  // the parameter, before anything is updated, when a gradient is of a kind this optimiser does not take.
  virtual void step();
  // torch's step(closure): calls the closure with gradients enabled, then step(); returns the closure's loss.
  // Optimisers that evaluate the loss more than once per step (LBFGS) need this form.
  virtual Tensor step(const Closure& closure);
  // Zeroes (or, with set_to_none, drops) the gradient of every parameter.
  void zero_grad(bool set_to_none = false);

  // Appends a group, its unset fields taken from the defaults the optimiser was built with, checked as the
  // constructor checks its groups (a parameter already in this optimiser is a ValueError); its parameters start
  // with empty state. A scheduler built earlier keeps scheduling only the groups it saw.
  void add_param_group(ParamGroup group);

  // The groups may be edited (lr, weight_decay); adding or removing parameters through them is a ValueError at
  // the next step(): add_param_group adds parameters.
  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  // Sets the lr of group `group` (ValueError on a negative lr or a bad index).
  void set_lr(std::size_t group, double lr);
  // Number of step() calls made (restored by load_state).
  std::int64_t steps_taken() const { return steps_taken_; }

  // The state of parameter `index` of group `group` (its step count and buffers; empty before its first
  // update). ValueError for an index out of range.
  const ParamState& param_state(std::size_t group, std::size_t index) const;

  // State as named tensors: "stepcount" (float64 scalar), and per parameter with state
  // "group{g}.param{i}.step" (float64 scalar) plus "group{g}.param{i}.{buffer}" (clones).
  virtual NamedTensors state_tensors() const;
  // Restores what state_tensors() produced on an optimiser with the same groups; ValueError naming the entry on a
  // missing/extra name, a shape or dtype mismatch, or buffers that are not the ones this optimiser keeps (state
  // saved by another kind of optimiser, or by Adam with another amsgrad setting). Buffers are copied into fresh
  // tensors; on any error nothing changes.
  virtual void load_state(const NamedTensors& state);

  // The buffers each updated parameter has in this optimiser's state ("exp_avg", ...), sorted.
  virtual std::vector<std::string> state_buffer_names() const = 0;

 protected:
  // p: contiguous leaf; g: contiguous, same shape/dtype as p; group.lr and group.weight_decay are set. Called with
  // state.step already incremented. step() bumps p's version afterwards; an update that writes its state buffers
  // through data_ptr bumps theirs.
  virtual void update(const ParamGroup& group, const Tensor& p, const Tensor& g, ParamState& state) = 0;
  // The same for a row-sparse gradient of p's shape and dtype, as accumulated (uncoalesced): only its rows may
  // change.
  virtual void update_sparse(const ParamGroup& group, const Tensor& p, const SparseRows& g, ParamState& state);
  // Why a parameter of `group` cannot take a row-sparse (or a dense) gradient here, as the end of a sentence;
  // empty when it can. By default dense gradients are taken and sparse ones refused.
  virtual std::string sparse_refusal(const ParamGroup& group) const;
  virtual std::string dense_refusal(const ParamGroup& group) const;
  // The sparse refusal of a group with a weight decay, which would change every row; empty without
  // one. For optimisers that step only a sparse gradient's rows (SGD, Adagrad).
  static std::string weight_decay_refusal(const ParamGroup& group);
  // A number kept in saved state (a step count, a scalar of the rule): a float64 tensor of one element.
  static Tensor state_scalar(double v);
  // The value of a saved scalar `entry`, and of a saved count (a whole number in [0, 2^53], which an int64 holds
  // exactly); otherwise a ValueError naming the optimiser and the entry.
  double read_state_scalar(const std::string& entry, const Tensor& t) const;
  std::int64_t read_state_count(const std::string& entry, const Tensor& t) const;
  // Optimiser name used in error messages.
  const char* name_;
  // Counted by step(), saved and restored by state_tensors() / load_state(); an optimiser that overrides them
  // keeps it too.
  std::int64_t steps_taken_ = 0;

 private:
  // Checks `group` (its index will be groups_.size()) against the defaults and the parameters already held,
  // then appends it with empty state; on a ValueError nothing changes.
  void append_group(ParamGroup group);

  GroupDefaults defaults_;
  std::vector<ParamGroup> groups_;
  std::vector<std::vector<ParamState>> state_;
};

// One group holding `params`, its lr and weight_decay left to the optimiser's defaults.
std::vector<ParamGroup> single_group(const TensorList& params);

}  // namespace tapegrad::optim
