// optim: SGD / Adam / AdamW / Adagrad / RMSprop update rules, parameter groups, clipping, schedules, state save and
// load. Over 400 lines: every optimiser variant's trajectory against torch.optim's numbers lives here.
//
// Reference trajectories: x0 = (1, -2) float64, fixed gradient function g(x) = 2x + 0.5, three steps. The
// expected numbers were worked from the torch.optim documented update rules in plain Python double arithmetic
// (independent of this code) and agree to 12 digits with torch.optim in PyTorch 1.13; the first steps are also easy to
// check by hand, e.g. plain SGD lr 0.1: g = (2.5, -3.5) -> x = (0.75, -1.65).

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <tuple>
#include <type_traits>
#include <vector>

#include "tapegrad/autograd/error.h"
#include "tapegrad/optim/optim.h"
#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::check_values;

namespace {

Tensor make_param(const std::vector<double>& values = {1.0, -2.0}) {
  const auto n = static_cast<std::int64_t>(values.size());
  return from_vector(values, Shape{n}).requires_grad_();
}

// Writes g(x) = 2x + 0.5 into p's grad.
void set_linear_grad(const Tensor& p) {
  std::vector<double> x = p.detach().to_vector<double>();
  for (double& v : x) v = 2.0 * v + 0.5;
  p.set_grad(from_vector(x, p.shape()));
}

void check_trajectory(optim::Optimizer& opt, const Tensor& p, const std::vector<std::vector<double>>& expected) {
  for (std::size_t t = 0; t < expected.size(); ++t) {
    CAPTURE(t);
    set_linear_grad(p);
    opt.step();
    check_values(p, expected[t], 1e-9);
  }
}

}  // namespace

TEST_CASE("optim: SGD plain, momentum with dampening and weight decay, nesterov") {
  {
    Tensor p = make_param();
    optim::SGD opt({p}, optim::SGDOptions(0.1));
    check_trajectory(opt, p, {{0.75, -1.65}, {0.55, -1.37}, {0.39, -1.146}});
  }
  {
    // First step: buf = g + 0.1 x = 2.6 (no dampening on the first step) -> 1 - 0.26 = 0.74.
    Tensor p = make_param();
    optim::SGD opt({p}, optim::SGDOptions(0.1).momentum(0.9).dampening(0.1).weight_decay(0.1));
    check_trajectory(opt, p, {{0.74, -1.63}, {0.32114, -1.03393}, {-0.16152946, -0.34705423}});
  }
  {
    Tensor p = make_param();
    optim::SGD opt({p}, optim::SGDOptions(0.1).momentum(0.9).weight_decay(0.01).nesterov(true));
    check_trajectory(opt, p, {{0.5231, -1.3312}, {0.02501811, -0.63269472}, {-0.388181217209, -0.053227934432}});
  }
}

TEST_CASE("optim: Adam bias correction, L2 weight decay, amsgrad") {
  {
    Tensor p = make_param();
    optim::Adam opt({p}, optim::AdamOptions(0.1));
    check_trajectory(
        opt, p, {{0.9000000004, -1.90000000029}, {0.800303727169, -1.80019648981}, {0.701155449724, -1.70073840025}});
  }
  {
    Tensor p = make_param();
    optim::Adam opt({p}, optim::AdamOptions(0.1).weight_decay(0.1));
    check_trajectory(
        opt, p, {{0.900000000385, -1.90000000027}, {0.800307641834, -1.80019482613}, {0.701170843664, -1.70073200334}});
  }
  {
    // beta2 = 0.5 makes v shrink quickly, so the running max differs from v from step 2 on (plain Adam gives
    // x[0] = -0.0213196108077 at step 2).
    Tensor p = make_param();
    optim::Adam opt({p}, optim::AdamOptions(0.5).betas({0.9, 0.5}).amsgrad(true));
    check_trajectory(
        opt, p, {{0.500000002, -1.50000000143}, {0.016548080935, -0.982348026347}, {-0.364996217915, -0.527916682426}});
    Tensor q = make_param();
    optim::Adam plain({q}, optim::AdamOptions(0.5).betas({0.9, 0.5}));
    check_trajectory(
        plain, q,
        {{0.500000002, -1.50000000143}, {-0.0213196108077, -0.982348026347}, {-0.570905969629, -0.428558798907}});
  }
}

TEST_CASE("optim: Adagrad follows torch.optim.Adagrad, dense and row-sparse") {
  // Numbers printed by torch.optim.Adagrad (PyTorch 1.13, float64) on the same problems.
  {
    Tensor p = make_param();
    optim::Adagrad opt({p}, optim::AdagradOptions(0.1));
    check_trajectory(opt, p,
                     {{0.900000000004, -1.9000000000028572},
                      {0.8322943469237772, -1.8313987131353202},
                      {0.7785568927337935, -1.7764606196220267}});
  }
  {
    Tensor p = make_param();
    optim::Adagrad opt(
        {p}, optim::AdagradOptions(0.5).lr_decay(0.25).weight_decay(0.1).initial_accumulator_value(0.3).eps(1e-3));
    check_trajectory(opt, p,
                     {{0.5109226125311817, -1.505522226454193},
                      {0.30722298371633866, -1.2736583155016188},
                      {0.19134776898998906, -1.1309822443940465}});
  }
  {
    // A (6, 3) table looked up with repeated rows, loss sum(e^2 + e): each step's row-sparse
    // gradient is coalesced, so a repeated row's sum grows by its whole gradient squared once.
    std::vector<double> w0;
    for (int i = 0; i < 18; ++i) w0.push_back(std::round((0.1 * i - 0.7) * 100.0) / 100.0);
    Tensor table = from_vector(w0, Shape{6, 3}).requires_grad_();
    optim::Adagrad opt({table}, optim::AdagradOptions(0.2).initial_accumulator_value(0.1).lr_decay(0.1));
    for (const std::vector<std::int64_t>& ids : {std::vector<std::int64_t>{1, 4, 1}, {0, 4}, {5, 1, 1, 2}}) {
      opt.zero_grad(true);
      const Tensor e = embedding(table, from_vector(ids, Shape{static_cast<std::int64_t>(ids.size())}), std::nullopt,
                                 /*sparse=*/true);
      sum(e * e + e).backward();
      REQUIRE(table.has_sparse_grad());
      opt.step();
    }
    check_values(
        table,
        {-0.5573700835638381, -0.5028140938760015, -0.5, -0.4889668228695326, -0.4968259939892682, -0.44755786894000443,
         -0.2549968516404077, -0.15891043152578055, -0.06116459279208907, 0.2, 0.3, 0.4, 0.1895165968637117,
         0.28745039938384226, 0.38579058546182404, 0.6345525645367208, 0.734386197108753, 0.8342516139725455},
        1e-12);
    const NamedTensors state = opt.state_tensors();
    const auto sum_entry =
        std::find_if(state.begin(), state.end(), [](const auto& entry) { return entry.first == "group0.param0.sum"; });
    REQUIRE(sum_entry != state.end());
    check_values(sum_entry->second,
                 {0.26, 0.14, 0.1, 0.31178884783638494, 0.7431376927864931, 1.7218254493802456, 0.74, 1.1, 1.54, 0.1,
                  0.1, 0.1, 6.675730206398896, 8.194665973649352, 9.873722370124268, 6.86, 7.94, 9.1},
                 1e-12);
  }
}

TEST_CASE("optim: RMSprop follows torch.optim.RMSprop, plain, centred, with momentum and weight decay") {
  // Numbers printed by torch.optim.RMSprop (PyTorch 1.13, float64) on the same problem, and its state after the
  // third step.
  auto buffer = [](const optim::Optimizer& opt, const std::string& name) {
    for (const auto& [key, t] : opt.state_tensors())
      if (key == "group0.param0." + name) return t;
    FAIL("no state entry group0.param0." << name);
    return Tensor();
  };
  {
    Tensor p = make_param();
    optim::RMSprop opt({p}, optim::RMSpropOptions(0.1));
    check_trajectory(opt, p,
                     {{3.999999886872274e-08, -1.0000000285714281},
                      {-0.19706583817191745, -0.6044061402279463},
                      {-0.238965280961491, -0.4197603747847959}});
    check_values(buffer(opt, "square_avg"), {0.06384333181153776, 0.14736140018639382}, 1e-12);
  }
  {
    Tensor p = make_param();
    optim::RMSprop opt({p}, optim::RMSpropOptions(0.05).alpha(0.9).eps(1e-3).weight_decay(0.1));
    check_trajectory(opt, p,
                     {{0.8420781910717453, -1.8420211367294457},
                      {0.7351497086839652, -1.732618368941792},
                      {0.6497162914349339, -1.6437556804296678}});
  }
  {
    Tensor p = make_param();
    optim::RMSprop opt({p}, optim::RMSpropOptions(0.05).alpha(0.9).momentum(0.8));
    check_trajectory(opt, p,
                     {{0.8418861189915811, -1.8418861184201525},
                      {0.6082951587958054, -1.605964172286265},
                      {0.34403616391148734, -1.3337725062390349}});
    check_values(buffer(opt, "momentum_buffer"), {5.285179897686361, -5.443833320944603}, 1e-12);
  }
  {
    Tensor p = make_param();
    optim::RMSprop opt({p}, optim::RMSpropOptions(0.05).alpha(0.9).centered(true));
    check_trajectory(opt, p,
                     {{0.8333333355555554, -1.8333333349206349},
                      {0.7149114955277149, -1.7121207150799624},
                      {0.6160437908054099, -1.6089567512096081}});
    check_values(buffer(opt, "grad_avg"), {0.5904822995055429, -0.8609241433017066}, 1e-12);
  }
  {
    Tensor p = make_param();
    optim::RMSprop opt(
        {p}, optim::RMSpropOptions(0.02).alpha(0.95).eps(1e-6).weight_decay(0.05).momentum(0.5).centered(true));
    check_trajectory(opt, p,
                     {{0.9082338715701573, -1.9082338234106906},
                      {0.7974997432352119, -1.796718300915249},
                      {0.6901526212588083, -1.6873537390672049}});
    check_values(buffer(opt, "square_avg"), {0.7862873009040886, 1.6444249251432546}, 1e-12);
    check_values(buffer(opt, "grad_avg"), {0.3340017469257536, -0.48367789439842945}, 1e-12);
    check_values(buffer(opt, "momentum_buffer"), {5.367356098820183, -5.468228092402201}, 1e-12);
    CHECK(opt.state_buffer_names() == std::vector<std::string>{"grad_avg", "momentum_buffer", "square_avg"});
  }
}

