// data: tokenizers, vocabularies, batching and stratified splits.

#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "tapegrad/autograd/error.h"
#include "tapegrad/data/data.h"
#include "tests/testing.h"

using namespace tapegrad;
using namespace tapegrad::data;
using testing::TempDir;
using testing::write_text;
namespace fs = std::filesystem;

namespace {

Example make_example(std::int64_t length, std::int64_t first, std::int64_t label = -1) {
  Example e;
  for (std::int64_t i = 0; i < length; ++i) e.input.push_back(first + i);
  e.label = label;
  return e;
}

Dataset numbered_dataset(std::int64_t n) {
  Dataset d;
  for (std::int64_t i = 0; i < n; ++i) d.push_back(make_example(1 + i % 3, 10 + i, i % 2));
  return d;
}

}  // namespace

// ---------------------------------------------------------------- tokenizers

TEST_CASE("data: word_tokenize lowercases, keeps inner apostrophes and UTF-8 letters, drops punctuation") {
  CHECK(word_tokenize("Don't WAIT: 100% free!") == std::vector<std::string>{"don't", "wait", "100", "free"});
  CHECK(word_tokenize("  'quoted' rock'n'roll o'") == std::vector<std::string>{"quoted", "rock'n'roll", "o"});
  CHECK(word_tokenize("Sitting Bull \xC3\xBC"
                      "ber alles") == std::vector<std::string>{"sitting", "bull",
                                                               "\xC3\xBC"
                                                               "ber",
                                                               "alles"});
  CHECK(word_tokenize("e-mail@x.com") == std::vector<std::string>{"e", "mail", "x", "com"});
  CHECK(word_tokenize("").empty());
  CHECK(word_tokenize(" ,.;!? ").empty());
  // At most max_words: the scan stops there.
  CHECK(word_tokenize("Don't WAIT: 100% free!", 2) == std::vector<std::string>{"don't", "wait"});
  CHECK(word_tokenize("one two", 2) == std::vector<std::string>{"one", "two"});
  CHECK(word_tokenize("one two", 0).empty());
}

TEST_CASE("data: char_tokenize splits into UTF-8 code points, a stray byte on its own") {
  CHECK(char_tokenize("n\xC3\xA9 \xE2\x82\xAC!") ==
        std::vector<std::string>{"n", "\xC3\xA9", " ", "\xE2\x82\xAC", "!"});
  CHECK(char_tokenize("\xF0\x9F\x98\x80x") == std::vector<std::string>{"\xF0\x9F\x98\x80", "x"});
  // 0xFF never starts a sequence; 0xC3 followed by an ASCII byte is truncated.
  CHECK(char_tokenize("a\xFF\xC3z") == std::vector<std::string>{"a", "\xFF", "\xC3", "z"});
  CHECK(char_tokenize("").empty());
}

// ---------------------------------------------------------------- vocabulary

TEST_CASE("data: Vocab has the specials at 0..3 and encodes, decodes and reports unknown tokens") {
  const Vocab specials;
  CHECK(specials.size() == 4);
  CHECK(specials.token(Vocab::kPad) == "<pad>");
  CHECK(specials.token(Vocab::kUnk) == "<unk>");
  CHECK(specials.token(Vocab::kSos) == "<sos>");
  CHECK(specials.token(Vocab::kEos) == "<eos>");

  const Vocab vocab = Vocab::from_tokens({"free", "money"});
  CHECK(vocab.size() == 6);
  CHECK(vocab.id("free") == 4);
  CHECK(vocab.id("money") == 5);
  CHECK(vocab.id("lunch") == Vocab::kUnk);
  CHECK(vocab.contains("money"));
  CHECK_FALSE(vocab.contains("lunch"));
  const std::vector<std::int64_t> ids = vocab.encode({"free", "lunch", "money"}, true, true);
  CHECK(ids == std::vector<std::int64_t>{Vocab::kSos, 4, Vocab::kUnk, 5, Vocab::kEos});
  CHECK(vocab.decode(ids) == std::vector<std::string>{"free", "<unk>", "money"});
  CHECK(vocab.decode({0, 2, 4, 3}, false) == std::vector<std::string>{"<pad>", "<sos>", "free", "<eos>"});
  CHECK_THROWS_AS(vocab.token(6), IndexError);
  CHECK_THROWS_WITH_AS(vocab.token(-1), doctest::Contains("id -1 is out of range"), IndexError);
  CHECK_THROWS_AS(vocab.decode({4, 99}), IndexError);
  CHECK_THROWS_WITH_AS(Vocab::from_tokens({"a", "b", "a"}), doctest::Contains("'a' appears more than once"),
                       ValueError);
  CHECK_THROWS_AS(Vocab::from_tokens({"<unk>"}), ValueError);
}

