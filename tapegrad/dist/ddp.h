#pragma once
// Data-parallel training: every rank holds a replica of the model, runs its own share of the
// global batch, and backward leaves the mean of all ranks' gradients in every replica's .grad, so
// the optimiser steps keep the replicas equal (PyTorch's DistributedDataParallel).
//
//   dist::ProcessGroup world = dist::init();
//   nn::Transformer model(options);
//   dist::DistributedDataParallel ddp(model, world);   // rank 0's parameters and buffers everywhere
//   optim::AdamW opt(model->parameters(), ...);
//   for (...) {
//     Tensor loss = loss_fn(ddp(src, tgt), target);   // this rank's batch: global batch / world.size()
//     opt.zero_grad();
//     loss.backward();                                 // returns with the averaged gradients
//     opt.step();
//   }
//
// How the gradients are averaged. The parameters that require grad are laid out in reverse
// registration order (roughly the order backward produces their gradients) and cut into buckets:
// a small first one (first_bucket_cap_mb) so that communication starts early, then buckets of
// about bucket_cap_mb each. When backward has accumulated the last gradient of a bucket (a
// post-accumulate-grad hook on each parameter), the bucket's gradients are copied into one flat
// buffer and its all-reduce is started without waiting, so it runs while backward computes the
// rest; buckets are started in index order on every rank (MPI's rule for collectives). At the end
// of backward (autograd::queue_callback) every all-reduce is waited for and the means are copied
// back into the .grads. Gradients are therefore bitwise equal on every rank.
//
// A parameter that requires grad but got no gradient in a backward is an error naming it, unless
// find_unused_parameters, when it counts as a zero gradient on that rank (its .grad gets the mean
// of the others'). Inside no_sync() backward only accumulates locally (gradient accumulation over
// micro-batches); the first backward outside it reduces the accumulated sums.
//
// Parameters and buffers are broadcast from rank 0 at construction; with broadcast_buffers (the
// default, as in PyTorch) buffers are broadcast again before each forward through the wrapper that
// records a graph (so such a forward is a collective: every rank makes it; forwards under
// NoGradGuard, as evaluation runs, are not). Row-sparse gradients (sparse embeddings) are not
// reduced: such a parameter is an error. A backward must give at least one parameter a gradient on
// every rank: the reduction starts from the parameters' hooks, so a rank whose backward reaches none
// of them takes no part (the others then wait until the group's timeout).

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tapegrad/dist/process_group.h"
#include "tapegrad/nn/module.h"

namespace tapegrad::dist {

struct DistributedDataParallelOptions {
  double bucket_cap_mb = 25.0;       // bytes of gradient per bucket after the first, in MiB (> 0)
  double first_bucket_cap_mb = 1.0;  // the first bucket's (> 0)
  bool find_unused_parameters = false;
  bool broadcast_buffers = true;
};

// The gradient reduction of DistributedDataParallel, for any list of parameters.
class GradientReducer {
 public:
  GradientReducer(NamedTensors parameters, ProcessGroup group, DistributedDataParallelOptions options);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // The buckets as lists of parameter names, in the order they are reduced.
  std::vector<std::vector<std::string>> buckets() const;
  // Inside no_sync (a count, so guards nest) backward does not communicate.
  void enter_no_sync();
  void exit_no_sync();
  bool syncing() const;
  // Measured over the last synchronised backward: seconds from the first bucket's start to the end of
  // backward's own work, and seconds spent waiting for reductions after it (exposed communication).
  struct Timing {
    double overlapped_s = 0.0;
    double waited_s = 0.0;
    std::int64_t bytes = 0;  // gradient bytes all-reduced
  };
  Timing last_timing() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

// A guard: backward inside its lifetime accumulates gradients without communicating.
class NoSyncGuard {
 public:
  explicit NoSyncGuard(GradientReducer& reducer) : reducer_(&reducer) { reducer_->enter_no_sync(); }
  ~NoSyncGuard() {
    if (reducer_ != nullptr) reducer_->exit_no_sync();
  }
  NoSyncGuard(NoSyncGuard&& other) noexcept : reducer_(std::exchange(other.reducer_, nullptr)) {}
  NoSyncGuard(const NoSyncGuard&) = delete;
  NoSyncGuard& operator=(const NoSyncGuard&) = delete;
  NoSyncGuard& operator=(NoSyncGuard&&) = delete;

 private:
  GradientReducer* reducer_;
};

// Gives every rank rank 0's parameter and buffer values. First checks that every rank's module has the same
// names, shapes and dtypes (ValueError on every rank otherwise, before anything is overwritten).
void sync_module_state(const nn::Module& module, const ProcessGroup& group);
// Broadcasts the module's buffers from rank 0 (values only; the layouts are assumed checked).
void broadcast_buffers(const nn::Module& module, const ProcessGroup& group);

// Wraps a module handle (nn::Linear, nn::Transformer, a TAPEGRAD_MODULE of the user's): calling the
// wrapper calls the module; the wrapper shares the module, whose parameters the optimiser steps.
// (Without the wrapper: sync_module_state, then a GradientReducer over model->named_parameters().)
template <class ModuleType>
class DistributedDataParallel {
 public:
  DistributedDataParallel(ModuleType module, ProcessGroup group, DistributedDataParallelOptions options = {})
      : module_(std::move(module)), group_(std::move(group)), options_(options) {
    sync_module_state(*module_, group_);
    reducer_ = std::make_unique<GradientReducer>(module_->named_parameters(), group_, options_);
  }

  template <class... Args>
  decltype(auto) operator()(Args&&... args) {
    if (options_.broadcast_buffers && is_grad_enabled()) broadcast_buffers(*module_, group_);
    return module_(std::forward<Args>(args)...);
  }

  const ModuleType& module() const { return module_; }
  const ProcessGroup& group() const { return group_; }
  GradientReducer& reducer() { return *reducer_; }
  // Backward inside the returned guard's lifetime accumulates without communicating.
  NoSyncGuard no_sync() { return NoSyncGuard(*reducer_); }

 private:
  ModuleType module_;
  ProcessGroup group_;
  DistributedDataParallelOptions options_;
  std::unique_ptr<GradientReducer> reducer_;
};

}  // namespace tapegrad::dist
