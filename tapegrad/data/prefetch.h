#pragma once
// Prefetcher: makes the items of the next steps on background threads while the caller trains on the
// current one, on a bounded queue. The items come back in step order whatever the number of workers,
// and equal what produce(step) returns when called directly, so a run with prefetching gives the same
// results as one without; an exception produce throws reaches the caller at the step it belongs to.
//
//   data::Prefetcher<data::Batch> batches([&loader](std::int64_t step) { return loader.batch_at(step); },
//                                         data::PrefetchOptions{/*workers=*/1, /*depth=*/4});
//   trainer.fit([&](std::int64_t step) {
//     const data::Batch batch = batches.get(step);  // made while the previous step ran
//     ...
//   });
//
// produce must be safe to call from several threads at once when workers > 1 (DataLoader's methods
// are: they are const and pure), and must not call back into the prefetcher.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tapegrad/autograd/error.h"

namespace tapegrad::data {

struct PrefetchOptions {
  int workers = 1;         // background threads calling produce
  std::int64_t depth = 4;  // items made or being made ahead of the caller, at most
};

// What the prefetcher measured, for logs: how much work it took off the caller's path.
struct PrefetchStats {
  std::int64_t items = 0;        // items handed out by get
  std::int64_t ready = 0;        // of those, already made when asked for
  double produce_seconds = 0.0;  // time the workers spent in produce (including discarded items)
  double wait_seconds = 0.0;     // time get spent waiting for an item
};

template <class T>
class Prefetcher {
 public:
  using Producer = std::function<T(std::int64_t step)>;

  static constexpr int kMaxWorkers = 256;
  static constexpr std::int64_t kMaxDepth = std::int64_t{1} << 16;
  static constexpr std::int64_t kStepLimit = std::int64_t{1} << 62;  // steps are below it

  // The workers start at once, making items from step 0 (a first get of another step restarts there).
  // ValueError for an empty producer, workers outside [1, 256] or depth outside [1, 65536]; a thread
  // that cannot be started stops the ones that were and rethrows.
  explicit Prefetcher(Producer produce, PrefetchOptions options = {})
      : produce_(std::move(produce)), options_(options) {
    if (!produce_) throw ValueError("Prefetcher: the producer is empty");
    if (options.workers < 1 || options.workers > kMaxWorkers || options.depth < 1 || options.depth > kMaxDepth)
      throw ValueError(message("Prefetcher: workers must be in [1, ", kMaxWorkers, "] and depth in [1, ", kMaxDepth,
                               "], got ", options.workers, " and ", options.depth));
    threads_.reserve(static_cast<std::size_t>(options.workers));
    try {
      for (int i = 0; i < options.workers; ++i) threads_.emplace_back([this] { work(); });
    } catch (...) {
      stop_workers();  // joinable threads must not outlive a constructor that throws
      throw;
    }
  }

  // Stops the workers, after each finishes the item it is making.
  ~Prefetcher() { stop_workers(); }

  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // The item of `step`, waiting for it if it is not made yet. Consecutive steps are served from what the
  // workers made ahead; any other step (a resume, an evaluation's own range, a jump back) drops the items
  // made ahead and starts again from it. Rethrows, with its type, the exception produce threw for `step`.
  T get(std::int64_t step) {
    if (step < 0 || step >= kStepLimit)
      throw ValueError(message("Prefetcher::get: step must be in [0, 2^62), got ", step));
    std::unique_lock<std::mutex> lock(mutex_);
    if (step != next_) restart(step);
    ++stats_.items;
    auto it = made_.find(step);
    if (it != made_.end()) {
      ++stats_.ready;
    } else {
      const auto start = Clock::now();
      changed_.wait(lock, [&] { return (it = made_.find(step)) != made_.end(); });
      stats_.wait_seconds += seconds_since(start);
    }
    Slot slot = std::move(it->second);
    made_.erase(it);
    next_ = step + 1;
    lock.unlock();
    changed_.notify_all();  // room for one more item ahead
    if (slot.error) std::rethrow_exception(slot.error);
    return std::move(*slot.value);
  }

  PrefetchStats stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

 private:
  using Clock = std::chrono::steady_clock;
  struct Slot {
    std::optional<T> value;
    std::exception_ptr error;
  };

  static double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
  }

  void stop_workers() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  // Called with the lock held: forget what was made for the old position, make from `step` on.
  void restart(std::int64_t step) {
    made_.clear();
    next_ = step;
    next_to_make_ = step;
    ++generation_;  // items being made for the old position are dropped when they arrive
    changed_.notify_all();
  }

  void work() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      changed_.wait(lock, [&] { return stop_ || next_to_make_ < next_ + options_.depth; });
      if (stop_) return;
      const std::int64_t step = next_to_make_++;
      const std::uint64_t generation = generation_;
      lock.unlock();
      Slot slot;
      const auto start = Clock::now();
      try {
        slot.value.emplace(produce_(step));
      } catch (...) {
        slot.error = std::current_exception();
      }
      const double took = seconds_since(start);
      lock.lock();
      stats_.produce_seconds += took;
      if (generation == generation_) made_.emplace(step, std::move(slot));
      changed_.notify_all();
    }
  }

  Producer produce_;
  PrefetchOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;  // an item made, an item taken, a restart or the stop
  std::map<std::int64_t, Slot> made_;
  std::int64_t next_ = 0;          // the step the caller is expected to ask for next
  std::int64_t next_to_make_ = 0;  // the step the next free worker makes
  std::uint64_t generation_ = 0;
  bool stop_ = false;
  PrefetchStats stats_;
  std::vector<std::thread> threads_;  // last: started after every other member is ready
};

}  // namespace tapegrad::data