TEST_CASE("data: Vocab::from_counts keeps and orders given counts as build does") {
  const std::vector<std::vector<std::string>> docs = {
      {"b", "a", "c", "a", "<pad>"}, {"d", "c", "a", "e"}, {"b", "c", "e", "f"}};
  const std::unordered_map<std::string, std::int64_t> counts = {{"a", 3}, {"c", 3}, {"b", 2},    {"e", 2},
                                                                {"d", 1}, {"f", 1}, {"<pad>", 1}};
  CHECK(Vocab::from_counts(counts) == Vocab::build(docs));
  VocabOptions options;
  options.min_freq = 2;
  options.max_size = 6;
  CHECK(Vocab::from_counts(counts, options).tokens() ==
        std::vector<std::string>{"<pad>", "<unk>", "<sos>", "<eos>", "a", "c"});
  // Document frequencies, say: "a" in 2 documents, "c" in 3.
  CHECK(Vocab::from_counts({{"a", 2}, {"c", 3}, {"<eos>", 9}}).tokens() ==
        std::vector<std::string>{"<pad>", "<unk>", "<sos>", "<eos>", "c", "a"});
  options.min_freq = 0;
  CHECK_THROWS_WITH_AS(Vocab::from_counts(counts, options), "Vocab::from_counts: min_freq must be >= 1, got 0",
                       ValueError);
}

TEST_CASE("data: Vocab::build orders by count then token, applies min_freq and max_size") {
  const std::vector<std::vector<std::string>> docs = {
      {"b", "a", "c", "a", "<pad>"}, {"d", "c", "a", "e"}, {"b", "c", "e", "f"}};
  // counts: a 3, c 3, b 2, e 2, d 1, f 1; "<pad>" is a special and not counted.
  const Vocab all = Vocab::build(docs);
  CHECK(all.tokens() == std::vector<std::string>{"<pad>", "<unk>", "<sos>", "<eos>", "a", "c", "b", "e", "d", "f"});

  VocabOptions frequent;
  frequent.min_freq = 2;
  CHECK(Vocab::build(docs, frequent).tokens() ==
        std::vector<std::string>{"<pad>", "<unk>", "<sos>", "<eos>", "a", "c", "b", "e"});

  VocabOptions small;
  small.max_size = 7;  // the 4 specials and the 3 most frequent
  const Vocab cut = Vocab::build(docs, small);
  CHECK(cut.size() == 7);
  CHECK(cut.tokens().back() == "b");
  CHECK(cut.id("e") == Vocab::kUnk);

  small.max_size = 4;
  CHECK(Vocab::build(docs, small).size() == 4);

  // The order depends only on the counts, not on the order the documents come in.
  std::vector<std::vector<std::string>> reversed(docs.rbegin(), docs.rend());
  CHECK(Vocab::build(reversed) == all);

  VocabOptions bad;
  bad.min_freq = 0;
  CHECK_THROWS_WITH_AS(Vocab::build(docs, bad), doctest::Contains("min_freq must be >= 1, got 0"), ValueError);
  bad.min_freq = 1;
  bad.max_size = 3;
  CHECK_THROWS_WITH_AS(Vocab::build(docs, bad), doctest::Contains("got 3"), ValueError);
}

