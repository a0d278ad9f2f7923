// Autograd beyond one first-order backward: saved-tensor version checks, autograd::grad and
// higher-order gradients, tensor and post-accumulate-grad hooks, ops with several outputs,
// anomaly mode, saved-tensor hooks and activation checkpointing, engine state and threads.

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "tapegrad/autograd/autograd.h"
#include "tapegrad/nn/nn.h"
#include "tapegrad/optim/optim.h"
#include "tests/testing.h"

using namespace tapegrad;
using doctest::Contains;
using tapegrad::testing::check_values;

namespace {

// y = x^2 with a backward written in ops (so it is differentiable again).
Tensor square(const Tensor& x) {
  return custom_op(
      "square", {x}, [](const TensorList& in) { return in[0] * in[0]; },
      [](const Tensor& g, const TensorList& in, const Tensor&) -> TensorList { return {g * in[0] * 2.0}; });
}

// Returns its input times one, with a backward that yields NaN where the input is negative.
Tensor nan_below_zero(const Tensor& x) {
  return custom_op(
      "nan_below_zero", {x}, [](const TensorList& in) { return in[0] * 1.0; },
      [](const Tensor& g, const TensorList& in, const Tensor&) -> TensorList {
        return {where(lt(in[0], 0.0), full_like(g, NAN), g)};
      });
}

struct ProbeImpl : nn::Module {
  Tensor forward(const Tensor& in) { return nan_below_zero(in); }
};
TAPEGRAD_MODULE(Probe);

}  // namespace

// ---------------------------------------------------------------- saved tensors and versions

TEST_CASE("versions: writing in place to a tensor saved for backward is an error naming the op") {
  SUBCASE("the input of matmul, as in x.fill_(0) between forward and backward") {
    Tensor x = tensor({{1.0, 2.0}}, kFloat64);
    Tensor w = tensor({{1.0}, {1.0}}, kFloat64).requires_grad_();
    Tensor l = matmul(x, w).sum();
    x.fill_(0);
    CHECK_THROWS_WITH_AS(l.backward(),
                         Contains("backward of matmul: one of the variables needed for gradient "
                                  "computation has been modified by an inplace operation"),
                         GraphError);
  }
  SUBCASE("the saved value is used when nothing wrote to it") {
    Tensor x = tensor({{2.0, 3.0}}, kFloat64);
    Tensor w = tensor({{1.0}, {1.0}}, kFloat64).requires_grad_();
    matmul(x, w).sum().backward();
    check_values(w.grad(), {2.0, 3.0});
  }
  SUBCASE("an optimiser step between forward and backward") {
    Tensor w = tensor({1.0, 2.0}, kFloat64).requires_grad_();
    optim::SGD sgd({w}, optim::SGDOptions(0.1));
    Tensor l = (w * w).sum();
    w.set_grad(ones_like(w));
    sgd.step();
    CHECK_THROWS_WITH_AS(l.backward(), Contains("backward of mul"), GraphError);
  }
  SUBCASE("mul_ under a no-grad guard on an op's saved output") {
    Tensor x = tensor({0.5, 1.0}, kFloat64).requires_grad_();
    Tensor y = x.exp();
    {
      NoGradGuard guard;
      y.mul_(2.0);
    }
    CHECK_THROWS_WITH_AS(y.sum().backward(), Contains("backward of exp"), GraphError);
  }
  SUBCASE("a view shares its base's version") {
    Tensor x = tensor({1.0, 2.0, 3.0}, kFloat64);
    Tensor w = tensor({1.0, 1.0, 1.0}, kFloat64).requires_grad_();
    Tensor l = (x * w).sum();
    x.slice(0, 1, 2).fill_(7.0);
    CHECK_THROWS_WITH_AS(l.backward(), Contains("saved at version 0 is now at version 1"), GraphError);
  }
  SUBCASE("a write to a tensor the op did not save is fine") {
    Tensor x = tensor({1.0, 2.0}, kFloat64).requires_grad_();
    Tensor c = tensor({5.0, 5.0}, kFloat64);
    Tensor l = (x + c).sum();  // add saves neither operand
    c.fill_(0);
    l.backward();
    check_values(x.grad(), {1.0, 1.0});
  }
  SUBCASE("a custom op's saved inputs are checked too") {
    Tensor x = tensor({1.0, 2.0}, kFloat64).requires_grad_();
    Tensor y = square(x * 1.0);
    Tensor l = y.sum();
    {
      NoGradGuard guard;
      x.add_(ones_like(x));
    }
    // x itself was saved by mul (x * 1.0 saves nothing of x's values: its gradient is 1.0 * g).
    l.backward();
    check_values(x.grad(), {2.0, 4.0});
  }
}

