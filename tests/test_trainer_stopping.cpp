// The Trainer's stop conditions (time budget, early stopping, stop callback), schedules defined on the
// fraction of training done, and the plateau scheduler.

#include <doctest/doctest.h>

#include <chrono>
#include <functional>
#include <limits>
#include <sstream>
#include <thread>

#include "tests/trainer_testing.h"

using namespace tapegrad;
using json = nlohmann::json;
using tapegrad::testing::TempDir;
using namespace tapegrad::testing::trainer;

namespace {

// The MLP with plain Adam (no scheduler), for the tests that set their own schedule.
struct PlainRun {
  Mlp model;
  optim::Adam adam;
  train::Trainer trainer;
  PlainRun(std::uint64_t seed, train::TrainerOptions options)
      : model(seed), adam(model.parameters(), optim::AdamOptions(0.02)), trainer(model, adam, std::move(options)) {}
  train::StepFn step_fn() {
    return [this](std::int64_t step) {
      auto [x, y] = batch_at(step);
      return train::StepOutput{nn::mse_loss(model(x), y), 8, 32};
    };
  }
};

train::TrainerOptions options(const std::string& run_dir, std::int64_t max_steps) {
  train::TrainerOptions o;
  o.max_steps = max_steps;
  o.log_every = 1;
  o.eval_every = 1;
  o.run_dir = run_dir;
  o.progress = train::Progress::Off;
  return o;
}

// An evaluation that returns scripted values: val_loss at step s is script[s - 1].
train::EvalFn scripted(const std::vector<double>& script, std::vector<std::int64_t>* calls = nullptr) {
  return [script, calls](std::int64_t step) {
    if (calls) calls->push_back(step);
    return std::map<std::string, double>{{"val_loss", script.at(static_cast<std::size_t>(step - 1))}, {"val_acc", 0.5}};
  };
}

}  // namespace

TEST_CASE("schedule: fraction schedules warm up, decay to min_ratio, and give step schedules over any length") {
  const optim::FractionSchedule cosine = optim::warmup_cosine(0.25, 0.1);
  CHECK(cosine(0.0) == 0.0);
  CHECK(cosine(0.125) == doctest::Approx(0.5));
  CHECK(cosine(0.25) == doctest::Approx(1.0));
  CHECK(cosine(0.625) == doctest::Approx(0.55));  // halfway through the decay: (1 + 0.1) / 2
  CHECK(cosine(1.0) == doctest::Approx(0.1));
  CHECK(cosine(2.0) == doctest::Approx(0.1));  // past the end it stays at min_ratio
  const optim::FractionSchedule linear = optim::warmup_linear(0.0, 0.2);
  CHECK(linear(0.0) == doctest::Approx(1.0));
  CHECK(linear(0.5) == doctest::Approx(0.6));
  CHECK(linear(1.0) == doctest::Approx(0.2));

  // By steps: the fraction done once the step ends. Against the step-defined cosine of 10 warmup steps in
  // 100: the same warmup, and a decay that starts one step earlier (the fraction is counted at a step's end).
  const optim::Schedule by_steps = optim::over_steps(optim::warmup_cosine(0.1, 0.0), 100);
  const optim::Schedule reference = optim::cosine_with_warmup(10, 100, 0.0);
  for (std::int64_t s : {0, 4, 8, 9}) CHECK(by_steps(s) == doctest::Approx(reference(s)).epsilon(1e-12));
  for (std::int64_t s : {9, 10, 55, 98}) CHECK(by_steps(s) == doctest::Approx(reference(s + 1)).epsilon(1e-12));
  CHECK(by_steps(99) == doctest::Approx(0.0));
  CHECK(by_steps(0) == doctest::Approx(0.1));  // the first step of the warmup does not run at lr 0

  CHECK_THROWS_WITH_AS(optim::warmup_cosine(1.0), doctest::Contains("warmup_cosine: invalid warmup_fraction"),
                       ValueError);
  CHECK_THROWS_WITH_AS(optim::warmup_linear(0.1, 1.5), doctest::Contains("warmup_linear: invalid min_ratio"),
                       ValueError);
  CHECK_THROWS_WITH_AS(optim::over_steps(optim::warmup_cosine(0.1), 0), "over_steps: invalid total_steps 0",
                       ValueError);
}