TEST_CASE("data: Vocab save and load round trip through an atomic write") {
  TempDir dir;
  const Vocab vocab =
      Vocab::build({{"\xC3\xBC"
                     "ber",
                     "alles", "free", "free", "\"quoted\"", "back\\slash"}});
  const std::string path = dir.file("vocab.json");
  vocab.save(path);
  const Vocab loaded = Vocab::load(path);
  CHECK(loaded == vocab);
  CHECK(loaded.id("free") == vocab.id("free"));
  CHECK(loaded.id("\xC3\xBC"
                  "ber") == vocab.id("\xC3\xBC"
                                     "ber"));
  CHECK_FALSE(fs::exists(path + ".tmp"));

  // Saving over an existing file replaces it.
  const Vocab other = Vocab::from_tokens({"x"});
  other.save(path);
  CHECK(Vocab::load(path) == other);

  CHECK_THROWS_AS(vocab.save(dir.file("no/such/dir/vocab.json")), IoError);
  CHECK_THROWS_AS(Vocab::from_tokens({"bad\xFF"}).save(dir.file("bad.json")), ValueError);
}

TEST_CASE("data: Vocab::load rejects bad files with errors naming the file and the field") {
  TempDir dir;
  const std::string missing = dir.file("missing.json");
  CHECK_THROWS_WITH_AS(Vocab::load(missing), doctest::Contains(missing.c_str()), IoError);

  // Text that is not JSON (or JSON nested too deep, or with a repeated key) is an IoError; JSON
  // with a wrong value is a ValueError. Both name the file.
  const std::string truncated = dir.file("truncated.json");
  for (const std::string& text : {std::string(R"({"tokens": ["<pad>", "<unk>")"),
                                  std::string(R"({"tokens": [], "tokens": []})"), std::string(100000, '[')}) {
    write_text(truncated, text);
    CHECK_THROWS_WITH_AS(Vocab::load(truncated), doctest::Contains(("Vocab::load: " + truncated + ": ").c_str()),
                         IoError);
  }
  auto rejects = [&](const std::string& name, const std::string& text, const std::string& message) {
    const std::string path = dir.file(name);
    write_text(path, text);
    INFO(name);
    CHECK_THROWS_WITH_AS(Vocab::load(path), doctest::Contains(message.c_str()), ValueError);
    CHECK_THROWS_WITH_AS(Vocab::load(path), doctest::Contains(path.c_str()), ValueError);
  };
  rejects("array.json", R"(["<pad>", "<unk>", "<sos>", "<eos>"])", "must be a JSON object");
  rejects("no_tokens.json", R"({"format": "tapegrad.vocab", "version": 1})", "field 'tokens' is missing");
  rejects("not_array.json", R"({"tokens": "abc"})", "field 'tokens' must be an array");
  rejects("short.json", R"({"tokens": ["<pad>", "<unk>"]})", "fewer than the 4 specials");
  rejects("specials.json", R"({"tokens": ["<unk>", "<pad>", "<sos>", "<eos>", "a"]})",
          "field 'tokens[0]' must be the special \"<pad>\"");
  rejects("duplicate.json", R"({"tokens": ["<pad>", "<unk>", "<sos>", "<eos>", "a", "b", "a"]})",
          "field 'tokens[6]' repeats the token \"a\" (id 4)");
  rejects("special_again.json", R"({"tokens": ["<pad>", "<unk>", "<sos>", "<eos>", "<unk>"]})",
          "field 'tokens[4]' repeats the token \"<unk>\"");
  rejects("number.json", R"({"tokens": ["<pad>", "<unk>", "<sos>", "<eos>", 7]})",
          "field 'tokens[4]' must be a string");
  rejects("version.json", R"({"version": 2, "tokens": ["<pad>", "<unk>", "<sos>", "<eos>"]})",
          "field 'version' must be 1");
}

