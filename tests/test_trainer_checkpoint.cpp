// trainer checkpoints: a resumed run is bit-identical to an uninterrupted one (interrupted, killed, with
// dropout, a transformer), damaged or half-written checkpoints are handled or rejected by name.

#include <doctest/doctest.h>

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
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
#include "tests/trainer_testing.h"

using namespace tapegrad;
namespace fs = std::filesystem;
using json = nlohmann::json;
using tapegrad::testing::TempDir;
using namespace tapegrad::testing::trainer;

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
  write_signed_trainer_json(json_path, j);
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
  write_signed_trainer_json(other_json, j);
  EncoderRun e(11, quiet_options(dir_d.str(), kSteps));
  const train::TrainResult other = e.trainer.fit(e.step_fn());
  REQUIRE(other.resumed_from == kStop);
  CHECK(other.losses.front() != full.losses[kStop]);
}

TEST_CASE("trainer: a bfloat16 run keeps float32 masters and resumes bit-identically") {
  constexpr std::int64_t kSteps = 8, kStop = 3;
  auto bf16_options = [](const std::string& dir, std::int64_t steps) {
    train::TrainerOptions o = quiet_options(dir, steps);
    o.precision = train::Precision::BFloat16;
    return o;
  };
  TempDir dir_a, dir_b, dir_f;
  EncoderRun a(11, bf16_options(dir_a.str(), kSteps));
  const train::TrainResult full = a.trainer.fit(a.step_fn());
  for (const Tensor& p : a.model.parameters()) CHECK(p.dtype() == kFloat32);
  CHECK_FALSE(autocast_enabled());
  // Autocast was on: the float32 run of the same model and data takes other values.
  EncoderRun f(11, quiet_options(dir_f.str(), kSteps));
  const train::TrainResult float32 = f.trainer.fit(f.step_fn());
  CHECK(full.losses.front() != float32.losses.front());
  CHECK(std::abs(full.losses.front() - float32.losses.front()) <= 0.02 * std::abs(float32.losses.front()));
  {
    EncoderRun b(11, bf16_options(dir_b.str(), kStop));
    b.trainer.fit(b.step_fn());
  }
  EncoderRun c(12, bf16_options(dir_b.str(), kSteps));
  const train::TrainResult rest = c.trainer.fit(c.step_fn());
  REQUIRE(rest.resumed_from == kStop);
  for (std::int64_t i = kStop; i < kSteps; ++i) {
    CAPTURE(i);
    CHECK(rest.losses[i - kStop] == full.losses[i]);
  }
  CHECK(values(c.model) == values(a.model));
  CHECK(train::parse_precision("bf16") == train::Precision::BFloat16);
  CHECK(train::parse_precision("float32") == train::Precision::Float32);
  CHECK(std::string(train::to_string(train::Precision::BFloat16)) == "bf16");
  CHECK_THROWS_WITH_AS(train::parse_precision("fp16"), doctest::Contains("\"bf16\""), ValueError);
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
  // A flipped bit anywhere in trainer.json (the generator states are most of it) is caught: by the
  // checksum, or as JSON that no longer parses, or as a field check. Before, most flips in the
  // generator states resumed silently with other random streams.
  int by_checksum = 0;
  for (std::size_t at = 0; at < good.size(); at += 1 + good.size() / 150) {
    std::string bad = good;
    bad[at] = static_cast<char>(bad[at] ^ 1);
    CAPTURE(at);
    write_text(json_path, bad);
    try {
      run.trainer.load_checkpoint();
      FAIL("a flip at byte " << at << " resumed");
    } catch (const IoError& e) {
      by_checksum += std::string(e.what()).find("field 'checksum'") != std::string::npos;
    }
    CHECK(run.trainer.step() == 0);
  }
  CHECK(by_checksum > 100);
  CHECK(run.params() == params_before);
  // Edits with the checksum made anew reach the field checks behind it.
  auto expect_field_error = [&](const std::function<void(json&)>& edit, const std::string& needle) {
    json j = json::parse(good);
    edit(j);
    write_signed_trainer_json(json_path, j);
    expect_io_error(testing::read_text(json_path.string()), needle);
  };
  expect_field_error([](json& j) { j["step"] = "five"; }, "field 'step' must be an integer");
  expect_field_error([](json& j) { j["version"] = 3; }, "field 'version' must be 1 or 2, got 3");
  expect_field_error([](json& j) { j.erase("generators"); }, "missing field 'generators'");
  expect_field_error([](json& j) { j["generators"]["model.drop.generator"] = "garbage"; },
                     "field 'generators.model.drop.generator'");
  expect_field_error([](json& j) { j["generators"]["noise"] = j["generators"]["model.drop.generator"]; },
                     "field 'generators.noise' names a generator that is not tracked");
  expect_field_error([](json& j) { j["optimizer_steps"] = 1; }, "optimizer_steps");
  expect_field_error([](json& j) { j["scheduler_step"] = 1; }, "scheduler_step 1 is below step 2");
  expect_field_error([](json& j) { j["step"] = 3; }, "is from step 2 but");
  // Nesting and numbers beyond a double: typed errors (they crashed and escaped before).
  expect_io_error(std::string(100000, '[') + std::string(100000, ']'), "JSON nested more than 64 levels deep");
  {
    json j = json::parse(good);
    j["loss"] = 1.0;
    std::string text = j.dump();
    text.replace(text.find("\"loss\":1.0"), 10, "\"loss\":1e400");
    expect_io_error(text, "number overflow parsing '1e400' (at loss)");
  }
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

TEST_CASE("trainer: metrics.jsonl is cut back on resume, whatever its lines hold") {
  TempDir dir;
  const std::string path = dir.file("metrics.jsonl");
  const std::string kept = "{\"step\":1,\"loss\":0.5}\n{\"step\":2,\"loss\":0.4,\"end_of_run\":false}\n";
  write_text(path, kept +
                       "{\"step\":2,\"loss\":0.4,\"end_of_run\":true}\n"     // written only because a call ended there
                       "{\"step\":1,\"loss\":0.5,\"end_of_run\":\"yes\"}\n"  // not a bool: once an uncaught type_error
                       "{\"step\":18446744073709551615,\"loss\":1}\n"  // beyond int64: once wrapped to -1 and kept
                       "{\"step\":3,\"loss\":0.3}\n"                   // after the checkpoint
                       "[1,2]\n{\"loss\":1}\n{\"step\":\"2\"}\n{\"step\":1,\"lo");  // not lines of ours; torn
  // What an interrupted rewrite leaves behind goes too; other files stay.
  write_text(path + ".tmp.123.0", "partial");
  write_text(dir.file("notes.txt"), "mine");
  train::MetricsFile(path).truncate_after(2);
  CHECK(testing::read_text(path) == kept);
  CHECK_FALSE(fs::exists(path + ".tmp.123.0"));
  CHECK(fs::exists(dir.file("notes.txt")));
}
