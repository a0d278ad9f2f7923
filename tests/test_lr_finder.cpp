// train::lr_range_test: the exponential sweep, divergence stop, suggestion, restoration of model and
// optimiser, the SVG, and refused options.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tapegrad/autograd/autograd.h"
#include "tapegrad/nn/nn.h"
#include "tapegrad/optim/optim.h"
#include "tapegrad/train/lr_finder.h"
#include "tests/testing.h"

using namespace tapegrad;

namespace {

// y = 3 x - 1 on 64 points, a Linear(1, 1) to fit it.
struct Problem {
  Generator gen{5};
  Tensor x = uniform({64, 1}, -2.0, 2.0, gen);
  Tensor y = x * 3.0 - 1.0;
  nn::Linear model{nn::LinearOptions(1, 1).generator(&gen)};
  Tensor loss() { return nn::mse_loss(model(x), y); }
};

std::vector<float> values(const nn::Module& m) {
  std::vector<float> out;
  for (const auto& [name, t] : m.state_dict())
    for (const float v : t.to_vector<float>()) out.push_back(v);
  return out;
}

}  // namespace

TEST_CASE("lr range test: the rate grows geometrically, the loss falls then diverges, the suggestion learns") {
  Problem p;
  optim::SGD sgd(p.model->parameters(), optim::SGDOptions(0.01));
  const std::vector<float> before = values(*p.model);
  const auto options = train::LrRangeTestOptions().start_lr(1e-4).end_lr(100.0).steps(80);
  const train::LrRangeTest test = train::lr_range_test(
      *p.model, sgd, [&](std::int64_t) { return p.loss(); }, options);
  REQUIRE(test.lrs.size() >= 3);
  CHECK(test.lrs.size() == test.losses.size());
  CHECK(test.lrs.size() == test.smoothed.size());
  CHECK(test.lrs.front() == doctest::Approx(1e-4));
  const double factor = std::pow(1e6, 1.0 / 79.0);
  for (std::size_t i = 1; i < test.lrs.size(); ++i) CHECK(test.lrs[i] / test.lrs[i - 1] == doctest::Approx(factor));
  // Gradient descent on this quadratic diverges once lr passes 2 / (largest curvature), far below 100.
  CHECK(test.diverged);
  CHECK(test.lrs.size() < 80);
  CHECK(test.smoothed.back() > 4.0 * *std::min_element(test.smoothed.begin(), test.smoothed.end()));
  CHECK(test.suggested_lr >= 1e-4);
  CHECK(test.suggested_lr <= test.min_loss_lr);
  // Model and optimiser are as they were.
  CHECK(values(*p.model) == before);
  CHECK(sgd.param_groups()[0].lr.value() == 0.01);
  // Training at the suggested rate learns: 50 steps take the loss below a tenth of where it started.
  const double initial = p.loss().item();
  sgd.set_lr(0, test.suggested_lr);
  for (int step = 0; step < 50; ++step) {
    sgd.zero_grad();
    p.loss().backward();
    sgd.step();
  }
  CHECK(p.loss().item() < 0.1 * initial);
}

TEST_CASE("lr range test: Adam's moments and step counts are put back, or kept with restore(false)") {
  Problem p;
  optim::Adam adam(p.model->parameters(), optim::AdamOptions(1e-3));
  for (int step = 0; step < 3; ++step) {
    adam.zero_grad();
    p.loss().backward();
    adam.step();
  }
  const NamedTensors state = adam.state_tensors();
  const std::vector<float> before = values(*p.model);
  train::lr_range_test(
      *p.model, adam, [&](std::int64_t) { return p.loss(); },
      train::LrRangeTestOptions().start_lr(1e-5).end_lr(1.0).steps(20));
  CHECK(values(*p.model) == before);
  CHECK(adam.steps_taken() == 3);
  const NamedTensors after = adam.state_tensors();
  REQUIRE(after.size() == state.size());
  for (std::size_t i = 0; i < state.size(); ++i) {
    CAPTURE(state[i].first);
    CHECK(after[i].first == state[i].first);
    CHECK(after[i].second.to(kFloat64).to_vector<double>() == state[i].second.to(kFloat64).to_vector<double>());
  }
  train::lr_range_test(
      *p.model, adam, [&](std::int64_t) { return p.loss(); },
      train::LrRangeTestOptions().start_lr(1e-5).end_lr(1.0).steps(20).restore(false));
  CHECK(values(*p.model) != before);
  CHECK(adam.steps_taken() > 3);
}

TEST_CASE("lr range test: an exception from the loss function propagates with the model put back") {
  Problem p;
  optim::SGD sgd(p.model->parameters(), optim::SGDOptions(0.01));
  const std::vector<float> before = values(*p.model);
  CHECK_THROWS_WITH_AS(train::lr_range_test(*p.model, sgd,
                                            [&](std::int64_t step) {
                                              if (step == 5) throw IoError("batch 5 unreadable");
                                              return p.loss();
                                            }),
                       "batch 5 unreadable", IoError);
  CHECK(values(*p.model) == before);
  CHECK(sgd.param_groups()[0].lr.value() == 0.01);
}

TEST_CASE("lr range test: the SVG has both curves on a log axis and the suggestion") {
  Problem p;
  optim::SGD sgd(p.model->parameters(), optim::SGDOptions(0.01));
  const train::LrRangeTest test = train::lr_range_test(
      *p.model, sgd, [&](std::int64_t) { return p.loss(); }, train::LrRangeTestOptions().start_lr(1e-4).end_lr(100.0));
  const std::string svg = test.svg();
  CHECK(svg.rfind("<?xml", 0) == 0);
  CHECK(svg.find("learning rate (log scale)") != std::string::npos);
  CHECK(svg.find("suggested lr") != std::string::npos);
  std::size_t lines = 0;
  for (std::size_t at = svg.find("<polyline"); at != std::string::npos; at = svg.find("<polyline", at + 1)) ++lines;
  CHECK(lines == 3);  // loss, smoothed, the suggestion
  testing::TempDir dir;
  test.save_svg(dir.file("lr.svg"));
  std::ifstream in(dir.file("lr.svg"));
  std::stringstream read;
  read << in.rdbuf();
  CHECK(read.str() == svg);
}

TEST_CASE("lr range test: options that cannot sweep are refused") {
  Problem p;
  optim::SGD sgd(p.model->parameters(), optim::SGDOptions(0.01));
  const auto loss = [&](std::int64_t) { return p.loss(); };
  CHECK_THROWS_WITH_AS(train::lr_range_test(*p.model, sgd, loss, train::LrRangeTestOptions().start_lr(0.0)),
                       "lr_range_test: need 0 < start_lr < end_lr, got start_lr 0 and end_lr 10", ValueError);
  CHECK_THROWS_AS(train::lr_range_test(*p.model, sgd, loss, train::LrRangeTestOptions().start_lr(1.0).end_lr(0.5)),
                  ValueError);
  CHECK_THROWS_WITH_AS(train::lr_range_test(*p.model, sgd, loss, train::LrRangeTestOptions().steps(1)),
                       "lr_range_test: steps must be at least 2, got 1", ValueError);
  CHECK_THROWS_AS(train::lr_range_test(*p.model, sgd, loss, train::LrRangeTestOptions().smoothing(1.0)), ValueError);
  CHECK_THROWS_AS(train::lr_range_test(*p.model, sgd, loss, train::LrRangeTestOptions().divergence(1.0)), ValueError);
  CHECK_THROWS_AS(train::lr_range_test(*p.model, sgd, nullptr), ValueError);
}
