// Mutation fuzzing of the readers of untrusted files: each input must load or throw a tapegrad::Error.
// Over 400 lines: the seeds, the mutator and the ten readers stay in one program so that any failure
// replays with one command (--replay or --iteration).
//
// Seeds are valid files made here (safetensors, an example config, a real Trainer checkpoint, vocab files)
// or committed (tests/data/spam-sample/). A deterministic seeded mutator (truncation, bit flips, splices,
// inserted and replaced bytes, deep nesting, huge numbers, duplicate keys, non-UTF-8 bytes, and structural
// edits of the JSON inside, with the checksums recomputed so that edits reach the checks behind them)
// makes each iteration's input from one of a reader's seeds, writes it to a file and feeds it to the reader.
// The readers:
//   safetensors     io::load_safetensors
//   config          examples::Config::load_file and parse_args("--config FILE")
//   trainer_json    train::read_trainer_json
//   checkpoint_dir  Trainer::load_checkpoint with one of the three checkpoint files mutated
//   metrics_jsonl   train::MetricsFile::truncate_after (what a resume does to metrics.jsonl)
//   vocab           data::Vocab::load
//   email_raw       examples::read_email_file on a raw message (whole, and its first half)
//   email_json      examples::read_email_file on a corpus .json file
//   clean_email     examples::clean_email on the bytes (never rejects; the result must be valid UTF-8)
//   tokenizers      data::word_tokenize and data::char_tokenize on the bytes (never reject)
//
//   fuzz_inputs --data-dir tests/data/spam-sample --out build/fuzz_failures [--iterations N] [--seed S]
//               [--reader NAME] [--iteration I] [--min-rejections K] [--work-dir DIR] [--verbose]
//   fuzz_inputs --replay READER FILE      feeds one saved input to one reader and prints the outcome
//
// An input a reader accepts, or rejects with a tapegrad::Error, is fine; any other exception (or a broken
// documented property, such as clean_email's output being valid UTF-8) is a failure: it is printed with the
// reader, the iteration and the mutations, and saved under --out with a replay command. Crashes and
// sanitizer reports end the process; the input being read is then named on stderr, and kept.
// Exit status 1 when anything failed, or when a reader did not accept every seed or rejected fewer than
// --min-rejections inputs (default: a share of its inputs set per reader, e.g. 20% of the safetensors
// mutants), so the test cannot pass without reaching the readers' checks.
//
// --iterations N (or TAPEGRAD_FUZZ_ITERATIONS=N; TAPEGRAD_FUZZ_SEED=S for --seed) sets the inputs per reader;
// tokenizers, whose large inputs cost most, runs 30% of them. Iteration i of a reader depends only on
// (seed, reader, i): --iteration i reruns it alone.

#include <cxxabi.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <typeinfo>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "examples/common/config.h"
#include "examples/spam/spam_corpus.h"
#include "tapegrad/autograd/error.h"
#include "tapegrad/data/tokenizer.h"
#include "tapegrad/data/vocab.h"
#include "tapegrad/io/safetensors.h"
#include "tapegrad/nn/nn.h"
#include "tapegrad/optim/optim.h"
#include "tapegrad/train/checkpoint.h"
#include "tapegrad/train/train.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace tapegrad;

// ---------------------------------------------------------------- options

// Iterations per reader when neither --iterations nor TAPEGRAD_FUZZ_ITERATIONS says otherwise: about
// 35 s for the whole program in the sanitized RelWithDebInfo build, a few seconds in Release.
constexpr std::int64_t kDefaultIterations = 1500;

struct Options {
  std::int64_t iterations = kDefaultIterations;
  std::uint64_t seed = 1;
  std::string data_dir;  // tests/data/spam-sample
  std::string out_dir = "fuzz_failures";
  std::string work_dir;              // where mutants are written; empty: see make_work_dir
  std::string only_reader;           // --reader: run this reader only
  std::int64_t only_iteration = -1;  // --iteration: run this iteration only (with its seed, as in a full run)
  std::int64_t min_rejections = -1;  // -1: each reader's own share of its inputs (Reader::min_reject_percent)
  bool verbose = false;              // also list each reader's most frequent rejection messages
  std::string replay_reader, replay_file;
};

// A mistake on the command line (not an input the program fuzzes).
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::int64_t parse_count(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < 0)
    throw UsageError(flag + " expects a non-negative integer, got \"" + text + "\"");
  return v;
}

Options parse_options(int argc, char** argv) {
  Options o;
  if (const char* env = std::getenv("TAPEGRAD_FUZZ_ITERATIONS"); env != nullptr && *env != '\0')
    o.iterations = parse_count("TAPEGRAD_FUZZ_ITERATIONS", env);
  if (const char* env = std::getenv("TAPEGRAD_FUZZ_SEED"); env != nullptr && *env != '\0')
    o.seed = static_cast<std::uint64_t>(parse_count("TAPEGRAD_FUZZ_SEED", env));
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--iterations") o.iterations = parse_count(arg, value());
    else if (arg == "--seed") o.seed = static_cast<std::uint64_t>(parse_count(arg, value()));
    else if (arg == "--data-dir") o.data_dir = value();
    else if (arg == "--out") o.out_dir = value();
    else if (arg == "--work-dir") o.work_dir = value();
    else if (arg == "--reader") o.only_reader = value();
    else if (arg == "--iteration") o.only_iteration = parse_count(arg, value());
    else if (arg == "--min-rejections") o.min_rejections = parse_count(arg, value());
    else if (arg == "--verbose") o.verbose = true;
    else if (arg == "--replay") {
      o.replay_reader = value();
      o.replay_file = value();
    } else {
      throw UsageError("unknown argument \"" + arg + "\" (see the comment at the top of fuzz_inputs.cpp)");
    }
  }
  if (o.data_dir.empty()) throw UsageError("--data-dir (tests/data/spam-sample) is required");
  return o;
}

// ---------------------------------------------------------------- random numbers

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The mutator's random source: one per (seed, reader, iteration), so any iteration can be rerun alone.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : gen_(seed) {}
  // Uniform in [0, n); 0 when n is 0.
  std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : gen_.randint(n); }
  bool one_in(std::uint64_t n) { return below(n) == 0; }
  // A position in s where bytes may be inserted: [0, size].
  std::size_t position(const std::string& s) { return static_cast<std::size_t>(below(s.size() + 1)); }
  template <class T>
  const T& pick(const std::vector<T>& items) {
    return items[static_cast<std::size_t>(below(items.size()))];
  }

 private:
  Generator gen_;
};

// ---------------------------------------------------------------- independent checks