TEST_CASE("optim: RMSprop's vector loop equals its scalar tail, its state resumes, and what it refuses") {
  // 37 float32 elements: whole batches and a tail, against the formula computed per element in float.
  std::vector<float> p0, g0;
  for (int i = 0; i < 37; ++i) {
    p0.push_back(0.25f * static_cast<float>(i % 7) - 0.8f);
    g0.push_back(0.1f * static_cast<float>(i % 5) - 0.2f);
  }
  const auto options = optim::RMSpropOptions(0.03).alpha(0.9).eps(1e-4).weight_decay(0.05).momentum(0.7).centered(true);
  Tensor p = from_vector(p0, Shape{37}).requires_grad_();
  optim::RMSprop opt({p}, options);
  p.set_grad(from_vector(g0, Shape{37}));
  opt.step();
  const std::vector<float> got = p.detach().to_vector<float>();
  for (int i = 0; i < 37; ++i) {
    const float d = g0[i] + 0.05f * p0[i];
    const float sq = 0.1f * d * d, ga = 0.1f * d;
    const float avg = std::sqrt(sq - ga * ga) + 1e-4f;
    const float want = p0[i] - 0.03f * (d / avg);  // the momentum buffer starts at zero
    CAPTURE(i);
    CHECK(got[i] == doctest::Approx(want).epsilon(1e-5));
  }

  // Saved after one step and loaded into a fresh optimiser, the next steps are bit-identical.
  Tensor q = p.detach().clone().requires_grad_();
  optim::RMSprop fresh({q}, options);
  fresh.load_state(opt.state_tensors());
  for (int t = 0; t < 2; ++t) {
    p.set_grad(from_vector(g0, Shape{37}));
    q.set_grad(from_vector(g0, Shape{37}));
    opt.step();
    fresh.step();
  }
  CHECK(q.detach().to_vector<float>() == p.detach().to_vector<float>());
  optim::RMSprop plain({q}, optim::RMSpropOptions(0.03));
  CHECK_THROWS_WITH_AS(plain.load_state(opt.state_tensors()),
                       "RMSprop: load_state entry 'group0.param0.*': holds the buffers {grad_avg, momentum_buffer, "
                       "square_avg} but RMSprop keeps {square_avg} (state saved by another optimiser or with other "
                       "options)",
                       ValueError);

  CHECK_THROWS_WITH_AS(optim::RMSprop({p}, optim::RMSpropOptions(0.1).alpha(1.5)),
                       "RMSprop: invalid alpha 1.5 (must be in [0, 1])", ValueError);
  CHECK_THROWS_WITH_AS(optim::RMSprop({p}, optim::RMSpropOptions(0.1).alpha(std::nan(""))),
                       "RMSprop: invalid alpha nan (must be in [0, 1])", ValueError);
  CHECK_THROWS_WITH_AS(optim::RMSprop({p}, optim::RMSpropOptions(0.1).eps(-1e-3)),
                       "RMSprop: invalid eps -0.001 (must be >= 0)", ValueError);
  CHECK_THROWS_WITH_AS(optim::RMSprop({p}, optim::RMSpropOptions(0.1).momentum(-0.5)),
                       "RMSprop: invalid momentum -0.5 (must be >= 0)", ValueError);
  // Sparse gradients are refused, as in torch, before anything changes.
  Generator gen(4);
  Tensor table = randn({4, 2}, gen).requires_grad_();
  sum(embedding(table, from_vector(std::vector<std::int64_t>{1}, Shape{1}), std::nullopt, /*sparse=*/true)).backward();
  optim::RMSprop sparse({table});
  const std::vector<float> before = table.detach().to_vector<float>();
  CHECK_THROWS_WITH_AS(sparse.step(), doctest::Contains("RMSprop takes dense gradients only"), ValueError);
  CHECK(table.detach().to_vector<float>() == before);
}

TEST_CASE("optim: Adagrad's vector loop equals its scalar tail, and what it refuses") {
  // 37 float32 elements: two 16-lane bodies and a 5-element tail, against the formula in double
  // rounded per operation to float as the kernel computes it.
  std::vector<float> p0, g0;
  for (int i = 0; i < 37; ++i) {
    p0.push_back(0.25f * static_cast<float>(i % 7) - 0.8f);
    g0.push_back(0.1f * static_cast<float>(i % 5) - 0.2f);
  }
  Tensor p = from_vector(p0, Shape{37}).requires_grad_();
  optim::Adagrad opt({p}, optim::AdagradOptions(0.3).weight_decay(0.05).initial_accumulator_value(0.5));
  p.set_grad(from_vector(g0, Shape{37}));
  opt.step();
  const std::vector<float> got = p.detach().to_vector<float>();
  for (int i = 0; i < 37; ++i) {
    const float d = g0[i] + 0.05f * p0[i];
    const float s = 0.5f + d * d;
    const float want = p0[i] + -0.3f * (d / (std::sqrt(s) + 1e-10f));
    CHECK(got[i] == doctest::Approx(want).epsilon(1e-6));
  }
  CHECK_THROWS_WITH_AS(optim::Adagrad({p}, optim::AdagradOptions(0.1).lr_decay(-1.0)),
                       "Adagrad: invalid lr_decay -1 (must be >= 0)", ValueError);
  CHECK_THROWS_WITH_AS(optim::Adagrad({p}, optim::AdagradOptions(0.1).eps(-1e-3)),
                       "Adagrad: invalid eps -0.001 (must be >= 0)", ValueError);
  // A sparse gradient with weight decay is refused before anything changes.
  Generator gen(4);
  Tensor table = randn({4, 2}, gen).requires_grad_();
  sum(embedding(table, from_vector(std::vector<std::int64_t>{1}, Shape{1}), std::nullopt, /*sparse=*/true)).backward();
  optim::Adagrad decayed({table}, optim::AdagradOptions(0.1).weight_decay(0.1));
  const std::vector<float> before = table.detach().to_vector<float>();
  CHECK_THROWS_WITH_AS(decayed.step(),
                       "Adagrad: group 0 parameter 0 (shape (4,2)) has a row-sparse gradient, but weight decay "
                       "changes every row (weight_decay 0.1); sparse gradients need weight_decay 0",
                       ValueError);
  CHECK(table.detach().to_vector<float>() == before);
}

TEST_CASE("optim: AdamW decoupled weight decay differs from Adam's L2") {
  Tensor p = make_param();
  optim::AdamW opt({p}, optim::AdamWOptions(0.1).weight_decay(0.1));
  // Step 1: p *= 1 - 0.01 -> 0.99, then the Adam step of -0.1 -> 0.89.
  check_trajectory(
      opt, p, {{0.8900000004, -1.88000000029}, {0.781445439952, -1.76144793467}, {0.674598982966, -1.64451845468}});
}

// AdamW is built from AdamWOptions only: AdamOptions (decay 0 by default) would silently switch its decay off.
static_assert(!std::is_constructible_v<optim::AdamW, TensorList, optim::AdamOptions>);
static_assert(!std::is_constructible_v<optim::AdamW, std::vector<optim::ParamGroup>, optim::AdamOptions>);
static_assert(!std::is_constructible_v<optim::Adam, TensorList, optim::AdamWOptions>);

