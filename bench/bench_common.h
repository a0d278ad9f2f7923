#pragma once
// What the tapegrad and libtorch benchmark programs share: the command line, the workloads'
// data (generated here, outside either framework, so both train on the same tokens), the
// FLOP counts, medians and the peak resident set size. The workloads are defined in
// docs/bench.md.

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace bench {

using Clock = std::chrono::steady_clock;

inline double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// W2's convergence run: steps `training` (training.step(s), s from 0) until greedy decoding gets
// every held-out string right (training.exact_match() == 1, checked every 100 steps and at the
// last), at most max_steps steps.
struct Convergence {
  std::int64_t solved_at = -1;  // the step count at the first perfect evaluation; -1: never
  double exact_match = 0.0;     // at the last evaluation
  double seconds = 0.0;         // wall time of the whole run
};

template <class Training>
Convergence train_until_solved(Training& training, int max_steps) {
  Convergence out;
  const auto start = Clock::now();
  for (int s = 1; s <= max_steps; ++s) {
    training.step(s - 1);
    if (s % 100 == 0 || s == max_steps) {
      out.exact_match = training.exact_match();
      if (out.exact_match == 1.0) {
        out.solved_at = s;
        break;
      }
    }
  }
  out.seconds = ms_since(start) / 1000.0;
  return out;
}

inline double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

inline double mean(const std::vector<double>& values) {
  double total = 0.0;
  for (double v : values) total += v;
  return values.empty() ? 0.0 : total / static_cast<double>(values.size());
}

// The process's peak resident set size so far, in MiB (Linux reports ru_maxrss in KiB).
inline double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

// ---------------------------------------------------------------- command line
struct Options {
  std::string workload = "all";
  bool json = false;
  int threads = 0;       // 0: the framework's default
  int runs = 15;         // timed runs per op row (tapegrad's ops table only)
  int warmup = -1;       // -1: the workload's defined count
  int steps = -1;        // -1: the workload's defined count
  int seq = 2048;        // W5's sequence length T
  bool unfused = false;  // W5 on tapegrad: the unfused attention (weights materialised) instead of the fused kernel
  bool bf16 = false;     // --precision bf16: W2-W4's forward passes under the framework's bfloat16 autocast
};

// The workloads both programs run, and their defined warm-up and measured counts.
struct WorkloadSpec {
  const char* name;
  int warmup;
  int steps;
};
inline const std::vector<WorkloadSpec>& workload_specs() {
  static const std::vector<WorkloadSpec> specs = {
      {"sgemm", 3, 20},     // S0
      {"w1", 1000, 20000},  // spam toy
      {"w2", 20, 300},      // reversal, step time
      {"w2conv", 0, 3000},  // reversal, steps to 100% held-out exact match (evaluated every 100)
      {"w3", 3, 30},        // causal LM step
      {"w4", 3, 30},        // MoE forward + backward
      {"w5", 1, 5},         // one causal attention, forward + backward, at --seq T
      {"w6", 3, 30},        // 2-layer LSTM forward + backward
      {"w7", 3, 30},        // sparse embedding step, per vocabulary and variant (alternating)
      {"w8", 3, 40},        // attention with einsum and with matmul (alternating), at --seq T
      {"w9", 3, 30},        // small CNN training step
  };
  return specs;
}

inline int warmup_of(const Options& o, const std::string& workload) {
  if (o.warmup >= 0) return o.warmup;
  for (const auto& s : workload_specs())
    if (workload == s.name) return s.warmup;
  return 0;
}
inline int steps_of(const Options& o, const std::string& workload) {
  if (o.steps > 0) return o.steps;
  for (const auto& s : workload_specs())
    if (workload == s.name) return s.steps;
  return 1;
}

[[noreturn]] inline void usage(const char* program, const std::string& extra_workloads, const std::string& problem) {
  std::ostream& out = problem.empty() ? std::cout : std::cerr;
  if (!problem.empty()) out << program << ": " << problem << "\n";
  out << "usage: " << program << " [--workload " << extra_workloads
      << "sgemm|w1|w2|w2conv|w3|w4|w5|w6|w7|w9|all] [--json] [--threads N]\n"
      << "       [--warmup N] [--steps N] [--runs N] [--seq T] [--unfused] [--precision float32|bf16]\n"
      << "  --precision bf16 runs W2-W4's forward passes under bfloat16 autocast (backward and step outside).\n"
      << "  --warmup/--steps override the workload's defined counts (for quick checks only).\n"
      << "  'all' runs every workload except w2conv, w5 (which runs one --seq per process, for its memory)\n"
      << "  and w7 (tables up to 1e6 x 100, about 25 s).\n";
  std::exit(problem.empty() ? 0 : 2);
}

inline Options parse_options(int argc, char** argv, const char* program, const std::vector<std::string>& extra) {
  Options o;
  std::string extra_list;
  for (const auto& e : extra) extra_list += e + "|";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(program, extra_list, arg + " needs a value");
      return argv[++i];
    };
    auto count = [&](long least) {
      const std::string v = value();
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < least || n > 100000000)
        usage(program, extra_list, arg + " needs an integer >= " + std::to_string(least) + ", got '" + v + "'");
      return static_cast<int>(n);
    };
    if (arg == "--workload") o.workload = value();
    else if (arg == "--json") o.json = true;
    else if (arg == "--threads") o.threads = count(1);
    else if (arg == "--runs") o.runs = count(1);
    else if (arg == "--warmup" || arg == "--w1-warmup") o.warmup = count(0);
    else if (arg == "--steps" || arg == "--w1-steps") o.steps = count(1);
    else if (arg == "--seq") o.seq = count(1);
    else if (arg == "--unfused") o.unfused = true;
    else if (arg == "--precision") {
      const std::string p = value();
      if (p != "float32" && p != "bf16")
        usage(program, extra_list, "--precision takes float32 or bf16, got '" + p + "'");
      o.bf16 = p == "bf16";
    } else if (arg == "--help" || arg == "-h") usage(program, extra_list, "");
    else usage(program, extra_list, "unknown argument '" + arg + "'");
  }
  bool known = o.workload == "all";
  for (const auto& s : workload_specs()) known = known || o.workload == s.name;
  for (const auto& e : extra) known = known || o.workload == e;
  if (!known) usage(program, extra_list, "unknown workload '" + o.workload + "'");
  return o;
}

