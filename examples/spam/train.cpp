// spam_classifier train: the real corpus (6,046 emails, 31% spam), split 80/10/10 by a seeded
// stratified split (--split_seed); --folds/--fold validate on one fold of a k-fold cross-validation of
// the training and validation emails instead, the test emails kept. Model (--model): word embeddings
// + positions -> pre-norm transformer encoder -> mean over the non-padding tokens -> Linear(d, 2),
// plus (wide_and_deep) or instead of it (linear) a logistic regression over the bag of the words of
// the email and its sender-side headers, trained with AdamW, warm-up + cosine schedule, gradient clipping;
// the validation split picks the best checkpoint, the test split is scored once at the end: accuracy,
// precision, recall, F1, confusion matrix. A multinomial Naive Bayes on the same tokens and split is the
// baseline.
//
// Files (run_dir): config.json, metrics.jsonl, checkpoint/, summary.json, loss.svg, vocab.json,
// features.json (the linear model's vocabulary), best_model.safetensors (what predict loads) and
// best.json (its step and scores).
// --stop_after K ends after step K with a checkpoint; --resume true continues it (every other key must
// match the saved config.json) and ends as the uninterrupted run would.

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "examples/common/data_parallel.h"
#include "examples/common/metrics.h"
#include "examples/common/naive_bayes.h"
#include "examples/common/run_dir.h"
#include "examples/spam/spam_model.h"
#include "examples/word2vec/trainer.h"
#include "tapegrad/data/prefetch.h"
#include "tapegrad/io/safetensors.h"
#include "tapegrad/optim/optim.h"
#include "tapegrad/train/trainer.h"

