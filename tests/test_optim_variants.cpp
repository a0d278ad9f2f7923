// optim: Adadelta, Adamax, NAdam, RAdam, Rprop and ASGD. Trajectories on the problem test_optim.cpp uses
// (x0 = (1, -2) float64, gradient 2x + 0.5): Adadelta, Adamax, RAdam and Rprop against the numbers
// torch.optim printed (PyTorch 1.13, float64), and their state after the last step; NAdam against
// torch 2's rule worked in plain Python double arithmetic (torch 1.13's differs, see adam_variants.h).
// Also: resuming from saved state, float32, convergence, and the options each refuses.

#include <doctest/doctest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tapegrad/autograd/error.h"
#include "tapegrad/optim/optim.h"
#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::check_values;

namespace {

Tensor start_point() { return from_vector(std::vector<double>{1.0, -2.0}, Shape{2}).requires_grad_(); }

void linear_gradient(const Tensor& p) {
  std::vector<double> x = p.detach().to_vector<double>();
  for (double& v : x) v = 2.0 * v + 0.5;
  p.set_grad(from_vector(x, p.shape()));
}

void check_path(optim::Optimizer& opt, const Tensor& p, const std::vector<std::vector<double>>& expected) {
  for (std::size_t t = 0; t < expected.size(); ++t) {
    CAPTURE(t);
    linear_gradient(p);
    opt.step();
    check_values(p, expected[t], 1e-12);
  }
}

Tensor state_buffer(const optim::Optimizer& opt, const std::string& name) {
  for (const auto& [key, t] : opt.state_tensors())
    if (key == "group0.param0." + name) return t;
  FAIL("no state entry group0.param0." << name);
  return Tensor();
}

using Factory = std::function<std::unique_ptr<optim::Optimizer>(const TensorList&)>;

std::vector<std::pair<std::string, Factory>> variants() {
  return {
      {"Adadelta",
       [](const TensorList& p) { return std::make_unique<optim::Adadelta>(p, optim::AdadeltaOptions(1.0)); }},
      {"Adamax", [](const TensorList& p) { return std::make_unique<optim::Adamax>(p, optim::AdamaxOptions(0.05)); }},
      {"NAdam", [](const TensorList& p) { return std::make_unique<optim::NAdam>(p, optim::NAdamOptions(0.05)); }},
      {"RAdam", [](const TensorList& p) { return std::make_unique<optim::RAdam>(p, optim::RAdamOptions(0.05)); }},
      {"Rprop", [](const TensorList& p) { return std::make_unique<optim::Rprop>(p, optim::RpropOptions(0.05)); }},
      {"ASGD", [](const TensorList& p) { return std::make_unique<optim::ASGD>(p, optim::ASGDOptions(0.05)); }},
  };
}

}  // namespace

TEST_CASE("optim variants: Adadelta and Adamax follow torch.optim's, with and without weight decay") {
  {
    Tensor p = start_point();
    optim::Adadelta opt({p});
    check_path(opt, p,
               {{0.9968377248696507, -1.9968377236305563},
                {0.9935971948019114, -1.9935960776159911},
                {0.9903057248988443, -1.9903019354009954}});
    check_values(state_buffer(opt, "square_avg"), {1.6845211455445985, 3.3068200445227087}, 1e-13);
    check_values(state_buffer(opt, "acc_delta"), {2.8384692770747556e-06, 2.840880831574973e-06}, 1e-13);
  }
  {
    Tensor p = start_point();
    optim::Adadelta opt({p}, optim::AdadeltaOptions(0.5).rho(0.8).eps(1e-3).weight_decay(0.1));
    check_path(opt, p,
               {{0.9646577288912426, -1.9646511155895734},
                {0.9278887788990098, -1.9277284503901186},
                {0.8904823687567153, -1.8899515767858364}});
  }
  {
    Tensor p = start_point();
    optim::Adamax opt({p}, optim::AdamaxOptions(0.1));
    check_path(opt, p,
               {{0.9000000003999999, -1.9000000002857143},
                {0.8041146417234286, -1.8029104297807301},
                {0.7123706660421829, -1.7087758041145638}});
    check_values(state_buffer(opt, "exp_avg"), {0.6203229284166856, -0.8910820860075745}, 1e-13);
    check_values(state_buffer(opt, "exp_inf"), {2.49500250998001, 3.49300350998001}, 1e-13);
  }
  {
    Tensor p = start_point();
    optim::Adamax opt({p}, optim::AdamaxOptions(0.05).betas({0.8, 0.9}).eps(1e-3).weight_decay(0.1));
    check_path(opt, p,
               {{0.9500192233756247, -1.9500135098621993},
                {0.8991048005679102, -1.899378725417313},
                {0.8472289866757269, -1.8480994235956767}});
  }
}

