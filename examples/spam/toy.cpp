// spam_classifier toy: the lecture's first exercise, exactly. Four sentences, "you want a billion
// dollars", "click here for midterm answers", "send me your bank account info" (spam) and "read
// important cs685 news" (not spam); Embedding(V, 20), one attention head with q, k, v = Linear(20, 20,
// no bias), softmax(q k^T) v, mean over tokens, Linear(20, 2), cross-entropy, SGD lr 0.1, one sentence
// per step. The loss falls to near zero (the network memorises the four sentences).

#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "examples/common/run_dir.h"
#include "examples/spam/spam_model.h"
#include "tapegrad/optim/optim.h"
#include "tapegrad/train/trainer.h"

namespace tapegrad::examples::spam {

namespace {

// spam_classifier toy: every key once, the defaults as initialisers (examples/configs/spam_toy.json).
struct ToyConfig {
  std::int64_t seed = 0;
  std::int64_t embedding_dim = 20;
  double lr = 0.1;
  std::int64_t steps = 400;
  std::int64_t log_every = 4;
  bool scale_scores = false;
  std::string run_dir = "runs/spam_toy";
  std::string progress = "auto";
  std::string precision = "float32";

  template <class F>
  static void fields(F& f) {
    using C = ToyConfig;
    f("seed", &C::seed, "seed of the initial weights");
    f("embedding_dim", &C::embedding_dim, "embedding and attention width");
    f("lr", &C::lr, "SGD learning rate");
    f("steps", &C::steps, "optimiser steps, one sentence each, cycling through the four");
    f("log_every", &C::log_every, "steps between metrics.jsonl lines");
    f("scale_scores", &C::scale_scores,
      "divide the attention scores by sqrt(embedding_dim) (the transformer's scaled dot product; the "
      "lecture's toy uses the plain one)");
    f("run_dir", &C::run_dir, "where the run's files go");
    f("progress", &C::progress, "progress display", train::progress_names());
    f("precision", &C::precision, "float32, or bf16: forward passes under bfloat16 autocast, weights float32",
      {"float32", "bf16"});
  }
};

// Embedding -> single-head self-attention -> mean over tokens -> Linear(dim, 2). The lecture's
// attention is the plain dot product softmax(q k^T) v; scale_scores divides by sqrt(dim).
class ToyAttentionClassifier : public nn::Module {
 public:
  // Weights from the default generator (seeded by the caller).
  ToyAttentionClassifier(std::int64_t vocab, std::int64_t dim, bool scale_scores)
      : dim_(dim),
        scale_scores_(scale_scores),
        embedding_(register_module("embedding", nn::Embedding(vocab, dim))),
        q_(register_module("q", nn::Linear(nn::LinearOptions(dim, dim).bias(false)))),
        k_(register_module("k", nn::Linear(nn::LinearOptions(dim, dim).bias(false)))),
        v_(register_module("v", nn::Linear(nn::LinearOptions(dim, dim).bias(false)))),
        out_(register_module("out", nn::Linear(dim, 2))) {}

  // tokens: Int64 (T) -> logits (1, 2)
  Tensor forward(const Tensor& tokens) {
    const Tensor x = embedding_(tokens);           // (T, d)
    const Tensor q = q_(x), k = k_(x), v = v_(x);  // (T, d) each
    Tensor scores = q.matmul(k.mT());              // (T, T)
    if (scale_scores_) scores = scores / std::sqrt(static_cast<double>(dim_));
    const Tensor attended = scores.softmax(-1).matmul(v);  // (T, d)
    return out_(attended.mean({0})).unsqueeze(0);          // (d) -> (1, 2)
  }