namespace tapegrad::examples::spam {

namespace {

using Clock = std::chrono::steady_clock;
using C = SpamTrainConfig;
const std::string kProgram = "spam_classifier";

void validate_train(const SpamTrainConfig& config) {
  require_positive(kProgram, config, &C::vocab_size, &C::max_length, &C::d_model, &C::heads, &C::layers, &C::ff_hidden,
                   &C::batch_size, &C::steps, &C::log_every, &C::eval_batch_size, &C::min_freq);
  require(config.vocab_size > data::Vocab::kNumSpecials, kProgram,
          "--vocab_size must exceed the 4 special tokens" + got(config, &C::vocab_size));
  require(config.d_model % config.heads == 0, kProgram,
          "--d_model must be a multiple of --heads" + got(config, &C::d_model, &C::heads));
  require(config.eval_every >= 0 && config.warmup_steps >= 0, kProgram,
          "--eval_every and --warmup_steps must be >= 0" + got(config, &C::eval_every, &C::warmup_steps));
  require(config.warmup_steps < config.steps, kProgram,
          "--warmup_steps must be less than --steps" + got(config, &C::warmup_steps, &C::steps));
  require(config.train_fraction > 0 && config.validation_fraction > 0 &&
              config.train_fraction + config.validation_fraction < 1,
          kProgram,
          "--train_fraction and --validation_fraction must be positive with a sum below 1" +
              got(config, &C::train_fraction, &C::validation_fraction));
  require(config.folds == 0 ? config.fold == 0 : config.folds >= 2 && config.fold >= 0 && config.fold < config.folds,
          kProgram, "--folds must be 0 or at least 2, with --fold in [0, --folds)" + got(config, &C::folds, &C::fold));
  require(config.lr > 0 && config.wide_lr > 0, kProgram,
          "--lr and --wide_lr must be positive" + got(config, &C::lr, &C::wide_lr));
  require(config.dropout >= 0 && config.dropout < 1, kProgram,
          "--dropout must be in [0, 1)" + got(config, &C::dropout));
  require(config.min_lr_ratio >= 0 && config.min_lr_ratio <= 1, kProgram,
          "--min_lr_ratio must be in [0, 1]" + got(config, &C::min_lr_ratio));
  require(config.weight_decay >= 0 && config.clip_grad_norm >= 0, kProgram,
          "--weight_decay and --clip_grad_norm must be >= 0" + got(config, &C::weight_decay, &C::clip_grad_norm));
  require(config.nb_alpha > 0, kProgram, "--nb_alpha must be positive" + got(config, &C::nb_alpha));
  const std::int64_t stop_after = config.stop_after, eval_every = config.eval_every;
  require(stop_after >= 0 && stop_after <= config.steps, kProgram,
          "--stop_after must be in [0, --steps]" + got(config, &C::stop_after, &C::steps));
  // The end of a call is always evaluated; off the schedule that evaluation could pick a best model the
  // uninterrupted run never sees.
  require(stop_after == 0 || eval_every == 0 || stop_after % eval_every == 0, kProgram,
          "--stop_after must be a multiple of --eval_every, got " + std::to_string(stop_after) + " and " +
              std::to_string(eval_every));
  // Likewise a checkpoint must follow an evaluation: a run resumed from it then holds the best model
  // the uninterrupted run would have at that step.
  const std::int64_t checkpoint_every = config.checkpoint_every;
  require(checkpoint_every >= 0 && (checkpoint_every == 0 || eval_every == 0 || checkpoint_every % eval_every == 0),
          kProgram,
          "--checkpoint_every must be 0 or a multiple of --eval_every, got " + std::to_string(checkpoint_every) +
              " and " + std::to_string(eval_every));
}

// Makes run_dir ready: a resumed run must be the run that was interrupted (every other key of its saved
// config must match); a fresh one removes what an earlier run left.
void prepare_run_dir(const Config& parsed, bool resume, const RunDir& run) {
  if (resume) {
    require(run.exists("checkpoint") || run.exists("checkpoint.old"), kProgram,
            "--resume true but " + run.path() + " holds no checkpoint/ to continue from");
    run.check_same_config(
        parsed, {key_of(&C::resume), key_of(&C::stop_after), key_of(&C::checkpoint_every), key_of(&C::progress)});
  } else {
    run.clear_previous_run();
    std::remove(run.file("best.json").c_str());      // a stale one would be taken for this run's best on resume
    std::remove(run.file("features.json").c_str());  // a transformer-only run writes none
  }
  run.write_config(parsed);
}

// The corpus as words and labels, split into train, validation and test rows.
struct Corpus {
  std::vector<std::vector<std::string>> docs;
  std::vector<std::int64_t> labels;
  data::Split split;
  std::vector<std::vector<std::string>> train_docs;
  std::vector<std::int64_t> train_labels;
};

Corpus split_corpus(const std::vector<Email>& emails, const SpamTrainConfig& config) {
  Corpus c;
  for (const Email& email : emails) c.labels.push_back(email.spam ? 1 : 0);
  c.split = data::stratified_split(c.labels, config.train_fraction, config.validation_fraction,
                                   static_cast<std::uint64_t>(config.split_seed));
  require(!c.split.train.empty() && !c.split.validation.empty() && !c.split.test.empty(), kProgram,
          "the split of " + std::to_string(emails.size()) + " emails left a part empty");
  if (config.folds > 0) {
    const std::size_t pool = c.split.train.size() + c.split.validation.size();
    require(static_cast<std::size_t>(config.folds) <= pool, kProgram,
            "--folds must be at most the " + std::to_string(pool) + " training and validation emails" +
                got(config, &C::folds));
    c.split = data::cross_validation_round(c.split, c.labels, config.folds, config.fold,
                                           static_cast<std::uint64_t>(config.split_seed));
  }
  for (const Email& email : emails) c.docs.push_back(email_tokens(email, config.headers));
  for (const std::size_t r : c.split.train) {
    c.train_docs.push_back(c.docs[r]);
    c.train_labels.push_back(c.labels[r]);
  }
  return c;
}

// The baseline: multinomial Naive Bayes over all the words of the training emails, scored on the test rows.
struct Baseline {
  BinaryMetrics validation, test;
  double seconds = 0;
};

Baseline naive_bayes_baseline(const Corpus& corpus, double alpha) {
  const auto start = Clock::now();
  MultinomialNaiveBayes nb(alpha);
  nb.fit(corpus.train_docs, corpus.train_labels);
  auto score = [&](const std::vector<std::size_t>& rows) {
    std::vector<std::int64_t> predicted, actual;
    for (const std::size_t r : rows) {
      predicted.push_back(nb.predict(corpus.docs[r]));
      actual.push_back(corpus.labels[r]);
    }
    return binary_metrics(predicted, actual);
  };
  const BinaryMetrics validation = score(corpus.split.validation), test = score(corpus.split.test);
  return {validation, test, std::chrono::duration<double>(Clock::now() - start).count()};
}

// A number field of a JSON file the run wrote: IoError naming the file and the field when it is missing or
// not a number.
double number_field(const nlohmann::json& j, const std::string& path, const char* key) {
  const auto it = j.is_object() ? j.find(key) : j.end();
  if (it == j.end() || !it->is_number())
    throw IoError("spam_classifier: " + path + ": field '" + key + "' is missing or not a number");
  return it->get<double>();
}

// word2vec pretraining of the word embeddings.
struct Pretraining {
  std::int64_t rows = 0;  // rows of the embedding table that took a word2vec vector
  std::int64_t words = 0;
  double seconds = 0, words_per_second = 0, final_loss = 0;

