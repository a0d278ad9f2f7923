#pragma once
// Counts of live TensorImpls and Nodes (live_tensor_impls(), live_nodes()), kept per thread.
// Every op makes and frees several of each; a shared atomic counter cost a locked instruction
// on each, a per-thread one costs a plain load and store. Internal to the library.

#include <atomic>
#include <cstdint>

namespace tapegrad::detail {

struct LiveCounts {
  std::atomic<std::int64_t> impls{0};
  std::atomic<std::int64_t> nodes{0};
};

// This thread's counts, or null while the thread is being torn down.
LiveCounts* thread_live_counts();
// Adds `by` to one of the counts: this thread's when it has them, else the shared total.
void count_impls(std::int64_t by);
void count_nodes(std::int64_t by);
// The totals over every thread.
std::int64_t total_live_impls();
std::int64_t total_live_nodes();

}  // namespace tapegrad::detail