TEST_CASE("trainer: set_schedule sets lr from the fraction of training done, not together with a scheduler") {
  TempDir dir;
  PlainRun run(3, options(dir.str(), 4));
  run.trainer.set_schedule(optim::warmup_linear(0.5, 0.0));
  const train::TrainResult result = run.trainer.fit(run.step_fn());
  CHECK(result.steps == 4);
  std::vector<double> lrs;
  for (const json& line : read_jsonl(dir.path / "metrics.jsonl")) lrs.push_back(line.at("lr").get<double>());
  // Fractions 1/4, 2/4, 3/4, 4/4: half way up the warmup, the top, half way down, zero.
  REQUIRE(lrs.size() == 4);
  CHECK(lrs[0] == doctest::Approx(0.01));
  CHECK(lrs[1] == doctest::Approx(0.02));
  CHECK(lrs[2] == doctest::Approx(0.01));
  CHECK(lrs[3] == doctest::Approx(0.0));

  optim::Scheduler sched(run.adam, optim::constant());
  CHECK_THROWS_WITH_AS(run.trainer.set_scheduler(&sched), doctest::Contains("a fraction schedule is set"), ValueError);
  PlainRun other(3, options("", 4));
  other.trainer.set_scheduler(&sched);
  CHECK_THROWS_WITH_AS(other.trainer.set_schedule(optim::warmup_cosine(0.1)),
                       doctest::Contains("a step scheduler is set"), ValueError);
}

TEST_CASE("trainer: a time budget stops the run, counts resumed time, and drives progress()") {
  TempDir dir;
  train::TrainerOptions o = options(dir.str(), 100000);
  o.time_budget_s = 0.25;
  o.eval_every = 0;
  const auto slow = [](PlainRun& run) {
    return [&run](std::int64_t step) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      return run.step_fn()(step);
    };
  };
  std::int64_t steps = 0;
  std::ostringstream shown;
  {
    train::TrainerOptions shown_options = o;
    shown_options.progress = train::Progress::Lines;
    shown_options.out = &shown;
    PlainRun run(5, shown_options);
    CHECK(run.trainer.progress() == doctest::Approx(1.0 / 100000));
    const train::TrainResult result = run.trainer.fit(slow(run));
    CHECK(result.stop_reason == train::StopReason::TimeBudget);
    CHECK(std::string(train::to_string(result.stop_reason)) == "time_budget");
    // At least 20 ms a step: at most 13 steps reach 0.25 s (fewer when the steps are slower); the step that
    // reaches it is the last.
    CHECK(result.steps >= 2);
    CHECK(result.steps <= 13);
    CHECK(result.total_seconds >= 0.25);
    CHECK(run.trainer.progress() == 1.0);
    steps = result.steps;
    // The last step is logged and checkpointed as the end of a run.
    const std::vector<json> lines = read_jsonl(dir.path / "metrics.jsonl");
    CHECK(lines.back().at("step").get<std::int64_t>() == steps);
    CHECK(checkpoint_step(dir.path / "checkpoint") == steps);
    // The progress lines count down the budget, not the 100000 steps.
    std::istringstream in(shown.str());
    std::int64_t step_lines = 0;
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("step ", 0) != 0) continue;
      ++step_lines;
      CAPTURE(line);
      CHECK(line.find(" eta 0:00") != std::string::npos);
    }
    CHECK(step_lines == steps);
  }
  // Resumed, the budget is already spent: no step is taken.
  PlainRun again(5, o);
  const train::TrainResult result = again.trainer.fit(slow(again));
  CHECK(result.resumed_from == steps);
  CHECK(result.steps == steps);
  CHECK(result.losses.empty());
  CHECK(result.stop_reason == train::StopReason::TimeBudget);

  train::TrainerOptions bad = options("", 10);
  bad.time_budget_s = -1;
  CHECK_THROWS_WITH_AS(PlainRun(1, bad), "Trainer: time_budget_s must be a finite number >= 0, got -1", ValueError);
}