  nlohmann::json to_json() const {
    return {{"rows", rows},
            {"words", words},
            {"seconds", seconds},
            {"words_per_second", words_per_second},
            {"final_loss", final_loss}};
  }

  // What to_json wrote to path.
  static Pretraining load(const std::string& path) {
    const nlohmann::json j = io::read_json_file(path);
    Pretraining p;
    p.rows = static_cast<std::int64_t>(number_field(j, path, "rows"));
    p.words = static_cast<std::int64_t>(number_field(j, path, "words"));
    p.seconds = number_field(j, path, "seconds");
    p.words_per_second = number_field(j, path, "words_per_second");
    p.final_loss = number_field(j, path, "final_loss");
    return p;
  }
};

// Trains word2vec (pretrain_model, negative sampling, word2vec.c's other defaults, dim d_model) on the
// training emails, each a sentence of the tokens the classifier reads, and starts the row of each
// word both vocabularies hold at its vector, scaled so the vectors' root mean square equals that
// of the table's random rows (the other rows, the specials among them, keep theirs).
Pretraining pretrain_embeddings(const Corpus& corpus, const data::Vocab& vocab, const SpamTrainConfig& config,
                                const Tensor& table) {
  const word2vec::Vocabulary w2v_vocab = word2vec::build_vocabulary(corpus.train_docs, config.min_freq);
  word2vec::Word2VecOptions options;
  options.model = config.pretrain_model;
  options.dim = config.d_model;
  options.epochs = config.pretrain_epochs;
  options.seed = static_cast<std::uint64_t>(config.seed) + 2;
  const word2vec::Word2VecResult result =
      word2vec::train_word2vec(w2v_vocab.encode(corpus.train_docs), w2v_vocab, options);
  const Tensor vectors = result.vectors.contiguous();
  Tensor init = table.detach().clone().contiguous();
  const auto rms = [](const float* x, std::size_t n) {
    double sum = 0;
    for (std::size_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
    return std::sqrt(sum / static_cast<double>(std::max<std::size_t>(n, 1)));
  };
  const std::size_t d = static_cast<std::size_t>(config.d_model);
  const float* from = vectors.data_ptr<float>();
  float* to = init.data_ptr<float>();
  const double from_rms = rms(from, static_cast<std::size_t>(vectors.numel()));
  const double scale = from_rms > 0 ? rms(to, static_cast<std::size_t>(init.numel())) / from_rms : 0.0;
  Pretraining out;
  for (std::int64_t w = 0; w < w2v_vocab.size(); ++w) {
    const std::int64_t row = vocab.id(w2v_vocab.words[static_cast<std::size_t>(w)]);
    if (row < data::Vocab::kNumSpecials) continue;  // not in the classifier's vocabulary
    for (std::size_t k = 0; k < d; ++k)
      to[static_cast<std::size_t>(row) * d + k] = static_cast<float>(from[static_cast<std::size_t>(w) * d + k] * scale);
    ++out.rows;
  }
  NoGradGuard no_grad;
  table.copy_(init);
  out.words = result.words;
  out.seconds = result.seconds;
  out.words_per_second = result.words_per_second;
  out.final_loss = result.epoch_losses.back();
  return out;
}

// The best model so far (highest validation F1, the lower loss on ties), kept as best_model.safetensors
// and best.json in the run directory.
struct BestModel {
  std::string model_path, json_path;
  double f1 = -1, loss = 0;
  std::int64_t step = -1;

  bool writes = true;  // false on data-parallel ranks other than 0, which keep the figures only

  BestModel(const RunDir& run, bool writes_files)
      : model_path(run.file("best_model.safetensors")), json_path(run.file("best.json")), writes(writes_files) {}

  // On resume: the best model so far competes with the rest of the run, as it would have without the interruption.
  void restore() {
    const nlohmann::json best = io::read_json_file(json_path);
    f1 = number_field(best, json_path, "val_f1");
    loss = number_field(best, json_path, "val_loss");
    step = static_cast<std::int64_t>(number_field(best, json_path, "step"));
    if (!std::filesystem::exists(model_path))
      throw IoError(message("spam_classifier: ", json_path, " names step ", step, " but ", model_path, " is missing"));
  }

  void consider(std::int64_t at, double val_f1, double val_loss, nn::Module& model) {
    if (!(val_f1 > f1 || (val_f1 == f1 && val_loss < loss))) return;
    f1 = val_f1;
    loss = val_loss;
    step = at;
    if (!writes) return;
    io::save_safetensors(model_path, model.state_dict(), {{"step", std::to_string(at)}});
    write_json_atomic(json_path, {{"step", at}, {"val_f1", f1}, {"val_loss", loss}});
  }
};

// The emails of `rows` the model got wrong: group/id, the true class and the spam probability.
nlohmann::json mistakes(const std::vector<Email>& emails, const std::vector<std::size_t>& rows, const Prediction& p) {
  nlohmann::json out = nlohmann::json::array();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Email& email = emails[rows[i]];
    if (p.labels[i] == (email.spam ? 1 : 0)) continue;
    out.push_back({{"email", email.group + "/" + email.id}, {"spam", email.spam}, {"p_spam", p.p_spam[i]}});
  }
  return out;
}

void print_metrics(const char* name, const BinaryMetrics& m) {
  std::printf(
      "  %-13s  accuracy %.4f  precision %.4f  recall %.4f  F1 %.4f  confusion [[tn %lld, fp %lld], [fn %lld, tp "
      "%lld]]\n",
      name, m.accuracy(), m.precision(), m.recall(), m.f1(), static_cast<long long>(m.tn), static_cast<long long>(m.fp),
      static_cast<long long>(m.fn), static_cast<long long>(m.tp));
}

}  // namespace

Config train_config() {
  return make_config<SpamTrainConfig>(
      "spam_classifier train",
      "spam classifier on the SpamAssassin corpus (a transformer encoder, a linear model over the email's words and "
      "sender-side headers, or both), with a Naive Bayes baseline");
}

int run_train(const Config& parsed) {
  const SpamTrainConfig config = read_config<SpamTrainConfig>(parsed);
  validate_train(config);
  std::vector<Email> emails;
  try {
    emails = load_spam_corpus(config.data_dir.empty() ? default_spam_corpus_dir() : config.data_dir);
  } catch (const IoError& e) {
    std::cerr << "spam_classifier: " << e.what() << "\n"
              << "Fetch the corpus with scripts/fetch-spam-corpus.sh (or point --data_dir at a copy).\n";
    return 1;
  }
  const std::uint64_t seed = static_cast<std::uint64_t>(config.seed);
  const Corpus corpus = split_corpus(emails, config);
  const data::Split& split = corpus.split;
  // Under mpirun every process trains on its share of each global batch; rank 0 writes the files.
  DataParallel parallel = DataParallel::from_environment();
  RunDir run(config.run_dir);
  const bool resume = config.resume;
  if (parallel.is_main()) prepare_run_dir(parsed, resume, run);

  const Baseline nb = naive_bayes_baseline(corpus, config.nb_alpha);
  if (parallel.is_main()) {
    const std::string validation = config.folds > 0 ? "validation (fold " + std::to_string(config.fold) + " of " +
                                                          std::to_string(config.folds) + ")"
                                                    : "validation";
    std::fprintf(stderr, "spam_classifier: %zu emails (%zu train, %zu %s, %zu test); Naive Bayes validation F1 %.4f\n",
                 emails.size(), split.train.size(), split.validation.size(), validation.c_str(), split.test.size(),
                 nb.validation.f1());
  }

  // The transformer reads the first max_length words, ids from the training split's vocabulary.
  data::VocabOptions vocab_options;
  vocab_options.min_freq = config.min_freq;
  vocab_options.max_size = config.vocab_size;
  const data::Vocab vocab = data::Vocab::build(corpus.train_docs, vocab_options);
  if (parallel.is_main()) vocab.save(run.file("vocab.json"));
  data::Dataset dataset;
  for (std::size_t i = 0; i < corpus.docs.size(); ++i) {
    data::Example example;
    example.input = encode_words(corpus.docs[i], vocab, config.max_length);
    example.label = corpus.labels[i];
    dataset.push_back(std::move(example));
  }
  data::Dataset train_set;
  for (const std::size_t r : split.train) train_set.push_back(dataset[r]);
  data::DataLoaderOptions loader_options;
  loader_options.batch_size = config.batch_size;
  loader_options.seed = seed;
  loader_options.max_length = config.max_length;
  data::DataLoaderOptions all_options = loader_options;
  loader_options.num_replicas = parallel.size();  // batch_size is the global batch
  loader_options.rank = parallel.rank();
  const data::DataLoader train_loader(std::move(train_set), loader_options);
  all_options.shuffle = false;
  const data::DataLoader all_loader(dataset, all_options);

  // The linear model's features: those of at least min_freq training emails.
  data::Vocab feature_vocab;
  std::vector<std::vector<std::int64_t>> features;
  if (config.model != "transformer") {
    feature_vocab = build_feature_vocab(emails, split.train, config.min_freq);
    require(feature_vocab.size() > data::Vocab::kNumSpecials, kProgram,
            "no feature is in --min_freq or more of the " + std::to_string(split.train.size()) +
                " training emails: the linear model would read nothing" + got(config, &C::min_freq));
    if (parallel.is_main()) feature_vocab.save(run.file("features.json"));
    for (const Email& email : emails) features.push_back(feature_ids(email_features(email), feature_vocab));
  }

  Generator init(seed + 1);
  SpamClassifier model(model_options(config, vocab.size(), feature_vocab.size()), init);
  // Pretraining runs once per run: a resumed run restores its weights from the checkpoint and its
  // pretraining figures from pretraining.json.
  Pretraining pretraining;
  if (config.pretrain_epochs > 0 && model.deep()) {
    if (resume) {
      pretraining = Pretraining::load(run.file("pretraining.json"));
    } else {
      pretraining = pretrain_embeddings(corpus, vocab, config, model.token_embedding());
      if (parallel.is_main()) write_json_atomic(run.file("pretraining.json"), pretraining.to_json());
    }
    if (parallel.is_main())
      std::fprintf(stderr, "spam_classifier: word2vec pretraining: %lld embedding rows in %.1f s (%.0f words/s)\n",
                   static_cast<long long>(pretraining.rows), pretraining.seconds, pretraining.words_per_second);
  }
  parallel.replicate(model);  // rank 0's weights (its pretraining's too) on every rank
  // No weight decay on biases, norms and position tables; the linear model at its own rate, without decay.
  optim::ParamGroup decay, no_decay(TensorList(), std::nullopt, 0.0), linear(TensorList(), config.wide_lr, 0.0);
  for (const auto& [name, p] : model.named_parameters()) {
    if (name.rfind("wide", 0) == 0) linear.params.push_back(p);
    else if (p.dim() < 2 || name.find("norm") != std::string::npos || name.rfind("pos.", 0) == 0)
      no_decay.params.push_back(p);
    else decay.params.push_back(p);
  }
  std::vector<optim::ParamGroup> groups;
  for (optim::ParamGroup* g : {&decay, &no_decay, &linear})
    if (!g->params.empty()) groups.push_back(std::move(*g));
  optim::AdamW optimizer(groups, optim::AdamWOptions(config.lr).weight_decay(config.weight_decay));
  optim::Scheduler scheduler(optimizer,
                             optim::cosine_with_warmup(config.warmup_steps, config.steps, config.min_lr_ratio));
  train::TrainerOptions options;
  // The schedule spans --steps either way; --stop_after only ends this call early.
  options.max_steps = config.stop_after > 0 ? config.stop_after : config.steps;
  options.steps_per_epoch = train_loader.batches_per_epoch();
  options.log_every = config.log_every;
  options.eval_every = config.eval_every;
  options.checkpoint_every = config.checkpoint_every;
  options.clip_grad_norm = config.clip_grad_norm;
  options.run_dir = run.path();
  options.resume = resume;
  options.progress = train::parse_progress(config.progress);
  options.precision = train::parse_precision(config.precision);
  options.replicas = parallel.replicas();
  train::Trainer trainer(model, optimizer, options);
  trainer.set_scheduler(&scheduler);
  if (parallel.is_main())
    std::fprintf(stderr, "spam_classifier: vocabulary %lld words, model %lld parameters, %d process(es)\n",
                 static_cast<long long>(vocab.size()), static_cast<long long>(model.num_parameters()), parallel.size());

  const std::vector<std::int64_t> validation_labels = labels_of(dataset, split.validation);
  // The next batches are collated on a background thread while the current step runs; batch_at is a
  // pure function of the step, so the run is the same as without.
  data::Prefetcher<data::Batch> batches([&train_loader](std::int64_t step) { return train_loader.batch_at(step); },
                                        data::PrefetchOptions{/*workers=*/1, /*depth=*/4});
  BestModel best(run, parallel.is_main());
  if (resume && run.exists("best.json")) best.restore();
  const train::TrainResult result = trainer.fit(
      [&](std::int64_t step) {
        const data::Batch batch = batches.get(step);
        FeatureBags bags;
        if (model.wide()) {
          // The training loader's rows are positions in the training split.
          std::vector<std::size_t> rows;
          for (const std::size_t i : batch.indices) rows.push_back(split.train[i]);
          bags = feature_bags(features, rows);
        }
        const Tensor logits = model.forward(batch.input, batch.padding_mask, bags);
        // Throughput figures for the global batch: every rank's share has as many emails (tokens roughly so).
        return train::StepOutput{nn::cross_entropy(logits, batch.labels), batch.size() * parallel.size(),
                                 batch.tokens * parallel.size()};
      },
      [&](std::int64_t step) {
        const Prediction p = predict_rows(model, all_loader, features, split.validation, config.eval_batch_size);
        const BinaryMetrics m = binary_metrics(p.labels, validation_labels);
        best.consider(step, m.f1(), p.loss, model);
        return std::map<std::string, double>{{"val_loss", p.loss}, {"val_accuracy", m.accuracy()}, {"val_f1", m.f1()}};
      });

  if (!parallel.is_main()) return 0;  // rank 0 tests the best model and writes the summary
  if (result.steps < config.steps) {
    std::fprintf(stderr, "spam_classifier: stopped at step %lld of %lld; continue with --resume true\n",
                 static_cast<long long>(result.steps), static_cast<long long>(config.steps));
    return 0;
  }
  model.load_state_dict(io::load_safetensors(best.model_path).tensors);
  const Prediction test = predict_rows(model, all_loader, features, split.test, config.eval_batch_size);
  const Prediction validation = predict_rows(model, all_loader, features, split.validation, config.eval_batch_size);
  const BinaryMetrics test_metrics = binary_metrics(test.labels, labels_of(dataset, split.test));
  std::printf("test (%zu emails, best validation F1 %.4f at step %lld):\n", split.test.size(), best.f1,
              static_cast<long long>(best.step));
  print_metrics(config.model.c_str(), test_metrics);
  print_metrics("naive Bayes", nb.test);
  std::printf("  training: %lld steps in %.1f s, after %.1f s of word2vec pretraining\n",
              static_cast<long long>(result.steps), result.total_seconds, pretraining.seconds);

  run.write_summary(
      {{"model", config.model},
       {"test_accuracy", test_metrics.accuracy()},
       {"test_precision", test_metrics.precision()},
       {"test_recall", test_metrics.recall()},
       {"test_f1", test_metrics.f1()},
       {"test_confusion", test_metrics.confusion()},
       {"test_loss", test.loss},
       {"baseline_nb_test_f1", nb.test.f1()},
       {"baseline_nb_test", nb.test.to_json()},
       {"baseline_nb_validation", nb.validation.to_json()},
       {"baseline_nb_seconds", nb.seconds},
       {"train_seconds", pretraining.seconds + result.total_seconds},
       {"fit_seconds", result.total_seconds},
       {"data_seconds", batches.stats().produce_seconds},
       {"data_wait_seconds", batches.stats().wait_seconds},
       {"pretraining", pretraining.to_json()},
       {"steps", result.steps},
       {"final_loss", result.final_loss},
       {"best_step", best.step},
       {"best_val_f1", best.f1},
       {"best_val_loss", best.loss},
       {"vocab_size", vocab.size()},
       {"features", feature_vocab.size() - data::Vocab::kNumSpecials},
       {"parameters", model.num_parameters()},
       {"emails",
        {{"train", split.train.size()}, {"validation", split.validation.size()}, {"test", split.test.size()}}},
       {"validation_mistakes", mistakes(emails, split.validation, validation)},
       {"test_mistakes", mistakes(emails, split.test, test)},
       {"confusion_layout", "[[tn, fp], [fn, tp]]: rows actual (ham, spam), columns predicted"}});
  run.write_loss_plot("spam classifier: training and validation loss");
  return 0;
}

}  // namespace tapegrad::examples::spam
