// trainer: the training loop, metrics.jsonl, progress output, checkpoints, resume and non-finite detection.
//
// The model is a small MLP (4 -> 16 -> ReLU -> Dropout -> 1) trained with Adam and a cosine schedule on a
// regression batch drawn from a generator seeded by the step, so every run is a pure function of its seeds.

#include <doctest/doctest.h>

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tapegrad/autograd/error.h"
#include "tapegrad/nn/nn.h"
#include "tapegrad/optim/optim.h"
#include "tapegrad/train/train.h"
#include "tests/testing.h"

using namespace tapegrad;
namespace fs = std::filesystem;
using json = nlohmann::json;
using tapegrad::testing::TempDir;

namespace {

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
std::pair<Tensor, Tensor> batch_at(std::int64_t step) {
  Generator gen(1000 + static_cast<std::uint64_t>(step));
  Tensor x = randn({8, 4}, gen);
  Tensor w = tensor({{0.5}, {-1.0}, {2.0}, {0.25}});
  return {x, x.matmul(w)};
}

std::vector<std::vector<float>> values(const nn::Module& model) {
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

train::TrainerOptions quiet_options(const std::string& run_dir, std::int64_t max_steps) {
  train::TrainerOptions o;
  o.max_steps = max_steps;
  o.log_every = 3;
  o.eval_every = 4;
  o.checkpoint_every = 4;
  o.run_dir = run_dir;
  o.progress = train::Progress::Off;
  return o;
}

std::vector<json> read_jsonl(const fs::path& path) {
  std::ifstream in(path);
  REQUIRE(in);
  std::vector<json> lines;
  std::string line;
  while (std::getline(in, line)) lines.push_back(json::parse(line));
  return lines;
}

// A line without the fields that depend on wall time.
json without_timing(json j) {
  j.erase("elapsed_s");
  j.erase("examples_per_s");
  j.erase("tokens_per_s");
  return j;
}

// Two metrics.jsonl files with the same lines, wall-time fields aside.
void check_same_metrics(const fs::path& a, const fs::path& b) {
  const std::vector<json> lines_a = read_jsonl(a);
  const std::vector<json> lines_b = read_jsonl(b);
  REQUIRE(lines_a.size() == lines_b.size());
  for (std::size_t i = 0; i < lines_a.size(); ++i) {
    CAPTURE(i);
    CHECK(without_timing(lines_a[i]) == without_timing(lines_b[i]));
  }
}

std::map<std::string, std::string> read_all_files(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream buffer;
    buffer << in.rdbuf();
    out[entry.path().filename().string()] = buffer.str();
  }
  return out;
}

std::int64_t checkpoint_step(const fs::path& dir) {
  std::ifstream in(dir / "trainer.json");
  REQUIRE(in);
  return json::parse(in).at("step").get<std::int64_t>();
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// The eval function of every run: the validation loss on a fixed batch.
train::EvalFn eval_fn(Mlp& model, std::vector<std::int64_t>* calls = nullptr) {
  return [&model, calls](std::int64_t step) {
    if (calls) calls->push_back(step);
    auto [x, y] = batch_at(-1);
    return std::map<std::string, double>{{"val_loss", nn::mse_loss(model(x), y).item()}};
  };
}

}  // namespace

TEST_CASE("trainer: a run interrupted and resumed is bit-identical to an uninterrupted one") {
  constexpr std::int64_t kSteps = kScheduleSteps, kStop = 5;
  TempDir dir_a, dir_b;

  Run a(7, quiet_options(dir_a.str(), kSteps));
  const train::TrainResult full = a.trainer.fit(a.step_fn(), eval_fn(a.model));
  REQUIRE(full.losses.size() == static_cast<std::size_t>(kSteps));
  CHECK(full.resumed_from == -1);
  CHECK(full.steps == kSteps);
  CHECK(full.final_loss == full.losses.back());
  CHECK(full.losses.back() < full.losses.front());

  std::vector<double> first_losses;
  double first_seconds = 0;
  {
    Run b(7, quiet_options(dir_b.str(), kStop));
    const train::TrainResult first = b.trainer.fit(b.step_fn(), eval_fn(b.model));
    first_losses = first.losses;
    first_seconds = first.total_seconds;
    CHECK(first.steps == kStop);
    CHECK(first.total_seconds == first.seconds);
  }
  REQUIRE(first_losses.size() == static_cast<std::size_t>(kStop));
  for (std::int64_t i = 0; i < kStop; ++i) CHECK(first_losses[i] == full.losses[i]);
  CHECK(checkpoint_step(dir_b.path / "checkpoint") == kStop);

  double checkpoint_seconds = 0;
  {
    std::ifstream in(dir_b.path / "checkpoint" / "trainer.json");
    checkpoint_seconds = json::parse(in).at("elapsed_s").get<double>();
  }
  CHECK(checkpoint_seconds > 0);
  CHECK(checkpoint_seconds <= first_seconds);

  // Different initial weights and dropout seed: everything must come from the checkpoint.
  Run c(99, quiet_options(dir_b.str(), kSteps));
  REQUIRE(c.params() != a.params());
  const train::TrainResult rest = c.trainer.fit(c.step_fn(), eval_fn(c.model));
  CHECK(rest.resumed_from == kStop);
  CHECK(rest.steps == kSteps);
  // The run's training time counts both calls: the first up to its checkpoint, then this one.
  CHECK(rest.total_seconds == doctest::Approx(checkpoint_seconds + rest.seconds));
  REQUIRE(rest.losses.size() == static_cast<std::size_t>(kSteps - kStop));
  for (std::int64_t i = kStop; i < kSteps; ++i) {
    CAPTURE(i);
    CHECK(rest.losses[i - kStop] == full.losses[i]);
  }
  CHECK(c.params() == a.params());
  CHECK(c.sched.current_step() == a.sched.current_step());
  CHECK(c.adam.param_groups()[0].lr == a.adam.param_groups()[0].lr);
  CHECK(c.model.dropout_generator().state() == a.model.dropout_generator().state());

  // The metrics file reads like the uninterrupted run's (wall-time fields aside).
  check_same_metrics(dir_a.path / "metrics.jsonl", dir_b.path / "metrics.jsonl");
}

TEST_CASE("trainer: a run killed between checkpoints resumes from the last one and ends bit-identically") {
  // checkpoint_every 4: a crash in step 10 (step_fn(9)) loses steps 9 and 10, which the resumed run redoes.
  TempDir dir_a, dir_b;
  Run a(7, quiet_options(dir_a.str(), kScheduleSteps));
  const train::TrainResult full = a.trainer.fit(a.step_fn(), eval_fn(a.model));
  struct Killed {};
  {
    Run b(7, quiet_options(dir_b.str(), kScheduleSteps));
    train::StepFn inner = b.step_fn();
    CHECK_THROWS_AS(b.trainer.fit(
                        [&](std::int64_t step) {
                          if (step == 9) throw Killed{};
                          return inner(step);
                        },
                        eval_fn(b.model)),
                    Killed);
  }
  CHECK(checkpoint_step(dir_b.path / "checkpoint") == 8);
  Run c(99, quiet_options(dir_b.str(), kScheduleSteps));
  const train::TrainResult rest = c.trainer.fit(c.step_fn(), eval_fn(c.model));
  CHECK(rest.resumed_from == 8);
  REQUIRE(rest.losses.size() == static_cast<std::size_t>(kScheduleSteps - 8));
  for (std::int64_t i = 8; i < kScheduleSteps; ++i) {
    CAPTURE(i);
    CHECK(rest.losses[i - 8] == full.losses[i]);
  }
  CHECK(c.params() == a.params());
  // metrics.jsonl lost the lines after step 8 with the crash and got them again from the resumed run.
  check_same_metrics(dir_a.path / "metrics.jsonl", dir_b.path / "metrics.jsonl");
}

TEST_CASE("trainer: a resume with another dropout state diverges") {
  // The counterpart of the test above: it shows the dropout stream matters, so the identity there is earned.
  TempDir dir_a, dir_b;
  Run a(7, quiet_options(dir_a.str(), kScheduleSteps));
  const train::TrainResult full = a.trainer.fit(a.step_fn());
  {
    Run b(7, quiet_options(dir_b.str(), 5));
    b.trainer.fit(b.step_fn());
  }
  const fs::path json_path = dir_b.path / "checkpoint" / "trainer.json";
  json j;
  {
    std::ifstream in(json_path);
    j = json::parse(in);
  }
  REQUIRE(j.at("generators").contains("model.drop.generator"));
  j["generators"]["model.drop.generator"] = Generator(12345).state();
  write_text(json_path, j.dump());
  Run c(99, quiet_options(dir_b.str(), kScheduleSteps));
  const train::TrainResult rest = c.trainer.fit(c.step_fn());
  REQUIRE(rest.resumed_from == 5);
  CHECK(rest.losses.front() != full.losses[5]);
  CHECK(c.params() != a.params());
}

// A transformer encoder layer with dropout in the attention weights, after each sublayer and inside the
// feed-forward block, then a mean-pooled linear head.
class Encoder : public nn::Module {
 public:
  explicit Encoder(std::uint64_t seed) : gen_(seed) {
    layer_ = register_module(
        "layer", nn::TransformerEncoderLayer(testing::layer_options(8, 2, 16, /*dropout=*/0.3).generator(&gen_)));
    head_ = register_module("head", nn::Linear(nn::LinearOptions(8, 1).generator(&gen_)));
  }
  Tensor forward(const Tensor& x) { return head_(layer_(x).mean({1})); }

