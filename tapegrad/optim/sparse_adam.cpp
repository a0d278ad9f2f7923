#include "tapegrad/optim/sparse_adam.h"

#include <cmath>
#include <string>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/format.h"
#include "tapegrad/autograd/kernels/optim.h"
#include "tapegrad/autograd/storage.h"
#include "tapegrad/optim/elementwise_update.h"

namespace tapegrad::optim {

namespace {

void check_options(const SparseAdamOptions& o) {
  detail::check_betas(o.betas(), "SparseAdam");
  if (!(o.eps() >= 0.0)) throw ValueError(message("SparseAdam: invalid eps ", o.eps(), " (must be >= 0)"));
}

}  // namespace

SparseAdam::SparseAdam(const TensorList& params, const SparseAdamOptions& options)
    : SparseAdam(single_group(params), options) {}

SparseAdam::SparseAdam(std::vector<ParamGroup> groups, const SparseAdamOptions& options)
    : Optimizer(std::move(groups), GroupDefaults{options.lr(), 0.0}, "SparseAdam"), options_(options) {
  check_options(options_);
  for (std::size_t g = 0; g < param_groups().size(); ++g)
    if (*param_groups()[g].weight_decay != 0.0)
      throw ValueError(message("SparseAdam: group ", g, " has weight_decay ", *param_groups()[g].weight_decay,
                               "; SparseAdam has no weight decay"));
}

std::string SparseAdam::sparse_refusal(const ParamGroup& group) const {
  if (*group.weight_decay != 0.0)
    return "SparseAdam has no weight decay (the group asks for " + format_number(*group.weight_decay) + ")";
  return {};
}

std::string SparseAdam::dense_refusal(const ParamGroup& /*group*/) const {
  return "SparseAdam takes row-sparse gradients only (embeddings with sparse gradients); step dense parameters "
         "with optim::Adam";
}

void SparseAdam::update(const ParamGroup& /*group*/, const Tensor& p, const Tensor& /*g*/, ParamState& /*state*/) {
  throw ValueError("SparseAdam: the " + p.shape().str() + " parameter has a dense gradient; " +
                   dense_refusal(param_groups().front()));
}

void SparseAdam::update_sparse(const ParamGroup& group, const Tensor& p, const SparseRows& grad, ParamState& state) {
  const SparseRows g = grad.coalesce();  // each touched row's moments move once, by the row's whole gradient
  if (state.buffers.count("exp_avg") == 0) {
    state.buffers["exp_avg"] = zeros_like(p);
    state.buffers["exp_avg_sq"] = zeros_like(p);
  }
  const auto [beta1, beta2] = options_.betas();
  // Bias corrections in double, as torch computes them from Python floats.
  const double t = static_cast<double>(state.step);
  const double step_size = *group.lr * std::sqrt(1.0 - std::pow(beta2, t)) / (1.0 - std::pow(beta1, t));
  kernels::SparseAdamStep step;
  step.step_size = step_size;
  step.beta1 = beta1;
  step.beta2 = beta2;
  step.eps = options_.eps();
  dispatch_floating(p.dtype(), "SparseAdam", [&](auto tag) {
    using T = decltype(tag);
    kernels::sparse_adam_rows<T>(p.data_ptr<T>(), state.buffers["exp_avg"].data_ptr<T>(),
                                 state.buffers["exp_avg_sq"].data_ptr<T>(), g.indices().data_ptr<std::int64_t>(),
                                 g.values().data_ptr<T>(), g.nnz(), p.shape()[1], step);
  });
  state.buffers["exp_avg"].impl()->storage->bump_version();
  state.buffers["exp_avg_sq"].impl()->storage->bump_version();
}

}  // namespace tapegrad::optim