 private:
  std::int64_t dim_;
  bool scale_scores_;
  nn::Embedding embedding_;
  nn::Linear q_, k_, v_, out_;
};

}  // namespace

Config toy_config() {
  return make_config<ToyConfig>("spam_classifier toy",
                                "the lecture's single-head self-attention spam toy on four sentences");
}

int run_toy(const Config& parsed) {
  const ToyConfig config = read_config<ToyConfig>(parsed);
  require_positive("spam_classifier", config, &ToyConfig::embedding_dim, &ToyConfig::steps, &ToyConfig::log_every);
  require(config.lr > 0, "spam_classifier", "--lr must be positive" + got(config, &ToyConfig::lr));
  const std::vector<std::string> sentences = {"you want a billion dollars", "click here for midterm answers",
                                              "send me your bank account info", "read important cs685 news"};
  const std::vector<std::int64_t> labels = {1, 1, 1, 0};
  // Word ids in order of first appearance, as the lecture's notebook builds them.
  std::map<std::string, std::int64_t> vocab;
  std::vector<Tensor> inputs;
  for (const std::string& sentence : sentences) {
    std::vector<std::int64_t> ids;
    for (const std::string& word : data::word_tokenize(sentence))
      ids.push_back(vocab.emplace(word, vocab.size()).first->second);
    inputs.push_back(from_vector(ids, {static_cast<std::int64_t>(ids.size())}));
  }
  manual_seed(static_cast<std::uint64_t>(config.seed));
  ToyAttentionClassifier model(static_cast<std::int64_t>(vocab.size()), config.embedding_dim, config.scale_scores);
  optim::SGD optimizer(model.parameters(), optim::SGDOptions(config.lr));

  // Mean cross-entropy over the four sentences, and the spam probability of each.
  auto evaluate = [&](std::vector<double>* p_spam) {
    NoGradGuard no_grad;
    double total = 0;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const Tensor logits = model.forward(inputs[i]);
      total += nn::cross_entropy(logits, from_vector(std::vector<std::int64_t>{labels[i]}, {1})).item();
      if (p_spam) p_spam->push_back(logits.softmax(-1).at({0, 1}));
    }
    return total / static_cast<double>(inputs.size());
  };
  const double initial_loss = evaluate(nullptr);

  RunDir run(config.run_dir);
  run.clear_previous_run();
  run.write_config(parsed);
  train::TrainerOptions options;
  options.max_steps = config.steps;
  options.log_every = config.log_every;
  options.run_dir = run.path();
  options.resume = false;
  options.progress = train::parse_progress(config.progress);
  options.precision = train::parse_precision(config.precision);
  train::Trainer trainer(model, optimizer, options);
  const train::TrainResult result = trainer.fit([&](std::int64_t step) {
    const std::size_t i = static_cast<std::size_t>(step % 4);
    const Tensor target = from_vector(std::vector<std::int64_t>{labels[i]}, {1});
    return train::StepOutput{nn::cross_entropy(model.forward(inputs[i]), target), 1, inputs[i].numel()};
  });

  std::vector<double> p_spam;
  const double final_loss = evaluate(&p_spam);
  nlohmann::json predictions = nlohmann::json::array();
  std::printf("\n%-34s label  p(spam)\n", "sentence");
  for (std::size_t i = 0; i < sentences.size(); ++i) {
    std::printf("%-34s %5lld  %.4f\n", sentences[i].c_str(), static_cast<long long>(labels[i]), p_spam[i]);
    predictions.push_back({{"sentence", sentences[i]}, {"label", labels[i]}, {"p_spam", p_spam[i]}});
  }
  std::printf("mean loss over the four sentences: %.4f before training, %.6f after %lld steps\n", initial_loss,
              final_loss, static_cast<long long>(result.steps));
  run.write_summary({{"final_loss", final_loss},
                     {"initial_loss", initial_loss},
                     {"last_step_loss", result.final_loss},
                     {"steps", result.steps},
                     {"train_seconds", result.total_seconds},
                     {"vocab_size", vocab.size()},
                     {"predictions", predictions}});
  run.write_loss_plot("spam toy: training loss (one sentence per step)");
  return 0;
}

}  // namespace tapegrad::examples::spam