TEST_CASE("optim variants: RAdam steps as momentum SGD until rho_t > 5, then rectified, as torch.optim.RAdam") {
  {
    // betas (0.9, 0.9): rho_inf = 19 and rho_t crosses 5 at the sixth step.
    Tensor p = start_point();
    optim::RAdam opt({p}, optim::RAdamOptions(0.1).betas({0.9, 0.9}));
    check_path(opt, p,
               {{0.75, -1.65},
                {0.5263157894736842, -1.3368421052631578},
                {0.32787919984463, -1.059030879782482},
                {0.15353704163753806, -0.8149518582925532},
                {0.0020599538510913395, -0.6028839353915278},
                {-0.020637326040556122, -0.5801866554350138},
                {-0.048917439619864334, -0.5518633193110274}});
    check_values(state_buffer(opt, "exp_avg"), {0.5936975224624503, -0.8329923138257886}, 1e-13);
    check_values(state_buffer(opt, "exp_avg_sq"), {0.9205645904662544, 1.8066718150994352}, 1e-13);
  }
  {
    Tensor p = start_point();
    optim::RAdam opt({p}, optim::RAdamOptions(0.05).weight_decay(0.1).eps(1e-3));
    check_path(opt, p,
               {{0.87, -1.815}, {0.7471842105263158, -1.6402236842105262}, {0.6315128665760341, -1.4756144639735869}});
  }
}

TEST_CASE("optim variants: NAdam follows the corrected momentum schedule, and resumes exactly") {
  {
    Tensor p = start_point();
    optim::NAdam opt({p}, optim::NAdamOptions(0.1));
    check_path(opt, p,
               {{0.8943548225870418, -1.8943548224663045},
                {0.8191222868233531, -1.8181836664005449},
                {0.7505814899467221, -1.7482242983316785}});
    check_values(state_buffer(opt, "exp_avg"), {0.6223083254303381, -0.8931206013240436}, 1e-13);
    check_values(state_buffer(opt, "exp_avg_sq"), {0.01604254975480257, 0.032867107813805946}, 1e-13);
  }
  {
    Tensor p = start_point();
    optim::NAdam opt({p}, optim::NAdamOptions(0.05).betas({0.8, 0.9}).eps(1e-3).weight_decay(0.1).momentum_decay(0.1));
    check_path(opt, p,
               {{0.945209232015181, -1.9452029686513517},
                {0.902608663215034, -1.9023578188330512},
                {0.8618092349548655, -1.861178058911262}});
  }
  // Every variant: save after 4 steps, load into a fresh optimiser, and the next 5 steps are bit-identical
  // (NAdam's momentum products are rebuilt from the restored step count).
  for (const auto& [name, make] : variants()) {
    CAPTURE(name);
    Tensor p = start_point();
    const auto opt = make({p});
    for (int t = 0; t < 4; ++t) {
      linear_gradient(p);
      opt->step();
    }
    const NamedTensors saved = opt->state_tensors();
    Tensor q = p.detach().clone().requires_grad_();
    const auto resumed = make({q});
    resumed->load_state(saved);
    for (int t = 0; t < 5; ++t) {
      linear_gradient(p);
      opt->step();
      linear_gradient(q);
      resumed->step();
    }
    CHECK(q.detach().to_vector<double>() == p.detach().to_vector<double>());
  }
}

