#pragma once
// Layers with PyTorch's names, semantics and option defaults: Embedding, LayerNorm, RMSNorm,
// Dropout, the activations (ReLU, GELU, LeakyReLU, SiLU, ELU, SELU, CELU, Softplus, Mish, Hardtanh,
// ReLU6, Hardsigmoid, Hardswish, LogSigmoid, Softsign, GLU, PReLU, Tanh,
// Sigmoid, Softmax, LogSoftmax), Identity, Flatten, Sequential and the position-wise FeedForward
// network.
//
//   tapegrad::manual_seed(0);
//   nn::Embedding tok{nn::EmbeddingOptions(/*num_embeddings=*/100, /*embedding_dim=*/16).padding_idx(0)};
//   nn::LayerNorm norm(16);
//   nn::FeedForward ff{nn::FeedForwardOptions(/*d_model=*/16, /*hidden=*/64).activation(nn::Activation::GELU)};
//   Tensor h = tok(ids);          // ids: (B, T) Int64 -> h: (B, T, 16)
//   Tensor y = h + ff(norm(h));   // (B, T, 16)
//   nn::Sequential mlp(nn::Linear(16, 64), nn::GELU(), nn::Linear(64, 16));

#include <cstdint>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "tapegrad/nn/linear.h"
#include "tapegrad/nn/module.h"

namespace tapegrad::nn {

// ---------------------------------------------------------------- Embedding

// How an Embedding's table starts: Normal N(0, init_scale^2) (init_scale 0 means 1, torch's
// default); Uniform U(-init_scale, init_scale) (0 means 0.5 / embedding_dim, word2vec.c's input
// vectors); Zeros (word2vec.c's output vectors). The padding row starts at zero whatever this says.
enum class EmbeddingInit { Normal, Uniform, Zeros };

struct EmbeddingOptions {
  EmbeddingOptions(std::int64_t num_embeddings, std::int64_t embedding_dim)
      : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {}
  TAPEGRAD_ARG(std::int64_t, num_embeddings);
  TAPEGRAD_ARG(std::int64_t, embedding_dim);
  TAPEGRAD_ARG(EmbeddingInit, init) = EmbeddingInit::Normal;
  TAPEGRAD_ARG(double, init_scale) = 0.0;
  // A row that is zeroed at construction and never receives gradient; negative values count from
  // the end, as in PyTorch.
  TAPEGRAD_ARG(std::optional<std::int64_t>, padding_idx) = std::nullopt;
  TAPEGRAD_ARG(Generator*, generator) = nullptr;  // the initial weights' source (default generator if null)
  // Row-sparse gradients (Tensor::sparse_grad): a backward touches only the rows it used, for
  // optim::SGD (without momentum or weight decay) and optim::SparseAdam.
  TAPEGRAD_ARG(bool, sparse) = false;
};

// Embedding: a lookup table weight (num_embeddings, dim), initialised N(0, 1) like
// torch.nn.Embedding (EmbeddingOptions::init chooses otherwise). forward(indices: Int64 (...)) -> (..., dim).
// Out-of-range indices throw IndexError (from the embedding op).
class EmbeddingImpl : public UnaryModule {
 public:
  EmbeddingImpl(std::int64_t num_embeddings, std::int64_t embedding_dim)
      : EmbeddingImpl(EmbeddingOptions(num_embeddings, embedding_dim)) {}
  explicit EmbeddingImpl(const EmbeddingOptions& options);
  Tensor forward(const Tensor& indices) override;

  const Tensor& weight() const { return weight_; }
  std::int64_t num_embeddings() const { return num_embeddings_; }
  std::int64_t embedding_dim() const { return dim_; }
  std::optional<std::int64_t> padding_idx() const { return padding_idx_; }  // normalised to [0, V)
  bool sparse() const { return sparse_; }