// ---------------------------------------------------------------- W1 data
// The four sentences and their labels; the vocabulary is in order of first appearance.
struct SpamToyData {
  std::vector<std::vector<std::int64_t>> sentences;
  std::vector<std::int64_t> labels;
  std::int64_t vocab_size = 0;
};

inline SpamToyData spam_toy_data() {
  const std::vector<std::pair<std::string, std::int64_t>> data = {
      {"you want a billion dollars", 1},
      {"click here for midterm answers", 1},
      {"send me your bank account info", 1},
      {"read important cs685 news", 0},
  };
  SpamToyData out;
  std::map<std::string, std::int64_t> vocab;
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
    out.sentences.push_back(ids);
    out.labels.push_back(label);
  }
  out.vocab_size = static_cast<std::int64_t>(vocab.size());
  return out;
}

// ---------------------------------------------------------------- W2 data
// Vocabulary: a..e = 0..4, <pad> 5, <sos> 6, <eos> 7. Source: 10 random letters; decoder
// input: <sos> + reversed; target: reversed + <eos>. 500 training and 100 held-out
// sequences from one generator seeded 0. Every sequence has length 10: no padding.
struct ReversalData {
  static constexpr std::int64_t kVocab = 8, kLetters = 5, kPad = 5, kSos = 6, kEos = 7;
  static constexpr std::int64_t kLength = 10, kTrain = 500, kHeldOut = 100, kBatch = 32;
  static constexpr std::int64_t kDModel = 64, kHeads = 4, kLayers = 2, kFfn = 256, kMaxLen = 16;
  // Row-major (count, 10) sources, (count, 11) decoder inputs and targets.
  std::vector<std::int64_t> train_src, train_in, train_out;
  std::vector<std::int64_t> test_src, test_in, test_out;

