#pragma once
// What the Trainer's test files share: a small MLP (4 -> 16 -> ReLU -> Dropout -> 1) trained with Adam
// and a cosine schedule on a regression batch drawn from a generator seeded by the step, so every
// run is a pure function of its seeds; and readers of the files a run writes.

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <zlib.h>
#include <nlohmann/json.hpp>

#include "tapegrad/nn/nn.h"
#include "tapegrad/optim/optim.h"
#include "tapegrad/train/train.h"
#include "tests/testing.h"

namespace tapegrad::testing::trainer {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::write_text;

// The model of a run, built from its own generator (not the default one), so that two runs with
// the same seed start from the same weights and dropout seed.
class Mlp : public nn::UnaryModule {
 public:
  Mlp(std::uint64_t seed, std::int64_t hidden = 16)
      : gen_(seed),
        fc1_(register_module("fc1", nn::Linear(nn::LinearOptions(4, hidden).generator(&gen_)))),
        drop_(register_module("drop", nn::Dropout(nn::DropoutOptions(0.25).generator(&gen_)))),
        fc2_(register_module("fc2", nn::Linear(nn::LinearOptions(hidden, 1).generator(&gen_)))) {}
  Tensor forward(const Tensor& x) override { return fc2_(drop_(fc1_(x).relu())); }
  Generator& dropout_generator() { return drop_->generator(); }

 private:
  Generator gen_;
  nn::Linear fc1_;
  nn::Dropout drop_;
  nn::Linear fc2_;
};

// The batch of a step: x (8, 4) and y = x w (8, 1) for a fixed w.
inline std::pair<Tensor, Tensor> batch_at(std::int64_t step) {
  Generator gen(1000 + static_cast<std::uint64_t>(step));
  Tensor x = randn({8, 4}, gen);
  Tensor w = tensor({{0.5}, {-1.0}, {2.0}, {0.25}});
  return {x, x.matmul(w)};
}

inline std::vector<std::vector<float>> values(const nn::Module& model) {
  std::vector<std::vector<float>> out;
  for (const Tensor& p : model.parameters()) out.push_back(p.to_vector<float>());
  return out;
}

constexpr std::int64_t kScheduleSteps = 12;

// Model, optimiser, schedule and trainer of one run; a different model seed gives different initial weights
// and a different dropout stream, which a resume must overwrite.
struct Run {
  Mlp model;
  optim::Adam adam;
  optim::Scheduler sched;
  train::Trainer trainer;
  Run(std::uint64_t model_seed, train::TrainerOptions options)
      : model(model_seed),
        adam(model.parameters(), adam_options()),
        sched(adam, optim::cosine_with_warmup(2, kScheduleSteps, 0.1)),
        trainer(model, adam, std::move(options)) {
    trainer.set_scheduler(&sched);  // the dropout generator is tracked by the trainer itself
  }
  static optim::AdamOptions adam_options() { return optim::AdamOptions(0.02); }
  train::StepFn step_fn() {
    return [this](std::int64_t step) {
      auto [x, y] = batch_at(step);
      return train::StepOutput{nn::mse_loss(model(x), y), 8, 32};
    };
  }
  std::vector<std::vector<float>> params() const { return values(model); }
};

inline train::TrainerOptions quiet_options(const std::string& run_dir, std::int64_t max_steps) {
  train::TrainerOptions o;
  o.max_steps = max_steps;
  o.log_every = 3;
  o.eval_every = 4;
  o.checkpoint_every = 4;
  o.run_dir = run_dir;
  o.progress = train::Progress::Off;
  return o;
}

inline std::vector<json> read_jsonl(const fs::path& path) {
  std::ifstream in(path);
  REQUIRE(in);
  std::vector<json> lines;
  std::string line;
  while (std::getline(in, line)) lines.push_back(json::parse(line));
  return lines;
}

// A line without the fields that depend on wall time.
inline json without_timing(json j) {
  j.erase("elapsed_s");
  j.erase("examples_per_s");
  j.erase("tokens_per_s");
  return j;
}

// Two metrics.jsonl files with the same lines, wall-time fields aside.
inline void check_same_metrics(const fs::path& a, const fs::path& b) {
  const std::vector<json> lines_a = read_jsonl(a);
  const std::vector<json> lines_b = read_jsonl(b);
  REQUIRE(lines_a.size() == lines_b.size());
  for (std::size_t i = 0; i < lines_a.size(); ++i) {
    CAPTURE(i);
    CHECK(without_timing(lines_a[i]) == without_timing(lines_b[i]));
  }
}

inline std::map<std::string, std::string> read_all_files(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream buffer;
    buffer << in.rdbuf();
    out[entry.path().filename().string()] = buffer.str();
  }
  return out;
}

// Writes an edited trainer.json with its checksum recomputed as the format defines it (CRC-32 of the
// compact, key-sorted JSON of every other field), so a test can make a consistent file with other
// values and reach the checks behind the checksum.
inline void write_signed_trainer_json(const fs::path& path, json j) {
  j.erase("checksum");
  const std::string text = j.dump();
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08lx", ::crc32(0L, reinterpret_cast<const Bytef*>(text.data()), text.size()));
  j["checksum"] = hex;
  write_text(path.string(), j.dump(2));
}

inline std::int64_t checkpoint_step(const fs::path& dir) {
  std::ifstream in(dir / "trainer.json");
  REQUIRE(in);
  return json::parse(in).at("step").get<std::int64_t>();
}

// The eval function of every run: the validation loss on a fixed batch.
inline train::EvalFn eval_fn(Mlp& model, std::vector<std::int64_t>* calls = nullptr) {
  return [&model, calls](std::int64_t step) {
    if (calls) calls->push_back(step);
    auto [x, y] = batch_at(-1);
    return std::map<std::string, double>{{"val_loss", nn::mse_loss(model(x), y).item()}};
  };
}

}  // namespace tapegrad::testing::trainer
