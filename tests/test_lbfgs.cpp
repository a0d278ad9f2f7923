// optim::LBFGS and Optimizer::step(closure). LBFGS's path on the Rosenbrock function from (-1.5, 2) in
// float64, with and without the strong-Wolfe line search, against the numbers torch.optim.LBFGS printed
// (PyTorch 1.13: max_iter 5, history_size 3, lr 1): parameters, closure calls, iterations and the scalars
// of its state after each of four steps, and where 34 steps end. The path amplifies the rounding of the
// sums, which run in other orders than torch's: by the fourth step the parameters differ from torch's by
// 1e-11 relative in the -O3 build and 1.6e-10 in the -O1 sanitizer build, hence the tolerances of 1e-9
// (a wrong rule is off by 1e-3 or more). Also: least squares solved to the normal equations' answer,
// float32, a run resumed from saved state continuing bit-identically, and the errors.

#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/ops.h"
#include "tapegrad/nn/linear.h"
#include "tapegrad/nn/losses.h"
#include "tapegrad/optim/optim.h"
#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::check_values;

namespace {

Tensor rosenbrock(const Tensor& x) {
  const Tensor a = x.select(0, 0), b = x.select(0, 1);
  return pow(1.0 - a, 2.0) + 100.0 * pow(b - a * a, 2.0);
}

optim::Closure rosenbrock_closure(optim::Optimizer& opt, const Tensor& x) {
  return [&opt, x] {
    opt.zero_grad();
    Tensor loss = rosenbrock(x);
    loss.backward();
    return loss;
  };
}

double state_scalar(const optim::Optimizer& opt, const std::string& name) {
  for (const auto& [key, t] : opt.state_tensors())
    if (key == name) return t.item();
  FAIL("no state entry " << name);
  return 0.0;
}

struct Expected {
  double loss;
  std::vector<double> x;
  std::int64_t func_evals, iterations;
  double h_diag;
};

void check_rosenbrock_path(optim::LineSearch line_search, const std::vector<Expected>& expected,
                           const std::vector<double>& final_x, double final_tolerance, std::int64_t final_evals,
                           std::int64_t final_iterations) {
  Tensor x = from_vector(std::vector<double>{-1.5, 2.0}, Shape{2}).requires_grad_();
  optim::LBFGS opt({x}, optim::LBFGSOptions(1.0).max_iter(5).history_size(3).line_search(line_search));
  const optim::Closure closure = rosenbrock_closure(opt, x);
  for (std::size_t s = 0; s < expected.size(); ++s) {
    CAPTURE(s);
    const Tensor loss = opt.step(closure);
    CHECK(loss.item() == doctest::Approx(expected[s].loss).epsilon(1e-10));
    check_values(x, expected[s].x, 1e-9);
    CHECK(opt.func_evals() == expected[s].func_evals);
    CHECK(opt.iterations() == expected[s].iterations);
    CHECK(opt.history_length() == 3);
    CHECK(state_scalar(opt, "lbfgs.t") == 1.0);
    CHECK(state_scalar(opt, "lbfgs.h_diag") == doctest::Approx(expected[s].h_diag).epsilon(1e-10));
  }
  for (int s = 0; s < 30; ++s) opt.step(closure);
  check_values(x, final_x, final_tolerance);
  CHECK(opt.func_evals() == final_evals);
  CHECK(opt.iterations() == final_iterations);
  CHECK(opt.steps_taken() == 34);
}

// Least squares: a linear model (3 inputs) fitted to 20 noisy points.
struct LeastSquares {
  Tensor inputs, targets;
  std::vector<double> solution;  // weight (3) then bias, from the normal equations
};

LeastSquares least_squares_problem() {
  LeastSquares problem;
  std::vector<double> xs, ys;
  for (int i = 0; i < 20; ++i) {
    const double a = std::sin(1.3 * i), b = std::cos(0.7 * i + 0.2), c = 0.05 * i - 0.4;
    xs.insert(xs.end(), {a, b, c});
    ys.push_back(0.8 * a - 1.7 * b + 2.5 * c + 0.3 + 0.05 * std::sin(5.1 * i));
  }
  problem.inputs = from_vector(xs, Shape{20, 3});
  problem.targets = from_vector(ys, Shape{20, 1});
  // Normal equations A^T A w = A^T y with A = [x, 1], by Gaussian elimination in plain doubles.
  double m[4][5] = {};
  for (int i = 0; i < 20; ++i) {
    const double row[4] = {xs[3 * i], xs[3 * i + 1], xs[3 * i + 2], 1.0};
    for (int r = 0; r < 4; ++r) {
      for (int c = 0; c < 4; ++c) m[r][c] += row[r] * row[c];
      m[r][4] += row[r] * ys[i];
    }
  }
  for (int k = 0; k < 4; ++k)
    for (int r = k + 1; r < 4; ++r) {
      const double f = m[r][k] / m[k][k];
      for (int c = k; c < 5; ++c) m[r][c] -= f * m[k][c];
    }
  problem.solution.assign(4, 0.0);
  for (int r = 3; r >= 0; --r) {
    double v = m[r][4];
    for (int c = r + 1; c < 4; ++c) v -= m[r][c] * problem.solution[c];
    problem.solution[r] = v / m[r][r];
  }
  return problem;
}

}  // namespace