  // Batches cycle through the training set in order: step s uses rows 32 j .. 32 j + 31 with
  // j = s mod 15 (the last 20 rows are never used, as with drop_last).
  static std::int64_t batches_per_epoch() { return kTrain / kBatch; }
};

inline ReversalData reversal_data() {
  ReversalData d;
  std::mt19937_64 gen(0);
  auto fill = [&](std::int64_t count, std::vector<std::int64_t>& src, std::vector<std::int64_t>& in,
                  std::vector<std::int64_t>& out) {
    for (std::int64_t i = 0; i < count; ++i) {
      std::vector<std::int64_t> seq(ReversalData::kLength);
      for (auto& t : seq) t = static_cast<std::int64_t>(gen() % ReversalData::kLetters);
      src.insert(src.end(), seq.begin(), seq.end());
      in.push_back(ReversalData::kSos);
      in.insert(in.end(), seq.rbegin(), seq.rend());
      out.insert(out.end(), seq.rbegin(), seq.rend());
      out.push_back(ReversalData::kEos);
    }
  };
  fill(ReversalData::kTrain, d.train_src, d.train_in, d.train_out);
  fill(ReversalData::kHeldOut, d.test_src, d.test_in, d.test_out);
  return d;
}

// ---------------------------------------------------------------- W3 data and FLOPs
struct LmConfig {
  static constexpr std::int64_t kVocab = 256, kDModel = 256, kHeads = 8, kLayers = 4, kFfn = 1024;
  static constexpr std::int64_t kLength = 128, kBatch = 16;
};

// (B, T + 1) random tokens, seed 0: inputs are the first T, targets the last T.
inline std::vector<std::int64_t> lm_tokens() {
  std::mt19937_64 gen(0);
  std::vector<std::int64_t> tokens(static_cast<std::size_t>(LmConfig::kBatch * (LmConfig::kLength + 1)));
  for (auto& t : tokens) t = static_cast<std::int64_t>(gen() % LmConfig::kVocab);
  return tokens;
}

// Multiply-add FLOPs (2 per multiply-add) of the matrix products in one W3 training step:
// forward per token and layer 24 d^2 (qkv 6 d^2, out 2 d^2, FFN 16 d^2) + 4 T d (scores and
// weights @ v over all T keys, as both frameworks compute them), plus the head 2 d V; the
// backward is twice the forward.
inline double lm_step_flops() {
  const double d = LmConfig::kDModel, t = LmConfig::kLength, v = LmConfig::kVocab;
  const double per_token = LmConfig::kLayers * (24.0 * d * d + 4.0 * t * d) + 2.0 * d * v;
  return 3.0 * per_token * t * LmConfig::kBatch;
}

// ---------------------------------------------------------------- W4 data
struct MoeConfig {
  static constexpr std::int64_t kTokens = 2048, kDim = 256, kExperts = 8, kTopK = 2, kHidden = 1024;
};

// n standard normal values from seed (Box-Muller on a 64-bit Mersenne twister).
inline std::vector<float> normal_values(std::int64_t n, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<float> x(static_cast<std::size_t>(n));
  auto uniform = [&] { return (static_cast<double>(gen() >> 11) + 0.5) * 0x1p-53; };
  for (std::size_t i = 0; i < x.size(); i += 2) {
    const double r = std::sqrt(-2.0 * std::log(uniform()));
    const double a = 2.0 * M_PI * uniform();
    x[i] = static_cast<float>(r * std::cos(a));
    if (i + 1 < x.size()) x[i + 1] = static_cast<float>(r * std::sin(a));
  }
  return x;
}

// Standard normal (N, D) values, seed 0.
inline std::vector<float> moe_input() { return normal_values(MoeConfig::kTokens * MoeConfig::kDim, 0); }

