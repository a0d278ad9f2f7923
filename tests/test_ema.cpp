// ModelEma (tapegrad/train/ema.h): the average against its formula with and without warm-up, apply()
// putting the model's own weights back, state round trips and refusals; in the Trainer: updated after
// every step, evaluation on the averaged weights, kept in checkpoints so a resumed run ends with the
// same average as an uninterrupted one.

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "tapegrad/autograd/error.h"
#include "tapegrad/nn/nn.h"
#include "tapegrad/optim/optim.h"
#include "tapegrad/train/train.h"
#include "tests/testing.h"
#include "tests/trainer_testing.h"

using namespace tapegrad;
using tapegrad::testing::TempDir;
using namespace tapegrad::testing::trainer;

namespace {

std::vector<std::vector<float>> entries(const NamedTensors& state) {
  std::vector<std::vector<float>> out;
  for (const auto& [name, t] : state)
    if (is_floating(t.dtype())) out.push_back(t.to(kFloat32).to_vector<float>());
  return out;
}

}  // namespace

TEST_CASE("ema: each update moves the average by (1 - d) toward the weights, d warming up to decay") {
  for (const bool warmup : {false, true}) {
    CAPTURE(warmup);
    Mlp model(3);
    optim::SGD sgd(model.parameters(), optim::SGDOptions(0.1));
    train::ModelEma ema(model, train::EmaOptions().decay(0.9).warmup(warmup));
    // The reference average, in double, from the same sequence of weights.
    std::vector<std::vector<double>> expected;
    for (const auto& values : entries(model.state_dict())) expected.emplace_back(values.begin(), values.end());
    CHECK(entries(ema.averages()) == entries(model.state_dict()));
    for (std::int64_t n = 0; n < 12; ++n) {
      auto [x, y] = batch_at(n);
      sgd.zero_grad();
      nn::mse_loss(model(x), y).backward();
      sgd.step();
      const double d = warmup ? std::min(0.9, (1.0 + n) / (10.0 + n)) : 0.9;
      CHECK(ema.next_decay() == doctest::Approx(d));
      ema.update();
      const auto weights = entries(model.state_dict());
      for (std::size_t i = 0; i < expected.size(); ++i)
        for (std::size_t k = 0; k < expected[i].size(); ++k)
          expected[i][k] = d * expected[i][k] + (1 - d) * weights[i][k];
    }
    CHECK(ema.updates() == 12);
    const auto averages = entries(ema.averages());
    const auto weights = entries(model.state_dict());
    REQUIRE(averages.size() == expected.size());
    bool differs_from_weights = false;
    for (std::size_t i = 0; i < expected.size(); ++i)
      for (std::size_t k = 0; k < expected[i].size(); ++k) {
        CHECK(averages[i][k] == doctest::Approx(expected[i][k]).epsilon(1e-5));
        differs_from_weights = differs_from_weights || averages[i][k] != weights[i][k];
      }
    CHECK(differs_from_weights);
  }
}

TEST_CASE("ema: apply() puts the averages into the model and its guard puts the weights back") {
  Mlp model(4);
  optim::SGD sgd(model.parameters(), optim::SGDOptions(0.5));
  train::ModelEma ema(model, train::EmaOptions().decay(0.5).warmup(false));
  for (std::int64_t n = 0; n < 3; ++n) {
    auto [x, y] = batch_at(n);
    sgd.zero_grad();
    nn::mse_loss(model(x), y).backward();
    sgd.step();
    ema.update();
  }
  const auto own = entries(model.state_dict());
  REQUIRE(entries(ema.averages()) != own);
  {
    const train::ModelEma::Applied applied = ema.apply();
    CHECK(entries(model.state_dict()) == entries(ema.averages()));
  }
  CHECK(entries(model.state_dict()) == own);
  // A decay of 1 keeps the first weights, 0 follows the model.
  train::ModelEma frozen(model, train::EmaOptions().decay(1.0).warmup(false));
  train::ModelEma follows(model, train::EmaOptions().decay(0.0).warmup(false));
  auto [x, y] = batch_at(9);
  sgd.zero_grad();
  nn::mse_loss(model(x), y).backward();
  sgd.step();
  frozen.update();
  follows.update();
  CHECK(entries(frozen.averages()) == own);
  CHECK(entries(follows.averages()) == entries(model.state_dict()));
}