// Without a line search the seventh step jumps to (55, -40), where the two implementations' rounding (their
// sums run in different orders) differs by 1e-10 relative, 1e-4 by the fourteenth step; both then stop,
// after the same 100 closure calls, within 5e-6 of the minimum (1, 1) and of each other.
TEST_CASE("LBFGS: the Rosenbrock path of torch.optim.LBFGS without a line search") {
  check_rosenbrock_path(
      optim::LineSearch::None,
      {{12.5, {-1.4105720056597648, 2.0043987053713246}, 5, 5, 0.0004898084307892135},
       {5.832423263341982, {-1.356570655455078, 1.8105357312607553}, 10, 10, 0.0005937602670592191},
       {5.6419208657590145, {-0.8584941867722113, 0.7559490969514822}, 15, 15, 0.00140011435217311},
       {3.4898609886066048, {-0.7406567824645843, 0.5074887559346841}, 20, 20, 0.0017521881925064008}},
      {1.0000025619282447, 1.0000047789184794}, 5e-6, 100, 100);
}

TEST_CASE("LBFGS: the Rosenbrock path of torch.optim.LBFGS with the strong-Wolfe line search") {
  check_rosenbrock_path(
      optim::LineSearch::StrongWolfe,
      {{12.5, {-1.4190151739012853, 2.015228881713949}, 6, 4, 0.0005515836855096576},
       {5.851898414902332, {-1.1382996644053018, 1.2446282267668267}, 12, 9, 0.002852893888565928},
       {4.833424985249163, {-0.5680025987904874, 0.3233359078067535}, 18, 13, 0.1063327267255507},
       {2.4586824116143133, {-0.09026694462499765, 0.03233111088726748}, 24, 17, 0.026559809826469827}},
      {1.0000006898305547, 1.0000015458306801}, 5e-9, 81, 64);
}

