#include "tapegrad/nn/moe.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "tapegrad/nn/containers.h"
#include "tapegrad/nn/routing.h"

namespace tapegrad::nn {

ExpertImpl::ExpertImpl(const ExpertOptions& options) : activation_(options.activation()) {
  Generator& gen = generator_or_default(options.generator());
  fc1_ = register_module("fc1", Linear(LinearOptions(options.dim(), options.hidden()).generator(&gen)));
  fc2_ = register_module("fc2", Linear(LinearOptions(options.hidden(), options.dim()).generator(&gen)));
}

Tensor ExpertImpl::forward(const Tensor& x) {
  return fc2_(activate(fc1_(x), activation_));  // fc1: (n, D) -> (n, hidden)
}

MixtureOfExpertsImpl::MixtureOfExpertsImpl(const MoEOptions& options) : options_(options) {
  const std::int64_t dim = options.dim();
  if (options.num_experts() <= 0 || options.top_k() <= 0 || options.top_k() > options.num_experts())
    throw ValueError(message("MixtureOfExperts: need 0 < top_k <= num_experts, got top_k ", options.top_k(),
                             " and num_experts ", options.num_experts()));
  if (!(options.capacity_factor() >= 0.0) || !(options.noise_epsilon() >= 0.0))
    throw ValueError(message("MixtureOfExperts: capacity_factor and noise_epsilon must be >= 0, got ",
                             options.capacity_factor(), " and ", options.noise_epsilon()));
  if (options.noisy_gating() && options.top_k() == options.num_experts())
    throw ValueError(message("MixtureOfExperts: noisy gating needs top_k below num_experts, got ", options.top_k(),
                             " of ", options.num_experts()));
  if (dim <= 0 || options.hidden() <= 0)
    throw ValueError(
        message("MixtureOfExperts: dim and hidden must be positive, got ", dim, " and ", options.hidden()));
  Generator& gen = generator_or_default(options.generator());
  options_.generator(nullptr);  // not kept: it need not outlive the construction
  router_ = register_module(
      "router", Linear(LinearOptions(dim, options.num_experts()).bias(options.router_bias()).generator(&gen)));
  if (options.noisy_gating()) {
    noise_ = register_module("noise", Linear(LinearOptions(dim, options.num_experts()).bias(false).generator(&gen)));
    NoGradGuard no_grad;
    noise_->weight().fill_(0.0);  // softplus(0) + epsilon: the same noise scale for every token at first
  }
  auto list = register_module("experts", ModuleList());  // "experts.0.fc1.weight" ...
  const ExpertOptions expert = ExpertOptions(dim, options.hidden()).activation(options.activation()).generator(&gen);
  for (std::int64_t e = 0; e < options.num_experts(); ++e) experts_.push_back(list->push_back(Expert(expert)));
  if (options.noisy_gating()) {
    noise_gen_.manual_seed(gen.next_u64());
    register_generator("noise_generator", noise_gen_);
  }
}

MoEOutput MixtureOfExpertsImpl::forward(const Tensor& x) {
  const std::int64_t dim = options_.dim();
  if (x.dim() == 0 || x.shape().back() != dim)
    throw ShapeError(
        message("MixtureOfExperts: expected input with last dimension ", dim, ", got shape ", x.shape().str()));
  const std::int64_t num_experts = options_.num_experts();
  const std::int64_t k = options_.top_k();
  const Tensor tokens = x.reshape({-1, dim});  // tokens: (N, D)
  const std::int64_t n = tokens.shape()[0];

  MoEOutput result;
  const Tensor clean = router_(tokens);  // clean: (N, E)
  Tensor logits = clean;                 // logits: (N, E), what the top k are taken of
  if (noise_) {
    result.noise_stddev = softplus(noise_(tokens)) + options_.noise_epsilon();  // (N, E)
    if (is_training()) logits = clean + randn(clean.shape(), noise_gen_, clean.dtype()) * result.noise_stddev;
    result.load_loss = noisy_top_k_load_loss(clean, logits, result.noise_stddev, k);
  }
  const auto [top_ids, weights] = top_k_routing(logits, k, options_.weighting());  // (N, k) each

  // Group the (token, slot) pairs by expert: one index list per expert, slot by slot (every first
  // choice before any second), so that a full expert drops the later choices.
  const std::vector<std::int64_t> ids = top_ids.to_vector<std::int64_t>();
  std::vector<std::vector<std::int64_t>> token_rows(static_cast<std::size_t>(num_experts));
  std::vector<std::vector<std::int64_t>> weight_slots(static_cast<std::size_t>(num_experts));
  result.tokens_per_expert.assign(static_cast<std::size_t>(num_experts), 0);
  result.top1_per_expert.assign(static_cast<std::size_t>(num_experts), 0);
  result.dropped_per_expert.assign(static_cast<std::size_t>(num_experts), 0);
  if (options_.capacity_factor() > 0.0)
    result.capacity = static_cast<std::int64_t>(
        std::ceil(options_.capacity_factor() * static_cast<double>(n * k) / static_cast<double>(num_experts)));
  std::vector<std::int64_t> kept_slots(static_cast<std::size_t>(n), 0);
  for (std::int64_t j = 0; j < k; ++j) {
    for (std::int64_t t = 0; t < n; ++t) {
      const auto e = static_cast<std::size_t>(ids[static_cast<std::size_t>(t * k + j)]);
      if (j == 0) ++result.top1_per_expert[e];
      if (result.capacity > 0 && result.tokens_per_expert[e] >= result.capacity) {
        ++result.dropped_per_expert[e];
        ++result.dropped_assignments;
        continue;
      }
      token_rows[e].push_back(t);
      weight_slots[e].push_back(t * k + j);
      ++result.tokens_per_expert[e];
      ++kept_slots[static_cast<std::size_t>(t)];
    }
  }
  result.dropped_tokens = std::count(kept_slots.begin(), kept_slots.end(), 0);

  // Each expert runs once over its tokens; its weighted outputs are scatter-added back.
  Tensor out = zeros({n, dim}, x.dtype());  // out: (N, D)
  const Tensor flat_weights = weights.reshape({n * k});
  for (std::int64_t e = 0; e < num_experts; ++e) {
    const auto& rows = token_rows[static_cast<std::size_t>(e)];
    if (rows.empty()) continue;
    const std::int64_t m = static_cast<std::int64_t>(rows.size());
    const Tensor row_index = from_vector(rows, {m});
    const Tensor expert_in = index_select(tokens, 0, row_index);                 // (m, D)
    const Tensor expert_out = experts_[static_cast<std::size_t>(e)](expert_in);  // (m, D)
    const Tensor w = index_select(flat_weights, 0, from_vector(weight_slots[static_cast<std::size_t>(e)], {m}));
    const Tensor contribution = expert_out * w.unsqueeze(1);  // (m, D)
    out = scatter_add(out, 0, row_index.unsqueeze(1).expand({m, dim}), contribution);
  }
  result.output = out.reshape(x.shape());

  // Auxiliary losses.
  result.load_balancing_loss = load_balancing_loss(logits, top_ids);
  result.importance_loss = importance_loss(top_ids, weights, num_experts);
  result.router_z_loss = router_z_loss(logits);
  result.router_logits = logits;
  result.clean_logits = clean;
  result.expert_indices = top_ids;
  result.routing_weights = weights;
  return result;
}

}  // namespace tapegrad::nn