TEST_CASE("optim: options default to torch.optim's (AdamW decays by 1e-2 unless told otherwise)") {
  const optim::SGDOptions sgd(0.1);
  CHECK(sgd.lr() == 0.1);
  CHECK(sgd.momentum() == 0.0);
  CHECK(sgd.dampening() == 0.0);
  CHECK(sgd.weight_decay() == 0.0);
  CHECK_FALSE(sgd.nesterov());
  const optim::AdamOptions adam;
  CHECK(adam.lr() == 1e-3);
  CHECK(adam.betas() == optim::AdamBetas{0.9, 0.999});
  CHECK(adam.eps() == 1e-8);
  CHECK(adam.weight_decay() == 0.0);
  CHECK_FALSE(adam.amsgrad());
  const optim::AdamWOptions adamw;
  CHECK(adamw.lr() == 1e-3);
  CHECK(adamw.betas() == optim::AdamBetas{0.9, 0.999});
  CHECK(adamw.eps() == 1e-8);
  CHECK(adamw.weight_decay() == 1e-2);
  CHECK_FALSE(adamw.amsgrad());
  // The setters chain and return the options.
  const auto chained = optim::AdamWOptions(3e-4).betas({0.8, 0.95}).weight_decay(0.1).amsgrad(true);
  CHECK(chained.lr() == 3e-4);
  CHECK(std::get<1>(chained.betas()) == 0.95);
  CHECK(chained.weight_decay() == 0.1);

  // torch.optim.AdamW([p], lr=0.1) in PyTorch 1.13 (weight decay 0.01): step 1 is p * (1 - 0.001) - 0.1.
  Tensor p = make_param();
  optim::AdamW opt({p}, optim::AdamWOptions(0.1));
  CHECK(opt.param_groups()[0].weight_decay == 1e-2);
  check_trajectory(opt, p,
                   {{0.8990000004, -1.8980000002857143},
                    {0.7984087988757718, -1.7963034424122664},
                    {0.6984734747642304, -1.6950628088650959}});
}

TEST_CASE("optim: a group's unset lr and weight decay take the optimiser's defaults, as in torch.optim") {
  // torch.optim.SGD([{'params': [a]}, {'params': [b], 'lr': 0.01}, {'params': [c], 'weight_decay': 0.0}],
  //                 lr=0.1, momentum=0.9, weight_decay=0.1), PyTorch 1.13.
  {
    Tensor a = make_param(), b = make_param(), c = make_param();
    optim::SGD opt(std::vector<optim::ParamGroup>{{{a}}, {{b}, 0.01}, {{c}, std::nullopt, 0.0}},
                   optim::SGDOptions(0.1).momentum(0.9).weight_decay(0.1));
    CHECK(opt.param_groups()[0].lr == 0.1);
    CHECK(opt.param_groups()[0].weight_decay == 0.1);
    CHECK(opt.param_groups()[1].lr == 0.01);
    CHECK(opt.param_groups()[1].weight_decay == 0.1);
    CHECK(opt.param_groups()[2].lr == 0.1);
    CHECK(opt.param_groups()[2].weight_decay == 0.0);
    const std::vector<std::vector<std::vector<double>>> expected{
        {{0.74, -1.63}, {0.974, -1.963}, {0.75, -1.65}},
        {{0.3006, -1.0047}, {0.925146, -1.893477}, {0.325, -1.055}},
        {{-0.207986, -0.280943}, {0.856749334, -1.796143283}, {-0.1725, -0.3585}}};
    for (std::size_t t = 0; t < expected.size(); ++t) {
      CAPTURE(t);
      for (const Tensor& p : {a, b, c}) set_linear_grad(p);
      opt.step();
      check_values(a, expected[t][0], 1e-12);
      check_values(b, expected[t][1], 1e-12);
      check_values(c, expected[t][2], 1e-12);
    }
  }
  // torch.optim.AdamW([{'params': [a]}, {'params': [b], 'weight_decay': 0.0}, {'params': [c], 'lr': 0.01}],
  // lr=0.1): a and c decay by AdamW's default 0.01, b not at all (b follows plain Adam).
  {
    Tensor a = make_param(), b = make_param(), c = make_param();
    optim::AdamW opt(std::vector<optim::ParamGroup>{{{a}}, {{b}, std::nullopt, 0.0}, {{c}, 0.01}},
                     optim::AdamWOptions(0.1));
    const std::vector<std::vector<std::vector<double>>> expected{{{0.8990000004, -1.8980000002857143},
                                                                  {0.9000000004, -1.9000000002857143},
                                                                  {0.98990000004, -1.9898000000285714}},
                                                                 {{0.7984087988757718, -1.7963034424122664},
                                                                  {0.8003037271694131, -1.800196489808013},
                                                                  {0.9798032069866079, -1.979602586463034}},
                                                                 {{0.6984734747642304, -1.6950628088650959},
                                                                  {0.7011554497242888, -1.7007384002451225},
                                                                  {0.9697111035561774, -1.9694088115228736}}};
    for (std::size_t t = 0; t < expected.size(); ++t) {
      CAPTURE(t);
      for (const Tensor& p : {a, b, c}) set_linear_grad(p);
      opt.step();
      check_values(a, expected[t][0], 1e-9);
      check_values(b, expected[t][1], 1e-9);
      check_values(c, expected[t][2], 1e-9);
    }
  }
  Tensor p = make_param();
  CHECK_THROWS_WITH_AS(optim::SGD(std::vector<optim::ParamGroup>{{{p}, -1.0}}, optim::SGDOptions(0.1)),
                       "SGD: group 0 invalid learning rate -1", ValueError);
  optim::SGD opt(std::vector<optim::ParamGroup>{{{p}}}, optim::SGDOptions(0.1));
  opt.param_groups()[0].lr.reset();
  set_linear_grad(p);
  CHECK_THROWS_WITH_AS(opt.step(), "SGD: group 0 has no lr or weight_decay set", ValueError);
}

TEST_CASE("optim: float32 parameters follow the same rule") {
  Tensor p = from_vector(std::vector<float>{1.0f, -2.0f}, Shape{2}).requires_grad_();
  optim::SGD opt({p}, optim::SGDOptions(0.1).momentum(0.9).dampening(0.1).weight_decay(0.1));
  for (int t = 0; t < 3; ++t) {
    std::vector<float> x = p.detach().to_vector<float>();
    for (float& v : x) v = 2.0f * v + 0.5f;
    p.set_grad(from_vector(x, p.shape()));
    opt.step();
  }
  check_values(p, {-0.16152946, -0.34705423}, 1e-5);
}

TEST_CASE("optim: step skips parameters without a grad, zero_grad") {
  Tensor a = make_param({1.0});
  Tensor b = make_param({5.0});
  optim::SGD opt({a, b}, optim::SGDOptions(0.5));
  a.set_grad(from_vector(std::vector<double>{2.0}, Shape{1}));
  opt.step();
  check_values(a, {0.0});
  check_values(b, {5.0});
  opt.zero_grad();
  check_values(a.grad(), {0.0});
  opt.zero_grad(/*set_to_none=*/true);
  CHECK_FALSE(a.grad().defined());
  CHECK(opt.steps_taken() == 1);
}

TEST_CASE("optim: parameter groups with their own lr and weight decay") {
  Tensor a = make_param({1.0});
  Tensor b = make_param({1.0});
  optim::SGD opt(std::vector<optim::ParamGroup>{{{a}, 0.1, 0.0}, {{b}, 0.01, 1.0}}, optim::SGDOptions(1e-2));
  a.set_grad(from_vector(std::vector<double>{1.0}, Shape{1}));
  b.set_grad(from_vector(std::vector<double>{1.0}, Shape{1}));
  opt.step();
  check_values(a, {0.9}, 1e-12);   // 1 - 0.1 * 1
  check_values(b, {0.98}, 1e-12);  // 1 - 0.01 * (1 + 1 * 1)
  opt.set_lr(1, 0.5);
  CHECK(opt.param_groups()[1].lr == 0.5);
}

TEST_CASE("optim: a parameter given twice is a ValueError naming both places, on every way in") {
  const Tensor a = make_param(), b = zeros({3, 4}, kFloat64).requires_grad_(), c = make_param();
  const std::string repeated_b =
      " (shape (3,4)) is the same tensor as group 0 parameter 1; a parameter may appear only once across all "
      "parameter groups";
  // Twice in one list, for each optimiser.
  CHECK_THROWS_WITH_AS(optim::SGD({a, b, b}, optim::SGDOptions(0.1)), ("SGD: group 0 parameter 2" + repeated_b).c_str(),
                       ValueError);
  CHECK_THROWS_WITH_AS(optim::Adam({a, b, c, b}), ("Adam: group 0 parameter 3" + repeated_b).c_str(), ValueError);
  CHECK_THROWS_WITH_AS(optim::AdamW({a, b, b}), ("AdamW: group 0 parameter 2" + repeated_b).c_str(), ValueError);
  // Another handle on the same tensor is the same parameter.
  const Tensor b_again = b;
  CHECK_THROWS_WITH_AS(optim::SGD({a, b, b_again}, optim::SGDOptions(0.1)),
                       ("SGD: group 0 parameter 2" + repeated_b).c_str(), ValueError);
  // In two groups.
  CHECK_THROWS_WITH_AS(optim::AdamW(std::vector<optim::ParamGroup>{{{a, b}}, {{c, b}, 0.01}}, optim::AdamWOptions()),
                       ("AdamW: group 1 parameter 1" + repeated_b).c_str(), ValueError);
  // Through add_param_group, against an earlier group or within the new one; nothing is added.
  optim::Adam opt({a, b});
  CHECK_THROWS_WITH_AS(opt.add_param_group({{c, b}}), ("Adam: group 1 parameter 1" + repeated_b).c_str(), ValueError);
  CHECK_THROWS_WITH_AS(
      opt.add_param_group({{c, c}}),
      "Adam: group 1 parameter 1 (shape (2)) is the same tensor as group 1 parameter 0; a parameter may appear only "
      "once across all parameter groups",
      ValueError);
  CHECK(opt.param_groups().size() == 1);
  // A copy of the same values is another parameter.
  CHECK_NOTHROW(optim::SGD({a, a.detach().clone().requires_grad_()}, optim::SGDOptions(0.1)));
}

