// Over 400 lines: the workloads in one program, mirroring bench_main.cpp.
// libtorch_bench: the workloads of docs/bench.md written with PyTorch's C++ API, the
// reference tapegrad_bench is compared against (bench/compare.sh). Built only with
// -DTAPEGRAD_BENCH_LIBTORCH=ON; see docs/bench.md. The models mirror tapegrad's nn modules
// shape for shape (fused qkv projection, pre-norm blocks, the same losses; the transformer parts
// shared with libtorch_lm are in libtorch_models.h); initial values differ, the data are the same
// (bench_common.h).
//
//   libtorch_bench --workload w3 --json --threads 2

#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/autocast_mode.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "bench/bench_common.h"
#include "bench/libtorch_models.h"
#include "bench/libtorch_threads.h"

using bench::Clock;
using bench::ms_since;

namespace {

nlohmann::json record_base(const std::string& workload, const bench::Options& opt) {
  return {{"workload", workload},
          {"framework", "libtorch"},
          {"threads", torch::get_num_threads()},
          {"blas_threads", bench::openblas_threads()},
          {"precision", opt.bf16 ? "bf16" : "float32"}};
}

// libtorch's CPU autocast to bfloat16 for the guard's lifetime when on (workloads.md, Precision):
// the forward and the loss inside, backward and the optimiser step outside.
class Autocast {
 public:
  explicit Autocast(bool on) : on_(on) {
    if (!on_) return;
    at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
    at::autocast::set_cpu_enabled(true);
  }
  ~Autocast() {
    if (!on_) return;
    at::autocast::set_cpu_enabled(false);
    at::autocast::clear_cache();
  }
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  bool on_;
};

void emit(const bench::Options& opt, nlohmann::json row, const std::string& text) {
  row["peak_rss_mib"] = bench::peak_rss_mib();
  if (opt.json) std::cout << row.dump() << std::endl;
  else
    std::cout << (opt.bf16 ? "[bf16] " : "") << text << " (peak RSS " << row["peak_rss_mib"].get<double>() << " MiB)"
              << std::endl;
}

torch::Tensor long_tensor(const std::vector<std::int64_t>& values, std::vector<std::int64_t> shape) {
  return torch::tensor(values, torch::kLong).reshape(shape);
}

// Times `step` warmup + steps times; returns the per-step milliseconds of the measured ones.
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

// ---------------------------------------------------------------- S0
void run_sgemm(const bench::Options& opt) {
  constexpr std::int64_t n = 1024;
  torch::NoGradGuard no_grad;
  torch::manual_seed(0);
  const auto a = torch::randn({n, n});
  const auto b = torch::randn({n, n});
  const auto ms = time_steps(bench::warmup_of(opt, "sgemm"), bench::steps_of(opt, "sgemm"), [&] { torch::mm(a, b); });
  const double median_ms = bench::median(ms);
  const double gflops = 2.0 * n * n * n / (median_ms * 1e6);
  nlohmann::json row = record_base("sgemm", opt);
  row["median_ms"] = median_ms;
  row["runs"] = ms.size();
  row["gflops"] = gflops;
  emit(opt, row, "S0 sgemm 1024: " + std::to_string(median_ms) + " ms, " + std::to_string(gflops) + " GFLOP/s");
}

// ---------------------------------------------------------------- W1
struct SpamToyImpl : torch::nn::Module {
  static constexpr std::int64_t kDim = 20;
  torch::nn::Embedding emb{nullptr};
  torch::nn::Linear q{nullptr}, k{nullptr}, v{nullptr}, head{nullptr};
  explicit SpamToyImpl(std::int64_t vocab) {
    emb = register_module("emb", torch::nn::Embedding(vocab, kDim));
    q = register_module("q", torch::nn::Linear(torch::nn::LinearOptions(kDim, kDim).bias(false)));
    k = register_module("k", torch::nn::Linear(torch::nn::LinearOptions(kDim, kDim).bias(false)));
    v = register_module("v", torch::nn::Linear(torch::nn::LinearOptions(kDim, kDim).bias(false)));
    head = register_module("head", torch::nn::Linear(kDim, 2));
  }
  torch::Tensor forward(const torch::Tensor& ids) {
    const auto x = emb(ids);                                                      // (T, 20)
    const auto scores = torch::matmul(q(x), k(x).t()) / std::sqrt(double(kDim));  // (T, T)
    const auto pooled = torch::matmul(torch::softmax(scores, -1), v(x)).mean(0);  // (20)
    return head(pooled);                                                          // (2)
  }
};

void run_w1(const bench::Options& opt) {
  torch::manual_seed(0);
  const bench::SpamToyData data = bench::spam_toy_data();
  SpamToyImpl model(data.vocab_size);
  torch::optim::SGD sgd(model.parameters(), torch::optim::SGDOptions(0.1));
  std::vector<torch::Tensor> ids, labels;
  for (std::size_t i = 0; i < data.sentences.size(); ++i) {
    ids.push_back(long_tensor(data.sentences[i], {static_cast<std::int64_t>(data.sentences[i].size())}));
    labels.push_back(torch::tensor({data.labels[i]}, torch::kLong));
  }
  std::size_t next = 0;
  double last_loss = 0.0;
  auto step = [&] {
    const std::size_t i = next++ % ids.size();
    sgd.zero_grad();
    const auto loss = torch::nn::functional::cross_entropy(model.forward(ids[i]).unsqueeze(0), labels[i]);
    loss.backward();
    sgd.step();
    last_loss = loss.item<double>();
  };
  const int warmup = bench::warmup_of(opt, "w1"), steps = bench::steps_of(opt, "w1");
  for (int i = 0; i < warmup; ++i) step();
  std::vector<double> ms;
  ms.reserve(static_cast<std::size_t>(steps));
  const auto total = Clock::now();
  for (int i = 0; i < steps; ++i) {
    const auto start = Clock::now();
    step();
    ms.push_back(ms_since(start));
  }
  const double us_per_step = ms_since(total) * 1000.0 / steps;
  nlohmann::json row = record_base("w1", opt);
  row["median_ms"] = bench::median(ms);
  row["runs"] = steps;
  row["us_per_step"] = us_per_step;
  row["final_loss"] = last_loss;
  emit(opt, row, "W1 spam-toy: " + std::to_string(us_per_step) + " us/step, final loss " + std::to_string(last_loss));
}

// ---------------------------------------------------------------- transformer parts
// Attention, FeedForward and EncoderLayer: bench/libtorch_models.h.
using bench::Attention;
using bench::EncoderLayer;
using bench::FeedForward;

struct DecoderLayerImpl : torch::nn::Module {
  Attention self_attn{nullptr}, cross_attn{nullptr};
  FeedForward ff{nullptr};
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr}, norm3{nullptr};
  DecoderLayerImpl(std::int64_t d, std::int64_t heads, std::int64_t hidden) {
    self_attn = register_module("self_attn", Attention(d, heads, false));
    cross_attn = register_module("cross_attn", Attention(d, heads, true));
    ff = register_module("ff", FeedForward(d, hidden, false));
    norm1 = register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
    norm2 = register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
    norm3 = register_module("norm3", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
  }
  torch::Tensor forward(torch::Tensor x, const torch::Tensor& memory) {
    x = x + self_attn(norm1(x), torch::Tensor(), true);
    x = x + cross_attn(norm2(x), memory, false);
    return x + ff(norm3(x));
  }
};
TORCH_MODULE(DecoderLayer);

// ---------------------------------------------------------------- W2
// tapegrad's EncoderDecoder: token embeddings plus learned positions (both N(0, 1)), pre-norm
// stacks each ending in a LayerNorm, Linear(d, vocab) on top.
struct ReversalModelImpl : torch::nn::Module {
  using D = bench::ReversalData;
  torch::nn::Embedding src_emb{nullptr}, tgt_emb{nullptr}, src_pos{nullptr}, tgt_pos{nullptr};
  std::vector<EncoderLayer> encoder;
  std::vector<DecoderLayer> decoder;
  torch::nn::LayerNorm enc_norm{nullptr}, dec_norm{nullptr};
  torch::nn::Linear head{nullptr};
  ReversalModelImpl() {
    src_emb = register_module("src_emb", torch::nn::Embedding(D::kVocab, D::kDModel));
    tgt_emb = register_module("tgt_emb", torch::nn::Embedding(D::kVocab, D::kDModel));
    src_pos = register_module("src_pos", torch::nn::Embedding(D::kMaxLen, D::kDModel));
    tgt_pos = register_module("tgt_pos", torch::nn::Embedding(D::kMaxLen, D::kDModel));
    for (std::int64_t i = 0; i < D::kLayers; ++i) {
      encoder.push_back(
          register_module("encoder" + std::to_string(i), EncoderLayer(D::kDModel, D::kHeads, D::kFfn, false)));
      decoder.push_back(register_module("decoder" + std::to_string(i), DecoderLayer(D::kDModel, D::kHeads, D::kFfn)));
    }
    enc_norm = register_module("enc_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({D::kDModel})));
    dec_norm = register_module("dec_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({D::kDModel})));
    head = register_module("head", torch::nn::Linear(D::kDModel, D::kVocab));
  }
  torch::Tensor embed(torch::nn::Embedding& table, torch::nn::Embedding& pos, const torch::Tensor& tokens) {
    const auto positions = torch::arange(tokens.size(1), torch::kLong);
    return table(tokens) + pos(positions);
  }
  torch::Tensor encode(const torch::Tensor& src) {
    auto h = embed(src_emb, src_pos, src);
    for (auto& layer : encoder) h = layer(h, false);
    return enc_norm(h);
  }
  torch::Tensor decode(const torch::Tensor& tgt_in, const torch::Tensor& memory) {
    auto h = embed(tgt_emb, tgt_pos, tgt_in);
    for (auto& layer : decoder) h = layer(h, memory);
    return head(dec_norm(h));
  }
};
TORCH_MODULE(ReversalModel);

struct ReversalTraining {
  using D = bench::ReversalData;
  bench::ReversalData data = bench::reversal_data();
  ReversalModel model;
  torch::optim::Adam adam;
  std::vector<torch::Tensor> src, in, out;  // per batch
  torch::Tensor test_src, test_out;
  bool bf16 = false;  // forward passes under bfloat16 autocast
  ReversalTraining() : adam(model->parameters(), torch::optim::AdamOptions(1e-3)) {
    const std::int64_t b = D::kBatch, t = D::kLength;
    for (std::int64_t j = 0; j < D::batches_per_epoch(); ++j) {
      auto rows = [&](const std::vector<std::int64_t>& v, std::int64_t len) {
        return long_tensor(std::vector<std::int64_t>(v.begin() + j * b * len, v.begin() + (j + 1) * b * len), {b, len});
      };
      src.push_back(rows(data.train_src, t));
      in.push_back(rows(data.train_in, t + 1));
      out.push_back(rows(data.train_out, t + 1));
    }
    test_src = long_tensor(data.test_src, {D::kHeldOut, t});
    test_out = long_tensor(data.test_out, {D::kHeldOut, t + 1});
  }
  double step(std::int64_t s) {
    const std::size_t j = static_cast<std::size_t>(s % D::batches_per_epoch());
    adam.zero_grad();
    torch::Tensor loss;
    {
      Autocast autocast(bf16);
      const auto logits = model->decode(in[j], model->encode(src[j]));  // (B, T + 1, V)
      loss = torch::nn::functional::cross_entropy(logits.reshape({-1, D::kVocab}), out[j].reshape({-1}));
    }
    loss.backward();
    adam.step();
    return loss.item<double>();
  }
  // Fraction of held-out sequences whose greedy decoding (11 tokens) equals the target exactly.
  double exact_match() {
    torch::NoGradGuard no_grad;
    Autocast autocast(bf16);
    model->eval();
    const auto memory = model->encode(test_src);
    auto seq = torch::full({D::kHeldOut, 1}, D::kSos, torch::kLong);
    for (std::int64_t i = 0; i <= D::kLength; ++i) {
      const auto logits = model->decode(seq, memory);  // (N, i + 1, V)
      seq = torch::cat({seq, logits.select(1, -1).argmax(-1, true)}, 1);
    }
    model->train();
    const auto produced = seq.slice(1, 1);
    return (produced == test_out).all(1).to(torch::kDouble).mean().item<double>();
  }
};

void run_w2(const bench::Options& opt) {
  torch::manual_seed(0);
  ReversalTraining training;
  training.bf16 = opt.bf16;
  std::int64_t s = 0;
  double last = 0.0;
  const auto ms =
      time_steps(bench::warmup_of(opt, "w2"), bench::steps_of(opt, "w2"), [&] { last = training.step(s++); });
  nlohmann::json row = record_base("w2", opt);
  row["median_ms"] = bench::median(ms);
  row["mean_ms"] = bench::mean(ms);
  row["runs"] = ms.size();
  row["final_loss"] = last;
  emit(opt, row, "W2 reversal: " + std::to_string(bench::median(ms)) + " ms/step median");
}

void run_w2conv(const bench::Options& opt) {
  torch::manual_seed(0);
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
           std::to_string(seconds) + " s");
}

// ---------------------------------------------------------------- W3
void run_w3(const bench::Options& opt) {
  using C = bench::LmConfig;
  torch::manual_seed(0);
  bench::LanguageModel model{
      bench::LanguageModelOptions{C::kVocab, C::kLength, C::kDModel, C::kHeads, C::kLayers, C::kFfn}};
  torch::optim::AdamW adamw(model->parameters(), torch::optim::AdamWOptions(3e-4));
  const auto tokens = long_tensor(bench::lm_tokens(), {C::kBatch, C::kLength + 1});
  const auto inputs = tokens.slice(1, 0, C::kLength).contiguous();
  const auto targets = tokens.slice(1, 1).contiguous().reshape({-1});
  double last = 0.0;
  const auto ms = time_steps(bench::warmup_of(opt, "w3"), bench::steps_of(opt, "w3"), [&] {
    adamw.zero_grad();
    torch::Tensor loss;
    {
      Autocast autocast(opt.bf16);
      loss = torch::nn::functional::cross_entropy(model(inputs).reshape({-1, C::kVocab}), targets);
    }
    loss.backward();
    adamw.step();
    last = loss.item<double>();
  });
  const double median_ms = bench::median(ms);
  nlohmann::json row = record_base("w3", opt);
  row["median_ms"] = median_ms;
  row["runs"] = ms.size();
  row["tokens_per_s"] = C::kBatch * C::kLength / (median_ms / 1000.0);
  row["step_gflop"] = bench::lm_step_flops() / 1e9;
  row["gflops"] = bench::lm_step_flops() / (median_ms * 1e6);
  row["final_loss"] = last;
  emit(opt, row, "W3 lm: " + std::to_string(median_ms) + " ms/step");
}

// ---------------------------------------------------------------- W4
struct MoeImpl : torch::nn::Module {
  using C = bench::MoeConfig;
  torch::nn::Linear router{nullptr};
  std::vector<FeedForward> experts;
  MoeImpl() {
    router = register_module("router", torch::nn::Linear(torch::nn::LinearOptions(C::kDim, C::kExperts).bias(false)));
    for (std::int64_t e = 0; e < C::kExperts; ++e)
      experts.push_back(register_module("expert" + std::to_string(e), FeedForward(C::kDim, C::kHidden, false)));
  }
  // Returns mean(out^2) + 0.01 * load-balancing loss.
  torch::Tensor loss(const torch::Tensor& x) {
    const auto logits = router(x);                       // (N, E)
    const auto probs = torch::softmax(logits, -1);       // (N, E)
    const auto top = torch::topk(logits, C::kTopK, -1);  // (N, k) each
    const auto weights = torch::softmax(std::get<0>(top), -1);
    const auto ids = std::get<1>(top);
    auto out = torch::zeros_like(x);
    const auto flat_ids = ids.reshape({-1});
    const auto flat_weights = weights.reshape({-1});
    for (std::int64_t e = 0; e < C::kExperts; ++e) {
      const auto slots = (flat_ids == e).nonzero().squeeze(1);  // (m) positions in the (N k) list
      if (slots.numel() == 0) continue;
      const auto rows = torch::div(slots, C::kTopK, "floor");
      const auto y = experts[static_cast<std::size_t>(e)](x.index_select(0, rows)) *
                     flat_weights.index_select(0, slots).unsqueeze(1);
      out = out.index_add(0, rows, y.to(out.scalar_type()));  // under autocast y is bfloat16
    }
    const auto top1 = ids.select(1, 0);
    const auto f = torch::one_hot(top1, C::kExperts).to(torch::kFloat).mean(0);  // (E), no gradient
    const auto lb = C::kExperts * (f * probs.mean(0)).sum();
    return out.pow(2).mean() + 0.01 * lb;
  }
};
TORCH_MODULE(Moe);

void run_w4(const bench::Options& opt) {
  using C = bench::MoeConfig;
  torch::manual_seed(0);
  Moe moe;
  const auto x = torch::tensor(bench::moe_input()).reshape({C::kTokens, C::kDim});
  double last = 0.0;
  const auto ms = time_steps(bench::warmup_of(opt, "w4"), bench::steps_of(opt, "w4"), [&] {
    for (auto& p : moe->parameters()) p.mutable_grad() = torch::Tensor();
    torch::Tensor loss;
    {
      Autocast autocast(opt.bf16);
      loss = moe->loss(x);
    }
    loss.backward();
    last = loss.item<double>();
  });
  nlohmann::json row = record_base("w4", opt);
  row["median_ms"] = bench::median(ms);
  row["runs"] = ms.size();
  row["final_loss"] = last;
  emit(opt, row, "W4 moe: " + std::to_string(bench::median(ms)) + " ms fwd+bwd");
}

// ---------------------------------------------------------------- W5 attention
// libtorch 1.13's attention on the CPU is this math: scores, mask, softmax, weights @ v.
void run_w5(const bench::Options& opt) {
  using C = bench::AttentionConfig;
  const std::int64_t t = opt.seq;
  const std::vector<std::int64_t> shape{C::kBatch, C::kHeads, t, C::kHeadDim};
  auto input = [&](std::uint64_t seed) { return torch::tensor(bench::attention_input(t, seed)).reshape(shape); };
  auto q = input(1).requires_grad_(), k = input(2).requires_grad_(), v = input(3).requires_grad_();
  const auto w = input(4);
  const auto hidden = torch::ones({t, t}, torch::kBool).triu(1);  // key j > query i
  const double scale = 1.0 / std::sqrt(static_cast<double>(C::kHeadDim));
  const double rss_before = bench::current_rss_mib();
  double last = 0.0;
  const auto ms = time_steps(bench::warmup_of(opt, "w5"), bench::steps_of(opt, "w5"), [&] {
    for (auto* p : {&q, &k, &v}) p->mutable_grad() = torch::Tensor();
    const auto scores = torch::matmul(q, k.transpose(-2, -1)) * scale;
    const auto weights = torch::softmax(scores.masked_fill(hidden, -std::numeric_limits<float>::infinity()), -1);
    const auto loss = (torch::matmul(weights, v) * w).sum();
    loss.backward();
    last = loss.item<double>();
  });
  nlohmann::json row = record_base("w5", opt);
  row["variant"] = "math";
  row["seq"] = t;
  row["median_ms"] = bench::median(ms);
  row["runs"] = ms.size();
  row["final_loss"] = last;
  row["attention_peak_mib"] = bench::peak_rss_mib() - rss_before;
  emit(opt, row,
       "W5 attention T=" + std::to_string(t) + ": " + std::to_string(bench::median(ms)) + " ms fwd+bwd, peak +" +
           std::to_string(row["attention_peak_mib"].get<double>()) + " MiB");
}

// ---------------------------------------------------------------- W6 LSTM
void run_w6(const bench::Options& opt) {
  using C = bench::LstmConfig;
  torch::nn::LSTM lstm(torch::nn::LSTMOptions(C::kInput, C::kHidden).num_layers(C::kLayers));
  {
    torch::NoGradGuard no_grad;
    std::size_t i = 0;
    for (auto& p : lstm->parameters()) {
      p.copy_(torch::tensor(bench::lstm_parameter(i, p.numel())).reshape(p.sizes()));
      ++i;
    }
  }
  const auto x = torch::tensor(bench::lstm_input()).reshape({C::kLength, C::kBatch, C::kInput});
  const auto w = torch::tensor(bench::lstm_loss_weights()).reshape({C::kLength, C::kBatch, C::kHidden});
  double last = 0.0;
  const auto ms = time_steps(bench::warmup_of(opt, "w6"), bench::steps_of(opt, "w6"), [&] {
    for (auto& p : lstm->parameters()) p.mutable_grad() = torch::Tensor();
    const auto loss = (std::get<0>(lstm->forward(x)) * w).sum();
    loss.backward();
    last = loss.item<double>();
  });
  nlohmann::json row = record_base("w6", opt);
  row["median_ms"] = bench::median(ms);
  row["runs"] = ms.size();
  row["final_loss"] = last;
  emit(opt, row, "W6 lstm: " + std::to_string(bench::median(ms)) + " ms fwd+bwd, loss " + std::to_string(last));
}

// ---------------------------------------------------------------- W9 CNN training step
void run_w9(const bench::Options& opt) {
  namespace F = torch::nn::functional;
  using C = bench::CnnConfig;
  std::vector<torch::Tensor> params;
  for (std::size_t i = 0; i < C::shapes().size(); ++i)
    params.push_back(torch::tensor(bench::cnn_parameter(i)).reshape(C::shapes()[i]).requires_grad_());
  torch::optim::SGD sgd(params, torch::optim::SGDOptions(0.01));
  const auto x = torch::tensor(bench::cnn_input()).reshape({C::kBatch, 1, C::kImage, C::kImage});
  const auto y = torch::tensor(bench::cnn_labels());
  double last = 0.0;
  const auto ms = time_steps(bench::warmup_of(opt, "w9"), bench::steps_of(opt, "w9"), [&] {
    auto h = torch::max_pool2d(torch::relu(torch::conv2d(x, params[0], params[1], 1, 1)), 2);
    h = torch::max_pool2d(torch::relu(torch::conv2d(h, params[2], params[3], 1, 1)), 2);
    h = torch::relu(torch::linear(h.flatten(1), params[4], params[5]));
    const auto loss = F::cross_entropy(torch::linear(h, params[6], params[7]), y);
    loss.backward();
    sgd.step();
    for (auto& p : params) p.mutable_grad() = torch::Tensor();  // to none, as tapegrad's step does
    last = loss.item<double>();
  });
  nlohmann::json row = record_base("w9", opt);
  row["median_ms"] = bench::median(ms);
  row["runs"] = ms.size();
  row["final_loss"] = last;
  emit(opt, row, "W9 cnn: " + std::to_string(bench::median(ms)) + " ms/step, loss " + std::to_string(last));
}

// ---------------------------------------------------------------- W7 sparse embedding step
// libtorch 1.13's C++ API has no SparseAdam (torch/optim/ holds adagrad, adam, adamw, lbfgs, rmsprop
// and sgd), so this is torch.optim.SparseAdam's update (_functional.py's sparse_adam) written by hand
// with torch ops on the coalesced gradient. torch's Python reads the old moments at the gradient's
// rows with sparse_mask and adds the updates as sparse tensors; with coalesced (unique) indices,
// index_select and index_add_ compute the same values. Options: AdamOptions' lr, betas and eps
// (weight decay unused, as SparseAdam has none); zero_grad is torch::optim::Optimizer's.
class SparseAdam : public torch::optim::Optimizer {
 public:
  SparseAdam(std::vector<torch::Tensor> params, const torch::optim::AdamOptions& options)
      : Optimizer(std::move(params), std::make_unique<torch::optim::AdamOptions>(options)) {}