TEST_CASE("versions: every family of op checks what it saved") {
  Generator gen(2);
  struct Case {
    const char* op;
    // Builds a loss from x and returns it with the tensor to write in place afterwards.
    std::function<std::pair<Tensor, Tensor>(const Tensor& x)> build;
  };
  const Tensor w = randn({4, 4}, gen, kFloat64).requires_grad_();
  const std::vector<Case> cases = {
      {"softmax",
       [](const Tensor& x) {
         Tensor y = softmax(x, 1);
         return std::make_pair(y.select(1, 0).sum(), y);
       }},
      {"log_softmax",
       [](const Tensor& x) {
         Tensor y = log_softmax(x, 1);
         return std::make_pair(y.sum(), y);
       }},
      {"tanh",
       [](const Tensor& x) {
         Tensor y = x.tanh();
         return std::make_pair(y.sum(), y);
       }},
      {"sigmoid",
       [](const Tensor& x) {
         Tensor y = x.sigmoid();
         return std::make_pair(y.sum(), y);
       }},
      {"pow",
       [](const Tensor& x) {
         Tensor h = x * 1.0;
         return std::make_pair(h.pow(3.0).sum(), h);
       }},
      {"layer_norm",
       [](const Tensor& x) {
         Tensor h = x * 1.0;
         return std::make_pair(layer_norm(h, {4}).pow(2.0).sum(), h);
       }},
      {"linear",
       [&](const Tensor& x) {
         Tensor h = x * 1.0;
         return std::make_pair(linear(h, w).sum(), h);
       }},
      {"max",
       [](const Tensor& x) {
         Tensor h = x * 1.0;
         return std::make_pair(max(h, {1}).sum(), h);
       }},
      {"gather",
       [](const Tensor& x) {
         Tensor index = zeros({3, 1}, kInt64);
         return std::make_pair(gather(x, 1, index).sum(), index);
       }},
      {"where",
       [](const Tensor& x) {
         Tensor condition = gt(x.detach(), 0.0);
         return std::make_pair(where(condition, x, 0.0).sum(), condition);
       }},
  };
  for (const Case& c : cases) {
    INFO(std::string(c.op));
    Tensor x = randn({3, 4}, gen, kFloat64).requires_grad_();
    auto [loss, victim] = c.build(x);
    {
      NoGradGuard guard;
      victim.fill_(0);
    }
    const std::string expected = std::string("backward of ") + c.op + ": one of the variables";
    CHECK_THROWS_WITH_AS(loss.backward(), Contains(expected.c_str()), GraphError);
  }
}

// ---------------------------------------------------------------- autograd::grad

TEST_CASE("grad: returns gradients without touching .grad, with errors for unused inputs") {
  Tensor x = tensor({1.0, 2.0, 3.0}, kFloat64).requires_grad_();
  Tensor y = tensor({4.0, 5.0, 6.0}, kFloat64).requires_grad_();
  Tensor unused = tensor({1.0}, kFloat64).requires_grad_();
  Tensor l = (x * y).sum() + (x * x).sum();
  TensorList g = autograd::grad({l}, {x, y}, {}, {false, true, false});
  check_values(g[0], {6.0, 9.0, 12.0});  // y + 2x
  check_values(g[1], {1.0, 2.0, 3.0});
  CHECK_FALSE(x.grad().defined());
  CHECK_FALSE(y.grad().defined());
  CHECK_THROWS_WITH_AS(autograd::grad({l}, {unused}, {}, {false, true, false}),
                       Contains("grad: input 0 (shape (1)) was not used to compute the outputs"), GraphError);
  autograd::GradOptions allow;
  allow.allow_unused = true;
  const TensorList partial = autograd::grad({l}, {x, unused}, {}, allow);
  CHECK(partial[0].defined());
  CHECK_FALSE(partial[1].defined());
  // The graph was released by the last call.
  CHECK_THROWS_AS(autograd::grad({l}, {x}), GraphError);
}

