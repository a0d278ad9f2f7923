#pragma once
// Batch normalisation with PyTorch's names, semantics and defaults: BatchNorm1d over (N, C) or
// (N, C, L), BatchNorm2d over (N, C, H, W), and the functional form. Each channel is normalised by
// the mean and variance over every other axis: the batch's in training (biased variance), the
// running estimates in eval mode, which training updates as
//   running = (1 - momentum) running + momentum batch   (the variance unbiased, n / (n - 1)),
// or as a cumulative average of every batch so far when momentum is absent.
//
//   nn::BatchNorm2d bn(16);                    // weight ones, bias zeros, momentum 0.1, eps 1e-5
//   Tensor y = bn(relu(conv(images)));         // training: batch statistics, running ones updated
//   bn->eval();                                // then: the running statistics
//
// Composed from differentiable ops (mean, var, rsqrt, the arithmetic), so its gradients, first and
// second, are theirs. The running statistics are buffers (state_dict names running_mean,
// running_var, num_batches_tracked, as torch's), updated without recording.

#include <cstdint>
#include <optional>

#include "tapegrad/nn/module.h"

namespace tapegrad::nn {

namespace functional {

// torch's F.batch_norm: x (N, C, ...) normalised per channel, with weight and bias (C) when given.
// training: the batch's statistics, and running_mean / running_var (C), when given, updated in place
// with momentum (absent: they are left alone); otherwise the running statistics, which must be given.
// ValueError for training on a single value per channel, ShapeError for statistics or affine
// parameters that are not (C).
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = Tensor(), const Tensor& bias = Tensor(), bool training = false,
                  double momentum = 0.1, double eps = 1e-5);

}  // namespace functional

struct BatchNormOptions {
  BatchNormOptions(std::int64_t num_features) : num_features_(num_features) {}  // NOLINT(google-explicit-constructor)
  TAPEGRAD_ARG(std::int64_t, num_features);
  TAPEGRAD_ARG(double, eps) = 1e-5;
  // The running statistics' update rate; std::nullopt: the cumulative average of every batch.
  TAPEGRAD_ARG(std::optional<double>, momentum) = 0.1;
  TAPEGRAD_ARG(bool, affine) = true;
  // false: no running statistics; the batch's are used in eval mode too.
  TAPEGRAD_ARG(bool, track_running_stats) = true;
};

class BatchNormImpl : public UnaryModule {
 public:
  Tensor forward(const Tensor& x) override;

  const Tensor& weight() const { return weight_; }  // undefined without affine
  const Tensor& bias() const { return bias_; }
  const Tensor& running_mean() const { return running_mean_; }  // undefined without track_running_stats
  const Tensor& running_var() const { return running_var_; }
  const Tensor& num_batches_tracked() const { return num_batches_tracked_; }
  const BatchNormOptions& options() const { return options_; }
  // Running mean to 0, running variance to 1, the batch count to 0.
  void reset_running_stats();

 protected:
  BatchNormImpl(const BatchNormOptions& options, const char* name, int min_rank, int max_rank);

 private:
  BatchNormOptions options_;
  const char* name_;
  int min_rank_, max_rank_;
  Tensor weight_, bias_, running_mean_, running_var_, num_batches_tracked_;
};

// BatchNorm1d: input (N, C) or (N, C, L).
class BatchNorm1dImpl : public BatchNormImpl {
 public:
  explicit BatchNorm1dImpl(const BatchNormOptions& options) : BatchNormImpl(options, "BatchNorm1d", 2, 3) {}
};
TAPEGRAD_MODULE(BatchNorm1d);

// BatchNorm2d: input (N, C, H, W).
class BatchNorm2dImpl : public BatchNormImpl {
 public:
  explicit BatchNorm2dImpl(const BatchNormOptions& options) : BatchNormImpl(options, "BatchNorm2d", 4, 4) {}
};
TAPEGRAD_MODULE(BatchNorm2d);

}  // namespace tapegrad::nn
