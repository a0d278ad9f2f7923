// trainer: the training loop, metrics.jsonl, progress output, gradient clipping and non-finite detection
// (checkpoints and resume are in test_trainer_checkpoint.cpp; the shared model in trainer_testing.h).

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
#include "tests/trainer_testing.h"

using namespace tapegrad;
namespace fs = std::filesystem;
using json = nlohmann::json;
using tapegrad::testing::TempDir;
using namespace tapegrad::testing::trainer;

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
  std::int64_t previous_logged = 0;
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
    // "loss" is the mean over the steps since the previous line, "step_loss" the last step's.
    double sum = 0.0;
    for (std::int64_t i = previous_logged; i < step; ++i) sum += result.losses[static_cast<std::size_t>(i)];
    CHECK(line.at("loss").get<double>() ==
          doctest::Approx(sum / static_cast<double>(step - previous_logged)).epsilon(1e-15));
    CHECK(line.at("step_loss").get<double>() == result.losses[step - 1]);
    if (step > 1) CHECK(line.at("loss").get<double>() != line.at("step_loss").get<double>());
    previous_logged = step;
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

TEST_CASE("trainer: without run_dir no files are written, bad options and bad step outputs are rejected") {
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
  bad = o;
  bad.replicas.world_size = 2;
  bad.replicas.rank = 2;
  CHECK_THROWS_WITH_AS(train::Trainer(model, sgd, bad), "Trainer: replicas: rank 2 of world_size 2 is not a rank",
                       ValueError);
  bad.replicas.rank = 1;  // a second replica, but no functions to reduce across them
  CHECK_THROWS_WITH_AS(train::Trainer(model, sgd, bad),
                       "Trainer: replicas: world_size 2 needs the mean, max and barrier functions "
                       "(dist::replicas(world) makes them)",
                       ValueError);

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

TEST_CASE("trainer: clip_grad_norm scales the update, the logged norm is the one before clipping") {
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

TEST_CASE("trainer: accumulation over k micro-batches equals one step of a k-times batch") {
  constexpr std::int64_t kMicro = 4;
  // Two identical models without dropout, trained by Adam with clipping: one takes 4 micro-batches of 8
  // rows per step, the other one batch of the same 32 rows.
  auto make = [] {
    Generator gen(17);
    return nn::Sequential(nn::Linear(nn::LinearOptions(4, 16).generator(&gen)), nn::ReLU(),
                          nn::Linear(nn::LinearOptions(16, 1).generator(&gen)));
  };
  nn::Sequential micro = make(), whole = make();
  optim::Adam adam_micro(micro->parameters(), optim::AdamOptions(0.01));
  optim::Adam adam_whole(whole->parameters(), optim::AdamOptions(0.01));
  TempDir micro_dir, whole_dir;
  train::TrainerOptions o;
  o.max_steps = 6;
  o.log_every = 1;
  o.clip_grad_norm = 0.5;
  o.progress = train::Progress::Off;
  o.run_dir = micro_dir.str();
  o.accumulation_steps = kMicro;
  std::vector<std::int64_t> calls;
  train::Trainer micro_trainer(micro, adam_micro, o);
  const train::TrainResult micro_result = micro_trainer.fit([&](std::int64_t m) {
    calls.push_back(m);
    auto [x, y] = batch_at(m);
    return train::StepOutput{nn::mse_loss(micro(x), y), 8, 0};
  });
  o.run_dir = whole_dir.str();
  o.accumulation_steps = 1;
  train::Trainer whole_trainer(whole, adam_whole, o);
  const train::TrainResult whole_result = whole_trainer.fit([&](std::int64_t s) {
    std::vector<Tensor> xs, ys;
    for (std::int64_t i = 0; i < kMicro; ++i) {
      auto [x, y] = batch_at(s * kMicro + i);
      xs.push_back(x);
      ys.push_back(y);
    }
    return train::StepOutput{nn::mse_loss(whole(concat(xs, 0)), concat(ys, 0)), 32, 0};
  });

  std::vector<std::int64_t> expected_calls(6 * kMicro);
  for (std::size_t i = 0; i < expected_calls.size(); ++i) expected_calls[i] = static_cast<std::int64_t>(i);
  CHECK(calls == expected_calls);
  CHECK(micro_trainer.step() == 6);
  REQUIRE(micro_result.losses.size() == whole_result.losses.size());
  for (std::size_t i = 0; i < micro_result.losses.size(); ++i)
    CHECK(micro_result.losses[i] == doctest::Approx(whole_result.losses[i]).epsilon(1e-5));
  const auto a = values(*micro), b = values(*whole);
  REQUIRE(a.size() == b.size());
  double largest = 0.0, differs = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t k = 0; k < a[i].size(); ++k) {
      largest = std::max(largest, std::abs(static_cast<double>(b[i][k])));
      differs = std::max(differs, std::abs(static_cast<double>(a[i][k]) - b[i][k]));
    }
  CHECK(differs <= 1e-5 * largest);
  // Both moved: the comparison is not of two untouched models.
  CHECK(values(*make()) != a);
  const std::vector<json> lines = read_jsonl(micro_dir.path / "metrics.jsonl");
  REQUIRE(lines.size() == 6);
  CHECK(lines[0].at("examples_per_s").get<double>() > 0);

  // A resume needs the same number of micro-batches per step; 0 is refused.
  o.run_dir = micro_dir.str();
  o.max_steps = 8;
  o.accumulation_steps = 2;
  train::Trainer other(micro, adam_micro, o);
  CHECK_THROWS_WITH_AS(other.fit([&](std::int64_t m) {
    auto [x, y] = batch_at(m);
    return train::StepOutput{nn::mse_loss(micro(x), y), 8, 0};
  }),
                       doctest::Contains("field 'accumulation_steps' is 4 but this trainer's accumulation_steps is 2"),
                       IoError);
  o.accumulation_steps = 0;
  CHECK_THROWS_WITH_AS(train::Trainer(micro, adam_micro, o), "Trainer: accumulation_steps must be >= 1, got 0",
                       ValueError);
}

TEST_CASE("trainer: a NaN loss in a micro-batch names the micro-batch and takes no step") {
  TempDir dir;
  Mlp model(5);
  const auto start = values(model);
  optim::SGD sgd(model.parameters(), optim::SGDOptions(0.1));
  train::TrainerOptions o;
  o.max_steps = 3;
  o.accumulation_steps = 3;
  o.progress = train::Progress::Off;
  train::Trainer trainer(model, sgd, o);
  std::vector<std::vector<float>> after_first_step;
  try {
    trainer.fit([&](std::int64_t m) {
      if (m == 3) after_first_step = values(model);  // the first micro-batch of step 2
      auto [x, y] = batch_at(m);
      Tensor loss = nn::mse_loss(model(x), y);
      if (m == 4) loss = loss * std::numeric_limits<double>::quiet_NaN();
      return train::StepOutput{loss, 8, 0};
    });
    FAIL("fit did not throw");
  } catch (const train::NonFiniteLoss& e) {
    CHECK(e.step() == 1);
    CHECK(std::string(e.what()).find("non-finite loss nan at step 2 (step_fn(4))") != std::string::npos);
  }
  CHECK(trainer.step() == 1);
  CHECK(values(model) != start);             // step 1 was taken
  CHECK(values(model) == after_first_step);  // step 2 was not
}
