// Every in-place write the library makes to an existing tensor's data bumps the version of the
// tensor's storage (Storage::version), so the engine can tell a tensor saved for backward was
// modified: optimiser steps, gradient clipping, Module::to, initialisers, state loading, and
// gradcheck's perturbations.

#include <doctest/doctest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tapegrad/autograd/autograd.h"
#include "tapegrad/autograd/storage.h"
#include "tapegrad/io/safetensors.h"
#include "tapegrad/nn/nn.h"
#include "tapegrad/optim/optim.h"
#include "tests/testing.h"

using namespace tapegrad;

namespace {

std::uint64_t version(const Tensor& t) { return t.impl()->storage->version(); }

}  // namespace

TEST_CASE("versions: every optimiser's step bumps each parameter it updates once, and only those") {
  const std::vector<std::pair<std::string, std::function<std::unique_ptr<optim::Optimizer>(const TensorList&)>>>
      optimizers{
          {"SGD", [](const TensorList& ps) { return std::make_unique<optim::SGD>(ps, optim::SGDOptions(0.1)); }},
          {"SGD momentum",
           [](const TensorList& ps) {
             return std::make_unique<optim::SGD>(ps, optim::SGDOptions(0.1).momentum(0.9).nesterov(true));
           }},
          {"Adam", [](const TensorList& ps) { return std::make_unique<optim::Adam>(ps, optim::AdamOptions(0.1)); }},
          {"AdamW amsgrad",
           [](const TensorList& ps) {
             return std::make_unique<optim::AdamW>(ps, optim::AdamWOptions(0.1).amsgrad(true));
           }},
      };
  for (const auto& [name, make] : optimizers) {
    CAPTURE(name);
    const Tensor a = randn({3, 4}).requires_grad_(), b = randn({5}).requires_grad_();
    const Tensor a_view = a.detach().select(0, 1);  // shares a's storage, so sees its version
    const std::unique_ptr<optim::Optimizer> opt = make({a, b});
    a.set_grad(ones({3, 4}));
    const std::uint64_t a0 = version(a), b0 = version(b);
    const std::vector<float> before = a.to_vector<float>();
    opt->step();
    CHECK(a.to_vector<float>() != before);  // the step did write a
    CHECK(version(a) == a0 + 1);
    CHECK(version(a_view) == a0 + 1);
    CHECK(version(b) == b0);  // no grad: not updated, not bumped
    b.set_grad(ones({5}));
    opt->step();
    CHECK(version(a) == a0 + 2);
    CHECK(version(b) == b0 + 1);
  }
}

TEST_CASE("versions: gradient clipping bumps the grads it rewrites") {
  const Tensor a = zeros({4}).requires_grad_(), b = zeros({2}).requires_grad_();
  a.set_grad(full({4}, 3.0));
  b.set_grad(full({2}, 4.0));
  std::uint64_t ga = version(a.grad()), gb = version(b.grad());
  // Norm sqrt(4 * 9 + 2 * 16) = 8.25 is below 10: nothing is written.
  optim::clip_grad_norm({a, b}, 10.0);
  CHECK(version(a.grad()) == ga);
  CHECK(version(b.grad()) == gb);
  optim::clip_grad_norm({a, b}, 1.0);
  CHECK(version(a.grad()) == ga + 1);
  CHECK(version(b.grad()) == gb + 1);
  ga = version(a.grad());
  optim::clip_grad_value({a, b}, 0.1);
  CHECK(version(a.grad()) == ga + 1);
  CHECK(a.grad().to_vector<float>() == std::vector<float>(4, 0.1f));
}

TEST_CASE("versions: Module::to, initialisers and state loading bump the tensors they write") {
  Generator gen(3);
  nn::Linear fc{nn::LinearOptions(3, 2).generator(&gen)};
  const Tensor w = fc->weight();
  std::uint64_t v = version(w);
  // Module::to swaps in a converted storage that continues the count.
  fc->to(kFloat64);
  CHECK(w.dtype() == kFloat64);
  CHECK(version(w) == v + 1);
  v = version(w);
  nn::init::normal_(w, 0.0, 1.0, gen);
  CHECK(version(w) == v + 1);
  v = version(w);
  const NamedTensors state = fc->state_dict();
  fc->load_state_dict(state);
  CHECK(version(w) == v + 1);
  v = version(w);
  testing::TempDir dir;
  io::save_safetensors(dir.file("fc.safetensors"), fc->state_dict());
  io::load_into(fc->named_parameters(), dir.file("fc.safetensors"));
  CHECK(version(w) == v + 1);
}

TEST_CASE("versions: gradcheck's perturbations of parameters count as writes, and it still passes") {
  Generator gen(4);
  for (const bool full_jacobian : {true, false}) {
    CAPTURE(full_jacobian);
    nn::Linear fc{nn::LinearOptions(3, 2).generator(&gen)};
    fc->to(kFloat64);
    const Tensor x = randn({4, 3}, gen, kFloat64);
    GradcheckOptions options;
    if (!full_jacobian) options.full_jacobian_limit = 0;  // random directions
    const std::uint64_t v = version(fc->weight());
    const GradcheckResult result =
        gradcheck([&](const TensorList& in) { return fc(in[0]).tanh(); }, {x}, fc->named_parameters(), options);
    CHECK_MESSAGE(result.passed, result.message());
    CHECK(version(fc->weight()) > v);
  }
}
