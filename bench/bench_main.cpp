// tapegrad_bench: per-op timings, the sgemm ceiling (S0) and the spam-toy training step (W1)
// of shared/workloads.md. A measuring program, not a test; see docs/bench.md.
//
//   tapegrad_bench                         # every workload, as tables
//   tapegrad_bench --workload w1 --json    # one JSON object per line
//   tapegrad_bench --workload w1 --threads 1
//
// Every figure is a median over repeated runs (W1 also gives the mean, its defined figure).
// Ops that are not implemented yet print "n/a".

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "autograd/autograd.h"
#include "autograd/kernels/blas.h"

using namespace tapegrad;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  std::string workload = "all";  // ops, sgemm, w1 or all
  bool json = false;
  int threads = 0;  // 0: leave OpenBLAS's default
  int runs = 15;    // timed runs per op row
  int w1_warmup = 1000;
  int w1_steps = 20000;
};

[[noreturn]] void usage(const std::string& problem) {
  std::ostream& out = problem.empty() ? std::cout : std::cerr;
  if (!problem.empty()) out << "tapegrad_bench: " << problem << "\n";
  out << "usage: tapegrad_bench [--workload ops|sgemm|w1|all] [--json] [--threads N] [--runs N]\n"
      << "                      [--w1-warmup N] [--w1-steps N]\n";
  std::exit(problem.empty() ? 0 : 2);
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(arg + " needs a value");
      return argv[++i];
    };
    auto positive = [&]() {
      const std::string v = value();
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (*end != '\0' || n < 1) usage(arg + " needs a positive integer, got '" + v + "'");
      return static_cast<int>(n);
    };
    if (arg == "--workload") o.workload = value();
    else if (arg == "--json") o.json = true;
    else if (arg == "--threads") o.threads = positive();
    else if (arg == "--runs") o.runs = positive();
    else if (arg == "--w1-warmup") o.w1_warmup = positive();
    else if (arg == "--w1-steps") o.w1_steps = positive();
    else if (arg == "--help" || arg == "-h") usage("");
    else usage("unknown argument '" + arg + "'");
  }
  if (o.workload != "ops" && o.workload != "sgemm" && o.workload != "w1" && o.workload != "all")
    usage("unknown workload '" + o.workload + "'");
  return o;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

nlohmann::json record_base(const std::string& workload) {
  return {{"workload", workload}, {"framework", "tapegrad"}, {"threads", kernels::blas_num_threads()}};
}

// Median milliseconds per call of fn over `runs` runs. Each run repeats fn enough times to last
// about a millisecond, so microsecond ops are not swamped by the clock.
struct Timing {
  double median_ms = 0.0;
  int runs = 0;
};

Timing time_calls(const std::function<void()>& fn, int runs) {
  fn();  // warm-up: first-touch page faults, the buffer pool's first fill
  fn();
  std::int64_t reps = 1;
  for (;;) {
    const auto start = Clock::now();
    for (std::int64_t r = 0; r < reps; ++r) fn();
    if (ms_since(start) >= 1.0 || reps >= (1 << 20)) break;
    reps *= 2;
  }
  std::vector<double> per_call;
  for (int run = 0; run < runs; ++run) {
    const auto start = Clock::now();
    for (std::int64_t r = 0; r < reps; ++r) fn();
    per_call.push_back(ms_since(start) / static_cast<double>(reps));
  }
  return {median(per_call), runs};
}

bool not_implemented(const Error& e) { return std::string(e.what()).find("not implemented yet") != std::string::npos; }

// ---------------------------------------------------------------- ops
struct OpCase {
  std::string name;
  std::string shape;
  std::function<TensorList(Generator&)> inputs;  // float32 values (and any index tensors)
  std::function<Tensor(const TensorList&)> f;
};