TEST_CASE("grad: a non-leaf input gets the gradient flowing into it, grad_outputs weight each output") {
  Tensor x = tensor({1.0, -2.0}, kFloat64).requires_grad_();
  Tensor h = x * 3.0;
  Tensor out = h * h;
  const TensorList g = autograd::grad({out}, {h, x}, {tensor({1.0, 10.0}, kFloat64)});
  check_values(g[0], {6.0, -120.0});  // 2h * u
  check_values(g[1], {18.0, -360.0});
  CHECK_THROWS_WITH_AS(autograd::grad({out.detach()}, {x}), Contains("does not require grad"), GraphError);
  CHECK_THROWS_WITH_AS(autograd::grad({x * 1.0}, {x.detach()}), Contains("grad: input 0"), GraphError);
}

TEST_CASE("higher order: second and third derivatives of polynomials and tanh") {
  Tensor x = tensor({0.5, -1.5}, kFloat64).requires_grad_();
  autograd::GradOptions taped;
  taped.create_graph = true;
  Tensor y = (x * x * x).sum();  // y' = 3x^2, y'' = 6x, y''' = 6
  Tensor d1 = autograd::grad({y}, {x}, {}, taped)[0];
  check_values(d1, {0.75, 6.75}, 1e-12);
  Tensor d2 = autograd::grad({d1.sum()}, {x}, {}, taped)[0];
  check_values(d2, {3.0, -9.0}, 1e-12);
  Tensor d3 = autograd::grad({d2.sum()}, {x})[0];
  check_values(d3, {6.0, 6.0}, 1e-12);

  // tanh'' = -2 tanh (1 - tanh^2), through backward(create_graph=true) and .grad.
  Tensor z = tensor({0.3, -0.7}, kFloat64).requires_grad_();
  z.tanh().sum().backward(Tensor(), std::nullopt, /*create_graph=*/true);
  Tensor first = z.grad();
  CHECK(first.requires_grad());
  const TensorList second = autograd::grad({first.sum()}, {z});
  for (int i = 0; i < 2; ++i) {
    const double t = std::tanh(z.at({i}));
    CHECK(second[0].at({i}) == doctest::Approx(-2 * t * (1 - t * t)).epsilon(1e-12));
  }
  // A taped .grad refers to a graph that saved z itself: a reference cycle until the grad goes.
  const std::int64_t nodes = live_nodes();
  z.zero_grad(/*set_to_none=*/true);
  first = Tensor();
  CHECK(live_nodes() < nodes);
}

TEST_CASE("higher order: Hessian-vector products against finite differences of the gradient") {
  Generator gen(3);
  const Tensor a = randn({4, 4}, gen, kFloat64);
  auto f = [&](const Tensor& x) { return (matmul(a, x).tanh() * x).sum() + (x * x * x).sum() * 0.1; };
  const Tensor x0 = randn({4}, gen, kFloat64);
  const Tensor v = randn({4}, gen, kFloat64);
  // Hv = d/dx (grad f(x) . v).
  Tensor x = x0.clone().requires_grad_();
  autograd::GradOptions taped;
  taped.create_graph = true;
  Tensor g = autograd::grad({f(x)}, {x}, {}, taped)[0];
  const Tensor hv = autograd::grad({(g * v).sum()}, {x})[0];
  auto gradient_at = [&](const Tensor& point) {
    Tensor p = point.clone().requires_grad_();
    return autograd::grad({f(p)}, {p})[0];
  };
  const double eps = 1e-6;
  const Tensor numeric = (gradient_at(x0 + v * eps) - gradient_at(x0 - v * eps)) / (2 * eps);
  check_values(hv, numeric.to_vector<double>(), 1e-6);
}