TEST_CASE("optim: add_param_group appends a group with the optimiser's defaults, stepped from then on") {
  Tensor a = make_param({1.0}), b = make_param({1.0}), c = make_param({1.0});
  optim::SGD opt({a}, optim::SGDOptions(0.1).weight_decay(0.5));
  opt.add_param_group({{b}});
  opt.add_param_group({{c}, 0.01, 0.0});
  REQUIRE(opt.param_groups().size() == 3);
  CHECK(opt.param_groups()[1].lr == 0.1);
  CHECK(opt.param_groups()[1].weight_decay == 0.5);
  CHECK(opt.param_groups()[2].lr == 0.01);
  CHECK(opt.param_groups()[2].weight_decay == 0.0);
  for (const Tensor& p : {a, b, c}) p.set_grad(from_vector(std::vector<double>{1.0}, Shape{1}));
  opt.step();
  check_values(a, {0.85}, 1e-12);  // 1 - 0.1 * (1 + 0.5 * 1)
  check_values(b, {0.85}, 1e-12);
  check_values(c, {0.99}, 1e-12);  // 1 - 0.01 * 1
  CHECK_THROWS_WITH_AS(opt.add_param_group({{make_param()}, -1.0}), "SGD: group 3 invalid learning rate -1",
                       ValueError);
  CHECK(opt.param_groups().size() == 3);
  // Parameters added through param_groups() bypass the checks; step() refuses them and updates nothing.
  opt.param_groups()[0].params.push_back(a);
  CHECK_THROWS_WITH_AS(
      opt.step(), "SGD: group 0 holds 2 parameters but 1 were added (add parameters with add_param_group)", ValueError);
  opt.param_groups()[0].params.pop_back();
  opt.param_groups().push_back(optim::ParamGroup{{make_param()}, 0.1, 0.0});
  CHECK_THROWS_WITH_AS(opt.step(), "SGD: 4 parameter groups but 3 were added (add groups with add_param_group)",
                       ValueError);
  check_values(a, {0.85}, 1e-12);
}

// Every optimiser the tests drive to a minimum, by name.
std::vector<std::pair<std::string, std::function<std::unique_ptr<optim::Optimizer>(const Tensor&)>>> every_optimizer(
    double sgd_lr, double adam_lr) {
  auto sgd = [sgd_lr](double momentum, bool nesterov) {
    return [=](const Tensor& p) -> std::unique_ptr<optim::Optimizer> {
      return std::make_unique<optim::SGD>(TensorList{p},
                                          optim::SGDOptions(sgd_lr).momentum(momentum).nesterov(nesterov));
    };
  };
  auto adam = [adam_lr](bool decoupled, bool amsgrad) {
    return [=](const Tensor& p) -> std::unique_ptr<optim::Optimizer> {
      if (decoupled)
        return std::make_unique<optim::AdamW>(TensorList{p},
                                              optim::AdamWOptions(adam_lr).amsgrad(amsgrad).weight_decay(1e-4));
      return std::make_unique<optim::Adam>(TensorList{p}, optim::AdamOptions(adam_lr).amsgrad(amsgrad));
    };
  };
  return {{"SGD", sgd(0.0, false)},     {"SGD momentum", sgd(0.9, false)},   {"SGD Nesterov", sgd(0.9, true)},
          {"Adam", adam(false, false)}, {"Adam AMSGrad", adam(false, true)}, {"AdamW", adam(true, false)}};
}

TEST_CASE("optim: every optimiser converges on a quadratic and on Rosenbrock") {
  for (const auto& named : every_optimizer(0.05, 0.05)) {
    const std::string& name = named.first;
    const auto& make = named.second;
    CAPTURE(name);
    // f(x) = sum (x - 3)^2
    Tensor p = make_param({-4.0, 10.0});
    const auto opt = make(p);
    optim::Scheduler sched(*opt, optim::cosine_with_warmup(0, 1500, 0.0));
    for (int t = 0; t < 1500; ++t) {
      std::vector<double> x = p.detach().to_vector<double>();
      for (double& v : x) v = 2.0 * (v - 3.0);
      p.set_grad(from_vector(x, p.shape()));
      opt->step();
      sched.step();
    }
    // AdamW's decoupled decay (1e-4) pulls the minimum toward 0 by about lr * wd * 3 / (2 lr) per coordinate.
    check_values(p, {3.0, 3.0}, name == std::string("AdamW") ? 1e-3 : 1e-5);
  }
  // f(x, y) = (1 - x)^2 + 100 (y - x^2)^2, minimum at (1, 1) at the end of a curved valley; SGD needs a
  // small rate (the curvature across the valley is ~1000) and many steps, the cosine schedule lets each settle.
  for (const auto& named : every_optimizer(1e-3, 0.05)) {
    const std::string& name = named.first;
    const auto& make = named.second;
    CAPTURE(name);
    Tensor p = make_param({-1.5, 2.0});
    const auto opt = make(p);
    const std::int64_t steps = name.rfind("SGD", 0) == 0 ? 60000 : 4000;
    optim::Scheduler sched(*opt, optim::cosine_with_warmup(0, steps, 0.0));
    for (std::int64_t t = 0; t < steps; ++t) {
      const std::vector<double> v = p.detach().to_vector<double>();
      const double x = v[0], y = v[1];
      p.set_grad(
          from_vector(std::vector<double>{-2.0 * (1.0 - x) - 400.0 * x * (y - x * x), 200.0 * (y - x * x)}, Shape{2}));
      opt->step();
      sched.step();
    }
    check_values(p, {1.0, 1.0}, 2e-2);
  }
}

TEST_CASE("optim: clip_grad_norm returns the total norm and scales by max_norm / (total + 1e-6)") {
  Tensor a = make_param({0.0, 0.0});
  Tensor b = make_param({0.0});
  Tensor none = make_param({0.0});  // no grad: skipped
  a.set_grad(from_vector(std::vector<double>{3.0, 4.0}, Shape{2}));
  b.set_grad(from_vector(std::vector<double>{12.0}, Shape{1}));
  // sqrt(9 + 16 + 144) = 13
  const double total = optim::clip_grad_norm({a, b, none}, 6.5);
  CHECK(total == doctest::Approx(13.0).epsilon(1e-12));
  const double coef = 6.5 / (13.0 + 1e-6);
  check_values(a.grad(), {3.0 * coef, 4.0 * coef}, 1e-12);
  check_values(b.grad(), {12.0 * coef}, 1e-12);
  // Below the limit nothing changes; the norm is still returned.
  a.set_grad(from_vector(std::vector<double>{3.0, 4.0}, Shape{2}));
  CHECK(optim::clip_grad_norm({a}, 10.0) == doctest::Approx(5.0));
  CHECK(a.grad().to_vector<double>() == std::vector<double>{3.0, 4.0});
  // Infinity norm and 1-norm.
  CHECK(optim::clip_grad_norm({a}, 100.0, INFINITY) == doctest::Approx(4.0));
  CHECK(optim::clip_grad_norm({a}, 100.0, 1.0) == doctest::Approx(7.0));
  CHECK_THROWS_WITH_AS(optim::clip_grad_norm({a}, -1.0), "clip_grad_norm: invalid max_norm -1", ValueError);
}

TEST_CASE("optim: clip_grad_value clamps each element") {
  Tensor a = make_param({0.0, 0.0, 0.0});
  a.set_grad(from_vector(std::vector<double>{-3.0, 0.25, 2.0}, Shape{3}));
  optim::clip_grad_value({a}, 0.5);
  CHECK(a.grad().to_vector<double>() == std::vector<double>{-0.5, 0.25, 0.5});
  CHECK_THROWS_WITH_AS(optim::clip_grad_value({a}, -0.5), "clip_grad_value: invalid clip value -0.5", ValueError);
}