TEST_CASE("trainer: early stopping stops after `patience` evaluations without an improvement beyond min_delta") {
  // Steps 1..6: 5 (best), 4 (best), 3.95 (not by more than 0.1), 4.5, stop at the third miss.
  const std::vector<double> script = {5.0, 4.0, 3.95, 4.5, 4.2, 1.0, 1.0, 1.0};
  TempDir dir;
  train::TrainerOptions o = options(dir.str(), 8);
  o.early_stopping.metric = "val_loss";
  o.early_stopping.patience = 3;
  o.early_stopping.min_delta = 0.1;
  PlainRun run(7, o);
  std::vector<std::int64_t> calls;
  const train::TrainResult result = run.trainer.fit(run.step_fn(), scripted(script, &calls));
  CHECK(result.stop_reason == train::StopReason::EarlyStopping);
  CHECK(result.steps == 5);
  CHECK(result.best_step == 2);
  CHECK(result.best_metric == 4.0);
  CHECK(calls == std::vector<std::int64_t>{1, 2, 3, 4, 5});
  CHECK(checkpoint_step(dir.path / "checkpoint") == 5);

  // Called again on the same run directory, the run stays stopped, even with more steps allowed.
  train::TrainerOptions more = o;
  more.max_steps = 20;
  PlainRun again(7, more);
  const train::TrainResult second = again.trainer.fit(again.step_fn(), scripted(script));
  CHECK(second.steps == 5);
  CHECK(second.losses.empty());
  CHECK(second.stop_reason == train::StopReason::EarlyStopping);
  CHECK(second.best_step == 2);

  // Maximising: accuracy-like metrics.
  train::TrainerOptions up = options("", 10);
  up.early_stopping = train::EarlyStopping{"val_loss", 2, 0.0, true};
  PlainRun rising(7, up);
  const train::TrainResult r = rising.trainer.fit(rising.step_fn(), scripted({1, 2, 3, 2.5, 2.9, 9, 9, 9, 9, 9}));
  CHECK(r.steps == 5);
  CHECK(r.best_step == 3);
  CHECK(r.best_metric == 3.0);
}

TEST_CASE("trainer: early stopping's state is checkpointed, so a resumed run stops where an uninterrupted one does") {
  const std::vector<double> script = {5.0, 4.0, 4.5, 3.0, 3.5, 3.6, 3.7, 1.0, 1.0, 1.0};
  train::TrainerOptions o = options("", 10);
  o.early_stopping.metric = "val_loss";
  o.early_stopping.patience = 3;
  TempDir dir_a, dir_b;
  o.run_dir = dir_a.str();
  PlainRun a(11, o);
  const train::TrainResult full = a.trainer.fit(a.step_fn(), scripted(script));
  CHECK(full.steps == 7);
  CHECK(full.best_step == 4);

  o.run_dir = dir_b.str();
  o.max_steps = 5;  // stops in the middle of a streak without improvement
  {
    PlainRun b(11, o);
    CHECK(b.trainer.fit(b.step_fn(), scripted(script)).stop_reason == train::StopReason::MaxSteps);
  }
  o.max_steps = 10;
  PlainRun c(99, o);
  const train::TrainResult rest = c.trainer.fit(c.step_fn(), scripted(script));
  CHECK(rest.resumed_from == 5);
  CHECK(rest.steps == 7);
  CHECK(rest.stop_reason == train::StopReason::EarlyStopping);
  CHECK(rest.best_step == 4);
  CHECK(rest.best_metric == 3.0);
  check_same_metrics(dir_a.path / "metrics.jsonl", dir_b.path / "metrics.jsonl");

  const json saved = json::parse(testing::read_text(dir_b.path / "checkpoint" / "trainer.json"));
  CHECK(saved.at("early_stopping") == json{{"metric", "val_loss"}, {"best", 3.0}, {"best_step", 4}, {"bad_evals", 3}});
}

TEST_CASE("trainer: early stopping needs an eval_fn, a known metric, patience >= 1 and min_delta >= 0") {
  train::TrainerOptions o = options("", 5);
  o.early_stopping.metric = "val_loss";
  PlainRun run(1, o);
  CHECK_THROWS_WITH_AS(run.trainer.fit(run.step_fn()), "Trainer::fit: early stopping on 'val_loss' needs an eval_fn",
                       ValueError);
  o.early_stopping.metric = "val_f1";
  PlainRun unknown(1, o);
  CHECK_THROWS_WITH_AS(unknown.trainer.fit(unknown.step_fn(), scripted({1, 2, 3, 4, 5})),
                       "Trainer: early stopping watches 'val_f1' but eval_fn returned only {val_acc, val_loss}",
                       ValueError);
  o.early_stopping.patience = 0;
  CHECK_THROWS_WITH_AS(PlainRun(1, o), doctest::Contains("needs patience >= 1 and min_delta >= 0, got 0 and 0"),
                       ValueError);
}