TEST_CASE("LBFGS: least squares through a Linear module reaches the normal equations' solution") {
  const LeastSquares problem = least_squares_problem();
  for (const optim::LineSearch line_search : {optim::LineSearch::None, optim::LineSearch::StrongWolfe}) {
    CAPTURE(static_cast<int>(line_search));
    nn::Linear model(3, 1);
    model->to(kFloat64);
    optim::LBFGS opt(model->parameters(),
                     optim::LBFGSOptions(1.0).tolerance_grad(1e-13).tolerance_change(0.0).line_search(line_search));
    const optim::Closure closure = [&] {
      opt.zero_grad();
      Tensor loss = nn::mse_loss(model->forward(problem.inputs), problem.targets);
      loss.backward();
      return loss;
    };
    const double first = opt.step(closure).item();
    for (int s = 0; s < 4; ++s) opt.step(closure);
    std::vector<double> fitted = model->weight().detach().to_vector<double>();
    fitted.push_back(model->bias().item());
    for (std::size_t i = 0; i < 4; ++i) CHECK(fitted[i] == doctest::Approx(problem.solution[i]).epsilon(1e-9));
    CHECK(opt.step(closure).item() < first / 10.0);
  }
}

TEST_CASE("LBFGS: float32 parameters converge, and a parameter without a gradient stays put") {
  Tensor x = from_vector(std::vector<float>{-1.5f, 2.0f}, Shape{2}).requires_grad_();
  Tensor unused = from_vector(std::vector<float>{7.0f}, Shape{1}).requires_grad_();
  optim::LBFGS opt({x, unused}, optim::LBFGSOptions(1.0).line_search(optim::LineSearch::StrongWolfe));
  const optim::Closure closure = rosenbrock_closure(opt, x);
  for (int s = 0; s < 10; ++s) opt.step(closure);
  check_values(x, {1.0, 1.0}, 1e-3);
  CHECK(unused.item() == 7.0);
}

TEST_CASE("LBFGS: a run resumed from its saved state continues bit-identically") {
  for (const optim::LineSearch line_search : {optim::LineSearch::None, optim::LineSearch::StrongWolfe}) {
    CAPTURE(static_cast<int>(line_search));
    const auto options = optim::LBFGSOptions(1.0).max_iter(4).history_size(5).line_search(line_search);
    Tensor x = from_vector(std::vector<double>{-1.2, 1.0}, Shape{2}).requires_grad_();
    optim::LBFGS opt({x}, options);
    const optim::Closure closure = rosenbrock_closure(opt, x);
    for (int s = 0; s < 3; ++s) opt.step(closure);
    const NamedTensors saved = opt.state_tensors();
    const std::int64_t saved_history = opt.history_length();
    REQUIRE(saved_history > 0);
    const Tensor saved_x = x.detach().clone();
    for (int s = 0; s < 3; ++s) opt.step(closure);

    Tensor y = saved_x.clone().requires_grad_();
    optim::LBFGS resumed({y}, options);
    resumed.load_state(saved);
    CHECK(resumed.history_length() == saved_history);
    const optim::Closure resumed_closure = rosenbrock_closure(resumed, y);
    for (int s = 0; s < 3; ++s) resumed.step(resumed_closure);
    CHECK(y.to_vector<double>() == x.to_vector<double>());
    CHECK(resumed.func_evals() == opt.func_evals());
    CHECK(resumed.steps_taken() == 6);
  }
}

TEST_CASE("LBFGS: a first gradient within tolerance_grad ends the step at once") {
  Tensor x = from_vector(std::vector<double>{1.0, 1.0}, Shape{2}).requires_grad_();
  optim::LBFGS opt({x});
  const Tensor loss = opt.step(rosenbrock_closure(opt, x));
  CHECK(loss.item() == 0.0);
  CHECK(opt.func_evals() == 1);
  CHECK(opt.iterations() == 0);
  CHECK(opt.state_tensors().size() == 3);  // stepcount and the two counts: no iteration ran
  CHECK(x.to_vector<double>() == std::vector<double>{1.0, 1.0});
}