// ---------------------------------------------------------------- batching

TEST_CASE("data: collate pads inputs and targets, masks padding with true, stacks lengths and labels") {
  Dataset d;
  d.push_back({{5, 6, 7}, {8, 9}, 1});
  d.push_back({{4}, {7, 6, 5, 4}, 0});
  DataLoaderOptions options;
  options.pad_id = 0;
  const DataLoader loader(d, options);
  const Batch b = loader.collate({1, 0});
  CHECK(b.size() == 2);
  CHECK(b.indices == std::vector<std::size_t>{1, 0});
  CHECK(b.input.dtype() == kInt64);
  CHECK(b.padding_mask.dtype() == kBool);  // read back below as 0/1 integers
  CHECK(b.input.shape() == Shape{2, 3});
  CHECK(b.input.to_vector<std::int64_t>() == std::vector<std::int64_t>{4, 0, 0, 5, 6, 7});
  CHECK(b.padding_mask.to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 1, 1, 0, 0, 0});
  CHECK(b.lengths.to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 3});
  CHECK(b.tokens == 4);
  REQUIRE(b.target.defined());
  CHECK(b.target.shape() == Shape{2, 4});
  CHECK(b.target.to_vector<std::int64_t>() == std::vector<std::int64_t>{7, 6, 5, 4, 8, 9, 0, 0});
  CHECK(b.target_padding_mask.to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 0, 0, 0, 0, 0, 1, 1});
  CHECK(b.target_tokens == 6);
  REQUIRE(b.labels.defined());
  CHECK(b.labels.to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 1});

  // Another pad id shows up in the padded places only.
  options.pad_id = -7;
  const Batch other = DataLoader(d, options).collate({1, 0});
  CHECK(other.input.to_vector<std::int64_t>() == std::vector<std::int64_t>{4, -7, -7, 5, 6, 7});

  // Without targets and labels those tensors stay undefined.
  const Batch plain = DataLoader(Dataset{make_example(2, 1), make_example(1, 1)}, options).collate({0, 1});
  CHECK_FALSE(plain.target.defined());
  CHECK_FALSE(plain.target_padding_mask.defined());
  CHECK_FALSE(plain.labels.defined());

  CHECK_THROWS_WITH_AS(loader.collate({0, 2}), doctest::Contains("row 2 is out of range"), IndexError);
  CHECK_THROWS_AS(loader.collate({}), ValueError);
  Dataset mixed = {make_example(1, 1, 0), make_example(1, 1, -1)};
  CHECK_THROWS_WITH_AS(DataLoader(mixed, options).collate({0, 1}), doctest::Contains("row 1"), ValueError);
}

TEST_CASE("data: max_length keeps the first ids of inputs and targets") {
  Dataset d;
  d.push_back({{1, 2, 3, 4, 5}, {6, 7, 8}, -1});
  d.push_back({{9}, {1}, -1});
  DataLoaderOptions options;
  options.max_length = 2;
  const Batch b = DataLoader(d, options).collate({0, 1});
  CHECK(b.input.shape() == Shape{2, 2});
  CHECK(b.input.to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 2, 9, 0});
  CHECK(b.lengths.to_vector<std::int64_t>() == std::vector<std::int64_t>{2, 1});
  CHECK(b.target.to_vector<std::int64_t>() == std::vector<std::int64_t>{6, 7, 1, 0});
  CHECK(b.tokens == 3);
}