 private:
  Generator gen_;
  nn::TransformerEncoderLayer layer_{nullptr};
  nn::Linear head_{nullptr};
};

struct EncoderRun {
  Encoder model;
  optim::Adam adam;
  train::Trainer trainer;
  EncoderRun(std::uint64_t seed, train::TrainerOptions options)
      : model(seed), adam(model.parameters(), Run::adam_options()), trainer(model, adam, std::move(options)) {}
  train::StepFn step_fn() {
    return [this](std::int64_t step) {
      Generator gen(2000 + static_cast<std::uint64_t>(step));
      Tensor x = randn({4, 5, 8}, gen);  // x: (B, T, d)
      Tensor y = x.sum({1, 2}).reshape({4, 1}) * 0.1;
      return train::StepOutput{nn::mse_loss(model.forward(x), y), 4, 20};
    };
  }
};

TEST_CASE("trainer: a transformer with dropout resumes bit-identically without any track_generator call") {
  constexpr std::int64_t kSteps = 8, kStop = 3;
  TempDir dir_a, dir_b;
  EncoderRun a(11, quiet_options(dir_a.str(), kSteps));
  const train::TrainResult full = a.trainer.fit(a.step_fn());
  {
    EncoderRun b(11, quiet_options(dir_b.str(), kStop));
    b.trainer.fit(b.step_fn());
  }
  const fs::path json_path = dir_b.path / "checkpoint" / "trainer.json";
  std::ifstream in(json_path);
  const json gens = json::parse(in).at("generators");
  for (const char* name : {"model.layer.self_attn.dropout_generator", "model.layer.ff.dropout.generator",
                           "model.layer.dropout1.generator", "model.layer.dropout2.generator"})
    CHECK(gens.contains(name));

  // Another seed: other weights and other dropout streams, all to be overwritten by the checkpoint.
  EncoderRun c(12, quiet_options(dir_b.str(), kSteps));
  const train::TrainResult rest = c.trainer.fit(c.step_fn());
  REQUIRE(rest.resumed_from == kStop);
  REQUIRE(rest.losses.size() == static_cast<std::size_t>(kSteps - kStop));
  for (std::int64_t i = kStop; i < kSteps; ++i) {
    CAPTURE(i);
    CHECK(rest.losses[i - kStop] == full.losses[i]);
  }
  CHECK(values(c.model) == values(a.model));
  const nn::NamedGenerators gens_a = a.model.named_generators(), gens_c = c.model.named_generators();
  REQUIRE(gens_a.size() == gens_c.size());
  for (std::size_t i = 0; i < gens_a.size(); ++i) CHECK(gens_c[i].second->state() == gens_a[i].second->state());

  // The attention dropout draws matter: the same resume with another attention-dropout state diverges.
  TempDir dir_d;
  {
    EncoderRun d(11, quiet_options(dir_d.str(), kStop));
    d.trainer.fit(d.step_fn());
  }
  const fs::path other_json = dir_d.path / "checkpoint" / "trainer.json";
  json j;
  {
    std::ifstream other_in(other_json);
    j = json::parse(other_in);
  }
  j["generators"]["model.layer.self_attn.dropout_generator"] = Generator(999).state();
  write_text(other_json, j.dump());
  EncoderRun e(11, quiet_options(dir_d.str(), kSteps));
  const train::TrainResult other = e.trainer.fit(e.step_fn());
  REQUIRE(other.resumed_from == kStop);
  CHECK(other.losses.front() != full.losses[kStop]);
}

TEST_CASE("trainer: metrics.jsonl has every field, lr follows the schedule, eval runs every N steps and at the end") {
  TempDir dir;
  train::TrainerOptions o = quiet_options(dir.str(), 10);
  o.log_every = 2;
  o.eval_every = 3;
  o.checkpoint_every = 0;
  Run run(3, o);
  std::vector<std::int64_t> eval_calls;
  const train::TrainResult result = run.trainer.fit(run.step_fn(), eval_fn(run.model, &eval_calls));
  CHECK(eval_calls == std::vector<std::int64_t>{3, 6, 9, 10});
  CHECK(run.model.is_training());  // eval mode only while evaluating

  const optim::Schedule schedule = optim::cosine_with_warmup(2, kScheduleSteps, 0.1);
  std::vector<std::int64_t> train_steps, eval_steps;
  for (const json& line : read_jsonl(dir.path / "metrics.jsonl")) {
    CAPTURE(line.dump());
    const std::int64_t step = line.at("step").get<std::int64_t>();
    CHECK(line.at("elapsed_s").get<double>() >= 0.0);
    if (line.contains("eval")) {
      eval_steps.push_back(step);
      CHECK(line.at("eval").at("val_loss").is_number());
      CHECK(line.value("end_of_run", false) == (step % 3 != 0));
      continue;
    }
    train_steps.push_back(step);
    for (const char* key : {"loss", "lr", "grad_norm", "examples_per_s", "tokens_per_s"})
      CHECK(line.at(key).is_number());
    CHECK(line.at("loss").get<double>() == result.losses[step - 1]);
    CHECK(line.at("lr").get<double>() == doctest::Approx(0.02 * schedule(step - 1)).epsilon(1e-12));
    CHECK(line.at("grad_norm").get<double>() > 0.0);
    CHECK(line.at("examples_per_s").get<double>() > 0.0);
    CHECK(line.at("tokens_per_s").get<double>() == doctest::Approx(4 * line.at("examples_per_s").get<double>()));
  }
  CHECK(train_steps == std::vector<std::int64_t>{2, 4, 6, 8, 10});
  CHECK(eval_steps == std::vector<std::int64_t>{3, 6, 9, 10});
  // Only the end of the run writes a checkpoint when checkpoint_every is 0.
  CHECK(checkpoint_step(dir.path / "checkpoint") == 10);
}

TEST_CASE("trainer: max_epochs sets the run's length from steps_per_epoch, and lines and progress show the epoch") {
  TempDir dir;
  train::TrainerOptions o = quiet_options(dir.str(), 1000);  // max_steps is replaced by 3 epochs of 4 steps
  o.steps_per_epoch = 4;
  o.max_epochs = 3;
  o.log_every = 2;
  std::ostringstream shown;
  o.progress = train::Progress::Lines;
  o.out = &shown;
  Run run(3, o);
  const train::TrainResult result = run.trainer.fit(run.step_fn());
  CHECK(result.steps == 12);
  std::vector<double> epochs;
  for (const json& line : read_jsonl(dir.path / "metrics.jsonl"))
    if (line.contains("loss")) epochs.push_back(line.at("epoch").get<double>());
  CHECK(epochs == std::vector<double>{0.5, 1.0, 1.5, 2.0, 2.5, 3.0});
  CHECK(shown.str().find("step 6/12 epoch 1.50 loss") != std::string::npos);

  train::TrainerOptions bad = quiet_options(dir.str(), 10);
  bad.max_epochs = 2;
  CHECK_THROWS_WITH_AS(Run(3, bad), "Trainer: max_epochs 2 needs steps_per_epoch", ValueError);
  bad.steps_per_epoch = -1;
  CHECK_THROWS_WITH_AS(Run(3, bad), "Trainer: steps_per_epoch and max_epochs must be >= 0, got -1 and 2", ValueError);
}

TEST_CASE("trainer: a NaN loss at step j throws NonFiniteLoss naming j and leaves the checkpoint untouched") {
  TempDir dir;
  train::TrainerOptions o = quiet_options(dir.str(), 10);
  o.checkpoint_every = 3;
  Run run(5, o);
  constexpr std::int64_t kBad = 7;
  std::map<std::string, std::string> before;
  std::vector<std::vector<float>> params_before;
  auto step_fn = [&](std::int64_t step) {
    train::StepOutput out = run.step_fn()(step);
    if (step == kBad) {
      before = read_all_files(dir.path / "checkpoint");
      params_before = run.params();
      out.loss = out.loss * std::numeric_limits<double>::quiet_NaN();
    }
    return out;
  };
  try {
    run.trainer.fit(step_fn);
    FAIL("fit did not throw");
  } catch (const train::NonFiniteLoss& e) {
    const std::string message = e.what();
    CAPTURE(message);
    CHECK(e.step() == kBad);
    CHECK(e.quantity() == "loss");
    CHECK(std::isnan(e.value()));
    CHECK(e.checkpoint_step() == 6);
    CHECK(message.find("non-finite loss nan at step 8 (step_fn(7))") != std::string::npos);
    CHECK(message.find("last good checkpoint (step 6") != std::string::npos);
  }
  CHECK(run.trainer.step() == kBad);
  CHECK(run.params() == params_before);
  REQUIRE(!before.empty());
  CHECK(checkpoint_step(dir.path / "checkpoint") == 6);
  CHECK(read_all_files(dir.path / "checkpoint") == before);
  for (const json& line : read_jsonl(dir.path / "metrics.jsonl")) CHECK(line.at("step").get<std::int64_t>() <= kBad);
}

TEST_CASE("trainer: a non-finite gradient norm throws NonFiniteLoss naming the gradient norm") {
  // sqrt at 0 has an infinite derivative; times 0 it is NaN, while the loss itself stays finite.
  Mlp model(1);
  optim::SGD sgd(model.parameters(), optim::SGDOptions(1e-2));
  train::TrainerOptions o;
  o.max_steps = 4;
  o.progress = train::Progress::Off;
  train::Trainer trainer(model, sgd, o);
  auto step_fn = [&](std::int64_t step) {
    auto [x, y] = batch_at(step);
    Tensor loss = nn::mse_loss(model(x), y);
    if (step == 2) loss = loss + (model.parameters()[0].sum() * 0.0).sqrt();
    return train::StepOutput{loss, 8, 0};
  };
  try {
    trainer.fit(step_fn);
    FAIL("fit did not throw");
  } catch (const train::NonFiniteLoss& e) {
    const std::string message = e.what();
    CAPTURE(message);
    CHECK(e.step() == 2);
    CHECK(e.quantity() == "gradient norm");
    CHECK(message.find("non-finite gradient norm") != std::string::npos);
    CHECK(message.find("at step 3 (step_fn(2))") != std::string::npos);
    CHECK(message.find("run_dir is not set") != std::string::npos);
  }
  CHECK(trainer.step() == 2);
}

TEST_CASE("trainer: a half-written checkpoint.tmp-* is ignored and removed, a lone checkpoint.old is used") {
  TempDir dir;
  std::vector<std::vector<float>> saved;
  {
    Run run(11, quiet_options(dir.str(), 4));
    run.trainer.fit(run.step_fn());
    saved = run.params();
  }
  // A save that crashed while writing: a temp dir with a torn trainer.json and no tensors.
  const fs::path torn = dir.path / "checkpoint.tmp-Ab12Cd";
  fs::create_directories(torn);
  write_text(torn / "trainer.json", "{\"format\": \"tapegrad.trainer\", \"step\": 9");
  {
    Run run(12, quiet_options(dir.str(), 4));
    CHECK(run.trainer.load_checkpoint());
    CHECK(run.trainer.step() == 4);
    CHECK(run.params() == saved);
    CHECK(!fs::exists(torn));
  }
  // A crash between the two renames of a save: only checkpoint.old is left.
  fs::rename(dir.path / "checkpoint", dir.path / "checkpoint.old");
  Run run(13, quiet_options(dir.str(), 6));
  CHECK(run.trainer.load_checkpoint());
  CHECK(run.trainer.step() == 4);
  CHECK(run.params() == saved);
  const train::TrainResult result = run.trainer.fit(run.step_fn());
  CHECK(result.resumed_from == 4);
  CHECK(result.losses.size() == 2);
  CHECK(checkpoint_step(dir.path / "checkpoint") == 6);
  CHECK(!fs::exists(dir.path / "checkpoint.old"));
}

TEST_CASE("trainer: a corrupt trainer.json or mismatching tensors are rejected, naming the file and field") {
  TempDir dir;
  {
    Run run(21, quiet_options(dir.str(), 2));
    run.trainer.fit(run.step_fn());
  }
  const fs::path json_path = dir.path / "checkpoint" / "trainer.json";
  std::string good;
  {
    std::ifstream in(json_path);
    std::stringstream buffer;
    buffer << in.rdbuf();
    good = buffer.str();
  }
  Run run(22, quiet_options(dir.str(), 4));
  const auto params_before = run.params();
  auto expect_io_error = [&](const std::string& text, const std::string& needle) {
    write_text(json_path, text);
    CAPTURE(needle);
    try {
      run.trainer.load_checkpoint();
      FAIL("load_checkpoint did not throw");
    } catch (const IoError& e) {
      const std::string message = e.what();
      CAPTURE(message);
      CHECK(message.find(json_path.string()) != std::string::npos);
      CHECK(message.find(needle) != std::string::npos);
    }
    CHECK(run.trainer.step() == 0);
    CHECK(run.params() == params_before);
  };
  expect_io_error("{\"format\": \"tapegrad.trainer\", \"ver", "not valid JSON");
  json j = json::parse(good);
  j["step"] = "five";
  expect_io_error(j.dump(), "field 'step' must be an integer");
  j = json::parse(good);
  j["version"] = 2;
  expect_io_error(j.dump(), "field 'version' must be 1");
  j = json::parse(good);
  j.erase("generators");
  expect_io_error(j.dump(), "missing field 'generators'");
  j = json::parse(good);
  j["generators"]["model.drop.generator"] = "garbage";
  expect_io_error(j.dump(), "field 'generators.model.drop.generator'");
  j = json::parse(good);
  j["generators"]["noise"] = j["generators"]["model.drop.generator"];
  expect_io_error(j.dump(), "field 'generators.noise' names a generator that is not tracked");
  write_text(json_path, good);
  CHECK(run.trainer.load_checkpoint());
  CHECK(run.trainer.step() == 2);

  // A model of another width: the model file's entry is named, nothing is changed.
  Mlp wide(23, 32);
  optim::Adam adam(wide.parameters());
  train::Trainer other(wide, adam, quiet_options(dir.str(), 4));
  const auto wide_before = values(wide);
  CHECK_THROWS_AS(other.load_checkpoint(), ShapeError);
  try {
    other.load_checkpoint();
  } catch (const ShapeError& e) {
    const std::string message = e.what();
    CHECK(message.find("model.safetensors") != std::string::npos);
    CHECK(message.find("fc1.weight") != std::string::npos);
  }
  CHECK(values(wide) == wide_before);

  // An optimiser over fewer parameters: the optimizer file's entry is named and the model is put back.
  Mlp model(24);
  optim::Adam partial(TensorList{model.parameters()[0]});
  train::Trainer third(model, partial, quiet_options(dir.str(), 4));
  const auto model_before = values(model);
  try {
    third.load_checkpoint();
    FAIL("load_checkpoint did not throw");
  } catch (const ValueError& e) {
    const std::string message = e.what();
    CAPTURE(message);
    CHECK(message.find("optimizer.safetensors") != std::string::npos);
    CHECK(message.find("group0.param1") != std::string::npos);
  }
  CHECK(values(model) == model_before);
  CHECK(third.step() == 0);
}

TEST_CASE("trainer: progress goes to the given stream: plain lines, a bar, or nothing") {
  auto run_with = [](train::Progress mode) {
    std::ostringstream out;
    train::TrainerOptions o;
    o.max_steps = 6;
    o.log_every = 2;
    o.progress = mode;
    o.out = &out;
    Run run(31, o);
    run.trainer.fit(run.step_fn());
    return out.str();
  };
  const std::string lines = run_with(train::Progress::Lines);
  CAPTURE(lines);
  CHECK(lines.find('\r') == std::string::npos);
  std::istringstream in(lines);
  std::vector<std::string> got;
  for (std::string line; std::getline(in, line);) got.push_back(line);
  REQUIRE(got.size() == 3);
  for (int i = 0; i < 3; ++i) {
    CHECK(got[i].rfind("step " + std::to_string(2 * (i + 1)) + "/6 loss ", 0) == 0);
    CHECK(got[i].find(" lr ") != std::string::npos);
    CHECK(got[i].find(" it/s eta ") != std::string::npos);
  }
  // A string stream is not a terminal: Auto falls back to lines.
  const std::string automatic = run_with(train::Progress::Auto);
  CHECK(automatic.find('\r') == std::string::npos);
  CHECK(automatic.find("step 6/6 loss ") != std::string::npos);

  const std::string bar = run_with(train::Progress::Bar);
  CAPTURE(bar);
  CHECK(bar.find("\r6/6 [########################] 100% loss ") != std::string::npos);
  CHECK(bar.find("ETA") != std::string::npos);
  CHECK(bar.back() == '\n');

  CHECK(run_with(train::Progress::Off).empty());
}

TEST_CASE("trainer: without run_dir no files are written; bad options and bad step outputs are rejected") {
  train::TrainerOptions o;
  o.max_steps = 3;
  o.progress = train::Progress::Off;
  Run run(41, o);
  const train::TrainResult result = run.trainer.fit(run.step_fn());
  CHECK(result.steps == 3);
  CHECK(run.trainer.metrics_path().empty());
  CHECK_FALSE(run.trainer.load_checkpoint());
  CHECK_THROWS_WITH_AS(run.trainer.save_checkpoint(), "Trainer::save_checkpoint: run_dir is not set", ValueError);

  Mlp model(42);
  optim::SGD sgd(model.parameters(), optim::SGDOptions(1e-2));
  train::TrainerOptions bad = o;
  bad.log_every = 0;
  CHECK_THROWS_WITH_AS(train::Trainer(model, sgd, bad), "Trainer: log_every must be >= 1, got 0", ValueError);
  bad = o;
  bad.clip_grad_norm = -1;
  CHECK_THROWS_AS(train::Trainer(model, sgd, bad), ValueError);

  train::Trainer trainer(model, sgd, o);
  Generator data_gen(5);
  CHECK_THROWS_AS(trainer.track_generator("", data_gen), ValueError);
  trainer.track_generator("data", data_gen);
  CHECK_THROWS_AS(trainer.track_generator("data", data_gen), ValueError);
  CHECK_THROWS_AS(trainer.track_generator("model.drop.generator", data_gen), ValueError);
  CHECK_THROWS_WITH_AS(trainer.fit([&](std::int64_t step) {
    auto [x, y] = batch_at(step);
    return train::StepOutput{model(x) - y, 8, 0};
  }),
                       "Trainer::fit: step_fn must return a one-element loss, got (8,1) at step 1 (step_fn(0))",
                       ValueError);
}

TEST_CASE("trainer: clip_grad_norm scales the update; the logged norm is the one before clipping") {
  TempDir dir;
  Mlp model(51);
  const auto start = values(model);
  optim::SGD sgd(model.parameters(), optim::SGDOptions(0.1));
  train::TrainerOptions o;
  o.max_steps = 1;
  o.log_every = 1;
  o.clip_grad_norm = 1e-3;
  o.run_dir = dir.str();
  o.progress = train::Progress::Off;
  train::Trainer trainer(model, sgd, o);
  trainer.fit([&](std::int64_t step) {
    auto [x, y] = batch_at(step);
    return train::StepOutput{nn::mse_loss(model(x), y), 8, 0};
  });

  // The same first step outside the trainer (same seeds, so the same dropout mask) gives the unclipped norm.
  Mlp probe(51);
  auto [x, y] = batch_at(0);
  nn::mse_loss(probe(x), y).backward();
  double sq = 0.0;
  for (const Tensor& p : probe.parameters())
    for (float g : p.grad().to_vector<float>()) sq += static_cast<double>(g) * g;
  const double norm = std::sqrt(sq);
  REQUIRE(norm > 1e-2);
  const std::vector<json> lines = read_jsonl(dir.path / "metrics.jsonl");
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].at("grad_norm").get<double>() == doctest::Approx(norm).epsilon(1e-5));

  // SGD moves by lr * clipped gradient, whose norm is the clip value.
  const auto after = values(model);
  double moved = 0.0;
  for (std::size_t i = 0; i < after.size(); ++i)
    for (std::size_t k = 0; k < after[i].size(); ++k) {
      const double d = static_cast<double>(after[i][k]) - start[i][k];
      moved += d * d;
    }
  CHECK(std::sqrt(moved) == doctest::Approx(0.1 * 1e-3).epsilon(1e-3));
}

TEST_CASE("trainer: a module handle trains the module it holds") {
  TempDir dir;
  Generator gen(3);
  nn::Sequential model(nn::Linear(nn::LinearOptions(4, 8).generator(&gen)), nn::ReLU(),
                       nn::Linear(nn::LinearOptions(8, 1).generator(&gen)));
  const std::vector<std::vector<float>> before = values(*model);
  optim::SGD sgd(model->parameters(), optim::SGDOptions(0.05));
  train::TrainerOptions options;
  options.max_steps = 5;
  options.run_dir = dir.str();
  options.progress = train::Progress::Off;
  train::Trainer trainer(model, sgd, options);  // the handle, not *model
  const train::TrainResult result = trainer.fit([&](std::int64_t step) {
    auto [x, y] = batch_at(step);
    return train::StepOutput{nn::mse_loss(model(x), y), 8};
  });
  CHECK(result.steps == 5);
  CHECK(values(*model) != before);
  CHECK(model->parameters()[0].grad().defined());
}
