// The autograd engine: accumulation, ordering, retain_graph, release, no-grad, detach,
// retain_grad, long chains and memory.

#include <doctest/doctest.h>

#include <cmath>

#include "tapegrad/autograd/autograd.h"

using namespace tapegrad;

TEST_CASE("engine: a tensor used in several places accumulates its gradient") {
  Tensor x = tensor({1.0, 2.0, -3.0}, kFloat64).requires_grad_();
  // y = x*x + 3x + x*x*x: dy/dx = 2x + 3 + 3x^2
  Tensor y = (x * x + x * 3.0 + x * x * x).sum();
  y.backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{8.0, 19.0, 24.0});
}

TEST_CASE("engine: a diamond graph passes the summed gradient through the shared node") {
  Tensor x = scalar_tensor(0.5, kFloat64).requires_grad_();
  Tensor a = x.exp();  // shared by both branches
  Tensor y = a * a + a.tanh();
  y.backward();
  // dy/dx = (2a + (1 - tanh(a)^2)) * a
  const double av = std::exp(0.5);
  const double expected = (2 * av + (1 - std::tanh(av) * std::tanh(av))) * av;
  CHECK(x.grad().item() == doctest::Approx(expected).epsilon(1e-12));
}

TEST_CASE("engine: gradients accumulate across backward calls until zero_grad") {
  Tensor w = tensor({1.0, 2.0}).requires_grad_();
  (w * 3.0).sum().backward();
  (w * 3.0).sum().backward();
  CHECK(w.grad().to_vector<float>() == std::vector<float>{6, 6});
  Tensor buffer = w.grad();
  w.zero_grad();
  CHECK(w.grad().to_vector<float>() == std::vector<float>{0, 0});
  CHECK(w.grad().impl() == buffer.impl());  // zeroed in place, buffer kept
  w.zero_grad(/*set_to_none=*/true);
  CHECK_FALSE(w.grad().defined());
}

TEST_CASE("engine: backward from a non-scalar takes an upstream gradient of its shape") {
  Tensor x = tensor({1.0, 2.0, 3.0}).requires_grad_();
  Tensor y = x * x;
  y.backward(tensor({1.0, 0.5, -1.0}));
  CHECK(x.grad().to_vector<float>() == std::vector<float>{2, 2, -6});
  CHECK_THROWS_WITH_AS((x * x).backward(),
                       "backward: a gradient is implied only for a one-element output; got shape (3), so pass a "
                       "gradient of that shape",
                       GraphError);
  CHECK_THROWS_WITH_AS((x * x).backward(ones({2})),
                       "backward: gradient of shape (2) (float32) for a tensor of shape (3) (float32)", ShapeError);
  CHECK_THROWS_WITH_AS(ones({2}).sum().backward(), "backward: the tensor does not require grad and has no grad_fn",
                       GraphError);
}

TEST_CASE("engine: the graph is released after backward unless retain_graph") {
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  Tensor y = (x.exp() * 2.0).sum();
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();  // second pass works, and releases
  CHECK(x.grad().at({0}) == doctest::Approx(4 * std::exp(1.0)));
  CHECK_THROWS_WITH_AS(y.backward(),
                       "backward: the graph through sum has already been released by an earlier backward; pass "
                       "retain_graph=true to that backward to go through the graph again",
                       GraphError);
}

TEST_CASE("engine: release frees the tensors saved for backward") {
  Tensor x = randn({64, 64}, *std::make_unique<Generator>(0)).requires_grad_();
  const std::int64_t impls_before = live_tensor_impls();
  Tensor y = (x.exp() * x.tanh()).sum();  // saves exp's output, tanh's output and mul's operands
  const std::int64_t impls_with_graph = live_tensor_impls();
  y.backward();
  const std::int64_t impls_after = live_tensor_impls();
  CHECK(impls_with_graph > impls_before);
  CHECK(impls_after < impls_with_graph);
}

TEST_CASE("engine: no graph objects outlive a training loop") {
  Generator gen(0);
  Tensor w = randn({8, 8}, gen).requires_grad_();
  Tensor x = randn({4, 8}, gen);
  auto step = [&] {
    Tensor loss = (x.matmul(w).tanh() * x.matmul(w)).mean();
    loss.backward();
    NoGradGuard guard;
    w.add_(w.grad(), -0.01);
    w.zero_grad();
  };
  step();
  const std::int64_t nodes = live_nodes();
  const std::int64_t impls = live_tensor_impls();
  for (int i = 0; i < 200; ++i) step();
  CHECK(live_nodes() == nodes);
  CHECK(live_tensor_impls() == impls);
}