TEST_CASE("higher order: a gradient penalty (WGAN-GP style) trains and its loss falls") {
  // A critic D(x) = w2 . tanh(W1 x + b1) should score real points high, fake points low, and keep
  // |grad_x D| near 1 on points between them: the penalty needs the gradient of a gradient.
  Generator gen(7);
  nn::Linear hidden(nn::LinearOptions(2, 16).generator(&gen));
  nn::Linear head(nn::LinearOptions(16, 1).generator(&gen));
  hidden->to(kFloat64);
  head->to(kFloat64);
  auto critic = [&](const Tensor& x) { return head(hidden(x).tanh()); };
  TensorList params = hidden->parameters();
  for (const Tensor& p : head->parameters()) params.push_back(p);
  optim::Adam adam(params, optim::AdamOptions(0.01));
  const Tensor real = randn({64, 2}, gen, kFloat64) * 0.3 + 2.0;
  const Tensor fake = randn({64, 2}, gen, kFloat64) * 0.3 - 2.0;
  auto step = [&](bool update) {
    const Tensor mix = rand({64, 1}, gen, kFloat64);
    Tensor between = (real * mix + fake * (1.0 - mix)).requires_grad_();
    Tensor score = critic(between);
    autograd::GradOptions taped;
    taped.create_graph = true;
    Tensor slope = autograd::grad({score.sum()}, {between}, {}, taped)[0];
    Tensor penalty = ((slope * slope).sum({1}).sqrt() - 1.0).pow(2.0).mean();
    Tensor loss = critic(fake).mean() - critic(real).mean() + penalty * 10.0;
    if (update) {
      adam.zero_grad();
      loss.backward();
      for (const Tensor& p : params) CHECK(p.grad().defined());
      adam.step();
    }
    return loss.item();
  };
  const double before = step(false);
  for (int i = 0; i < 60; ++i) step(true);
  const double after = step(false);
  CHECK(after < before - 1.0);
}

// ---------------------------------------------------------------- hooks

TEST_CASE("hooks: a tensor hook sees the gradient and may replace it, handles remove it") {
  Tensor w = tensor({1.0, 2.0}, kFloat64).requires_grad_();
  int calls = 0;
  RemovableHandle handle = w.register_hook([&](const Tensor& g) {
    ++calls;
    return g * 10.0;
  });
  // w is used twice: the hook runs once, on the summed gradient (3 + 1 = 4 per element).
  ((w * 3.0).sum() + w.sum()).backward();
  CHECK(calls == 1);
  check_values(w.grad(), {40.0, 40.0});
  handle.remove();
  handle.remove();  // a second remove does nothing
  w.zero_grad(true);
  (w * 3.0).sum().backward();
  CHECK(calls == 1);
  check_values(w.grad(), {3.0, 3.0});

  // On a non-leaf, the hook changes what flows on to the inputs, even after the tensor is gone.
  Tensor x = tensor({1.0, 1.0}, kFloat64).requires_grad_();
  Tensor loss;
  {
    Tensor h = x * 2.0;
    h.register_hook([](const Tensor& g) { return g * 0.5; });
    h.register_hook([](const Tensor&) { return Tensor(); });  // undefined: keeps the gradient
    loss = (h * h).sum();
  }
  loss.backward();
  check_values(x.grad(), {4.0, 4.0});  // 2h * 0.5 * 2

  Tensor c = tensor({1.0});
  CHECK_THROWS_WITH_AS(c.register_hook([](const Tensor& g) { return g; }),
                       "register_hook: the tensor does not require grad, so no gradient will reach the hook",
                       GraphError);
  Tensor bad = tensor({1.0, 2.0}, kFloat64).requires_grad_();
  bad.register_hook([](const Tensor&) { return zeros({3}, kFloat64); });
  CHECK_THROWS_WITH_AS(bad.sum().backward(),
                       "backward: a hook on a leaf returned a gradient of shape (3) (float64) for one of shape (2) "
                       "(float64)",
                       GraphError);
}

