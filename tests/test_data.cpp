// data: tokenizers, vocabularies, batching, stratified splits and the spam corpus loader.

#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "autograd/error.h"
#include "data/data.h"

using namespace tapegrad;
using namespace tapegrad::data;
namespace fs = std::filesystem;

namespace {

const std::string kSampleDir = std::string(TAPEGRAD_TEST_DATA_DIR) + "/spam-sample";

// A fresh directory, removed with its files at scope exit.
struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/tapegrad_data_XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

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

// True if some line is a long run of base64 characters, as an undecoded attachment would be.
bool has_base64_line(const std::string& text) {
  std::size_t run = 0;
  for (char c : text) {
    const bool b64 = std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/' || c == '=';
    run = b64 ? run + 1 : 0;
    if (run >= 60) return true;
  }
  return false;
}

const Email* find_email(const std::vector<Email>& emails, const std::string& group, const std::string& id_prefix) {
  for (const Email& e : emails)
    if (e.group == group && e.id.rfind(id_prefix, 0) == 0) return &e;
  return nullptr;
}

}  // namespace

// ---------------------------------------------------------------- tokenizers

TEST_CASE("data: word_tokenize lowercases, keeps inner apostrophes and UTF-8 letters, drops punctuation") {
  CHECK(word_tokenize("Don't WAIT: 100% free!") == std::vector<std::string>{"don't", "wait", "100", "free"});
  CHECK(word_tokenize("  'quoted' rock'n'roll o'") == std::vector<std::string>{"quoted", "rock'n'roll", "o"});
  CHECK(word_tokenize("Sitting Bull \xC3\xBC" "ber alles") ==
        std::vector<std::string>{"sitting", "bull", "\xC3\xBC" "ber", "alles"});
  CHECK(word_tokenize("e-mail@x.com") == std::vector<std::string>{"e", "mail", "x", "com"});
  CHECK(word_tokenize("").empty());
  CHECK(word_tokenize(" ,.;!? ").empty());
}

TEST_CASE("data: char_tokenize splits into UTF-8 code points, a stray byte on its own") {
  CHECK(char_tokenize("n\xC3\xA9 \xE2\x82\xAC!") == std::vector<std::string>{"n", "\xC3\xA9", " ", "\xE2\x82\xAC", "!"});
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
  const Vocab vocab = Vocab::build({{"\xC3\xBC" "ber", "alles", "free", "free", "\"quoted\"", "back\\slash"}});
  const std::string path = dir.file("vocab.json");
  vocab.save(path);
  const Vocab loaded = Vocab::load(path);
  CHECK(loaded == vocab);
  CHECK(loaded.id("free") == vocab.id("free"));
  CHECK(loaded.id("\xC3\xBC" "ber") == vocab.id("\xC3\xBC" "ber"));
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

  auto rejects = [&](const std::string& name, const std::string& text, const std::string& message) {
    const std::string path = dir.file(name);
    write_text(path, text);
    INFO(name);
    CHECK_THROWS_WITH_AS(Vocab::load(path), doctest::Contains(message.c_str()), ValueError);
    CHECK_THROWS_WITH_AS(Vocab::load(path), doctest::Contains(path.c_str()), ValueError);
  };
  rejects("truncated.json", R"({"tokens": ["<pad>", "<unk>")", "not valid JSON");
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
  CHECK(b.padding_mask.to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{0, 1, 1, 0, 0, 0});
  CHECK(b.lengths.to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 3});
  CHECK(b.tokens == 4);
  REQUIRE(b.target.defined());
  CHECK(b.target.shape() == Shape{2, 4});
  CHECK(b.target.to_vector<std::int64_t>() == std::vector<std::int64_t>{7, 6, 5, 4, 8, 9, 0, 0});
  CHECK(b.target_padding_mask.to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{0, 0, 0, 0, 0, 0, 1, 1});
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