 private:
  std::int64_t num_embeddings_;
  std::int64_t dim_;
  std::optional<std::int64_t> padding_idx_;
  bool sparse_;
  Tensor weight_;
};
TAPEGRAD_MODULE(Embedding);

// torch.nn.Embedding.from_pretrained: an Embedding whose table is a copy of weights (V, D),
// floating point; frozen (no gradient) unless freeze is false. As in torch, the padding row keeps
// its pretrained values (it is not zeroed) and receives no gradient; sparse as
// EmbeddingOptions::sparse. ShapeError for another rank or dtype.
Embedding embedding_from_pretrained(const Tensor& weights, bool freeze = true,
                                    std::optional<std::int64_t> padding_idx = std::nullopt, bool sparse = false);

// ---------------------------------------------------------------- norms

struct LayerNormOptions {
  LayerNormOptions(Shape normalized_shape) : normalized_shape_(std::move(normalized_shape)) {}  // NOLINT
  LayerNormOptions(std::int64_t dim) : normalized_shape_(Shape{dim}) {}                         // NOLINT
  TAPEGRAD_ARG(Shape, normalized_shape);
  TAPEGRAD_ARG(double, eps) = 1e-5;
  TAPEGRAD_ARG(bool, elementwise_affine) = true;
};

// LayerNorm over the trailing axes normalized_shape (fused layer_norm op):
//   y = (x - mean) / sqrt(var + eps) * weight + bias,  var biased,  x: (..., *normalized_shape)
// weight starts at ones and bias at zeros; elementwise_affine = false registers neither.
class LayerNormImpl : public UnaryModule {
 public:
  explicit LayerNormImpl(const LayerNormOptions& options);
  explicit LayerNormImpl(std::int64_t dim) : LayerNormImpl(LayerNormOptions(dim)) {}
  Tensor forward(const Tensor& x) override;

  const Tensor& weight() const { return weight_; }  // undefined without affine
  const Tensor& bias() const { return bias_; }
  const Shape& normalized_shape() const { return options_.normalized_shape(); }
  double eps() const { return options_.eps(); }

 private:
  LayerNormOptions options_;
  Tensor weight_;
  Tensor bias_;
};
TAPEGRAD_MODULE(LayerNorm);

struct RMSNormOptions {
  RMSNormOptions(std::int64_t dim) : dim_(dim) {}  // NOLINT(google-explicit-constructor)
  TAPEGRAD_ARG(std::int64_t, dim);
  // 1e-6, the LLaMA value (torch 1.13 has no RMSNorm; later torch.nn.RMSNorm uses the dtype's epsilon).
  TAPEGRAD_ARG(double, eps) = 1e-6;
  TAPEGRAD_ARG(bool, elementwise_affine) = true;
};

// RMSNorm over the last axis (Zhang & Sennrich 2019), composed from differentiable ops:
//   y = x / sqrt(mean(x^2, last axis) + eps) * weight,  x: (..., dim), weight: (dim), ones at start.
class RMSNormImpl : public UnaryModule {
 public:
  explicit RMSNormImpl(const RMSNormOptions& options);
  explicit RMSNormImpl(std::int64_t dim) : RMSNormImpl(RMSNormOptions(dim)) {}
  Tensor forward(const Tensor& x) override;

  const Tensor& weight() const { return weight_; }  // undefined without affine
  double eps() const { return options_.eps(); }

 private:
  RMSNormOptions options_;
  Tensor weight_;
};
TAPEGRAD_MODULE(RMSNorm);

// ---------------------------------------------------------------- Dropout and activations

struct DropoutOptions {
  DropoutOptions(double p = 0.5) : p_(p) {}  // NOLINT(google-explicit-constructor)
  TAPEGRAD_ARG(double, p);
  // Seeds the module's own mask generator with one draw from *generator (default generator if null).
  TAPEGRAD_ARG(Generator*, generator) = nullptr;
};

// Dropout: in training mode zeroes each element with probability p and scales the survivors by
// 1 / (1 - p); in eval mode the identity. The module owns its mask Generator (registered as
// "generator", so a checkpoint keeps it), seeded at construction from the construction generator,
// so masks are reproducible from the seed and no outside generator must outlive the module.
class DropoutImpl : public UnaryModule {
 public:
  explicit DropoutImpl(const DropoutOptions& options = {});
  explicit DropoutImpl(double p) : DropoutImpl(DropoutOptions(p)) {}
  Tensor forward(const Tensor& x) override;