// ---------------------------------------------------------------- W5 data
// One causal attention: q, k, v (1, 8, T, 64), out = softmax(q k^T / 8, causal) v, loss = sum(out * w)
// with w a fixed (1, 8, T, 64) tensor, so the backward gets a non-uniform gradient.
struct AttentionConfig {
  static constexpr std::int64_t kBatch = 1, kHeads = 8, kHeadDim = 64;
};

// Standard normal values of (1, 8, T, 64) from seed.
inline std::vector<float> attention_input(std::int64_t t, std::uint64_t seed) {
  return normal_values(AttentionConfig::kBatch * AttentionConfig::kHeads * t * AttentionConfig::kHeadDim, seed);
}

// W6: a 2-layer LSTM, time-major input (T, B, input).
struct LstmConfig {
  static constexpr std::int64_t kLayers = 2, kInput = 256, kHidden = 256, kBatch = 32, kLength = 64;
};

// The input (seed 1), the loss weights over the output (seed 2), and parameter i of the LSTM in
// PyTorch's order (weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0, weight_ih_l1, ...), normal
// with standard deviation 1/sqrt(hidden) (seed 100 + i), so both frameworks compute the same loss.
inline std::vector<float> lstm_input() {
  using C = LstmConfig;
  return normal_values(C::kLength * C::kBatch * C::kInput, 1);
}
inline std::vector<float> lstm_loss_weights() {
  using C = LstmConfig;
  return normal_values(C::kLength * C::kBatch * C::kHidden, 2);
}
inline std::vector<float> lstm_parameter(std::size_t i, std::int64_t numel) {
  std::vector<float> v = normal_values(numel, 100 + i);
  for (float& x : v) x /= 16.0f;  // 1 / sqrt(256)
  return v;
}

// ---------------------------------------------------------------- W9 data
// One training step of a small CNN on 28 x 28 single-channel images (MNIST's shape): conv 3x3 (1 -> 32,
// padding 1), ReLU, max pool 2, conv 3x3 (32 -> 64, padding 1), ReLU, max pool 2, flatten, linear
// (64 * 7 * 7 -> 128), ReLU, linear (128 -> 10), mean cross-entropy, backward, SGD (lr 0.01), and
// the gradients set to none.
struct CnnConfig {
  static constexpr std::int64_t kBatch = 64, kImage = 28, kChannels1 = 32, kChannels2 = 64, kHidden = 128;
  static constexpr std::int64_t kClasses = 10;
  // Parameter i's shape and fan-in, in the order conv1.weight, conv1.bias, conv2.weight, conv2.bias,
  // fc1.weight, fc1.bias, fc2.weight, fc2.bias.
  static std::vector<std::vector<std::int64_t>> shapes() {
    return {{kChannels1, 1, 3, 3},
            {kChannels1},
            {kChannels2, kChannels1, 3, 3},
            {kChannels2},
            {kHidden, kChannels2 * 7 * 7},
            {kHidden},
            {kClasses, kHidden},
            {kClasses}};
  }
  static std::vector<std::int64_t> fan_ins() {
    return {9, 9, kChannels1 * 9, kChannels1 * 9, kChannels2 * 49, kChannels2 * 49, kHidden, kHidden};
  }
};

// The images (seed 1), labels (i * 7 mod 10) and parameter i (seed 200 + i), normal with standard
// deviation 1/sqrt(fan_in), so both frameworks compute the same loss.
inline std::vector<float> cnn_input() {
  using C = CnnConfig;
  return normal_values(C::kBatch * C::kImage * C::kImage, 1);
}
inline std::vector<std::int64_t> cnn_labels() {
  std::vector<std::int64_t> labels;
  for (std::int64_t i = 0; i < CnnConfig::kBatch; ++i) labels.push_back(i * 7 % CnnConfig::kClasses);
  return labels;
}
inline std::vector<float> cnn_parameter(std::size_t i) {
  const std::vector<std::int64_t> shape = CnnConfig::shapes()[i];
  std::int64_t numel = 1;
  for (const std::int64_t e : shape) numel *= e;
  std::vector<float> v = normal_values(numel, 200 + i);
  const float scale = 1.0f / std::sqrt(static_cast<float>(CnnConfig::fan_ins()[i]));
  for (float& x : v) x *= scale;
  return v;
}

