#pragma once
// Batch, group and instance normalisation with PyTorch's names, semantics and defaults: BatchNorm1d
// over (N, C) or (N, C, L), BatchNorm2d over (N, C, H, W), BatchNorm3d over (N, C, D, H, W), GroupNorm
// over (N, C, ...), InstanceNorm1d / 2d / 3d over (N, C, L), (N, C, H, W) or (N, C, D, H, W) and their
// unbatched forms, and the functional forms.
// InstanceNorm normalises each sample's channels by their own mean and (biased) variance over the
// spatial axes; with track_running_stats (off by default, as torch's) training also keeps running
// estimates, the batch's mean of the per-instance ones, which eval mode then uses.
// GroupNorm normalises each sample's channel groups by their own mean and (biased) variance, the same
// in training and eval, with no running statistics. BatchNorm normalises each channel by
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

// torch's F.group_norm: x (N, C, ...) with its C channels cut into num_groups groups of consecutive
// channels, each group of each sample normalised by its mean and biased variance, then weight and
// bias (C) when given. ValueError when num_groups does not divide C.
Tensor group_norm(const Tensor& x, std::int64_t num_groups, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

// torch's F.instance_norm: x (N, C, ...) with at least one spatial axis, each channel of each
// sample normalised over its spatial axes, then weight and bias (C) when given. use_input_stats:
// the instance's own statistics (more than one spatial value needed: ValueError), and running_mean
// / running_var (C), when given, updated in place with momentum from their means over the batch
// (the variance unbiased over the spatial values); otherwise the running statistics, which must be
// given.
Tensor instance_norm(const Tensor& x, const Tensor& running_mean = Tensor(), const Tensor& running_var = Tensor(),
                     const Tensor& weight = Tensor(), const Tensor& bias = Tensor(), bool use_input_stats = true,
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

// What batch and instance norms hold, as torch's _NormBase: weight ones and bias zeros (C) with
// affine, and with running statistics the buffers running_mean (zeros), running_var (ones) and
// num_batches_tracked (an int64 count).
class NormImpl : public UnaryModule {
 public:
  const Tensor& weight() const { return weight_; }  // undefined without affine
  const Tensor& bias() const { return bias_; }
  const Tensor& running_mean() const { return running_mean_; }  // undefined without running statistics
  const Tensor& running_var() const { return running_var_; }
  const Tensor& num_batches_tracked() const { return num_batches_tracked_; }
  // Running mean to 0, running variance to 1, the batch count to 0.
  void reset_running_stats();

 protected:
  // ValueError naming the module for num_features below 1 or a momentum outside [0, 1].
  NormImpl(const char* name, std::int64_t num_features, std::optional<double> momentum, bool affine,
           bool track_running_stats);

  const char* name_;
  Tensor weight_, bias_, running_mean_, running_var_, num_batches_tracked_;
};

class BatchNormImpl : public NormImpl {
 public:
  Tensor forward(const Tensor& x) override;
  const BatchNormOptions& options() const { return options_; }

 protected:
  BatchNormImpl(const BatchNormOptions& options, const char* name, int min_rank, int max_rank);

 private:
  BatchNormOptions options_;
  int min_rank_, max_rank_;
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

// BatchNorm3d: input (N, C, D, H, W).
class BatchNorm3dImpl : public BatchNormImpl {
 public:
  explicit BatchNorm3dImpl(const BatchNormOptions& options) : BatchNormImpl(options, "BatchNorm3d", 5, 5) {}
};
TAPEGRAD_MODULE(BatchNorm3d);

struct GroupNormOptions {
  GroupNormOptions(std::int64_t num_groups, std::int64_t num_channels)
      : num_groups_(num_groups), num_channels_(num_channels) {}
  TAPEGRAD_ARG(std::int64_t, num_groups);
  TAPEGRAD_ARG(std::int64_t, num_channels);
  TAPEGRAD_ARG(double, eps) = 1e-5;
  TAPEGRAD_ARG(bool, affine) = true;  // weight ones and bias zeros, (num_channels)
};

// GroupNorm: input (N, C, ...); nn::GroupNorm(GroupNormOptions(8, 64)). GroupNorm(1, C) normalises
// each sample over all its values, GroupNorm(C, C) each channel of each sample (an instance norm).
class GroupNormImpl : public UnaryModule {
 public:
  explicit GroupNormImpl(const GroupNormOptions& options);
  Tensor forward(const Tensor& x) override;
  const Tensor& weight() const { return weight_; }  // undefined without affine
  const Tensor& bias() const { return bias_; }
  const GroupNormOptions& options() const { return options_; }

 private:
  GroupNormOptions options_;
  Tensor weight_, bias_;
};
TAPEGRAD_MODULE(GroupNorm);

struct InstanceNormOptions {
  InstanceNormOptions(std::int64_t num_features)  // NOLINT(google-explicit-constructor)
      : num_features_(num_features) {}
  TAPEGRAD_ARG(std::int64_t, num_features);
  TAPEGRAD_ARG(double, eps) = 1e-5;
  TAPEGRAD_ARG(double, momentum) = 0.1;             // no cumulative average (torch 1.13's instance norms refuse None)
  TAPEGRAD_ARG(bool, affine) = false;               // weight ones and bias zeros, (num_features)
  TAPEGRAD_ARG(bool, track_running_stats) = false;  // running_mean, running_var, num_batches_tracked
};

// InstanceNorm: the instance's statistics in training, and in eval mode too unless it tracks running
// statistics. Unbatched input (one axis fewer) is normalised as a batch of one.
class InstanceNormImpl : public NormImpl {
 public:
  Tensor forward(const Tensor& x) override;
  const InstanceNormOptions& options() const { return options_; }

 protected:
  InstanceNormImpl(const InstanceNormOptions& options, const char* name, int rank);

 private:
  InstanceNormOptions options_;
  int rank_;  // the batched input's
};

// InstanceNorm1d: input (N, C, L) or (C, L).
class InstanceNorm1dImpl : public InstanceNormImpl {
 public:
  explicit InstanceNorm1dImpl(const InstanceNormOptions& options) : InstanceNormImpl(options, "InstanceNorm1d", 3) {}
};
TAPEGRAD_MODULE(InstanceNorm1d);

// InstanceNorm2d: input (N, C, H, W) or (C, H, W).
class InstanceNorm2dImpl : public InstanceNormImpl {
 public:
  explicit InstanceNorm2dImpl(const InstanceNormOptions& options) : InstanceNormImpl(options, "InstanceNorm2d", 4) {}
};
TAPEGRAD_MODULE(InstanceNorm2d);

// InstanceNorm3d: input (N, C, D, H, W) or (C, D, H, W).
class InstanceNorm3dImpl : public InstanceNormImpl {
 public:
  explicit InstanceNorm3dImpl(const InstanceNormOptions& options) : InstanceNormImpl(options, "InstanceNorm3d", 5) {}
};
TAPEGRAD_MODULE(InstanceNorm3d);

}  // namespace tapegrad::nn