namespace {

// val_loss by step for the plateau tests, evaluated every 2 steps: 1.0 at step 2, 0.9 (best) at 4, then four
// without improvement. The odd steps' 0.1 would be a new best if an evaluation off the schedule were counted.
const std::vector<double> kPlateauScript = {0.1, 1.0, 0.1, 0.9, 0.1, 0.95, 0.1, 0.96, 0.1, 0.97, 0.1, 0.98};

train::TrainerOptions plateau_options(const std::string& run_dir, std::int64_t max_steps) {
  train::TrainerOptions o = options(run_dir, max_steps);
  o.eval_every = 2;
  return o;
}

std::vector<double> logged_lrs(const fs::path& metrics) {
  std::vector<double> lrs;
  for (const json& line : read_jsonl(metrics))
    if (line.contains("lr")) lrs.push_back(line.at("lr").get<double>());
  return lrs;
}

}  // namespace

TEST_CASE("trainer: a plateau scheduler halves the rate after scheduled evaluations without improvement") {
  TempDir dir;
  PlainRun run(5, plateau_options(dir.str(), 12));
  optim::ReduceLROnPlateau plateau(run.adam, optim::ReduceLROnPlateauOptions().patience(1).factor(0.5));
  run.trainer.set_plateau_scheduler(&plateau, "val_loss");
  std::vector<std::int64_t> calls;
  const train::TrainResult result = run.trainer.fit(run.step_fn(), scripted(kPlateauScript, &calls));
  CHECK(result.steps == 12);
  CHECK(calls == std::vector<std::int64_t>{2, 4, 6, 8, 10, 12});
  // Step 8's is the second evaluation without improvement (patience 1): steps 9-12 run at half the rate,
  // and step 12's lowers it again for a next call.
  std::vector<double> want(8, 0.02);
  want.insert(want.end(), 4, 0.01);
  CHECK(logged_lrs(dir.path / "metrics.jsonl") == want);
  CHECK(*run.adam.param_groups()[0].lr == 0.005);
  CHECK(plateau.state().best == 0.9);
  CHECK(plateau.state().evals == 6);
  const json saved = json::parse(testing::read_text(dir.path / "checkpoint" / "trainer.json"));
  CHECK(saved.at("plateau") == json{{"metric", "val_loss"},
                                    {"mode", "min"},
                                    {"best", 0.9},
                                    {"bad_evals", 0},
                                    {"cooldown_counter", 0},
                                    {"evals", 6}});
}

TEST_CASE(
    "trainer: a plateau scheduler's counters are checkpointed, so a resumed run lowers the rate where an "
    "uninterrupted one does") {
  const auto plateau_options_of = optim::ReduceLROnPlateauOptions().patience(1).factor(0.5);
  TempDir dir_a, dir_b;
  PlainRun a(5, plateau_options(dir_a.str(), 12));
  optim::ReduceLROnPlateau plateau_a(a.adam, plateau_options_of);
  a.trainer.set_plateau_scheduler(&plateau_a, "val_loss");
  a.trainer.fit(a.step_fn(), scripted(kPlateauScript));

  // Stopped at step 7, off the evaluation schedule: the evaluation that ends the call (0.1) is logged
  // but not counted by the plateau.
  {
    PlainRun b(5, plateau_options(dir_b.str(), 7));
    optim::ReduceLROnPlateau plateau_b(b.adam, plateau_options_of);
    b.trainer.set_plateau_scheduler(&plateau_b, "val_loss");
    b.trainer.fit(b.step_fn(), scripted(kPlateauScript));
    CHECK(plateau_b.state().best == 0.9);
    CHECK(plateau_b.state().bad_evals == 1);
    const json saved = json::parse(testing::read_text(dir_b.path / "checkpoint" / "trainer.json"));
    CHECK(saved.at("plateau").at("evals") == 3);
    CHECK(saved.at("plateau").at("mode") == "min");
  }
  PlainRun c(77, plateau_options(dir_b.str(), 12));
  optim::ReduceLROnPlateau plateau_c(c.adam, plateau_options_of);
  c.trainer.set_plateau_scheduler(&plateau_c, "val_loss");
  const train::TrainResult rest = c.trainer.fit(c.step_fn(), scripted(kPlateauScript));
  CHECK(rest.resumed_from == 7);
  check_same_metrics(dir_a.path / "metrics.jsonl", dir_b.path / "metrics.jsonl");
  CHECK(*c.adam.param_groups()[0].lr == *a.adam.param_groups()[0].lr);
  CHECK(plateau_c.state().best == plateau_a.state().best);
  CHECK(plateau_c.state().bad_evals == plateau_a.state().bad_evals);
  CHECK(plateau_c.state().evals == plateau_a.state().evals);

  // A checkpoint whose plateau watched another metric, or had none, starts the counters afresh.
  TempDir dir_d;
  {
    PlainRun d(5, plateau_options(dir_d.str(), 6));
    d.trainer.fit(d.step_fn(), scripted(kPlateauScript));
  }
  PlainRun e(5, plateau_options(dir_d.str(), 8));
  optim::ReduceLROnPlateau plateau_e(e.adam, plateau_options_of);
  plateau_e.load_state(optim::PlateauState{0.5, 1, 0, 9});
  e.trainer.set_plateau_scheduler(&plateau_e, "val_loss");
  e.trainer.fit(e.step_fn(), scripted(kPlateauScript));
  CHECK(plateau_e.state().evals == 1);  // reset at resume, then step 8's evaluation
  CHECK(plateau_e.state().best == 0.96);
}

