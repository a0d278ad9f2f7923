#pragma once
// Helpers shared by the test files.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "tapegrad/autograd/autograd.h"
#include "tapegrad/nn/transformer.h"

namespace tapegrad::testing {

// A fresh directory under /tmp, removed with its files at scope exit.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    char tmpl[] = "/tmp/tapegrad_test_XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string str() const { return path.string(); }
  std::string file(const std::string& name) const { return (path / name).string(); }
  int count_files() const {
    return static_cast<int>(
        std::distance(std::filesystem::directory_iterator(path), std::filesystem::directory_iterator()));
  }
};

// Transformer layer options of the given sizes: pre-norm, ReLU, eps 1e-5, no dropout unless given
// (the configuration the tests were written for; PyTorch's defaults are post-norm with dropout 0.1).
inline nn::TransformerLayerOptions layer_options(std::int64_t d_model, std::int64_t num_heads, std::int64_t ff_hidden,
                                                 double dropout = 0.0) {
  return nn::TransformerLayerOptions(d_model, num_heads)
      .dim_feedforward(ff_hidden)
      .dropout(dropout)
      .activation(nn::Activation::ReLU)
      .norm_first(true)
      .layer_norm_eps(1e-5);
}

// Writes bytes to path, replacing the file.
inline void write_text(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  REQUIRE(out.good());
}

// The whole file at path ("" when it cannot be read).
inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A (2, 3, 4) float64 input with distinct entries (no ties, so max/min are differentiable).
inline Tensor distinct_3d() {
  Generator gen(11);
  return randn({2, 3, 4}, gen, kFloat64);
}

// Checks that every element of a equals the matching element of b within a relative tolerance
// (exactly when tol is 0).
inline void check_close(const Tensor& a, const Tensor& b, double tol) {
  REQUIRE(a.shape() == b.shape());
  const std::vector<double> va = a.to_vector<double>();
  const std::vector<double> vb = b.to_vector<double>();
  for (std::size_t i = 0; i < va.size(); ++i) {
    INFO("element " << i);
    if (tol == 0) CHECK(va[i] == vb[i]);
    else CHECK(va[i] == doctest::Approx(vb[i]).epsilon(tol));
  }
}

inline bool any_nan(const Tensor& t) {
  for (double v : t.to_vector<double>())
    if (std::isnan(v)) return true;
  return false;
}

// The largest |a - b| over the elements (the shapes must match).
// The message of the tapegrad::Error fn throws, or "no error" when it throws none.
inline std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

inline double max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  double m = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

// The names of named tensors, in order.
inline std::vector<std::string> names(const NamedTensors& named) {
  std::vector<std::string> out;
  for (const auto& entry : named) out.push_back(entry.first);
  return out;
}

// Runs gradcheck and gradgradcheck (first and second derivatives) and fails the current test
// with their reports when either does not pass.
inline void check_gradients(const GradcheckFunction& f, const TensorList& inputs, const GradcheckOptions& options = {},
                            const TensorList& parameters = {}) {
  const GradcheckResult first = gradcheck(f, inputs, options, parameters);
  CHECK_MESSAGE(first.passed, first.message());
  const GradcheckResult second = gradgradcheck(f, inputs, options, parameters);
  CHECK_MESSAGE(second.passed, "second order: " << second.message());
}

// The same with named parameters (module.named_parameters()), so a report names the parameter.
inline void check_gradients(const GradcheckFunction& f, const TensorList& inputs, const NamedTensors& parameters,
                            const GradcheckOptions& options = {}) {
  const GradcheckResult first = gradcheck(f, inputs, parameters, options);
  CHECK_MESSAGE(first.passed, first.message());
  const GradcheckResult second = gradgradcheck(f, inputs, parameters, options);
  CHECK_MESSAGE(second.passed, "second order: " << second.message());
}

// First derivatives only, for a function that is not twice differentiable; `reason` says why
// (it is part of the test's source, for the reader).
inline void check_first_order_gradients(const char* reason, const GradcheckFunction& f, const TensorList& inputs,
                                        const GradcheckOptions& options = {}, const TensorList& parameters = {}) {
  INFO("first order only: " << reason);
  const GradcheckResult first = gradcheck(f, inputs, options, parameters);
  CHECK_MESSAGE(first.passed, first.message());
}

// Checks every element of t against expected (row-major) within tol; NaN and infinities exactly.
inline void check_values(const Tensor& t, const std::vector<double>& expected, double tol = 1e-6) {
  const std::vector<double> got = t.to_vector<double>();
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << " of " << t.str());
    if (std::isnan(expected[i])) CHECK(std::isnan(got[i]));
    else if (std::isinf(expected[i])) CHECK(got[i] == expected[i]);  // Approx's difference would be NaN
    else CHECK(got[i] == doctest::Approx(expected[i]).epsilon(tol));
  }
}

// The parameter of `module` named `name` (undefined when it has none).
inline Tensor parameter(const nn::Module& module, const std::string& name) {
  for (const auto& [n, p] : module.named_parameters())
    if (n == name) return p;
  return Tensor();
}

// Copies a model built with tie_embeddings into the same model built without: every weight, and
// for the untied "head" the shared table `table` with a zero bias, so both compute the same.
inline void copy_tied_into_untied(const nn::Module& tied, nn::Module& untied, const std::string& table) {
  CHECK(untied.load_state_dict(tied.state_dict(), /*strict=*/false).missing_keys ==
        std::vector<std::string>{"head.weight", "head.bias"});
  NoGradGuard no_grad;
  parameter(untied, "head.weight").copy_(parameter(tied, table));
  parameter(untied, "head.bias").fill_(0.0);
}

}  // namespace tapegrad::testing