TEST_CASE("hooks: retain_grad keeps a non-leaf's gradient after its hooks") {
  Tensor x = tensor({1.0, 2.0}, kFloat64).requires_grad_();
  Tensor h = x * 3.0;
  h.retain_grad();
  h.register_hook([](const Tensor& g) { return g * 2.0; });
  CHECK(h.retains_grad());
  (h * h).sum().backward();
  check_values(h.grad(), {12.0, 24.0});  // 2h, doubled
  check_values(x.grad(), {36.0, 72.0});
}

TEST_CASE("hooks: post-accumulate-grad hooks run once per backward, after .grad is complete") {
  Tensor w = tensor({1.0, 2.0}, kFloat64).requires_grad_();
  std::vector<std::vector<double>> seen;
  RemovableHandle handle = w.register_post_accumulate_grad_hook(
      [&](const Tensor& leaf) { seen.push_back(leaf.grad().to_vector<double>()); });
  Tensor a = w * 2.0;
  Tensor b = w.exp();
  (a.sum() + b.sum() + (w * w).sum()).backward();
  REQUIRE(seen.size() == 1);
  CHECK(seen[0][0] == doctest::Approx(2.0 + std::exp(1.0) + 2.0));
  (w * 1.0).sum().backward();  // accumulates: the hook sees the running total
  REQUIRE(seen.size() == 2);
  CHECK(seen[1][0] == doctest::Approx(5.0 + std::exp(1.0)));
  handle.remove();
  (w * 1.0).sum().backward();
  CHECK(seen.size() == 2);

  // An optimiser step from the hook (as a per-parameter update overlapping backward would do).
  Tensor p = tensor({1.0}, kFloat64).requires_grad_();
  p.register_post_accumulate_grad_hook([](const Tensor& leaf) {
    NoGradGuard guard;
    leaf.add_(leaf.grad(), -0.5);
  });
  (p * 4.0).sum().backward();
  CHECK(p.item() == doctest::Approx(-1.0));

  Tensor x = tensor({1.0}, kFloat64).requires_grad_();
  CHECK_THROWS_WITH_AS((x * 2.0).register_post_accumulate_grad_hook([](const Tensor&) {}),
                       "register_post_accumulate_grad_hook: only a leaf accumulates a gradient; this tensor was made "
                       "by mul",
                       GraphError);
}

TEST_CASE("queue_callback: runs once the whole backward is done, in order, and only inside a backward") {
  Tensor u = tensor({1.0, 2.0}, kFloat64).requires_grad_();
  Tensor v = tensor({3.0}, kFloat64).requires_grad_();
  std::vector<std::string> events;
  v.register_post_accumulate_grad_hook([&](const Tensor&) {
    events.push_back("v");
    autograd::queue_callback([&] {
      // Every leaf's gradient is complete by now, u's too (its hook ran after v's queued this).
      events.push_back("first: u.grad sums to " + std::to_string(u.grad().sum().item()));
      autograd::queue_callback([&] { events.push_back("queued by a callback"); });
    });
    autograd::queue_callback([&] { events.push_back("second"); });
  });
  u.register_post_accumulate_grad_hook([&](const Tensor&) { events.push_back("u"); });
  ((u * 2.0).sum() * v).sum().backward();  // v's gradient is delivered before u's
  CHECK(events ==
        std::vector<std::string>{"v", "u", "first: u.grad sums to 12.000000", "second", "queued by a callback"});

  // A backward that throws drops its callbacks unrun.
  events.clear();
  Tensor w = tensor({1.0}, kFloat64).requires_grad_();
  w.register_post_accumulate_grad_hook([&](const Tensor&) {
    events.push_back("queued");
    autograd::queue_callback([&] { events.push_back("must not run"); });
  });
  const Tensor from_u = (u * 0.0).sum();
  const Tensor from_w = w * 2.0;  // recorded later, so its backward runs first
  Tensor y = from_u + from_w;     // w's gradient arrives first, then u's hook throws
  u.register_hook([](const Tensor&) -> Tensor { throw ValueError("a hook fails"); });
  CHECK_THROWS_WITH_AS(y.backward(), "a hook fails", ValueError);
  CHECK(events == std::vector<std::string>{"queued"});

  CHECK_THROWS_WITH_AS(autograd::queue_callback([] {}),
                       "queue_callback: no backward is running on this thread (call it from a hook during backward)",
                       GraphError);
}

