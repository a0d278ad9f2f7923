#pragma once
// Helpers shared by the test files.

#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "autograd/autograd.h"

namespace tapegrad::testing {

// Runs gradcheck and fails the current test with its report when it does not pass.
inline void check_gradients(const GradcheckFunction& f, const TensorList& inputs, const GradcheckOptions& options = {},
                            const TensorList& parameters = {}) {
  const GradcheckResult result = gradcheck(f, inputs, options, parameters);
  CHECK_MESSAGE(result.passed, result.message());
}

// Checks every element of t against expected (row-major) within tol.
inline void check_values(const Tensor& t, const std::vector<double>& expected, double tol = 1e-6) {
  const std::vector<double> got = t.to_vector<double>();
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << " of " << t.str());
    if (std::isnan(expected[i])) CHECK(std::isnan(got[i]));
    else CHECK(got[i] == doctest::Approx(expected[i]).epsilon(tol));
  }
}

}  // namespace tapegrad::testing
