// custom_op (user-defined ops with a backward closure) and gradcheck's named-parameter reports.

#include <doctest/doctest.h>

#include <string>

#include "tapegrad/autograd/autograd.h"
#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::check_gradients;
using tapegrad::testing::check_values;

namespace {

// y = x^3 with dy/dx = 3 x^2.
Tensor cube(const Tensor& x) {
  return custom_op(
      "cube", {x}, [](const TensorList& in) { return in[0] * in[0] * in[0]; },
      [](const Tensor& grad, const TensorList& in, const Tensor&) -> TensorList {
        return {grad * 3.0 * in[0] * in[0]};
      });
}

// y = w * x (w broadcast over x's rows); the gradient of w is scaled by (1 + error) (0: correct).
Tensor scale(const Tensor& w, const Tensor& x, double error) {
  return custom_op(
      "scale", {w, x}, [](const TensorList& in) { return in[0] * in[1]; },
      [error](const Tensor& grad, const TensorList& in, const Tensor&) -> TensorList {
        return {sum_to(grad * in[1], in[0].shape()) * (1.0 + error), grad * in[0]};
      });
}

}  // namespace

TEST_CASE("custom_op: forward values, gradients pass gradcheck, the output's values reach the backward") {
  Generator gen(0);
  const Tensor x = randn({3, 4}, gen, kFloat64);
  check_values(cube(x), (x * x * x).to_vector<double>(), 1e-15);
  check_gradients([](const TensorList& in) { return cube(in[0]); }, {x});
  const Tensor w = randn({4}, gen, kFloat64);
  check_gradients([](const TensorList& in) { return scale(in[0], in[1], 0.0); }, {w, x});
  // y = exp(x), backward from the saved output: dy/dx = y.
  auto my_exp = [](const Tensor& t) {
    return custom_op(
        "my_exp", {t}, [](const TensorList& in) { return exp(in[0]); },
        [](const Tensor& grad, const TensorList&, const Tensor& out) -> TensorList { return {grad * out}; });
  };
  check_gradients([&](const TensorList& in) { return my_exp(in[0]).sum(); }, {x});
  // Nothing needs a gradient: nothing is recorded.
  CHECK(cube(x).is_leaf());
  // A wrong number of gradients is reported by the engine under the op's name.
  Tensor p = randn({2}, gen, kFloat64).requires_grad_();
  Tensor bad = custom_op(
      "two_grads", {p}, [](const TensorList& in) { return in[0] * 2.0; },
      [](const Tensor& g, const TensorList&, const Tensor&) -> TensorList {
        return {g, g};
      });
  CHECK_THROWS_WITH_AS(bad.sum().backward(), "backward: two_grads returned 2 gradients for 1 inputs", GraphError);
}

TEST_CASE("custom_op: refuses to replace a tensor's history") {
  Generator gen(1);
  Tensor x = randn({3}, gen, kFloat64).requires_grad_();
  const Tensor taped = x * 2.0;  // has a grad_fn (mul)
  auto identity_backward = [](const Tensor& g, const TensorList&, const Tensor&) -> TensorList { return {g}; };
  CHECK_THROWS_WITH_AS(custom_op(
                           "reuse", {x}, [&](const TensorList&) { return taped; }, identity_backward),
                       "custom_op 'reuse': forward returned a tensor that already has a grad_fn (mul); return a new "
                       "tensor, e.g. x.clone()",
                       ValueError);
  CHECK(std::string(taped.grad_fn()->name) == "mul");
  CHECK_THROWS_WITH_AS(custom_op(
                           "passthrough", {x}, [](const TensorList& in) { return in[0]; }, identity_backward),
                       "custom_op 'passthrough': forward returned a leaf that requires grad (an input returned "
                       "unchanged?); return a new tensor, e.g. x.clone()",
                       ValueError);
  CHECK(x.is_leaf());
  // The tape itself refuses too.
  CHECK_THROWS_WITH_AS(record("again", taped, {x}, [](const Tensor& g) -> TensorList { return {g}; }),
                       "again: cannot record the op on a tensor that already has a grad_fn (mul)", ValueError);
  CHECK_THROWS_WITH_AS(custom_op(
                           "", {x}, [](const TensorList& in) { return in[0].clone(); }, identity_backward),
                       "custom_op: the op needs a name", ValueError);
  // clone() is the way to return an input's values.
  Tensor y = custom_op(
      "copy", {x}, [](const TensorList& in) { return in[0].clone(); }, identity_backward);
  y.sum().backward();
  check_values(x.grad(), {1.0, 1.0, 1.0});
}

TEST_CASE("gradcheck: named parameters are reported by name") {
  Generator gen(2);
  const Tensor x = randn({3, 4}, gen, kFloat64);
  Tensor w = randn({4}, gen, kFloat64).requires_grad_();
  Tensor b = randn({4}, gen, kFloat64).requires_grad_();
  const NamedTensors params{{"fc1.weight", w}, {"fc1.bias", b}};
  auto model = [&](double error) {
    return [&w, &b, error](const TensorList& in) { return scale(w, in[0], error) + b; };
  };
  const GradcheckResult good = gradcheck(model(0.0), {x}, params);
  CHECK_MESSAGE(good.passed, good.message());
  REQUIRE(good.inputs.size() == 3);
  CHECK(good.inputs[0].name.empty());
  CHECK(good.inputs[1].name == "fc1.weight");
  CHECK(good.inputs[2].name == "fc1.bias");

  const GradcheckResult bad = gradcheck(model(0.5), {x}, params);
  CHECK_FALSE(bad.passed);
  CHECK(bad.inputs[0].passed);  // x's gradient is right
  CHECK_FALSE(bad.inputs[1].passed);
  CHECK(bad.inputs[2].passed);
  const std::string message = bad.message();
  CAPTURE(message);
  CHECK(message.find("parameter 'fc1.weight' (4): MISMATCH, worst element " +
                     std::to_string(bad.inputs[1].input_index) + " of d out[") != std::string::npos);
  CHECK(message.find("parameter 'fc1.bias' (4): ok") != std::string::npos);
  // The worst element's analytic value is 1.5 times the numeric one.
  CHECK(bad.inputs[1].analytic == doctest::Approx(1.5 * bad.inputs[1].numeric));

  const NamedTensors float32{{"fc2.weight", randn({4}, gen).requires_grad_()}};
  CHECK_THROWS_WITH_AS(
      gradcheck(model(0.0), {x}, float32),
      "gradcheck: parameter 'fc2.weight' must be a contiguous float64 leaf that requires grad (convert "
      "the module with to(kFloat64))",
      ValueError);
}