  double p() const { return p_; }
  Generator& generator() { return gen_; }

 protected:
  DropoutImpl(const DropoutOptions& options, const char* name);

 private:
  double p_;
  Generator gen_;
};
TAPEGRAD_MODULE(Dropout);

// Dropout1d, Dropout2d and Dropout3d: Dropout of whole channels (F::dropout1d / 2d / 3d), one draw
// per sample and channel; inputs (N, C, L) or (C, L), (N, C, H, W), and (N, C, D, H, W) or (C, D, H, W).
class Dropout1dImpl : public DropoutImpl {
 public:
  explicit Dropout1dImpl(const DropoutOptions& options = {}) : DropoutImpl(options, "Dropout1d") {}
  Tensor forward(const Tensor& x) override;
};
TAPEGRAD_MODULE(Dropout1d);

class Dropout2dImpl : public DropoutImpl {
 public:
  explicit Dropout2dImpl(const DropoutOptions& options = {}) : DropoutImpl(options, "Dropout2d") {}
  Tensor forward(const Tensor& x) override;
};
TAPEGRAD_MODULE(Dropout2d);

class Dropout3dImpl : public DropoutImpl {
 public:
  explicit Dropout3dImpl(const DropoutOptions& options = {}) : DropoutImpl(options, "Dropout3d") {}
  Tensor forward(const Tensor& x) override;
};
TAPEGRAD_MODULE(Dropout3d);

// AlphaDropout and FeatureAlphaDropout: F::alpha_dropout and F::feature_alpha_dropout with the
// module's p and mask generator, in training mode; the identity in eval mode.
class AlphaDropoutImpl : public DropoutImpl {
 public:
  explicit AlphaDropoutImpl(const DropoutOptions& options = {}) : DropoutImpl(options, "AlphaDropout") {}
  Tensor forward(const Tensor& x) override;
};
TAPEGRAD_MODULE(AlphaDropout);

class FeatureAlphaDropoutImpl : public DropoutImpl {
 public:
  explicit FeatureAlphaDropoutImpl(const DropoutOptions& options = {}) : DropoutImpl(options, "FeatureAlphaDropout") {}
  Tensor forward(const Tensor& x) override;
};
TAPEGRAD_MODULE(FeatureAlphaDropout);

struct RReLUOptions {
  TAPEGRAD_ARG(double, lower) = 1.0 / 8.0;
  TAPEGRAD_ARG(double, upper) = 1.0 / 3.0;
  // Seeds the module's own slope generator with one draw from *generator (default generator if null).
  TAPEGRAD_ARG(Generator*, generator) = nullptr;
};

// RReLU: F::rrelu, slopes drawn from the module's generator (registered as "generator") in training
// mode, their mean in eval mode. ValueError at construction unless 0 <= lower <= upper.
class RReLUImpl : public UnaryModule {
 public:
  explicit RReLUImpl(const RReLUOptions& options = {});
  Tensor forward(const Tensor& x) override;
  const RReLUOptions& options() const { return options_; }

