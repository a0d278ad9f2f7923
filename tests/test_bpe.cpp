// Byte-level BPE: pre-tokens, training against a trainer that rescans every word per merge,
// encoding against training's own segmentation, exact round trips on any bytes, special tokens,
// save and load.

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tapegrad/autograd/error.h"
#include "tapegrad/data/bpe.h"
#include "tests/testing.h"

using namespace tapegrad;
using namespace tapegrad::data;

namespace {

// Text of sentences drawn from a small vocabulary, with punctuation, digits, UTF-8 letters and
// double spaces: a corpus with many repeated pairs and ties.
std::string sample_text(std::uint64_t seed, int sentences) {
  const std::vector<std::string> words{"the",   "then", "there", "these", "lord", "lower", "lowest", "new",  "newer",
                                       "wider", "café", "naïve", "42",    "1999", "and",   "hand",   "sand", "land"};
  const std::vector<std::string> marks{".", ",", "!", "?", ";", "--"};
  Generator gen(seed);
  std::string text;
  for (int s = 0; s < sentences; ++s) {
    const auto length = static_cast<int>(3 + gen.randint(8));
    for (int w = 0; w < length; ++w) {
      text += (w == 0 ? "" : (gen.randint(10) == 0 ? "  " : " "));
      text += words[static_cast<std::size_t>(gen.randint(words.size()))];
    }
    text += marks[static_cast<std::size_t>(gen.randint(marks.size()))];
    text += gen.randint(4) == 0 ? "\n" : " ";
  }
  return text;
}

// BPE trained the slow way: every merge recounts every pair of every distinct pre-token. Returns
// the merges and each pre-token's final segmentation.
struct NaiveBpe {
  std::vector<std::pair<std::int64_t, std::int64_t>> merges;
  std::map<std::string, std::vector<std::int64_t>> segmentation;
};

NaiveBpe naive_train(const std::string& text, std::int64_t merges_wanted) {
  std::map<std::string, std::int64_t> counts;
  for (std::string_view piece : bpe_pieces(text)) ++counts[std::string(piece)];
  NaiveBpe out;
  for (const auto& [piece, count] : counts) {
    std::vector<std::int64_t>& symbols = out.segmentation[piece];
    for (char c : piece) symbols.push_back(static_cast<unsigned char>(c));
  }
  while (static_cast<std::int64_t>(out.merges.size()) < merges_wanted) {
    std::map<std::pair<std::int64_t, std::int64_t>, std::int64_t> pairs;
    for (const auto& [piece, symbols] : out.segmentation)
      for (std::size_t i = 0; i + 1 < symbols.size(); ++i) pairs[{symbols[i], symbols[i + 1]}] += counts[piece];
    std::pair<std::int64_t, std::int64_t> best{-1, -1};
    std::int64_t best_count = 1;
    for (const auto& [pair, count] : pairs)  // in increasing pair order: the first of a tie wins
      if (count > best_count) {
        best = pair;
        best_count = count;
      }
    if (best.first < 0) break;
    const std::int64_t merged = 256 + static_cast<std::int64_t>(out.merges.size());
    out.merges.push_back(best);
    for (auto& [piece, symbols] : out.segmentation) {
      std::vector<std::int64_t> next;
      for (std::size_t i = 0; i < symbols.size(); ++i) {
        if (i + 1 < symbols.size() && symbols[i] == best.first && symbols[i + 1] == best.second) {
          next.push_back(merged);
          ++i;
        } else {
          next.push_back(symbols[i]);
        }
      }
      symbols = next;
    }
  }
  return out;
}

std::string joined(const std::vector<std::string_view>& pieces) {
  std::string text;
  for (std::string_view p : pieces) text += p;
  return text;
}

}  // namespace