TEST_CASE("optim: schedule values at chosen steps") {
  CHECK(optim::constant()(123) == 1.0);
  auto step = optim::step_decay(10, 0.5);
  CHECK(step(9) == doctest::Approx(1.0));
  CHECK(step(10) == doctest::Approx(0.5));
  CHECK(step(25) == doctest::Approx(0.25));
  CHECK(optim::exponential(0.9)(2) == doctest::Approx(0.81));
  auto warm = optim::linear_warmup(4);
  CHECK(warm(0) == doctest::Approx(0.25));
  CHECK(warm(2) == doctest::Approx(0.75));
  CHECK(warm(3) == doctest::Approx(1.0));
  CHECK(warm(50) == doctest::Approx(1.0));
  auto cosine = optim::cosine_with_warmup(2, 10, 0.1);
  CHECK(cosine(0) == doctest::Approx(0.5));
  CHECK(cosine(1) == doctest::Approx(1.0));
  CHECK(cosine(2) == doctest::Approx(1.0));
  CHECK(cosine(6) == doctest::Approx(0.55));  // progress 1/2: 0.1 + 0.9 * (1 + cos(pi/2)) / 2
  CHECK(cosine(10) == doctest::Approx(0.1));
  CHECK(cosine(20) == doctest::Approx(0.1));
  CHECK_THROWS_WITH_AS(optim::step_decay(0, 0.5), "step_decay: invalid step_size 0", ValueError);
  CHECK_THROWS_AS(optim::cosine_with_warmup(10, 10), ValueError);
}

TEST_CASE("optim: multi_step and cosine_with_restarts follow torch's MultiStepLR and CosineAnnealingWarmRestarts") {
  // lr / base lr before each of the first steps, printed by PyTorch 1.13's schedulers (SGD, base lr 0.5).
  auto check_schedule = [](const optim::Schedule& schedule, const std::vector<double>& expected) {
    for (std::size_t s = 0; s < expected.size(); ++s) {
      CAPTURE(s);
      CHECK(schedule(static_cast<std::int64_t>(s)) == doctest::Approx(expected[s]).epsilon(1e-12));
    }
  };
  // Milestones unsorted and one given twice: at step 5 the rate falls by gamma^2.
  check_schedule(optim::multi_step({9, 5, 2, 5}, 0.5),
                 {1.0, 1.0, 0.5, 0.5, 0.5, 0.125, 0.125, 0.125, 0.125, 0.0625, 0.0625, 0.0625});
  // T_0 = 3, T_mult = 2, eta_min = 0.05 = 0.1 of the base: periods of 3, 6, 12 steps.
  check_schedule(
      optim::cosine_with_restarts(3, 2, 0.1),
      {1.0, 0.775, 0.3250000000000001, 1.0, 0.9397114317029974, 0.775, 0.55, 0.3250000000000001, 0.16028856829700258,
       1.0, 0.9846666218300807, 0.9397114317029974, 0.8681980515339464, 0.775, 0.6664685702961344, 0.55});
  check_schedule(optim::cosine_with_restarts(4),
                 {1.0, 0.8535533905932737, 0.5, 0.14644660940672627, 1.0, 0.8535533905932737, 0.5, 0.14644660940672627,
                  1.0, 0.8535533905932737});
  // Far out: periods 1, 2, 4, ..., 2^62 fill steps 0 to 2^63 - 2, so the step before the last of int64 is
  // the end of the period of length 2^62, and the last starts one of 2^63 steps (past int64: kept as a
  // double); a period of one step is always at its top.
  const std::int64_t last = std::numeric_limits<std::int64_t>::max();
  CHECK(optim::cosine_with_restarts(1, 2)(last - 1) == doctest::Approx(0.0));
  CHECK(optim::cosine_with_restarts(1, 2)(last) == 1.0);
  CHECK(optim::cosine_with_restarts(1)(last) == 1.0);
  CHECK(optim::cosine_with_restarts(1000, 1000)(last) > 0.0);

  CHECK_THROWS_WITH_AS(optim::multi_step({3, -1}, 0.1), "multi_step: invalid milestone -1", ValueError);
  CHECK_THROWS_WITH_AS(optim::multi_step({3}, -0.1), "multi_step: invalid gamma -0.1", ValueError);
  CHECK_THROWS_WITH_AS(optim::cosine_with_restarts(0), "cosine_with_restarts: invalid period 0", ValueError);
  CHECK_THROWS_WITH_AS(optim::cosine_with_restarts(5, 0), "cosine_with_restarts: invalid period_mult 0", ValueError);
  CHECK_THROWS_WITH_AS(optim::cosine_with_restarts(5, 1, 1.5), "cosine_with_restarts: invalid min_ratio 1.5",
                       ValueError);
}

TEST_CASE("optim: linear_ramp, polynomial and one_cycle follow torch's LinearLR, PolynomialLR and OneCycleLR") {
  // lr / base lr before each of the first steps, printed by PyTorch 1.13's schedulers (SGD, base lr
  // 0.5; OneCycleLR with max_lr 0.5 and cycle_momentum=False).
  auto check_schedule = [](const optim::Schedule& schedule, const std::vector<double>& expected) {
    for (std::size_t s = 0; s < expected.size(); ++s) {
      CAPTURE(s);
      CHECK(schedule(static_cast<std::int64_t>(s)) == doctest::Approx(expected[s]).epsilon(1e-12));
    }
  };
  check_schedule(optim::linear_ramp(0.25, 0.75, 4), {0.25, 0.375, 0.5, 0.625, 0.75, 0.75, 0.75});
  check_schedule(optim::linear_ramp(1.0 / 3.0, 1.0, 5),
                 {0.3333333333333333, 0.4666666666666667, 0.6000000000000001, 0.7333333333333335, 0.8666666666666669,
                  1.0000000000000002, 1.0000000000000002});
  check_schedule(optim::polynomial(4, 2.0), {1.0, 0.5625, 0.25, 0.0625, 0.0, 0.0, 0.0});
  check_schedule(optim::polynomial(5), {1.0, 0.8, 0.6, 0.4, 0.19999999999999996, 0.0, 0.0});
  check_schedule(optim::polynomial(5, 0.5),
                 {1.0, 0.8944271909999159, 0.7745966692414833, 0.6324555320336758, 0.4472135954999578, 0.0, 0.0});

  // The defaults over 10 steps: the rise ends at step 0.3 * 10 - 1 = 2.
  check_schedule(optim::one_cycle(10),
                 {0.040000000000000036, 0.52, 1.0, 0.9504846320134737, 0.8117456539497631, 0.6112620219362893,
                  0.38874197806371075, 0.18825834605023697, 0.049519367986526286, 4e-06});
  optim::OneCycleOptions linear;
  linear.pct_start = 0.25;
  linear.div_factor = 10.0;
  linear.final_div_factor = 100.0;
  linear.anneal = optim::Anneal::Linear;
  // The rise ends at the fractional step 1.5.
  check_schedule(optim::one_cycle(10, linear), {0.1, 0.7, 0.9334, 0.8002, 0.667, 0.5338, 0.40060000000000007,
                                                0.2674000000000001, 0.13419999999999999, 0.0010000000000000009});
  optim::OneCycleOptions three;
  three.three_phase = true;
  check_schedule(optim::one_cycle(12, three),
                 {0.040000000000000036, 0.3497896542195831, 0.8792851591221287, 0.9450188923135407, 0.4621423934774446,
                  0.05394792763549498, 0.0381516932425798, 0.031224618933116923, 0.02108466989389118,
                  0.010634768002885594, 0.0028665701910005545, 4e-06});
  // Past the last step the last rate stays; a rise of no length (0.1 * 10 - 1 = 0, where torch divides
  // by zero) starts at the peak; a single step is the last rate.
  CHECK(optim::one_cycle(10)(10) == doctest::Approx(4e-06).epsilon(1e-12));
  CHECK(optim::one_cycle(10)(1000000) == doctest::Approx(4e-06).epsilon(1e-12));
  optim::OneCycleOptions instant;
  instant.pct_start = 0.1;
  CHECK(optim::one_cycle(10, instant)(0) == 1.0);
  CHECK(optim::one_cycle(1)(0) == doctest::Approx(4e-06).epsilon(1e-12));

  CHECK_THROWS_WITH_AS(optim::linear_ramp(0.0, 1.0, 5), "linear_ramp: invalid start_factor (must be in (0, 1]) 0",
                       ValueError);
  CHECK_THROWS_WITH_AS(optim::linear_ramp(0.5, 1.5, 5), "linear_ramp: invalid end_factor (must be in [0, 1]) 1.5",
                       ValueError);
  CHECK_THROWS_WITH_AS(optim::linear_ramp(0.5, 1.0, 0), "linear_ramp: invalid total_steps 0", ValueError);
  CHECK_THROWS_WITH_AS(optim::polynomial(0), "polynomial: invalid total_steps 0", ValueError);
  CHECK_THROWS_WITH_AS(optim::polynomial(5, -1.0), "polynomial: invalid power -1", ValueError);
  CHECK_THROWS_WITH_AS(optim::one_cycle(0), "one_cycle: invalid total_steps 0", ValueError);
  optim::OneCycleOptions bad;
  bad.pct_start = 1.5;
  CHECK_THROWS_WITH_AS(optim::one_cycle(10, bad), "one_cycle: invalid pct_start (must be in [0, 1]) 1.5", ValueError);
  bad.pct_start = 0.6;
  bad.three_phase = true;
  CHECK_THROWS_WITH_AS(optim::one_cycle(10, bad),
                       "one_cycle: invalid pct_start (must be in [0, 0.5] with three_phase) 0.6", ValueError);
  bad = {};
  bad.div_factor = 0.0;
  CHECK_THROWS_WITH_AS(optim::one_cycle(10, bad), "one_cycle: invalid div_factor 0", ValueError);
  bad = {};
  bad.final_div_factor = std::numeric_limits<double>::infinity();
  CHECK_THROWS_WITH_AS(optim::one_cycle(10, bad), "one_cycle: invalid final_div_factor inf", ValueError);
}