 private:
  RReLUOptions options_;
  Generator gen_;
};
TAPEGRAD_MODULE(RReLU);

class ReLUImpl : public UnaryModule {
 public:
  Tensor forward(const Tensor& x) override;
};
TAPEGRAD_MODULE(ReLU);

struct GELUOptions {
  TAPEGRAD_ARG(GeluApproximation, approximate) = GeluApproximation::None;
};

// GELU: x * Phi(x) (approximate None, with erf) or the tanh approximation.
class GELUImpl : public UnaryModule {
 public:
  explicit GELUImpl(const GELUOptions& options = {}) : approximate_(options.approximate()) {}
  Tensor forward(const Tensor& x) override;

 private:
  GeluApproximation approximate_;
};
TAPEGRAD_MODULE(GELU);

struct LeakyReLUOptions {
  TAPEGRAD_ARG(double, negative_slope) = 0.01;
};

// LeakyReLU: x where x > 0, negative_slope * x elsewhere (functional::leaky_relu).
class LeakyReLUImpl : public UnaryModule {
 public:
  explicit LeakyReLUImpl(const LeakyReLUOptions& options = {}) : negative_slope_(options.negative_slope()) {}
  Tensor forward(const Tensor& x) override;

 private:
  double negative_slope_;
};
TAPEGRAD_MODULE(LeakyReLU);

// SiLU (swish): x * sigmoid(x).
class SiLUImpl : public UnaryModule {
 public:
  Tensor forward(const Tensor& x) override;
};
TAPEGRAD_MODULE(SiLU);

struct ELUOptions {
  TAPEGRAD_ARG(double, alpha) = 1.0;
};

// ELU: x where x > 0, alpha (exp(x) - 1) elsewhere (functional::elu).
class ELUImpl : public UnaryModule {
 public:
  explicit ELUImpl(const ELUOptions& options = {}) : alpha_(options.alpha()) {}
  Tensor forward(const Tensor& x) override;

 private:
  double alpha_;
};
TAPEGRAD_MODULE(ELU);

// SELU: ELU scaled, with the fixed alpha and scale of self-normalising networks (functional::selu).
class SELUImpl : public UnaryModule {
 public:
  Tensor forward(const Tensor& x) override;
};
TAPEGRAD_MODULE(SELU);

struct CELUOptions {
  TAPEGRAD_ARG(double, alpha) = 1.0;
};

// CELU: max(0, x) + min(0, alpha (exp(x / alpha) - 1)) (functional::celu). ValueError at
// construction for alpha 0.
class CELUImpl : public UnaryModule {
 public:
  explicit CELUImpl(const CELUOptions& options = {});
  Tensor forward(const Tensor& x) override;

 private:
  double alpha_;
};
TAPEGRAD_MODULE(CELU);

struct SoftplusOptions {
  TAPEGRAD_ARG(double, beta) = 1.0;
  TAPEGRAD_ARG(double, threshold) = 20.0;
};

// Softplus: log(1 + exp(beta x)) / beta, x where beta x > threshold (functional::softplus).
// ValueError at construction for beta 0.
class SoftplusImpl : public UnaryModule {
 public:
  explicit SoftplusImpl(const SoftplusOptions& options = {});
  Tensor forward(const Tensor& x) override;

 private:
  double beta_, threshold_;
};
TAPEGRAD_MODULE(Softplus);

// Mish: x tanh(softplus(x)).
class MishImpl : public UnaryModule {
 public:
  Tensor forward(const Tensor& x) override;
};
TAPEGRAD_MODULE(Mish);

struct HardtanhOptions {
  TAPEGRAD_ARG(double, min_val) = -1.0;
  TAPEGRAD_ARG(double, max_val) = 1.0;
};

// Hardtanh: x clamped to [min_val, max_val] (functional::hardtanh). ValueError at construction when
// max_val < min_val.
class HardtanhImpl : public UnaryModule {
 public:
  explicit HardtanhImpl(const HardtanhOptions& options = {});
  Tensor forward(const Tensor& x) override;