TEST_CASE("data: an epoch visits every row once, drop_last drops the short last batch") {
  const Dataset d = numbered_dataset(10);
  DataLoaderOptions options;
  options.batch_size = 4;
  options.seed = 3;
  const DataLoader keep(d, options);
  CHECK(keep.batches_per_epoch() == 3);
  std::vector<std::size_t> seen;
  const std::vector<Batch> batches = keep.epoch(0);
  REQUIRE(batches.size() == 3);
  CHECK(batches[0].size() == 4);
  CHECK(batches[2].size() == 2);
  for (const Batch& b : batches) seen.insert(seen.end(), b.indices.begin(), b.indices.end());
  std::sort(seen.begin(), seen.end());
  std::vector<std::size_t> all(10);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  CHECK(seen == all);

  options.drop_last = true;
  const DataLoader drop(d, options);
  CHECK(drop.batches_per_epoch() == 2);
  const std::vector<Batch> full = drop.epoch(0);
  REQUIRE(full.size() == 2);
  for (const Batch& b : full) CHECK(b.size() == 4);
  // The same order as without drop_last, only cut.
  CHECK(full[1].indices == batches[1].indices);
  CHECK_THROWS_WITH_AS(drop.batch(0, 2), doctest::Contains("index 2 is out of range for 2 batches"), IndexError);

  options.batch_size = 20;
  const DataLoader none(d, options);
  CHECK(none.batches_per_epoch() == 0);
  CHECK(none.epoch(0).empty());
  CHECK_THROWS_AS(none.batch_at(0), ValueError);

  // A batch larger than the dataset is one batch, however large (n + b - 1 overflowed to -1 batches).
  options.drop_last = false;
  options.batch_size = INT64_MAX;
  const DataLoader huge(d, options);
  CHECK(huge.batches_per_epoch() == 1);
  CHECK(huge.batch_at(0).size() == static_cast<std::int64_t>(d.size()));
}

TEST_CASE("data: shuffling is a function of (seed, epoch), different across epochs and seeds") {
  const Dataset d = numbered_dataset(50);
  DataLoaderOptions options;
  options.batch_size = 8;
  options.seed = 11;
  const DataLoader a(d, options), b(d, options);
  CHECK(a.order(0) == b.order(0));
  CHECK(a.order(5) == b.order(5));
  CHECK(a.order(0) != a.order(1));
  std::vector<std::size_t> identity(50);
  for (std::size_t i = 0; i < identity.size(); ++i) identity[i] = i;
  CHECK(a.order(0) != identity);
  std::vector<std::size_t> sorted = a.order(1);
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == identity);

  options.seed = 12;
  CHECK(DataLoader(d, options).order(0) != a.order(0));

  options.shuffle = false;
  const DataLoader ordered(d, options);
  CHECK(ordered.order(0) == identity);
  CHECK(ordered.order(7) == identity);
  CHECK(ordered.batch(0, 1).indices == std::vector<std::size_t>{8, 9, 10, 11, 12, 13, 14, 15});
}

TEST_CASE("data: batch_at(step) is the step's batch of the step's epoch, and the same on every call") {
  const Dataset d = numbered_dataset(10);
  DataLoaderOptions options;
  options.batch_size = 3;
  options.seed = 5;
  const DataLoader loader(d, options);
  REQUIRE(loader.batches_per_epoch() == 4);
  for (std::int64_t epoch = 0; epoch < 3; ++epoch) {
    const std::vector<Batch> batches = loader.epoch(epoch);
    for (std::int64_t i = 0; i < 4; ++i) {
      const Batch b = loader.batch_at(epoch * 4 + i);
      CHECK(b.indices == batches[static_cast<std::size_t>(i)].indices);
      CHECK(b.input.to_vector<std::int64_t>() == batches[static_cast<std::size_t>(i)].input.to_vector<std::int64_t>());
    }
  }
  // A loader built later (a resumed run) gives the same batch for the same step.
  const DataLoader resumed(numbered_dataset(10), options);
  CHECK(resumed.batch_at(9).indices == loader.batch_at(9).indices);
  CHECK(loader.batch_at(4).indices != loader.batch_at(0).indices);
  CHECK_THROWS_WITH_AS(loader.batch_at(-1), doctest::Contains("got -1"), IndexError);
  CHECK_THROWS_AS(loader.batch(-1, 0), IndexError);
}