// ---------------------------------------------------------------- W7 data
// One sparse embedding step: a (V, 100) float32 table, a batch of 4096 indices uniform in [0, V),
// rows = emb(ids) (4096, 100), loss = sum(rows * c) with c a fixed (4096, 100) tensor, backward,
// the optimiser's step, zero_grad; for V = 1e4, 1e5, 1e6 and three variants of the step.
struct SparseEmbeddingConfig {
  static constexpr std::int64_t kDim = 100, kBatch = 4096, kBatches = 16;
  static constexpr int kRounds = 5;  // the measured steps of the variants alternate in this many rounds
  static std::vector<std::int64_t> vocabs() { return {10'000, 100'000, 1'000'000}; }
};

// What each variant is: the table's gradient (row-sparse or dense) and the optimiser, and its name in
// the JSON rows ("variant"). SGD's lr is 0.1, SparseAdam's 1e-3.
struct SparseEmbeddingVariant {
  const char* name;
  bool sparse;
  bool adam;  // SparseAdam instead of SGD
};
inline const std::vector<SparseEmbeddingVariant>& sparse_embedding_variants() {
  static const std::vector<SparseEmbeddingVariant> variants = {
      {"sparse-sgd", true, false},
      {"sparse-adam", true, true},
      {"dense-sgd", false, false},
  };
  return variants;
}

// The pool of 16 batches for vocabulary V: (16, 4096) indices uniform in [0, V), seed 5 (the modulo's
// bias is below 1e-13); step s uses batch s mod 16.
inline std::vector<std::int64_t> sparse_embedding_ids(std::int64_t vocab) {
  using C = SparseEmbeddingConfig;
  std::mt19937_64 gen(5);
  std::vector<std::int64_t> ids(static_cast<std::size_t>(C::kBatches * C::kBatch));
  for (auto& id : ids) id = static_cast<std::int64_t>(gen() % static_cast<std::uint64_t>(vocab));
  return ids;
}

// c: (4096, 100) standard normal, seed 6.
inline std::vector<float> sparse_embedding_loss_weights() {
  using C = SparseEmbeddingConfig;
  return normal_values(C::kBatch * C::kDim, 6);
}

// Times the variants' steps alternately: every variant's `warmup` steps, then `rounds` rounds in
// which each variant in turn (the order rotated by one every round) takes its share of `steps`
// measured steps. Returns each variant's per-step milliseconds, in the order of `step_of`.
inline std::vector<std::vector<double>> time_alternating(const std::vector<std::function<void()>>& step_of, int warmup,
                                                         int steps, int rounds) {
  const std::size_t n = step_of.size();
  for (const auto& step : step_of)
    for (int i = 0; i < warmup; ++i) step();
  rounds = std::max(1, std::min(rounds, steps));
  std::vector<std::vector<double>> ms(n);
  for (int round = 0; round < rounds; ++round) {
    const int share = steps / rounds + (round < steps % rounds ? 1 : 0);
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t v = (k + static_cast<std::size_t>(round)) % n;
      for (int i = 0; i < share; ++i) {
        const auto start = Clock::now();
        step_of[v]();
        ms[v].push_back(ms_since(start));
      }
    }
  }
  return ms;
}

// The process's resident set size now, in MiB (/proc/self/statm's second field, in pages).
inline double current_rss_mib() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0.0;
  long pages = 0, resident = 0;
  const int got = std::fscanf(f, "%ld %ld", &pages, &resident);
  std::fclose(f);
  return got == 2 ? static_cast<double>(resident) * 4096.0 / (1024.0 * 1024.0) : 0.0;
}

}  // namespace bench