// ---------------------------------------------------------------- several outputs

TEST_CASE("record_multi: one node for several outputs, its backward runs once") {
  Tensor x = tensor({1.0, 2.0, 3.0}, kFloat64).requires_grad_();
  int runs = 0;
  auto halves = [&](const Tensor& in) {
    TensorList outs = {in * 1.0, in * 1.0};
    for (Tensor& t : outs) t = t.detach();
    record_multi("two_scaled", outs, {in}, [&runs](const TensorList& grads) -> TensorList {
      ++runs;
      Tensor total = zeros_like(grads[0].defined() ? grads[0] : grads[1]);
      if (grads[0].defined()) total = total + grads[0] * 2.0;
      if (grads[1].defined()) total = total + grads[1] * 3.0;
      return {total};
    });
    return outs;
  };
  TensorList outs = halves(x);
  CHECK(outs[0].grad_fn() == outs[1].grad_fn());
  (outs[0].sum() + outs[1].sum()).backward();
  CHECK(runs == 1);
  check_values(x.grad(), {5.0, 5.0, 5.0});
  // Only one output used: the other's gradient is undefined.
  x.zero_grad(true);
  outs = halves(x);
  outs[1].sum().backward();
  CHECK(runs == 2);
  check_values(x.grad(), {3.0, 3.0, 3.0});
  const Tensor twice = outs[0].detach();
  CHECK_THROWS_WITH_AS(record_multi("same", {twice, twice}, {x}, nullptr), "same: outputs 0 and 1 are the same tensor",
                       ValueError);
}

// ---------------------------------------------------------------- anomaly mode

TEST_CASE("anomaly: the first backward producing NaN is named, with the label in scope") {
  Tensor x = tensor({1.0, -1.0}, kFloat64).requires_grad_();
  {
    Tensor y = nan_below_zero(x).sum();
    y.backward();  // without anomaly mode the NaN reaches .grad
    CHECK(std::isnan(x.grad().at({1})));
  }
  x.zero_grad(true);
  autograd::DetectAnomalyGuard anomaly;
  CHECK(autograd::is_anomaly_enabled());
  Tensor y;
  {
    autograd::AnomalyLabel outer("encoder");
    autograd::AnomalyLabel inner("layers.0");
    y = (nan_below_zero(x) * 2.0).sum();
  }
  CHECK_THROWS_WITH_AS(y.backward(),
                       "anomaly: the backward of nan_below_zero returned a gradient with NaN or infinite values for "
                       "its input 0 (shape (2)); the tensor was made by the forward op nan_below_zero under "
                       "'encoder.layers.0'",
                       GraphError);
  CHECK_FALSE(x.grad().defined());

  // Module calls label their ops with the module's name.
  Probe probe;
  Tensor z;
  {
    autograd::AnomalyLabel outer("model");
    z = probe(x).sum();
  }
  CHECK_THROWS_WITH_AS(z.backward(), Contains("made by the forward op nan_below_zero under 'model.Probe'"), GraphError);
}

// ---------------------------------------------------------------- saved-tensor hooks and checkpointing

