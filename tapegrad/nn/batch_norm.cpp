#include "tapegrad/nn/batch_norm.h"

#include <string>

#include "tapegrad/autograd/autocast.h"

namespace tapegrad::nn {

namespace functional {

namespace {

// A (C) tensor of the op, checked, as (1, C, 1, ...) to broadcast against x.
Tensor per_channel(const Tensor& t, const Tensor& x, const char* what, const char* op = "batch_norm") {
  const std::int64_t channels = x.shape()[1];
  if (t.shape() != Shape{channels})
    throw ShapeError(message(op, ": expected ", what, " of shape (", channels, ") for an input of shape ",
                             x.shape().str(), ", got ", t.shape().str()));
  Shape shape = Shape::filled(x.dim(), 1);
  shape[1] = channels;
  return reshape(t, shape);
}

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  if (x.dim() < 2)
    throw ShapeError(message("batch_norm: expected an input of shape (N, C, ...), got ", x.shape().str()));
  if (x.dtype() == kBFloat16)  // statistics in float32, as the norms' policy (autocast.h)
    return tapegrad::detail::precision_result(
        batch_norm(x.to(kFloat32), running_mean, running_var, weight, bias, training, momentum, eps), kBFloat16);
  if (running_mean.defined() != running_var.defined())
    throw ValueError("batch_norm: give both running_mean and running_var, or neither");
  Dims axes;  // every axis but the channels'
  for (int d = 0; d < x.dim(); ++d)
    if (d != 1) axes.push_back(d);
  const std::int64_t count = x.numel() / x.shape()[1];
  Tensor y;
  if (training) {
    if (count <= 1)
      throw ValueError(message("batch_norm: training needs more than one value per channel, got an input of shape ",
                               x.shape().str()));
    const Tensor mean_b = mean(x, axes, /*keepdim=*/true);
    const Tensor var_b = var(x, axes, /*correction=*/0, /*keepdim=*/true);
    y = (x - mean_b) * rsqrt(var_b + eps);
    if (running_mean.defined()) {
      const Tensor rm = per_channel(running_mean, x, "running_mean"), rv = per_channel(running_var, x, "running_var");
      NoGradGuard no_grad;
      const double unbiased = static_cast<double>(count) / static_cast<double>(count - 1);
      rm.mul_(1.0 - momentum).add_(mean_b.to(rm.dtype()), momentum);
      rv.mul_(1.0 - momentum).add_(var_b.to(rv.dtype()), momentum * unbiased);
    }
  } else {
    if (!running_mean.defined())
      throw ValueError("batch_norm: evaluation (training false) needs running_mean and running_var");
    const Tensor rm = per_channel(running_mean, x, "running_mean"), rv = per_channel(running_var, x, "running_var");
    y = (x - rm) * rsqrt(rv + eps);
  }
  if (weight.defined()) y = y * per_channel(weight, x, "weight");
  if (bias.defined()) y = y + per_channel(bias, x, "bias");
  return y;
}

Tensor group_norm(const Tensor& x, std::int64_t num_groups, const Tensor& weight, const Tensor& bias, double eps) {
  const char* op = "group_norm";
  if (x.dim() < 2) throw ShapeError(message(op, ": expected an input of shape (N, C, ...), got ", x.shape().str()));
  const std::int64_t n = x.shape()[0], channels = x.shape()[1];
  if (num_groups < 1 || channels % num_groups != 0)
    throw ValueError(message(op, ": ", num_groups, " groups do not split the ", channels,
                             " channels of an input of shape ", x.shape().str()));
  if (x.dtype() == kBFloat16)  // statistics in float32, as the norms' policy (autocast.h)
    return tapegrad::detail::precision_result(group_norm(x.to(kFloat32), num_groups, weight, bias, eps), kBFloat16);
  if (x.numel() == 0) throw ShapeError(message(op, ": the input of shape ", x.shape().str(), " is empty"));
  const Tensor groups = reshape(x, {n, num_groups, -1});
  const Tensor mean_g = mean(groups, {2}, /*keepdim=*/true);
  const Tensor var_g = var(groups, {2}, /*correction=*/0, /*keepdim=*/true);
  Tensor y = reshape((groups - mean_g) * rsqrt(var_g + eps), x.shape());
  if (weight.defined()) y = y * per_channel(weight, x, "weight", op);
  if (bias.defined()) y = y + per_channel(bias, x, "bias", op);
  return y;
}

Tensor instance_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                     const Tensor& bias, bool use_input_stats, double momentum, double eps) {
  const char* op = "instance_norm";
  if (x.dim() < 3)
    throw ShapeError(
        message(op, ": expected an input of shape (N, C, ...) with a spatial axis, got ", x.shape().str()));
  if (x.dtype() == kBFloat16)  // statistics in float32, as the norms' policy (autocast.h)
    return tapegrad::detail::precision_result(
        instance_norm(x.to(kFloat32), running_mean, running_var, weight, bias, use_input_stats, momentum, eps),
        kBFloat16);
  if (running_mean.defined() != running_var.defined())
    throw ValueError(message(op, ": give both running_mean and running_var, or neither"));
  Dims spatial;
  std::int64_t count = 1;  // spatial values per instance
  for (int d = 2; d < x.dim(); ++d) {
    spatial.push_back(d);
    count *= x.shape()[d];
  }
  Tensor y;
  if (use_input_stats) {
    if (count <= 1)
      throw ValueError(message(op, ": the instance statistics need more than one spatial value, got an input of shape ",
                               x.shape().str()));
    const Tensor mean_i = mean(x, spatial, /*keepdim=*/true);
    const Tensor var_i = var(x, spatial, /*correction=*/0, /*keepdim=*/true);
    y = (x - mean_i) * rsqrt(var_i + eps);
    if (running_mean.defined()) {
      const Tensor rm = per_channel(running_mean, x, "running_mean", op);
      const Tensor rv = per_channel(running_var, x, "running_var", op);
      NoGradGuard no_grad;
      const double unbiased = static_cast<double>(count) / static_cast<double>(count - 1);
      Dims batch_and_spatial{0};
      for (const std::int64_t d : spatial) batch_and_spatial.push_back(d);
      rm.mul_(1.0 - momentum).add_(mean(mean_i, batch_and_spatial, true).to(rm.dtype()), momentum);
      rv.mul_(1.0 - momentum).add_(mean(var_i, batch_and_spatial, true).to(rv.dtype()), momentum * unbiased);
    }
  } else {
    if (!running_mean.defined())
      throw ValueError(message(op, ": without use_input_stats, running_mean and running_var are needed"));
    const Tensor rm = per_channel(running_mean, x, "running_mean", op);
    const Tensor rv = per_channel(running_var, x, "running_var", op);
    y = (x - rm) * rsqrt(rv + eps);
  }
  if (weight.defined()) y = y * per_channel(weight, x, "weight", op);
  if (bias.defined()) y = y + per_channel(bias, x, "bias", op);
  return y;
}

}  // namespace functional