std::vector<OpCase> op_cases() {
  std::vector<OpCase> cases;
  for (std::int64_t n : {64, 256, 1024}) {
    const std::string s = std::to_string(n);
    cases.push_back({"matmul", "(" + s + "," + s + ") @ (" + s + "," + s + ")",
                     [n](Generator& g) { return TensorList{randn({n, n}, g), randn({n, n}, g)}; },
                     [](const TensorList& x) { return matmul(x[0], x[1]); }});
  }
  cases.push_back({"matmul batched", "(32,64,64) @ (32,64,64)",
                   [](Generator& g) { return TensorList{randn({32, 64, 64}, g), randn({32, 64, 64}, g)}; },
                   [](const TensorList& x) { return matmul(x[0], x[1]); }});
  cases.push_back({"matmul x @ W^T", "(2048,256) @ (1024,256)^T",
                   [](Generator& g) { return TensorList{randn({16, 128, 256}, g), randn({1024, 256}, g)}; },
                   [](const TensorList& x) { return matmul(x[0], x[1].mT()); }});
  for (std::int64_t n : {64, 1024}) {
    const Shape shape{n, n};
    const std::string s = shape.str();
    cases.push_back({"add", s + " + " + s,
                     [shape](Generator& g) { return TensorList{randn(shape, g), randn(shape, g)}; },
                     [](const TensorList& x) { return add(x[0], x[1]); }});
    cases.push_back({"mul broadcast", s + " * (" + std::to_string(n) + ")",
                     [shape, n](Generator& g) { return TensorList{randn(shape, g), randn({n}, g)}; },
                     [](const TensorList& x) { return mul(x[0], x[1]); }});
    cases.push_back({"exp", s, [shape](Generator& g) { return TensorList{randn(shape, g)}; },
                     [](const TensorList& x) { return exp(x[0]); }});
    cases.push_back({"sum axis 0", s, [shape](Generator& g) { return TensorList{randn(shape, g)}; },
                     [](const TensorList& x) { return sum(x[0], {0}); }});
    cases.push_back({"sum axis 1", s, [shape](Generator& g) { return TensorList{randn(shape, g)}; },
                     [](const TensorList& x) { return sum(x[0], {1}); }});
    cases.push_back({"softmax axis -1", s, [shape](Generator& g) { return TensorList{randn(shape, g)}; },
                     [](const TensorList& x) { return softmax(x[0], -1); }});
  }
  cases.push_back({"sum axes {0,2}", "(64,128,256)", [](Generator& g) { return TensorList{randn({64, 128, 256}, g)}; },
                   [](const TensorList& x) { return sum(x[0], {0, 2}); }});
  cases.push_back({"layer_norm", "(2048,256), weight+bias",
                   [](Generator& g) { return TensorList{randn({2048, 256}, g), ones({256}), zeros({256})}; },
                   [](const TensorList& x) { return layer_norm(x[0], {256}, x[1], x[2]); }});
  cases.push_back({"embedding", "(1000,256)[2048 ids]",
                   [](Generator& g) { return TensorList{randn({1000, 256}, g), randint(0, 1000, {2048}, g)}; },
                   [](const TensorList& x) { return embedding(x[0], x[1]); }});
  return cases;
}

void run_ops(const Options& opt) {
  if (!opt.json)
    std::printf("%-16s %-28s %12s %14s   (median ms of %d runs)\n", "op", "shapes", "forward", "fwd+bwd", opt.runs);
  Generator gen(0);
  for (const OpCase& c : op_cases()) {
    const TensorList inputs = c.inputs(gen);
    std::map<std::string, std::string> cells;  // pass -> printed value
    for (const char* pass : {"forward", "forward+backward"}) {
      const bool backward = std::string(pass) == "forward+backward";
      nlohmann::json row = record_base("ops");
      row["name"] = c.name;
      row["shape"] = c.shape;
      row["pass"] = pass;
      try {
        TensorList x = inputs;
        Timing t;
        if (!backward) {
          NoGradGuard no_grad;
          t = time_calls([&] { c.f(x); }, opt.runs);
        } else {
          for (Tensor& xi : x) {
            if (!xi.is_floating_point()) continue;
            xi = xi.detach();
            xi.requires_grad_();
          }
          const Tensor seed = ones_like(c.f(x).detach());
          t = time_calls(
              [&] {
                for (const Tensor& xi : x)
                  if (xi.requires_grad()) xi.zero_grad(/*set_to_none=*/true);
                c.f(x).backward(seed);
              },
              opt.runs);
        }
        row["median_ms"] = t.median_ms;
        row["runs"] = t.runs;
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.4f", t.median_ms);
        cells[pass] = buf;
      } catch (const Error& e) {
        if (!not_implemented(e)) throw;
        row["median_ms"] = nullptr;
        row["runs"] = 0;
        row["status"] = "not implemented";
        cells[pass] = "n/a";
      }
      if (opt.json) std::cout << row.dump() << "\n";
    }
    if (!opt.json)
      std::printf("%-16s %-28s %12s %14s\n", c.name.c_str(), c.shape.c_str(), cells["forward"].c_str(),
                  cells["forward+backward"].c_str());
  }
}