TEST_CASE("data: DataLoader rejects an empty dataset and a bad batch_size or max_length") {
  DataLoaderOptions options;
  CHECK_THROWS_WITH_AS(DataLoader(Dataset{}, options), doctest::Contains("empty"), ValueError);
  options.batch_size = 0;
  CHECK_THROWS_WITH_AS(DataLoader(numbered_dataset(3), options),
                       doctest::Contains("batch_size must be positive, got 0"), ValueError);
  options.batch_size = -2;
  CHECK_THROWS_WITH_AS(DataLoader(numbered_dataset(3), options), doctest::Contains("got -2"), ValueError);
  options.batch_size = 2;
  options.max_length = -1;
  CHECK_THROWS_WITH_AS(DataLoader(numbered_dataset(3), options), doctest::Contains("max_length"), ValueError);
}

TEST_CASE("data: with num_replicas each rank gets an equal contiguous share of every global batch") {
  const Dataset d = numbered_dataset(22);
  DataLoaderOptions options;
  options.batch_size = 6;  // the global batch
  options.seed = 4;
  const DataLoader whole(d, options);
  REQUIRE(whole.batches_per_epoch() == 4);  // 6, 6, 6, 4
  options.num_replicas = 3;
  for (std::int64_t epoch = 0; epoch < 2; ++epoch) {
    const std::vector<std::size_t> order = whole.order(epoch);
    for (std::int64_t i = 0; i < 4; ++i) {
      std::vector<std::size_t> joined;
      for (int rank = 0; rank < 3; ++rank) {
        options.rank = rank;
        const DataLoader shard(d, options);
        CHECK(shard.batches_per_epoch() == 4);
        CHECK(shard.order(epoch) == order);  // the shared seed: one order on every rank
        const Batch b = shard.batch(epoch, i);
        CHECK(b.size() == 2);  // equal counts, the last batch's too
        CHECK(shard.batch_at(epoch * 4 + i).indices == b.indices);
        joined.insert(joined.end(), b.indices.begin(), b.indices.end());
      }
      const std::vector<std::size_t> global = whole.batch(epoch, i).indices;
      if (i < 3) {
        CHECK(joined == global);  // rank r holds rows [2r, 2r + 2) of the global batch
      } else {
        // 4 rows over 3 ranks: 2 each, the last rank's second row wraps to the epoch's first.
        CHECK(std::vector<std::size_t>(joined.begin(), joined.begin() + 4) == global);
        CHECK(joined[4] == order[0]);
        CHECK(joined[5] == order[1]);
      }
    }
  }
  // Across the ranks an epoch holds every row once, and the last batch's two padding rows are the
  // epoch's first two rows again: 24 rows in all.
  std::vector<std::size_t> seen;
  for (int rank = 0; rank < 3; ++rank) {
    options.rank = rank;
    for (const Batch& b : DataLoader(d, options).epoch(1)) seen.insert(seen.end(), b.indices.begin(), b.indices.end());
  }
  REQUIRE(seen.size() == 24);
  std::vector<std::size_t> expected(22);
  for (std::size_t i = 0; i < expected.size(); ++i) expected[i] = i;
  const std::vector<std::size_t> order1 = whole.order(1);
  expected.push_back(order1[0]);
  expected.push_back(order1[1]);
  std::sort(seen.begin(), seen.end());
  std::sort(expected.begin(), expected.end());
  CHECK(seen == expected);

  options.rank = 3;
  CHECK_THROWS_WITH_AS(DataLoader(d, options), doctest::Contains("rank 3 of num_replicas 3 is not a rank"), ValueError);
  options.rank = 0;
  options.num_replicas = 4;
  CHECK_THROWS_WITH_AS(DataLoader(d, options),
                       doctest::Contains("the global batch_size 6 does not divide among 4 replicas"), ValueError);
}

// ---------------------------------------------------------------- split

