// Sampling from tensors of probabilities (multinomial). Not differentiable: the result is indices.

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "tapegrad/autograd/format.h"
#include "tapegrad/autograd/ops.h"

namespace tapegrad {

Tensor multinomial(const Tensor& probs, std::int64_t num_samples, bool replacement, Generator& gen) {
  const char* op = "multinomial";
  if (probs.dim() != 1 && probs.dim() != 2)
    throw ShapeError(message(op, ": probabilities must be 1-D (C) or 2-D (N, C), got shape ", probs.shape().str()));
  dispatch_floating(probs.dtype(), op, [](auto) {});
  const std::int64_t rows = probs.dim() == 2 ? probs.shape()[0] : 1;
  const std::int64_t classes = probs.shape().back();
  if (num_samples <= 0) throw ValueError(message(op, ": num_samples must be positive, got ", num_samples));
  if (classes == 0) throw ValueError(message(op, ": there are no categories to sample from"));
  if (!replacement && num_samples > classes)
    throw ValueError(
        message(op, ": cannot draw ", num_samples, " samples without replacement from ", classes, " categories"));
  const std::vector<double> p = probs.contiguous().to_vector<double>();  // p: (rows, classes)
  // Every row is checked before any draw, so a bad row leaves the generator untouched.
  for (std::int64_t r = 0; r < rows; ++r) {
    double total = 0.0;
    std::int64_t positive = 0;
    for (std::int64_t c = 0; c < classes; ++c) {
      const double v = p[static_cast<std::size_t>(r * classes + c)];
      if (!(v >= 0.0) || std::isinf(v)) {
        throw ValueError(
            message(op, ": row ", r, " holds the probability ", v, " at ", c, " (must be finite and non-negative)"));
      }
      total += v;
      positive += v > 0.0;
    }
    if (!(total > 0.0)) throw ValueError(message(op, ": row ", r, " sums to 0"));
    if (!replacement && positive < num_samples)
      throw ValueError(message(op, ": row ", r, " has ", positive,
                               " categories of non-zero probability, fewer than the ", num_samples,
                               " samples to draw without replacement"));
  }
  std::vector<std::int64_t> out(static_cast<std::size_t>(rows * num_samples));
  std::vector<double> weights(static_cast<std::size_t>(classes));
  std::vector<double> cumulative(static_cast<std::size_t>(classes));
  for (std::int64_t r = 0; r < rows; ++r) {
    std::copy(p.begin() + r * classes, p.begin() + (r + 1) * classes, weights.begin());
    for (std::int64_t s = 0; s < num_samples; ++s) {
      // Without replacement the drawn category's weight drops to 0, so the sums are rebuilt for each draw.
      if (s == 0 || !replacement) std::partial_sum(weights.begin(), weights.end(), cumulative.begin());
      const double u = gen.uniform() * cumulative.back();
      // The first category whose cumulative sum exceeds u: a zero-weight category never is.
      auto it = std::upper_bound(cumulative.begin(), cumulative.end(), u);
      if (it == cumulative.end()) --it;  // u rounded up to the total
      while (weights[static_cast<std::size_t>(it - cumulative.begin())] == 0.0) --it;
      const std::int64_t c = it - cumulative.begin();
      out[static_cast<std::size_t>(r * num_samples + s)] = c;
      if (!replacement) weights[static_cast<std::size_t>(c)] = 0.0;
    }
  }
  if (probs.dim() == 1) return from_vector(out, Shape{num_samples});
  return from_vector(out, Shape{rows, num_samples});
}

}  // namespace tapegrad
