#pragma once
// Layers with PyTorch's names and semantics: Embedding, LayerNorm, RMSNorm, Dropout, the
// activations ReLU / GELU / SiLU, Sequential and the position-wise FeedForward network.
//
//   Generator gen(0);
//   nn::Embedding tok(/*num_embeddings=*/100, /*dim=*/16, gen, /*padding_idx=*/0);
//   nn::LayerNorm norm(Shape{16});
//   nn::FeedForward ff(/*d_model=*/16, /*hidden=*/64, nn::Activation::GELU, /*dropout=*/0.1, gen);
//   Tensor h = tok(ids);          // ids: (B, T) Int64 -> h: (B, T, 16)
//   Tensor y = h + ff(norm(h));   // (B, T, 16)

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "tapegrad/nn/module.h"

namespace tapegrad::nn {

// Embedding: a lookup table weight (num_embeddings, dim), initialised N(0, 1) like
// torch.nn.Embedding. forward(indices: Int64 (...)) -> (..., dim). padding_idx (negative values
// count from the end, as in PyTorch) names a row that is zeroed at construction and never
// receives gradient. Out-of-range indices throw IndexError (from the embedding op).
class Embedding : public UnaryModule {
 public:
  Embedding(std::int64_t num_embeddings, std::int64_t dim, Generator& gen,
            std::optional<std::int64_t> padding_idx = std::nullopt);
  Tensor forward(const Tensor& indices) override;

  const Tensor& weight() const { return weight_; }
  std::int64_t num_embeddings() const { return num_embeddings_; }
  std::int64_t embedding_dim() const { return dim_; }
  std::optional<std::int64_t> padding_idx() const { return padding_idx_; }  // normalised to [0, V)

 private:
  std::int64_t num_embeddings_;
  std::int64_t dim_;
  std::optional<std::int64_t> padding_idx_;
  Tensor weight_;
};

// LayerNorm over the trailing axes normalized_shape (fused layer_norm op):
//   y = (x - mean) / sqrt(var + eps) * weight + bias,  var biased,  x: (..., *normalized_shape)
// weight starts at ones and bias at zeros; elementwise_affine = false registers neither.
class LayerNorm : public UnaryModule {
 public:
  explicit LayerNorm(const Shape& normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  explicit LayerNorm(std::int64_t dim, double eps = 1e-5, bool elementwise_affine = true)
      : LayerNorm(Shape{dim}, eps, elementwise_affine) {}
  Tensor forward(const Tensor& x) override;

  const Tensor& weight() const { return weight_; }  // undefined without affine
  const Tensor& bias() const { return bias_; }
  const Shape& normalized_shape() const { return normalized_shape_; }
  double eps() const { return eps_; }

 private:
  Shape normalized_shape_;
  double eps_;
  Tensor weight_;
  Tensor bias_;
};

// RMSNorm over the last axis (Zhang & Sennrich 2019), composed from differentiable ops:
//   y = x / sqrt(mean(x^2, last axis) + eps) * weight,  x: (..., dim), weight: (dim), ones at start.
// eps defaults to 1e-6 (the LLaMA value); torch.nn.RMSNorm's default is the dtype's machine epsilon.
class RMSNorm : public UnaryModule {
 public:
  explicit RMSNorm(std::int64_t dim, double eps = 1e-6, bool elementwise_affine = true);
  Tensor forward(const Tensor& x) override;

  const Tensor& weight() const { return weight_; }  // undefined without affine
  double eps() const { return eps_; }

 private:
  std::int64_t dim_;
  double eps_;
  Tensor weight_;
};

// Dropout: in training mode zeroes each element with probability p and scales the survivors by
// 1 / (1 - p); in eval mode the identity. The module owns its Generator, seeded at
// construction, so masks are reproducible from the seed and no outside generator must outlive it.
class Dropout : public UnaryModule {
 public:
  explicit Dropout(double p = 0.5, std::uint64_t seed = 0);
  Tensor forward(const Tensor& x) override;

  double p() const { return p_; }
  Generator& generator() { return gen_; }

 private:
  double p_;
  Generator gen_;
};

class ReLU : public UnaryModule {
 public:
  Tensor forward(const Tensor& x) override;
};

// GELU: x * Phi(x) (approximate None, with erf) or the tanh approximation.
class GELU : public UnaryModule {
 public:
  explicit GELU(GeluApproximation approximate = GeluApproximation::None) : approximate_(approximate) {}
  Tensor forward(const Tensor& x) override;

 private:
  GeluApproximation approximate_;
};

// SiLU (swish): x * sigmoid(x).
class SiLU : public UnaryModule {
 public:
  Tensor forward(const Tensor& x) override;
};

// Sequential: runs its modules in order; they are children named "0", "1", ... so parameter names
// read "0.weight", "2.bias" as in PyTorch. An empty Sequential is the identity.
class Sequential : public UnaryModule {
 public:
  Sequential() = default;
  explicit Sequential(const std::vector<std::shared_ptr<UnaryModule>>& modules);
  // Appends module as child std::to_string(size()); ValueError on a null pointer.
  void push_back(std::shared_ptr<UnaryModule> module);
  Tensor forward(const Tensor& x) override;

  std::size_t size() const { return modules_.size(); }
  // The module at index (IndexError when out of range).
  const std::shared_ptr<UnaryModule>& at(std::size_t index) const;

 private:
  std::vector<std::shared_ptr<UnaryModule>> modules_;
};

enum class Activation { ReLU, GELU, SiLU };
// The activation function named by `activation` (GELU exact, with erf).
Tensor activate(const Tensor& x, Activation activation);

// Position-wise feed-forward network:
//   y = fc2(dropout(act(fc1(x)))),  x: (..., d_model), fc1: d_model -> hidden, fc2: hidden -> d_model
// Children "fc1", "fc2" (Linear) and "dropout" (a Dropout seeded from gen).
class FeedForward : public UnaryModule {
 public:
  FeedForward(std::int64_t d_model, std::int64_t hidden, Activation activation, double dropout, Generator& gen);
  Tensor forward(const Tensor& x) override;

  Activation activation() const { return activation_; }

 private:
  Activation activation_;
  std::shared_ptr<UnaryModule> fc1_;
  std::shared_ptr<Dropout> dropout_;
  std::shared_ptr<UnaryModule> fc2_;
};

}  // namespace tapegrad::nn