TEST_CASE("data: stratified_split keeps class ratios, covers every row once and is seeded") {
  std::vector<std::int64_t> labels;
  for (int i = 0; i < 300; ++i) labels.push_back(i % 3 == 0 ? 1 : 0);  // 100 of class 1, 200 of class 0
  const Split s = stratified_split(labels, 0.7, 0.1, 42);
  CHECK(s.train.size() == 210);
  CHECK(s.validation.size() == 30);
  CHECK(s.test.size() == 60);
  auto count = [&](const std::vector<std::size_t>& rows, std::int64_t label) {
    return std::count_if(rows.begin(), rows.end(), [&](std::size_t r) { return labels[r] == label; });
  };
  CHECK(count(s.train, 1) == 70);
  CHECK(count(s.validation, 1) == 10);
  CHECK(count(s.test, 1) == 20);
  CHECK(count(s.test, 0) == 40);

  std::set<std::size_t> all(s.train.begin(), s.train.end());
  all.insert(s.validation.begin(), s.validation.end());
  all.insert(s.test.begin(), s.test.end());
  CHECK(all.size() == labels.size());
  CHECK(std::is_sorted(s.train.begin(), s.train.end()));

  const Split again = stratified_split(labels, 0.7, 0.1, 42);
  CHECK(again.train == s.train);
  CHECK(again.validation == s.validation);
  CHECK(again.test == s.test);
  CHECK(stratified_split(labels, 0.7, 0.1, 43).train != s.train);

  // Rounding per class: 5 rows * 0.5 = 2.5 -> 3 (half away from zero), 5 * 0.3 = 1.5 -> 2, test gets none.
  const Split small = stratified_split({7, 7, 7, 7, 7}, 0.5, 0.3, 0);
  CHECK(small.train.size() == 3);
  CHECK(small.validation.size() == 2);
  CHECK(small.test.empty());
  // All to train.
  CHECK(stratified_split({0, 1, 0}, 1.0, 0.0, 0).train.size() == 3);

  CHECK_THROWS_WITH_AS(stratified_split(labels, 1.2, 0.0, 0), doctest::Contains("train_fraction"), ValueError);
  CHECK_THROWS_WITH_AS(stratified_split(labels, 0.5, -0.1, 0), doctest::Contains("validation_fraction"), ValueError);
  CHECK_THROWS_WITH_AS(stratified_split(labels, 0.7, 0.4, 0), doctest::Contains("<= 1"), ValueError);
  CHECK_THROWS_AS(stratified_split(labels, std::nan(""), 0.1, 0), ValueError);
}

TEST_CASE("data: stratified_folds deals every row once, keeps class ratios and does not depend on the rows' order") {
  std::vector<std::int64_t> labels;
  for (int i = 0; i < 103; ++i) labels.push_back(i % 4 == 0 ? 1 : 0);  // 26 of class 1, 77 of class 0
  std::vector<std::size_t> rows;
  for (std::size_t r = 0; r < labels.size(); ++r)
    if (r != 50) rows.push_back(r);  // row 50 (class 0) stays out: 102 rows, 26 + 76
  const std::vector<std::vector<std::size_t>> folds = stratified_folds(labels, rows, 5, 7);
  REQUIRE(folds.size() == 5);
  std::multiset<std::size_t> dealt;
  for (std::size_t k = 0; k < folds.size(); ++k) {
    const std::vector<std::size_t>& fold = folds[k];
    CHECK(std::is_sorted(fold.begin(), fold.end()));
    dealt.insert(fold.begin(), fold.end());
    // Class 0's 76 rows are dealt first, from fold 0: fold 0 gets 16, the rest 15. Class 1's 26 continue
    // from fold 1: fold 1 gets 6, the rest 5. So folds 0 and 1 hold 21 rows, the others 20.
    const auto spam = std::count_if(fold.begin(), fold.end(), [&](std::size_t r) { return labels[r] == 1; });
    CHECK(spam == (k == 1 ? 6 : 5));
    CHECK(fold.size() == (k < 2 ? 21u : 20u));
  }
  CHECK(dealt == std::multiset<std::size_t>(rows.begin(), rows.end()));

  std::vector<std::size_t> reversed(rows.rbegin(), rows.rend());
  CHECK(stratified_folds(labels, reversed, 5, 7) == folds);
  CHECK(stratified_folds(labels, rows, 5, 8) != folds);

  CHECK_THROWS_WITH_AS(stratified_folds(labels, rows, 1, 0),
                       "stratified_folds: folds must be at least 2 and at most the 102 rows, got 1", ValueError);
  CHECK_THROWS_WITH_AS(stratified_folds(labels, {0, 1}, 3, 0),
                       "stratified_folds: folds must be at least 2 and at most the 2 rows, got 3", ValueError);
  CHECK_THROWS_WITH_AS(stratified_folds(labels, {0, 103}, 2, 0), "stratified_folds: row 103 is outside the 103 labels",
                       IndexError);
  CHECK_THROWS_WITH_AS(stratified_folds(labels, {5, 6, 5}, 2, 0), "stratified_folds: row 5 is given twice", ValueError);
}