InstanceNormImpl::InstanceNormImpl(const InstanceNormOptions& options, const char* name, int rank)
    : NormImpl(name, options.num_features(), options.momentum(), options.affine(), options.track_running_stats()),
      options_(options),
      rank_(rank) {}

Tensor InstanceNormImpl::forward(const Tensor& x) {
  const bool unbatched = x.dim() == rank_ - 1;
  if ((x.dim() != rank_ && !unbatched) || x.shape()[unbatched ? 0 : 1] != options_.num_features())
    throw ShapeError(message(name_, ": expected an input of shape ",
                             rank_ == 3   ? "(N, C, L) or (C, L)"
                             : rank_ == 4 ? "(N, C, H, W) or (C, H, W)"
                                          : "(N, C, D, H, W) or (C, D, H, W)",
                             " with C = ", options_.num_features(), ", got ", x.shape().str()));
  const bool tracked = options_.track_running_stats();
  const bool use_input_stats = is_training() || !tracked;
  const Tensor batched = unbatched ? x.unsqueeze(0) : x;
  // num_batches_tracked stays 0, as torch's: its instance norms keep the buffer but never count.
  const Tensor y =
      functional::instance_norm(batched, tracked ? running_mean_ : Tensor(), tracked ? running_var_ : Tensor(), weight_,
                                bias_, use_input_stats, options_.momentum(), options_.eps());
  return unbatched ? y.squeeze(0) : y;
}

