// The training regression test: a small nn::LanguageModel trained as PyTorch 1.13 trained the same
// model from the same start (tests/data/training_trajectory.json, written by
// tests/torch_reference/make_training.py): AdamW, gradient-norm clipping, warm-up + cosine schedule,
// a dozen steps on a copy task. In float64 every step's loss, gradient norm and learning rate, the
// held-out loss and the final parameters must agree with PyTorch's, trained by hand and by the
// Trainer (interrupted after 6 steps and resumed from its checkpoint); in float32 the losses must stay
// within float32's rounding of them. A change anywhere in the forward, backward, clipping,
// optimiser, schedule or checkpoint shows up here as a different trajectory.

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tapegrad/nn/nn.h"
#include "tapegrad/optim/optim.h"
#include "tapegrad/train/trainer.h"
#include "tests/fixture_tensor.h"
#include "tests/testing.h"

using namespace tapegrad;
using json = nlohmann::json;
using tapegrad::testing::max_abs_diff;
using tapegrad::testing::tensor_from;

namespace {

// The whole fixture, read once.
const json& fixture() {
  static const json data = tapegrad::testing::read_fixture("training_trajectory.json", "make_training.py");
  return data;
}

struct Trajectory {
  std::vector<double> losses, grad_norms, learning_rates;
  double held_out_loss = 0.0;
  NamedTensors final_parameters;
};

// The mean cross-entropy of predicting batch[:, 1:] from batch[:, :-1]; batch: Int64 (B, T + 1).
Tensor loss_of(nn::LanguageModel& model, const Tensor& batch) {
  const std::int64_t t = batch.size(1) - 1;
  const Tensor logits = model(batch.narrow(1, 0, t));  // (B, T, V)
  return nn::cross_entropy(logits.reshape({-1, logits.size(2)}), batch.narrow(1, 1, t).reshape({-1}));
}

std::int64_t config_int(const char* key) { return fixture().at("config").at(key).get<std::int64_t>(); }
double config_double(const char* key) { return fixture().at("config").at(key).get<double>(); }

// make_training.py's model, loaded with its initial parameters, in `dtype`.
nn::LanguageModel initial_model(DType dtype) {
  nn::LanguageModel model{nn::LanguageModelOptions()
                              .vocab_size(config_int("vocab_size"))
                              .max_len(config_int("max_len"))
                              .num_layers(config_int("num_layers"))
                              .layer(nn::TransformerLayerOptions(config_int("d_model"), config_int("num_heads"))
                                         .dim_feedforward(config_int("ff_hidden"))
                                         .activation(nn::Activation::GELU)
                                         .norm_first(true)
                                         .dropout(0.0)
                                         .layer_norm_eps(config_double("layer_norm_eps")))};
  model->to(kFloat64);
  model->load_state_dict(
      tapegrad::testing::named_tensors_from(fixture().at("initial_parameters")));  // strict: every name
  model->to(dtype);
  return model;
}

// The model, its optimiser and its schedule as make_training.py sets them up.
struct Setup {
  explicit Setup(DType dtype)
      : model(initial_model(dtype)),
        optimizer(model->parameters(), adamw_options()),
        schedule(optimizer, optim::cosine_with_warmup(config_int("warmup_steps"), config_int("steps"),
                                                      config_double("min_lr_ratio"))) {}

  static optim::AdamWOptions adamw_options() {
    const std::vector<double> betas = fixture().at("config").at("betas").get<std::vector<double>>();
    return optim::AdamWOptions(config_double("lr"))
        .betas({betas.at(0), betas.at(1)})
        .eps(config_double("eps"))
        .weight_decay(config_double("weight_decay"));
  }

  nn::LanguageModel model;
  optim::AdamW optimizer;
  optim::Scheduler schedule;
};

Tensor batch_at(std::int64_t step) { return tensor_from(fixture().at("batches").at(static_cast<std::size_t>(step))); }

double held_out_loss(nn::LanguageModel& model) {
  const NoGradGuard no_grad;
  return loss_of(model, tensor_from(fixture().at("held_out_batch"))).item<double>();
}

// make_training.py's loop, written out as a user would: zero_grad, forward, backward, clip, step.
Trajectory train_by_hand(DType dtype) {
  Setup run(dtype);
  Trajectory out;
  for (std::int64_t step = 0; step < config_int("steps"); ++step) {
    run.optimizer.zero_grad();
    const Tensor loss = loss_of(run.model, batch_at(step));
    loss.backward();
    out.grad_norms.push_back(optim::clip_grad_norm(run.model->parameters(), config_double("max_grad_norm")));
    out.losses.push_back(loss.item<double>());
    out.learning_rates.push_back(run.optimizer.param_groups().at(0).lr.value());
    run.optimizer.step();
    run.schedule.step();
  }
  out.held_out_loss = held_out_loss(run.model);
  out.final_parameters = run.model->named_parameters();
  return out;
}

// Every element of got within tol of expected, relative to max(1, |expected|); says which step.
void check_series(const char* what, const std::vector<double>& got, const json& expected, double tol) {
  const std::vector<double> want = expected.get<std::vector<double>>();
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO(what << " at step " << i << ": tapegrad " << got[i] << ", PyTorch " << want[i]);
    CHECK(std::abs(got[i] - want[i]) <= tol * std::max(1.0, std::abs(want[i])));
  }
}