// CRC-32 (the polynomial of zlib, gzip and PNG), bitwise: an implementation independent of the library's.
std::string crc32_hex(std::string_view bytes) {
  std::uint32_t crc = 0xFFFFFFFFu;
  for (const char ch : bytes) {
    crc ^= static_cast<unsigned char>(ch);
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", static_cast<unsigned>(crc ^ 0xFFFFFFFFu));
  return hex;
}

// Well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF).
bool valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = 0;
    std::uint32_t cp = 0, min = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 2, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      n = 3, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      n = 4, cp = c & 0x07, min = 0x10000;
    } else {
      return false;
    }
    if (i + n > s.size()) return false;
    for (std::size_t k = 1; k < n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

// A documented property of a reader's result that does not hold: a failure like an untyped exception.
class ContractViolation : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

void require(bool ok, const std::string& what) {
  if (!ok) throw ContractViolation(what);
}

// ---------------------------------------------------------------- files

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError("cannot read " + path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Plain write, no fsync: the mutants are rewritten thousands of times.
void write_bytes(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw UsageError("cannot write " + path);
}

// ---------------------------------------------------------------- seeds

// The formats the mutator knows; each decides which mutations apply.
enum class Format { Json, JsonLines, Safetensors, Text };

struct Seed {
  std::string name;    // for messages: "model.safetensors (tiny Trainer run)"
  std::string target;  // the file name a reader reads it as: "trainer.json", "mutant.safetensors"
  Format format;
  std::string bytes;
};

std::string le64(std::uint64_t n) {
  std::string out(8, '\0');
  for (int k = 0; k < 8; ++k) out[k] = static_cast<char>((n >> (8 * k)) & 0xFF);
  return out;
}

// A safetensors file from its header text (padded with spaces to 8 bytes when pad) and data buffer.
std::string join_safetensors(std::string header, std::string_view data, bool pad = true) {
  while (pad && header.size() % 8 != 0) header.push_back(' ');
  return le64(header.size()) + header + std::string(data);
}

// The header text and the data of a safetensors file; false when the length field does not fit.
bool split_safetensors(const std::string& bytes, std::string& header, std::string& data) {
  if (bytes.size() < 8) return false;
  std::uint64_t n = 0;
  for (int k = 7; k >= 0; --k) n = (n << 8) | static_cast<unsigned char>(bytes[k]);
  if (n > bytes.size() - 8) return false;
  header = bytes.substr(8, n);
  data = bytes.substr(8 + n);
  return true;
}

// A small Trainer run: an MLP with dropout, Adam with a cosine schedule and a tracked data generator,
// checkpointing into run_dir. The checkpoint_dir reader loads mutated checkpoints into a fresh one.
struct TinyRun {
  Generator init{5};
  Generator data{6};
  nn::Sequential model;
  optim::Adam adam;
  optim::Scheduler scheduler;
  train::Trainer trainer;

  TinyRun(const std::string& run_dir, std::int64_t max_steps)
      : model(nn::Linear(nn::LinearOptions(3, 6).generator(&init)), nn::ReLU(),
              nn::Dropout(nn::DropoutOptions(0.2).generator(&init)),
              nn::Linear(nn::LinearOptions(6, 1).generator(&init))),
        adam(model->parameters(), optim::AdamOptions(0.01)),
        scheduler(adam, optim::cosine_with_warmup(1, max_steps)),
        trainer(model, adam, options(run_dir, max_steps)) {
    trainer.set_scheduler(&scheduler);
    trainer.track_generator("data", data);
  }
  static train::TrainerOptions options(const std::string& run_dir, std::int64_t max_steps) {
    train::TrainerOptions o;
    o.max_steps = max_steps;
    o.log_every = 1;
    o.run_dir = run_dir;
    o.progress = train::Progress::Off;
    o.out = nullptr;
    return o;
  }
  void fit() {
    trainer.fit([this](std::int64_t) {
      Tensor x = randn({4, 3}, data);  // x: (4, 3)
      Tensor y = x.sum({1}, true);     // y: (4, 1)
      return train::StepOutput{nn::mse_loss(model(x), y), 4};
    });
  }
};

std::vector<Seed> safetensors_seeds(const std::string& dir, const std::string& checkpoint_dir) {
  std::vector<Seed> seeds;
  auto saved = [&](const std::string& name, const NamedTensors& tensors, const io::Metadata& metadata) {
    const std::string path = (fs::path(dir) / (name + ".safetensors")).string();
    io::save_safetensors(path, tensors, metadata);
    seeds.push_back({name + " (save_safetensors)", "mutant.safetensors", Format::Safetensors, read_bytes(path)});
  };
  Generator gen(3);
  saved("mixed",
        {{"weight", randn({3, 4}, gen)},
         {"bias", randn({2}, gen, kFloat64)},
         {"ids", from_vector(std::vector<std::int64_t>{0, -1, 7, INT64_MAX, INT64_MIN}, {5})},
         {"mask", from_vector(std::vector<bool>{true, false, true, true, false, false}, {2, 3})}},
        {{"step", "7"}, {"note", "h\xc3\xa9llo"}});
  saved("edge_shapes",
        {{"scalar", scalar_tensor(2.5)},
         {"empty", zeros({0, 3})},
         {"rank8", ones({1, 1, 1, 1, 1, 1, 1, 2}, kInt64)},
         {"flag", from_vector(std::vector<bool>{true}, {1})}},
        {});
  for (const char* file : {"model.safetensors", "optimizer.safetensors"})
    seeds.push_back({std::string(file) + " (Trainer checkpoint)", "mutant.safetensors", Format::Safetensors,
                     read_bytes((fs::path(checkpoint_dir) / file).string())});
  // Written by hand: no checksums (so changed data reaches the checks behind them), no metadata, entries
  // out of data order, a zero-size tensor, only metadata.
  const std::string one = std::string("\x00\x00\x00\x00\x00\x00\xf0\x3f", 8);  // 1.0 as F64
  seeds.push_back({"bool and f64, no checksums (hand-built)", "mutant.safetensors", Format::Safetensors,
                   join_safetensors(R"({"x":{"dtype":"F64","shape":[],"data_offsets":[0,8]},)"
                                    R"("b":{"dtype":"BOOL","shape":[2,2],"data_offsets":[8,12]},)"
                                    R"("__metadata__":{"k":"v"}})",
                                    one + std::string("\x00\x01\x01\x00", 4))});
  seeds.push_back({"i64 and zero-size, no metadata (hand-built)", "mutant.safetensors", Format::Safetensors,
                   join_safetensors(R"({"z":{"dtype":"F32","shape":[0,4],"data_offsets":[8,8]},)"
                                    R"("n":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})",
                                    std::string("\x05\x00\x00\x00\x00\x00\x00\x80", 8))});
  seeds.push_back({"only metadata (hand-built)", "mutant.safetensors", Format::Safetensors,
                   join_safetensors(R"({"__metadata__":{"format":"pt"}})", "")});
  return seeds;
}

std::vector<Seed> config_seeds() {
  return {
      {"full config", "config.json", Format::Json,
       R"({"steps": 2000, "lr": 0.0005, "verbose": true, "positions": "rotary", "name": "r\u00e9sum\u00e9"})"},
      {"empty config", "config.json", Format::Json, "{}\n"},
      {"partial config", "config.json", Format::Json,
       "{\n  \"lr\": 1,\n  \"positions\": \"all\",\n  \"steps\": 0\n}\n"},
  };
}

// The option schema the config reader is fuzzed with: one option of each type, a string with choices.
examples::Config fuzz_config() {
  examples::Config config("fuzz_config", "The options the fuzzer's config files set.");
  config.add_int("steps", 100, "optimiser steps");
  config.add_float("lr", 1e-3, "learning rate");
  config.add_bool("verbose", false, "print more");
  config.add_string("positions", "learned", "position encoding", {"learned", "sinusoidal", "rotary", "all"});
  config.add_string("name", "run", "a free string");
  return config;
}

std::vector<Seed> trainer_json_seeds(const std::string& checkpoint_dir) {
  const std::string file = (fs::path(checkpoint_dir) / "trainer.json").string();
  std::vector<Seed> seeds{{"trainer.json (Trainer checkpoint)", "trainer.json", Format::Json, read_bytes(file)}};
  // The same state as a version 1 file (no checksum, no optimizer_steps), which is still read.
  json j = json::parse(read_bytes(file));
  j.erase("checksum");
  j.erase("optimizer_steps");
  j["version"] = 1;
  seeds.push_back({"trainer.json version 1", "trainer.json", Format::Json, j.dump(1)});
  return seeds;
}

// The step metrics_jsonl truncates its files after.
constexpr std::int64_t kMetricsKeepStep = 2;

std::vector<Seed> metrics_seeds(const std::string& run_dir) {
  return {{"metrics.jsonl (Trainer run)", "metrics.jsonl", Format::JsonLines,
           read_bytes((fs::path(run_dir) / "metrics.jsonl").string())},
          {"metrics.jsonl with eval, end_of_run and a torn line", "metrics.jsonl", Format::JsonLines,
           "{\"step\":1,\"loss\":0.5,\"lr\":0.001,\"grad_norm\":1.5,\"elapsed_s\":0.01}\n"
           "{\"step\":2,\"eval\":{\"val_loss\":0.25},\"elapsed_s\":0.02}\n"
           "{\"step\":2,\"loss\":0.4,\"end_of_run\":true}\n"
           "{\"step\":3,\"loss\":0.3}\n"
           "{\"step\":4,\"lo"}};
}

std::vector<Seed> checkpoint_dir_seeds(const std::string& checkpoint_dir) {
  std::vector<Seed> seeds;
  for (const char* file : {"model.safetensors", "optimizer.safetensors", "trainer.json"}) {
    const Format format = std::string(file) == "trainer.json" ? Format::Json : Format::Safetensors;
    seeds.push_back(
        {std::string(file) + " in checkpoint/", file, format, read_bytes((fs::path(checkpoint_dir) / file).string())});
  }
  return seeds;
}

struct EmailFile {
  std::string name;  // group/file.json
  std::string json_bytes;
  std::string raw;  // the "text" field: the raw RFC 822 message
};

std::vector<EmailFile> email_files(const std::string& data_dir) {
  std::vector<fs::path> paths;
  for (const auto& group : fs::directory_iterator(data_dir))
    if (group.is_directory())
      for (const auto& file : fs::directory_iterator(group.path()))
        if (file.path().extension() == ".json") paths.push_back(file.path());
  std::sort(paths.begin(), paths.end());
  if (paths.empty()) throw UsageError("no <group>/*.json email in " + data_dir);
  std::vector<EmailFile> out;
  for (const fs::path& p : paths) {
    EmailFile e;
    e.name = (p.parent_path().filename() / p.filename()).string();
    e.json_bytes = read_bytes(p.string());
    e.raw = json::parse(e.json_bytes).at("text").get<std::string>();
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<Seed> vocab_seeds(const std::string& dir, const std::vector<EmailFile>& emails) {
  std::vector<Seed> seeds;
  auto saved = [&](const std::string& name, const data::Vocab& vocab) {
    const std::string path = (fs::path(dir) / (name + ".json")).string();
    vocab.save(path);
    seeds.push_back({name + " (Vocab::save)", "vocab.json", Format::Json, read_bytes(path)});
  };
  std::vector<std::vector<std::string>> docs;
  for (std::size_t i = 0; i < emails.size() && i < 6; ++i)
    docs.push_back(data::word_tokenize(examples::clean_email(emails[i].raw)));
  saved("email words", data::Vocab::build(docs, data::VocabOptions{1, 150}));
  saved("unicode", data::Vocab::from_tokens({"h\xc3\xa9llo", "\xe6\x97\xa5\xe6\x9c\xac", "a\"b", "tab\t",
                                             "\xf0\x9f\x98\x80", "<PAD>", " "}));
  saved("specials only", data::Vocab());
  return seeds;
}

// ---------------------------------------------------------------- mutations

// Bytes that make parsers change state, by format.
const std::vector<std::string>& json_tokens() {
  static const std::vector<std::string> tokens = {"{",
                                                  "}",
                                                  "[",
                                                  "]",
                                                  ",",
                                                  ":",
                                                  "\"",
                                                  "\\",
                                                  " ",
                                                  "\n",
                                                  "null",
                                                  "true",
                                                  "false",
                                                  "0",
                                                  "-",
                                                  "e",
                                                  ".",
                                                  R"("__metadata__")",
                                                  R"("dtype")",
                                                  R"("F32")",
                                                  R"("F64")",
                                                  R"("I64")",
                                                  R"("BOOL")",
                                                  R"("F16")",
                                                  R"("shape")",
                                                  R"("data_offsets")",
                                                  R"("format")",
                                                  R"("version")",
                                                  R"("step")",
                                                  R"("checksum")",
                                                  R"("generators")",
                                                  R"("lrs")",
                                                  R"("tokens")",
                                                  R"("<pad>")",
                                                  R"("text")",
                                                  R"("group")",
                                                  R"("spam-1")",
                                                  R"("tapegrad.crc32.)",
                                                  R"(\u0000)",
                                                  R"(\ud800)",
                                                  R"(\udfff)",
                                                  R"(\uDBFF\uDFFF)",
                                                  R"(\u00)",
                                                  R"(\x41)",
                                                  "/*",
                                                  "//",
                                                  "\xef\xbb\xbf"};
  return tokens;
}

const std::vector<std::string>& email_tokens() {
  static const std::vector<std::string> tokens = {"\n",
                                                  "\r\n",
                                                  "\n\n",
                                                  ": ",
                                                  "Subject: ",
                                                  "Subject: =?utf-8?B?",
                                                  "=?iso-8859-1?Q?caf=E9?=",
                                                  "?=",
                                                  "=?",
                                                  "=?utf-8?q?",
                                                  "=?x?B?////?=",
                                                  "From nobody Mon Jan  1 00:00:00 2001\n",
                                                  "Content-Type: multipart/alternative; boundary=\"b\"\n",
                                                  "Content-Type: multipart/mixed; boundary=b\n",
                                                  "Content-Type: multipart/mixed; boundary=\"\"\n",
                                                  "Content-Type: text/html\n",
                                                  "Content-Type: text/plain\n",
                                                  "Content-Type: message/rfc822\n",
                                                  "Content-Type: application/octet-stream\n",
                                                  "--b\n",
                                                  "--b--\n",
                                                  "--\n",
                                                  "Content-Transfer-Encoding: base64\n",
                                                  "Content-Transfer-Encoding: quoted-printable\n",
                                                  "=\n",
                                                  "=XX",
                                                  "=4",
                                                  "=0D=0A",
                                                  "====",
                                                  "QUJD",
                                                  "QUJ",
                                                  "=",
                                                  "<html>",
                                                  "<body>",
                                                  "</body>",
                                                  "<script>",
                                                  "</script>",
                                                  "<style>",
                                                  "<!--",
                                                  "-->",
                                                  "<br>",
                                                  "<p",
                                                  ">",
                                                  "<",
                                                  "&",
                                                  "&amp;",
                                                  "&#",
                                                  "&#x",
                                                  "&#0;",
                                                  "&#55296;",
                                                  "&#x110000;",
                                                  "&#99999999999999999999;",
                                                  "&#xFFFFFFFFFFFF;",
                                                  "&nbsp;",
                                                  "&lt",
                                                  "\t",
                                                  " ",
                                                  "\x0c",
                                                  "\x1b[0m"};
  return tokens;
}

const std::vector<std::string>& bad_utf8() {
  static const std::vector<std::string> bytes = {"\xff",
                                                 "\xfe",
                                                 "\xc0\x80",
                                                 "\xc0\xaf",
                                                 "\xc1\xbf",
                                                 "\xed\xa0\x80",
                                                 "\xed\xbf\xbf",
                                                 "\xf4\x90\x80\x80",
                                                 "\xf8\x88\x80\x80\x80",
                                                 "\xc3",
                                                 "\xe2\x82",
                                                 "\xf0\x9f\x98",
                                                 "\x80",
                                                 "\xbf",
                                                 std::string(1, '\0'),
                                                 "\x01",
                                                 "\x7f",
                                                 "\x9d",
                                                 R"(\ud800)",
                                                 R"(\udc00x)",
                                                 R"(\uD83D)"};
  return bytes;
}

// Number literals at the edges of what the readers (and nlohmann, and doubles) hold.
const std::vector<std::string>& huge_numbers() {
  static const std::vector<std::string> numbers = {"1e400",
                                                   "-1e400",
                                                   "1e-400",
                                                   "18446744073709551616",
                                                   "18446744073709551615",
                                                   "9223372036854775808",
                                                   "9223372036854775807",
                                                   "-9223372036854775808",
                                                   "-9223372036854775809",
                                                   "4611686018427387904",
                                                   "576460752303423488",
                                                   "288230376151711744",
                                                   "2305843009213693952",
                                                   "4294967296",
                                                   "-1",
                                                   "0",
                                                   "-0",
                                                   "0.5",
                                                   "1.0",
                                                   "2e0",
                                                   "1e19",
                                                   "1e308",
                                                   "-1e308",
                                                   "123456789012345678901234567890",
                                                   "NaN",
                                                   "Infinity",
                                                   "-Infinity",
                                                   "01",
                                                   "1.",
                                                   ".5",
                                                   "0x10",
                                                   "1e",
                                                   "+1",
                                                   "1E+2"};
  return numbers;
}

// The repeated unit and count of a deeply nested input.
std::string deep(const std::string& unit, std::size_t count) {
  std::string out;
  out.reserve(unit.size() * count);
  for (std::size_t i = 0; i < count; ++i) out += unit;
  return out;
}

std::string deep_nesting(Format format, Rng& rng, std::string& log) {
  static const std::vector<std::size_t> counts = {65, 1000, 100000};
  static const std::vector<std::string> json_units = {"[", "{\"a\":", "[{\"a\":", "{\"a\":["};
  static const std::vector<std::string> email_units = {"Content-Type: message/rfc822\n\n",
                                                       "Content-Type: multipart/mixed; boundary=\"b\"\n\n--b\n",
                                                       "<div>",
                                                       "<!--",
                                                       "<script>",
                                                       "<b><i>",
                                                       "=?utf-8?B?PT91dGYtOD9CPw==?="};
  const std::size_t count = rng.pick(counts);
  if (format == Format::Text && rng.one_in(5)) {
    // Nested multiparts, each level with a boundary of its own.
    const std::size_t levels = std::min<std::size_t>(count, 5000);
    std::string out;
    for (std::size_t i = 0; i < levels; ++i)
      out += "Content-Type: multipart/mixed; boundary=\"b" + std::to_string(i) + "\"\n\n--b" + std::to_string(i) + "\n";
    log += "deep(multipart x" + std::to_string(levels) + ")";
    return out + "Content-Type: text/plain\n\nbody\n";
  }
  const bool email = format == Format::Text && rng.one_in(2);
  const std::string& unit = email ? rng.pick(email_units) : rng.pick(json_units);
  // Email units are long: at most about 200 kB of them.
  const std::size_t repeat = email ? std::min(count, 200000 / unit.size()) : count;
  log +=
      "deep(" + json(unit).dump(-1, ' ', false, json::error_handler_t::replace) + " x" + std::to_string(repeat) + ")";
  return deep(unit, repeat);
}

// A random byte string of 1..16 bytes.
std::string random_bytes(Rng& rng) {
  std::string out(1 + rng.below(16), '\0');
  for (char& c : out) c = static_cast<char>(rng.below(256));
  return out;
}

// A token to insert: from the format's dictionary, non-UTF-8 bytes, a number, or random bytes.
std::string some_token(Format format, Rng& rng) {
  switch (rng.below(5)) {
    case 0:
      return rng.pick(bad_utf8());
    case 1:
      return rng.pick(huge_numbers());
    case 2:
      return random_bytes(rng);
    default:
      return format == Format::Text && !rng.one_in(3) ? rng.pick(email_tokens()) : rng.pick(json_tokens());
  }
}

std::string shown(const std::string& token) { return json(token).dump(-1, ' ', false, json::error_handler_t::replace); }

// Replaces a number in the text (a run of [-+.0-9eE] starting at a digit or '-') by an extreme one.
void replace_number(std::string& bytes, Rng& rng, std::string& log) {
  std::vector<std::size_t> starts;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const char c = bytes[i];
    const bool starts_number =
        (c >= '0' && c <= '9') || (c == '-' && i + 1 < bytes.size() && bytes[i + 1] >= '0' && bytes[i + 1] <= '9');
    const bool after_number_char = i > 0 && std::strchr("0123456789.eE+-", bytes[i - 1]) != nullptr;
    if (starts_number && !after_number_char) starts.push_back(i);
  }
  const std::string& number = rng.pick(huge_numbers());
  if (starts.empty()) {
    const std::size_t at = rng.position(bytes);
    bytes.insert(at, number);
    log += "insert_number(" + number + "@" + std::to_string(at) + ")";
    return;
  }
  const std::size_t at = rng.pick(starts);
  std::size_t end = at + 1;
  while (end < bytes.size() && std::strchr("0123456789.eE+-", bytes[end]) != nullptr && bytes[end] != '\0') ++end;
  log += "number(" + bytes.substr(at, end - at) + "->" + number + "@" + std::to_string(at) + ")";
  bytes.replace(at, end - at, number);
}

// Copies a "key": of the text in front of itself, so that its object holds the key twice.
void duplicate_key(std::string& bytes, Rng& rng, std::string& log) {
  std::vector<std::pair<std::size_t, std::size_t>> keys;  // [begin, end) of "key" followed by ':'
  for (std::size_t i = 0; i < bytes.size() && keys.size() < 4096; ++i) {
    if (bytes[i] != '"') continue;
    std::size_t j = i + 1;
    while (j < bytes.size() && j - i < 80 && bytes[j] != '"') j += bytes[j] == '\\' ? 2 : 1;
    if (j >= bytes.size() || bytes[j] != '"') continue;
    std::size_t k = j + 1;
    while (k < bytes.size() && (bytes[k] == ' ' || bytes[k] == '\n')) ++k;
    if (k < bytes.size() && bytes[k] == ':') keys.emplace_back(i, j + 1);
    i = j;
  }
  if (keys.empty()) {
    log += "duplicate_key(none)";
    return;
  }
  static const std::vector<std::string> values = {"null", "1", "\"x\"", "[]", "{}", "-1", "0.5"};
  const auto [begin, end] = rng.pick(keys);
  const std::string key = bytes.substr(begin, end - begin);
  const std::string value = rng.pick(values);
  bytes.insert(begin, key + ":" + value + ",");
  log += "duplicate_key(" + key.substr(0, 40) + "=" + value + ")";
}

// Puts a non-UTF-8 byte sequence (or a lone surrogate escape) into the text, preferably inside a string.
void insert_bad_utf8(std::string& bytes, Rng& rng, std::string& log) {
  const std::string& bad = rng.pick(bad_utf8());
  std::size_t at = rng.position(bytes);
  if (rng.one_in(2)) {
    std::vector<std::size_t> quotes;
    for (std::size_t i = 0; i < bytes.size(); ++i)
      if (bytes[i] == '"') quotes.push_back(i + 1);
    if (!quotes.empty()) at = rng.pick(quotes);
  }
  if (rng.one_in(3) && at < bytes.size()) {
    bytes.replace(at, std::min(bad.size(), bytes.size() - at), bad);
    log += "replace_bad_utf8(" + shown(bad) + "@" + std::to_string(at) + ")";
  } else {
    bytes.insert(at, bad);
    log += "insert_bad_utf8(" + shown(bad) + "@" + std::to_string(at) + ")";
  }
}

// One byte-level or text-level mutation of any input.
void mutate_bytes(std::string& bytes, Format format, const std::vector<Seed>& seeds, Rng& rng, std::string& log) {
  const std::size_t n = bytes.size();
  switch (rng.below(12)) {
    case 0: {
      const std::size_t at = static_cast<std::size_t>(rng.below(n + 1));
      bytes.resize(at);
      log += "truncate(@" + std::to_string(at) + ")";
      break;
    }
    case 1: {
      if (n == 0) return mutate_bytes(bytes, format, seeds, rng, log);
      const std::uint64_t flips = 1 + rng.below(rng.one_in(4) ? 64 : 4);
      log += "flip_bits(";
      for (std::uint64_t k = 0; k < flips; ++k) {
        const std::size_t at = static_cast<std::size_t>(rng.below(n));
        const int bit = static_cast<int>(rng.below(8));
        bytes[at] = static_cast<char>(bytes[at] ^ (1 << bit));
        if (k < 8) log += (k ? "," : "") + std::to_string(at) + "." + std::to_string(bit);
      }
      log += flips > 8 ? ",...)" : ")";
      break;
    }
    case 2: {
      const Seed& other = rng.pick(seeds);
      const std::size_t cut_here = rng.position(bytes);
      const std::size_t cut_other = rng.position(other.bytes);
      bytes = bytes.substr(0, cut_here) + other.bytes.substr(cut_other);
      log += "splice(@" + std::to_string(cut_here) + " + " + other.name + "@" + std::to_string(cut_other) + ")";
      break;
    }
    case 3: {
      const std::string token = some_token(format, rng);
      const std::size_t at = rng.position(bytes);
      bytes.insert(at, token);
      log += "insert(" + shown(token) + "@" + std::to_string(at) + ")";
      break;
    }
    case 4: {
      const std::string token = some_token(format, rng);
      const std::size_t at = rng.position(bytes);
      bytes.replace(at, std::min(token.size(), n - at), token);
      log += "replace(" + shown(token) + "@" + std::to_string(at) + ")";
      break;
    }
    case 5: {
      if (n == 0) return mutate_bytes(bytes, format, seeds, rng, log);
      const std::size_t at = static_cast<std::size_t>(rng.below(n));
      const std::size_t len = 1 + static_cast<std::size_t>(rng.below(std::min<std::size_t>(n - at, 256)));
      bytes.erase(at, len);
      log += "erase(@" + std::to_string(at) + "+" + std::to_string(len) + ")";
      break;
    }
    case 6: {
      if (n == 0) return mutate_bytes(bytes, format, seeds, rng, log);
      const std::size_t at = static_cast<std::size_t>(rng.below(n));
      const std::size_t len = 1 + static_cast<std::size_t>(rng.below(std::min<std::size_t>(n - at, 256)));
      const std::string copy = bytes.substr(at, len);
      const std::size_t to = rng.position(bytes);
      bytes.insert(to, copy);
      log += "duplicate(@" + std::to_string(at) + "+" + std::to_string(len) + " to @" + std::to_string(to) + ")";
      break;
    }
    case 7: {
      const std::string nested = deep_nesting(format, rng, log);
      const std::size_t at = rng.one_in(4) ? 0 : rng.position(bytes);
      if (rng.one_in(4)) bytes = nested;
      else bytes.insert(at, nested);
      log += "@" + std::to_string(at);
      break;
    }
    case 8:
      replace_number(bytes, rng, log);
      break;
    case 9:
      duplicate_key(bytes, rng, log);
      break;
    case 10:
      insert_bad_utf8(bytes, rng, log);
      break;
    default: {
      // Nothing but white space or a byte-order mark.
      static const std::vector<std::string> blanks = {"", " ", "\n\n", " \t\r\n ", "\xef\xbb\xbf"};
      bytes = rng.pick(blanks);
      log += "blank(" + shown(bytes) + ")";
      break;
    }
  }
}

// Deepest nesting of brackets outside strings; structural mutations skip texts deeper than they can walk.
std::size_t bracket_depth(std::string_view text) {
  std::size_t depth = 0, deepest = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

bool parse_for_mutation(const std::string& text, json& out) {
  if (bracket_depth(text) > 200) return false;
  try {
    out = json::parse(text);
    return true;
  } catch (const json::exception&) {
    return false;
  }
}

// A JSON value for a structural edit, and what replaces it in the dumped text: values nlohmann cannot
// hold (1e400, raw bytes, duplicate keys) are dumped as placeholder strings and substituted afterwards.
struct Placeholders {
  std::vector<std::pair<std::string, std::string>> items;  // "\"@@P3@@\"" -> raw text
  json add(const std::string& raw) {
    const std::string name = "@@P" + std::to_string(items.size()) + "@@";
    items.emplace_back("\"" + name + "\"", raw);
    return name;
  }
  std::string apply(std::string text) const {
    for (const auto& [from, to] : items) {
      const std::size_t at = text.find(from);
      if (at != std::string::npos) text.replace(at, from.size(), to);
    }
    return text;
  }
};

// A string literal holding bytes as they are (only '"', '\\' and control bytes escaped): invalid UTF-8 stays.
std::string raw_string_literal(const std::string& bytes) {
  std::string out = "\"";
  for (const char c : bytes) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", u);
      out += esc;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

json interesting_value(Rng& rng, Placeholders& raw) {
  const std::uint64_t p62 = std::uint64_t{1} << 62;
  switch (rng.below(30)) {
    case 0:
      return nullptr;
    case 1:
      return true;
    case 2:
      return 0;
    case 3:
      return -1;
    case 4:
      return 1;
    case 5:
      return 0.5;
    case 6:
      return -0.25;
    case 7:
      return INT64_MAX;
    case 8:
      return INT64_MIN;
    case 9:
      return UINT64_MAX;
    case 10:
      return p62;
    case 11:
      return std::uint64_t{1} << 59;
    case 12:
      return 1e308;
    case 13:
      return 4.9e-324;
    case 14:
      return "";
    case 15:
      return rng.pick(std::vector<std::string>{"F32", "F64", "I64", "BOOL", "F16", "bool", "<pad>", "<unk>",
                                               "tapegrad.trainer", "tapegrad.vocab", "spam-2", "ham", "x"});
    case 16:
      return json::array();
    case 17:
      return json::object();
    case 18:
      return json::array({p62, p62});
    case 19:
      return json::array({0, std::uint64_t{1} << 63});
    case 20:
      return json::array({1, 1, 1, 1, 1, 1, 1, 1, 1});
    case 21:
      return json::array({0, 0});
    case 22:
      return json(std::vector<int>(1000, 0));
    case 23:
      return json::object({{"a", 1}});
    case 24:
      return raw.add(rng.pick(huge_numbers()));
    case 25:
      return raw.add(raw_string_literal(rng.pick(bad_utf8())));
    case 26:
      return raw.add(deep("[", 100000));
    case 27:
      return raw.add(deep("[", 70) + deep("]", 70));
    case 28:
      return std::string(100000, 'a');
    default:
      return raw.add(R"("\ud800")");
  }
}

struct NodeRef {
  json* node;
  json* parent;  // null for the root
  std::string key;
  std::size_t index = 0;
};

std::vector<NodeRef> collect_nodes(json& root) {
  std::vector<NodeRef> out;
  std::vector<NodeRef> stack{{&root, nullptr, "", 0}};
  while (!stack.empty() && out.size() < 20000) {
    NodeRef ref = stack.back();
    stack.pop_back();
    out.push_back(ref);
    if (ref.node->is_object()) {
      for (auto it = ref.node->begin(); it != ref.node->end(); ++it)
        stack.push_back({&it.value(), ref.node, it.key(), 0});
    } else if (ref.node->is_array()) {
      for (std::size_t i = 0; i < ref.node->size(); ++i) stack.push_back({&(*ref.node)[i], ref.node, "", i});
    }
  }
  return out;
}

// One structural edit of a parsed JSON document.
void mutate_json_value(json& root, Format text_format, const std::vector<Seed>& seeds, Rng& rng, Placeholders& raw,
                       std::string& log) {
  std::vector<NodeRef> nodes = collect_nodes(root);
  NodeRef ref = rng.pick(nodes);
  // Emails in JSON: half the edits go to the raw message.
  if (root.is_object() && root.contains("text") && root["text"].is_string() && rng.one_in(2))
    ref = NodeRef{&root["text"], &root, "text", 0};
  const std::string where = ref.parent == nullptr ? "root"
                            : ref.key.empty()     ? "[" + std::to_string(ref.index) + "]"
                                                  : ref.key.substr(0, 40);
  switch (rng.below(ref.node->is_string() ? 9 : 8)) {
    case 0:
    case 1:
      *ref.node = interesting_value(rng, raw);
      log += "set(" + where + ")";
      break;
    case 2:
      if (ref.parent == nullptr) return mutate_json_value(root, text_format, seeds, rng, raw, log);
      if (ref.parent->is_object()) ref.parent->erase(ref.key);
      else ref.parent->erase(ref.index);
      log += "delete(" + where + ")";
      break;
    case 3:
      if (ref.node->is_object()) {
        static const std::vector<std::string> keys = {
            "extra", "dtype", "shape", "data_offsets", "__metadata__", "step",     "tokens", "format",     "version",
            "text",  "group", "loss",  "eval",         "end_of_run",   "checksum", "lrs",    "generators", ""};
        const std::string& key = rng.pick(keys);
        (*ref.node)[key] = interesting_value(rng, raw);
        log += "add_key(" + where + "." + key + ")";
      } else if (ref.node->is_array()) {
        ref.node->push_back(ref.node->empty() ? interesting_value(rng, raw) : (*ref.node)[rng.below(ref.node->size())]);
        log += "append_copy(" + where + ")";
      } else {
        *ref.node = json::array({*ref.node});
        log += "wrap(" + where + ")";
      }
      break;
    case 4:
      if (ref.node->is_object() && !ref.node->empty()) {
        // The same key twice in one object: a placeholder key, replaced by the original in the text.
        auto it = ref.node->begin();
        std::advance(it, static_cast<std::ptrdiff_t>(rng.below(ref.node->size())));
        const std::string dup = "@@P" + std::to_string(raw.items.size()) + "@@";
        raw.items.emplace_back("\"" + dup + "\"", json(it.key()).dump(-1, ' ', false, json::error_handler_t::replace));
        (*ref.node)[dup] = rng.one_in(2) ? it.value() : interesting_value(rng, raw);
        log += "duplicate_key(" + where + "." + it.key().substr(0, 40) + ")";
      } else if (ref.node->is_array() && ref.node->size() >= 2) {
        (*ref.node)[rng.below(ref.node->size())] = json((*ref.node)[rng.below(ref.node->size())]);
        log += "copy_element(" + where + ")";
      } else {
        *ref.node = ref.node->dump(-1, ' ', false, json::error_handler_t::replace);
        log += "stringify(" + where + ")";
      }
      break;
    case 5:
      if (ref.node->is_number_integer()) {
        const std::int64_t v = ref.node->get<std::int64_t>();
        static const std::vector<std::int64_t> deltas = {1, -1, 2, -2, 1000, -1000};
        const std::int64_t d = rng.pick(deltas);
        std::int64_t sum = 0;
        // An earlier edit may have set INT64_MAX: then the value wraps, as text would not; keep it instead.
        if (!__builtin_add_overflow(v, d, &sum)) *ref.node = sum;
        log += "add(" + where + "," + std::to_string(d) + ")";
      } else if (ref.node->is_number()) {
        *ref.node = -ref.node->get<double>() * 2;
        log += "scale(" + where + ")";
      } else {
        *ref.node = interesting_value(rng, raw);
        log += "set(" + where + ")";
      }
      break;
    case 6:
      *ref.node = json::object({{"a", *ref.node}});
      log += "wrap_object(" + where + ")";
      break;
    case 7: {
      // Another seed's value of the same key, or the whole other document.
      json other;
      const Seed& seed = rng.pick(seeds);
      if (parse_for_mutation(seed.bytes, other)) {
        *ref.node = other.is_object() && other.contains(ref.key) ? other[ref.key] : other;
        log += "graft(" + where + " from " + seed.name + ")";
      }
      break;
    }
    default: {
      // A string edited as bytes (the message of an email, a token, a dtype): stored raw, invalid UTF-8 included.
      std::string s = ref.node->get<std::string>();
      const std::uint64_t edits = 1 + rng.below(3);
      log += "edit_string(" + where + ": ";
      for (std::uint64_t k = 0; k < edits; ++k) mutate_bytes(s, text_format, seeds, rng, log);
      log += ")";
      *ref.node = raw.add(raw_string_literal(s));
      break;
    }
  }
}

// trainer.json's checksum field recomputed as the reader computes it (CRC-32 of the compact dump of the
// other fields), so that edits reach the field checks behind the checksum.
void fix_trainer_checksum(json& j) {
  if (!j.is_object() || !j.contains("checksum")) return;
  json rest = j;
  rest.erase("checksum");
  j["checksum"] = crc32_hex(rest.dump(-1, ' ', false, json::error_handler_t::replace));
}

// Every tensor's CRC-32 in __metadata__ recomputed from the data, where the entry's offsets are in range.
void fix_safetensors_checksums(json& header, const std::string& data) {
  if (!header.is_object()) return;
  if (header.contains("__metadata__") && !header["__metadata__"].is_object()) return;
  json& meta = header["__metadata__"];
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__" || !it.value().is_object() || !it.value().contains("data_offsets")) continue;
    const json& offs = it.value()["data_offsets"];
    if (!offs.is_array() || offs.size() != 2 || !offs[0].is_number_unsigned() || !offs[1].is_number_unsigned())
      continue;
    const std::uint64_t b = offs[0].get<std::uint64_t>(), e = offs[1].get<std::uint64_t>();
    if (b <= e && e <= data.size())
      meta["tapegrad.crc32." + it.key()] = crc32_hex(std::string_view(data).substr(b, e - b));
  }
}

std::string dump_json(const json& j, Rng& rng, const Placeholders& raw) {
  const int indent = rng.one_in(2) ? -1 : static_cast<int>(rng.below(3));
  return raw.apply(j.dump(indent, ' ', false, json::error_handler_t::replace));
}

// A structural edit of a JSON text (or a byte mutation when it does not parse).
void mutate_json_text(std::string& text, bool trainer_json, Format text_format, const std::vector<Seed>& seeds,
                      Rng& rng, std::string& log) {
  json j;
  if (!parse_for_mutation(text, j)) return mutate_bytes(text, Format::Json, seeds, rng, log);
  Placeholders raw;
  const std::uint64_t edits = 1 + rng.below(2);
  for (std::uint64_t k = 0; k < edits; ++k) {
    if (k) log += " ";
    mutate_json_value(j, text_format, seeds, rng, raw, log);
  }
  if (trainer_json && !rng.one_in(4)) {
    fix_trainer_checksum(j);
    log += " fix_checksum";
  }
  text = dump_json(j, rng, raw);
}

// Edits aimed at the tensor entries of a safetensors header: dtype, shape and data_offsets.
void mutate_tensor_entry(json& header, Rng& rng, std::string& log) {
  std::vector<std::string> names;
  for (auto it = header.begin(); it != header.end(); ++it)
    if (it.key() != "__metadata__" && it.value().is_object()) names.push_back(it.key());
  if (names.empty()) {
    header["t"] = {{"dtype", "F32"}, {"shape", {0}}, {"data_offsets", {0, 0}}};
    log += "add_tensor(t)";
    return;
  }
  const std::string& name = rng.pick(names);
  json& entry = header[name];
  const std::uint64_t p62 = std::uint64_t{1} << 62, p59 = std::uint64_t{1} << 59;
  std::uint64_t b = 0, e = 0;
  if (entry.contains("data_offsets") && entry["data_offsets"].is_array() && entry["data_offsets"].size() == 2 &&
      entry["data_offsets"][0].is_number_unsigned() && entry["data_offsets"][1].is_number_unsigned()) {
    b = entry["data_offsets"][0].get<std::uint64_t>();
    e = entry["data_offsets"][1].get<std::uint64_t>();
  }
  switch (rng.below(4)) {
    case 0: {
      static const std::vector<std::string> dtypes = {"F32", "F64", "I64", "BOOL", "F16", "BF16", "U8", "", "f32"};
      entry["dtype"] = rng.pick(dtypes);
      log += "dtype(" + name + "=" + entry["dtype"].get<std::string>() + ")";
      break;
    }
    case 1: {
      const std::vector<json> shapes = {json::array(),
                                        {0},
                                        {p62, p62},
                                        {p59, 0},
                                        {0, p62},
                                        {0, p59, p59},
                                        {0, 0, 0, 0, 0, 0, 0, 0},
                                        {1, 1, 1, 1, 1, 1, 1, 1, 1},
                                        {std::uint64_t{1} << 58, 2, 0},
                                        {(e - b) / 4},
                                        {(e - b) / 8, 1},
                                        {2, (e - b) / 8},
                                        {-1},
                                        {1.5},
                                        {"2"},
                                        {UINT64_MAX, 0}};
      entry["shape"] = rng.pick(shapes);
      log += "shape(" + name + "=" + entry["shape"].dump() + ")";
      break;
    }
    case 2: {
      const std::vector<json> offsets = {{e, b},          {b, e + 1},         {b + 1, e}, {b, b},    {0, UINT64_MAX},
                                         {UINT64_MAX, 3}, {p62, p62 + e - b}, {b},        {b, e, 0}, {"0", "4"},
                                         {-1, e},         {b + 8, e + 8}};
      entry["data_offsets"] = rng.pick(offsets);
      log += "offsets(" + name + "=" + entry["data_offsets"].dump() + ")";
      break;
    }
    default:
      // Renames the entry (its checksum no longer matches any tensor unless recomputed).
      header[name + "_"] = entry;
      header.erase(name);
      log += "rename(" + name + ")";
      break;
  }
}

// A safetensors mutation: the length field, the header (as text or as JSON, with the length kept right
// and, often, the checksums recomputed), the data, or the file as bytes.
void mutate_safetensors(std::string& bytes, const std::vector<Seed>& seeds, Rng& rng, std::string& log) {
  std::string header, data;
  if (!split_safetensors(bytes, header, data) || rng.one_in(5))
    return mutate_bytes(bytes, Format::Json, seeds, rng, log);
  switch (rng.below(6)) {
    case 0: {
      const std::uint64_t n = header.size();
      const std::vector<std::uint64_t> lengths = {0,
                                                  1,
                                                  2,
                                                  n - 1,
                                                  n + 1,
                                                  n + 8,
                                                  bytes.size() - 8,
                                                  bytes.size(),
                                                  100000001,
                                                  std::uint64_t{1} << 63,
                                                  UINT64_MAX,
                                                  UINT64_MAX - 7};
      const std::uint64_t len = rng.pick(lengths);
      bytes.replace(0, 8, le64(len));
      log += "length_field(" + std::to_string(len) + ")";
      return;
    }
    case 1: {
      log += "header_bytes(";
      mutate_bytes(header, Format::Json, seeds, rng, log);
      log += ")";
      break;
    }
    case 2:
    case 3: {
      json j;
      if (!parse_for_mutation(header, j)) return mutate_bytes(bytes, Format::Json, seeds, rng, log);
      Placeholders raw;
      if (j.is_object() && rng.one_in(2)) {
        mutate_tensor_entry(j, rng, log);
      } else {
        log += "header_json(";
        mutate_json_value(j, Format::Json, seeds, rng, raw, log);
        log += ")";
      }
      if (!rng.one_in(3)) {
        fix_safetensors_checksums(j, data);
        log += " fix_checksums";
      }
      header = dump_json(j, rng, raw);
      break;
    }
    case 4: {
      // Changed data; checksums dropped or recomputed, so the bytes reach the BOOL check and the loader.
      if (data.empty()) return mutate_bytes(bytes, Format::Json, seeds, rng, log);
      const std::uint64_t flips = 1 + rng.below(8);
      for (std::uint64_t k = 0; k < flips; ++k) {
        const std::size_t at = static_cast<std::size_t>(rng.below(data.size()));
        data[at] = static_cast<char>(data[at] ^ (1 << rng.below(8)));
      }
      log += "data_flip(" + std::to_string(flips) + ")";
      json j;
      if (rng.one_in(4) || !parse_for_mutation(header, j)) break;
      if (j.is_object() && j.contains("__metadata__") && j["__metadata__"].is_object() && rng.one_in(2)) {
        json& meta = j["__metadata__"];
        for (auto it = meta.begin(); it != meta.end();)
          it = it.key().rfind("tapegrad.crc32.", 0) == 0 ? meta.erase(it) : std::next(it);
        log += " strip_checksums";
      } else {
        fix_safetensors_checksums(j, data);
        log += " fix_checksums";
      }
      Placeholders none;
      header = dump_json(j, rng, none);
      break;
    }
    default: {
      // Bytes appended to or cut from the data.
      if (rng.one_in(2) && !data.empty()) data.resize(static_cast<std::size_t>(rng.below(data.size())));
      else data += random_bytes(rng);
      log += "data_size(" + std::to_string(data.size()) + ")";
      break;
    }
  }
  bytes = join_safetensors(header, data, !rng.one_in(8));
}

// A structural edit of one line of a JSON-lines file.
void mutate_json_line(std::string& bytes, const std::vector<Seed>& seeds, Rng& rng, std::string& log) {
  std::vector<std::string> lines;
  std::istringstream in(bytes);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  if (lines.empty()) return mutate_bytes(bytes, Format::Json, seeds, rng, log);
  const std::size_t i = static_cast<std::size_t>(rng.below(lines.size()));
  log += "line " + std::to_string(i) + ": ";
  mutate_json_text(lines[i], false, Format::Json, seeds, rng, log);
  const bool final_newline = !bytes.empty() && bytes.back() == '\n';
  bytes.clear();
  for (std::size_t k = 0; k < lines.size(); ++k)
    bytes += lines[k] + (k + 1 < lines.size() || final_newline ? "\n" : "");
}

// The input of one iteration: 1-3 mutations of a seed, chosen by its format.
std::string make_mutant(const Seed& seed, const std::vector<Seed>& seeds, Rng& rng, std::string& log) {
  std::string bytes = seed.bytes;
  const std::uint64_t count = 1 + rng.below(3);
  const bool trainer_json = seed.target == "trainer.json";
  for (std::uint64_t k = 0; k < count; ++k) {
    if (k) log += " | ";
    switch (seed.format) {
      case Format::Safetensors:
        mutate_safetensors(bytes, seeds, rng, log);
        break;
      case Format::Json:
        if (rng.one_in(2)) mutate_json_text(bytes, trainer_json, Format::Text, seeds, rng, log);
        else mutate_bytes(bytes, Format::Json, seeds, rng, log);
        break;
      case Format::JsonLines:
        if (rng.one_in(2)) mutate_json_line(bytes, seeds, rng, log);
        else mutate_bytes(bytes, Format::Json, seeds, rng, log);
        break;
      case Format::Text:
        mutate_bytes(bytes, Format::Text, seeds, rng, log);
        break;
    }
  }
  return bytes;
}

// ---------------------------------------------------------------- readers

// What a reader is given: the mutant's bytes and, for a file reader, the file holding them.
struct Input {
  std::string path;
  std::string bytes;
  std::string target;
};

struct Reader {
  std::string name;
  bool can_reject;         // false: every input must be accepted (tokenizers, clean_email)
  int min_reject_percent;  // the sanity check: at least this share of the inputs must be rejected
  int share_percent;       // iterations run: this share of --iterations (readers whose inputs cost more run fewer)
  std::vector<Seed> seeds;
  std::function<void(const Input&)> run;  // returns (accepted) or throws
};

void check_email(const examples::Email& email, const std::string& where) {
  require(valid_utf8(email.subject), where + ": the subject is not valid UTF-8");
  require(valid_utf8(email.body), where + ": the body is not valid UTF-8");
}

void touch_tensors(const NamedTensors& tensors) {
  for (const auto& [name, t] : tensors) {
    const std::vector<double> values = t.to_vector<double>();
    require(static_cast<std::int64_t>(values.size()) == t.numel(), "tensor '" + name + "': numel disagrees");
  }
}

std::vector<Reader> make_readers(const std::string& work, const std::string& data_dir) {
  const std::string seed_dir = (fs::path(work) / "seeds").string();
  const std::string run_dir = (fs::path(seed_dir) / "tiny_run").string();
  fs::create_directories(seed_dir);
  fs::remove_all(run_dir);
  {
    TinyRun run(run_dir, 3);
    run.fit();
  }
  const std::string checkpoint = (fs::path(run_dir) / "checkpoint").string();
  const std::vector<EmailFile> emails = email_files(data_dir);

  std::vector<Reader> readers;
  readers.push_back({"safetensors", true, 20, 100, safetensors_seeds(seed_dir, checkpoint), [](const Input& in) {
                       const io::SafetensorsFile file = io::load_safetensors(in.path);
                       touch_tensors(file.tensors);
                     }});
  readers.push_back({"config", true, 20, 100, config_seeds(), [](const Input& in) {
                       examples::Config config = fuzz_config();
                       config.load_file(in.path);
                       (void)config.get_int("steps");
                       (void)config.get_float("lr");
                       (void)config.get_bool("verbose");
                       (void)config.get_string("positions");
                       (void)config.to_json().dump();
                       // The same file through the command line's --config.
                       examples::Config again = fuzz_config();
                       const char* argv[] = {"fuzz_config", "--config", in.path.c_str()};
                       again.parse_args(3, argv);
                       require(again.to_json() == config.to_json(), "--config and load_file disagree");
                     }});
  readers.push_back({"trainer_json", true, 20, 100, trainer_json_seeds(checkpoint),
                     [](const Input& in) { (void)train::read_trainer_json(in.path); }});
  readers.push_back({"checkpoint_dir", true, 20, 100, checkpoint_dir_seeds(checkpoint), [checkpoint](const Input& in) {
                       // in.path is <run>/checkpoint/<target>; the other two files are the valid ones.
                       const fs::path dir = fs::path(in.path).parent_path();
                       for (const char* file : {"model.safetensors", "optimizer.safetensors", "trainer.json"})
                         if (in.target != file)
                           fs::copy_file(fs::path(checkpoint) / file, dir / file, fs::copy_options::overwrite_existing);
                       TinyRun run(dir.parent_path().string(), 3);
                       require(run.trainer.load_checkpoint(), "load_checkpoint found no checkpoint");
                     }});
  readers.push_back(
      {"metrics_jsonl", true, 0, 100, metrics_seeds(run_dir), [](const Input& in) {
         // What a resume at step 2 does to metrics.jsonl; the kept lines must be as documented.
         train::MetricsFile(in.path).truncate_after(kMetricsKeepStep);
         std::ifstream kept(in.path, std::ios::binary);
         for (std::string line; std::getline(kept, line);) {
           json j;
           try {
             j = json::parse(line);
           } catch (const json::exception&) {
             throw ContractViolation("truncate_after kept a line that is not JSON: " + line.substr(0, 200));
           }
           const json* step = j.is_object() && j.contains("step") ? &j["step"] : nullptr;
           const bool step_ok =
               step != nullptr && ((step->is_number_unsigned() &&
                                    step->get<std::uint64_t>() <= static_cast<std::uint64_t>(kMetricsKeepStep)) ||
                                   (step->is_number_integer() && !step->is_number_unsigned() &&
                                    step->get<std::int64_t>() <= kMetricsKeepStep));
           require(step_ok, "truncate_after(2) kept a line without an integer step <= 2: " + line.substr(0, 200));
           require(!(j.contains("end_of_run") && j["end_of_run"] == true),
                   "truncate_after kept an end_of_run line: " + line.substr(0, 200));
         }
       }});
  std::vector<Seed> vocab = vocab_seeds(seed_dir, emails);
  readers.push_back({"vocab", true, 20, 100, vocab, [](const Input& in) {
                       const data::Vocab v = data::Vocab::load(in.path);
                       require(v.size() >= data::Vocab::kNumSpecials, "fewer tokens than the specials");
                       const std::vector<std::int64_t> ids = v.encode(v.tokens(), true, true);
                       require(v.decode(ids, false).size() == ids.size(), "decode lost tokens");
                     }});

  std::vector<Seed> raw_seeds, json_seeds;
  for (const EmailFile& e : emails) {
    raw_seeds.push_back({e.name + " (text)", "mutant.eml", Format::Text, e.raw});
    json_seeds.push_back({e.name, "mutant.json", Format::Json, e.json_bytes});
  }
  readers.push_back({"email_raw", true, 1, 100, raw_seeds, [](const Input& in) {
                       // The whole file, then only its first half (Email::truncated).
                       check_email(examples::read_email_file(in.path), "read_email_file");
                       const examples::Email head = examples::read_email_file(in.path, in.bytes.size() / 2);
                       check_email(head, "read_email_file(max_bytes)");
                     }});
  readers.push_back({"email_json", true, 10, 100, json_seeds, [](const Input& in) {
                       check_email(examples::read_email_file(in.path), "read_email_file(.json)");
                     }});
  readers.push_back({"clean_email", false, 0, 100, raw_seeds, [](const Input& in) {
                       require(valid_utf8(examples::clean_email(in.bytes)), "clean_email's result is not valid UTF-8");
                     }});

  std::vector<Seed> text_seeds = raw_seeds;
  for (const Seed& s : vocab) text_seeds.push_back({s.name, "mutant.txt", Format::Text, s.bytes});
  for (const Seed& s : config_seeds()) text_seeds.push_back({s.name, "mutant.txt", Format::Text, s.bytes});
  readers.push_back({"tokenizers", false, 0, 30, text_seeds, [](const Input& in) {
                       // char_tokenize: one token per well-formed UTF-8 sequence or per other byte, nothing lost.
                       std::string joined;
                       for (const std::string& t : data::char_tokenize(in.bytes)) {
                         require(!t.empty() && (t.size() == 1 || valid_utf8(t)),
                                 "char_tokenize made a token that is neither one byte nor one UTF-8 character");
                         joined += t;
                       }
                       require(joined == in.bytes, "char_tokenize's tokens do not join to the text");
                       const std::vector<std::string> words = data::word_tokenize(in.bytes);
                       for (const std::string& w : words) require(!w.empty(), "word_tokenize made an empty word");
                       const std::vector<std::string> head = data::word_tokenize(in.bytes, 3);
                       require(head.size() == std::min<std::size_t>(3, words.size()) &&
                                   std::equal(head.begin(), head.end(), words.begin()),
                               "word_tokenize(text, 3) is not the first 3 words of word_tokenize(text)");
                     }});
  return readers;
}

// ---------------------------------------------------------------- crash reports

// What is being read, for a crash or a hang: written to stderr by the death callback or signal handler.
char g_current[2048] = "";

void set_current(const std::string& text) { std::snprintf(g_current, sizeof g_current, "%s\n", text.c_str()); }

void print_current() {
  const char* prefix = "\nfuzz_inputs: died while reading: ";
  ssize_t ignored = ::write(2, prefix, std::strlen(prefix));
  ignored = ::write(2, g_current, std::strlen(g_current));
  (void)ignored;
}

#if !defined(__SANITIZE_ADDRESS__)
void on_fatal_signal(int sig) {
  print_current();
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}
#endif

void on_alarm(int) {
  const char* msg = "\nfuzz_inputs: one input took more than 60 s (a hang?)";
  ssize_t ignored = ::write(2, msg, std::strlen(msg));
  (void)ignored;
  print_current();
  ::_exit(3);
}

void install_crash_reporting() {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_set_death_callback(print_current);
#endif
#if !defined(__SANITIZE_ADDRESS__)
  // Without AddressSanitizer: the signals of a crash print the input, then end the process as before
  // (on an alternate stack, so that a stack overflow is reported too).
  static std::vector<char> alt_stack(1 << 16);
  stack_t ss{};
  ss.ss_sp = alt_stack.data();
  ss.ss_size = alt_stack.size();
  ::sigaltstack(&ss, nullptr);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) {
    struct sigaction sa {};
    sa.sa_handler = on_fatal_signal;
    sa.sa_flags = SA_ONSTACK | SA_RESETHAND;
    ::sigaction(sig, &sa, nullptr);
  }
#endif
  ::signal(SIGALRM, on_alarm);
}

// ---------------------------------------------------------------- the loop

std::string exception_type() {
  const std::type_info* type = abi::__cxa_current_exception_type();
  if (type == nullptr) return "?";
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(abi::__cxa_demangle(type->name(), nullptr, nullptr, &status), std::free);
  return status == 0 && name ? name.get() : type->name();
}

enum class Outcome { Accepted, Rejected, Failed };

struct Verdict {
  Outcome outcome;
  std::string type;     // the exception's type (rejected or failed)
  std::string message;  // what()
};

Verdict feed(const Reader& reader, const Input& in) {
  try {
    reader.run(in);
    return {Outcome::Accepted, "", ""};
  } catch (const Error& e) {
    return {reader.can_reject ? Outcome::Rejected : Outcome::Failed, exception_type(), e.what()};
  } catch (const std::exception& e) {
    return {Outcome::Failed, exception_type(), e.what()};
  } catch (...) {
    return {Outcome::Failed, exception_type(), "(not a std::exception)"};
  }
}

struct Stats {
  std::int64_t iterations = 0, accepted = 0, rejected = 0, failed = 0;
  std::int64_t seeds_accepted = 0, seeds = 0;
  std::size_t longest_message = 0;
  std::string longest_what;                      // its start, and the iteration
  std::map<std::string, std::int64_t> messages;  // rejection messages with digits masked -> count
  double seconds = 0;
  double reading = 0;        // seconds inside the reader
  double slowest = 0;        // seconds of the slowest input
  std::string slowest_what;  // its iteration and mutations
};

// A rejection message with the work directory dropped and digits masked, to count distinct checks.
std::string message_kind(std::string message, const std::string& work) {
  for (std::size_t at; (at = message.find(work)) != std::string::npos;) message.replace(at, work.size(), "<work>");
  for (char& c : message)
    if (c >= '0' && c <= '9') c = '#';
  return message.substr(0, 160);
}

// Keeps a failing input and what is known about it under out_dir.
void save_failure(const Options& o, const Reader& reader, std::int64_t iteration, const Input& in,
                  const std::string& log, const Verdict& v) {
  const std::string stem = reader.name + "-seed" + std::to_string(o.seed) + "-iter" + std::to_string(iteration);
  const std::string file = (fs::path(o.out_dir) / (stem + "-" + in.target)).string();
  write_bytes(file, in.bytes);
  std::ostringstream note;
  note << "reader: " << reader.name << "\niteration: " << iteration << "\nseed: " << o.seed << "\nmutations: " << log
       << "\nexception: " << v.type << "\nwhat: " << v.message.substr(0, 4000) << "\nreplay: fuzz_inputs --data-dir "
       << o.data_dir << " --replay " << reader.name << " " << file << "\nrerun: fuzz_inputs --data-dir " << o.data_dir
       << " --seed " << o.seed << " --reader " << reader.name << " --iteration " << iteration << "\n";
  write_bytes((fs::path(o.out_dir) / (stem + ".txt")).string(), note.str());
  std::cerr << "FAILURE " << reader.name << " iteration " << iteration << ": " << v.type << ": "
            << v.message.substr(0, 600) << "\n  mutations: " << log.substr(0, 600) << "\n  saved: " << file << "\n";
}

// The file a reader reads its mutant from: <work>/<reader>/<target>, or .../checkpoint/<target>.
std::string mutant_path(const std::string& work, const Reader& reader, const std::string& target) {
  fs::path dir = fs::path(work) / reader.name;
  if (reader.name == "checkpoint_dir") dir = dir / "checkpoint";
  fs::create_directories(dir);
  return (dir / target).string();
}

// The iterations a reader runs: its share of --iterations, at least 1.
std::int64_t iterations_of(const Options& o, const Reader& reader) {
  return o.iterations == 0 ? 0 : std::max<std::int64_t>(1, o.iterations * reader.share_percent / 100);
}

Stats run_reader(const Options& o, std::size_t reader_index, const Reader& reader, const std::string& work) {
  Stats stats;
  const auto start = std::chrono::steady_clock::now();
  constexpr int kMaxSavedPerReader = 25;
  int saved = 0;
  auto one = [&](std::int64_t iteration, const Seed& seed, std::string bytes, const std::string& log) {
    Input in{mutant_path(work, reader, seed.target), std::move(bytes), seed.target};
    write_bytes(in.path, in.bytes);
    set_current(reader.name + " iteration " + std::to_string(iteration) + " (seed " + std::to_string(o.seed) +
                "), input " + in.path + ", mutations: " + log.substr(0, 1500));
    ::alarm(60);
    const auto t0 = std::chrono::steady_clock::now();
    const Verdict v = feed(reader, in);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ::alarm(0);
    stats.reading += took;
    if (took > stats.slowest) {
      stats.slowest = took;
      stats.slowest_what = "iteration " + std::to_string(iteration) + " (" + std::to_string(in.bytes.size()) +
                           " bytes): " + log.substr(0, 300);
    }
    if (v.outcome == Outcome::Failed) {
      ++stats.failed;
      if (saved++ < kMaxSavedPerReader) save_failure(o, reader, iteration, in, log, v);
    } else if (v.outcome == Outcome::Rejected) {
      ++stats.rejected;
      if (v.message.size() > stats.longest_message) {
        stats.longest_message = v.message.size();
        stats.longest_what = "iteration " + std::to_string(iteration) + ": " + v.message.substr(0, 200);
      }
      ++stats.messages[message_kind(v.message, work)];
    } else {
      ++stats.accepted;
    }
    return v;
  };
  // The unmutated seeds first: each must load.
  for (const Seed& seed : reader.seeds) {
    ++stats.seeds;
    const Verdict v = one(-1, seed, seed.bytes, "none (seed " + seed.name + ")");
    if (v.outcome == Outcome::Accepted) ++stats.seeds_accepted;
    else
      std::cerr << "SEED REJECTED " << reader.name << ": " << seed.name << ": " << v.type << ": " << v.message << "\n";
  }
  const std::int64_t iterations = iterations_of(o, reader);
  for (std::int64_t i = 0; i < iterations; ++i) {
    if (o.only_iteration >= 0 && i != o.only_iteration) continue;
    Rng rng(
        splitmix64(o.seed ^ splitmix64(reader_index + 1) ^ splitmix64(0x100000000ULL + static_cast<std::uint64_t>(i))));
    const Seed& seed = rng.pick(reader.seeds);
    std::string log = "seed " + seed.name + ": ";
    std::string bytes = make_mutant(seed, reader.seeds, rng, log);
    ++stats.iterations;
    one(i, seed, std::move(bytes), log);
  }
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

int replay(const Options& o, const std::vector<Reader>& readers, const std::string& work) {
  const auto it =
      std::find_if(readers.begin(), readers.end(), [&](const Reader& r) { return r.name == o.replay_reader; });
  if (it == readers.end()) throw UsageError("no reader named \"" + o.replay_reader + "\"");
  std::string target = it->seeds.front().target;
  for (const Seed& s : it->seeds)
    if (o.replay_file.size() >= s.target.size() &&
        o.replay_file.compare(o.replay_file.size() - s.target.size(), s.target.size(), s.target) == 0)
      target = s.target;
  Input in{mutant_path(work, *it, target), read_bytes(o.replay_file), target};
  write_bytes(in.path, in.bytes);
  set_current(it->name + " replay of " + o.replay_file);
  const Verdict v = feed(*it, in);
  const char* outcome = v.outcome == Outcome::Accepted   ? "accepted"
                        : v.outcome == Outcome::Rejected ? "rejected"
                                                         : "FAILED";
  std::cout << it->name << ": " << outcome << (v.type.empty() ? "" : " (" + v.type + ")") << "\n" << v.message << "\n";
  return v.outcome == Outcome::Failed ? 1 : 0;
}

// Where the seeds and mutants are written: --work-dir, else a new directory in /dev/shm (a tmpfs, where the
// fsyncs of metrics.jsonl's rewrite and of the checkpoint files cost nothing), else <out>/work.
std::string make_work_dir(const Options& o) {
  std::error_code ec;
  if (o.work_dir.empty() && fs::is_directory("/dev/shm", ec) && ::access("/dev/shm", W_OK) == 0) {
    char tmpl[] = "/dev/shm/tapegrad_fuzz_XXXXXX";
    if (::mkdtemp(tmpl) != nullptr) return tmpl;
  }
  const fs::path work = fs::absolute(o.work_dir.empty() ? fs::path(o.out_dir) / "work" : fs::path(o.work_dir));
  fs::remove_all(work);
  fs::create_directories(work);
  return work.string();
}

int run(const Options& o) {
  install_crash_reporting();
  fs::create_directories(o.out_dir);
  const std::string work = make_work_dir(o);
  const std::vector<Reader> readers = make_readers(work, o.data_dir);
  if (!o.replay_reader.empty()) {
    const int status = replay(o, readers, work);
    fs::remove_all(work);
    return status;
  }

  std::cout << "fuzz_inputs: seed " << o.seed << ", " << o.iterations
            << " iterations per reader (see --iterations), failures saved in " << fs::absolute(o.out_dir).string()
            << "\n";
  std::printf("%-15s %6s %10s %9s %9s %9s %8s %9s %8s\n", "reader", "seeds", "iterations", "accepted", "rejected",
              "FAILED", "distinct", "longest", "seconds");
  bool ok = true;
  bool any = false;
  for (std::size_t r = 0; r < readers.size(); ++r) {
    const Reader& reader = readers[r];
    if (!o.only_reader.empty() && reader.name != o.only_reader) continue;
    any = true;
    const Stats s = run_reader(o, r, reader, work);
    std::printf("%-15s %3lld/%-2lld %10lld %9lld %9lld %9lld %8zu %9zu %8.1f\n", reader.name.c_str(),
                static_cast<long long>(s.seeds_accepted), static_cast<long long>(s.seeds),
                static_cast<long long>(s.iterations), static_cast<long long>(s.accepted - s.seeds_accepted),
                static_cast<long long>(s.rejected), static_cast<long long>(s.failed), s.messages.size(),
                s.longest_message, s.seconds);
    std::fflush(stdout);
    if (s.failed > 0) ok = false;
    if (s.seeds_accepted != s.seeds) {
      std::cerr << "CHECK FAILED " << reader.name << ": accepted " << s.seeds_accepted << " of its " << s.seeds
                << " unmutated seeds\n";
      ok = false;
    }
    // A reader that rejects nothing was never reached past its first check, or its checks are gone.
    const std::int64_t wanted = reader.min_reject_percent == 0 || o.only_iteration >= 0 ? 0
                                : o.min_rejections >= 0
                                    ? o.min_rejections
                                    : std::max<std::int64_t>(1, s.iterations * reader.min_reject_percent / 100);
    if (s.rejected < wanted) {
      std::cerr << "CHECK FAILED " << reader.name << ": rejected " << s.rejected << " inputs, fewer than " << wanted
                << " (--min-rejections)\n";
      ok = false;
    }
    if (o.verbose) {
      std::printf("    %.1f s in the reader; slowest input: %.3f s, %s\n", s.reading, s.slowest,
                  s.slowest_what.c_str());
      std::printf("    longest rejection message: %zu bytes, %s\n", s.longest_message, s.longest_what.c_str());
      std::vector<std::pair<std::int64_t, std::string>> top;
      for (const auto& [kind, count] : s.messages) top.emplace_back(count, kind);
      std::sort(top.rbegin(), top.rend());
      for (std::size_t i = 0; i < top.size() && i < 25; ++i)
        std::printf("    %6lld  %s\n", static_cast<long long>(top[i].first), top[i].second.c_str());
    }
  }
  if (!any) throw UsageError("no reader named \"" + o.only_reader + "\"");
  // "accepted" counts the mutants that loaded (the seeds are in "seeds"); "distinct" the distinct
  // rejection messages (digits masked); "longest" the longest rejection message in bytes.
  std::cout << (ok ? "fuzz_inputs: every input loaded or was rejected with a tapegrad::Error\n"
                   : "fuzz_inputs: FAILED (see above; inputs saved in " + fs::absolute(o.out_dir).string() + ")\n");
  fs::remove_all(work);  // failing inputs were copied to out_dir; after a crash the directory stays
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse_options(argc, argv));
  } catch (const UsageError& e) {
    std::cerr << "fuzz_inputs: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    // Outside a reader: making the seeds failed.
    std::cerr << "fuzz_inputs: setting up the seeds failed: " << e.what() << "\n";
    return 1;
  }
}
