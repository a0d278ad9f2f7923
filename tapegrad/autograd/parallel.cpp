// The worker pool behind parallel_for.
//
// One job at a time: the caller publishes it, runs chunks itself, and waits until every chunk
// has finished. Chunks are claimed through one atomic word, `ticket_` = generation (32 bits) |
// chunk count (16) | next chunk (16). A compare-and-swap that claims a chunk also checks the
// generation, so a worker that wakes late can never run a chunk of a newer job with an older
// job's description, and because the caller waits for all claimed chunks, the job it describes
// (fn, range) stays alive and unchanged while any claimed chunk runs. A thread that finds the
// pool held by another thread's job does not wait: it runs its own job's chunks itself, cut as
// the pool would cut them, so the bits never depend on contention.
//
// Idle workers spin for a short while (a training step issues the next parallel op within
// microseconds) and then sleep on a condition variable, so an idle process costs nothing.

#include "tapegrad/autograd/parallel.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/kernels/blas.h"

namespace tapegrad {

namespace {

constexpr int kMaxThreads = 256;
// How long an idle worker spins before sleeping.
constexpr std::chrono::microseconds kSpinTime{200};

thread_local bool tls_in_region = false;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

int default_threads() {
  // A bad setting is thrown from the first op that needs the pool (the pool is built on first use).
  if (const char* env = std::getenv("TAPEGRAD_NUM_THREADS")) return detail::threads_from_setting(env);
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::clamp(CPU_COUNT(&set), 1, kMaxThreads);
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(std::min<unsigned>(hw, kMaxThreads));
}

class Pool {
 public:
  static Pool& instance() {
    static Pool pool;
    return pool;
  }

  int threads() const { return threads_; }

  void resize(int threads) {
    if (threads < 1) throw ValueError(message("set_num_threads: threads must be at least 1, got ", threads));
    if (tls_in_region) throw ValueError("set_num_threads: called from inside a parallel_for chunk");
    threads = std::min(threads, kMaxThreads);
    std::lock_guard<std::mutex> dispatch(dispatch_);
    stop_workers();
    threads_ = threads;
    start_workers();
  }

