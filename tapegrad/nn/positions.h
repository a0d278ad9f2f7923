#pragma once
// Position information for transformers: fixed sinusoidal encodings, learned position
// embeddings and rotary embeddings (RoPE).
//
//   nn::SinusoidalPositionalEncoding pe(/*max_len=*/512, /*dim=*/64);   // base 10000
//   Tensor h = pe(x);                       // x: (B, T, 64) -> x + PE[:T]
//   nn::RotaryEmbedding rope(/*head_dim=*/16, /*max_len=*/512);
//   Tensor q_rot = rope(q);                 // q: (B, H, T, 16), positions 0..T-1
//   Tensor k_t = rope(k_new, past);         // cached decoding: positions past..past+T-1

#include <cstdint>

#include "tapegrad/nn/module.h"

namespace tapegrad::nn {

struct SinusoidalPositionalEncodingOptions {
  SinusoidalPositionalEncodingOptions(std::int64_t max_len, std::int64_t dim) : max_len_(max_len), dim_(dim) {}
  TAPEGRAD_ARG(std::int64_t, max_len);
  TAPEGRAD_ARG(std::int64_t, dim);
  TAPEGRAD_ARG(double, base) = 10000.0;  // the wavelengths' base, 10000 in Vaswani et al.
};

// Fixed sinusoidal table (Vaswani et al. 2017), a buffer "pe": (max_len, dim):
//   PE[pos, 2i]   = sin(pos / base^(2i / dim))
//   PE[pos, 2i+1] = cos(pos / base^(2i / dim))
// An odd dim is allowed: the last column is then a sine (it has no cosine partner).
// forward(x: (..., T, dim), offset) = x + PE[offset : offset + T]; offset serves cached decoding.
// The table is in the model's dtype: computed in double and rounded once to the buffer's dtype, also
// after Module::to (a float64 model gets the double values, not widened float32 ones: converted_to
// refills the buffer). Rows are cast to x's dtype when they differ.
//   nn::SinusoidalPositionalEncoding pe{nn::SinusoidalPositionalEncodingOptions(512, 64).base(10000)};
class SinusoidalPositionalEncodingImpl : public UnaryModule {
 public:
  SinusoidalPositionalEncodingImpl(std::int64_t max_len, std::int64_t dim)
      : SinusoidalPositionalEncodingImpl(SinusoidalPositionalEncodingOptions(max_len, dim)) {}
  explicit SinusoidalPositionalEncodingImpl(const SinusoidalPositionalEncodingOptions& options);
  Tensor forward(const Tensor& x) override { return forward(x, 0); }
  Tensor forward(const Tensor& x, std::int64_t offset);
  // x + PE[positions]: positions Int64 (B, T) in [0, max_len) for x (B, T, dim), one row each.
  Tensor forward_at(const Tensor& x, const Tensor& positions);

  const Tensor& table() const { return table_; }  // (max_len, dim), in the buffer's dtype
  std::int64_t max_len() const { return options_.max_len(); }
  std::int64_t dim() const { return options_.dim(); }
  double base() const { return options_.base(); }

 protected:
  // Module::to converted the buffer from the rounded values: refill it from the doubles.
  void converted_to(DType dtype) override;

 private:
  SinusoidalPositionalEncodingOptions options_;
  Tensor table64_;  // (max_len, dim), float64: the values every dtype's table is rounded from
  Tensor table_;    // the buffer "pe"
};
TAPEGRAD_MODULE(SinusoidalPositionalEncoding);

struct LearnedPositionEmbeddingOptions {
  LearnedPositionEmbeddingOptions(std::int64_t max_len, std::int64_t dim) : max_len_(max_len), dim_(dim) {}
  TAPEGRAD_ARG(std::int64_t, max_len);
  TAPEGRAD_ARG(std::int64_t, dim);
  TAPEGRAD_ARG(Generator*, generator) = nullptr;  // initial weights (default generator if null)
};

// Learned absolute positions: a parameter "weight": (max_len, dim), initialised N(0, 1) like
// torch.nn.Embedding. forward(x: (..., T, dim), offset) = x + weight[offset : offset + T].
class LearnedPositionEmbeddingImpl : public UnaryModule {
 public:
  LearnedPositionEmbeddingImpl(std::int64_t max_len, std::int64_t dim)
      : LearnedPositionEmbeddingImpl(LearnedPositionEmbeddingOptions(max_len, dim)) {}
  explicit LearnedPositionEmbeddingImpl(const LearnedPositionEmbeddingOptions& options);
  Tensor forward(const Tensor& x) override { return forward(x, 0); }
  Tensor forward(const Tensor& x, std::int64_t offset);
  // x + weight[positions]: positions Int64 (B, T) in [0, max_len) for x (B, T, dim); only the
  // rows used get gradient.
  Tensor forward_at(const Tensor& x, const Tensor& positions);

  const Tensor& weight() const { return weight_; }
  std::int64_t max_len() const { return max_len_; }
  std::int64_t dim() const { return dim_; }

 private:
  std::int64_t max_len_;
  std::int64_t dim_;
  Tensor weight_;
};
TAPEGRAD_MODULE(LearnedPositionEmbedding);

struct RotaryEmbeddingOptions {
  RotaryEmbeddingOptions(std::int64_t head_dim, std::int64_t max_len) : head_dim_(head_dim), max_len_(max_len) {}
  TAPEGRAD_ARG(std::int64_t, head_dim);
  TAPEGRAD_ARG(std::int64_t, max_len);
  TAPEGRAD_ARG(double, base) = 10000.0;
};

// Rotary position embedding (Su et al. 2021), interleaved-pair convention: for position t and
// pair i = 0 .. Dh/2 - 1, with angle a = t * base^(-2i / Dh),
//   y[2i]   = x[2i] cos a - x[2i+1] sin a
//   y[2i+1] = x[2i] sin a + x[2i+1] cos a
// i.e. each pair is rotated by a. A rotation keeps norms, and q_t . k_s after rotation depends
// only on t - s. forward(x: (..., T, Dh), offset) uses positions offset .. offset + T - 1 (offset =
// number of cached positions when decoding). Composed from ops (strided slices, mul, sub/add,
// stack, reshape), so gradients flow to x. Dh must be even. No parameters; the cos/sin tables
// (max_len, Dh/2) are kept in float32 and float64, not in the state dict (they follow from
// head_dim, max_len and base).
class RotaryEmbeddingImpl : public Module {
 public:
  RotaryEmbeddingImpl(std::int64_t head_dim, std::int64_t max_len)
      : RotaryEmbeddingImpl(RotaryEmbeddingOptions(head_dim, max_len)) {}
  explicit RotaryEmbeddingImpl(const RotaryEmbeddingOptions& options);
  Tensor forward(const Tensor& x, std::int64_t offset = 0) const;

  std::int64_t head_dim() const { return head_dim_; }
  std::int64_t max_len() const { return max_len_; }
  double base() const { return base_; }

 private:
  std::int64_t head_dim_;
  std::int64_t max_len_;
  double base_;
  Tensor cos64_, sin64_;  // (max_len, Dh/2), float64
  Tensor cos32_, sin32_;  // the same in float32
};
TAPEGRAD_MODULE(RotaryEmbedding);

// Randomized positions (Ruoss et al. 2023): Int64 (rows, count), each row `count` distinct
// positions drawn uniformly from [0, range) and sorted, so a model trained on short sequences has
// seen every position of the range and learns order rather than absolute place. ValueError when
// count > range.
Tensor random_ordered_positions(std::int64_t rows, std::int64_t count, std::int64_t range, Generator& gen);

}  // namespace tapegrad::nn
