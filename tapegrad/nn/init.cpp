#include "tapegrad/nn/init.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace tapegrad::nn::init {

namespace {

// Writes `values` (same shape, any dtype) into t without recording.
void assign(const Tensor& t, const Tensor& values) {
  NoGradGuard guard;
  t.copy_(values);
}

}  // namespace

std::pair<std::int64_t, std::int64_t> fans(const Tensor& t) {
  if (t.dim() < 2)
    throw ShapeError("init: fan in and fan out need a tensor with at least 2 dimensions, got shape " + t.shape().str());
  const std::int64_t receptive = t.numel() / (t.shape()[0] * t.shape()[1] == 0 ? 1 : t.shape()[0] * t.shape()[1]);
  return {t.shape()[1] * receptive, t.shape()[0] * receptive};
}

void uniform_(const Tensor& t, double low, double high, Generator& gen) {
  assign(t, uniform(t.shape(), low, high, gen, t.dtype()));
}
void normal_(const Tensor& t, double mean, double std, Generator& gen) {
  assign(t, normal(t.shape(), mean, std, gen, t.dtype()));
}
void constant_(const Tensor& t, double value) {
  NoGradGuard guard;
  t.fill_(value);
}
void zeros_(const Tensor& t) { constant_(t, 0.0); }
void ones_(const Tensor& t) { constant_(t, 1.0); }

void xavier_uniform_(const Tensor& t, Generator& gen, double gain) {
  const auto [fan_in, fan_out] = fans(t);
  const double a = gain * std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  uniform_(t, -a, a, gen);
}

void xavier_normal_(const Tensor& t, Generator& gen, double gain) {
  const auto [fan_in, fan_out] = fans(t);
  normal_(t, 0.0, gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out)), gen);
}

namespace {

double kaiming_std(const Tensor& t, double a, FanMode mode) {
  const auto [fan_in, fan_out] = fans(t);
  const double fan = static_cast<double>(mode == FanMode::FanIn ? fan_in : fan_out);
  if (fan == 0) throw ValueError("init: kaiming initialisation of a tensor with zero fan, shape " + t.shape().str());
  const double gain = std::sqrt(2.0 / (1.0 + a * a));
  return gain / std::sqrt(fan);
}

}  // namespace

void kaiming_uniform_(const Tensor& t, Generator& gen, double a, FanMode mode) {
  const double bound = std::sqrt(3.0) * kaiming_std(t, a, mode);
  uniform_(t, -bound, bound, gen);
}

void kaiming_normal_(const Tensor& t, Generator& gen, double a, FanMode mode) {
  normal_(t, 0.0, kaiming_std(t, a, mode), gen);
}

void trunc_normal_(const Tensor& t, double mean, double std, double a, double b, Generator& gen) {
  if (!(std > 0.0) || !std::isfinite(std))
    throw ValueError(message("init: trunc_normal_ needs a finite std > 0, got ", std));
  if (!(a < b)) throw ValueError(message("init: trunc_normal_ needs a < b, got a ", a, " and b ", b));
  // The bounds must leave the normal a fair chance: below 1e-4 of its mass rejection would spin.
  const double mass =
      0.5 * (std::erf((b - mean) / (std * std::sqrt(2.0))) - std::erf((a - mean) / (std * std::sqrt(2.0))));
  if (!(mass >= 1e-4))
    throw ValueError(message("init: trunc_normal_'s bounds [", a, ", ", b, "] hold ", mass, " of N(", mean, ", ", std,
                             "^2); at least 1e-4 is needed"));
  // Rejection: each value is drawn from N(mean, std^2) until it falls in [a, b], which is exactly the
  // truncated distribution.
  std::vector<double> values(static_cast<std::size_t>(t.numel()));
  for (double& v : values) {
    do v = mean + std * gen.normal();
    while (v < a || v > b);
  }
  assign(t, from_vector(values, t.shape()).to(t.dtype()));
}

void orthogonal_(const Tensor& t, Generator& gen, double gain) {
  if (t.dim() < 2)
    throw ShapeError("init: orthogonal_ needs a tensor with at least 2 dimensions, got shape " + t.shape().str());
  const std::int64_t rows = t.size(0), cols = t.numel() / std::max<std::int64_t>(rows, 1);
  if (t.numel() == 0) return;
  // torch's recipe: a standard normal (rows, cols) matrix, transposed when it is wide, made
  // orthonormal by a QR factorisation with R's diagonal positive. Gram-Schmidt (modified, in double)
  // gives that Q directly: the columns of the tall matrix in turn, each stripped of its components
  // along the ones before and scaled to length 1.
  const bool wide = rows < cols;
  const std::int64_t n = wide ? cols : rows, k = wide ? rows : cols;  // the tall matrix is (n, k)
  std::vector<double> m(static_cast<std::size_t>(n * k));             // m: (n, k), row-major
  for (double& v : m) v = gen.normal();
  for (std::int64_t j = 0; j < k; ++j) {
    for (std::int64_t i = 0; i < j; ++i) {
      double dot = 0.0;
      for (std::int64_t r = 0; r < n; ++r) dot += m[r * k + i] * m[r * k + j];
      for (std::int64_t r = 0; r < n; ++r) m[r * k + j] -= dot * m[r * k + i];
    }
    double length = 0.0;
    for (std::int64_t r = 0; r < n; ++r) length += m[r * k + j] * m[r * k + j];
    length = std::sqrt(length);
    for (std::int64_t r = 0; r < n; ++r) m[r * k + j] /= length;
  }
  for (double& v : m) v *= gain;  // after the loop: the projections above need unit columns
  Tensor q = from_vector(m, {n, k});
  if (wide) q = q.transpose(0, 1);
  assign(t, q.reshape(t.shape()).to(t.dtype()));
}

}  // namespace tapegrad::nn::init
