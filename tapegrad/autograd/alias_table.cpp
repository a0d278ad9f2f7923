#include "tapegrad/autograd/alias_table.h"

#include <cmath>
#include <string>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/format.h"

namespace tapegrad {

AliasTable::AliasTable(const std::vector<double>& weights) {
  const std::size_t n = weights.size();
  if (n == 0) throw ValueError("AliasTable: no categories");
  double total = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(weights[i]) || weights[i] < 0)
      throw ValueError(
          message("AliasTable: weight ", i, " is ", weights[i], "; weights must be finite and non-negative"));
    total += weights[i];
  }
  if (total <= 0) throw ValueError("AliasTable: the weights sum to 0");
  if (!std::isfinite(total)) throw ValueError("AliasTable: the weights' sum overflows (scale them down)");
  probability_.resize(n);
  keep_.assign(n, 1.0);
  alias_.resize(n);
  // Columns of height n * p_i: a short column (< 1) is topped up from a tall one, which becomes its alias.
  std::vector<double> height(n);
  std::vector<std::size_t> small, large;
  for (std::size_t i = 0; i < n; ++i) {
    probability_[i] = weights[i] / total;
    height[i] = probability_[i] * static_cast<double>(n);
    alias_[i] = static_cast<std::int64_t>(i);
    (height[i] < 1.0 ? small : large).push_back(i);
  }
  while (!small.empty() && !large.empty()) {
    const std::size_t s = small.back(), l = large.back();
    small.pop_back();
    keep_[s] = height[s];
    alias_[s] = static_cast<std::int64_t>(l);
    height[l] -= 1.0 - height[s];
    if (height[l] < 1.0) {
      large.pop_back();
      small.push_back(l);
    }
  }
  // What is left is 1 up to rounding: those columns keep themselves.
  for (std::size_t i : small) keep_[i] = 1.0;
  for (std::size_t i : large) keep_[i] = 1.0;
}

namespace {

std::vector<double> weights_of(const Tensor& weights) {
  if (weights.dim() != 1 || (weights.dtype() != kFloat32 && weights.dtype() != kFloat64))
    throw ShapeError(message("AliasTable: expected 1-D float32 or float64 weights, got ", dtype_name(weights.dtype()),
                             " ", weights.shape().str()));
  return weights.to(kFloat64).contiguous().to_vector<double>();
}

}  // namespace

AliasTable::AliasTable(const Tensor& weights) : AliasTable(weights_of(weights)) {}

double AliasTable::probability(std::int64_t i) const {
  if (i < 0 || i >= size())
    throw IndexError(message("AliasTable::probability: category ", i, " is outside [0, ", size(), ")"));
  return probability_[static_cast<std::size_t>(i)];
}

Tensor AliasTable::sample(const Shape& shape, Generator& gen) const {
  std::vector<std::int64_t> draws(static_cast<std::size_t>(shape.numel()));
  for (std::int64_t& d : draws) d = sample(gen);
  return from_vector(draws, shape);
}

}  // namespace tapegrad