TEST_CASE("optim: cyclic follows torch's CyclicLR in its three modes") {
  // lr / base_lr before each step, printed by PyTorch 1.13's CyclicLR (base_lr 0.01, max_lr 0.1,
  // cycle_momentum=False): up 3 and down 2 in each mode (gamma 0.9 for exp_range), and up 4 with the
  // default down.
  auto check_schedule = [](const optim::Schedule& schedule, const std::vector<double>& expected) {
    for (std::size_t s = 0; s < expected.size(); ++s) {
      CAPTURE(s);
      CHECK(schedule(static_cast<std::int64_t>(s)) == doctest::Approx(expected[s]).epsilon(1e-12));
    }
  };
  optim::CyclicOptions options;
  options.step_size_down = 2;
  check_schedule(optim::cyclic(10.0, 3, options), {1.0, 4.0, 7.0, 10.0, 5.5, 1.0, 4.0, 7.0, 10.0, 5.5, 1.0, 4.0});
  options.mode = optim::CyclicMode::Triangular2;
  check_schedule(optim::cyclic(10.0, 3, options), {1.0, 4.0, 7.0, 10.0, 5.5, 1.0, 2.5, 4.0, 5.5, 3.25, 1.0, 1.75});
  options.mode = optim::CyclicMode::ExpRange;
  options.gamma = 0.9;
  check_schedule(optim::cyclic(10.0, 3, options),
                 {1.0, 3.6999999999999997, 5.859999999999999, 7.561, 3.95245, 1.0, 2.594323000000002,
                  3.8697814000000004, 4.874204890000001, 2.743392200500002, 1.0, 1.941431788270001});
  check_schedule(optim::cyclic(10.0, 4), {1.0, 3.25, 5.5, 7.75, 10.0, 7.75, 5.5, 3.25, 1.0, 3.25});

  // Through a Scheduler: the optimiser's lr is the bottom.
  Tensor w = zeros(Shape{1}, kFloat64).requires_grad_();
  optim::SGD opt({w}, optim::SGDOptions(0.01));
  optim::Scheduler sched(opt, optim::cyclic(10.0, 4));
  sched.step();
  CHECK(*opt.param_groups()[0].lr == doctest::Approx(0.0325).epsilon(1e-12));

  CHECK_THROWS_WITH_AS(optim::cyclic(0.5, 3), "cyclic: invalid max_factor 0.5 (must be finite and >= 1)", ValueError);
  CHECK_THROWS_WITH_AS(optim::cyclic(2.0, 0), "cyclic: invalid step_size_up 0", ValueError);
  optim::CyclicOptions bad;
  bad.step_size_down = -1;
  CHECK_THROWS_WITH_AS(optim::cyclic(2.0, 3, bad), "cyclic: invalid step_size_down -1", ValueError);
  bad.step_size_down = std::nullopt;
  bad.gamma = 0.0;
  CHECK_THROWS_WITH_AS(optim::cyclic(2.0, 3, bad), "cyclic: invalid gamma 0", ValueError);
}

TEST_CASE("optim: Scheduler sets each group's lr and restores its step") {
  Tensor a = make_param({1.0});
  Tensor b = make_param({1.0});
  optim::SGD opt(std::vector<optim::ParamGroup>{{{a}, 0.1, 0.0}, {{b}, 0.02, 0.0}}, optim::SGDOptions(1e-2));
  optim::Scheduler sched(opt, optim::step_decay(2, 0.1));
  CHECK(opt.param_groups()[0].lr == doctest::Approx(0.1));
  sched.step();
  sched.step();
  CHECK(sched.current_step() == 2);
  CHECK(opt.param_groups()[0].lr == doctest::Approx(0.01));
  CHECK(opt.param_groups()[1].lr == doctest::Approx(0.002));
  // Resuming: a fresh optimiser (base lrs as configured) plus the saved step gives the same lrs.
  optim::SGD fresh(std::vector<optim::ParamGroup>{{{a}, 0.1, 0.0}, {{b}, 0.02, 0.0}}, optim::SGDOptions(1e-2));
  optim::Scheduler resumed(fresh, optim::step_decay(2, 0.1));
  resumed.set_step(sched.current_step());
  CHECK(fresh.param_groups()[0].lr == doctest::Approx(0.01));
  CHECK(fresh.param_groups()[1].lr == doctest::Approx(0.002));
  CHECK_THROWS_WITH_AS(resumed.set_step(-1), "Scheduler: invalid step -1", ValueError);
}

namespace {

// One evaluation's expected figures: the two groups' lrs, then bad_evals and cooldown_counter.
struct PlateauRow {
  double lr0, lr1;
  std::int64_t bad_evals, cooldown_counter;
};

// Steps a ReduceLROnPlateau over SGD groups at lr 0.1 and 0.01 with `metrics` and checks every row, then best.
void check_plateau(const optim::ReduceLROnPlateauOptions& options, const std::vector<double>& metrics,
                   const std::vector<PlateauRow>& rows, double best) {
  Tensor a = make_param({1.0});
  Tensor b = make_param({1.0});
  optim::SGD opt(std::vector<optim::ParamGroup>{{{a}, 0.1, 0.0}, {{b}, 0.01, 0.0}}, optim::SGDOptions(0.1));
  optim::ReduceLROnPlateau plateau(opt, options);
  REQUIRE(metrics.size() == rows.size());
  for (std::size_t i = 0; i < metrics.size(); ++i) {
    CAPTURE(i);
    const double before = *opt.param_groups()[0].lr + *opt.param_groups()[1].lr;
    const bool lowered = plateau.step(metrics[i]);
    CHECK(*opt.param_groups()[0].lr == rows[i].lr0);  // the same double operations as torch: equal bits
    CHECK(*opt.param_groups()[1].lr == rows[i].lr1);
    CHECK(plateau.state().bad_evals == rows[i].bad_evals);
    CHECK(plateau.state().cooldown_counter == rows[i].cooldown_counter);
    CHECK(lowered == (rows[i].lr0 + rows[i].lr1 != before));
  }
  CHECK(plateau.state().best == best);
  CHECK(plateau.state().evals == static_cast<std::int64_t>(metrics.size()));
}

}  // namespace