GroupNormImpl::GroupNormImpl(const GroupNormOptions& options) : options_(options) {
  const std::int64_t groups = options.num_groups(), c = options.num_channels();
  if (groups < 1 || c < 1 || c % groups != 0)
    throw ValueError(message("GroupNorm: num_groups ", groups, " must be at least 1 and divide num_channels ", c));
  if (options.affine()) {
    weight_ = register_parameter("weight", ones({c}));
    bias_ = register_parameter("bias", zeros({c}));
  }
}

Tensor GroupNormImpl::forward(const Tensor& x) {
  if (x.dim() >= 2 && x.shape()[1] != options_.num_channels())
    throw ShapeError(message("GroupNorm: expected ", options_.num_channels(),
                             " channels (axis 1), got an input of shape ", x.shape().str()));
  return functional::group_norm(x, options_.num_groups(), weight_, bias_, options_.eps());
}

NormImpl::NormImpl(const char* name, std::int64_t num_features, std::optional<double> momentum, bool affine,
                   bool track_running_stats)
    : name_(name) {
  const std::int64_t c = num_features;
  if (c <= 0) throw ValueError(message(name, ": num_features must be positive, got ", c));
  if (momentum && (*momentum < 0.0 || *momentum > 1.0))
    throw ValueError(message(name, ": momentum must be in [0, 1], got ", *momentum));
  if (affine) {
    weight_ = register_parameter("weight", ones({c}));
    bias_ = register_parameter("bias", zeros({c}));
  }
  if (track_running_stats) {
    running_mean_ = register_buffer("running_mean", zeros({c}));
    running_var_ = register_buffer("running_var", ones({c}));
    num_batches_tracked_ = register_buffer("num_batches_tracked", zeros({}, kInt64));
  }
}

void NormImpl::reset_running_stats() {
  if (!running_mean_.defined()) return;
  NoGradGuard no_grad;
  running_mean_.zero_();
  running_var_.fill_(1.0);
  num_batches_tracked_.zero_();
}

BatchNormImpl::BatchNormImpl(const BatchNormOptions& options, const char* name, int min_rank, int max_rank)
    : NormImpl(name, options.num_features(), options.momentum(), options.affine(), options.track_running_stats()),
      options_(options),
      min_rank_(min_rank),
      max_rank_(max_rank) {}

Tensor BatchNormImpl::forward(const Tensor& x) {
  if (x.dim() < min_rank_ || x.dim() > max_rank_ || x.shape()[1] != options_.num_features())
    throw ShapeError(message(name_, ": expected an input of shape ",
                             min_rank_ == 2   ? "(N, C) or (N, C, L)"
                             : min_rank_ == 4 ? "(N, C, H, W)"
                                              : "(N, C, D, H, W)",
                             " with C = ", options_.num_features(), ", got ", x.shape().str()));
  // Training updates the running statistics; eval mode reads them, or uses the batch's without them.
  const bool update = is_training() && options_.track_running_stats();
  const bool use_batch = is_training() || !options_.track_running_stats();
  double momentum = options_.momentum().value_or(0.0);
  if (update && !options_.momentum())  // the cumulative average: batch k weighs 1 / k
    momentum = 1.0 / (num_batches_tracked_.item() + 1.0);
  const Tensor statistics_mean = update || !use_batch ? running_mean_ : Tensor();
  const Tensor statistics_var = update || !use_batch ? running_var_ : Tensor();
  Tensor y =
      functional::batch_norm(x, statistics_mean, statistics_var, weight_, bias_, use_batch, momentum, options_.eps());
  if (update) {  // counted once the batch went through
    NoGradGuard no_grad;
    num_batches_tracked_.add_(1);
  }
  return y;
}

}  // namespace tapegrad::nn
