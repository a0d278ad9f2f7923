// Checkpoint averaging (tapegrad/train/average.h): the Trainer keeps the models of its last k
// checkpoints, average_checkpoints gives their element-wise mean, and mismatching files are refused
// naming the file and the entry.

#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tapegrad/autograd/error.h"
#include "tapegrad/io/safetensors.h"
#include "tapegrad/nn/nn.h"
#include "tapegrad/optim/optim.h"
#include "tapegrad/train/train.h"
#include "tests/testing.h"
#include "tests/trainer_testing.h"

using namespace tapegrad;
using tapegrad::testing::TempDir;
using namespace tapegrad::testing::trainer;
namespace fs = std::filesystem;

TEST_CASE("average: the Trainer keeps the last k checkpoint models and their mean is the average") {
  TempDir dir;
  train::TrainerOptions o = quiet_options(dir.str(), 10);
  o.checkpoint_every = 2;
  o.keep_checkpoints = 3;
  Run run(7, o);
  std::map<std::int64_t, std::vector<std::vector<float>>> at_step;
  run.trainer.set_stop_callback([&](const train::StepInfo& info) {
    at_step[info.step] = run.params();
    return false;
  });
  run.trainer.fit(run.step_fn());
  at_step[10] = run.params();  // the callback is not called after the last step
  REQUIRE(at_step.count(6) == 1);
  REQUIRE(at_step.count(8) == 1);

  const std::vector<std::string> kept = train::kept_checkpoints(dir.str());
  REQUIRE(kept.size() == 3);
  CHECK(fs::path(kept[0]).filename() == "model-6.safetensors");
  CHECK(fs::path(kept[1]).filename() == "model-8.safetensors");
  CHECK(fs::path(kept[2]).filename() == "model-10.safetensors");
  CHECK(train::kept_checkpoints(dir.str(), 2) == std::vector<std::string>{kept[1], kept[2]});
  CHECK(train::kept_checkpoints(dir.str(), 5) == kept);
  // The last kept model is the checkpoint's model file under a second name, not a second serialisation.
  CHECK(fs::equivalent(kept[2], dir.path / "checkpoint" / "model.safetensors"));
  CHECK(fs::hard_link_count(kept[0]) == 1);  // its checkpoint has been replaced since
  CHECK_FALSE(fs::exists(dir.path / "checkpoints" / "model-10.safetensors.tmp"));

  const std::string out = (dir.path / "averaged.safetensors").string();
  const NamedTensors averaged = train::average_checkpoints(kept, out);
  const io::SafetensorsFile written = io::load_safetensors(out);
  CHECK(written.metadata.at("averaged_from") == kept[0] + "," + kept[1] + "," + kept[2]);
  // The model's parameters, in order, against the mean of the values seen after steps 6, 8 and 10.
  Mlp probe(1);
  probe.load_state_dict(written.tensors);
  const auto mean = values(probe);
  REQUIRE(mean.size() == at_step[6].size());
  for (std::size_t i = 0; i < mean.size(); ++i)
    for (std::size_t k = 0; k < mean[i].size(); ++k) {
      const double expected = (static_cast<double>(at_step[6][i][k]) + at_step[8][i][k] + at_step[10][i][k]) / 3.0;
      CHECK(mean[i][k] == doctest::Approx(expected).epsilon(1e-6));
    }
  CHECK(averaged.size() == written.tensors.size());
  // One file averages to itself.
  const NamedTensors single = train::average_checkpoints({kept[2]});
  Mlp last(2);
  last.load_state_dict(single);
  CHECK(values(last) == at_step[10]);
}