  torch::Tensor step(LossClosure closure = nullptr) override {
    torch::NoGradGuard no_grad;
    torch::Tensor loss = closure ? closure() : torch::Tensor();
    for (auto& group : param_groups_) {
      const auto& o = static_cast<const torch::optim::AdamOptions&>(group.options());
      const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
      for (auto& p : group.params()) {
        if (!p.grad().defined()) continue;
        Moments& s = moments_[p.unsafeGetTensorImpl()];
        if (!s.exp_avg.defined()) {
          s.exp_avg = torch::zeros_like(p);
          s.exp_avg_sq = torch::zeros_like(p);
        }
        ++s.step;
        const auto grad = p.grad().coalesce();
        const auto rows = grad._indices().select(0, 0);  // (U), unique
        const auto values = grad._values();              // (U, D)
        const auto old_exp_avg = s.exp_avg.index_select(0, rows);
        auto exp_avg_update = (values - old_exp_avg).mul_(1 - beta1);
        s.exp_avg.index_add_(0, rows, exp_avg_update);
        const auto old_exp_avg_sq = s.exp_avg_sq.index_select(0, rows);
        auto exp_avg_sq_update = values.pow(2).sub_(old_exp_avg_sq).mul_(1 - beta2);
        s.exp_avg_sq.index_add_(0, rows, exp_avg_sq_update);
        const auto numer = exp_avg_update.add_(old_exp_avg);
        const auto denom = exp_avg_sq_update.add_(old_exp_avg_sq).sqrt_().add_(o.eps());
        const double t = static_cast<double>(s.step);
        const double step_size = o.lr() * std::sqrt(1 - std::pow(beta2, t)) / (1 - std::pow(beta1, t));
        p.index_add_(0, rows, numer.div_(denom), -step_size);
      }
    }
    return loss;
  }

