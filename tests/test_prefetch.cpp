// data::Prefetcher: items in step order from any number of workers, equal to direct calls; exceptions
// at their step; restarts on a jump; at most `depth` items ahead; items made while the caller works.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tapegrad/autograd/autograd.h"
#include "tapegrad/data/data.h"

using namespace tapegrad;

namespace {

data::Dataset numbered_dataset(std::int64_t rows) {
  data::Dataset dataset;
  for (std::int64_t i = 0; i < rows; ++i) {
    data::Example e;
    for (std::int64_t t = 0; t <= i % 5; ++t) e.input.push_back(4 + (i * 7 + t) % 13);
    e.label = i % 2;
    dataset.push_back(e);
  }
  return dataset;
}

}  // namespace

TEST_CASE("prefetch: batches come in step order and equal the loader's for 1 to 3 workers") {
  data::DataLoaderOptions options;
  options.batch_size = 4;
  options.seed = 11;
  const data::DataLoader loader(numbered_dataset(37), options);
  for (int workers = 1; workers <= 3; ++workers) {
    CAPTURE(workers);
    data::Prefetcher<data::Batch> batches([&loader](std::int64_t step) { return loader.batch_at(step); },
                                          data::PrefetchOptions{workers, 3});
    for (std::int64_t step = 0; step < 25; ++step) {  // across epochs (10 batches each)
      const data::Batch got = batches.get(step);
      const data::Batch expected = loader.batch_at(step);
      CHECK(got.indices == expected.indices);
      CHECK(got.input.to_vector<std::int64_t>() == expected.input.to_vector<std::int64_t>());
      CHECK(got.padding_mask.to_vector<std::int64_t>() == expected.padding_mask.to_vector<std::int64_t>());
    }
    CHECK(batches.stats().items == 25);
  }
}

TEST_CASE("prefetch: an exception reaches the caller at its step with its type and later steps still come") {
  data::Prefetcher<std::int64_t> items(
      [](std::int64_t step) -> std::int64_t {
        if (step == 3) throw IndexError("row 3 is corrupt");
        return step * step;
      },
      data::PrefetchOptions{2, 4});
  CHECK(items.get(0) == 0);
  CHECK(items.get(1) == 1);
  CHECK(items.get(2) == 4);
  CHECK_THROWS_WITH_AS(items.get(3), "row 3 is corrupt", IndexError);
  CHECK(items.get(4) == 16);
  CHECK(items.get(5) == 25);
}

TEST_CASE("prefetch: a jump restarts from the asked step, backwards or forwards") {
  std::atomic<int> calls{0};
  data::Prefetcher<std::int64_t> items([&calls](std::int64_t step) {
    ++calls;
    return 10 * step;
  });
  CHECK(items.get(0) == 0);
  CHECK(items.get(1) == 10);
  CHECK(items.get(100) == 1000);  // a resume at step 100
  CHECK(items.get(101) == 1010);
  CHECK(items.get(5) == 50);  // back
  CHECK(items.get(6) == 60);
  CHECK(items.get(7) == 70);
  CHECK(calls.load() >= 7);
}

TEST_CASE("prefetch: the workers stay at most depth items ahead of the caller") {
  std::mutex mutex;
  std::int64_t highest = -1;
  std::atomic<std::int64_t> asked{0};
  std::atomic<std::int64_t> worst_lead{0};
  const std::int64_t depth = 3;
  {
    data::Prefetcher<std::int64_t> items(
        [&](std::int64_t step) {
          std::lock_guard<std::mutex> lock(mutex);
          highest = std::max(highest, step);
          worst_lead = std::max(worst_lead.load(), step - asked.load());
          return step;
        },
        data::PrefetchOptions{2, depth});
    for (std::int64_t step = 0; step < 50; ++step) {
      asked = step;
      CHECK(items.get(step) == step);
      std::this_thread::yield();
    }
    // Give the workers every chance to run ahead while the caller does nothing.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::lock_guard<std::mutex> lock(mutex);
    CHECK(highest <= 49 + depth);
    CHECK(highest >= 50);  // they did make items ahead
  }
  // A step is made only once the caller has asked for the step depth before it.
  CHECK(worst_lead.load() <= depth);
}

TEST_CASE("prefetch: the next item is made while the caller works on the current one") {
  // Without timing: the caller, holding item 0, waits until the one worker has started item 2. It stores
  // each item before it starts the next, so item 1 is then made, which can only have happened in the
  // background; get(1) hands it out without waiting.
  std::mutex mutex;
  std::condition_variable started;
  std::int64_t last_started = -1;
  data::Prefetcher<std::int64_t> items(
      [&](std::int64_t step) {
        {
          std::lock_guard<std::mutex> lock(mutex);
          last_started = std::max(last_started, step);
        }
        started.notify_all();
        return step;
      },
      data::PrefetchOptions{1, 2});
  CHECK(items.get(0) == 0);
  {
    std::unique_lock<std::mutex> lock(mutex);
    CHECK(started.wait_for(lock, std::chrono::seconds(30), [&] { return last_started >= 2; }));
  }
  const std::int64_t ready_before = items.stats().ready;
  CHECK(items.get(1) == 1);
  CHECK(items.stats().ready == ready_before + 1);
}

TEST_CASE("prefetch: bad options and an empty producer are refused") {
  const auto produce = [](std::int64_t step) { return step; };
  CHECK_THROWS_WITH_AS(data::Prefetcher<std::int64_t>(produce, data::PrefetchOptions{0, 4}),
                       "Prefetcher: workers must be in [1, 256] and depth in [1, 65536], got 0 and 4", ValueError);
  CHECK_THROWS_AS(data::Prefetcher<std::int64_t>(produce, data::PrefetchOptions{1, 0}), ValueError);
  CHECK_THROWS_AS(data::Prefetcher<std::int64_t>(produce, data::PrefetchOptions{100000, 4}), ValueError);
  // A depth near INT64_MAX made `next + depth` overflow (and would let the workers run unbounded ahead).
  CHECK_THROWS_AS(data::Prefetcher<std::int64_t>(produce, data::PrefetchOptions{1, INT64_MAX}), ValueError);
  CHECK_THROWS_WITH_AS(data::Prefetcher<std::int64_t>(nullptr), "Prefetcher: the producer is empty", ValueError);
  data::Prefetcher<std::int64_t> items(produce, data::PrefetchOptions{1, 2});
  CHECK_THROWS_WITH_AS(items.get(INT64_MAX), "Prefetcher::get: step must be in [0, 2^62), got 9223372036854775807",
                       ValueError);
  CHECK_THROWS_AS(items.get(-1), ValueError);
  CHECK(items.get(5) == 5);  // still serves after the refusals
}

TEST_CASE("prefetch: destruction while the workers wait or work does not hang") {
  std::atomic<int> calls{0};
  for (int round = 0; round < 20; ++round) {
    data::Prefetcher<std::vector<float>> items(
        [&calls](std::int64_t step) {
          ++calls;
          return std::vector<float>(1000, static_cast<float>(step));
        },
        data::PrefetchOptions{3, 2});
    if (round % 2 == 0) CHECK(items.get(0).front() == 0.0f);
  }
  CHECK(calls.load() >= 10);
}