// A float64 run against PyTorch's: every step's loss, gradient norm and learning rate, the held-out
// loss and the final parameters. `who` names the run in the messages.
void check_float64_run(const std::string& who, const Trajectory& run) {
  const json& data = fixture();
  check_series((who + " loss").c_str(), run.losses, data.at("losses"), 1e-10);
  check_series((who + " gradient norm").c_str(), run.grad_norms, data.at("grad_norms"), 1e-10);
  check_series((who + " learning rate").c_str(), run.learning_rates, data.at("learning_rates"), 1e-15);
  CHECK(run.held_out_loss == doctest::Approx(data.at("held_out_loss").get<double>()).epsilon(1e-10));
  const json& final = data.at("final_parameters");
  REQUIRE(run.final_parameters.size() == final.size());
  for (const auto& [name, p] : run.final_parameters) {
    INFO("final parameter " << name);
    REQUIRE(final.contains(name));
    CHECK(max_abs_diff(p, tensor_from(final.at(name))) < 1e-9);  // 4e-12 seen (the key bias: zero gradient, rounding)
  }
}

}  // namespace

TEST_CASE("training regression: the fixture is PyTorch 1.13's float64 run, and it learned") {
  const json& data = fixture();
  CHECK(data.at("torch_version").get<std::string>().rfind("1.13", 0) == 0);
  CHECK(data.at("dtype").get<std::string>() == "float64");
  const std::vector<double> losses = data.at("losses").get<std::vector<double>>();
  REQUIRE(losses.size() == static_cast<std::size_t>(data.at("config").at("steps").get<std::int64_t>()));
  CHECK(data.at("held_out_loss").get<double>() < losses.front() - 0.3);  // the copy task's second half is learned
  // Clipping binds: every step's norm is above max_grad_norm.
  for (const double norm : data.at("grad_norms").get<std::vector<double>>())
    CHECK(norm > data.at("config").at("max_grad_norm").get<double>());
}

TEST_CASE(
    "training regression: float64 training of a small language model follows PyTorch's trajectory (loss, gradient "
    "norm, learning rate, held-out loss, final parameters)") {
  check_float64_run("by hand", train_by_hand(kFloat64));
}

TEST_CASE(
    "training regression: the Trainer, stopped after 6 steps and resumed from its checkpoint, follows PyTorch's "
    "float64 trajectory") {
  tapegrad::testing::TempDir dir;
  Trajectory seen;
  for (const std::int64_t max_steps : {std::int64_t{6}, config_int("steps")}) {
    CAPTURE(max_steps);
    Setup run(kFloat64);  // a new process's start: the first parameters, until the checkpoint is read
    train::TrainerOptions options;
    options.max_steps = max_steps;
    options.clip_grad_norm = config_double("max_grad_norm");
    options.log_every = 1;
    options.run_dir = (dir.path / "run").string();
    options.progress = train::Progress::Off;
    options.out = nullptr;
    train::Trainer trainer(run.model, run.optimizer, options);
    trainer.set_scheduler(&run.schedule);
    const train::TrainResult result = trainer.fit([&run](std::int64_t step) {
      const Tensor batch = batch_at(step);
      return train::StepOutput{loss_of(run.model, batch), batch.size(0), batch.size(0) * (batch.size(1) - 1)};
    });
    CHECK(result.resumed_from == (max_steps == 6 ? -1 : 6));
    seen.held_out_loss = held_out_loss(run.model);
    seen.final_parameters = run.model->named_parameters();
  }
  // metrics.jsonl: a line per step (log_every 1), the resumed call's after the first call's.
  std::ifstream lines(dir.path / "run" / "metrics.jsonl");
  for (std::string line; std::getline(lines, line);) {
    const json entry = json::parse(line);
    CHECK(entry.at("step").get<std::int64_t>() == static_cast<std::int64_t>(seen.losses.size()) + 1);
    seen.losses.push_back(entry.at("step_loss").get<double>());
    seen.grad_norms.push_back(entry.at("grad_norm").get<double>());
    seen.learning_rates.push_back(entry.at("lr").get<double>());
  }
  check_float64_run("Trainer", seen);
}

TEST_CASE("training regression: float32 training stays within float32 rounding of PyTorch's float64 losses") {
  const Trajectory run = train_by_hand(kFloat32);
  const json& data = fixture();
  check_series("float32 loss", run.losses, data.at("losses"), 1e-5);  // 1.2e-7 seen
  CHECK(run.held_out_loss == doctest::Approx(data.at("held_out_loss").get<double>()).epsilon(1e-5));
  CHECK(run.final_parameters.front().second.dtype() == kFloat32);
}