TEST_CASE("trainer: the plateau scheduler needs a metric, an eval_fn returning it, and no other schedule") {
  PlainRun run(1, plateau_options("", 4));
  optim::ReduceLROnPlateau plateau(run.adam);
  CHECK_THROWS_WITH_AS(run.trainer.set_plateau_scheduler(&plateau, ""),
                       "Trainer::set_plateau_scheduler: the metric to watch is empty", ValueError);
  run.trainer.set_plateau_scheduler(&plateau, "val_f1");
  const std::string needs =
      "Trainer::fit: the plateau scheduler on 'val_f1' needs an eval_fn and eval_every > 0 (it counts scheduled "
      "evaluations)";
  CHECK_THROWS_WITH_AS(run.trainer.fit(run.step_fn()), needs.c_str(), ValueError);
  train::TrainerOptions never = plateau_options("", 4);
  never.eval_every = 0;
  PlainRun unscheduled(1, never);
  optim::ReduceLROnPlateau unscheduled_plateau(unscheduled.adam);
  unscheduled.trainer.set_plateau_scheduler(&unscheduled_plateau, "val_f1");
  CHECK_THROWS_WITH_AS(unscheduled.trainer.fit(unscheduled.step_fn(), scripted(kPlateauScript)), needs.c_str(),
                       ValueError);
  CHECK_THROWS_WITH_AS(unscheduled.trainer.set_plateau_scheduler(&plateau, "val_loss"),
                       "Trainer::set_plateau_scheduler: the plateau scheduler lowers another optimiser's rates",
                       ValueError);
  CHECK_THROWS_WITH_AS(run.trainer.fit(run.step_fn(), scripted(kPlateauScript)),
                       "Trainer: the plateau scheduler watches 'val_f1' but eval_fn returned only {val_acc, val_loss}",
                       ValueError);
  optim::Scheduler sched(run.adam, optim::constant());
  CHECK_THROWS_WITH_AS(run.trainer.set_scheduler(&sched), doctest::Contains("a plateau scheduler is set"), ValueError);
  CHECK_THROWS_WITH_AS(run.trainer.set_schedule(optim::warmup_cosine(0.1)),
                       doctest::Contains("a plateau scheduler is set"), ValueError);
  PlainRun other(1, plateau_options("", 4));
  optim::Scheduler other_sched(other.adam, optim::constant());
  other.trainer.set_scheduler(&other_sched);
  optim::ReduceLROnPlateau other_plateau(other.adam);
  CHECK_THROWS_WITH_AS(other.trainer.set_plateau_scheduler(&other_plateau, "val_loss"),
                       doctest::Contains("a step scheduler is set"), ValueError);

  // A trainer.json whose plateau field is malformed is an IoError naming the field.
  TempDir dir;
  {
    PlainRun first(1, plateau_options(dir.str(), 1));  // ends off the evaluation schedule: nothing counted
    optim::ReduceLROnPlateau p(first.adam);
    first.trainer.set_plateau_scheduler(&p, "val_loss");
    first.trainer.fit(first.step_fn(), scripted(kPlateauScript));
  }
  const fs::path json_path = dir.path / "checkpoint" / "trainer.json";
  const json good = json::parse(testing::read_text(json_path));
  CHECK(good.at("plateau").at("best") == "inf");  // best is still +inf, which JSON spells as a string
  {
    PlainRun resumed(1, plateau_options(dir.str(), 1));
    optim::ReduceLROnPlateau p(resumed.adam);
    p.load_state(optim::PlateauState{2.0, 1, 1, 1});
    resumed.trainer.set_plateau_scheduler(&p, "val_loss");
    resumed.trainer.fit(resumed.step_fn(), scripted(kPlateauScript));
    CHECK(p.state().best == std::numeric_limits<double>::infinity());  // read back from "inf"
    CHECK(p.state().evals == 0);
  }
  {
    // The same metric watched the other way round: the counters start afresh (best -inf for max).
    PlainRun resumed(1, plateau_options(dir.str(), 1));
    optim::ReduceLROnPlateau p(resumed.adam, optim::ReduceLROnPlateauOptions().mode(optim::PlateauMode::Max));
    p.load_state(optim::PlateauState{2.0, 1, 1, 1});
    resumed.trainer.set_plateau_scheduler(&p, "val_loss");
    resumed.trainer.fit(resumed.step_fn(), scripted(kPlateauScript));
    CHECK(p.state().best == -std::numeric_limits<double>::infinity());
    CHECK(p.state().evals == 0);
  }
  const auto expect_field_error = [&](const std::function<void(json&)>& edit, const std::string& needle) {
    CAPTURE(needle);
    json j = good;
    edit(j);
    write_signed_trainer_json(json_path, j);
    PlainRun second(1, plateau_options(dir.str(), 4));
    optim::ReduceLROnPlateau p(second.adam);
    p.load_state(optim::PlateauState{2.0, 1, 1, 1});
    second.trainer.set_plateau_scheduler(&p, "val_loss");
    CHECK_THROWS_WITH_AS(second.trainer.fit(second.step_fn(), scripted(kPlateauScript)),
                         doctest::Contains(needle.c_str()), IoError);
    CHECK(p.state().best == 2.0);  // nothing restored or reset
    CHECK(p.state().evals == 1);
  };
  expect_field_error([](json& j) { j["plateau"]["best"] = "huge"; },
                     "field 'plateau' best must be a number, \"inf\" or \"-inf\", got \"huge\"");
  expect_field_error([](json& j) { j["plateau"]["mode"] = "sideways"; },
                     "field 'plateau' mode must be \"min\" or \"max\", got \"sideways\"");
  expect_field_error([](json& j) { j["plateau"]["evals"] = -1; },
                     "field 'plateau' evals must be an integer >= 0, got -1");
  expect_field_error([](json& j) { j["plateau"].erase("cooldown_counter"); },
                     "field 'plateau' has no 'cooldown_counter'");
  expect_field_error([](json& j) { j["plateau"] = 5; }, "field 'plateau' must be null or an object, got 5");
  expect_field_error([](json& j) { j["plateau"]["metric"] = ""; },
                     "field 'plateau' metric must be a non-empty string, got \"\"");
  expect_field_error(
      [](json& j) {
        j["early_stopping"] = {{"metric", "val_loss"}, {"best", 1.0}, {"best_step", -2}};
      },
      "field 'early_stopping' best_step must be an integer >= -1, got -2");
}