TEST_CASE("LBFGS: errors") {
  Tensor x = from_vector(std::vector<double>{-1.5, 2.0}, Shape{2}).requires_grad_();
  auto throws = [](auto&& make, const char* text) {
    CHECK_THROWS_WITH_AS(make(), doctest::Contains(text), ValueError);
  };
  throws([&] { optim::LBFGS({x}, optim::LBFGSOptions().max_iter(0)); }, "invalid max_iter 0");
  throws([&] { optim::LBFGS({x}, optim::LBFGSOptions().max_eval(0)); }, "invalid max_eval 0");
  throws([&] { optim::LBFGS({x}, optim::LBFGSOptions().history_size(0)); }, "invalid history_size 0");
  throws([&] { optim::LBFGS({x}, optim::LBFGSOptions().tolerance_grad(-1.0)); },
         "invalid tolerance_grad -1 (must be >= 0)");
  throws([&] { optim::LBFGS({x}, optim::LBFGSOptions().tolerance_change(-1.0)); },
         "invalid tolerance_change -1 (must be >= 0)");
  throws([&] { optim::LBFGS({x}, optim::LBFGSOptions(-1.0)); }, "invalid learning rate -1");
  throws(
      [&] {
        optim::LBFGS(std::vector<optim::ParamGroup>{{{x}}, {{x.detach().clone().requires_grad_()}}});
      },
      "2 parameter groups given");
  throws(
      [&] {
        optim::LBFGS({x, zeros(Shape{2}, kFloat32).requires_grad_()});
      },
      "parameter 1 is float32 but parameter 0 is float64");

  optim::LBFGS opt({x});
  throws([&] { opt.step(); }, "step() needs a closure");
  throws([&] { opt.step(optim::Closure()); }, "LBFGS: step(closure) was given an empty closure");
  throws([&] { opt.step([] { return zeros(Shape{2}, kFloat64); }); }, "it returned shape (2)");
  throws([&] { opt.step([] { return Tensor(); }); }, "an undefined tensor");
  opt.param_groups()[0].weight_decay = 0.1;
  throws([&] { opt.step(rosenbrock_closure(opt, x)); }, "LBFGS takes no weight_decay (the group has 0.1)");
  opt.param_groups()[0].weight_decay = 0.0;
  opt.add_param_group({{zeros(Shape{1}, kFloat64).requires_grad_()}});
  throws([&] { opt.step(rosenbrock_closure(opt, x)); }, "2 parameter groups; LBFGS takes one");
  CHECK(x.to_vector<double>() == std::vector<double>{-1.5, 2.0});

  optim::LBFGS fresh({x}, optim::LBFGSOptions().history_size(2));
  const optim::Closure closure = rosenbrock_closure(fresh, x);
  fresh.step(closure);
  NamedTensors state = fresh.state_tensors();
  auto with = [&](const std::string& name, const Tensor& value) {
    NamedTensors edited;
    for (const auto& [key, t] : state) edited.emplace_back(key, key == name ? value : t);
    return edited;
  };
  auto without = [&](const std::string& name) {
    NamedTensors edited;
    for (const auto& entry : state)
      if (entry.first != name) edited.push_back(entry);
    return edited;
  };
  const NamedTensors before = fresh.state_tensors();
  throws([&] { fresh.load_state(without("lbfgs.d")); }, "entry 'lbfgs.d': missing");
  throws([&] { fresh.load_state(with("lbfgs.d", zeros(Shape{3}, kFloat64))); },
         "expected a float64 vector of 2 elements, got (3) float64");
  throws(
      [&] {
        fresh.load_state(with("lbfgs.old_dirs", zeros(Shape{1, 2}, kFloat64)));
      },
      "entry 'lbfgs.old_dirs': expected (2, 2) float64");
  throws([&] { fresh.load_state(with("lbfgs.ro", zeros(Shape{3}, kFloat64))); }, "3 pairs, more than history_size 2");
  throws([&] { fresh.load_state(with("lbfgs.n_iter", from_vector(std::vector<double>{-1.0}, Shape{1}))); },
         "invalid count -1");
  throws([&] { fresh.load_state(with("lbfgs.func_evals", from_vector(std::vector<double>{HUGE_VAL}, Shape{1}))); },
         "invalid count inf");
  NamedTensors extra = state;
  extra.emplace_back("group0.param0.exp_avg", zeros(Shape{2}, kFloat64));
  throws([&] { fresh.load_state(extra); }, "entry 'group0.param0.exp_avg': unexpected name");
  const NamedTensors after = fresh.state_tensors();
  REQUIRE(after.size() == before.size());
  for (std::size_t i = 0; i < after.size(); ++i)
    CHECK(after[i].second.to_vector<double>() == before[i].second.to_vector<double>());
}