 private:
  struct Moments {
    torch::Tensor exp_avg, exp_avg_sq;
    std::int64_t step = 0;
  };
  std::map<const void*, Moments> moments_;  // by parameter
};

// One variant's table and optimiser: torch::nn::Embedding with sparse gradients stepped by SGD or
// SparseAdam, or with a dense (V, D) gradient stepped by SGD.
struct EmbeddingStep {
  torch::nn::Embedding emb;
  std::unique_ptr<torch::optim::Optimizer> opt;

  EmbeddingStep(std::int64_t vocab, const bench::SparseEmbeddingVariant& v)
      : emb(torch::nn::EmbeddingOptions(vocab, bench::SparseEmbeddingConfig::kDim).sparse(v.sparse)) {
    if (v.adam) opt = std::make_unique<SparseAdam>(emb->parameters(), torch::optim::AdamOptions(1e-3));
    else opt = std::make_unique<torch::optim::SGD>(emb->parameters(), torch::optim::SGDOptions(0.1));
  }

  void step(const torch::Tensor& ids, const torch::Tensor& c) {
    const auto loss = (emb(ids) * c).sum();  // emb(ids): (N, D)
    loss.backward();
    opt->step();
    opt->zero_grad();
  }
};

void run_w7(const bench::Options& opt) {
  using C = bench::SparseEmbeddingConfig;
  torch::manual_seed(0);
  const auto& variants = bench::sparse_embedding_variants();
  const auto c = torch::tensor(bench::sparse_embedding_loss_weights()).reshape({C::kBatch, C::kDim});  // (N, D)
  for (const std::int64_t vocab : C::vocabs()) {
    const auto pool = long_tensor(bench::sparse_embedding_ids(vocab), {C::kBatches, C::kBatch});  // (16, N)
    std::vector<torch::Tensor> batches;                                                           // each: (N)
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
      row["median_ms"] = bench::median(ms[i]);
      row["ms_per_step"] = bench::median(ms[i]);
      row["runs"] = ms[i].size();
      char text[160];
      std::snprintf(text, sizeof text, "W7 sparse embedding V=%lld %-11s: %8.3f ms/step (median of %zu)",
                    static_cast<long long>(vocab), variants[i].name, bench::median(ms[i]), ms[i].size());
      emit(opt, row, text);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bench::Options opt = bench::parse_options(argc, argv, "libtorch_bench", {});
  if (opt.threads > 0) {
    bench::set_libtorch_threads(opt.threads);
  }
  try {
    const std::string w = opt.workload;
    if (w == "sgemm" || w == "all") run_sgemm(opt);
    if (w == "w1" || w == "all") run_w1(opt);
    if (w == "w2" || w == "all") run_w2(opt);
    if (w == "w2conv") run_w2conv(opt);
    if (w == "w3" || w == "all") run_w3(opt);
    if (w == "w4" || w == "all") run_w4(opt);
    if (w == "w5") run_w5(opt);
    if (w == "w6" || w == "all") run_w6(opt);
    if (w == "w9" || w == "all") run_w9(opt);
    if (w == "w7") run_w7(opt);
  } catch (const std::exception& e) {
    std::cerr << "libtorch_bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
