#pragma once
// For optimisers whose update is a loop over a parameter's elements (Adadelta, Adamax, NAdam, RAdam,
// Rprop, ASGD): the loop on the pool; for those and the others whose buffers are written through data
// pointers (Adam, RMSprop), the state's bookkeeping around it; and the check of the Adam family's betas.

#include <cstdint>
#include <tuple>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/parallel.h"
#include "tapegrad/autograd/storage.h"
#include "tapegrad/optim/optimizer.h"

namespace tapegrad::optim::detail {

// fn(i) for i in [0, n), in chunks on the pool (each element is written by one chunk alone).
template <class F>
void for_each_element(std::int64_t n, const F& fn) {
  parallel_for(0, n, 16384, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; ++i) fn(i);
  });
}

// The state's buffers, created at zero on the parameter's first update.
inline void start_buffers(const Optimizer& opt, const Tensor& p, ParamState& state) {
  if (!state.buffers.empty()) return;
  for (const std::string& name : opt.state_buffer_names()) state.buffers[name] = zeros_like(p);
}

// Marks every buffer of the state as written through its data pointer.
inline void mark_written(ParamState& state) {
  for (auto& entry : state.buffers) entry.second.impl()->storage->bump_version();
}

// ValueError naming the optimiser unless both betas are in [0, 1).
inline void check_betas(const std::tuple<double, double>& betas, const char* name) {
  const auto [beta1, beta2] = betas;
  if (!(beta1 >= 0.0 && beta1 < 1.0))
    throw ValueError(message(name, ": invalid beta1 ", beta1, " (must be in [0, 1))"));
  if (!(beta2 >= 0.0 && beta2 < 1.0))
    throw ValueError(message(name, ": invalid beta2 ", beta2, " (must be in [0, 1))"));
}

}  // namespace tapegrad::optim::detail
