#include "tapegrad/nn/layers.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "tapegrad/autograd/format.h"
#include "tapegrad/nn/functional.h"
#include "tapegrad/nn/linear.h"
#include "tapegrad/nn/similarity.h"

namespace tapegrad::nn {

namespace {

void check_probability(double p, const char* module) {
  // Written as a negated range test so that NaN is rejected too.
  if (!(p >= 0.0 && p <= 1.0)) throw ValueError(message(module, ": dropout probability p must be in [0, 1], got ", p));
}

}  // namespace

// ---------------------------------------------------------------- Embedding

EmbeddingImpl::EmbeddingImpl(const EmbeddingOptions& options)
    : num_embeddings_(options.num_embeddings()), dim_(options.embedding_dim()), sparse_(options.sparse()) {
  const std::int64_t num_embeddings = num_embeddings_, dim = dim_;
  const std::optional<std::int64_t> padding_idx = options.padding_idx();
  if (num_embeddings <= 0 || dim <= 0)
    throw ValueError(message("Embedding: num_embeddings and dim must be positive, got ", num_embeddings, " and ", dim));
  if (padding_idx) {
    const std::int64_t p = *padding_idx;
    if (p < -num_embeddings || p >= num_embeddings)
      throw ValueError(
          message("Embedding: padding_idx ", p, " must be within [", -num_embeddings, ", ", num_embeddings, ")"));
    padding_idx_ = p < 0 ? p + num_embeddings : p;
  }
  if (options.init_scale() < 0 || !std::isfinite(options.init_scale()))
    throw ValueError(message("Embedding: init_scale must be finite and non-negative, got ", options.init_scale()));
  Generator& gen = generator_or_default(options.generator());
  Tensor w;  // (V, D)
  switch (options.init()) {
    case EmbeddingInit::Normal:
      w = randn({num_embeddings, dim}, gen);
      if (options.init_scale() > 0) w = w * options.init_scale();
      break;
    case EmbeddingInit::Uniform: {
      const double r = options.init_scale() > 0 ? options.init_scale() : 0.5 / static_cast<double>(dim);
      w = uniform({num_embeddings, dim}, -r, r, gen);
      break;
    }
    case EmbeddingInit::Zeros:
      w = zeros({num_embeddings, dim});
      break;
  }
  // The padding row starts at zero and, since it never receives gradient, stays there.
  // (copy_ rather than fill_: Tensor::fill_ currently ignores a view's storage offset.)
  if (padding_idx_) w.select(0, *padding_idx_).copy_(zeros({dim}));
  weight_ = register_parameter("weight", w);
}

Tensor EmbeddingImpl::forward(const Tensor& indices) { return embedding(weight_, indices, padding_idx_, sparse_); }

Embedding embedding_from_pretrained(const Tensor& weights, bool freeze, std::optional<std::int64_t> padding_idx,
                                    bool sparse) {
  if (weights.dim() != 2 || (weights.dtype() != kFloat32 && weights.dtype() != kFloat64))
    throw ShapeError(message("embedding_from_pretrained: expected float32 or float64 weights (V, D), got ",
                             dtype_name(weights.dtype()), " ", weights.shape().str()));
  Embedding e{EmbeddingOptions(weights.shape()[0], weights.shape()[1])
                  .init(EmbeddingInit::Zeros)
                  .padding_idx(padding_idx)
                  .sparse(sparse)};
  e->to(weights.dtype());
  {
    NoGradGuard no_grad;
    e->weight().copy_(weights);
  }
  if (freeze) e->weight().requires_grad_(false);
  return e;
}

// ---------------------------------------------------------------- LayerNorm

LayerNormImpl::LayerNormImpl(const LayerNormOptions& options) : options_(options) {
  const Shape& normalized_shape = options.normalized_shape();
  const double eps = options.eps();
  bool positive = !normalized_shape.empty();
  for (std::int64_t n : normalized_shape) positive = positive && n > 0;
  if (!positive)
    throw ValueError("LayerNorm: normalized_shape must be non-empty with positive sizes, got " +
                     normalized_shape.str());
  if (!(eps >= 0.0)) throw ValueError(message("LayerNorm: eps must be >= 0, got ", eps));
  if (options.elementwise_affine()) {
    weight_ = register_parameter("weight", ones(normalized_shape));
    bias_ = register_parameter("bias", zeros(normalized_shape));
  }
}

Tensor LayerNormImpl::forward(const Tensor& x) {
  return functional::layer_norm(x, options_.normalized_shape(), weight_, bias_, options_.eps());
}

// ---------------------------------------------------------------- RMSNorm

RMSNormImpl::RMSNormImpl(const RMSNormOptions& options) : options_(options) {
  const std::int64_t dim = options.dim();
  const double eps = options.eps();
  if (dim <= 0) throw ValueError(message("RMSNorm: dim must be positive, got ", dim));
  if (!(eps >= 0.0)) throw ValueError(message("RMSNorm: eps must be >= 0, got ", eps));
  if (options.elementwise_affine()) weight_ = register_parameter("weight", ones({dim}));
}

Tensor RMSNormImpl::forward(const Tensor& x) {
  const std::int64_t dim = options_.dim();
  if (x.dim() == 0 || x.shape().back() != dim)
    throw ShapeError(message("RMSNorm: expected input with last dimension ", dim, ", got shape ", x.shape().str()));
  return functional::rms_norm(x, Shape{dim}, weight_, options_.eps());
}

// ---------------------------------------------------------------- Dropout and activations

DropoutImpl::DropoutImpl(const DropoutOptions& options) : DropoutImpl(options, "Dropout") {}

DropoutImpl::DropoutImpl(const DropoutOptions& options, const char* name) : p_(options.p()) {
  check_probability(p_, name);
  gen_.manual_seed(generator_or_default(options.generator()).next_u64());
  register_generator("generator", gen_);
}

Tensor DropoutImpl::forward(const Tensor& x) { return functional::dropout(x, p_, is_training(), gen_); }

Tensor Dropout1dImpl::forward(const Tensor& x) { return functional::dropout1d(x, p(), is_training(), generator()); }

Tensor Dropout2dImpl::forward(const Tensor& x) { return functional::dropout2d(x, p(), is_training(), generator()); }
Tensor Dropout3dImpl::forward(const Tensor& x) { return functional::dropout3d(x, p(), is_training(), generator()); }

Tensor AlphaDropoutImpl::forward(const Tensor& x) {
  return functional::alpha_dropout(x, p(), is_training(), generator());
}

Tensor FeatureAlphaDropoutImpl::forward(const Tensor& x) {
  return functional::feature_alpha_dropout(x, p(), is_training(), generator());
}

RReLUImpl::RReLUImpl(const RReLUOptions& options) : options_(options) {
  if (!(options.lower() >= 0.0 && options.lower() <= options.upper()))
    throw ValueError(
        message("RReLU: expected 0 <= lower <= upper, got lower ", options.lower(), " and upper ", options.upper()));
  gen_.manual_seed(generator_or_default(options.generator()).next_u64());
  register_generator("generator", gen_);
}

Tensor RReLUImpl::forward(const Tensor& x) {
  return functional::rrelu(x, options_.lower(), options_.upper(), is_training(), gen_);
}

Tensor Softmax2dImpl::forward(const Tensor& x) {
  if (x.dim() != 3 && x.dim() != 4)
    throw ShapeError(message("Softmax2d: expected an input (N, C, H, W) or (C, H, W), got ", x.shape().str()));
  return softmax(x, -3);
}

Tensor LocalResponseNormImpl::forward(const Tensor& x) {
  return functional::local_response_norm(x, options_.size(), options_.alpha(), options_.beta(), options_.k());
}

Tensor ChannelShuffleImpl::forward(const Tensor& x) { return functional::channel_shuffle(x, groups_); }

Tensor UnflattenImpl::forward(const Tensor& x) {
  const std::int64_t axis = options_.axis() < 0 ? options_.axis() + x.dim() : options_.axis();
  if (axis < 0 || axis >= x.dim())
    throw IndexError(
        message("Unflatten: axis ", options_.axis(), " is out of range for an input of shape ", x.shape().str()));
  const Dims& sizes = options_.sizes();
  std::int64_t known = 1;
  int unknown = 0;
  bool overflow = false;
  for (const std::int64_t s : sizes) {
    if (s == -1) ++unknown;
    else if (s >= 0) overflow = overflow || __builtin_mul_overflow(known, s, &known);
  }
  const std::int64_t size = x.size(axis);
  const bool fits = std::all_of(sizes.begin(), sizes.end(), [](std::int64_t s) { return s >= 0 || s == -1; }) &&
                    !overflow && !sizes.empty() && unknown <= 1 &&
                    (unknown == 0 ? known == size : known > 0 && size % known == 0);
  if (!fits)
    throw ShapeError(message("Unflatten: axis ", axis, " of size ", size, " cannot be split into ", sizes.str()));
  Shape shape;
  for (int i = 0; i < x.dim(); ++i) {
    if (i != axis) {
      shape.push_back(x.size(i));
      continue;
    }
    for (const std::int64_t s : sizes) shape.push_back(s == -1 ? size / known : s);
  }
  return x.reshape(shape);
}

Tensor UnfoldImpl::forward(const Tensor& x) {
  return unfold(x, options_.kernel_size(), options_.dilation(), options_.padding(), options_.stride());
}

Tensor FoldImpl::forward(const Tensor& x) {
  return fold(x, options_.output_size(), options_.kernel_size(), options_.dilation(), options_.padding(),
              options_.stride());
}

Tensor ReLUImpl::forward(const Tensor& x) { return relu(x); }

Tensor GELUImpl::forward(const Tensor& x) { return gelu(x, approximate_); }

Tensor LeakyReLUImpl::forward(const Tensor& x) { return functional::leaky_relu(x, negative_slope_); }

Tensor SiLUImpl::forward(const Tensor& x) { return silu(x); }

Tensor ELUImpl::forward(const Tensor& x) { return functional::elu(x, alpha_); }

Tensor SELUImpl::forward(const Tensor& x) { return functional::selu(x); }

CELUImpl::CELUImpl(const CELUOptions& options) : alpha_(options.alpha()) {
  if (alpha_ == 0.0) throw ValueError("CELU: alpha must not be 0");
}

Tensor CELUImpl::forward(const Tensor& x) { return functional::celu(x, alpha_); }

SoftplusImpl::SoftplusImpl(const SoftplusOptions& options) : beta_(options.beta()), threshold_(options.threshold()) {
  if (beta_ == 0.0) throw ValueError("Softplus: beta must not be 0");
}

Tensor SoftplusImpl::forward(const Tensor& x) { return functional::softplus(x, beta_, threshold_); }

Tensor MishImpl::forward(const Tensor& x) { return functional::mish(x); }

HardtanhImpl::HardtanhImpl(const HardtanhOptions& options) : min_val_(options.min_val()), max_val_(options.max_val()) {
  if (max_val_ < min_val_)
    throw ValueError(message("Hardtanh: max_val ", max_val_, " is smaller than min_val ", min_val_));
}

Tensor HardtanhImpl::forward(const Tensor& x) { return functional::hardtanh(x, min_val_, max_val_); }
Tensor ReLU6Impl::forward(const Tensor& x) { return functional::relu6(x); }
Tensor HardsigmoidImpl::forward(const Tensor& x) { return functional::hardsigmoid(x); }
Tensor HardswishImpl::forward(const Tensor& x) { return functional::hardswish(x); }
Tensor LogSigmoidImpl::forward(const Tensor& x) { return functional::logsigmoid(x); }
Tensor SoftsignImpl::forward(const Tensor& x) { return functional::softsign(x); }
Tensor GLUImpl::forward(const Tensor& x) { return functional::glu(x, dim_); }

PReLUImpl::PReLUImpl(const PReLUOptions& options) {
  if (options.num_parameters() < 1)
    throw ValueError(message("PReLU: num_parameters must be at least 1, got ", options.num_parameters()));
  weight_ = register_parameter("weight", full({options.num_parameters()}, options.init()));
}

Tensor PReLUImpl::forward(const Tensor& x) { return functional::prelu(x, weight_); }

Tensor TanhImpl::forward(const Tensor& x) { return tanh(x); }

Tensor SigmoidImpl::forward(const Tensor& x) { return sigmoid(x); }

Tensor SoftmaxImpl::forward(const Tensor& x) { return softmax(x, axis_); }

Tensor LogSoftmaxImpl::forward(const Tensor& x) { return log_softmax(x, axis_); }

Tensor SoftminImpl::forward(const Tensor& x) { return functional::softmin(x, axis_); }

SoftshrinkImpl::SoftshrinkImpl(const ShrinkOptions& options) : lambd_(options.lambd()) {
  if (!(lambd_ >= 0.0)) throw ValueError(message("Softshrink: lambd must be at least 0, got ", lambd_));
}

Tensor SoftshrinkImpl::forward(const Tensor& x) { return functional::softshrink(x, lambd_); }
Tensor HardshrinkImpl::forward(const Tensor& x) { return functional::hardshrink(x, lambd_); }
Tensor TanhshrinkImpl::forward(const Tensor& x) { return functional::tanhshrink(x); }

Tensor ThresholdImpl::forward(const Tensor& x) {
  return functional::threshold(x, options_.threshold(), options_.value());
}

Tensor PairwiseDistanceImpl::forward(const Tensor& x1, const Tensor& x2) {
  return functional::pairwise_distance(x1, x2, options_.p(), options_.eps(), options_.keepdim());
}

Tensor CosineSimilarityImpl::forward(const Tensor& x1, const Tensor& x2) {
  return cosine_similarity(x1, x2, options_.axis(), options_.eps());
}

Tensor IdentityImpl::forward(const Tensor& x) { return x; }

Tensor FlattenImpl::forward(const Tensor& x) { return flatten(x, start_axis_, end_axis_); }

Tensor activate(const Tensor& x, Activation activation) {
  switch (activation) {
    case Activation::ReLU:
      return relu(x);
    case Activation::GELU:
      return gelu(x);
    case Activation::SiLU:
      return silu(x);
  }
  throw ValueError(message("activate: unknown activation ", static_cast<int>(activation)));
}

// ---------------------------------------------------------------- Sequential

void SequentialImpl::push_back(std::shared_ptr<UnaryModule> module) {
  if (!module) throw ValueError(message("Sequential: cannot add a null module at index ", modules_.size()));
  modules_.push_back(register_module(std::to_string(modules_.size()), std::move(module)));
}

const std::shared_ptr<UnaryModule>& SequentialImpl::at(std::size_t index) const {
  if (index >= modules_.size())
    throw IndexError(message("Sequential: index ", index, " is out of range for ", modules_.size(), " modules"));
  return modules_[index];
}

Tensor SequentialImpl::forward(const Tensor& x) {
  Tensor h = x;
  for (const auto& module : modules_) h = (*module)(h);  // with each module's hooks
  return h;
}

// ---------------------------------------------------------------- FeedForward

FeedForwardImpl::FeedForwardImpl(const FeedForwardOptions& options) : activation_(options.activation()) {
  const std::int64_t d_model = options.d_model(), hidden = options.hidden();
  const double dropout = options.dropout();
  Generator& gen = generator_or_default(options.generator());
  if (d_model <= 0 || hidden <= 0)
    throw ValueError(message("FeedForward: d_model and hidden must be positive, got ", d_model, " and ", hidden));
  check_probability(dropout, "FeedForward");
  fc1_ = register_module("fc1", Linear(LinearOptions(d_model, hidden).generator(&gen)));
  // The dropout mask stream is seeded from gen, so one seed reproduces the whole model.
  dropout_ = register_module("dropout", Dropout(DropoutOptions(dropout).generator(&gen)));
  fc2_ = register_module("fc2", Linear(LinearOptions(hidden, d_model).generator(&gen)));
}

Tensor FeedForwardImpl::forward(const Tensor& x) {
  // x: (..., d_model) -> h: (..., hidden) -> (..., d_model)
  const Tensor h = activate(fc1_(x), activation_);
  return fc2_(dropout_(h));
}

}  // namespace tapegrad::nn
