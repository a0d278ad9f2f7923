#pragma once
// Seeded initialisers, writing in place (not recorded on the tape), from a given generator or the
// default one. For a weight of shape
// (out, in, ...): fan_in = in * receptive, fan_out = out * receptive.
//   xavier_uniform_:  U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out))
//   xavier_normal_:   N(0, gain^2 * 2 / (fan_in + fan_out))
//   kaiming_uniform_: U(-b, b), b = gain * sqrt(3 / fan), gain = sqrt(2 / (1 + a^2)) for leaky ReLU slope a
//   kaiming_normal_:  N(0, gain^2 / fan)
//   trunc_normal_:    N(mean, std^2) restricted to [a, b];  orthogonal_: gain * an orthonormal matrix

#include "tapegrad/autograd/autograd.h"

namespace tapegrad::nn::init {

enum class FanMode { FanIn, FanOut };

void uniform_(const Tensor& t, double low, double high, Generator& gen);
void normal_(const Tensor& t, double mean, double std, Generator& gen);
void zeros_(const Tensor& t);
void ones_(const Tensor& t);
void xavier_uniform_(const Tensor& t, Generator& gen, double gain = 1.0);
void xavier_normal_(const Tensor& t, Generator& gen, double gain = 1.0);
void kaiming_uniform_(const Tensor& t, Generator& gen, double a = 0.0, FanMode mode = FanMode::FanIn);
void kaiming_normal_(const Tensor& t, Generator& gen, double a = 0.0, FanMode mode = FanMode::FanIn);
// Every entry value.
void constant_(const Tensor& t, double value);
// N(mean, std^2) truncated to [a, b] (torch's defaults: a = -2, b = 2, in absolute units), drawn by
// rejection. ValueError unless std > 0, a < b and [a, b] holds at least 1e-4 of the normal's mass.
void trunc_normal_(const Tensor& t, double mean, double std, double a, double b, Generator& gen);
// torch's orthogonal_: t viewed as (size(0), the rest) becomes gain times a matrix with orthonormal
// rows (when it is wide) or columns (when tall), uniformly distributed (the Q of a standard normal
// matrix's QR with R's diagonal positive). ShapeError for fewer than 2 dimensions.
void orthogonal_(const Tensor& t, Generator& gen, double gain = 1.0);

// The same, drawn from the calling thread's default generator (manual_seed(n) seeds it).
inline void uniform_(const Tensor& t, double low, double high) { uniform_(t, low, high, default_generator()); }
inline void normal_(const Tensor& t, double mean, double std) { normal_(t, mean, std, default_generator()); }
inline void xavier_uniform_(const Tensor& t, double gain = 1.0) { xavier_uniform_(t, default_generator(), gain); }
inline void xavier_normal_(const Tensor& t, double gain = 1.0) { xavier_normal_(t, default_generator(), gain); }
inline void kaiming_uniform_(const Tensor& t, double a = 0.0, FanMode mode = FanMode::FanIn) {
  kaiming_uniform_(t, default_generator(), a, mode);
}
inline void kaiming_normal_(const Tensor& t, double a = 0.0, FanMode mode = FanMode::FanIn) {
  kaiming_normal_(t, default_generator(), a, mode);
}
inline void trunc_normal_(const Tensor& t, double mean = 0.0, double std = 1.0, double a = -2.0, double b = 2.0) {
  trunc_normal_(t, mean, std, a, b, default_generator());
}
inline void orthogonal_(const Tensor& t, double gain = 1.0) { orthogonal_(t, default_generator(), gain); }

// (fan_in, fan_out) of a weight with at least two axes.
std::pair<std::int64_t, std::int64_t> fans(const Tensor& t);

}  // namespace tapegrad::nn::init