 private:
  double min_val_, max_val_;
};
TAPEGRAD_MODULE(Hardtanh);

// ReLU6, Hardsigmoid, Hardswish, LogSigmoid and Softsign: functional's relu6, hardsigmoid, hardswish,
// logsigmoid and softsign.
class ReLU6Impl : public UnaryModule {
 public:
  Tensor forward(const Tensor& x) override;
};
TAPEGRAD_MODULE(ReLU6);

class HardsigmoidImpl : public UnaryModule {
 public:
  Tensor forward(const Tensor& x) override;
};
TAPEGRAD_MODULE(Hardsigmoid);

class HardswishImpl : public UnaryModule {
 public:
  Tensor forward(const Tensor& x) override;
};
TAPEGRAD_MODULE(Hardswish);

class LogSigmoidImpl : public UnaryModule {
 public:
  Tensor forward(const Tensor& x) override;
};
TAPEGRAD_MODULE(LogSigmoid);

class SoftsignImpl : public UnaryModule {
 public:
  Tensor forward(const Tensor& x) override;
};
TAPEGRAD_MODULE(Softsign);

struct GLUOptions {
  TAPEGRAD_ARG(std::int64_t, dim) = -1;
};

// GLU: the input's halves a and b along dim, a * sigmoid(b) (functional::glu).
class GLUImpl : public UnaryModule {
 public:
  explicit GLUImpl(const GLUOptions& options = {}) : dim_(options.dim()) {}
  Tensor forward(const Tensor& x) override;

 private:
  std::int64_t dim_;
};
TAPEGRAD_MODULE(GLU);

struct PReLUOptions {
  TAPEGRAD_ARG(std::int64_t, num_parameters) = 1;  // 1, or the input's channels (axis 1)
  TAPEGRAD_ARG(double, init) = 0.25;
};

// PReLU: x where x > 0, weight * x elsewhere, the slope a parameter (functional::prelu); weight
// (num_parameters) starts at init, as torch's.
class PReLUImpl : public UnaryModule {
 public:
  explicit PReLUImpl(const PReLUOptions& options = {});
  Tensor forward(const Tensor& x) override;
  const Tensor& weight() const { return weight_; }

 private:
  Tensor weight_;
};
TAPEGRAD_MODULE(PReLU);

class TanhImpl : public UnaryModule {
 public:
  Tensor forward(const Tensor& x) override;
};
TAPEGRAD_MODULE(Tanh);

class SigmoidImpl : public UnaryModule {
 public:
  Tensor forward(const Tensor& x) override;
};
TAPEGRAD_MODULE(Sigmoid);

struct SoftmaxOptions {
  SoftmaxOptions(std::int64_t axis) : axis_(axis) {}  // NOLINT(google-explicit-constructor)
  TAPEGRAD_ARG(std::int64_t, axis);
};

// Softmax and LogSoftmax over one axis, as torch's Softmax(dim) and LogSoftmax(dim).
//   nn::Softmax probs(-1);
class SoftmaxImpl : public UnaryModule {
 public:
  explicit SoftmaxImpl(const SoftmaxOptions& options) : axis_(options.axis()) {}
  Tensor forward(const Tensor& x) override;

 private:
  std::int64_t axis_;
};
TAPEGRAD_MODULE(Softmax);

class LogSoftmaxImpl : public UnaryModule {
 public:
  explicit LogSoftmaxImpl(const SoftmaxOptions& options) : axis_(options.axis()) {}
  Tensor forward(const Tensor& x) override;

 private:
  std::int64_t axis_;
};
TAPEGRAD_MODULE(LogSoftmax);

// Softmin over one axis, as torch's Softmin(dim): softmax(-x).
class SoftminImpl : public UnaryModule {
 public:
  explicit SoftminImpl(const SoftmaxOptions& options) : axis_(options.axis()) {}
  Tensor forward(const Tensor& x) override;