TEST_CASE("optim variants: Rprop grows and shrinks its step sizes, and clamps them, as torch.optim.Rprop") {
  {
    Tensor p = start_point();
    optim::Rprop opt({p}, optim::RpropOptions(0.1));
    check_path(opt, p,
               {{0.9, -1.9},
                {0.78, -1.7799999999999998},
                {0.636, -1.636},
                {0.46320000000000006, -1.4631999999999998},
                {0.25584000000000007, -1.2558399999999998},
                {0.007008000000000125, -1.007008}});
    check_values(state_buffer(opt, "prev"), {1.0116800000000001, -2.0116799999999997}, 1e-14);
    check_values(state_buffer(opt, "step_size"), {0.24883199999999994, 0.24883199999999994}, 1e-14);
  }
  {
    // The step size reaches its maximum 0.5, overshoots the minimum at -0.25, where the gradient is 0.
    Tensor p = start_point();
    optim::Rprop opt({p}, optim::RpropOptions(0.3).etas({0.4, 1.5}).step_sizes({0.05, 0.5}));
    check_path(opt, p, {{0.7, -1.7}, {0.25, -1.25}, {-0.25, -0.75}, {-0.25, -0.25}, {-0.25, -0.25}, {-0.25, -0.25}});
  }
  // A sign flip does not move that coordinate, and shrinks its step.
  Tensor p = from_vector(std::vector<double>{0.0}, Shape{1}).requires_grad_();
  optim::Rprop opt({p}, optim::RpropOptions(0.1));
  p.set_grad(from_vector(std::vector<double>{1.0}, Shape{1}));
  opt.step();
  p.set_grad(from_vector(std::vector<double>{-3.0}, Shape{1}));
  opt.step();
  check_values(p, {-0.1}, 1e-15);
  check_values(state_buffer(opt, "step_size"), {0.05}, 1e-15);
  CHECK(state_buffer(opt, "prev").to_vector<double>() == std::vector<double>{0.0});
}

TEST_CASE("optim variants: ASGD steps and averages as torch.optim.ASGD") {
  // torch 1.13 with its default dtype float64 (its eta and mu are tensors of that dtype): the parameter,
  // then the average, after each step. With t0 = 2 the average leaves the parameter at step 5 (mu = 1/2,
  // then 1/3).
  const std::vector<std::vector<double>> params = {{0.865, -1.805},
                                                   {0.7452986002816292, -1.6320979781845757},
                                                   {0.6391111686058116, -1.478716132430617},
                                                   {0.5448672089674981, -1.3425859685086088},
                                                   {0.461183952565577, -1.2217101537058337},
                                                   {0.38684329397993483, -1.1143292024154619}};
  const std::vector<std::vector<double>> averages = {{0.865, -1.805},
                                                     {0.7452986002816292, -1.6320979781845757},
                                                     {0.6391111686058116, -1.478716132430617},
                                                     {0.5448672089674981, -1.3425859685086088},
                                                     {0.5030255807665376, -1.2821480611072213},
                                                     {0.46429815183767, -1.2262084415433014}};
  Tensor p = start_point();
  optim::ASGD opt({p}, optim::ASGDOptions(0.05).lambd(0.1).alpha(0.75).t0(2.0).weight_decay(0.1));
  check_values(opt.averaged(p), {1.0, -2.0}, 1e-15);  // before any step: the parameter
  for (std::size_t t = 0; t < params.size(); ++t) {
    CAPTURE(t);
    linear_gradient(p);
    opt.step();
    check_values(p, params[t], 1e-13);
    check_values(opt.averaged(p), averages[t], 1e-13);
  }
  // The defaults: no averaging before a million steps, eta barely decays.
  Tensor q = start_point();
  optim::ASGD plain({q}, optim::ASGDOptions(0.05));
  check_path(plain, q,
             {{0.874995, -1.82499},
              {0.7624915469126854, -1.6674824657028846},
              {0.6612393391542912, -1.5257269448853448},
              {0.5701131242101624, -1.3981480570218834},
              {0.48810019141444155, -1.2833279828762163},
              {0.4142891157253847, -1.179990705516576}});
  check_values(plain.averaged(q), {0.4142891157253847, -1.179990705516576}, 1e-13);
  CHECK_THROWS_WITH_AS(plain.averaged(p), "ASGD: averaged: the (2) tensor is not one of this optimiser's parameters",
                       ValueError);
  CHECK_THROWS_WITH_AS(optim::ASGD({q}, optim::ASGDOptions().t0(-1.0)), "ASGD: invalid t0 -1 (must be >= 0)",
                       ValueError);
  CHECK_THROWS_WITH_AS(optim::ASGD({q}, optim::ASGDOptions().lambd(-1.0)), "ASGD: invalid lambd -1 (must be >= 0)",
                       ValueError);
  CHECK_THROWS_WITH_AS(optim::ASGD({q}, optim::ASGDOptions().alpha(-0.5)), "ASGD: invalid alpha -0.5 (must be >= 0)",
                       ValueError);
}

