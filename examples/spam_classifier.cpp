// spam_classifier: self-attention for spam detection, from the lecture's four-sentence toy to a
// transformer encoder on the SpamAssassin corpus, measured against a Naive Bayes baseline.
//
//   spam_classifier toy      the lecture's first exercise, exactly: "you want a billion dollars",
//                            "click here for midterm answers", "send me your bank account info"
//                            (spam) and "read important cs685 news" (not spam); Embedding(V, 20),
//                            one attention head with q, k, v = Linear(20, 20, no bias),
//                            softmax(q k^T / sqrt(20)) v, mean over tokens, Linear(20, 2),
//                            cross-entropy, SGD lr 0.1, one sentence per step. The loss falls to
//                            near zero (the network memorises the four sentences).
//   spam_classifier [train]  the real corpus (6,046 emails, 31% spam), split 80/10/10 by a seeded
//                            stratified split. Model: word embeddings + positions -> pre-norm
//                            transformer encoder -> mean over the non-padding tokens -> Linear(d, 2),
//                            trained with AdamW, warm-up + cosine schedule, gradient clipping; the
//                            validation split picks the best checkpoint, the test split is scored
//                            once at the end: accuracy, precision, recall, F1, confusion matrix. A
//                            multinomial Naive Bayes on the same tokens and split is the baseline.
//   spam_classifier predict --run_dir DIR FILE...
//                            classifies email files (raw RFC 822 messages or corpus .json files)
//                            with a trained run: prints each file's label and spam probability.
//
// Files (run_dir): config.json, metrics.jsonl, checkpoint/, summary.json, loss.svg, and for
// train also vocab.json, best_model.safetensors (what predict loads) and best.json (its step and scores).
// train --stop_after K ends after step K with a checkpoint; train --resume true continues it (every
// other key must match the saved config.json) and ends as the uninterrupted run would.
// The corpus is fetched by scripts/fetch-spam-corpus.sh (see data/spam.h for where it goes).

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <initializer_list>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tapegrad/autograd/autograd.h"
#include "tapegrad/data/data.h"
#include "examples/common/config.h"
#include "examples/common/metrics.h"
#include "examples/common/naive_bayes.h"
#include "examples/common/run_dir.h"
#include "examples/common/spam_corpus.h"
#include "examples/common/svg.h"
#include "tapegrad/nn/nn.h"
#include "tapegrad/optim/optim.h"
#include "tapegrad/io/safetensors.h"
#include "tapegrad/train/trainer.h"

using namespace tapegrad;
using examples::Config;
using examples::ConfigError;

namespace {

using Clock = std::chrono::steady_clock;

train::Progress progress_mode(const std::string& name) {
  if (name == "bar") return train::Progress::Bar;
  if (name == "lines") return train::Progress::Lines;
  if (name == "off") return train::Progress::Off;
  return train::Progress::Auto;
}

void require(bool ok, const std::string& message) {
  if (!ok) throw ConfigError("spam_classifier: " + message);
}

// ---------------------------------------------------------------- toy: the lecture's exercise

void declare_toy_options(Config& config) {
  config.add_int("seed", 0, "seed of the initial weights");
  config.add_int("embedding_dim", 20, "embedding and attention width");
  config.add_float("lr", 0.1, "SGD learning rate");
  config.add_int("steps", 400, "optimiser steps, one sentence each, cycling through the four");
  config.add_int("log_every", 4, "steps between metrics.jsonl lines");
  config.add_bool("scale_scores", false,
                  "divide the attention scores by sqrt(embedding_dim) (the transformer's scaled dot product; the "
                  "lecture's toy uses the plain one)");
  config.add_string("run_dir", "runs/spam_toy", "where the run's files go");
  config.add_string("progress", "auto", "progress display", {"auto", "bar", "lines", "off"});
}

// Embedding -> single-head self-attention -> mean over tokens -> Linear(dim, 2). The lecture's
// attention is the plain dot product softmax(q k^T) v; scale_scores divides by sqrt(dim).
class ToyAttentionClassifier : public nn::Module {
 public:
  ToyAttentionClassifier(std::int64_t vocab, std::int64_t dim, bool scale_scores, Generator& gen)
      : dim_(dim),
        scale_scores_(scale_scores),
        embedding_(register_module("embedding", std::make_shared<nn::Embedding>(vocab, dim, gen))),
        q_(register_module("q", std::make_shared<nn::Linear>(dim, dim, gen, /*bias=*/false))),
        k_(register_module("k", std::make_shared<nn::Linear>(dim, dim, gen, /*bias=*/false))),
        v_(register_module("v", std::make_shared<nn::Linear>(dim, dim, gen, /*bias=*/false))),
        out_(register_module("out", std::make_shared<nn::Linear>(dim, 2, gen))) {}