 private:
  std::int64_t axis_;
};
TAPEGRAD_MODULE(Softmin);

// Softmax2d: softmax over the channels of (N, C, H, W) or (C, H, W) (axis -3). ShapeError for other
// ranks, as torch's.
class Softmax2dImpl : public UnaryModule {
 public:
  Tensor forward(const Tensor& x) override;
};
TAPEGRAD_MODULE(Softmax2d);

struct LocalResponseNormOptions {
  LocalResponseNormOptions(std::int64_t size) : size_(size) {}  // NOLINT(google-explicit-constructor)
  TAPEGRAD_ARG(std::int64_t, size);
  TAPEGRAD_ARG(double, alpha) = 1e-4;
  TAPEGRAD_ARG(double, beta) = 0.75;
  TAPEGRAD_ARG(double, k) = 1.0;
};

// LocalResponseNorm: F::local_response_norm with its options.
class LocalResponseNormImpl : public UnaryModule {
 public:
  explicit LocalResponseNormImpl(const LocalResponseNormOptions& options) : options_(options) {}
  Tensor forward(const Tensor& x) override;
  const LocalResponseNormOptions& options() const { return options_; }

 private:
  LocalResponseNormOptions options_;
};
TAPEGRAD_MODULE(LocalResponseNorm);

// ChannelShuffle: F::channel_shuffle with its groups.
class ChannelShuffleImpl : public UnaryModule {
 public:
  explicit ChannelShuffleImpl(std::int64_t groups) : groups_(groups) {}
  Tensor forward(const Tensor& x) override;
  std::int64_t groups() const { return groups_; }

 private:
  std::int64_t groups_;
};
TAPEGRAD_MODULE(ChannelShuffle);

// Softshrink(lambd) and Hardshrink(lambd), default 0.5, and Tanhshrink: functional's softshrink,
// hardshrink and tanhshrink. ValueError at construction for a negative lambd of Softshrink.
struct ShrinkOptions {
  ShrinkOptions(double lambd = 0.5) : lambd_(lambd) {}  // NOLINT(google-explicit-constructor)
  TAPEGRAD_ARG(double, lambd);
};

class SoftshrinkImpl : public UnaryModule {
 public:
  explicit SoftshrinkImpl(const ShrinkOptions& options = {});
  Tensor forward(const Tensor& x) override;

 private:
  double lambd_;
};
TAPEGRAD_MODULE(Softshrink);

class HardshrinkImpl : public UnaryModule {
 public:
  explicit HardshrinkImpl(const ShrinkOptions& options = {}) : lambd_(options.lambd()) {}
  Tensor forward(const Tensor& x) override;

 private:
  double lambd_;
};
TAPEGRAD_MODULE(Hardshrink);

class TanhshrinkImpl : public UnaryModule {
 public:
  Tensor forward(const Tensor& x) override;
};
TAPEGRAD_MODULE(Tanhshrink);

// Threshold(threshold, value): x where x > threshold, else value, as torch's.
struct ThresholdOptions {
  ThresholdOptions(double threshold, double value) : threshold_(threshold), value_(value) {}
  TAPEGRAD_ARG(double, threshold);
  TAPEGRAD_ARG(double, value);
};

class ThresholdImpl : public UnaryModule {
 public:
  explicit ThresholdImpl(const ThresholdOptions& options) : options_(options) {}
  Tensor forward(const Tensor& x) override;

 private:
  ThresholdOptions options_;
};
TAPEGRAD_MODULE(Threshold);

// PairwiseDistance and CosineSimilarity, torch's modules of two inputs: functional's
// pairwise_distance (p, eps, keepdim) and cosine_similarity (axis, eps).
struct PairwiseDistanceOptions {
  TAPEGRAD_ARG(double, p) = 2.0;
  TAPEGRAD_ARG(double, eps) = 1e-6;
  TAPEGRAD_ARG(bool, keepdim) = false;
};

class PairwiseDistanceImpl : public Module {
 public:
  explicit PairwiseDistanceImpl(const PairwiseDistanceOptions& options = {}) : options_(options) {}
  Tensor forward(const Tensor& x1, const Tensor& x2);

