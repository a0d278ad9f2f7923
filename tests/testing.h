#pragma once
// Helpers shared by the test files.

#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "autograd/autograd.h"
#include "nn/transformer.h"

namespace tapegrad::testing {

// Transformer layer options of the given sizes, the other fields at their defaults.
inline nn::TransformerLayerOptions layer_options(std::int64_t d_model, std::int64_t num_heads, std::int64_t ff_hidden,
                                                 double dropout = 0.0) {
  nn::TransformerLayerOptions o;
  o.d_model = d_model;
  o.num_heads = num_heads;
  o.ff_hidden = ff_hidden;
  o.dropout = dropout;
  return o;
}

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