  void run(std::int64_t begin, std::int64_t end, int chunks, const detail::RangeFn& fn) {
    std::unique_lock<std::mutex> dispatch(dispatch_, std::try_to_lock);
    if (!dispatch.owns_lock()) {
      // Another thread's job holds the pool: run this job's chunks here, one after another. They
      // are the chunks the pool would have run, cut the same way and run as a worker runs them
      // (tls_in_region set), so the result does not depend on whether the pool was free.
      run_inline(begin, end, chunks, fn);
      return;
    }
    begin_ = begin;
    end_ = end;
    fn_ = &fn;
    error_ = nullptr;
    pending_.store(chunks, std::memory_order_relaxed);
    ++generation_;
    ticket_.store(make_ticket(generation_, chunks, 0), std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
      std::lock_guard<std::mutex> lock(sleep_mutex_);
      wake_.notify_all();
    }
    work(generation_);
    // Wait for the chunks the workers claimed; short, since the caller ran chunks meanwhile.
    while (pending_.load(std::memory_order_acquire) != 0) cpu_relax();
    fn_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

  ~Pool() {
    std::lock_guard<std::mutex> dispatch(dispatch_);
    stop_workers();
  }

 private:
  Pool() : threads_(default_threads()) {
    // Matrix products are split over this pool; OpenBLAS's own threads would fight it.
    kernels::set_blas_num_threads(1);
    start_workers();
  }

  // Chunk `index` of [begin, end) cut into `chunks`: the one cut every path uses.
  static std::pair<std::int64_t, std::int64_t> chunk_bounds(std::int64_t begin, std::int64_t end, int chunks,
                                                            int index) {
    const std::int64_t n = end - begin;
    return {begin + n * index / chunks, begin + n * (index + 1) / chunks};
  }

  // Runs chunk [lo, hi) as part of a job: inside the region, and with its exception kept in
  // `error` (the first one wins) rather than thrown, so the job's other chunks still run.
  static void run_chunk(const detail::RangeFn& fn, std::int64_t lo, std::int64_t hi, std::exception_ptr& error) {
    const bool was_in_region = tls_in_region;
    tls_in_region = true;
    try {
      fn(lo, hi);
    } catch (...) {
      if (!error) error = std::current_exception();
    }
    tls_in_region = was_in_region;
  }

  static void run_inline(std::int64_t begin, std::int64_t end, int chunks, const detail::RangeFn& fn) {
    std::exception_ptr error;
    for (int i = 0; i < chunks; ++i) {
      const auto [lo, hi] = chunk_bounds(begin, end, chunks, i);
      run_chunk(fn, lo, hi, error);
    }
    if (error) std::rethrow_exception(error);
  }

  static std::uint64_t make_ticket(std::uint32_t generation, int chunks, int next) {
    return (std::uint64_t{generation} << 32) | (std::uint64_t(chunks) << 16) | std::uint64_t(next);
  }

  // Claims and runs chunks of job `generation` until none is left.
  void work(std::uint32_t generation) {
    std::uint64_t t = ticket_.load(std::memory_order_acquire);
    for (;;) {
      if (static_cast<std::uint32_t>(t >> 32) != generation) return;
      const int chunks = static_cast<int>((t >> 16) & 0xffff);
      const int next = static_cast<int>(t & 0xffff);
      if (next >= chunks) return;
      if (!ticket_.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
      // Claimed: the caller waits for this chunk, so the job's fields are stable until it ends.
      const auto [lo, hi] = chunk_bounds(begin_, end_, chunks, next);
      std::exception_ptr error;
      run_chunk(*fn_, lo, hi, error);
      if (error) {
        std::lock_guard<std::mutex> lock(error_mutex_);
        if (!error_) error_ = error;
      }
      pending_.fetch_sub(1, std::memory_order_acq_rel);
      t = ticket_.load(std::memory_order_acquire);
    }
  }

  void worker_loop() {
    std::uint32_t seen = static_cast<std::uint32_t>(ticket_.load(std::memory_order_acquire) >> 32);
    for (;;) {
      std::uint32_t generation = static_cast<std::uint32_t>(ticket_.load(std::memory_order_acquire) >> 32);
      if (generation == seen && !stop_.load(std::memory_order_acquire)) {
        const auto spin_until = std::chrono::steady_clock::now() + kSpinTime;
        for (int i = 0;; ++i) {
          cpu_relax();
          generation = static_cast<std::uint32_t>(ticket_.load(std::memory_order_acquire) >> 32);
          if (generation != seen || stop_.load(std::memory_order_relaxed)) break;
          if ((i & 255) == 255 && std::chrono::steady_clock::now() > spin_until) break;
        }
      }
      if (generation == seen && !stop_.load(std::memory_order_acquire)) {
        std::unique_lock<std::mutex> lock(sleep_mutex_);
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        wake_.wait(lock, [&] {
          return stop_.load(std::memory_order_seq_cst) ||
                 static_cast<std::uint32_t>(ticket_.load(std::memory_order_seq_cst) >> 32) != seen;
        });
        sleepers_.fetch_sub(1, std::memory_order_relaxed);
        generation = static_cast<std::uint32_t>(ticket_.load(std::memory_order_acquire) >> 32);
      }
      if (stop_.load(std::memory_order_acquire)) return;
      seen = generation;
      work(generation);
    }
  }

  void start_workers() {
    stop_.store(false);
    for (int i = 1; i < threads_; ++i) workers_.emplace_back([this] { worker_loop(); });
  }

  void stop_workers() {
    {
      std::lock_guard<std::mutex> lock(sleep_mutex_);
      stop_.store(true, std::memory_order_seq_cst);
      wake_.notify_all();
    }
    for (std::thread& w : workers_) w.join();
    workers_.clear();
  }

  int threads_;
  std::vector<std::thread> workers_;
  std::mutex dispatch_;  // one job at a time
  std::uint32_t generation_ = 0;
  std::atomic<std::uint64_t> ticket_{0};
  std::atomic<int> pending_{0};
  std::int64_t begin_ = 0, end_ = 0;
  const detail::RangeFn* fn_ = nullptr;
  std::mutex error_mutex_;
  std::exception_ptr error_;
  std::atomic<bool> stop_{false};
  std::mutex sleep_mutex_;
  std::condition_variable wake_;
  std::atomic<int> sleepers_{0};
};

}  // namespace

int num_threads() { return Pool::instance().threads(); }

void set_num_threads(int threads) { Pool::instance().resize(threads); }

bool in_parallel_region() { return tls_in_region; }

namespace detail {

int threads_from_setting(const char* value) {
  char* end = nullptr;
  const long v = std::strtol(value, &end, 10);
  if (end == value || *end != '\0' || v < 1)
    throw ValueError(message("TAPEGRAD_NUM_THREADS must be a whole number >= 1, got '", value, "'"));
  return static_cast<int>(std::min<long>(v, kMaxThreads));
}

int chunk_count(std::int64_t begin, std::int64_t end, std::int64_t grain) {
  if (tls_in_region) return 1;
  const int threads = num_threads();
  if (threads <= 1) return 1;
  const std::int64_t n = end - begin;
  const std::int64_t by_grain = n / std::max<std::int64_t>(grain, 1);
  return static_cast<int>(std::min<std::int64_t>(by_grain, threads));
}

void run_chunks(std::int64_t begin, std::int64_t end, int chunks, const RangeFn& fn) {
  Pool::instance().run(begin, end, chunks, fn);
}

}  // namespace detail

}  // namespace tapegrad
