// spam_classifier: self-attention for spam detection, from the lecture's four-sentence toy to a
// transformer encoder (beside a linear model over the email's words and sender-side headers) on
// the SpamAssassin corpus, measured against a Naive Bayes baseline.
//
//   spam_classifier toy                       the lecture's exercise (toy.cpp)
//   spam_classifier [train]                   the SpamAssassin corpus (train.cpp)
//   spam_classifier predict --run_dir DIR FILE...   a trained run on email files (predict.cpp)
//
// This file picks the mode, parses its options and turns errors into exit statuses: 2 for a rejected
// command line or configuration, 1 for any other failure. The corpus is fetched by
// scripts/fetch-spam-corpus.sh (see examples/spam/spam_corpus.h for where it goes).

#include <iostream>
#include <string>
#include <vector>

#include "examples/spam/spam_model.h"

using namespace tapegrad;

namespace {

const char* kUsage =
    "spam_classifier [toy|train|predict] [--config FILE] [--key value ...] [FILE ...]\n"
    "  toy      the lecture's four-sentence exercise\n"
    "  train    (default) transformer and linear model vs Naive Bayes on the SpamAssassin corpus\n"
    "  predict  classify email files with a trained run: predict [--run_dir DIR] FILE...\n"
    "Each mode has its own options: spam_classifier MODE --help";

}  // namespace

int main(int argc, char** argv) {
  namespace spam = examples::spam;
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
  examples::Config config = mode == "toy"     ? spam::toy_config()
                            : mode == "train" ? spam::train_config()
                                              : spam::predict_config();
  std::vector<std::string> files;
  if (const int status = examples::parse_command_line(config, argc, argv, first, &files, kUsage,
                                                      mode == "predict" ? static_cast<std::size_t>(-1) : 0);
      status >= 0)
    return status;
  try {
    if (mode == "toy") return spam::run_toy(config);
    if (mode == "train") return spam::run_train(config);
    return spam::run_predict(config, files);
  } catch (const examples::ConfigError& e) {
    std::cerr << e.what() << "\n";
    return examples::kConfigErrorExit;
  } catch (const Error& e) {
    std::cerr << "spam_classifier: " << e.what() << "\n";
    return 1;
  }
}