  // tokens: Int64 (T) -> logits (1, 2)
  Tensor forward(const Tensor& tokens) {
    const Tensor x = (*embedding_)(tokens);                                      // (T, d)
    const Tensor q = (*q_)(x), k = (*k_)(x), v = (*v_)(x);                       // (T, d) each
    Tensor scores = q.matmul(k.mT());  // (T, T)
    if (scale_scores_) scores = scores / std::sqrt(static_cast<double>(dim_));
    const Tensor attended = scores.softmax(-1).matmul(v);                        // (T, d)
    return (*out_)(attended.mean({0})).unsqueeze(0);                             // (d) -> (1, 2)
  }

 private:
  std::int64_t dim_;
  bool scale_scores_;
  std::shared_ptr<nn::Embedding> embedding_;
  std::shared_ptr<nn::Linear> q_, k_, v_, out_;
};

int run_toy(const Config& config) {
  for (const char* key : {"embedding_dim", "steps", "log_every"})
    require(config.get_int(key) > 0,
            std::string("--") + key + " must be positive, got " + std::to_string(config.get_int(key)));
  require(config.get_float("lr") > 0, "--lr must be positive, got " + nlohmann::json(config.get_float("lr")).dump());
  const std::vector<std::string> sentences = {"you want a billion dollars", "click here for midterm answers",
                                              "send me your bank account info", "read important cs685 news"};
  const std::vector<std::int64_t> labels = {1, 1, 1, 0};
  // Word ids in order of first appearance, as the lecture's notebook builds them.
  std::map<std::string, std::int64_t> vocab;
  std::vector<Tensor> inputs;
  for (const std::string& sentence : sentences) {
    std::vector<std::int64_t> ids;
    for (const std::string& word : data::word_tokenize(sentence)) ids.push_back(vocab.emplace(word, vocab.size()).first->second);
    inputs.push_back(from_vector(ids, {static_cast<std::int64_t>(ids.size())}));
  }
  Generator gen(static_cast<std::uint64_t>(config.get_int("seed")));
  ToyAttentionClassifier model(static_cast<std::int64_t>(vocab.size()), config.get_int("embedding_dim"),
                               config.get_bool("scale_scores"), gen);
  optim::SGDOptions sgd;
  sgd.lr = config.get_float("lr");
  optim::SGD optimizer(model.parameters(), sgd);

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

  examples::RunDir run(config.get_string("run_dir"));
  run.clear_previous_run();
  run.write_config(config);
  train::TrainerOptions options;
  options.max_steps = config.get_int("steps");
  options.log_every = config.get_int("log_every");
  options.run_dir = run.path();
  options.resume = false;
  options.progress = progress_mode(config.get_string("progress"));
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

// ---------------------------------------------------------------- train: the real corpus

void declare_train_options(Config& config) {
  config.add_string("data_dir", "", "corpus folder (empty: $TAPEGRAD_DATA/spam-assassin or data/corpora/spam-assassin)");
  config.add_int("seed", 0, "seed of the split, the batches and the initial weights");
  config.add_float("train_fraction", 0.8, "fraction of each class used for training");
  config.add_float("validation_fraction", 0.1, "fraction of each class used for validation (the rest is test)");
  config.add_int("vocab_size", 20000, "vocabulary size including the 4 special tokens");
  config.add_int("min_freq", 2, "words seen fewer times in the training split are <unk>");
  config.add_int("max_length", 256, "tokens kept from the start of each email (subject first)");
  config.add_string("positions", "learned", "position encoding", {"learned", "sinusoidal"});
  config.add_int("d_model", 64, "model width");
  config.add_int("heads", 4, "attention heads");
  config.add_int("layers", 2, "encoder layers");
  config.add_int("ff_hidden", 256, "hidden size of the feed-forward sublayers (GELU)");
  config.add_float("dropout", 0.2, "dropout probability (embeddings, attention, sublayers)");
  config.add_int("batch_size", 32, "emails per step");
  config.add_int("steps", 700, "optimiser steps");
  config.add_float("lr", 2e-3, "peak AdamW learning rate");
  config.add_float("weight_decay", 0.1, "AdamW decoupled weight decay (not on biases, norms, positions)");
  config.add_int("warmup_steps", 50, "linear warm-up steps before the cosine decay");
  config.add_float("min_lr_ratio", 0.05, "final learning rate as a fraction of the peak");
  config.add_float("clip_grad_norm", 1.0, "global gradient-norm clip (0: off)");
  config.add_int("eval_every", 50, "steps between validation runs (best model kept)");
  config.add_int("log_every", 10, "steps between metrics.jsonl lines");
  config.add_int("eval_batch_size", 64, "emails per forward pass when evaluating");
  config.add_float("nb_alpha", 1.0, "Laplace smoothing of the Naive Bayes baseline");
  config.add_string("run_dir", "runs/spam_classifier", "where the run's files go");
  config.add_bool("resume", false, "continue the interrupted run in run_dir from its checkpoint (same config)");
  config.add_int("stop_after", 0, "stop after this many steps, checkpointed, for a later --resume true (0: run all)");
  config.add_int("checkpoint_every", 100,
                 "steps between checkpoints, so a killed run can --resume true (0: only at the end; a multiple of "
                 "--eval_every)");
  config.add_string("progress", "auto", "progress display", {"auto", "bar", "lines", "off"});
}

// Options of the model, read from a train configuration (also the one a run saved).
struct SpamModelOptions {
  std::int64_t vocab_size = 0;
  std::int64_t max_length = 256;
  bool learned_positions = true;
  nn::TransformerLayerOptions layer;
  std::int64_t layers = 2;
};

SpamModelOptions model_options(const Config& config, std::int64_t vocab_size) {
  SpamModelOptions o;
  o.vocab_size = vocab_size;
  o.max_length = config.get_int("max_length");
  o.learned_positions = config.get_string("positions") == "learned";
  o.layers = config.get_int("layers");
  o.layer.d_model = config.get_int("d_model");
  o.layer.num_heads = config.get_int("heads");
  o.layer.ff_hidden = config.get_int("ff_hidden");
  o.layer.activation = nn::Activation::GELU;
  o.layer.dropout = config.get_float("dropout");
  o.layer.norm_first = true;
  return o;
}

// Word embeddings + positions -> encoder -> masked mean pool -> Linear(d, 2).
// Children: "tok_emb", "pos", "emb_dropout", "encoder", "head".
class SpamTransformer : public nn::Module {
 public:
  SpamTransformer(const SpamModelOptions& o, Generator& gen) : d_model_(o.layer.d_model) {
    tok_emb_ = register_module("tok_emb", std::make_shared<nn::Embedding>(o.vocab_size, d_model_, gen, data::Vocab::kPad));
    if (o.learned_positions)
      pos_ = register_module("pos", std::make_shared<nn::LearnedPositionEmbedding>(o.max_length, d_model_, gen));
    else
      pos_ = register_module("pos", std::make_shared<nn::SinusoidalPositionalEncoding>(o.max_length, d_model_));
    emb_dropout_ = register_module("emb_dropout", std::make_shared<nn::Dropout>(o.layer.dropout, gen.next_u64()));
    encoder_ = register_module("encoder", std::make_shared<nn::TransformerEncoder>(o.layers, o.layer, gen));
    head_ = register_module("head", std::make_shared<nn::Linear>(d_model_, 2, gen));
  }

  // tokens: Int64 (B, T), padding_mask: Bool (B, T), true = padding -> logits (B, 2)
  Tensor forward(const Tensor& tokens, const Tensor& padding_mask) {
    const Tensor x = (*emb_dropout_)((*pos_)((*tok_emb_)(tokens)));  // (B, T, d)
    const Tensor h = (*encoder_)(x, padding_mask);                     // (B, T, d)
    const Tensor keep = logical_not(padding_mask).to(h.dtype()).unsqueeze(-1);  // (B, T, 1)
    const Tensor count = clamp(keep.sum({1}), 1.0, std::nullopt);               // (B, 1)
    return (*head_)((h * keep).sum({1}) / count);                              // (B, d) -> (B, 2)
  }

 private:
  std::int64_t d_model_;
  std::shared_ptr<nn::Embedding> tok_emb_;
  std::shared_ptr<nn::UnaryModule> pos_;
  std::shared_ptr<nn::Dropout> emb_dropout_;
  std::shared_ptr<nn::TransformerEncoder> encoder_;
  std::shared_ptr<nn::Linear> head_;
};

struct Prediction {
  std::vector<std::int64_t> labels;
  std::vector<double> p_spam;
  double loss = 0;  // mean cross-entropy when the rows have labels
};

// Runs the model over `rows` of the loader's dataset in eval mode, without gradients.
Prediction predict_rows(SpamTransformer& model, const data::DataLoader& loader, const std::vector<std::size_t>& rows,
                        std::int64_t batch_size) {
  NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  Prediction out;
  double loss_sum = 0;
  std::int64_t labelled = 0;
  for (std::size_t start = 0; start < rows.size(); start += static_cast<std::size_t>(batch_size)) {
    const std::vector<std::size_t> chunk(rows.begin() + static_cast<std::ptrdiff_t>(start),
                                         rows.begin() + static_cast<std::ptrdiff_t>(std::min(rows.size(), start + static_cast<std::size_t>(batch_size))));
    const data::Batch batch = loader.collate(chunk);
    const Tensor logits = model.forward(batch.input, batch.padding_mask);  // (B, 2)
    const Tensor p = logits.softmax(-1);
    for (std::int64_t i = 0; i < batch.size(); ++i) {
      out.p_spam.push_back(p.at({i, 1}));
      out.labels.push_back(p.at({i, 1}) > 0.5 ? 1 : 0);
    }
    if (batch.labels.defined()) {
      nn::CrossEntropyOptions sum;
      sum.reduction = nn::Reduction::Sum;
      loss_sum += nn::cross_entropy(logits, batch.labels, sum).item();
      labelled += batch.size();
    }
  }
  out.loss = labelled ? loss_sum / static_cast<double>(labelled) : 0.0;
  model.train(was_training);
  return out;
}

std::vector<std::int64_t> labels_of(const data::Dataset& dataset, const std::vector<std::size_t>& rows) {
  std::vector<std::int64_t> out;
  for (const std::size_t r : rows) out.push_back(dataset[r].label);
  return out;
}

// The words of an email the classifier reads: its subject and cleaned body.
std::vector<std::string> email_tokens(const examples::Email& email) { return data::word_tokenize(email.text()); }

// ", got --a 1, --b 2": the values a message about these keys is about.
std::string got(const Config& config, std::initializer_list<const char*> keys) {
  const nlohmann::json values = config.to_json();
  std::string out;
  for (const char* key : keys) out += std::string(out.empty() ? ", got --" : ", --") + key + " " + values.at(key).dump();
  return out;
}

void validate_train(const Config& config) {
  for (const char* key : {"vocab_size", "max_length", "d_model", "heads", "layers", "ff_hidden", "batch_size", "steps",
                          "log_every", "eval_batch_size", "min_freq"})
    require(config.get_int(key) > 0, std::string("--") + key + " must be positive, got " + std::to_string(config.get_int(key)));
  require(config.get_int("vocab_size") > data::Vocab::kNumSpecials, "--vocab_size must exceed the 4 special tokens" + got(config, {"vocab_size"}));
  require(config.get_int("d_model") % config.get_int("heads") == 0, "--d_model must be a multiple of --heads" + got(config, {"d_model", "heads"}));
  require(config.get_int("eval_every") >= 0 && config.get_int("warmup_steps") >= 0, "--eval_every and --warmup_steps must be >= 0" + got(config, {"eval_every", "warmup_steps"}));
  require(config.get_int("warmup_steps") < config.get_int("steps"), "--warmup_steps must be less than --steps" + got(config, {"warmup_steps", "steps"}));
  const double train = config.get_float("train_fraction"), validation = config.get_float("validation_fraction");
  require(train > 0 && validation > 0 && train + validation < 1,
          "--train_fraction and --validation_fraction must be positive with a sum below 1" +
              got(config, {"train_fraction", "validation_fraction"}));
  require(config.get_float("lr") > 0, "--lr must be positive" + got(config, {"lr"}));
  require(config.get_float("dropout") >= 0 && config.get_float("dropout") < 1, "--dropout must be in [0, 1)" + got(config, {"dropout"}));
  require(config.get_float("min_lr_ratio") >= 0 && config.get_float("min_lr_ratio") <= 1, "--min_lr_ratio must be in [0, 1]" + got(config, {"min_lr_ratio"}));
  require(config.get_float("weight_decay") >= 0 && config.get_float("clip_grad_norm") >= 0,
          "--weight_decay and --clip_grad_norm must be >= 0" + got(config, {"weight_decay", "clip_grad_norm"}));
  require(config.get_float("nb_alpha") > 0, "--nb_alpha must be positive" + got(config, {"nb_alpha"}));
  const std::int64_t stop_after = config.get_int("stop_after"), eval_every = config.get_int("eval_every");
  require(stop_after >= 0 && stop_after <= config.get_int("steps"), "--stop_after must be in [0, --steps]" + got(config, {"stop_after", "steps"}));
  // The end of a call is always evaluated; off the schedule that evaluation could pick a best model the
  // uninterrupted run never sees.
  require(stop_after == 0 || eval_every == 0 || stop_after % eval_every == 0,
          "--stop_after must be a multiple of --eval_every, got " + std::to_string(stop_after) + " and " +
              std::to_string(eval_every));
  // Likewise a checkpoint must follow an evaluation: a run resumed from it then holds the best model
  // the uninterrupted run would have at that step.
  const std::int64_t checkpoint_every = config.get_int("checkpoint_every");
  require(checkpoint_every >= 0 && (checkpoint_every == 0 || eval_every == 0 || checkpoint_every % eval_every == 0),
          "--checkpoint_every must be 0 or a multiple of --eval_every, got " + std::to_string(checkpoint_every) +
              " and " + std::to_string(eval_every));
}

// A resumed run must be the run that was interrupted: every other key of its saved config must match.
void check_resume(const Config& config, const examples::RunDir& run) {
  require(run.exists("checkpoint") || run.exists("checkpoint.old"),
          "--resume true but " + run.path() + " holds no checkpoint/ to continue from");
  run.check_same_config(config, {"resume", "stop_after", "checkpoint_every", "progress"});
}

int run_train(const Config& config) {
  validate_train(config);
  const std::string data_dir = config.get_string("data_dir").empty() ? examples::default_spam_corpus_dir() : config.get_string("data_dir");
  std::vector<examples::Email> emails;
  try {
    emails = examples::load_spam_corpus(data_dir);
  } catch (const IoError& e) {
    std::cerr << "spam_classifier: " << e.what() << "\n"
              << "Fetch the corpus with scripts/fetch-spam-corpus.sh (or point --data_dir at a copy).\n";
    return 1;
  }
  const std::uint64_t seed = static_cast<std::uint64_t>(config.get_int("seed"));
  std::vector<std::vector<std::string>> docs;
  std::vector<std::int64_t> labels;
  for (const examples::Email& email : emails) {
    docs.push_back(email_tokens(email));
    labels.push_back(email.spam ? 1 : 0);
  }
  const data::Split split =
      data::stratified_split(labels, config.get_float("train_fraction"), config.get_float("validation_fraction"), seed);
  require(!split.train.empty() && !split.validation.empty() && !split.test.empty(),
          "the split of " + std::to_string(emails.size()) + " emails left a part empty");
  std::vector<std::vector<std::string>> train_docs;
  std::vector<std::int64_t> train_labels;
  for (const std::size_t r : split.train) {
    train_docs.push_back(docs[r]);
    train_labels.push_back(labels[r]);
  }

  examples::RunDir run(config.get_string("run_dir"));
  const bool resume = config.get_bool("resume");
  if (resume) {
    check_resume(config, run);
  } else {
    run.clear_previous_run();
    std::remove(run.file("best.json").c_str());  // a stale one would be taken for this run's best on resume
  }
  run.write_config(config);

  // Baseline: multinomial Naive Bayes over all the words of the training emails.
  const auto nb_start = Clock::now();
  examples::MultinomialNaiveBayes nb(config.get_float("nb_alpha"));
  nb.fit(train_docs, train_labels);
  std::vector<std::int64_t> nb_predicted, test_labels;
  for (const std::size_t r : split.test) {
    nb_predicted.push_back(nb.predict(docs[r]));
    test_labels.push_back(labels[r]);
  }
  const examples::BinaryMetrics nb_test = examples::binary_metrics(nb_predicted, test_labels);
  const double nb_seconds = std::chrono::duration<double>(Clock::now() - nb_start).count();
  std::fprintf(stderr, "spam_classifier: %zu emails (%zu train, %zu validation, %zu test); Naive Bayes test F1 %.4f\n",
               emails.size(), split.train.size(), split.validation.size(), split.test.size(), nb_test.f1());

  // The transformer reads the first max_length words, ids from the training split's vocabulary.
  data::VocabOptions vocab_options;
  vocab_options.min_freq = config.get_int("min_freq");
  vocab_options.max_size = config.get_int("vocab_size");
  const data::Vocab vocab = data::Vocab::build(train_docs, vocab_options);
  vocab.save(run.file("vocab.json"));
  const std::int64_t max_length = config.get_int("max_length");
  data::Dataset dataset;
  for (std::size_t i = 0; i < docs.size(); ++i) {
    std::vector<std::string> head(docs[i].begin(), docs[i].begin() + std::min<std::ptrdiff_t>(max_length, docs[i].size()));
    data::Example example;
    example.input = vocab.encode(head);
    if (example.input.empty()) example.input.push_back(data::Vocab::kUnk);  // an empty email still has one position
    example.label = labels[i];
    dataset.push_back(std::move(example));
  }
  data::Dataset train_set;
  for (const std::size_t r : split.train) train_set.push_back(dataset[r]);
  data::DataLoaderOptions loader_options;
  loader_options.batch_size = config.get_int("batch_size");
  loader_options.seed = seed;
  loader_options.max_length = max_length;
  const data::DataLoader train_loader(std::move(train_set), loader_options);
  data::DataLoaderOptions all_options = loader_options;
  all_options.shuffle = false;
  const data::DataLoader all_loader(dataset, all_options);

  Generator init(seed + 1);
  SpamTransformer model(model_options(config, vocab.size()), init);
  // No weight decay on biases, norms and position tables.
  std::vector<optim::ParamGroup> groups(2);
  groups[0].lr = groups[1].lr = config.get_float("lr");
  groups[0].weight_decay = config.get_float("weight_decay");
  for (const auto& [name, p] : model.named_parameters()) {
    const bool no_decay = p.dim() < 2 || name.find("norm") != std::string::npos || name.rfind("pos.", 0) == 0;
    groups[no_decay ? 1 : 0].params.push_back(p);
  }
  optim::AdamW optimizer(groups);
  optim::Scheduler scheduler(optimizer, optim::cosine_with_warmup(config.get_int("warmup_steps"), config.get_int("steps"),
                                                                  config.get_float("min_lr_ratio")));
  train::TrainerOptions options;
  // The schedule spans --steps either way; --stop_after only ends this call early.
  options.max_steps = config.get_int("stop_after") > 0 ? config.get_int("stop_after") : config.get_int("steps");
  options.steps_per_epoch = train_loader.batches_per_epoch();
  options.log_every = config.get_int("log_every");
  options.eval_every = config.get_int("eval_every");
  options.checkpoint_every = config.get_int("checkpoint_every");
  options.clip_grad_norm = config.get_float("clip_grad_norm");
  options.run_dir = run.path();
  options.resume = resume;
  options.progress = progress_mode(config.get_string("progress"));
  train::Trainer trainer(model, optimizer, options);
  trainer.set_scheduler(&scheduler);
  std::fprintf(stderr, "spam_classifier: vocabulary %lld words, model %lld parameters\n",
               static_cast<long long>(vocab.size()), static_cast<long long>(model.num_parameters()));

  const std::vector<std::int64_t> validation_labels = labels_of(dataset, split.validation);
  const std::string best_path = run.file("best_model.safetensors");
  const std::string best_json = run.file("best.json");
  double best_f1 = -1, best_loss = 0;
  std::int64_t best_step = -1;
  if (resume && run.exists("best.json")) {
    // The best model so far competes with the rest of the run, as it would have without the interruption.
    const nlohmann::json best = examples::read_json_file(best_json);
    auto field = [&](const char* key) {
      const auto it = best.is_object() ? best.find(key) : best.end();
      if (it == best.end() || !it->is_number())
        throw IoError("spam_classifier: " + best_json + ": field '" + key + "' is missing or not a number");
      return it->get<double>();
    };
    best_f1 = field("val_f1");
    best_loss = field("val_loss");
    best_step = static_cast<std::int64_t>(field("step"));
    if (!run.exists("best_model.safetensors"))
      throw IoError("spam_classifier: " + best_json + " names step " + std::to_string(best_step) + " but " + best_path +
                    " is missing");
  }
  const std::int64_t eval_batch = config.get_int("eval_batch_size");
  const train::TrainResult result = trainer.fit(
      [&](std::int64_t step) {
        const data::Batch batch = train_loader.batch_at(step);
        const Tensor logits = model.forward(batch.input, batch.padding_mask);
        return train::StepOutput{nn::cross_entropy(logits, batch.labels), batch.size(), batch.tokens};
      },
      [&](std::int64_t step) {
        const Prediction p = predict_rows(model, all_loader, split.validation, eval_batch);
        const examples::BinaryMetrics m = examples::binary_metrics(p.labels, validation_labels);
        // The best model: highest validation F1, the lower loss on ties.
        if (m.f1() > best_f1 || (m.f1() == best_f1 && p.loss < best_loss)) {
          best_f1 = m.f1();
          best_loss = p.loss;
          best_step = step;
          io::save_safetensors(best_path, model.state_dict(), {{"step", std::to_string(step)}});
          examples::write_json_atomic(best_json, {{"step", step}, {"val_f1", best_f1}, {"val_loss", best_loss}});
        }
        return std::map<std::string, double>{{"val_loss", p.loss}, {"val_accuracy", m.accuracy()}, {"val_f1", m.f1()}};
      });

  if (result.steps < config.get_int("steps")) {
    std::fprintf(stderr, "spam_classifier: stopped at step %lld of %lld; continue with --resume true\n",
                 static_cast<long long>(result.steps), static_cast<long long>(config.get_int("steps")));
    return 0;
  }
  io::load_into(model, best_path);
  const Prediction test = predict_rows(model, all_loader, split.test, eval_batch);
  const examples::BinaryMetrics test_metrics = examples::binary_metrics(test.labels, test_labels);
  std::printf("test (%zu emails, best validation F1 %.4f at step %lld):\n", split.test.size(), best_f1,
              static_cast<long long>(best_step));
  std::printf("  transformer  accuracy %.4f  precision %.4f  recall %.4f  F1 %.4f  confusion [[tn %lld, fp %lld], [fn %lld, tp %lld]]\n",
              test_metrics.accuracy(), test_metrics.precision(), test_metrics.recall(), test_metrics.f1(),
              static_cast<long long>(test_metrics.tn), static_cast<long long>(test_metrics.fp),
              static_cast<long long>(test_metrics.fn), static_cast<long long>(test_metrics.tp));
  std::printf("  naive Bayes  accuracy %.4f  precision %.4f  recall %.4f  F1 %.4f  confusion [[tn %lld, fp %lld], [fn %lld, tp %lld]]\n",
              nb_test.accuracy(), nb_test.precision(), nb_test.recall(), nb_test.f1(), static_cast<long long>(nb_test.tn),
              static_cast<long long>(nb_test.fp), static_cast<long long>(nb_test.fn), static_cast<long long>(nb_test.tp));
  std::printf("  training: %lld steps in %.1f s\n", static_cast<long long>(result.steps), result.total_seconds);

  run.write_summary({{"test_accuracy", test_metrics.accuracy()},
                     {"test_precision", test_metrics.precision()},
                     {"test_recall", test_metrics.recall()},
                     {"test_f1", test_metrics.f1()},
                     {"test_confusion", test_metrics.confusion()},
                     {"test_loss", test.loss},
                     {"baseline_nb_test_f1", nb_test.f1()},
                     {"baseline_nb_test", nb_test.to_json()},
                     {"baseline_nb_seconds", nb_seconds},
                     {"train_seconds", result.seconds},
                     {"steps", result.steps},
                     {"final_loss", result.final_loss},
                     {"best_step", best_step},
                     {"best_val_f1", best_f1},
                     {"best_val_loss", best_loss},
                     {"vocab_size", vocab.size()},
                     {"parameters", model.num_parameters()},
                     {"emails", {{"train", split.train.size()}, {"validation", split.validation.size()}, {"test", split.test.size()}}},
                     {"confusion_layout", "[[tn, fp], [fn, tp]]: rows actual (ham, spam), columns predicted"}});
  run.write_loss_plot("spam classifier: training and validation loss");
  return 0;
}

// ---------------------------------------------------------------- predict: a saved run on files

void declare_predict_options(Config& config) {
  config.add_string("run_dir", "runs/spam_classifier", "a finished train run (config.json, vocab.json, best_model.safetensors)");
  config.add_float("threshold", 0.5, "spam when the spam probability exceeds this");
}

int run_predict(const Config& config, const std::vector<std::string>& files) {
  require(!files.empty(), "predict needs at least one email file (spam_classifier predict [--run_dir DIR] FILE...)");
  const std::string run_dir = config.get_string("run_dir");
  std::error_code error;
  if (!std::filesystem::is_directory(run_dir, error))
    throw IoError("predict: the run directory " + run_dir + " does not exist (train a model first: spam_classifier train)");
  const examples::RunDir run(run_dir);
  // The run's own configuration decides the model; its keys are checked like a --config file.
  Config saved("spam_classifier", "");
  declare_train_options(saved);
  saved.merge_json(examples::read_json_file(run.file("config.json")), run.file("config.json"));
  const data::Vocab vocab = data::Vocab::load(run.file("vocab.json"));
  Generator unused(0);
  SpamTransformer model(model_options(saved, vocab.size()), unused);
  io::load_into(model, run.file("best_model.safetensors"));
  model.eval();
  NoGradGuard no_grad;
  const std::int64_t max_length = saved.get_int("max_length");
  int failures = 0;
  for (const std::string& file : files) {
    try {
      const std::vector<std::string> words = email_tokens(examples::read_email_file(file));
      std::vector<std::int64_t> ids = vocab.encode(
          std::vector<std::string>(words.begin(), words.begin() + std::min<std::ptrdiff_t>(max_length, words.size())));
      if (ids.empty()) ids.push_back(data::Vocab::kUnk);
      const std::int64_t n = static_cast<std::int64_t>(ids.size());
      const Tensor logits = model.forward(from_vector(ids, {1, n}), zeros({1, n}, kBool));
      const double p = logits.softmax(-1).at({0, 1});
      std::printf("%s\t%s\t%.4f\n", file.c_str(), p > config.get_float("threshold") ? "spam" : "ham", p);
    } catch (const Error& e) {
      std::fprintf(stderr, "spam_classifier: %s: %s\n", file.c_str(), e.what());
      ++failures;
    }
  }
  return failures ? 1 : 0;
}

const char* kUsage =
    "spam_classifier [toy|train|predict] [--config FILE] [--key value ...] [FILE ...]\n"
    "  toy      the lecture's four-sentence exercise\n"
    "  train    (default) transformer vs Naive Bayes on the SpamAssassin corpus\n"
    "  predict  classify email files with a trained run: predict [--run_dir DIR] FILE...\n"
    "Each mode has its own options: spam_classifier MODE --help";

}  // namespace

int main(int argc, char** argv) {
  std::string mode = "train";
  int first = 1;
  if (argc > 1 && argv[1][0] != '-') {
    mode = argv[1];
    first = 2;
  }
  if (mode != "toy" && mode != "train" && mode != "predict") {
    std::cerr << "spam_classifier: unknown mode \"" << mode << "\" (toy, train or predict)\n" << kUsage << "\n";
    return examples::kConfigErrorExit;
  }
  Config config("spam_classifier " + mode,
                mode == "toy"     ? "the lecture's single-head self-attention spam toy on four sentences"
                : mode == "train" ? "transformer encoder spam classifier on the SpamAssassin corpus, with a Naive Bayes baseline"
                                  : "classify email files with a trained run");
  if (mode == "toy") declare_toy_options(config);
  else if (mode == "train") declare_train_options(config);
  else declare_predict_options(config);
  std::vector<std::string> files;
  if (const int status = examples::parse_command_line(config, argc, argv, first, &files, kUsage,
                                                      mode == "predict" ? static_cast<std::size_t>(-1) : 0);
      status >= 0)
    return status;
  try {
    if (mode == "toy") return run_toy(config);
    if (mode == "train") return run_train(config);
    return run_predict(config, files);
  } catch (const ConfigError& e) {
    std::cerr << e.what() << "\n";
    return examples::kConfigErrorExit;
  } catch (const Error& e) {
    std::cerr << "spam_classifier: " << e.what() << "\n";
    return 1;
  }
}