TEST_CASE("optim: Optimizer::param_state hands out a parameter's state, and names a bad index") {
  Tensor p = start_point();
  optim::ASGD opt({p});
  CHECK(opt.param_state(0, 0).step == 0);
  linear_gradient(p);
  opt.step();
  CHECK(opt.param_state(0, 0).step == 1);
  CHECK(opt.param_state(0, 0).buffers.count("ax") == 1);
  CHECK_THROWS_WITH_AS(opt.param_state(0, 1), "ASGD: no parameter 1 in group 0 (1 groups)", ValueError);
  CHECK_THROWS_WITH_AS(opt.param_state(2, 0), "ASGD: no parameter 0 in group 2 (1 groups)", ValueError);
}

TEST_CASE("optim variants: each converges on a quadratic in float64 and float32") {
  for (const auto& [name, make] : variants()) {
    for (const DType dtype : {kFloat64, kFloat32}) {
      CAPTURE(name);
      CAPTURE(dtype_name(dtype));
      // f(x) = sum (x - 3)^2 from (-4, 10), with a cosine decay so each settles.
      Tensor p = from_vector(std::vector<double>{-4.0, 10.0}, Shape{2}).to(dtype).requires_grad_();
      const auto opt = make({p});
      optim::Scheduler schedule(*opt, optim::cosine_with_warmup(0, 3000, 0.0));
      for (int t = 0; t < 3000; ++t) {
        p.set_grad(((p.detach() - 3.0) * 2.0).to(dtype));
        opt->step();
        schedule.step();
      }
      check_values(p.to(kFloat64), {3.0, 3.0}, 2e-3);
    }
  }
}

TEST_CASE("optim variants: options outside their ranges are ValueErrors naming the value") {
  const Tensor p = start_point();
  CHECK_THROWS_WITH_AS(optim::Adadelta({p}, optim::AdadeltaOptions().rho(1.5)),
                       "Adadelta: invalid rho 1.5 (must be in [0, 1])", ValueError);
  CHECK_THROWS_WITH_AS(optim::Adadelta({p}, optim::AdadeltaOptions().eps(-1.0)),
                       "Adadelta: invalid eps -1 (must be >= 0)", ValueError);
  CHECK_THROWS_WITH_AS(optim::Adamax({p}, optim::AdamaxOptions().betas({1.0, 0.9})),
                       "Adamax: invalid beta1 1 (must be in [0, 1))", ValueError);
  CHECK_THROWS_WITH_AS(optim::RAdam({p}, optim::RAdamOptions().betas({0.9, -0.1})),
                       "RAdam: invalid beta2 -0.1 (must be in [0, 1))", ValueError);
  CHECK_THROWS_WITH_AS(optim::NAdam({p}, optim::NAdamOptions().momentum_decay(-1.0)),
                       "NAdam: invalid momentum_decay -1 (must be >= 0)", ValueError);
  CHECK_THROWS_WITH_AS(optim::NAdam({p}, optim::NAdamOptions(-0.1)), doctest::Contains("-0.1"), ValueError);
  CHECK_THROWS_WITH_AS(optim::Rprop({p}, optim::RpropOptions().etas({0.5, 0.9})),
                       "Rprop: invalid etas (0.5, 0.9) (must be 0 < etaminus < 1 < etaplus)", ValueError);
  CHECK_THROWS_WITH_AS(optim::Rprop({p}, optim::RpropOptions().step_sizes({1.0, 0.5})),
                       "Rprop: invalid step_sizes (1, 0.5) (must be 0 <= step_size_min <= step_size_max)", ValueError);
  // Rprop takes no weight decay: a group with one is refused before anything moves.
  optim::Rprop rprop(std::vector<optim::ParamGroup>{{{p}, std::nullopt, 0.1}});
  linear_gradient(p);
  CHECK_THROWS_WITH_AS(rprop.step(),
                       "Rprop: group 0 parameter 0 (shape (2)) has a dense gradient, but Rprop takes no weight_decay "
                       "(the group has 0.1)",
                       ValueError);
  CHECK(p.detach().to_vector<double>() == std::vector<double>{1.0, -2.0});
}
