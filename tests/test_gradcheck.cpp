// gradcheck itself: it must pass correct gradients and catch wrong ones, in both modes.

#include <doctest/doctest.h>

#include "tapegrad/autograd/autograd.h"

using namespace tapegrad;

namespace {

// y = 2x with a backward that is off by `error` (0 for the correct one).
Tensor scaled_by_two(const Tensor& x, double error) {
  Tensor out;
  {
    NoGradGuard guard;
    out = x * 2.0;
  }
  record("scaled_by_two", out, {x}, [error](const Tensor& g) -> TensorList { return {g * (2.0 + error)}; });
  return out;
}

}  // namespace

TEST_CASE("gradcheck: passes a correct gradient in both modes") {
  Generator gen(0);
  auto f = [](const TensorList& x) { return scaled_by_two(x[0], 0.0); };
  GradcheckResult small = gradcheck(f, {randn({3, 2}, gen)});
  CHECK_MESSAGE(small.passed, small.message());
  CHECK(small.full_jacobian);
  GradcheckResult large = gradcheck(f, {randn({300, 300}, gen)});
  CHECK_MESSAGE(large.passed, large.message());
  CHECK_FALSE(large.full_jacobian);
}

TEST_CASE("gradcheck: catches a wrong gradient and reports the worst element") {
  Generator gen(0);
  auto f = [](const TensorList& x) { return scaled_by_two(x[0], 0.01); };
  GradcheckResult small = gradcheck(f, {randn({3, 2}, gen)});
  CHECK_FALSE(small.passed);
  REQUIRE(small.inputs.size() == 1);
  CHECK(small.inputs[0].analytic == doctest::Approx(2.01));
  CHECK(small.inputs[0].numeric == doctest::Approx(2.0));
  CHECK(small.message().find("MISMATCH") != std::string::npos);
  GradcheckResult large = gradcheck(f, {randn({300, 300}, gen)});
  CHECK_FALSE(large.passed);
  CHECK_FALSE(large.full_jacobian);
}

TEST_CASE("gradcheck: runs in float64 and skips non-floating inputs") {
  Generator gen(0);
  Tensor seen_dtype;
  auto f = [&](const TensorList& x) {
    seen_dtype = x[0];
    return x[0] * x[1].to(kFloat64);
  };
  GradcheckResult r = gradcheck(f, {randn({4}, gen), arange(4)});
  CHECK_MESSAGE(r.passed, r.message());
  CHECK(seen_dtype.dtype() == kFloat64);
  CHECK(r.inputs[0].differentiated);
  CHECK_FALSE(r.inputs[1].differentiated);
  CHECK_THROWS_WITH_AS(gradcheck([](const TensorList& x) { return x[0].to(kFloat32); }, {randn({2}, gen)}),
                       "gradcheck: the function returned a float32 tensor; build the output from the float64 inputs it "
                       "is given",
                       TypeError);
}

TEST_CASE("gradcheck: an output that ignores an input has a zero gradient for it") {
  Generator gen(0);
  GradcheckResult r = gradcheck([](const TensorList& x) { return x[0] * 3.0; }, {randn({2}, gen), randn({2}, gen)});
  CHECK_MESSAGE(r.passed, r.message());
}

TEST_CASE("gradcheck: checks parameters that the function reads directly") {
  Generator gen(0);
  Tensor w = randn({3}, gen, kFloat64).requires_grad_();
  GradcheckResult good = gradcheck([&](const TensorList& x) { return (x[0] * w).tanh(); }, {randn({3}, gen)}, {}, {w});
  CHECK_MESSAGE(good.passed, good.message());
  REQUIRE(good.inputs.size() == 2);
  CHECK(good.inputs[1].differentiated);
  const std::vector<double> before = w.to_vector<double>();
  GradcheckResult bad =
      gradcheck([&](const TensorList& x) { return x[0] * scaled_by_two(w, 0.01); }, {randn({3}, gen)}, {}, {w});
  CHECK_FALSE(bad.passed);
  CHECK_FALSE(bad.inputs[1].passed);
  CHECK(w.to_vector<double>() == before);  // restored after perturbation
  CHECK_THROWS_WITH_AS(
      gradcheck([&](const TensorList& x) { return x[0]; }, {randn({3}, gen)}, {}, {ones({3})}),
      "gradcheck: parameter 0 must be a contiguous float64 leaf that requires grad (convert the module "
      "with to(kFloat64))",
      ValueError);
}