TEST_CASE("optim: ReduceLROnPlateau follows torch's, modes, thresholds, cooldown, floors and eps") {
  // Rows printed by torch.optim.lr_scheduler.ReduceLROnPlateau (PyTorch 1.13) on the same metrics: the groups'
  // lrs, num_bad_epochs and cooldown_counter after each step, and best at the end.
  const std::vector<double> losses{1.0, 0.9, 0.95, 0.91, 0.92, 0.9, 0.85, 0.86, 0.87, 0.88, 0.89, 0.849, 0.9};
  check_plateau(optim::ReduceLROnPlateauOptions().patience(2), losses,
                {{0.1, 0.01, 0, 0},
                 {0.1, 0.01, 0, 0},
                 {0.1, 0.01, 1, 0},
                 {0.1, 0.01, 2, 0},
                 {0.010000000000000002, 0.001, 0, 0},
                 {0.010000000000000002, 0.001, 1, 0},
                 {0.010000000000000002, 0.001, 0, 0},
                 {0.010000000000000002, 0.001, 1, 0},
                 {0.010000000000000002, 0.001, 2, 0},
                 {0.0010000000000000002, 0.0001, 0, 0},
                 {0.0010000000000000002, 0.0001, 1, 0},
                 {0.0010000000000000002, 0.0001, 0, 0},
                 {0.0010000000000000002, 0.0001, 1, 0}},
                0.849);
  check_plateau(optim::ReduceLROnPlateauOptions().patience(1).factor(0.5).cooldown(2).min_lrs({0.03, 0.0}), losses,
                {{0.1, 0.01, 0, 0},
                 {0.1, 0.01, 0, 0},
                 {0.1, 0.01, 1, 0},
                 {0.05, 0.005, 0, 2},
                 {0.05, 0.005, 0, 1},
                 {0.05, 0.005, 0, 0},
                 {0.05, 0.005, 0, 0},
                 {0.05, 0.005, 1, 0},
                 {0.03, 0.0025, 0, 2},
                 {0.03, 0.0025, 0, 1},
                 {0.03, 0.0025, 0, 0},
                 {0.03, 0.0025, 0, 0},
                 {0.03, 0.0025, 1, 0}},
                0.849);
  check_plateau(optim::ReduceLROnPlateauOptions().patience(1).factor(0.5).threshold(0.05).threshold_mode(
                    optim::ThresholdMode::Abs),
                losses,
                {{0.1, 0.01, 0, 0},
                 {0.1, 0.01, 0, 0},
                 {0.1, 0.01, 1, 0},
                 {0.05, 0.005, 0, 0},
                 {0.05, 0.005, 1, 0},
                 {0.025, 0.0025, 0, 0},
                 {0.025, 0.0025, 1, 0},
                 {0.0125, 0.00125, 0, 0},
                 {0.0125, 0.00125, 1, 0},
                 {0.00625, 0.000625, 0, 0},
                 {0.00625, 0.000625, 1, 0},
                 {0.00625, 0.000625, 0, 0},
                 {0.00625, 0.000625, 1, 0}},
                0.849);
  // An accuracy (max), a NaN among the metrics (never better), and an eps that keeps a small cut from happening.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> accuracies{0.5, 0.6, 0.6, 0.59, 0.61, 0.6, 0.6, 0.7, nan, 0.7, 0.7};
  check_plateau(optim::ReduceLROnPlateauOptions().mode(optim::PlateauMode::Max).patience(1).factor(0.2).threshold(0.02),
                accuracies,
                {{0.1, 0.01, 0, 0},
                 {0.1, 0.01, 0, 0},
                 {0.1, 0.01, 1, 0},
                 {0.020000000000000004, 0.002, 0, 0},
                 {0.020000000000000004, 0.002, 1, 0},
                 {0.004000000000000001, 0.0004, 0, 0},
                 {0.004000000000000001, 0.0004, 1, 0},
                 {0.004000000000000001, 0.0004, 0, 0},
                 {0.004000000000000001, 0.0004, 1, 0},
                 {0.0008000000000000003, 8e-05, 0, 0},
                 {0.0008000000000000003, 8e-05, 1, 0}},
                0.7);
  check_plateau(
      optim::ReduceLROnPlateauOptions().mode(optim::PlateauMode::Max).patience(0).factor(0.5).eps(0.02).min_lr(0.005),
      accuracies,
      {{0.1, 0.01, 0, 0},
       {0.1, 0.01, 0, 0},
       {0.05, 0.01, 0, 0},
       {0.025, 0.01, 0, 0},
       {0.025, 0.01, 0, 0},
       {0.025, 0.01, 0, 0},
       {0.025, 0.01, 0, 0},
       {0.025, 0.01, 0, 0},
       {0.025, 0.01, 0, 0},
       {0.025, 0.01, 0, 0},
       {0.025, 0.01, 0, 0}},
      0.7);
}

TEST_CASE("optim: ReduceLROnPlateau resumes from its state, and what it refuses") {
  Tensor a = make_param({1.0});
  const std::vector<double> losses{1.0, 0.9, 0.95, 0.91, 0.92, 0.9, 0.85, 0.86, 0.87, 0.88};
  const auto options = optim::ReduceLROnPlateauOptions().patience(1).factor(0.5).cooldown(1);
  optim::SGD opt({a}, optim::SGDOptions(0.1));
  optim::ReduceLROnPlateau plateau(opt, options);
  for (std::size_t i = 0; i < 4; ++i) plateau.step(losses[i]);
  // A fresh optimiser at the lr reached and a fresh scheduler with the saved counters continue alike.
  optim::SGD fresh_opt({a}, optim::SGDOptions(*opt.param_groups()[0].lr));
  optim::ReduceLROnPlateau fresh(fresh_opt, options);
  fresh.load_state(plateau.state());
  for (std::size_t i = 4; i < losses.size(); ++i) {
    CAPTURE(i);
    CHECK(fresh.step(losses[i]) == plateau.step(losses[i]));
    CHECK(*fresh_opt.param_groups()[0].lr == *opt.param_groups()[0].lr);
    CHECK(fresh.state().bad_evals == plateau.state().bad_evals);
    CHECK(fresh.state().cooldown_counter == plateau.state().cooldown_counter);
  }
  CHECK(*opt.param_groups()[0].lr < 0.1);  // the run did lower the rate

  using O = optim::ReduceLROnPlateauOptions;
  CHECK_THROWS_WITH_AS(optim::ReduceLROnPlateau(opt, O().factor(1.0)),
                       "ReduceLROnPlateau: factor must be in [0, 1), got 1", ValueError);
  CHECK_THROWS_WITH_AS(optim::ReduceLROnPlateau(opt, O().patience(-1)),
                       "ReduceLROnPlateau: patience must be >= 0, got -1", ValueError);
  CHECK_THROWS_WITH_AS(optim::ReduceLROnPlateau(opt, O().cooldown(-2)),
                       "ReduceLROnPlateau: cooldown must be >= 0, got -2", ValueError);
  CHECK_THROWS_WITH_AS(optim::ReduceLROnPlateau(opt, O().threshold(-0.1)),
                       "ReduceLROnPlateau: threshold must be >= 0, got -0.1", ValueError);
  CHECK_THROWS_WITH_AS(optim::ReduceLROnPlateau(opt, O().min_lr(std::nan(""))),
                       "ReduceLROnPlateau: min_lr must be >= 0, got nan", ValueError);
  CHECK_THROWS_WITH_AS(optim::ReduceLROnPlateau(opt, O().min_lrs({0.0, 0.1})),
                       "ReduceLROnPlateau: min_lrs has 2 rates for 1 parameter groups", ValueError);
  Tensor c = make_param({2.0});
  fresh_opt.add_param_group(optim::ParamGroup({c}));
  CHECK_THROWS_WITH_AS(fresh.step(1.0),
                       "ReduceLROnPlateau::step: the optimiser has 2 parameter groups, 1 when the scheduler was made "
                       "(make it after add_param_group)",
                       ValueError);
  CHECK_THROWS_WITH_AS(fresh.load_state(optim::PlateauState{std::nan(""), 0, 0, 3}),
                       "ReduceLROnPlateau::load_state: best is NaN", ValueError);
  CHECK_THROWS_WITH_AS(fresh.load_state(optim::PlateauState{0.5, -1, 0, 3}),
                       "ReduceLROnPlateau::load_state: counters must be >= 0, got bad_evals -1, cooldown_counter 0, "
                       "evals 3",
                       ValueError);
}

TEST_CASE("optim: state save -> load into a fresh optimiser -> identical next steps") {
  auto run = [](optim::Optimizer& opt, const Tensor& p, int steps) {
    for (int t = 0; t < steps; ++t) {
      set_linear_grad(p);
      opt.step();
    }
  };
  const auto options = optim::AdamWOptions(0.1).betas({0.9, 0.9}).weight_decay(0.05).amsgrad(true);
  Tensor p = make_param();
  optim::AdamW opt({p}, options);
  run(opt, p, 2);
  const NamedTensors state = opt.state_tensors();
  std::vector<std::string> names;
  for (const auto& entry : state) names.push_back(entry.first);
  CHECK(names == std::vector<std::string>{"stepcount", "group0.param0.step", "group0.param0.exp_avg",
                                          "group0.param0.exp_avg_sq", "group0.param0.max_exp_avg_sq"});
  Tensor q = p.detach().clone().requires_grad_();
  run(opt, p, 3);

  optim::AdamW fresh({q}, options);
  fresh.load_state(state);
  CHECK(fresh.steps_taken() == 2);
  run(fresh, q, 3);
  CHECK(q.detach().to_vector<double>() == p.detach().to_vector<double>());  // bit-identical

  // SGD momentum buffer round-trips too.
  Tensor r = make_param();
  optim::SGD sgd({r}, optim::SGDOptions(0.1).momentum(0.9));
  run(sgd, r, 1);
  Tensor s = r.detach().clone().requires_grad_();
  optim::SGD sgd2({s}, optim::SGDOptions(0.1).momentum(0.9));
  sgd2.load_state(sgd.state_tensors());
  run(sgd, r, 2);
  run(sgd2, s, 2);
  CHECK(s.detach().to_vector<double>() == r.detach().to_vector<double>());
}

