// libtorch_lm: the language-model experiment of examples/language_model trained with PyTorch's C++ API,
// the reference the tapegrad run is compared against at equal wall-clock time (bench/lm_compare.sh).
// Built only with -DTAPEGRAD_BENCH_LIBTORCH=ON.
//
// It reads the experiment's options (examples/language_model/lm_config.h, the same flags and config
// files) and repeats examples/language_model/main.cpp step for step:
//   data      the King James Bible split by books, as bytes (corpus.h); training batch s is
//             data::TokenStream(train, batch_size, context, seed).batch_at(s), the windows tapegrad reads
//   model     byte embedding + learned positions, `layers` pre-norm causal blocks (multi-head attention,
//             FF Linear-GELU-Linear), final LayerNorm, Linear(d_model, 256) (bench/libtorch_models.h)
//   training  mean cross-entropy over the B T tokens; AdamW (betas 0.9/0.999, eps 1e-8, weight_decay on
//             every parameter); global grad-norm clip; lr = lr * optim::warmup_cosine(warmup_fraction,
//             min_lr_ratio)(f) before each step, f = min(1, max((s + 1) / steps, elapsed / time_budget_s));
//             the run stops after `steps` steps or after the step that reaches the time budget
//   eval      token-weighted mean cross-entropy (nats) on eval_windows held-out windows every eval_every
//             steps and at the last step (inside the timed run, as train::Trainer evaluates), then on every
//             held-out window once training is over (the summary's figure)
// Initial values differ (each framework's generator); dropout masks too. Only positions=learned and
// attention=mha are written here; resume and patience are not, and no checkpoints are written (the tapegrad
// run saves one every checkpoint_every steps, inside its time).
//
// Files (run_dir, default runs/language_model_libtorch/): config.json; metrics.jsonl in the Trainer's line
// format: {"step","epoch","loss","step_loss","lr","grad_norm","examples_per_s","tokens_per_s","elapsed_s"}
// every log_every steps and at the last ("loss" the mean since the previous line),
// {"step","eval":{"val_bpc","val_loss"},"elapsed_s"} every eval_every steps and at the last, "end_of_run":true
// on a last line off its schedule; loss.svg; summary.json with language_model's keys where they apply
// ("steps", "stop_reason", "train_seconds" (the timed run, evaluations included), "tokens_per_s" (training
// tokens / train_seconds), "heldout_loss" (nats per byte over every held-out window), "heldout_bpc"
// (heldout_loss / ln 2), "heldout_windows", "train_loss" (the last logged loss), "epochs", "parameters", "attention",
// "positions") and "framework" ("libtorch 1.13.1"), "step_seconds" (the training steps alone), "step_tokens_per_s",
// "heldout_tokens", "final_train_loss" (= train_loss), "threads".
//
// Usage: OMP_WAIT_POLICY=PASSIVE libtorch_lm [--config FILE] [--key value ...] [--threads 2]
// (--help lists the keys). Without OMP_WAIT_POLICY=PASSIVE libtorch's spinning OpenMP threads fight
// OpenBLAS's on a 2-core machine (docs/bench.md, "compare.sh").

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "bench/libtorch_models.h"
#include "bench/libtorch_threads.h"
#include "examples/common/run_dir.h"
#include "examples/language_model/corpus.h"
#include "examples/language_model/lm_config.h"
#include "tapegrad/autograd/format.h"
#include "tapegrad/autograd/parallel.h"
#include "tapegrad/data/token_stream.h"
#include "tapegrad/optim/schedule.h"
#include "tapegrad/train/metrics.h"
#include "tapegrad/train/progress.h"

#ifndef TAPEGRAD_LIBTORCH_VERSION
#define TAPEGRAD_LIBTORCH_VERSION TORCH_VERSION
#endif

using namespace tapegrad;
using examples::LmConfig;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kProgram = "libtorch_lm";
constexpr std::int64_t kVocab = 256;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// ---------------------------------------------------------------- options

