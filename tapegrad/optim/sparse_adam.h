// SparseAdam, following torch.optim.SparseAdam: Adam for embedding tables with row-sparse
// gradients (nn::EmbeddingOptions::sparse), whose moments change only at the rows a step's
// gradient touched. With t = state.step (the steps this parameter took) and g the coalesced rows:
//   m[r] = m[r] + (1 - beta1) * (g - m[r])
//   v[r] = v[r] + (1 - beta2) * (g^2 - v[r])
//   p[r] = p[r] - lr * sqrt(1 - beta2^t) / (1 - beta1^t) * m[r] / (sqrt(v[r]) + eps)
// for each touched row r; every other row of p, m and v stays as it was, bit for bit. Dense
// gradients are refused (optim::Adam takes those), and there is no weight decay, as in torch.
// State buffers: "exp_avg" (m) and "exp_avg_sq" (v), dense like the parameter.
//
//   nn::Embedding table{nn::EmbeddingOptions(1'000'000, 100).sparse(true)};
//   optim::SparseAdam opt(table->parameters(), optim::SparseAdamOptions(1e-3));
#pragma once

#include "tapegrad/autograd/arg.h"
#include "tapegrad/optim/adam.h"
#include "tapegrad/optim/optimizer.h"

namespace tapegrad::optim {

struct SparseAdamOptions {
  explicit SparseAdamOptions(double lr = 1e-3) : lr_(lr) {}
  TAPEGRAD_ARG(double, lr);
  TAPEGRAD_ARG(AdamBetas, betas) = AdamBetas{0.9, 0.999};
  TAPEGRAD_ARG(double, eps) = 1e-8;
};

class SparseAdam : public Optimizer {
 public:
  // ValueError for betas outside [0, 1), a negative eps, or a group with a weight decay.
  SparseAdam(const TensorList& params, const SparseAdamOptions& options);
  SparseAdam(std::vector<ParamGroup> groups, const SparseAdamOptions& options);
  const SparseAdamOptions& options() const { return options_; }
  std::vector<std::string> state_buffer_names() const override { return {"exp_avg", "exp_avg_sq"}; }

 protected:
  void update(const ParamGroup& group, const Tensor& p, const Tensor& g, ParamState& state) override;
  void update_sparse(const ParamGroup& group, const Tensor& p, const SparseRows& g, ParamState& state) override;
  std::string sparse_refusal(const ParamGroup& group) const override;
  std::string dense_refusal(const ParamGroup& group) const override;

 private:
  SparseAdamOptions options_;
};

}  // namespace tapegrad::optim
