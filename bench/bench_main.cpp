// tapegrad_bench: per-op timings and the workloads of docs/bench.md: the sgemm ceiling
// (S0), the spam-toy step (W1), the reversal encoder-decoder (W2), the causal LM step (W3),
// the mixture-of-experts layer (W4), one causal attention (W5), the LSTM (W6), the sparse
// embedding step (W7) and attention written with einsum against matmul (W8, tapegrad only). A measuring program, not a
// test; see docs/bench.md. bench_libtorch.cpp runs the same workloads on libtorch; bench/compare.sh runs both. Over 400
// lines: the workloads and the ops table in one program, mirroring bench_libtorch.cpp.
//
//   tapegrad_bench                         # every workload, as text
//   tapegrad_bench --workload w3 --json    # one JSON object per line
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
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench_common.h"
#include "bench/w3_model.h"
#include "tapegrad/autograd/autograd.h"
#include "tapegrad/autograd/kernels/blas.h"
#include "tapegrad/nn/nn.h"
#include "tapegrad/optim/optim.h"

using namespace tapegrad;
using bench::Clock;

namespace {

using bench::median;
using bench::ms_since;
using bench::Options;

nlohmann::json record_base(const std::string& workload, const Options& opt) {
  return {{"workload", workload},
          {"framework", "tapegrad"},
          {"threads", num_threads()},
          {"precision", opt.bf16 ? "bf16" : "float32"}};
}

// Prints a workload's result: its JSON object (with the peak resident set size) or its text.
void emit(const Options& opt, nlohmann::json row, const std::string& text) {
  row["peak_rss_mib"] = bench::peak_rss_mib();
  if (opt.json) std::cout << row.dump() << std::endl;
  else
    std::printf("%s%s (peak RSS %.1f MiB)\n\n", opt.bf16 ? "[bf16] " : "", text.c_str(),
                row["peak_rss_mib"].get<double>());
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
                     [n](Generator& g) {
                       return TensorList{randn({n, n}, g), randn({n, n}, g)};
                     },
                     [](const TensorList& x) { return matmul(x[0], x[1]); }});
  }
  cases.push_back({"matmul batched", "(32,64,64) @ (32,64,64)",
                   [](Generator& g) {
                     return TensorList{randn({32, 64, 64}, g), randn({32, 64, 64}, g)};
                   },
                   [](const TensorList& x) { return matmul(x[0], x[1]); }});
  cases.push_back({"matmul x @ W^T", "(2048,256) @ (1024,256)^T",
                   [](Generator& g) {
                     return TensorList{randn({16, 128, 256}, g), randn({1024, 256}, g)};
                   },
                   [](const TensorList& x) { return matmul(x[0], x[1].mT()); }});
  for (std::int64_t n : {64, 1024}) {
    const Shape shape{n, n};
    const std::string s = shape.str();
    cases.push_back({"add", s + " + " + s,
                     [shape](Generator& g) {
                       return TensorList{randn(shape, g), randn(shape, g)};
                     },
                     [](const TensorList& x) { return add(x[0], x[1]); }});
    cases.push_back({"mul broadcast", s + " * (" + std::to_string(n) + ")",
                     [shape, n](Generator& g) {
                       return TensorList{randn(shape, g), randn({n}, g)};
                     },
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
  cases.push_back({"sum axes {0,2}", "(64,128,256)",
                   [](Generator& g) {
                     return TensorList{randn({64, 128, 256}, g)};
                   },
                   [](const TensorList& x) {
                     return sum(x[0], {0, 2});
                   }});
  cases.push_back({"layer_norm", "(2048,256), weight+bias",
                   [](Generator& g) {
                     return TensorList{randn({2048, 256}, g), ones({256}), zeros({256})};
                   },
                   [](const TensorList& x) { return layer_norm(x[0], {256}, x[1], x[2]); }});
  cases.push_back({"embedding", "(1000,256)[2048 ids]",
                   [](Generator& g) {
                     return TensorList{randn({1000, 256}, g), randint(0, 1000, {2048}, g)};
                   },
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
      nlohmann::json row = record_base("ops", opt);
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
  const int warmup = bench::warmup_of(opt, "sgemm"), runs = bench::steps_of(opt, "sgemm");
  const double flops = 2.0 * n * n * n;
  Generator gen(0);
  const Tensor a = randn({n, n}, gen);
  const Tensor b = randn({n, n}, gen);
  NoGradGuard no_grad;

  // Through tapegrad's matmul (output allocation included, as a framework call would)
  // and, for reference, its gemm kernel (split over the thread pool) straight into a
  // preallocated buffer.
  auto time_single_calls = [&](const std::function<void()>& fn) {
    for (int i = 0; i < warmup; ++i) fn();
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
    kernels::gemm(false, false, n, n, n, 1.0f, a.data_ptr<float>(), n, b.data_ptr<float>(), n, 0.0f,
                  c.data_ptr<float>(), n);
  });
  const double gflops = flops / (matmul_ms * 1e6);
  const double raw_gflops = flops / (raw_ms * 1e6);
  nlohmann::json row = record_base("sgemm", opt);
  row["median_ms"] = matmul_ms;
  row["runs"] = runs;
  row["gflops"] = gflops;
  row["raw_sgemm_median_ms"] = raw_ms;
  row["raw_sgemm_gflops"] = raw_gflops;
  char text[256];
  std::snprintf(text, sizeof text,
                "S0 sgemm 1024x1024 @ 1024x1024 float32, median of %d:\n"
                "  tapegrad matmul  %8.3f ms  %7.1f GFLOP/s\n"
                "  kernels::gemm    %8.3f ms  %7.1f GFLOP/s  (no allocation)",
                runs, matmul_ms, gflops, raw_ms, raw_gflops);
  emit(opt, row, text);
}

// ---------------------------------------------------------------- W1 spam toy
// docs/bench.md W1: Embedding(V, 20); single-head self-attention with bias-free q, k, v
// projections; scores / sqrt(20); softmax; att @ v; mean over tokens; Linear(20, 2);
// cross-entropy; SGD lr 0.1; one sentence per step, cycling through the four.
struct SpamToy {
  static constexpr std::int64_t kDim = 20;
  std::vector<Tensor> sentences;  // each: (T) Int64 token ids
  std::vector<std::int64_t> labels;
  std::int64_t vocab_size = 0;
  Tensor embedding_weight;  // (V, 20)
  Tensor wq, wk, wv;        // (20, 20), PyTorch's Linear layout (out, in)
  Tensor head_weight;       // (2, 20)
  Tensor head_bias;         // (2)
  std::vector<Tensor> params;

  explicit SpamToy(Generator& gen) {
    const bench::SpamToyData data = bench::spam_toy_data();
    for (const auto& ids : data.sentences)
      sentences.push_back(from_vector(ids, {static_cast<std::int64_t>(ids.size())}));
    labels = data.labels;
    vocab_size = data.vocab_size;
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
    // linear(x, W, b) = x W^T + b, what nn::Linear (and torch::nn::Linear) computes.
    const Tensor x = embedding(embedding_weight, sentences[i]);                      // x: (T, 20)
    const Tensor q = linear(x, wq);                                                  // q: (T, 20)
    const Tensor k = linear(x, wk);                                                  // k: (T, 20)
    const Tensor v = linear(x, wv);                                                  // v: (T, 20)
    const Tensor scores = matmul(q, k.mT()) / std::sqrt(static_cast<double>(kDim));  // scores: (T, T)
    const Tensor att = softmax(scores, -1);                                          // att: (T, T)
    const Tensor pooled = mean(matmul(att, v), {0});                                 // pooled: (20)
    const Tensor logits = linear(pooled, head_weight, head_bias);                    // logits: (2)
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
  const int warmup = bench::warmup_of(opt, "w1"), steps = bench::steps_of(opt, "w1");
  Generator gen(0);
  SpamToy toy(gen);
  const std::size_t n = toy.sentences.size();
  std::size_t next = 0;
  for (int s = 0; s < warmup; ++s) toy.step(next++ % n);
  std::vector<double> step_ms;
  step_ms.reserve(static_cast<std::size_t>(steps));
  double last_loss = 0.0;
  const auto total_start = Clock::now();
  for (int s = 0; s < steps; ++s) {
    const auto start = Clock::now();
    last_loss = toy.step(next++ % n);
    step_ms.push_back(ms_since(start));
  }
  const double mean_us = ms_since(total_start) * 1000.0 / steps;
  const double median_ms = median(step_ms);
  // The defined figure is the mean; the tail shows how much of it is the machine's (preemption, page
  // faults) rather than the steps'.
  std::vector<double> sorted = step_ms;
  std::sort(sorted.begin(), sorted.end());
  const double p99_us = sorted[sorted.size() * 99 / 100] * 1000.0;
  const double max_us = sorted.back() * 1000.0;
  nlohmann::json row = record_base("w1", opt);
  row["median_ms"] = median_ms;
  row["runs"] = steps;
  row["us_per_step"] = mean_us;
  row["p99_us"] = p99_us;
  row["max_us"] = max_us;
  row["final_loss"] = last_loss;
  char text[256];
  std::snprintf(text, sizeof text,
                "W1 spam-toy (V=%lld): %.1f us/step (mean of %d steps after %d warm-up; median %.1f us, p99 %.1f us, "
                "max %.0f us), final loss %.6g",
                static_cast<long long>(toy.vocab_size), mean_us, steps, warmup, median_ms * 1000.0, p99_us, max_us,
                last_loss);
  emit(opt, row, text);
}

// Times `step` warmup + steps times; returns the measured steps' milliseconds.
std::vector<double> time_steps(int warmup, int steps, const std::function<void()>& step) {
  for (int i = 0; i < warmup; ++i) step();
  std::vector<double> ms;
  ms.reserve(static_cast<std::size_t>(steps));
  for (int i = 0; i < steps; ++i) {
    const auto start = Clock::now();
    step();
    ms.push_back(ms_since(start));
  }
  return ms;
}

// ---------------------------------------------------------------- W2 reversal
// nn::EncoderDecoder (learned positions, pre-norm, ReLU FFN, no dropout) trained with Adam on
// the reversal data of bench_common.h.
struct ReversalTraining {
  using D = bench::ReversalData;
  bench::ReversalData data = bench::reversal_data();
  Generator gen{0};
  nn::EncoderDecoder model{options(gen)};
  optim::Adam adam{model->parameters(), adam_options()};
  std::vector<Tensor> src, in, out;  // per batch: (32, 10), (32, 11), (32 * 11)
  Tensor test_src, test_out;         // (100, 10), (100, 11)
  bool bf16 = false;                 // forward passes under bfloat16 autocast

  static nn::EncoderDecoderOptions options(Generator& gen) {
    return nn::EncoderDecoderOptions()
        .src_vocab(D::kVocab)
        .tgt_vocab(D::kVocab)
        .max_len(D::kMaxLen)
        .encoder_layers(D::kLayers)
        .decoder_layers(D::kLayers)
        .positions(nn::PositionEncoding::Learned)
        .layer(nn::TransformerLayerOptions(D::kDModel, D::kHeads)
                   .dim_feedforward(D::kFfn)
                   .activation(nn::Activation::ReLU)
                   .dropout(0.0)
                   .norm_first(true))
        .generator(&gen);
  }
  static optim::AdamOptions adam_options() { return optim::AdamOptions(1e-3); }

  ReversalTraining() {
    const std::int64_t b = D::kBatch, t = D::kLength;
    for (std::int64_t j = 0; j < D::batches_per_epoch(); ++j) {
      auto rows = [&](const std::vector<std::int64_t>& v, std::int64_t len, const Shape& shape) {
        return from_vector(std::vector<std::int64_t>(v.begin() + j * b * len, v.begin() + (j + 1) * b * len), shape);
      };
      src.push_back(rows(data.train_src, t, {b, t}));
      in.push_back(rows(data.train_in, t + 1, {b, t + 1}));
      out.push_back(rows(data.train_out, t + 1, {b * (t + 1)}));
    }
    test_src = from_vector(data.test_src, {D::kHeldOut, t});
    test_out = from_vector(data.test_out, {D::kHeldOut, t + 1});
  }

  double step(std::int64_t s) {
    const std::size_t j = static_cast<std::size_t>(s % D::batches_per_epoch());
    adam.zero_grad();
    Tensor loss;
    {
      AutocastGuard autocast(kBFloat16, bf16);
      const Tensor logits = model(src[j], in[j]);  // (B, T + 1, V)
      loss = nn::cross_entropy(logits.reshape({-1, D::kVocab}), out[j]);
    }
    loss.backward();
    adam.step();
    return loss.item();
  }

  // Fraction of held-out sequences whose greedy decoding (11 tokens) equals the target exactly.
  double exact_match() {
    AutocastGuard autocast(kBFloat16, bf16);
    const Tensor decoded = model->greedy_decode(test_src, D::kSos, D::kEos, D::kLength + 1);  // (N, 1 + n)
    if (decoded.shape()[1] != D::kLength + 2) return 0.0;  // every row stopped early: all wrong
    const std::vector<std::int64_t> got = decoded.slice(1, 1, D::kLength + 2).to_vector<std::int64_t>();
    const std::vector<std::int64_t> want = test_out.to_vector<std::int64_t>();
    std::int64_t right = 0;
    for (std::int64_t r = 0; r < D::kHeldOut; ++r)
      right += std::equal(got.begin() + r * (D::kLength + 1), got.begin() + (r + 1) * (D::kLength + 1),
                          want.begin() + r * (D::kLength + 1));
    return static_cast<double>(right) / D::kHeldOut;
  }
};

void run_w2(const Options& opt) {
  ReversalTraining training;
  training.bf16 = opt.bf16;
  std::int64_t s = 0;
  double last = 0.0;
  const auto ms =
      time_steps(bench::warmup_of(opt, "w2"), bench::steps_of(opt, "w2"), [&] { last = training.step(s++); });
  nlohmann::json row = record_base("w2", opt);
  row["median_ms"] = median(ms);
  row["mean_ms"] = bench::mean(ms);
  row["runs"] = ms.size();
  row["final_loss"] = last;
  emit(opt, row, "W2 reversal: " + std::to_string(median(ms)) + " ms/step median, final loss " + std::to_string(last));
}

void run_w2conv(const Options& opt) {
  ReversalTraining training;
  training.bf16 = opt.bf16;
  const bench::Convergence run = bench::train_until_solved(training, bench::steps_of(opt, "w2conv"));
  const std::int64_t solved_at = run.solved_at;
  const double accuracy = run.exact_match, seconds = run.seconds;
  nlohmann::json row = record_base("w2conv", opt);
  row["solved_at_step"] = solved_at >= 0 ? nlohmann::json(solved_at) : nlohmann::json(nullptr);
  row["exact_match"] = accuracy;
  row["seconds"] = seconds;
  row["median_ms"] = nullptr;
  row["runs"] = 1;
  emit(opt, row,
       "W2 reversal: 100% held-out exact match at step " + std::to_string(solved_at) + " after " +
           std::to_string(seconds) + " s (exact match " + std::to_string(accuracy) + ")");
}

// ---------------------------------------------------------------- W3 causal LM
void run_w3(const Options& opt) {
  using C = bench::LmConfig;
  nn::LanguageModel model = bench::w3_model();
  optim::AdamW adamw(model->parameters(), optim::AdamWOptions(3e-4));  // weight decay 0.01, as torch's default
  const Tensor tokens = from_vector(bench::lm_tokens(), {C::kBatch, C::kLength + 1});
  const Tensor inputs = tokens.slice(1, 0, C::kLength).contiguous();        // (B, T)
  const Tensor targets = tokens.slice(1, 1, C::kLength + 1).reshape({-1});  // (B T)
  double last = 0.0;
  const auto ms = time_steps(bench::warmup_of(opt, "w3"), bench::steps_of(opt, "w3"), [&] {
    adamw.zero_grad();
    Tensor loss;
    {
      AutocastGuard autocast(kBFloat16, opt.bf16);
      loss = nn::cross_entropy(model(inputs).reshape({-1, C::kVocab}), targets);
    }
    loss.backward();
    adamw.step();
    last = loss.item();
  });
  const double median_ms = median(ms);
  nlohmann::json row = record_base("w3", opt);
  row["median_ms"] = median_ms;
  row["runs"] = ms.size();
  row["tokens_per_s"] = C::kBatch * C::kLength / (median_ms / 1000.0);
  row["step_gflop"] = bench::lm_step_flops() / 1e9;
  row["gflops"] = bench::lm_step_flops() / (median_ms * 1e6);
  row["final_loss"] = last;
  emit(opt, row,
       "W3 lm: " + std::to_string(median_ms) + " ms/step, " + std::to_string(row["gflops"].get<double>()) + " GFLOP/s");
}

// ---------------------------------------------------------------- W4 MoE
void run_w4(const Options& opt) {
  using C = bench::MoeConfig;
  manual_seed(0);
  nn::MixtureOfExperts moe{nn::MoEOptions(C::kDim)
                               .num_experts(C::kExperts)
                               .top_k(C::kTopK)
                               .hidden(C::kHidden)
                               .weighting(nn::RouterWeighting::SoftmaxTopK)
                               .activation(nn::Activation::ReLU)
                               .router_bias(false)};
  const Tensor x = from_vector(bench::moe_input(), {C::kTokens, C::kDim});
  double last = 0.0;
  const auto ms = time_steps(bench::warmup_of(opt, "w4"), bench::steps_of(opt, "w4"), [&] {
    moe->zero_grad(/*set_to_none=*/true);
    Tensor loss;
    {
      AutocastGuard autocast(kBFloat16, opt.bf16);
      const nn::MoEOutput r = moe(x);
      loss = (r.output * r.output).mean() + 0.01 * r.load_balancing_loss;
    }
    loss.backward();
    last = loss.item();
  });
  nlohmann::json row = record_base("w4", opt);
  row["median_ms"] = median(ms);
  row["runs"] = ms.size();
  row["final_loss"] = last;
  emit(opt, row, "W4 moe: " + std::to_string(median(ms)) + " ms fwd+bwd");
}

// ---------------------------------------------------------------- W5 attention
// The fused kernel (scaled_dot_product_attention without weights), or with --unfused the
// unfused composition (weights asked for, so the scores are materialised as libtorch 1.13 does).
void run_w5(const Options& opt) {
  using C = bench::AttentionConfig;
  const std::int64_t t = opt.seq;
  const Shape shape{C::kBatch, C::kHeads, t, C::kHeadDim};
  Tensor q = from_vector(bench::attention_input(t, 1), shape).requires_grad_();
  Tensor k = from_vector(bench::attention_input(t, 2), shape).requires_grad_();
  Tensor v = from_vector(bench::attention_input(t, 3), shape).requires_grad_();
  const Tensor w = from_vector(bench::attention_input(t, 4), shape);
  const double rss_before = bench::current_rss_mib();
  double last = 0.0;
  const auto options = nn::AttentionForwardOptions().is_causal(true).need_weights(opt.unfused);
  const auto ms = time_steps(bench::warmup_of(opt, "w5"), bench::steps_of(opt, "w5"), [&] {
    for (const Tensor* p : {&q, &k, &v}) p->zero_grad(/*set_to_none=*/true);
    const Tensor loss = (nn::scaled_dot_product_attention(q, k, v, options).output * w).sum();
    loss.backward();
    last = loss.item();
  });
  nlohmann::json row = record_base("w5", opt);
  row["variant"] = opt.unfused ? "unfused" : "fused";
  row["seq"] = t;
  row["median_ms"] = median(ms);
  row["runs"] = ms.size();
  row["final_loss"] = last;
  row["attention_peak_mib"] = bench::peak_rss_mib() - rss_before;
  emit(opt, row,
       "W5 attention T=" + std::to_string(t) + (opt.unfused ? " (unfused): " : " (fused): ") +
           std::to_string(median(ms)) + " ms fwd+bwd, peak +" +
           std::to_string(row["attention_peak_mib"].get<double>()) + " MiB");
}

// ---------------------------------------------------------------- W6 LSTM
void run_w6(const Options& opt) {
  using C = bench::LstmConfig;
  nn::LSTM lstm{nn::RecurrentOptions(C::kInput, C::kHidden).num_layers(C::kLayers)};
  {
    NoGradGuard no_grad;
    std::size_t i = 0;
    for (const Tensor& p : lstm->parameters()) {
      p.copy_(from_vector(bench::lstm_parameter(i, p.numel()), p.shape()));
      ++i;
    }
  }
  const Tensor x = from_vector(bench::lstm_input(), {C::kLength, C::kBatch, C::kInput});
  const Tensor w = from_vector(bench::lstm_loss_weights(), {C::kLength, C::kBatch, C::kHidden});
  double last = 0.0;
  const auto ms = time_steps(bench::warmup_of(opt, "w6"), bench::steps_of(opt, "w6"), [&] {
    lstm->zero_grad(/*set_to_none=*/true);
    const Tensor loss = (lstm(x).output * w).sum();
    loss.backward();
    last = loss.item();
  });
  nlohmann::json row = record_base("w6", opt);
  row["median_ms"] = median(ms);
  row["runs"] = ms.size();
  row["final_loss"] = last;
  emit(opt, row, "W6 lstm: " + std::to_string(median(ms)) + " ms fwd+bwd, loss " + std::to_string(last));
}

// ---------------------------------------------------------------- W9 CNN training step
void run_w9(const Options& opt) {
  namespace F = nn::functional;
  using C = bench::CnnConfig;
  TensorList params;
  for (std::size_t i = 0; i < C::shapes().size(); ++i)
    params.push_back(from_vector(bench::cnn_parameter(i), Shape(C::shapes()[i])).requires_grad_());
  optim::SGD sgd(params, optim::SGDOptions(0.01));
  const Tensor x = from_vector(bench::cnn_input(), {C::kBatch, 1, C::kImage, C::kImage});
  const Tensor y = from_vector(bench::cnn_labels(), {C::kBatch});
  double last = 0.0;
  const auto ms = time_steps(bench::warmup_of(opt, "w9"), bench::steps_of(opt, "w9"), [&] {
    Tensor h = F::max_pool2d(relu(F::conv2d(x, params[0], params[1], {1}, {1})), {2});
    h = F::max_pool2d(relu(F::conv2d(h, params[2], params[3], {1}, {1})), {2});
    h = relu(F::linear(h.flatten(1), params[4], params[5]));
    const Tensor loss = nn::cross_entropy(F::linear(h, params[6], params[7]), y);
    loss.backward();
    sgd.step();
    sgd.zero_grad(/*set_to_none=*/true);
    last = loss.item();
  });
  nlohmann::json row = record_base("w9", opt);
  row["median_ms"] = median(ms);
  row["runs"] = ms.size();
  row["final_loss"] = last;
  emit(opt, row, "W9 cnn: " + std::to_string(median(ms)) + " ms/step, loss " + std::to_string(last));
}

// ---------------------------------------------------------------- W7 sparse embedding step
// One variant's table and optimiser: nn::Embedding with row-sparse gradients stepped by SGD (only the
// touched rows) or SparseAdam, or with a dense (V, D) gradient stepped by SGD.
struct EmbeddingStep {
  nn::Embedding emb;
  std::unique_ptr<optim::Optimizer> opt;

  EmbeddingStep(std::int64_t vocab, const bench::SparseEmbeddingVariant& v)
      : emb(nn::EmbeddingOptions(vocab, bench::SparseEmbeddingConfig::kDim).sparse(v.sparse)) {
    if (v.adam) opt = std::make_unique<optim::SparseAdam>(emb->parameters(), optim::SparseAdamOptions(1e-3));
    else opt = std::make_unique<optim::SGD>(emb->parameters(), optim::SGDOptions(0.1));
  }

  void step(const Tensor& ids, const Tensor& c) {
    const Tensor loss = (emb(ids) * c).sum();  // emb(ids): (N, D)
    loss.backward();
    opt->step();
    opt->zero_grad();
  }
};

void run_w7(const Options& opt) {
  using C = bench::SparseEmbeddingConfig;
  const auto& variants = bench::sparse_embedding_variants();
  const Tensor c = from_vector(bench::sparse_embedding_loss_weights(), {C::kBatch, C::kDim});  // (N, D)
  for (const std::int64_t vocab : C::vocabs()) {
    const Tensor pool = from_vector(bench::sparse_embedding_ids(vocab), {C::kBatches, C::kBatch});  // (16, N)
    std::vector<Tensor> batches;                                                                    // each: (N)
    for (std::int64_t b = 0; b < C::kBatches; ++b) batches.push_back(pool.select(0, b).contiguous());
    std::vector<std::unique_ptr<EmbeddingStep>> setups;
    std::vector<std::function<void()>> steps;
    for (const auto& v : variants) {
      setups.push_back(std::make_unique<EmbeddingStep>(vocab, v));
      steps.push_back([&batches, &c, s = setups.back().get(), next = std::size_t{0}]() mutable {
        s->step(batches[next++ % batches.size()], c);
      });
    }
    const auto ms = bench::time_alternating(steps, bench::warmup_of(opt, "w7"), bench::steps_of(opt, "w7"), C::kRounds);
    for (std::size_t i = 0; i < variants.size(); ++i) {
      nlohmann::json row = record_base("w7", opt);
      row["variant"] = variants[i].name;
      row["vocab"] = vocab;
      row["median_ms"] = median(ms[i]);
      row["ms_per_step"] = median(ms[i]);
      row["runs"] = ms[i].size();
      char text[160];
      std::snprintf(text, sizeof text, "W7 sparse embedding V=%lld %-11s: %8.3f ms/step (median of %zu)",
                    static_cast<long long>(vocab), variants[i].name, median(ms[i]), ms[i].size());
      emit(opt, row, text);
    }
  }
}

// ---------------------------------------------------------------- W8 einsum attention
// The same attention written twice and timed alternately: with einsum ("bhqd,bhkd->bhqk" and
// "bhqk,bhkd->bhqd") and with matmul, on W5's inputs at --seq T, without the mask.
void run_w8(const Options& opt) {
  using C = bench::AttentionConfig;
  const std::int64_t t = opt.seq;
  const Shape shape{C::kBatch, C::kHeads, t, C::kHeadDim};
  const Tensor q = from_vector(bench::attention_input(t, 1), shape).requires_grad_();
  const Tensor k = from_vector(bench::attention_input(t, 2), shape).requires_grad_();
  const Tensor v = from_vector(bench::attention_input(t, 3), shape).requires_grad_();
  const Tensor w = from_vector(bench::attention_input(t, 4), shape);
  const double scale = 1.0 / std::sqrt(static_cast<double>(C::kHeadDim));
  const auto step = [&](bool with_einsum) {
    for (const Tensor* p : {&q, &k, &v}) p->zero_grad(/*set_to_none=*/true);
    const Tensor scores = with_einsum ? einsum("bhqd,bhkd->bhqk", {q, k}) : matmul(q, k.mT());  // (B, H, T, T)
    const Tensor weights = softmax(scores * scale, -1);
    const Tensor out = with_einsum ? einsum("bhqk,bhkd->bhqd", {weights, v}) : matmul(weights, v);  // (B, H, T, D)
    (out * w).sum().backward();
  };
  const auto ms = bench::time_alternating({[&] { step(true); }, [&] { step(false); }}, bench::warmup_of(opt, "w8"),
                                          bench::steps_of(opt, "w8"), 10);
  for (const bool with_einsum : {true, false}) {
    const std::vector<double>& mine = ms[with_einsum ? 0 : 1];
    nlohmann::json row = record_base("w8", opt);
    row["variant"] = with_einsum ? "einsum" : "matmul";
    row["seq"] = t;
    row["median_ms"] = median(mine);
    row["runs"] = mine.size();
    emit(opt, row,
         "W8 attention T=" + std::to_string(t) + " written with " + (with_einsum ? "einsum" : "matmul") + ": " +
             std::to_string(median(mine)) + " ms fwd+bwd");
  }
  if (!opt.json) std::printf("W8 einsum / matmul: %.3f\n\n", median(ms[0]) / median(ms[1]));
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = bench::parse_options(argc, argv, "tapegrad_bench", {"ops", "w8"});
  if (opt.threads > 0) set_num_threads(opt.threads);
  if (!opt.json)
    std::printf("tapegrad_bench: OpenBLAS %s kernels, %d thread(s), bfloat16 instructions: %s\n\n",
                kernels::blas_core_name().c_str(), num_threads(), kernels::cpu_has_bf16_instructions() ? "yes" : "no");
  try {
    const std::string& w = opt.workload;
    if (w == "ops" || w == "all") run_ops(opt);
    if (w == "sgemm" || w == "all") run_sgemm(opt);
    if (w == "w1" || w == "all") run_w1(opt);
    if (w == "w2" || w == "all") run_w2(opt);
    if (w == "w2conv") run_w2conv(opt);
    if (w == "w3" || w == "all") run_w3(opt);
    if (w == "w4" || w == "all") run_w4(opt);
    if (w == "w5") run_w5(opt);
    if (w == "w6" || w == "all") run_w6(opt);
    if (w == "w7") run_w7(opt);
    if (w == "w8") run_w8(opt);
    if (w == "w9" || w == "all") run_w9(opt);
  } catch (const std::exception& e) {
    std::cerr << "tapegrad_bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
