#pragma once
// Intra-op parallelism: one process-wide pool of worker threads over which large kernels split
// their work (elementwise maps and copies, row-wise softmax and layer norm, reductions into
// independent outputs, the Adam update, matrix products split into row or column blocks and
// batched products split by batch entry). OpenBLAS itself runs single-threaded inside the pool,
// so the two never compete for the cores.
//
//   set_num_threads(2);                       // the calling thread plus one worker
//   parallel_for(0, n, 16384, [&](std::int64_t lo, std::int64_t hi) {
//     for (std::int64_t i = lo; i < hi; ++i) out[i] = f(in[i]);
//   });
//
// A range is cut into at most num_threads() contiguous chunks of at least `grain` elements; the
// cut depends only on the range, the grain, the thread count and whether the call is nested,
// never on timing, so a kernel's bits depend only on its inputs and the thread count, on every
// run and with any number of user threads computing at once. Work below two grains and nested
// calls (from inside a chunk) run inline as one chunk. A call made while another user thread's
// job holds the pool runs the same chunks inline, one after another, each inside the region
// (in_parallel_region() true) as on a worker.
//
// Default thread count: TAPEGRAD_NUM_THREADS if set, else the CPUs this process may run on.

#include <cstdint>
#include <type_traits>
#include <utility>

namespace tapegrad {

// Threads that work on one op, the calling thread included (>= 1).
int num_threads();
// ValueError when threads < 1. Joins or starts workers; not to be called from inside a chunk.
void set_num_threads(int threads);
// True on a thread that is running a chunk of parallel_for (the pool's workers, and the caller
// while it runs its own chunk).
bool in_parallel_region();

namespace detail {

// A non-owning reference to a callable taking (lo, hi): parallel_for's body without a heap
// allocation or a std::function.
class RangeFn {
 public:
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, RangeFn>>>
  explicit RangeFn(F& f)
      : object_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* o, std::int64_t lo, std::int64_t hi) { (*static_cast<F*>(o))(lo, hi); }) {}
  void operator()(std::int64_t lo, std::int64_t hi) const { call_(object_, lo, hi); }

 private:
  void* object_;
  void (*call_)(void*, std::int64_t, std::int64_t);
};

// The thread count a TAPEGRAD_NUM_THREADS value asks for (at most 256); ValueError naming the
// variable and the value when it is not a whole number >= 1.
int threads_from_setting(const char* value);

// How many chunks [begin, end) is cut into for this grain and thread count (1: run inline).
int chunk_count(std::int64_t begin, std::int64_t end, std::int64_t grain);
// Runs fn over the chunks of [begin, end) on the pool; rethrows the first exception a chunk threw
// once every chunk has finished.
void run_chunks(std::int64_t begin, std::int64_t end, int chunks, const RangeFn& fn);

}  // namespace detail

// fn(lo, hi) over contiguous, disjoint chunks covering [begin, end), in parallel when the range
// holds at least two grains. fn must be safe to run concurrently on disjoint chunks.
template <class F>
void parallel_for(std::int64_t begin, std::int64_t end, std::int64_t grain, F&& fn) {
  if (end <= begin) return;
  const int chunks = detail::chunk_count(begin, end, grain);
  if (chunks <= 1) {
    fn(begin, end);
    return;
  }
  detail::run_chunks(begin, end, chunks, detail::RangeFn(fn));
}

}  // namespace tapegrad