TEST_CASE("Optimizer::step(closure): the closure runs with gradients on, then one step, and its loss is returned") {
  Tensor w = from_vector(std::vector<double>{1.0, -2.0}, Shape{2}).requires_grad_();
  optim::SGD opt({w}, optim::SGDOptions(0.1));
  NoGradGuard no_grad;  // as a caller inside a no-grad region
  const Tensor loss = opt.step([&] {
    opt.zero_grad();
    Tensor l = sum(w * w);
    l.backward();
    return l;
  });
  CHECK(loss.item() == 5.0);
  check_values(w, {0.8, -1.6}, 1e-15);
  CHECK(opt.steps_taken() == 1);
}

TEST_CASE("LBFGS: an empty history and a state before any iteration save and load") {
  // max_iter 1: one iteration per step, and the first adds no pair, so the saved history is empty.
  const auto options = optim::LBFGSOptions(0.5).max_iter(1);
  Tensor x = from_vector(std::vector<double>{-1.2, 1.0}, Shape{2}).requires_grad_();
  optim::LBFGS opt({x}, options);
  opt.step(rosenbrock_closure(opt, x));
  REQUIRE(opt.history_length() == 0);
  const NamedTensors saved = opt.state_tensors();
  Tensor y = x.detach().clone().requires_grad_();
  optim::LBFGS resumed({y}, options);
  resumed.load_state(saved);
  for (int s = 0; s < 4; ++s) {
    opt.step(rosenbrock_closure(opt, x));
    resumed.step(rosenbrock_closure(resumed, y));
  }
  CHECK(opt.history_length() > 0);
  CHECK(y.to_vector<double>() == x.to_vector<double>());

  // A state saved before any iteration (the first gradient was already small enough) loads into an
  // optimiser that ran, and clears its history.
  Tensor at_minimum = from_vector(std::vector<double>{1.0, 1.0}, Shape{2}).requires_grad_();
  optim::LBFGS done({at_minimum});
  done.step(rosenbrock_closure(done, at_minimum));
  resumed.load_state(done.state_tensors());
  CHECK(resumed.iterations() == 0);
  CHECK(resumed.history_length() == 0);
  CHECK(resumed.state_tensors().size() == 3);
}

TEST_CASE("LBFGS: a closure that throws in the line search leaves the parameters where the search started") {
  Tensor x = from_vector(std::vector<double>{-1.5, 2.0}, Shape{2}).requires_grad_();
  optim::LBFGS opt({x}, optim::LBFGSOptions().line_search(optim::LineSearch::StrongWolfe));
  int calls = 0;
  const optim::Closure failing = [&] {
    if (++calls == 2) throw IoError("the data went away");
    opt.zero_grad();
    Tensor loss = rosenbrock(x);
    loss.backward();
    return loss;
  };
  CHECK_THROWS_AS(opt.step(failing), IoError);
  CHECK(calls == 2);
  CHECK(x.to_vector<double>() == std::vector<double>{-1.5, 2.0});
}

TEST_CASE("Optimizer::step(closure) refuses an empty closure") {
  Tensor w = from_vector(std::vector<double>{1.0}, Shape{1}).requires_grad_();
  optim::SGD opt({w}, optim::SGDOptions(0.1));
  CHECK_THROWS_WITH_AS(opt.step(optim::Closure()), "SGD: step(closure) was given an empty closure", ValueError);
}