 private:
  PairwiseDistanceOptions options_;
};
TAPEGRAD_MODULE(PairwiseDistance);

struct CosineSimilarityOptions {
  TAPEGRAD_ARG(std::int64_t, axis) = 1;
  TAPEGRAD_ARG(double, eps) = 1e-8;
};

class CosineSimilarityImpl : public Module {
 public:
  explicit CosineSimilarityImpl(const CosineSimilarityOptions& options = {}) : options_(options) {}
  Tensor forward(const Tensor& x1, const Tensor& x2);

 private:
  CosineSimilarityOptions options_;
};
TAPEGRAD_MODULE(CosineSimilarity);

// ---------------------------------------------------------------- Identity, Flatten

// Identity: returns its input (the same tensor, as torch's), a placeholder where a layer is optional.
class IdentityImpl : public UnaryModule {
 public:
  Tensor forward(const Tensor& x) override;
};
TAPEGRAD_MODULE(Identity);

struct FlattenOptions {
  TAPEGRAD_ARG(std::int64_t, start_axis) = 1;
  TAPEGRAD_ARG(std::int64_t, end_axis) = -1;
};

// Flatten: merges the axes start_axis..end_axis into one; the defaults keep the batch axis, as
// torch's Flatten: (N, C, H, W) -> (N, C * H * W).
class FlattenImpl : public UnaryModule {
 public:
  explicit FlattenImpl(const FlattenOptions& options = {})
      : start_axis_(options.start_axis()), end_axis_(options.end_axis()) {}
  Tensor forward(const Tensor& x) override;

 private:
  std::int64_t start_axis_, end_axis_;
};
TAPEGRAD_MODULE(Flatten);

struct UnflattenOptions {
  UnflattenOptions(std::int64_t axis, const Dims& sizes) : axis_(axis), sizes_(sizes) {}
  TAPEGRAD_ARG(std::int64_t, axis);
  TAPEGRAD_ARG(Dims, sizes);  // their product the axis's size; one may be -1, worked out from the others
};

// Unflatten: Flatten's inverse, the axis split into sizes: Unflatten({1, {C, H, W}}) turns (N, C * H * W)
// into (N, C, H, W). ShapeError (naming the axis, its size and the sizes) when they do not multiply
// to it; IndexError for an axis out of range.
class UnflattenImpl : public UnaryModule {
 public:
  explicit UnflattenImpl(const UnflattenOptions& options) : options_(options) {}
  Tensor forward(const Tensor& x) override;
  const UnflattenOptions& options() const { return options_; }

 private:
  UnflattenOptions options_;
};
TAPEGRAD_MODULE(Unflatten);

struct UnfoldOptions {
  UnfoldOptions(const Dims& kernel_size) : kernel_size_(kernel_size) {}  // NOLINT(google-explicit-constructor)
  TAPEGRAD_ARG(Dims, kernel_size);
  TAPEGRAD_ARG(Dims, dilation) = {1};
  TAPEGRAD_ARG(Dims, padding) = {0};
  TAPEGRAD_ARG(Dims, stride) = {1};
};

struct FoldOptions {
  FoldOptions(const Dims& output_size, const Dims& kernel_size)
      : output_size_(output_size), kernel_size_(kernel_size) {}
  TAPEGRAD_ARG(Dims, output_size);
  TAPEGRAD_ARG(Dims, kernel_size);
  TAPEGRAD_ARG(Dims, dilation) = {1};
  TAPEGRAD_ARG(Dims, padding) = {0};
  TAPEGRAD_ARG(Dims, stride) = {1};
};

// Unfold and Fold: the ops unfold (sliding windows as columns) and fold (columns summed back into an
// image) with their options, as torch's modules.
class UnfoldImpl : public UnaryModule {
 public:
  explicit UnfoldImpl(const UnfoldOptions& options) : options_(options) {}
  Tensor forward(const Tensor& x) override;
  const UnfoldOptions& options() const { return options_; }