TEST_CASE("engine: a 100,000-op chain backpropagates and is freed without recursion") {
  const std::int64_t nodes_before = live_nodes();
  {
    Tensor x = scalar_tensor(1.0, kFloat64).requires_grad_();
    Tensor y = x;
    for (int i = 0; i < 100000; ++i) y = y * 1.00001;
    CHECK(live_nodes() - nodes_before == 100000);
    y.backward();
    CHECK(x.grad().item() == doctest::Approx(std::pow(1.00001, 100000)).epsilon(1e-9));
  }
  CHECK(live_nodes() == nodes_before);
  {
    // Freed without backward ever running (the graph still holds every closure).
    Tensor x = scalar_tensor(1.0).requires_grad_();
    Tensor y = x;
    for (int i = 0; i < 100000; ++i) y = (y + 1.0).tanh();
  }
  CHECK(live_nodes() == nodes_before);
}

TEST_CASE("engine: no-grad scope records nothing and restores the mode") {
  Tensor w = ones({2}).requires_grad_();
  CHECK(is_grad_enabled());
  {
    NoGradGuard guard;
    CHECK_FALSE(is_grad_enabled());
    Tensor y = w * 2.0;
    CHECK_FALSE(y.requires_grad());
    CHECK(!y.grad_fn());
    { NoGradGuard nested; }
    CHECK_FALSE(is_grad_enabled());
    {
      GradModeGuard on(true);  // records again inside, as torch's enable_grad
      CHECK((w * 2.0).requires_grad());
    }
    CHECK_FALSE(is_grad_enabled());
  }
  CHECK(is_grad_enabled());
  CHECK((w * 2.0).requires_grad());
}

TEST_CASE("engine: detach cuts the graph and shares storage") {
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  Tensor d = (x * 3.0).detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(d.is_leaf());
  Tensor y = (x * d).sum();  // d is a constant here
  y.backward();
  CHECK(x.grad().to_vector<float>() == std::vector<float>{3, 6});
  Tensor shared = x.detach();
  CHECK(shared.data_ptr<float>() == x.data_ptr<float>());
}

TEST_CASE("engine: retain_grad keeps a non-leaf gradient, leaves only by default") {
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  Tensor h = x * 2.0;
  h.retain_grad();
  Tensor h2 = h * 1.0;
  (h * h2).sum().backward();
  CHECK(h.grad().to_vector<float>() == std::vector<float>{4, 8});
  CHECK_FALSE(h2.grad().defined());
}

TEST_CASE("engine: gradients flow through views into the base leaf") {
  Tensor x = tensor({{1, 2, 3}, {4, 5, 6}}, kFloat64).requires_grad_();
  Tensor t = x.transpose(0, 1);  // (3, 2), non-contiguous
  Tensor y = (t.narrow(0, 1, 2) * t.narrow(0, 1, 2)).sum();
  y.backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 4, 6, 0, 10, 12});
}

TEST_CASE("engine: in-place writes into a leaf that requires grad are refused under grad mode") {
  Tensor w = ones({2}).requires_grad_();
  CHECK_THROWS_WITH_AS(w.fill_(0.0),
                       "fill_: a leaf tensor that requires grad cannot be modified in place while grad mode is on (use "
                       "NoGradGuard, as optimisers do)",
                       GraphError);
  CHECK_THROWS_WITH_AS(
      w.narrow(0, 0, 1).fill_(0.0),
      "fill_: a view of a leaf tensor that requires grad (shape (2)) cannot be modified in place while "
      "grad mode is on (use NoGradGuard, as optimisers do)",
      GraphError);
  CHECK(w.to_vector<float>() == std::vector<float>{1, 1});
  {
    NoGradGuard guard;
    w.add_(ones({2}), -0.5);
  }
  CHECK(w.to_vector<float>() == std::vector<float>{0.5, 0.5});
  CHECK_THROWS_WITH_AS((w * 2.0).requires_grad_(false),
                       "requires_grad_: cannot turn off requires_grad of a non-leaf tensor (made by mul); use detach()",
                       GraphError);
}

TEST_CASE("engine: inputs that need no gradient get none") {
  Tensor a = ones({2}).requires_grad_();
  Tensor b = ones({2});
  (a * b).sum().backward();
  CHECK(a.grad().defined());
  CHECK_FALSE(b.grad().defined());
}
