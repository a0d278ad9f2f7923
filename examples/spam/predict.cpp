// spam_classifier predict --run_dir DIR FILE...: classifies email files (raw RFC 822 messages or corpus
// .json files) with a trained run, printing each file's name, label and spam probability on one line:
//   path/to/email.json	spam	0.9731
// A file that cannot be read is reported on stderr and the exit status is 1. The work per email is
// bounded: a raw mail file is read up to its first 8 MiB, and the transformer reads the first
// max_length words (the linear model all the words read); stderr says when a file was cut either way.

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "examples/common/run_dir.h"
#include "examples/spam/spam_model.h"
#include "tapegrad/io/safetensors.h"

namespace tapegrad::examples::spam {

namespace {

constexpr std::uint64_t kMaxEmailBytes = std::uint64_t{8} << 20;

struct PredictConfig {
  std::string run_dir = "runs/spam_classifier";
  double threshold = 0.5;

  template <class F>
  static void fields(F& f) {
    f("run_dir", &PredictConfig::run_dir,
      "a finished train run (config.json, vocab.json, features.json, best_model.safetensors)");
    f("threshold", &PredictConfig::threshold, "spam when the spam probability exceeds this");
  }
};

}  // namespace

Config predict_config() {
  return make_config<PredictConfig>("spam_classifier predict", "classify email files with a trained run");
}

int run_predict(const Config& parsed, const std::vector<std::string>& files) {
  const PredictConfig config = read_config<PredictConfig>(parsed);
  require(!files.empty(), "spam_classifier",
          "predict needs at least one email file (spam_classifier predict [--run_dir DIR] FILE...)");
  std::error_code error;
  if (!std::filesystem::is_directory(config.run_dir, error))
    throw IoError("predict: the run directory " + config.run_dir +
                  " does not exist (train a model first: spam_classifier train)");
  const RunDir run(config.run_dir);
  // The run's own configuration decides the model; its keys are checked like a --config file.
  Config saved_options = train_config();
  const nlohmann::json saved_json = io::read_json_file(run.file("config.json"));
  saved_options.merge_json(saved_json, run.file("config.json"));
  SpamTrainConfig saved = read_config<SpamTrainConfig>(saved_options);
  // Runs from before --headers and --model existed read no header tokens and had the transformer alone.
  if (saved_json.is_object() && !saved_json.contains("headers")) saved.headers = false;
  if (saved_json.is_object() && !saved_json.contains("model")) saved.model = "transformer";
  const data::Vocab vocab = data::Vocab::load(run.file("vocab.json"));
  const bool wide = saved.model != "transformer";  // a linear model, alone or beside the transformer
  const data::Vocab feature_vocab = wide ? data::Vocab::load(run.file("features.json")) : data::Vocab();
  Generator unused(0);  // the weights are loaded below
  SpamClassifier model(model_options(saved, vocab.size(), feature_vocab.size()), unused);
  model.load_state_dict(io::load_safetensors(run.file("best_model.safetensors")).tensors);
  model.eval();
  NoGradGuard no_grad;
  int failures = 0;
  for (const std::string& file : files) {
    try {
      // The work per email is bounded: a raw file is read up to kMaxEmailBytes, and only the words
      // the transformer reads are split off for it (one more tells whether there were more); the
      // linear model reads the words of what was read and of its sender-side headers.
      const Email email = read_email_file(file, kMaxEmailBytes);
      const auto max_words = static_cast<std::size_t>(saved.max_length);
      const std::vector<std::string> words = email_tokens(email, saved.headers, max_words + 1);
      if (email.truncated)
        std::fprintf(stderr, "spam_classifier: %s: larger than %llu bytes; only its first %llu bytes were read\n",
                     file.c_str(), static_cast<unsigned long long>(kMaxEmailBytes),
                     static_cast<unsigned long long>(kMaxEmailBytes));
      if (model.deep() && words.size() > max_words)
        std::fprintf(stderr, "spam_classifier: %s: more than %zu words; the transformer reads the first %zu\n",
                     file.c_str(), max_words, max_words);
      const std::vector<std::int64_t> ids = encode_words(words, vocab, saved.max_length);
      const std::int64_t n = static_cast<std::int64_t>(ids.size());
      const std::vector<std::vector<std::int64_t>> features{wide ? feature_ids(email_features(email), feature_vocab)
                                                                 : std::vector<std::int64_t>()};
      const FeatureBags bags = wide ? feature_bags(features, {0}) : FeatureBags();
      const Tensor logits = model.forward(from_vector(ids, {1, n}), zeros({1, n}, kBool), bags);
      const double p = logits.softmax(-1).at({0, 1});
      std::printf("%s\t%s\t%.4f\n", file.c_str(), p > config.threshold ? "spam" : "ham", p);
    } catch (const Error& e) {
      std::fprintf(stderr, "spam_classifier: %s: %s\n", file.c_str(), e.what());
      ++failures;
    }
  }
  return failures ? 1 : 0;
}

}  // namespace tapegrad::examples::spam