// The checks tapegrad's program makes on the values this side reads, plus what this side does not do.
void check_options(const LmConfig& c) {
  using examples::require;
  examples::require_positive(kProgram, c, &LmConfig::context, &LmConfig::batch_size, &LmConfig::d_model,
                             &LmConfig::heads, &LmConfig::layers, &LmConfig::ff_hidden, &LmConfig::steps,
                             &LmConfig::eval_every, &LmConfig::eval_windows, &LmConfig::log_every, &LmConfig::lr);
  examples::require_non_negative(kProgram, c, &LmConfig::weight_decay, &LmConfig::min_lr_ratio,
                                 &LmConfig::clip_grad_norm, &LmConfig::time_budget_s);
  require(c.d_model % c.heads == 0, kProgram,
          "--heads must divide --d_model" + examples::got(c, &LmConfig::d_model, &LmConfig::heads));
  require(c.dropout >= 0 && c.dropout < 1, kProgram,
          "--dropout must be in [0, 1)" + examples::got(c, &LmConfig::dropout));
  require(c.warmup_fraction >= 0 && c.warmup_fraction < 1, kProgram,
          "--warmup_fraction must be in [0, 1)" + examples::got(c, &LmConfig::warmup_fraction));
  require(c.min_lr_ratio <= 1, kProgram,
          "--min_lr_ratio must be at most 1" + examples::got(c, &LmConfig::min_lr_ratio));
  require(c.positions == "learned", kProgram,
          "only --positions learned is written in libtorch" + examples::got(c, &LmConfig::positions));
  require(c.attention == "mha", kProgram,
          "only --attention mha is written in libtorch" + examples::got(c, &LmConfig::attention));
  require(c.tokenizer == "bytes", kProgram,
          "only --tokenizer bytes is written in libtorch" + examples::got(c, &LmConfig::tokenizer));
  require(!c.resume, kProgram, "--resume is not supported (a libtorch run always starts afresh)");
  require(c.patience == 0, kProgram,
          "early stopping (--patience) is not supported" + examples::got(c, &LmConfig::patience));
  require(c.stop_after == 0, kProgram,
          "--stop_after is not supported (there is no resume)" + examples::got(c, &LmConfig::stop_after));
}

// ---------------------------------------------------------------- data

struct TorchBatch {
  torch::Tensor input;   // (B, T) int64
  torch::Tensor target;  // (B, T) int64
};

// An int64 tapegrad tensor as a torch tensor that owns its own copy.
torch::Tensor to_torch(const Tensor& ids) {
  std::vector<std::int64_t> values = ids.to_vector<std::int64_t>();
  const std::vector<std::int64_t> shape = ids.shape().vec();
  return torch::from_blob(values.data(), shape, torch::kLong).clone();
}

TorchBatch to_torch(const data::TokenBatch& batch) { return {to_torch(batch.input), to_torch(batch.target)}; }

std::vector<TorchBatch> to_torch(const std::vector<data::TokenBatch>& batches) {
  std::vector<TorchBatch> out;
  out.reserve(batches.size());
  for (const data::TokenBatch& b : batches) out.push_back(to_torch(b));
  return out;
}

// ---------------------------------------------------------------- training pieces