TEST_CASE("bpe: pre-tokens keep words, numbers and punctuation apart, a space with the piece after it") {
  const std::vector<std::string_view> pieces = bpe_pieces("Hello, world!  42x\n\tcafé");
  CHECK(pieces == std::vector<std::string_view>{"Hello", ",", " world", "!", " ", " 42", "x", "\n\t", "café"});
  CHECK(bpe_pieces("").empty());
  CHECK(bpe_pieces("   ") == std::vector<std::string_view>{"   "});
  // Any bytes at all: the pieces put back together are the text.
  Generator gen(3);
  for (int trial = 0; trial < 50; ++trial) {
    std::string bytes;
    for (int i = 0; i < 200; ++i) bytes.push_back(static_cast<char>(gen.randint(256)));
    CHECK(joined(bpe_pieces(bytes)) == bytes);
  }
}

TEST_CASE("bpe: incremental training learns the merges a full recount per merge learns") {
  const std::string text = sample_text(1, 400);
  // Asked for more merges than the corpus has pairs seen twice: both stop at the same merge.
  const BpeTokenizer bpe = BpeTokenizer::train(text, 256 + 1000);
  const NaiveBpe naive = naive_train(text, 1000);
  REQUIRE(naive.merges.size() > 50);
  CHECK(bpe.merges() == naive.merges);
  CHECK(bpe.vocab_size() == 256 + static_cast<std::int64_t>(naive.merges.size()));
  // Stopped early by the vocabulary size: its first merges.
  const BpeTokenizer small = BpeTokenizer::train(text, 256 + 20);
  CHECK(small.merges() ==
        std::vector<std::pair<std::int64_t, std::int64_t>>(naive.merges.begin(), naive.merges.begin() + 20));
  // Encoding a training pre-token gives the segmentation training ended with.
  for (const auto& [piece, symbols] : naive.segmentation) {
    CAPTURE(piece);
    CHECK(bpe.encode(piece) == symbols);
  }
  // Every token is the bytes of the two it joins.
  for (std::size_t r = 0; r < bpe.merges().size(); ++r) {
    const auto [a, b] = bpe.merges()[r];
    CHECK(bpe.token(256 + static_cast<std::int64_t>(r)) == bpe.token(a) + bpe.token(b));
  }
}

TEST_CASE("bpe: training stops when no pair occurs twice") {
  const BpeTokenizer bpe = BpeTokenizer::train("abab", 1000);
  // "abab": (a, b) twice -> "ab ab"; then (ab, ab) once: no more merges.
  REQUIRE(bpe.merges().size() == 1);
  CHECK(bpe.token(256) == "ab");
  CHECK(bpe.encode("abab") == std::vector<std::int64_t>{256, 256});
}

TEST_CASE("bpe: any bytes encode and decode back exactly") {
  const BpeTokenizer bpe = BpeTokenizer::train(sample_text(2, 300), 400, {"<|endoftext|>"});
  Generator gen(9);
  for (int trial = 0; trial < 100; ++trial) {
    std::string bytes;
    const auto n = static_cast<int>(gen.randint(300));
    for (int i = 0; i < n; ++i) bytes.push_back(static_cast<char>(gen.randint(256)));
    CHECK(bpe.decode(bpe.encode(bytes)) == bytes);
  }
  const std::string text = sample_text(5, 50);
  const std::vector<std::int64_t> ids = bpe.encode(text);
  CHECK(bpe.decode(ids) == text);
  CHECK(ids.size() < text.size() / 2);  // the merges compress text like the training text
  const std::int64_t size = bpe.vocab_size();
  const std::string outside =
      "token id " + std::to_string(size) + " is outside the vocabulary of " + std::to_string(size);
  CHECK_THROWS_WITH_AS(bpe.decode({1, size}), ("BpeTokenizer::decode: " + outside).c_str(), IndexError);
  CHECK_THROWS_WITH_AS(
      bpe.token(-1), ("BpeTokenizer::token: token id -1 is outside the vocabulary of " + std::to_string(size)).c_str(),
      IndexError);
}