TEST_CASE("average: mismatching or missing files are refused naming the file and the entry") {
  TempDir dir;
  const std::string a = (dir.path / "a.safetensors").string(), b = (dir.path / "b.safetensors").string();
  io::save_safetensors(a, {{"w", ones({2, 2})}, {"count", scalar_tensor(3, kInt64)}});
  io::save_safetensors(b, {{"w", ones({2, 3})}, {"count", scalar_tensor(3, kInt64)}});
  CHECK_THROWS_WITH_AS(train::average_checkpoints({a, b}), doctest::Contains("entry 'w' has shape (2,3) but (2,2)"),
                       ShapeError);
  io::save_safetensors(b, {{"w", ones({2, 2})}, {"count", scalar_tensor(4, kInt64)}});
  CHECK_THROWS_WITH_AS(train::average_checkpoints({a, b}), doctest::Contains("entry 'count' (int64, not averaged)"),
                       ValueError);
  io::save_safetensors(b, {{"w", ones({2, 2})}});
  CHECK_THROWS_WITH_AS(train::average_checkpoints({a, b}), doctest::Contains("entry 'count' is missing"), ValueError);
  io::save_safetensors(b, {{"w", ones({2, 2})}, {"count", scalar_tensor(3, kInt64)}, {"extra", ones({1})}});
  CHECK_THROWS_WITH_AS(train::average_checkpoints({a, b}), doctest::Contains("entry 'extra' is not in"), ValueError);
  io::save_safetensors(b, {{"w", ones({2, 2}, kFloat64)}, {"count", scalar_tensor(3, kInt64)}});
  CHECK_THROWS_WITH_AS(train::average_checkpoints({a, b}), doctest::Contains("entry 'w' has dtype float64"), TypeError);
  CHECK_THROWS_WITH_AS(train::average_checkpoints({}), "average_checkpoints: no files to average", ValueError);
  CHECK_THROWS_AS(train::average_checkpoints({a, (dir.path / "none.safetensors").string()}), IoError);
  CHECK(train::kept_checkpoints(dir.str()).empty());
  train::TrainerOptions o;
  o.keep_checkpoints = -1;
  Mlp model(1);
  optim::SGD sgd(model.parameters(), optim::SGDOptions(0.1));
  CHECK_THROWS_WITH_AS(train::Trainer(model, sgd, o), "Trainer: keep_checkpoints must be >= 0, got -1", ValueError);
}

TEST_CASE("average: a fresh run drops an earlier run's kept models, a resumed one those past its checkpoint") {
  TempDir dir;
  train::TrainerOptions o = quiet_options(dir.str(), 8);
  o.checkpoint_every = 2;
  o.keep_checkpoints = 3;
  {
    Run first(7, o);
    first.trainer.fit(first.step_fn());
  }
  auto steps = [&] {
    std::vector<std::int64_t> out;
    for (const std::string& f : train::kept_checkpoints(dir.str())) out.push_back(train::kept_checkpoint_step(f));
    return out;
  };
  CHECK(steps() == std::vector<std::int64_t>{4, 6, 8});
  // Resumed from step 4 (the checkpoint rewound by hand): models 6 and 8 are not this run's past.
  {
    TempDir four;
    train::TrainerOptions short_run = quiet_options(four.str(), 4);
    short_run.checkpoint_every = 2;
    Run r(7, short_run);
    r.trainer.fit(r.step_fn());
    fs::remove_all(dir.path / "checkpoint");
    fs::copy(four.path / "checkpoint", dir.path / "checkpoint", fs::copy_options::recursive);
  }
  o.max_steps = 6;
  {
    Run resumed(7, o);
    const train::TrainResult r = resumed.trainer.fit(resumed.step_fn());
    CHECK(r.resumed_from == 4);
  }
  CHECK(steps() == std::vector<std::int64_t>{4, 6});
  // A fresh run in the same directory keeps only its own.
  o.resume = false;
  o.max_steps = 2;
  Run fresh(7, o);
  fresh.trainer.fit(fresh.step_fn());
  CHECK(steps() == std::vector<std::int64_t>{2});
  CHECK(train::kept_checkpoint_step("x/model-12.safetensors") == 12);
  CHECK(train::kept_checkpoint_step("x/model-.safetensors") == -1);
}