TEST_CASE("trainer: the stop callback sees each step and its evaluation, and its stop is a last step") {
  TempDir dir;
  train::TrainerOptions o = options(dir.str(), 50);
  o.log_every = 4;
  o.eval_every = 3;
  PlainRun run(13, o);
  std::vector<std::int64_t> seen, with_eval;
  run.trainer.set_stop_callback([&](const train::StepInfo& info) {
    seen.push_back(info.step);
    if (info.eval) with_eval.push_back(info.step);
    CHECK(std::isfinite(info.loss));
    CHECK(info.lr == doctest::Approx(0.02));
    CHECK(info.grad_norm > 0);
    return info.step == 7;
  });
  std::vector<std::int64_t> calls;
  const train::TrainResult result = run.trainer.fit(run.step_fn(), scripted(std::vector<double>(50, 1.0), &calls));
  CHECK(result.stop_reason == train::StopReason::Callback);
  CHECK(result.steps == 7);
  CHECK(seen == std::vector<std::int64_t>{1, 2, 3, 4, 5, 6, 7});
  CHECK(with_eval == std::vector<std::int64_t>{3, 6});
  CHECK(calls == std::vector<std::int64_t>{3, 6, 7});  // the stopping step is evaluated as a last step
  std::vector<std::int64_t> logged;
  for (const json& line : read_jsonl(dir.path / "metrics.jsonl"))
    if (line.contains("loss")) logged.push_back(line.at("step").get<std::int64_t>());
  CHECK(logged == std::vector<std::int64_t>{4, 7});
  CHECK(checkpoint_step(dir.path / "checkpoint") == 7);
}