TEST_CASE("bpe: special tokens are one id each, never split and never merged across") {
  std::string text;
  for (int i = 0; i < 50; ++i) text += "the end<|sep|>the start<|endoftext|>";
  const BpeTokenizer bpe = BpeTokenizer::train(text, 300, {"<|endoftext|>", "<|sep|>"});
  const std::int64_t eot = bpe.special_id("<|endoftext|>"), sep = bpe.special_id("<|sep|>");
  CHECK(eot == bpe.vocab_size() - 2);
  CHECK(sep == bpe.vocab_size() - 1);
  for (std::int64_t id = 256; id < eot; ++id) {
    const std::string& token = bpe.token(id);
    CHECK(token.find('<') == std::string::npos);  // no learned token holds part of a special
  }
  const std::vector<std::int64_t> ids = bpe.encode("x<|sep|><|endoftext|>y<|sep");
  CHECK(std::count(ids.begin(), ids.end(), sep) == 1);
  CHECK(std::count(ids.begin(), ids.end(), eot) == 1);
  CHECK(bpe.decode(ids) == "x<|sep|><|endoftext|>y<|sep");
  CHECK_THROWS_WITH_AS(bpe.special_id("<pad>"), "BpeTokenizer: \"<pad>\" is not a special token", ValueError);
  CHECK_THROWS_WITH_AS(BpeTokenizer::train(text, 257, {"<a>", "<b>"}),
                       "BpeTokenizer::train: vocab_size 257 is below the 256 bytes and 2 special tokens", ValueError);
  CHECK_THROWS_WITH_AS(BpeTokenizer::train(text, 300, {"<a>", "<a>"}),
                       "BpeTokenizer::train: the special token \"<a>\" is given twice", ValueError);
}

TEST_CASE("bpe: save and load give the same tokenizer, and a bad file names its field") {
  testing::TempDir dir;
  const BpeTokenizer bpe = BpeTokenizer::train(sample_text(4, 200), 320, {"<|endoftext|>"});
  bpe.save(dir.file("bpe.json"));
  const BpeTokenizer loaded = BpeTokenizer::load(dir.file("bpe.json"));
  CHECK(loaded.merges() == bpe.merges());
  CHECK(loaded.vocab_size() == bpe.vocab_size());
  const std::string text = sample_text(6, 30) + "<|endoftext|>";
  CHECK(loaded.encode(text) == bpe.encode(text));
  const auto write = [&](const std::string& content) {
    std::ofstream(dir.file("bad.json")) << content;
    return dir.file("bad.json");
  };
  const std::string bad = write(R"({"format": "tapegrad-bpe", "merges": [[97, 98], [256, 300]]})");
  const std::string bad_merge =
      "BpeTokenizer::load: '" + bad + "': field 'merges[1]' must be two ids below 257, got [256,300]";
  CHECK_THROWS_WITH_AS(BpeTokenizer::load(bad), bad_merge.c_str(), ValueError);
  write(R"({"format": "vocab", "merges": []})");
  const std::string bad_format =
      "BpeTokenizer::load: '" + bad + "': field 'format' must be \"tapegrad-bpe\", got \"vocab\"";
  CHECK_THROWS_WITH_AS(BpeTokenizer::load(bad), bad_format.c_str(), ValueError);
  CHECK_THROWS_AS(BpeTokenizer::load(dir.file("missing.json")), IoError);
  // Merges that double one token each time: merge r spells 2^(r+1) bytes, 16 GiB by the 33rd.
  std::string chain = R"({"format": "tapegrad-bpe", "merges": [[0, 0])";
  for (int r = 0; r < 40; ++r) chain += ", [" + std::to_string(256 + r) + ", " + std::to_string(256 + r) + "]";
  write(chain + "]}");
  const std::string doubling = "BpeTokenizer::load: '" + bad +
                               "': field 'merges[26]' makes the merged tokens 268435710 bytes long in all, more "
                               "than 268435456 (merges that keep doubling a token?)";
  CHECK_THROWS_WITH_AS(BpeTokenizer::load(bad), doubling.c_str(), ValueError);
  write(R"({"format": "tapegrad-bpe", "merges": [[97, 98], [98, 99], [97, 98]]})");
  CHECK_THROWS_WITH_AS(
      BpeTokenizer::load(bad),
      ("BpeTokenizer::load: '" + bad + "': field 'merges[2]' repeats an earlier merge [97,98]").c_str(), ValueError);
}