// ---------------------------------------------------------------- S0 sgemm
void run_sgemm(const Options& opt) {
  constexpr std::int64_t n = 1024;
  constexpr int runs = 20;
  const double flops = 2.0 * n * n * n;
  Generator gen(0);
  const Tensor a = randn({n, n}, gen);
  const Tensor b = randn({n, n}, gen);
  NoGradGuard no_grad;

  // Through tapegrad's matmul (output allocation included, as a framework call would)
  // and, for reference, gemm straight into a preallocated buffer.
  auto time_single_calls = [&](const std::function<void()>& fn) {
    for (int i = 0; i < 3; ++i) fn();
    std::vector<double> ms;
    for (int i = 0; i < runs; ++i) {
      const auto start = Clock::now();
      fn();
      ms.push_back(ms_since(start));
    }
    return median(ms);
  };
  const double matmul_ms = time_single_calls([&] { matmul(a, b); });
  Tensor c = empty({n, n});
  const double raw_ms = time_single_calls([&] {
    kernels::gemm_blas(false, false, n, n, n, 1.0f, a.data_ptr<float>(), n, b.data_ptr<float>(), n, 0.0f,
                       c.data_ptr<float>(), n);
  });
  const double gflops = flops / (matmul_ms * 1e6);
  const double raw_gflops = flops / (raw_ms * 1e6);
  if (opt.json) {
    nlohmann::json row = record_base("sgemm");
    row["median_ms"] = matmul_ms;
    row["runs"] = runs;
    row["gflops"] = gflops;
    row["raw_sgemm_median_ms"] = raw_ms;
    row["raw_sgemm_gflops"] = raw_gflops;
    std::cout << row.dump() << "\n";
  } else {
    std::printf("S0 sgemm 1024x1024 @ 1024x1024 float32, median of %d:\n", runs);
    std::printf("  tapegrad matmul  %8.3f ms  %7.1f GFLOP/s\n", matmul_ms, gflops);
    std::printf("  cblas_sgemm      %8.3f ms  %7.1f GFLOP/s  (no allocation)\n", raw_ms, raw_gflops);
  }
}

// ---------------------------------------------------------------- W1 spam toy
// shared/workloads.md W1: Embedding(V, 20); single-head self-attention with bias-free q, k, v
// projections; scores / sqrt(20); softmax; att @ v; mean over tokens; Linear(20, 2);
// cross-entropy; SGD lr 0.1; one sentence per step, cycling through the four.
struct SpamToy {
  static constexpr std::int64_t kDim = 20;
  std::vector<Tensor> sentences;  // each: (T) Int64 token ids
  std::vector<std::int64_t> labels;
  std::int64_t vocab_size = 0;
  Tensor embedding_weight;     // (V, 20)
  Tensor wq, wk, wv;           // (20, 20), PyTorch's Linear layout (out, in)
  Tensor head_weight;          // (2, 20)
  Tensor head_bias;            // (2)
  std::vector<Tensor> params;

  explicit SpamToy(Generator& gen) {
    const std::vector<std::pair<std::string, std::int64_t>> data = {
        {"you want a billion dollars", 1},
        {"click here for midterm answers", 1},
        {"send me your bank account info", 1},
        {"read important cs685 news", 0},
    };
    std::map<std::string, std::int64_t> vocab;  // word -> id, in order of first appearance
    for (const auto& [text, label] : data) {
      std::vector<std::int64_t> ids;
      std::size_t start = 0;
      while (start < text.size()) {
        std::size_t end = text.find(' ', start);
        if (end == std::string::npos) end = text.size();
        const std::string word = text.substr(start, end - start);
        auto it = vocab.find(word);
        if (it == vocab.end()) it = vocab.emplace(word, static_cast<std::int64_t>(vocab.size())).first;
        ids.push_back(it->second);
        start = end + 1;
      }
      sentences.push_back(from_vector(ids, {static_cast<std::int64_t>(ids.size())}));
      labels.push_back(label);
    }
    vocab_size = static_cast<std::int64_t>(vocab.size());
    // PyTorch's initialisation: Embedding N(0, 1); Linear U(-1/sqrt(in), 1/sqrt(in)).
    const double bound = 1.0 / std::sqrt(static_cast<double>(kDim));
    embedding_weight = randn({vocab_size, kDim}, gen);
    wq = uniform({kDim, kDim}, -bound, bound, gen);
    wk = uniform({kDim, kDim}, -bound, bound, gen);
    wv = uniform({kDim, kDim}, -bound, bound, gen);
    head_weight = uniform({2, kDim}, -bound, bound, gen);
    head_bias = uniform({2}, -bound, bound, gen);
    params = {embedding_weight, wq, wk, wv, head_weight, head_bias};
    for (const Tensor& p : params) p.requires_grad_();
  }

