#include "tapegrad/nn/layers.h"

#include <string>
#include <utility>

#include "tapegrad/autograd/format.h"
#include "tapegrad/nn/linear.h"

namespace tapegrad::nn {

namespace {

void check_probability(double p, const char* module) {
  // Written as a negated range test so that NaN is rejected too.
  if (!(p >= 0.0 && p <= 1.0))
    throw ValueError(std::string(module) + ": dropout probability p must be in [0, 1], got " + format_number(p));
}

}  // namespace

// ---------------------------------------------------------------- Embedding

Embedding::Embedding(std::int64_t num_embeddings, std::int64_t dim, Generator& gen,
                     std::optional<std::int64_t> padding_idx)
    : num_embeddings_(num_embeddings), dim_(dim) {
  if (num_embeddings <= 0 || dim <= 0)
    throw ValueError("Embedding: num_embeddings and dim must be positive, got " + std::to_string(num_embeddings) +
                     " and " + std::to_string(dim));
  if (padding_idx) {
    const std::int64_t p = *padding_idx;
    if (p < -num_embeddings || p >= num_embeddings)
      throw ValueError("Embedding: padding_idx " + std::to_string(p) + " must be within [" +
                       std::to_string(-num_embeddings) + ", " + std::to_string(num_embeddings) + ")");
    padding_idx_ = p < 0 ? p + num_embeddings : p;
  }
  Tensor w = randn({num_embeddings, dim}, gen);  // w: (V, D)
  // The padding row starts at zero and, since it never receives gradient, stays there.
  // (copy_ rather than fill_: Tensor::fill_ currently ignores a view's storage offset.)
  if (padding_idx_) w.select(0, *padding_idx_).copy_(zeros({dim}));
  weight_ = register_parameter("weight", w);
}

Tensor Embedding::forward(const Tensor& indices) { return embedding(weight_, indices, padding_idx_); }

// ---------------------------------------------------------------- LayerNorm

LayerNorm::LayerNorm(const Shape& normalized_shape, double eps, bool elementwise_affine)
    : normalized_shape_(normalized_shape), eps_(eps) {
  bool positive = !normalized_shape.empty();
  for (std::int64_t n : normalized_shape) positive = positive && n > 0;
  if (!positive)
    throw ValueError("LayerNorm: normalized_shape must be non-empty with positive sizes, got " +
                     normalized_shape.str());
  if (!(eps >= 0.0)) throw ValueError("LayerNorm: eps must be >= 0, got " + format_number(eps));
  if (elementwise_affine) {
    weight_ = register_parameter("weight", ones(normalized_shape));
    bias_ = register_parameter("bias", zeros(normalized_shape));
  }
}

Tensor LayerNorm::forward(const Tensor& x) { return layer_norm(x, normalized_shape_, weight_, bias_, eps_); }

// ---------------------------------------------------------------- RMSNorm

RMSNorm::RMSNorm(std::int64_t dim, double eps, bool elementwise_affine) : dim_(dim), eps_(eps) {
  if (dim <= 0) throw ValueError("RMSNorm: dim must be positive, got " + std::to_string(dim));
  if (!(eps >= 0.0)) throw ValueError("RMSNorm: eps must be >= 0, got " + format_number(eps));
  if (elementwise_affine) weight_ = register_parameter("weight", ones({dim}));
}

Tensor RMSNorm::forward(const Tensor& x) {
  if (x.dim() == 0 || x.shape().back() != dim_)
    throw ShapeError("RMSNorm: expected input with last dimension " + std::to_string(dim_) + ", got shape " +
                     x.shape().str());
  // x: (..., D); rms: (..., 1). Composed from ops, so the gradient comes from the tape.
  const Tensor rms = sqrt(mean(x * x, {-1}, /*keepdim=*/true) + eps_);
  const Tensor y = x / rms;
  return weight_.defined() ? y * weight_ : y;
}

// ---------------------------------------------------------------- Dropout and activations

Dropout::Dropout(double p, std::uint64_t seed) : p_(p), gen_(seed) {
  check_probability(p, "Dropout");
  register_generator("generator", gen_);
}

Tensor Dropout::forward(const Tensor& x) { return dropout(x, p_, is_training(), gen_); }

Tensor ReLU::forward(const Tensor& x) { return relu(x); }

Tensor GELU::forward(const Tensor& x) { return gelu(x, approximate_); }

Tensor SiLU::forward(const Tensor& x) { return silu(x); }

Tensor activate(const Tensor& x, Activation activation) {
  switch (activation) {
    case Activation::ReLU:
      return relu(x);
    case Activation::GELU:
      return gelu(x);
    case Activation::SiLU:
      return silu(x);
  }
  throw ValueError("activate: unknown activation " + std::to_string(static_cast<int>(activation)));
}

// ---------------------------------------------------------------- Sequential

Sequential::Sequential(const std::vector<std::shared_ptr<UnaryModule>>& modules) {
  for (const auto& module : modules) push_back(module);
}

void Sequential::push_back(std::shared_ptr<UnaryModule> module) {
  if (!module) throw ValueError("Sequential: cannot add a null module at index " + std::to_string(modules_.size()));
  modules_.push_back(register_module(std::to_string(modules_.size()), std::move(module)));
}

const std::shared_ptr<UnaryModule>& Sequential::at(std::size_t index) const {
  if (index >= modules_.size())
    throw IndexError("Sequential: index " + std::to_string(index) + " is out of range for " +
                     std::to_string(modules_.size()) + " modules");
  return modules_[index];
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (const auto& module : modules_) h = module->forward(h);
  return h;
}

// ---------------------------------------------------------------- FeedForward

FeedForward::FeedForward(std::int64_t d_model, std::int64_t hidden, Activation activation, double dropout,
                         Generator& gen)
    : activation_(activation) {
  if (d_model <= 0 || hidden <= 0)
    throw ValueError("FeedForward: d_model and hidden must be positive, got " + std::to_string(d_model) + " and " +
                     std::to_string(hidden));
  check_probability(dropout, "FeedForward");
  fc1_ = register_module("fc1", std::make_shared<Linear>(d_model, hidden, gen));
  // The dropout mask stream is seeded from gen, so one seed reproduces the whole model.
  dropout_ = register_module("dropout", std::make_shared<Dropout>(dropout, gen.next_u64()));
  fc2_ = register_module("fc2", std::make_shared<Linear>(hidden, d_model, gen));
}

Tensor FeedForward::forward(const Tensor& x) {
  // x: (..., d_model) -> h: (..., hidden) -> (..., d_model)
  const Tensor h = activate(fc1_->forward(x), activation_);
  return fc2_->forward(dropout_->forward(h));
}

}  // namespace tapegrad::nn