TEST_CASE("saved-tensor hooks: pack and unpack see every saved tensor, gradients unchanged") {
  Tensor x = tensor({0.5, 1.5}, kFloat64).requires_grad_();
  int packed = 0, unpacked = 0;
  Tensor loss;
  {
    autograd::SavedTensorHooksGuard hooks(
        [&](const Tensor& t) -> std::shared_ptr<void> {
          ++packed;
          return std::make_shared<Tensor>(t.detach().clone());  // e.g. moved elsewhere
        },
        [&](const std::shared_ptr<void>& p) {
          ++unpacked;
          return *static_cast<Tensor*>(p.get());
        });
    loss = (x.exp() * x).sum();  // exp saves its output, mul both operands
  }
  CHECK(packed == 3);
  loss.backward();
  CHECK(unpacked == 3);
  for (int i = 0; i < 2; ++i) CHECK(x.grad().at({i}) == doctest::Approx(std::exp(x.at({i})) * (1 + x.at({i}))));
  CHECK_THROWS_WITH_AS(autograd::SavedTensorHooksGuard(nullptr, nullptr),
                       "SavedTensorHooksGuard: both a pack and an unpack hook are needed", ValueError);
  Tensor lost;
  {
    autograd::SavedTensorHooksGuard hooks([](const Tensor&) { return std::shared_ptr<void>(); },
                                          [](const std::shared_ptr<void>&) { return Tensor(); });
    lost = x.exp().sum();
  }
  CHECK_THROWS_WITH_AS(lost.backward(), "backward of exp: a saved-tensor unpack hook returned an undefined tensor",
                       GraphError);
}

TEST_CASE("saved-tensor hooks: an unpacked tensor lives until its node's backward returns") {
  // A backward reads a saved tensor by reference; one an unpack hook made is kept by the engine
  // while the node's backward runs and released as soon as it returns.
  Tensor x = tensor({0.5, 1.5}, kFloat64).requires_grad_();
  std::vector<std::weak_ptr<TensorImpl>> made;
  Tensor loss;
  {
    autograd::SavedTensorHooksGuard hooks(
        [](const Tensor& t) -> std::shared_ptr<void> { return std::make_shared<Tensor>(t.detach()); },
        [&](const std::shared_ptr<void>& p) {
          Tensor copy = static_cast<Tensor*>(p.get())->clone();
          made.push_back(copy.impl_ptr());
          return copy;
        });
    loss = (x * x).sum();
  }
  int alive_after_mul = -1;
  x.register_post_accumulate_grad_hook([&](const Tensor&) {
    alive_after_mul = 0;
    for (const auto& w : made) alive_after_mul += w.expired() ? 0 : 1;
  });
  loss.backward();
  REQUIRE(made.size() == 2);
  CHECK(alive_after_mul == 0);  // mul's backward had returned when x's gradient was accumulated
  for (int i = 0; i < 2; ++i) CHECK(x.grad().at({i}) == doctest::Approx(2 * x.at({i})));

  SavedTensor saved;
  {
    autograd::SavedTensorHooksGuard hooks(
        [](const Tensor& t) -> std::shared_ptr<void> { return std::make_shared<Tensor>(t); },
        [](const std::shared_ptr<void>& p) { return *static_cast<Tensor*>(p.get()); });
    saved = SavedTensor(x);
  }
  CHECK_THROWS_WITH_AS(
      saved.unpack(),
      "SavedTensor::unpack: a tensor packed by a saved-tensor hook is unpacked only on the thread running a "
      "backward",
      GraphError);
  const SavedTensor plain(x);
  CHECK(plain.unpack().impl() == x.impl());  // without hooks: the tensor itself, anywhere
}

