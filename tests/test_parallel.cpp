// The thread pool (autograd/parallel.h) and the kernels that use it: every parallel kernel must
// give the bits it gives on one thread.

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "tapegrad/autograd/autograd.h"
#include "tapegrad/nn/nn.h"
#include "tapegrad/optim/optim.h"
#include "tests/testing.h"

using namespace tapegrad;

namespace {

// Sets the thread count for a scope and restores the previous one.
class ThreadCount {
 public:
  explicit ThreadCount(int threads) : saved_(num_threads()) { set_num_threads(threads); }
  ~ThreadCount() { set_num_threads(saved_); }
  ThreadCount(const ThreadCount&) = delete;
  ThreadCount& operator=(const ThreadCount&) = delete;

 private:
  int saved_;
};

struct Chunk {
  std::int64_t lo, hi;
  bool operator<(const Chunk& o) const { return lo < o.lo; }
};

std::vector<Chunk> chunks_of(std::int64_t begin, std::int64_t end, std::int64_t grain) {
  std::mutex mutex;
  std::vector<Chunk> chunks;
  parallel_for(begin, end, grain, [&](std::int64_t lo, std::int64_t hi) {
    std::lock_guard<std::mutex> lock(mutex);
    chunks.push_back({lo, hi});
  });
  std::sort(chunks.begin(), chunks.end());
  return chunks;
}

// Runs f with one thread and with three (an uneven cut on any machine) and checks that every
// tensor it returns has the same bits.
void same_bits_on_1_and_3_threads(const std::function<TensorList()>& f) {
  TensorList one, three;
  {
    ThreadCount t(1);
    one = f();
  }
  {
    ThreadCount t(3);
    three = f();
  }
  REQUIRE(one.size() == three.size());
  for (std::size_t i = 0; i < one.size(); ++i) {
    CAPTURE(i);
    REQUIRE(one[i].shape() == three[i].shape());
    const std::vector<double> a = one[i].to_vector<double>(), b = three[i].to_vector<double>();
    std::size_t differing = 0;
    for (std::size_t k = 0; k < a.size(); ++k) differing += a[k] != b[k];
    CHECK(differing == 0);
  }
}

}  // namespace