TEST_CASE("data: an epoch visits every row once; drop_last drops the short last batch") {
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
  CHECK_THROWS_WITH_AS(DataLoader(numbered_dataset(3), options), doctest::Contains("batch_size must be positive, got 0"),
                       ValueError);
  options.batch_size = -2;
  CHECK_THROWS_WITH_AS(DataLoader(numbered_dataset(3), options), doctest::Contains("got -2"), ValueError);
  options.batch_size = 2;
  options.max_length = -1;
  CHECK_THROWS_WITH_AS(DataLoader(numbered_dataset(3), options), doctest::Contains("max_length"), ValueError);
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

// ---------------------------------------------------------------- email cleaning

TEST_CASE("data: clean_email drops headers, keeps the subject, decodes quoted-printable") {
  const std::string raw =
      "From someone@example.com  Thu Aug 22 12:36:23 2002\n"
      "Return-Path: <someone@example.com>\n"
      "Received: from mail.example.com\n"
      "\tby relay.example.com; Thu, 22 Aug 2002\n"
      "Subject: Cheap\n"
      " offer =?iso-8859-1?Q?f=FCr_you?=\n"
      "Content-Type: text/plain; charset=iso-8859-1\n"
      "Content-Transfer-Encoding: quoted-printable\n"
      "\n"
      "Price: 10 =3D 5 + 5, caf=E9 incl=\n"
      "uded.\n";
  std::string subject, body;
  parse_email(raw, subject, body);
  CHECK(subject == "Cheap offer f\xC3\xBCr you");
  CHECK(body == "Price: 10 = 5 + 5, caf\xC3\xA9 included.");
  const std::string text = clean_email(raw);
  CHECK(text == subject + "\n" + body);
  CHECK_FALSE(contains(text, "Received"));
  CHECK_FALSE(contains(text, "relay.example.com"));
  CHECK_FALSE(contains(text, "Return-Path"));
}

TEST_CASE("data: clean_email turns HTML into text and decodes entities") {
  const std::string raw =
      "Subject: html\n"
      "Content-Type: text/html\n"
      "\n"
      "<html><head><style>p { color: red; }</style><script>var x = '<b>';</script></head>\n"
      "<body><!-- hidden <p>comment</p> --><p>Fish &amp; chips&nbsp;for &lt;2&gt; &#8364;5 &#x41;&quot;B&quot;</p>"
      "<p>F<b>RE</b>E\nnow</p><table><tr><td>a</td><td>b</td></tr></table>AT&T &bogus; 1 < 2</body></html>";
  std::string subject, body;
  parse_email(raw, subject, body);
  CHECK(subject == "html");
  CHECK(body == "Fish & chips for <2> \xE2\x82\xAC" "5 A\"B\"\n\nFREE now\n\na b\n\nAT&T &bogus; 1 < 2");
}

TEST_CASE("data: clean_email keeps text parts of multipart mail, prefers plain text, drops attachments") {
  const std::string raw =
      "Subject: parts\n"
      "MIME-Version: 1.0\n"
      "Content-Type: multipart/mixed; boundary=\"outer\"\n"
      "\n"
      "This is a multi-part message in MIME format.\n"
      "--outer\n"
      "Content-Type: multipart/alternative; boundary=inner\n"
      "\n"
      "--inner\n"
      "Content-Type: text/plain\n"
      "\n"
      "plain version\n"
      "--inner\n"
      "Content-Type: text/html\n"
      "\n"
      "<p>html version</p>\n"
      "--inner--\n"
      "--outer\n"
      "Content-Type: text/plain; charset=utf-8\n"
      "Content-Transfer-Encoding: base64\n"
      "\n"
      "c2Vjb25kIHBhcnQg\n"
      "w7xiZXI=\n"
      "--outer\n"
      "Content-Type: application/octet-stream; name=\"x.bin\"\n"
      "Content-Transfer-Encoding: base64\n"
      "\n"
      "QUJDREVGR0g=\n"
      "--outer\n"
      "Content-Type: text/plain\n"
      "Content-Disposition: attachment; filename=\"notes.txt\"\n"
      "\n"
      "attached notes\n"
      "--outer--\n"
      "epilogue\n";
  std::string subject, body;
  parse_email(raw, subject, body);
  CHECK(subject == "parts");
  CHECK(body == "plain version\n\nsecond part \xC3\xBC" "ber");

  // An HTML-only alternative is used when there is no plain part.
  const std::string html_only =
      "Content-Type: multipart/alternative; boundary=b\n\n--b\nContent-Type: text/html\n\n<b>only</b> html\n--b--\n";
  CHECK(clean_email(html_only) == "\nonly html");

  // Parts are found even when the message lost its Content-Type header.
  const std::string headless =
      "Subject: s\nMIME-Version: 1.0\n\nThis is a MIME Message\n\n--xyz\nContent-Type: text/html\n"
      "Content-Transfer-Encoding: quoted-printable\n\n<p>price=3D0</p>\n--xyz--\n";
  CHECK(clean_email(headless) == "s\nprice=0");
}

TEST_CASE("data: clean_email reads text without headers as a body and never outputs invalid UTF-8") {
  CHECK(clean_email("Hello   there,\n\n\n\nfriend  ") == "\nHello there,\n\nfriend");
  CHECK(clean_email("Note: call me\nBob") == "\nNote: call me\nBob");
  CHECK(clean_email("Subject: only a subject") == "only a subject\n");
  std::string subject, body;
  // A Latin-1 e-acute byte, a Windows-1252 right quote and a NUL.
  parse_email(std::string("Subject: caf\xE9\n\nit\x92s\0 ok", 23), subject, body);
  CHECK(subject == "caf\xC3\xA9");
  CHECK(body == "it\xE2\x80\x99s ok");
  CHECK(clean_email("").size() == 1);
}

// ---------------------------------------------------------------- corpus

TEST_CASE("data: load_spam_corpus reads the committed sample") {
  const std::vector<Email> emails = load_spam_corpus(kSampleDir);
  // The expected counts are the files on disk, and the sample's README states them.
  std::map<std::string, int> files;
  for (const auto& group : fs::directory_iterator(kSampleDir))
    if (group.is_directory())
      files[group.path().filename().string()] = static_cast<int>(
          std::distance(fs::directory_iterator(group.path()), fs::directory_iterator()));
  std::map<std::string, int> loaded;
  int spam = 0;
  for (const Email& e : emails) {
    loaded[e.group] += 1;
    spam += e.spam;
    CHECK(e.spam == (e.group.rfind("spam", 0) == 0));
  }
  CHECK(loaded == files);
  CHECK(emails.size() == 35);
  CHECK(spam == 15);
  CHECK(loaded["easy-ham-1"] == 8);
  CHECK(loaded["spam-2"] == 8);
  CHECK(std::is_sorted(emails.begin(), emails.end(), [](const Email& a, const Email& b) {
    return a.group != b.group ? a.group < b.group : a.id < b.id;
  }));

  for (const Email& e : emails) {
    INFO(e.group << "/" << e.id);
    CHECK_FALSE(e.subject.empty());
    CHECK_FALSE(contains(e.body, "Return-Path:"));
    CHECK_FALSE(contains(e.body, "Delivered-To:"));
    CHECK_FALSE(contains(e.body, "Content-Transfer-Encoding"));
    CHECK_FALSE(contains(e.body, "=3D"));
    CHECK_FALSE(contains(e.body, "<td"));
    CHECK_FALSE(contains(e.body, "<TD"));
    CHECK_FALSE(contains(e.body, "&nbsp;"));
  }

  const Email* qp_html = find_email(emails, "spam-1", "00266.");
  REQUIRE(qp_html != nullptr);
  CHECK(qp_html->subject == "MSNBC: Rates Hit 35 year Low 4.75% ...12021");
  // "Lowest =\nRates" is a quoted-printable soft break inside HTML, "YOU</FONT>...R RATE" a word cut by tags.
  CHECK(contains(qp_html->body, "Take Advantage of the Lowest Rates In Decades!"));
  CHECK(contains(qp_html->body, "LOWER YOUR PAYMENT AND LOWER YOUR RATE!!!"));
  CHECK(contains(qp_html->text(), "MSNBC"));

  const Email* encoded_subject = find_email(emails, "easy-ham-1", "02434.");
  REQUIRE(encoded_subject != nullptr);
  CHECK(encoded_subject->subject == "Re: RE: [zzzzteana] Sitting Bull \xC3\xBC" "ber alles [Long]");

  const Email* cp1252_subject = find_email(emails, "hard-ham-1", "00149.");
  REQUIRE(cp1252_subject != nullptr);
  CHECK(cp1252_subject->subject == "Matrox Parhelia\xE2\x84\xA2 now available");

  // A signed message: the text part is kept, the base64 signature attachment dropped.
  const Email* signed_mail = find_email(emails, "hard-ham-1", "00183.");
  REQUIRE(signed_mail != nullptr);
  CHECK_FALSE(signed_mail->body.empty());
  CHECK_FALSE(has_base64_line(signed_mail->body));
}

TEST_CASE("data: read_email_file reads a corpus JSON file or a raw mail file") {
  const fs::path sample = fs::path(kSampleDir) / "spam-1" / "00266.3cf1dcf8df07100b1530493e11f80a25.json";
  const Email from_json = read_email_file(sample.string());
  CHECK(from_json.group == "spam-1");
  CHECK(from_json.spam);
  CHECK(from_json.id == "00266.3cf1dcf8df07100b1530493e11f80a25");
  CHECK(contains(from_json.body, "Refinance"));

  TempDir dir;
  const std::string raw = dir.file("message.eml");
  write_text(raw, "Subject: lunch?\r\nFrom: a@b.c\r\n\r\nNoon at the usual place.\r\n");
  const Email mail = read_email_file(raw);
  CHECK(mail.subject == "lunch?");
  CHECK(mail.body == "Noon at the usual place.");
  CHECK(mail.group.empty());

  CHECK_THROWS_WITH_AS(read_email_file(dir.file("none.eml")), doctest::Contains("none.eml"), IoError);
  const std::string bad = dir.file("bad.json");
  write_text(bad, R"({"id": "1", "group": "spam-1"})");
  CHECK_THROWS_WITH_AS(read_email_file(bad), doctest::Contains("field 'text' is missing"), ValueError);
  // A directory or an empty message is an error, not an email with no words.
  CHECK_THROWS_WITH_AS(read_email_file(dir.path.string()), doctest::Contains("is a directory, not a file"), IoError);
  const std::string empty = dir.file("empty.eml");
  write_text(empty, " \r\n\n");
  const std::string empty_message = "read_email_file: '" + empty + "' is empty (4 bytes of white space)";
  CHECK_THROWS_WITH_AS(read_email_file(empty), empty_message.c_str(), ValueError);
}

TEST_CASE("data: a missing corpus says how to fetch it; TAPEGRAD_DATA moves the default folder") {
  TempDir dir;
  const std::string missing = dir.file("spam-assassin");
  CHECK_THROWS_WITH_AS(load_spam_corpus(missing), doctest::Contains("run scripts/fetch-spam-corpus.sh"), IoError);
  CHECK_THROWS_WITH_AS(load_spam_corpus(missing), doctest::Contains(missing.c_str()), IoError);
  // A folder without emails is as good as missing.
  CHECK_THROWS_WITH_AS(load_spam_corpus(dir.path.string()), doctest::Contains("fetch-spam-corpus.sh"), IoError);

  const char* old = std::getenv("TAPEGRAD_DATA");
  const std::string saved = old ? old : "";
  ::setenv("TAPEGRAD_DATA", dir.path.c_str(), 1);
  CHECK(default_spam_corpus_dir() == (dir.path / "spam-assassin").string());
  ::unsetenv("TAPEGRAD_DATA");
  CHECK(contains(default_spam_corpus_dir(), "data/corpora/spam-assassin"));
  if (old) ::setenv("TAPEGRAD_DATA", saved.c_str(), 1);
}