 private:
  UnfoldOptions options_;
};
TAPEGRAD_MODULE(Unfold);

class FoldImpl : public UnaryModule {
 public:
  explicit FoldImpl(const FoldOptions& options) : options_(options) {}
  Tensor forward(const Tensor& x) override;
  const FoldOptions& options() const { return options_; }

 private:
  FoldOptions options_;
};
TAPEGRAD_MODULE(Fold);

// ---------------------------------------------------------------- Sequential

// Sequential: runs its modules in order; they are children named "0", "1", ... so parameter names
// read "0.weight", "2.bias" as in PyTorch. An empty Sequential is the identity.
//   nn::Sequential seq(nn::Linear(1, 64), nn::GELU(), nn::Linear(64, 1));
//   seq->push_back(nn::ReLU());
class SequentialImpl : public UnaryModule {
 public:
  SequentialImpl() = default;
  // Each argument is a handle (nn::Linear ...) or a shared_ptr of a one-tensor module.
  template <class First, class... Rest, std::enable_if_t<!std::is_same_v<std::decay_t<First>, SequentialImpl>, int> = 0>
  explicit SequentialImpl(First&& first, Rest&&... rest) {
    push_back(std::forward<First>(first));
    (push_back(std::forward<Rest>(rest)), ...);
  }
  // Appends module as child std::to_string(size()); ValueError on an empty handle or null pointer.
  template <class Holder, std::enable_if_t<is_module_holder_v<Holder>, int> = 0>
  void push_back(const Holder& module) {
    push_back(std::shared_ptr<UnaryModule>(module.is_empty() ? nullptr : module.ptr()));
  }
  void push_back(std::shared_ptr<UnaryModule> module);
  Tensor forward(const Tensor& x) override;

  std::size_t size() const { return modules_.size(); }
  // The module at index (IndexError when out of range).
  const std::shared_ptr<UnaryModule>& at(std::size_t index) const;

 private:
  std::vector<std::shared_ptr<UnaryModule>> modules_;
};
TAPEGRAD_MODULE(Sequential);

// ---------------------------------------------------------------- FeedForward

// The activation of a feed-forward network, a transformer layer or an expert. GELU is exact (erf).
enum class Activation { ReLU, GELU, SiLU };
// The activation function named by `activation`.
Tensor activate(const Tensor& x, Activation activation);

struct FeedForwardOptions {
  FeedForwardOptions(std::int64_t d_model, std::int64_t hidden) : d_model_(d_model), hidden_(hidden) {}
  TAPEGRAD_ARG(std::int64_t, d_model);
  TAPEGRAD_ARG(std::int64_t, hidden);
  TAPEGRAD_ARG(Activation, activation) = Activation::ReLU;  // as torch.nn.TransformerEncoderLayer's
  TAPEGRAD_ARG(double, dropout) = 0.0;                      // after the activation
  TAPEGRAD_ARG(Generator*, generator) = nullptr;            // initial weights (default generator if null)
};

// Position-wise feed-forward network:
//   y = fc2(dropout(act(fc1(x)))),  x: (..., d_model), fc1: d_model -> hidden, fc2: hidden -> d_model
// Children "fc1", "fc2" (Linear) and "dropout" (a Dropout seeded from the construction generator).
class FeedForwardImpl : public UnaryModule {
 public:
  explicit FeedForwardImpl(const FeedForwardOptions& options);
  Tensor forward(const Tensor& x) override;

  Activation activation() const { return activation_; }

 private:
  Activation activation_;
  Linear fc1_{nullptr};
  Dropout dropout_{nullptr};
  Linear fc2_{nullptr};
};
TAPEGRAD_MODULE(FeedForward);

}  // namespace tapegrad::nn