// Token-weighted mean cross-entropy (nats) over the batches, in eval mode without gradients.
double heldout_loss(bench::LanguageModel& model, const std::vector<TorchBatch>& batches, std::int64_t* tokens) {
  torch::NoGradGuard no_grad;
  model->eval();
  double sum = 0.0;
  std::int64_t count = 0;
  for (const TorchBatch& b : batches) {
    const auto logits = model(b.input);  // (B, T, V)
    sum += torch::nn::functional::cross_entropy(logits.reshape({-1, kVocab}), b.target.reshape({-1}),
                                                torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
               .item<double>();
    count += b.target.numel();
  }
  model->train();
  if (tokens) *tokens = count;
  return count > 0 ? sum / static_cast<double>(count) : std::numeric_limits<double>::quiet_NaN();
}

// Trainer::progress: the fraction of training done once the step about to run ends, by steps or by time.
double progress_fraction(const LmConfig& c, std::int64_t step, double elapsed_s) {
  double done = static_cast<double>(step + 1) / static_cast<double>(c.steps);
  if (c.time_budget_s > 0) done = std::max(done, elapsed_s / c.time_budget_s);
  return std::clamp(done, 0.0, 1.0);
}

void set_lr(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
}

// The steps since the previous metrics line.
struct Window {
  Clock::time_point start = Clock::now();
  std::int64_t steps = 0;
  double loss_sum = 0.0;
};

struct StepRecord {
  double loss = 0.0, lr = 0.0, grad_norm = 0.0;
};

struct RunResult {
  std::int64_t steps = 0;
  double train_seconds = 0.0;  // the loop, its evaluations included (the Trainer's total_seconds)
  double step_seconds = 0.0;   // the training steps alone
  double last_logged_loss = 0.0;
  std::string stop_reason;
};

// The training loop of train::Trainer::fit, without checkpoints: a metrics line every log_every steps and at
// the last, an evaluation on the periodic windows every eval_every steps and at the last.
class Training {
 public:
  Training(const LmConfig& c, const data::TokenStream& train, std::vector<TorchBatch> eval_batches,
           const examples::RunDir& run)
      : c_(c),
        train_(train),
        eval_batches_(std::move(eval_batches)),
        model_(bench::LanguageModelOptions{kVocab, c.context, c.d_model, c.heads, c.layers, c.ff_hidden, c.dropout}),
        optimizer_(model_->parameters(),
                   torch::optim::AdamWOptions(c.lr).betas({0.9, 0.999}).eps(1e-8).weight_decay(c.weight_decay)),
        schedule_(optim::warmup_cosine(c.warmup_fraction, c.min_lr_ratio)),
        metrics_(run.file("metrics.jsonl")),
        progress_(train::parse_progress(c.progress), &std::cerr, c.steps, 0, train.batches_per_epoch()) {
    if (c.time_budget_s > 0) progress_.set_time_budget(c.time_budget_s, 0.0);
  }

  bench::LanguageModel& model() { return model_; }

  RunResult run() {
    const Clock::time_point start = Clock::now();
    RunResult result;
    model_->train();
    Window window;
    double elapsed = 0.0;  // after the last step, as the Trainer measures it
    for (std::int64_t step = 1;; ++step) {
      const Clock::time_point step_start = Clock::now();
      const StepRecord record = run_step(step - 1, elapsed);
      result.step_seconds += seconds_since(step_start);
      window.loss_sum += record.loss;
      ++window.steps;
      elapsed = seconds_since(start);
      std::optional<std::string> stop;
      if (step >= c_.steps) stop = "max_steps";
      else if (c_.time_budget_s > 0 && elapsed >= c_.time_budget_s) stop = "time_budget";

      const bool log_due = step % c_.log_every == 0;
      if (log_due || stop) result.last_logged_loss = log_step(step, record, window, elapsed, !log_due);
      progress_.update(step, record.loss, record.lr, record.grad_norm, log_due || stop);
      const bool eval_due = c_.eval_every > 0 && step % c_.eval_every == 0;
      if (eval_due || stop) evaluate(step, elapsed, !eval_due);
      if (stop) {
        result.steps = step;
        result.stop_reason = *stop;
        break;
      }
    }
    if (result.stop_reason != "max_steps")
      progress_.message("stopped at step " + std::to_string(result.steps) + ": " + result.stop_reason);
    progress_.finish();
    result.train_seconds = seconds_since(start);
    return result;
  }

 private:
  // One optimiser step on batch_at(index); elapsed_s is the training time before it.
  StepRecord run_step(std::int64_t index, double elapsed_s) {
    StepRecord record;
    record.lr = c_.lr * schedule_(progress_fraction(c_, index, elapsed_s));
    set_lr(optimizer_, record.lr);
    optimizer_.zero_grad();
    const TorchBatch batch = to_torch(train_.batch_at(index));
    const auto logits = model_(batch.input);  // (B, T, V)
    const auto loss = torch::nn::functional::cross_entropy(logits.reshape({-1, kVocab}), batch.target.reshape({-1}));
    record.loss = loss.item<double>();
    if (!std::isfinite(record.loss))
      throw std::runtime_error("non-finite loss " + format_number(record.loss) + " at step " +
                               std::to_string(index + 1));
    loss.backward();
    const double max_norm = c_.clip_grad_norm > 0 ? c_.clip_grad_norm : std::numeric_limits<double>::infinity();
    record.grad_norm = torch::nn::utils::clip_grad_norm_(model_->parameters(), max_norm);
    if (!std::isfinite(record.grad_norm))
      throw std::runtime_error("non-finite gradient norm " + format_number(record.grad_norm) + " at step " +
                               std::to_string(index + 1));
    optimizer_.step();
    return record;
  }

  // The Trainer's training line; returns its (interval mean) loss.
  double log_step(std::int64_t step, const StepRecord& record, Window& window, double elapsed_s, bool end_of_run) {
    const double seconds = std::max(seconds_since(window.start), 1e-9);
    const auto examples = static_cast<double>(window.steps * c_.batch_size);
    const double loss = window.loss_sum / static_cast<double>(window.steps);
    nlohmann::ordered_json line;
    line["step"] = step;
    line["epoch"] = static_cast<double>(step) / static_cast<double>(train_.batches_per_epoch());
    line["loss"] = loss;
    line["step_loss"] = record.loss;
    line["lr"] = record.lr;
    line["grad_norm"] = record.grad_norm;
    line["examples_per_s"] = examples / seconds;
    line["tokens_per_s"] = examples * static_cast<double>(c_.context) / seconds;
    line["elapsed_s"] = elapsed_s;
    if (end_of_run) line["end_of_run"] = true;
    metrics_.append(line.dump());
    window = Window();
    return loss;
  }

  // The Trainer's evaluation line, with the metrics language_model's eval_fn returns.
  void evaluate(std::int64_t step, double elapsed_s, bool end_of_run) {
    const double loss = heldout_loss(model_, eval_batches_, nullptr);
    const std::map<std::string, double> metrics{{"val_loss", loss}, {"val_bpc", loss / std::log(2.0)}};
    nlohmann::ordered_json line;
    line["step"] = step;
    line["eval"] = metrics;
    line["elapsed_s"] = elapsed_s;
    if (end_of_run) line["end_of_run"] = true;
    metrics_.append(line.dump());
    std::string text = "eval step " + std::to_string(step) + ':';
    for (const auto& [name, value] : metrics) text += ' ' + name + ' ' + format_significant(value, 5);
    progress_.message(text);
  }

  const LmConfig& c_;
  const data::TokenStream& train_;
  std::vector<TorchBatch> eval_batches_;
  bench::LanguageModel model_;
  torch::optim::AdamW optimizer_;
  optim::FractionSchedule schedule_;
  train::MetricsFile metrics_;
  train::ProgressDisplay progress_;
};

// ---------------------------------------------------------------- main

int run(const LmConfig& c, const examples::Config& config, int threads) {
  // tapegrad's thread pool (it cuts the token windows) sets OpenBLAS to one thread when it starts; start
  // it now with one thread so that it stays idle, then give libtorch and OpenBLAS their threads.
  tapegrad::set_num_threads(1);
  bench::set_libtorch_threads(threads);
  torch::manual_seed(static_cast<std::uint64_t>(c.seed));

  const examples::LmCorpus corpus =
      examples::kjv_corpus(examples::load_bible(c.data), examples::split_books(c.heldout_books));
  const auto options =
      data::TokenStreamOptions().batch_size(c.batch_size).context(c.context).seed(static_cast<std::uint64_t>(c.seed));
  const data::TokenStream train(examples::byte_tokens(corpus.train_text), options);
  const data::TokenStream heldout_stream(examples::byte_tokens(corpus.heldout_text), options);
  std::cerr << kProgram << ": " << train.size() << " training bytes, " << heldout_stream.size() << " held-out bytes ("
            << heldout_stream.eval_windows(0) << " windows of " << c.context << "); libtorch "
            << TAPEGRAD_LIBTORCH_VERSION << ", " << torch::get_num_threads() << " threads, OpenBLAS "
            << bench::openblas_threads() << " threads, OMP_WAIT_POLICY="
            << (std::getenv("OMP_WAIT_POLICY") ? std::getenv("OMP_WAIT_POLICY") : "unset") << "\n";

  const examples::RunDir run_dir(c.run_dir);
  run_dir.clear_previous_run();
  run_dir.write_config(config);
  Training training(c, train, to_torch(heldout_stream.eval_batches(c.eval_windows)), run_dir);
  const RunResult r = training.run();
  // The final measure reads every held-out window, after the timed run (as language_model does).
  std::int64_t heldout_tokens = 0;
  const double heldout = heldout_loss(training.model(), to_torch(heldout_stream.eval_batches()), &heldout_tokens);

  const double tokens = static_cast<double>(r.steps * c.batch_size * c.context);
  nlohmann::ordered_json summary;
  summary["framework"] = std::string("libtorch ") + TAPEGRAD_LIBTORCH_VERSION;
  summary["steps"] = r.steps;
  summary["stop_reason"] = r.stop_reason;
  summary["train_seconds"] = r.train_seconds;
  summary["step_seconds"] = r.step_seconds;
  summary["tokens_per_s"] = r.train_seconds > 0 ? tokens / r.train_seconds : 0.0;
  summary["step_tokens_per_s"] = r.step_seconds > 0 ? tokens / r.step_seconds : 0.0;
  summary["heldout_loss"] = heldout;
  summary["heldout_bpc"] = heldout / std::log(2.0);
  summary["heldout_windows"] = heldout_stream.eval_windows();
  summary["heldout_tokens"] = heldout_tokens;
  summary["train_loss"] = r.last_logged_loss;
  summary["final_train_loss"] = r.last_logged_loss;
  summary["epochs"] = tokens / static_cast<double>(train.size());
  std::int64_t parameters = 0;
  for (const auto& p : training.model()->parameters()) parameters += p.numel();
  summary["parameters"] = parameters;
  summary["attention"] = c.attention;
  summary["positions"] = c.positions;
  summary["threads"] = threads;
  run_dir.write_summary(summary);
  run_dir.write_loss_plot("libtorch language model: loss");
  std::cerr << kProgram << ": " << r.steps << " steps in " << format_fixed(r.train_seconds, 1) << " s ("
            << format_fixed(1000.0 * r.step_seconds / static_cast<double>(r.steps), 1) << " ms per training step, "
            << format_fixed(summary["tokens_per_s"].get<double>(), 0) << " tokens/s with evaluations); held-out loss "
            << format_fixed(heldout, 4) << " nats/byte (" << format_fixed(heldout / std::log(2.0), 4)
            << " bits/char); files in " << c.run_dir << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  LmConfig defaults;
  defaults.run_dir = "runs/language_model_libtorch";
  examples::Config config = examples::make_config<LmConfig>(
      kProgram, "The language-model experiment (examples/language_model) trained with libtorch.", defaults);
  config.add_int("threads", 2, "libtorch's and OpenBLAS's threads (this program only)");
  const int parsed = examples::parse_command_line(config, argc, argv, 1, nullptr);
  if (parsed >= 0) return parsed;
  try {
    const LmConfig c = examples::read_config<LmConfig>(config);
    check_options(c);
    const std::int64_t threads = config.get_int("threads");
    examples::require(threads >= 1, kProgram, "--threads must be at least 1, got " + std::to_string(threads));
    return run(c, config, static_cast<int>(threads));
  } catch (const examples::ConfigError& e) {
    std::cerr << e.what() << "\n";
    return examples::kConfigErrorExit;
  } catch (const std::exception& e) {
    std::cerr << kProgram << ": " << e.what() << "\n";
    return 1;
  }
}