TEST_CASE("data: cross_validation_round re-deals train and validation and keeps the test rows") {
  std::vector<std::int64_t> labels;
  for (int i = 0; i < 200; ++i) labels.push_back(i % 5 == 0 ? 1 : 0);  // 40 of class 1, 160 of class 0
  const Split split = stratified_split(labels, 0.7, 0.2, 3);           // 140 / 40 / 20 rows
  std::set<std::size_t> pool(split.train.begin(), split.train.end());
  pool.insert(split.validation.begin(), split.validation.end());
  REQUIRE(pool.size() == 180);
  std::set<std::size_t> validated;
  for (std::int64_t round = 0; round < 4; ++round) {
    const Split r = cross_validation_round(split, labels, 4, round, 11);
    CHECK(r.test == split.test);
    CHECK(std::is_sorted(r.train.begin(), r.train.end()));
    CHECK(std::is_sorted(r.validation.begin(), r.validation.end()));
    // 180 rows, 36 of class 1: 45 validation rows a round, 9 of them class 1.
    CHECK(r.validation.size() == 45);
    CHECK(std::count_if(r.validation.begin(), r.validation.end(), [&](std::size_t v) { return labels[v] == 1; }) == 9);
    // Training and validation rows are the split's, each in one of the two; no test row enters.
    std::set<std::size_t> seen(r.train.begin(), r.train.end());
    for (const std::size_t v : r.validation) {
      CHECK(seen.insert(v).second);
      CHECK(validated.insert(v).second);  // each row is validated in exactly one round
    }
    CHECK(seen == pool);
  }
  CHECK(validated == pool);

  CHECK_THROWS_WITH_AS(cross_validation_round(split, labels, 4, 4, 0),
                       "cross_validation_round: round must be in [0, 4), got 4", ValueError);
  CHECK_THROWS_WITH_AS(
      cross_validation_round(split, labels, 0, 0, 0),
      "cross_validation_round: folds must be at least 2 and at most the 180 training and validation rows, got 0",
      ValueError);
  Split overlapping = split;
  overlapping.validation.push_back(split.train.front());
  CHECK_THROWS_WITH_AS(
      cross_validation_round(overlapping, labels, 4, 0, 0),
      ("cross_validation_round: row " + std::to_string(split.train.front()) + " is given twice").c_str(), ValueError);
  Split beyond = split;
  beyond.train.push_back(labels.size());
  CHECK_THROWS_WITH_AS(cross_validation_round(beyond, labels, 4, 0, 0),
                       ("cross_validation_round: row " + std::to_string(labels.size()) + " is outside the " +
                        std::to_string(labels.size()) + " labels")
                           .c_str(),
                       IndexError);
}