TEST_CASE("ema: state() round-trips, and bad states or decays are refused naming the entry") {
  Mlp model(5);
  train::ModelEma ema(model, train::EmaOptions().decay(0.8));
  ema.update();
  ema.update();
  Mlp other_model(6);
  train::ModelEma other(other_model);
  other.load_state(ema.state());
  CHECK(other.updates() == 2);
  CHECK(entries(other.averages()) == entries(ema.averages()));

  NamedTensors missing = ema.state();
  missing.erase(missing.begin());
  CHECK_THROWS_WITH_AS(other.load_state(missing), doctest::Contains("entry 'fc1.weight' is missing"), ValueError);
  NamedTensors extra = ema.state();
  extra.emplace_back("fc3.weight", zeros({2}));
  CHECK_THROWS_WITH_AS(other.load_state(extra), doctest::Contains("unexpected entry 'fc3.weight'"), ValueError);
  NamedTensors wrong_shape = ema.state();
  wrong_shape[0].second = zeros({3, 3});
  CHECK_THROWS_WITH_AS(other.load_state(wrong_shape), doctest::Contains("'fc1.weight' has shape (3,3)"), ShapeError);
  NamedTensors no_count = ema.state();
  no_count.pop_back();
  CHECK_THROWS_WITH_AS(other.load_state(no_count), doctest::Contains("num_updates"), ValueError);
  CHECK(other.updates() == 2);  // nothing changed by the refusals
  CHECK_THROWS_WITH_AS(train::ModelEma(model, train::EmaOptions().decay(1.5)),
                       "ModelEma: decay must be in [0, 1], got 1.5", ValueError);
}

TEST_CASE("ema: the Trainer updates it every step, evaluates on it, and a resumed run ends with the same average") {
  constexpr std::int64_t kSteps = kScheduleSteps, kStop = 4;
  TempDir dir_a, dir_b;
  std::vector<std::vector<std::vector<float>>> evaluated;
  auto recording_eval = [&](Mlp& model) {
    return [&evaluated, &model](std::int64_t) {
      evaluated.push_back(values(model));
      return std::map<std::string, double>{{"val_loss", 0.0}};
    };
  };

  Run a(7, quiet_options(dir_a.str(), kSteps));
  train::ModelEma ema_a(a.model, train::EmaOptions().decay(0.9));
  a.trainer.set_ema(&ema_a, /*evaluate_on_ema=*/true);
  a.trainer.fit(a.step_fn(), recording_eval(a.model));
  CHECK(ema_a.updates() == kSteps);
  // The last evaluation saw the averages, and the model has its own weights again.
  REQUIRE(!evaluated.empty());
  std::vector<std::vector<float>> averaged_parameters;
  {
    const train::ModelEma::Applied applied = ema_a.apply();
    averaged_parameters = values(a.model);
  }
  CHECK(evaluated.back() == averaged_parameters);
  CHECK(values(a.model) != averaged_parameters);

  {
    Run b(7, quiet_options(dir_b.str(), kStop));
    train::ModelEma ema_b(b.model, train::EmaOptions().decay(0.9));
    b.trainer.set_ema(&ema_b, true);
    b.trainer.fit(b.step_fn(), recording_eval(b.model));
  }
  CHECK(std::filesystem::exists(dir_b.path / "checkpoint" / "ema.safetensors"));
  // Other initial weights: the average must come from the checkpoint, not from this model.
  Run c(99, quiet_options(dir_b.str(), kSteps));
  train::ModelEma ema_c(c.model, train::EmaOptions().decay(0.9));
  c.trainer.set_ema(&ema_c, true);
  c.trainer.fit(c.step_fn(), recording_eval(c.model));
  CHECK(ema_c.updates() == kSteps);
  CHECK(entries(ema_c.averages()) == entries(ema_a.averages()));
  CHECK(c.params() == a.params());

  // A checkpoint written without an average cannot start one mid-run.
  TempDir dir_d;
  {
    Run d(7, quiet_options(dir_d.str(), kStop));
    d.trainer.fit(d.step_fn());
  }
  Run e(7, quiet_options(dir_d.str(), kSteps));
  train::ModelEma ema_e(e.model);
  e.trainer.set_ema(&ema_e);
  CHECK_THROWS_WITH_AS(e.trainer.fit(e.step_fn()),
                       doctest::Contains("field 'ema' is false but the trainer has a ModelEma"), IoError);
  // And a checkpoint with an average is not resumed without one (its next save would drop it).
  Run f(7, quiet_options(dir_b.str(), kSteps + 4));
  CHECK_THROWS_WITH_AS(f.trainer.fit(f.step_fn()),
                       doctest::Contains("field 'ema' is true but the trainer has no ModelEma"), IoError);
}