TEST_CASE("checkpoint: a deep MLP's peak memory falls and its gradients are equal") {
  // Eight blocks h -> tanh(fc2(tanh(fc1(h)))) with a 4x wider hidden layer: a plain backward keeps
  // every block's hidden activation; checkpointed, only the blocks' inputs stay, and one block's
  // hidden activation is rebuilt at a time.
  Generator gen(11);
  const int depth = 8, width = 64, hidden = 256, batch = 512;
  std::vector<nn::Linear> up, down;
  for (int i = 0; i < depth; ++i) {
    up.emplace_back(nn::LinearOptions(width, hidden).generator(&gen));
    down.emplace_back(nn::LinearOptions(hidden, width).generator(&gen));
  }
  const Tensor input = randn({batch, width}, gen);
  auto block = [&](int i, const Tensor& h) { return down[i](up[i](h).tanh()).tanh(); };
  auto run = [&](bool checkpointed) {
    for (int i = 0; i < depth; ++i) {
      up[i]->zero_grad(true);
      down[i]->zero_grad(true);
    }
    reset_peak_pool_stats();
    const std::size_t base = pool_stats().bytes_in_use;
    Tensor h = input;
    for (int i = 0; i < depth; ++i) {
      if (checkpointed) h = autograd::checkpoint([&, i](const TensorList& in) { return block(i, in[0]); }, {h});
      else h = block(i, h);
    }
    h.pow(2.0).mean().backward();
    const std::size_t peak = pool_stats().peak_bytes_in_use - base;
    std::vector<std::vector<float>> grads;
    for (int i = 0; i < depth; ++i) {
      grads.push_back(up[i]->weight().grad().to_vector<float>());
      grads.push_back(down[i]->weight().grad().to_vector<float>());
    }
    return std::make_pair(peak, grads);
  };
  const auto [plain_peak, plain_grads] = run(false);
  const auto [checkpoint_peak, checkpoint_grads] = run(true);
  CHECK(checkpoint_grads == plain_grads);
  const std::size_t hidden_activation = std::size_t{batch} * hidden * sizeof(float);
  INFO("plain peak " << plain_peak << " bytes, checkpointed " << checkpoint_peak);
  CHECK(checkpoint_peak + depth * hidden_activation / 2 < plain_peak);

  // create_graph through a checkpoint is refused.
  Tensor x = randn({2, width}, gen).requires_grad_();
  Tensor y = autograd::checkpoint([&](const TensorList& in) { return block(0, in[0]); }, {x}).sum();
  autograd::GradOptions taped;
  taped.create_graph = true;
  CHECK_THROWS_WITH_AS(autograd::grad({y}, {x}, {}, taped), Contains("checkpoint: the gradient of a checkpointed"),
                       GraphError);
}

TEST_CASE("checkpoint: a function that saves differently when rerun is an error, bad arguments") {
  Tensor x = tensor({1.0, 2.0}, kFloat64).requires_grad_();
  int calls = 0;
  auto unsteady = [&calls](const TensorList& in) {
    ++calls;
    return calls == 1 ? in[0].exp() : in[0].exp().exp();  // the rerun saves two tensors, not one
  };
  Tensor y = autograd::checkpoint(unsteady, {x}).sum();
  CHECK_THROWS_WITH_AS(y.backward(),
                       "checkpoint: the rerun of the function saved 2 tensors for backward, the forward 1; the "
                       "function must run the same ops on the same values both times",
                       GraphError);
  CHECK_THROWS_WITH_AS(autograd::checkpoint(nullptr, {x}), "checkpoint: the function is empty", ValueError);
  CHECK_THROWS_WITH_AS(autograd::checkpoint([](const TensorList& in) { return in[0]; }, {x}, {nullptr}),
                       "checkpoint: generator 0 is null", ValueError);
  // Under no-grad nothing is saved and the function just runs.
  NoGradGuard guard;
  CHECK(autograd::checkpoint([](const TensorList& in) { return in[0] * 2.0; }, {x}).is_leaf());
}

TEST_CASE("checkpoint: dropout drawing from the default generator draws the same mask in the rerun") {
  manual_seed(5);
  Tensor x = randn({8, 16}).requires_grad_();
  auto fn = [](const TensorList& in) { return dropout(in[0].tanh(), 0.5, true, default_generator()) * in[0]; };
  manual_seed(9);
  fn({x}).sum().backward();
  const std::vector<float> expected = x.grad().to_vector<float>();
  x.zero_grad(true);
  manual_seed(9);
  autograd::checkpoint(fn, {x}).sum().backward();
  CHECK(x.grad().to_vector<float>() == expected);
}

// ---------------------------------------------------------------- threads

TEST_CASE("threads: engine state of a thread is released when it exits") {
  const std::int64_t nodes_before = live_nodes();
  std::thread worker([] {
    Tensor w = tensor({1.0, 2.0}).requires_grad_();
    for (int i = 0; i < 3; ++i) (w * w).sum().backward();
    CHECK(w.grad().at({0}) == doctest::Approx(6.0));
  });
  worker.join();
  CHECK(live_nodes() == nodes_before);
}