TEST_CASE("optim: load_state rejects mismatched state with the entry named") {
  Tensor p = make_param();
  optim::Adam opt({p}, optim::AdamOptions(0.1));
  set_linear_grad(p);
  opt.step();
  NamedTensors state = opt.state_tensors();

  Tensor other = make_param({1.0, 2.0, 3.0});
  optim::Adam wrong_shape({other}, optim::AdamOptions(0.1));
  CHECK_THROWS_WITH_AS(wrong_shape.load_state(state),
                       "Adam: load_state entry 'group0.param0.exp_avg': shape or dtype does not match the parameter",
                       ValueError);
  NamedTensors extra = state;
  extra.emplace_back("group1.param0.exp_avg", zeros({2}, kFloat64));
  CHECK_THROWS_WITH_AS(opt.load_state(extra),
                       "Adam: load_state entry 'group1.param0.exp_avg': no such parameter in this optimiser",
                       ValueError);
  NamedTensors missing(state.begin() + 1, state.end());
  CHECK_THROWS_WITH_AS(opt.load_state(missing), "Adam: load_state entry 'stepcount': missing", ValueError);
  CHECK_THROWS_WITH_AS(opt.load_state({{"stepcount", zeros({1}, kFloat64)}, {"bogus", zeros({1}, kFloat64)}}),
                       "Adam: load_state entry 'bogus': unexpected name (expected group<g>.param<i>.<buffer>)",
                       ValueError);
  // Step counts are whole numbers an int64 holds exactly, saved as floating-point scalars.
  auto with_count = [&](const std::string& name, const Tensor& value) {
    NamedTensors changed = state;
    for (auto& entry : changed)
      if (entry.first == name) entry.second = value;
    return changed;
  };
  const Tensor half = from_vector(std::vector<double>{2.5}, Shape{1});
  CHECK_THROWS_WITH_AS(opt.load_state(with_count("stepcount", half)),
                       "Adam: load_state entry 'stepcount': invalid count 2.5", ValueError);
  CHECK_THROWS_WITH_AS(
      opt.load_state(with_count("group0.param0.step", from_vector(std::vector<double>{-1.0}, Shape{1}))),
      "Adam: load_state entry 'group0.param0.step': invalid count -1", ValueError);
  CHECK_THROWS_WITH_AS(opt.load_state(with_count("stepcount", from_vector(std::vector<double>{1e300}, Shape{1}))),
                       "Adam: load_state entry 'stepcount': invalid count 1e+300", ValueError);
  CHECK_THROWS_WITH_AS(opt.load_state(with_count("stepcount", zeros({2}, kFloat64))),
                       "Adam: load_state entry 'stepcount': expected a floating-point scalar", ValueError);
  CHECK_THROWS_WITH_AS(opt.load_state(with_count("stepcount", zeros({1}, kInt64))),
                       "Adam: load_state entry 'stepcount': expected a floating-point scalar", ValueError);

  // State of another kind of optimiser, or of Adam with another amsgrad setting, is refused whole.
  Tensor q = make_param();
  optim::SGD sgd({q}, optim::SGDOptions(0.1).momentum(0.9));
  CHECK_THROWS_WITH_AS(sgd.load_state(state),
                       "SGD: load_state entry 'group0.param0.*': holds the buffers {exp_avg, exp_avg_sq} but SGD keeps "
                       "{momentum_buffer} (state saved by another optimiser or with other options)",
                       ValueError);
  optim::Adam ams({q}, optim::AdamOptions().amsgrad(true));
  CHECK_THROWS_WITH_AS(
      ams.load_state(state),
      "Adam: load_state entry 'group0.param0.*': holds the buffers {exp_avg, exp_avg_sq} but Adam keeps "
      "{exp_avg, exp_avg_sq, max_exp_avg_sq} (state saved by another optimiser or with other options)",
      ValueError);
  NamedTensors partial;
  for (const auto& entry : state)
    if (entry.first != "group0.param0.exp_avg_sq") partial.push_back(entry);
  CHECK_THROWS_AS(opt.load_state(partial), ValueError);
  // Nothing was changed by the refused loads: the next step equals a fresh optimiser's first.
  set_linear_grad(q);
  ams.step();
  CHECK(ams.steps_taken() == 1);
}

TEST_CASE("optim: invalid hyper-parameters are ValueErrors naming the value") {
  Tensor p = make_param();
  CHECK_THROWS_WITH_AS(optim::SGD({p}, optim::SGDOptions(-0.1)), "SGD: invalid learning rate -0.1", ValueError);
  CHECK_THROWS_WITH_AS(optim::SGD({p}, optim::SGDOptions(0.1).momentum(-1.0)), "SGD: invalid momentum -1", ValueError);
  CHECK_THROWS_WITH_AS(optim::SGD({p}, optim::SGDOptions(0.1).nesterov(true)),
                       "SGD: nesterov requires momentum > 0 and dampening 0 (got momentum 0, dampening 0)", ValueError);
  CHECK_THROWS_WITH_AS(optim::Adam({p}, optim::AdamOptions().betas({1.0, 0.999})),
                       "Adam: invalid beta1 1 (must be in [0, 1))", ValueError);
  CHECK_THROWS_WITH_AS(optim::Adam({p}, optim::AdamOptions().betas({0.9, -0.5})),
                       "Adam: invalid beta2 -0.5 (must be in [0, 1))", ValueError);
  CHECK_THROWS_WITH_AS(optim::AdamW({p}, optim::AdamWOptions().eps(0.0)), "AdamW: invalid eps 0 (must be > 0)",
                       ValueError);
  CHECK_THROWS_WITH_AS(optim::Adam({p}, optim::AdamOptions().weight_decay(-1.0)), "Adam: invalid weight_decay -1",
                       ValueError);
  optim::SGD opt({p}, optim::SGDOptions(0.1));
  CHECK_THROWS_WITH_AS(opt.set_lr(0, -1.0), "SGD: invalid learning rate -1", ValueError);
  CHECK_THROWS_WITH_AS(opt.set_lr(3, 0.1), "SGD: set_lr group 3 out of range (1 groups)", ValueError);
  Tensor ints = from_vector(std::vector<std::int64_t>{1, 2}, Shape{2});
  CHECK_THROWS_WITH_AS(optim::SGD({ints}, optim::SGDOptions(0.1)),
                       "SGD: group 0 parameter 0 must be a contiguous floating-point tensor", ValueError);
}

TEST_CASE("optim: vectorised Adam/AdamW agree with the per-element scalar rule (vector body and tail)") {
  // 37 elements: several full SIMD batches for every width plus a scalar tail.
  auto run = [](auto tag, bool decoupled, bool amsgrad) {
    using T = decltype(tag);
    const std::int64_t n = 37;
    std::vector<T> x(n);
    for (std::int64_t k = 0; k < n; ++k) x[k] = static_cast<T>(std::sin(0.7 * static_cast<double>(k) + 0.3));
    Tensor p = from_vector(x, Shape{n}).requires_grad_();
    const auto opts = optim::AdamOptions(0.05).weight_decay(0.1).amsgrad(amsgrad);
    std::unique_ptr<optim::Optimizer> opt;
    if (decoupled) {
      opt = std::make_unique<optim::AdamW>(TensorList{p}, optim::AdamWOptions(0.05).weight_decay(0.1).amsgrad(amsgrad));
    } else {
      opt = std::make_unique<optim::Adam>(TensorList{p}, opts);
    }
    std::vector<T> m(n, T(0)), v(n, T(0)), vmax(n, T(0)), ref = x;
    const auto [beta1, beta2] = opts.betas();
    const T b1 = static_cast<T>(beta1), b2 = static_cast<T>(beta2), eps = static_cast<T>(opts.eps());
    const T wd = static_cast<T>(opts.weight_decay()), decay = static_cast<T>(1.0 - opts.lr() * opts.weight_decay());
    for (int t = 1; t <= 4; ++t) {
      std::vector<T> g(n);
      for (std::int64_t k = 0; k < n; ++k) g[k] = static_cast<T>(std::cos(1.3 * static_cast<double>(k * t)));
      p.set_grad(from_vector(g, Shape{n}));
      opt->step();
      const T bc2 = static_cast<T>(std::sqrt(1.0 - std::pow(beta2, t)));
      const T lr_t = static_cast<T>(opts.lr() / (1.0 - std::pow(beta1, t)));
      for (std::int64_t k = 0; k < n; ++k) {
        T d = g[k];
        if (decoupled) {
          ref[k] = ref[k] * decay;
        } else {
          d = d + wd * ref[k];
        }
        m[k] = b1 * m[k] + (T(1) - b1) * d;
        v[k] = b2 * v[k] + (T(1) - b2) * d * d;
        T second = v[k];
        if (amsgrad) {
          vmax[k] = std::max(vmax[k], v[k]);
          second = vmax[k];
        }
        ref[k] = ref[k] - lr_t * m[k] / (std::sqrt(second) / bc2 + eps);
      }
      const std::vector<T> got = p.detach().template to_vector<T>();
      for (std::int64_t k = 0; k < n; ++k) {
        CAPTURE(t);
        CAPTURE(k);
        // The compiler may contract the scalar reference's a * b + c into one FMA while the SIMD
        // body rounds twice, so the two agree to a few units in the last place, not bit for bit.
        const T tol = T(16) * std::numeric_limits<T>::epsilon() * (std::abs(ref[k]) + T(1));
        CHECK(std::abs(got[k] - ref[k]) <= tol);
      }
    }
  };
  for (bool decoupled : {false, true}) {
    for (bool amsgrad : {false, true}) {
      CAPTURE(decoupled);
      CAPTURE(amsgrad);
      run(float{}, decoupled, amsgrad);
      run(double{}, decoupled, amsgrad);
    }
  }
}
