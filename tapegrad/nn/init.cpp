#include "tapegrad/nn/init.h"

#include <cmath>
#include <string>

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
void zeros_(const Tensor& t) {
  NoGradGuard guard;
  t.fill_(0.0);
}
void ones_(const Tensor& t) {
  NoGradGuard guard;
  t.fill_(1.0);
}

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

}  // namespace tapegrad::nn::init