TEST_CASE("parallel: parallel_for covers the range once in contiguous chunks cut the same way every time") {
  ThreadCount t(3);
  CHECK(num_threads() == 3);
  const std::vector<Chunk> chunks = chunks_of(10, 100'010, 1000);
  REQUIRE(chunks.size() == 3);
  CHECK(chunks.front().lo == 10);
  CHECK(chunks.back().hi == 100'010);
  for (std::size_t i = 1; i < chunks.size(); ++i) CHECK(chunks[i].lo == chunks[i - 1].hi);
  // The cut depends on the range, grain and thread count only.
  for (int run = 0; run < 20; ++run) {
    const std::vector<Chunk> again = chunks_of(10, 100'010, 1000);
    REQUIRE(again.size() == chunks.size());
    for (std::size_t i = 0; i < chunks.size(); ++i) CHECK((again[i].lo == chunks[i].lo && again[i].hi == chunks[i].hi));
  }
  // Fewer than two grains: one call with the whole range, on the calling thread.
  const std::thread::id caller = std::this_thread::get_id();
  int calls = 0;
  parallel_for(0, 1999, 1000, [&](std::int64_t lo, std::int64_t hi) {
    ++calls;
    CHECK(lo == 0);
    CHECK(hi == 1999);
    CHECK(std::this_thread::get_id() == caller);
  });
  CHECK(calls == 1);
  CHECK(chunks_of(0, 2000, 1000).size() == 2);
  CHECK(chunks_of(5, 5, 1).empty());

  // Each element written once: a sum over many jobs in a row.
  std::vector<int> hits(50'000, 0);
  for (int job = 0; job < 200; ++job)
    parallel_for(0, static_cast<std::int64_t>(hits.size()), 64, [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t i = lo; i < hi; ++i) ++hits[static_cast<std::size_t>(i)];
    });
  CHECK(std::all_of(hits.begin(), hits.end(), [](int h) { return h == 200; }));
}

TEST_CASE("parallel: a chunk's exception reaches the caller after every chunk ends, and the pool goes on") {
  ThreadCount t(3);
  std::atomic<int> finished{0};
  CHECK_THROWS_WITH_AS(parallel_for(0, 30, 10,
                                    [&](std::int64_t lo, std::int64_t) {
                                      if (lo == 10) throw ShapeError("chunk at 10 failed");
                                      finished.fetch_add(1);
                                    }),
                       "chunk at 10 failed", ShapeError);
  CHECK(finished.load() == 2);
  std::atomic<std::int64_t> total{0};
  parallel_for(0, 30, 10, [&](std::int64_t lo, std::int64_t hi) { total.fetch_add(hi - lo); });
  CHECK(total.load() == 30);
}

TEST_CASE("parallel: nested calls run inline, and calls from several threads at once all complete") {
  ThreadCount t(2);
  CHECK_FALSE(in_parallel_region());
  std::atomic<int> inner_calls{0};
  std::atomic<bool> inside_seen{true};
  parallel_for(0, 2, 1, [&](std::int64_t, std::int64_t) {
    if (!in_parallel_region()) inside_seen = false;
    parallel_for(0, 100'000, 1, [&](std::int64_t lo, std::int64_t hi) {
      inner_calls.fetch_add(1);
      if (lo != 0 || hi != 100'000) inside_seen = false;
    });
  });
  CHECK(inside_seen.load());
  CHECK(inner_calls.load() == 2);
  CHECK_FALSE(in_parallel_region());

  // Four user threads share the pool: whichever finds it busy runs its range itself.
  std::vector<std::int64_t> sums(4, 0);
  std::vector<std::thread> users;
  for (int u = 0; u < 4; ++u)
    users.emplace_back([&sums, u] {
      for (int rep = 0; rep < 50; ++rep) {
        std::atomic<std::int64_t> s{0};
        parallel_for(0, 10'000, 100, [&](std::int64_t lo, std::int64_t hi) {
          std::int64_t local = 0;
          for (std::int64_t i = lo; i < hi; ++i) local += i;
          s.fetch_add(local);
        });
        sums[static_cast<std::size_t>(u)] += s.load();
      }
    });
  for (std::thread& u : users) u.join();
  for (std::int64_t s : sums) CHECK(s == 50 * (10'000LL * 9'999 / 2));
}

TEST_CASE("parallel: TAPEGRAD_NUM_THREADS must be a whole number >= 1") {
  CHECK(detail::threads_from_setting("3") == 3);
  CHECK(detail::threads_from_setting("100000") == 256);  // capped
  for (const char* bad : {"", "two", "2x", "0", "-1"}) {
    CAPTURE(bad);
    const std::string message = std::string("TAPEGRAD_NUM_THREADS must be a whole number >= 1, got '") + bad + "'";
    CHECK_THROWS_WITH_AS(detail::threads_from_setting(bad), message.c_str(), ValueError);
  }
}

TEST_CASE("parallel: set_num_threads validates its argument") {
  CHECK_THROWS_WITH_AS(set_num_threads(0), "set_num_threads: threads must be at least 1, got 0", ValueError);
  CHECK_THROWS_WITH_AS(set_num_threads(-3), "set_num_threads: threads must be at least 1, got -3", ValueError);
  ThreadCount t(5);
  CHECK(num_threads() == 5);
  bool refused = false;
  parallel_for(0, 2, 1, [&](std::int64_t lo, std::int64_t) {
    if (lo != 0) return;
    try {
      set_num_threads(2);
    } catch (const ValueError&) {
      refused = true;
    }
  });
  CHECK(refused);
  CHECK(num_threads() == 5);
}

TEST_CASE("parallel: elementwise maps, copies and in-place writes give the one-thread bits") {
  Generator gen(1);
  const Tensor a = randn({64, 50, 41}, gen);  // 131,200 elements: several chunks
  const Tensor row = randn({41}, gen);
  const Tensor mask = gt(randn({64, 1, 41}, gen), 0.0);
  same_bits_on_1_and_3_threads([&] {
    Tensor acc = zeros({64, 50, 41});
    acc.add_(a, 0.5);
    acc.add_(row, 2.0);  // broadcast, strided path
    Tensor filled = empty({64, 50, 41});
    filled.fill_(3.25);
    filled.permute({2, 0, 1}).select(0, 3).fill_(-1.0);  // a strided view
    Tensor scaled = a.clone();
    scaled.mul_(0.75);
    return TensorList{a + row,
                      a * a,
                      exp(a),
                      tanh(a),
                      gelu(a),
                      gelu(a, GeluApproximation::Tanh),
                      where(mask, a, a * 2.0),
                      a.permute({2, 0, 1}).contiguous(),
                      a.transpose(0, 1).contiguous(),
                      acc,
                      filled,
                      scaled};
  });
}

TEST_CASE("parallel: reductions, softmax, layer norm and their backwards give the one-thread bits") {
  Generator gen(2);
  const Tensor x = randn({16, 24, 130}, gen);        // 49,920 elements
  const Tensor scores = randn({4, 8, 64, 64}, gen);  // 131,072: attention-shaped
  const Tensor g = randn({16, 24, 130}, gen);
  const Tensor gs = randn({4, 8, 64, 64}, gen);
  const Tensor w = randn({130}, gen);
  const Tensor b = randn({130}, gen);
  same_bits_on_1_and_3_threads([&] {
    TensorList out;
    out.push_back(sum(x, {0, 1}));  // leading axes: a bias gradient
    out.push_back(sum(x, {2}));     // trailing axis: row sums
    out.push_back(mean(x, {0}));
    out.push_back(sum(x, {0, 2}));  // interleaved: the serial path
    for (const bool causal : {false, true}) {
      const Tensor s = scores.detach().requires_grad_();
      const Tensor y = causal ? causal_softmax(s) : softmax(s, -1);
      (y * gs).sum().backward();
      out.push_back(y.detach());
      out.push_back(s.grad());
    }
    const Tensor s = scores.detach().requires_grad_();
    const Tensor ls = log_softmax(s, -1);
    (ls * gs).sum().backward();
    out.push_back(ls.detach());
    out.push_back(s.grad());
    const Tensor xi = x.detach().requires_grad_();
    const Tensor wi = w.detach().requires_grad_();
    const Tensor bi = b.detach().requires_grad_();
    const Tensor y = layer_norm(xi, {130}, wi, bi, 1e-5);
    (y * g).sum().backward();
    for (const Tensor& t : {y.detach(), xi.grad(), wi.grad(), bi.grad()}) out.push_back(t);
    return out;
  });
}

TEST_CASE("parallel: batched products give the one-thread bits, split products agree to rounding") {
  Generator gen(3);
  const Tensor q = randn({4, 8, 64, 32}, gen);  // 32 independent (64, 32) @ (32, 64) products
  const Tensor k = randn({4, 8, 64, 32}, gen);
  same_bits_on_1_and_3_threads([&] { return TensorList{matmul(q, k.mT()), matmul(q.mT(), k)}; });

  // One large product is cut into blocks of C's rows or columns; each block is its own BLAS call,
  // whose kernels may round differently from the whole product's, so the check is a tolerance.
  for (const auto& sizes : {std::array<std::int64_t, 3>{300, 70, 90}, std::array<std::int64_t, 3>{70, 300, 90}}) {
    const std::int64_t m = sizes[0], n = sizes[1], kk = sizes[2];
    CAPTURE(m);
    const Tensor a = randn({m, kk}, gen);
    const Tensor bt = randn({n, kk}, gen);
    Tensor one, three;
    {
      ThreadCount t(1);
      one = matmul(a, bt.mT());
    }
    {
      ThreadCount t(3);
      three = matmul(a, bt.mT());
    }
    const Tensor reference = matmul(a.to(kFloat64), bt.to(kFloat64).mT());
    const double worst = max(abs(three.to(kFloat64) - reference)).item();
    CHECK(worst < 1e-4);
    CHECK(max(abs(three - one)).item() < 1e-4);
  }
}

TEST_CASE("parallel: a transformer training step is repeatable on three threads and within rounding of one") {
  // Its products are large enough to be split, so three threads may round differently from one
  // (as with any threaded BLAS); two runs on the same thread count must still agree bit for bit.
  auto train = [] {
    Generator gen(4);
    nn::TransformerEncoderLayer layer(testing::layer_options(64, 4, 256).generator(&gen));
    optim::AdamW adam(layer->parameters(), optim::AdamWOptions(1e-3).weight_decay(0.1).amsgrad(true));
    const Tensor x = randn({8, 100, 64}, gen);  // 51,200 activations per tensor
    for (int step = 0; step < 2; ++step) {
      adam.zero_grad();
      layer(x).pow(2).mean().backward();
      adam.step();
    }
    TensorList out;
    for (const Tensor& p : layer->parameters()) out.push_back(p.detach().clone());
    return out;
  };
  TensorList one, three, again;
  {
    ThreadCount t(1);
    one = train();
  }
  {
    ThreadCount t(3);
    three = train();
    again = train();
  }
  REQUIRE(one.size() == three.size());
  for (std::size_t i = 0; i < one.size(); ++i) {
    CAPTURE(i);
    CHECK(three[i].to_vector<float>() == again[i].to_vector<float>());
    CHECK(max(abs(three[i] - one[i])).item() < 1e-5);
  }
}

TEST_CASE("parallel: Adam, AdamW and SGD steps on a large parameter give the one-thread bits") {
  same_bits_on_1_and_3_threads([] {
    Generator gen(5);
    const Tensor init = randn({300, 331}, gen);  // 99,300 elements: not a whole number of vectors
    TensorList out;
    for (int kind = 0; kind < 3; ++kind) {
      const Tensor p = init.clone().requires_grad_();
      std::unique_ptr<optim::Optimizer> opt;
      if (kind == 0) opt = std::make_unique<optim::Adam>(TensorList{p}, optim::AdamOptions(0.01).weight_decay(0.05));
      if (kind == 1)
        opt = std::make_unique<optim::AdamW>(TensorList{p}, optim::AdamWOptions(0.01).weight_decay(0.05).amsgrad(true));
      if (kind == 2) opt = std::make_unique<optim::SGD>(TensorList{p}, optim::SGDOptions(0.01).momentum(0.9));
      Generator grads(6);
      for (int step = 0; step < 3; ++step) {
        p.set_grad(randn({300, 331}, grads));
        opt->step();
      }
      out.push_back(p.detach());
    }
    return out;
  });
}

namespace {

// A small model trained with Adam whose every step uses the pool: a product large enough to be
// split (256 x 256 x 64 multiply-adds, and as many for its weight gradient), layer norm, GELU and
// softmax on 256 rows of 256 (two grains of rows), sums over the leading and trailing axes of
// (256, 256), and a product small enough for one direct BLAS call. Returns the final parameters.
TensorList train_small_model(std::uint64_t seed, int steps) {
  Generator gen(seed);
  const Tensor x = randn({256, 64}, gen);      // x: (B, 64)
  const Tensor target = randn({256, 8}, gen);  // target: (B, 8)
  TensorList params{(randn({256, 64}, gen) * 0.1).requires_grad_(), zeros({256}).requires_grad_(),
                    ones({256}).requires_grad_(), zeros({256}).requires_grad_(),
                    (randn({8, 256}, gen) * 0.05).requires_grad_()};
  const Tensor &w1 = params[0], &b1 = params[1], &gamma = params[2], &beta = params[3], &w2 = params[4];
  optim::Adam adam(params, optim::AdamOptions(1e-2));
  for (int step = 0; step < steps; ++step) {
    adam.zero_grad();
    const Tensor h = gelu(layer_norm(linear(x, w1, b1), {256}, gamma, beta, 1e-5));  // h: (B, 256)
    const Tensor y = linear(h, w2);                                                  // y: (B, 8)
    const Tensor p = softmax(h, -1);                                                 // p: (B, 256)
    const Tensor loss =
        ((y - target) * (y - target)).mean() + 0.1 * sum(p * h, {0}).pow(2).mean() + 0.01 * mean(h * h, {1}).mean();
    loss.backward();
    adam.step();
  }
  return params;
}

bool same_bytes(const TensorList& a, const TensorList& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const Tensor x = a[i].detach().contiguous(), y = b[i].detach().contiguous();
    if (x.shape() != y.shape() || x.dtype() != y.dtype()) return false;
    if (std::memcmp(x.data_ptr<float>(), y.data_ptr<float>(), sizeof(float) * static_cast<std::size_t>(x.numel())))
      return false;
  }
  return true;
}

}  // namespace

TEST_CASE("parallel: two models trained at once on two threads end bit-identical to training them in turn") {
  // With two user threads one often finds the pool busy and runs its job's chunks itself; the
  // chunks (and so the split product's BLAS calls) must be the ones the pool would have run.
  ThreadCount t(2);
  constexpr int kSteps = 100;
  const TensorList first = train_small_model(11, kSteps);
  const TensorList second = train_small_model(12, kSteps);
  REQUIRE_FALSE(same_bytes(first, second));  // different seeds: the comparison below can fail
  for (int repetition = 0; repetition < 2; ++repetition) {
    CAPTURE(repetition);
    TensorList a, b;
    std::thread ta([&] { a = train_small_model(11, kSteps); });
    std::thread tb([&] { b = train_small_model(12, kSteps); });
    ta.join();
    tb.join();
    CHECK(same_bytes(a, first));
    CHECK(same_bytes(b, second));
  }
}

TEST_CASE("parallel: a call that finds the pool busy runs the pool's chunks itself, inside the region") {
  ThreadCount t(2);
  const std::vector<Chunk> expected = chunks_of(0, 100'000, 1000);
  REQUIRE(expected.size() == 2);
  // Thread `holder` keeps the pool busy until the other call has finished.
  std::atomic<bool> holding{false}, done{false};
  std::thread holder([&] {
    parallel_for(0, 2, 1, [&](std::int64_t lo, std::int64_t) {
      if (lo != 0) return;
      holding = true;
      while (!done) std::this_thread::yield();
    });
  });
  while (!holding) std::this_thread::yield();
  const std::thread::id caller = std::this_thread::get_id();
  std::vector<Chunk> seen;
  bool in_region = true, on_caller = true;
  parallel_for(0, 100'000, 1000, [&](std::int64_t lo, std::int64_t hi) {
    seen.push_back({lo, hi});  // one thread: no lock needed
    in_region = in_region && in_parallel_region();
    on_caller = on_caller && std::this_thread::get_id() == caller;
  });
  done = true;
  holder.join();
  CHECK_FALSE(in_parallel_region());
  REQUIRE(seen.size() == expected.size());
  for (std::size_t i = 0; i < seen.size(); ++i) CHECK((seen[i].lo == expected[i].lo && seen[i].hi == expected[i].hi));
  CHECK(in_region);
  CHECK(on_caller);

  // An exception from one chunk still lets the others run, and reaches the caller afterwards.
  done = false;
  holding = false;
  std::thread holder2([&] {
    parallel_for(0, 2, 1, [&](std::int64_t lo, std::int64_t) {
      if (lo != 0) return;
      holding = true;
      while (!done) std::this_thread::yield();
    });
  });
  while (!holding) std::this_thread::yield();
  int finished = 0;
  CHECK_THROWS_WITH_AS(parallel_for(0, 30, 10,
                                    [&](std::int64_t lo, std::int64_t) {
                                      if (lo == 0) throw ShapeError("first chunk failed");
                                      ++finished;
                                    }),
                       "first chunk failed", ShapeError);
  done = true;
  holder2.join();
  CHECK(finished == 1);
}
