// Byte-level BPE's training time and encoding speed on a text file, for the comparison with
// sentencepiece in bench/bpe_compare.sh (docs/bench.md):
//
//   bpe_bench --text corpus.txt --vocab 8000 [--runs 5] [--model out.json]
//
// Prints one JSON object: train_seconds, the vocabulary size reached, and encode_mb_per_s (the
// median over --runs encodings of the whole file, each by a freshly loaded tokenizer, so its
// pre-token cache starts empty as a new process's would), with the tokens per byte.

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tapegrad/data/bpe.h"
#include "tapegrad/io/file.h"

using namespace tapegrad;

int main(int argc, char** argv) {
  std::string text_path, model_path = "/tmp/tapegrad_bpe_bench.json";
  std::int64_t vocab = 8000;
  int runs = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--text") text_path = value;
    else if (flag == "--vocab") vocab = std::stoll(value);
    else if (flag == "--runs") runs = std::stoi(value);
    else if (flag == "--model") model_path = value;
    else {
      std::cerr << "bpe_bench: unknown flag " << flag << "\n";
      return 2;
    }
  }
  if (text_path.empty()) {
    std::cerr << "usage: bpe_bench --text FILE [--vocab N] [--runs N] [--model OUT.json]\n";
    return 2;
  }
  const std::string text = io::read_file(text_path);
  const auto now = [] { return std::chrono::steady_clock::now(); };
  const auto since = [&](auto start) { return std::chrono::duration<double>(now() - start).count(); };
  auto start = now();
  const data::BpeTokenizer bpe = data::BpeTokenizer::train(text, vocab);
  const double train_seconds = since(start);
  bpe.save(model_path);
  std::vector<double> encode_seconds;
  std::size_t tokens = 0;
  for (int r = 0; r < runs; ++r) {
    const data::BpeTokenizer fresh = data::BpeTokenizer::load(model_path);
    start = now();
    tokens = fresh.encode(text).size();
    encode_seconds.push_back(since(start));
  }
  std::sort(encode_seconds.begin(), encode_seconds.end());
  const double median = encode_seconds[encode_seconds.size() / 2];
  const double mb = static_cast<double>(text.size()) / 1e6;
  std::cout << nlohmann::json{{"bytes", text.size()},
                              {"vocab_size", bpe.vocab_size()},
                              {"train_seconds", train_seconds},
                              {"encode_seconds", median},
                              {"encode_mb_per_s", mb / median},
                              {"tokens_per_byte", static_cast<double>(tokens) / static_cast<double>(text.size())}}
                   .dump()
            << "\n";
  return 0;
}