  // Cross-entropy of one sentence: -log_softmax(logits)[label].
  Tensor loss(std::size_t i) const {
    const Tensor x = embedding(embedding_weight, sentences[i]);  // x: (T, 20)
    const Tensor q = matmul(x, wq.mT());                           // q: (T, 20)
    const Tensor k = matmul(x, wk.mT());                           // k: (T, 20)
    const Tensor v = matmul(x, wv.mT());                           // v: (T, 20)
    const Tensor scores = matmul(q, k.mT()) / std::sqrt(static_cast<double>(kDim));  // scores: (T, T)
    const Tensor att = softmax(scores, -1);                        // att: (T, T)
    const Tensor pooled = mean(matmul(att, v), {0});               // pooled: (20)
    const Tensor logits = matmul(pooled, head_weight.mT()) + head_bias;  // logits: (2)
    return -log_softmax(logits, -1).select(0, labels[i]);
  }

  // zero_grad + forward + backward + SGD step; returns the loss.
  double step(std::size_t i) {
    for (const Tensor& p : params) p.zero_grad();
    const Tensor l = loss(i);
    l.backward();
    NoGradGuard no_grad;
    for (const Tensor& p : params) p.add_(p.grad(), -0.1);
    return l.item();
  }
};

void run_w1(const Options& opt) {
  nlohmann::json row = record_base("w1");
  try {
    Generator gen(0);
    SpamToy toy(gen);
    const std::size_t n = toy.sentences.size();
    std::size_t next = 0;
    for (int s = 0; s < opt.w1_warmup; ++s) toy.step(next++ % n);
    std::vector<double> step_ms;
    step_ms.reserve(opt.w1_steps);
    double last_loss = 0.0;
    const auto total_start = Clock::now();
    for (int s = 0; s < opt.w1_steps; ++s) {
      const auto start = Clock::now();
      last_loss = toy.step(next++ % n);
      step_ms.push_back(ms_since(start));
    }
    const double mean_us = ms_since(total_start) * 1000.0 / opt.w1_steps;
    const double median_ms = median(step_ms);
    row["median_ms"] = median_ms;
    row["runs"] = opt.w1_steps;
    row["us_per_step"] = mean_us;
    row["final_loss"] = last_loss;
    if (opt.json) {
      std::cout << row.dump() << "\n";
    } else {
      std::printf("W1 spam-toy (V=%lld): %.1f us/step (mean of %d steps after %d warm-up; median %.1f us), "
                  "final loss %.6g\n",
                  static_cast<long long>(toy.vocab_size), mean_us, opt.w1_steps, opt.w1_warmup, median_ms * 1000.0,
                  last_loss);
    }
  } catch (const Error& e) {
    if (!not_implemented(e)) throw;
    row["median_ms"] = nullptr;
    row["runs"] = 0;
    row["status"] = std::string("not implemented: ") + e.what();
    if (opt.json) std::cout << row.dump() << "\n";
    else std::printf("W1 spam-toy: n/a (%s)\n", e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse_options(argc, argv);
  if (opt.threads > 0) kernels::set_blas_num_threads(opt.threads);
  if (!opt.json)
    std::printf("tapegrad_bench: OpenBLAS %s kernels, %d thread(s)\n\n", kernels::blas_core_name().c_str(),
                kernels::blas_num_threads());
  try {
    if (opt.workload == "ops" || opt.workload == "all") run_ops(opt);
    if (opt.workload == "all" && !opt.json) std::printf("\n");
    if (opt.workload == "sgemm" || opt.workload == "all") run_sgemm(opt);
    if (opt.workload == "all" && !opt.json) std::printf("\n");
    if (opt.workload == "w1" || opt.workload == "all") run_w1(opt);
  } catch (const std::exception& e) {
    std::cerr << "tapegrad_bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
