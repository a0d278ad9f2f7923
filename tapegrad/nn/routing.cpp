// Mixture-of-experts routing functions on router logits: top-k assignment and auxiliary losses.

#include "tapegrad/nn/routing.h"

#include <cmath>
#include <string>
#include <vector>

namespace tapegrad::nn {

namespace {

void check_logits(const Tensor& logits, const char* op) {
  if (logits.dim() != 2)
    throw ShapeError(message(op, ": router logits must be (tokens, experts), got shape ", logits.shape().str()));
}

}  // namespace

std::pair<Tensor, Tensor> top_k_routing(const Tensor& router_logits, std::int64_t k, RouterWeighting weighting) {
  check_logits(router_logits, "top_k_routing");
  const std::int64_t num_experts = router_logits.size(1);
  if (k <= 0 || k > num_experts)
    throw ValueError(message("top_k_routing: need 0 < k <= experts, got k ", k, " and ", num_experts, " experts"));
  auto [top_scores, top_ids] = topk(router_logits, k, -1);  // (N, k) each
  Tensor weights;                                           // weights: (N, k)
  if (weighting == RouterWeighting::SoftmaxTopK) {
    weights = softmax(top_scores, -1);
  } else {
    const Tensor picked = gather(softmax(router_logits, -1), 1, top_ids);
    weights = picked / picked.sum({-1}, /*keepdim=*/true);
  }
  return {top_ids, weights};
}

Tensor load_balancing_loss(const Tensor& router_logits, const Tensor& expert_indices) {
  check_logits(router_logits, "load_balancing_loss");
  const std::int64_t n = router_logits.size(0);
  const std::int64_t num_experts = router_logits.size(1);
  const Tensor top1 = expert_indices.defined() ? expert_indices.select(1, 0) : argmax(router_logits, 1);  // (N)
  if (top1.shape() != Shape{n})
    throw ShapeError("load_balancing_loss: expert_indices of shape " + expert_indices.shape().str() +
                     " do not fit logits of shape " + router_logits.shape().str());
  std::vector<double> top1_fraction(static_cast<std::size_t>(num_experts), 0.0);
  for (const std::int64_t e : top1.contiguous().to_vector<std::int64_t>()) {
    if (e < 0 || e >= num_experts)
      throw IndexError(
          message("load_balancing_loss: expert index ", e, " is out of range for ", num_experts, " experts"));
    top1_fraction[static_cast<std::size_t>(e)] += 1.0 / static_cast<double>(n);
  }
  const Tensor f = from_vector(top1_fraction, {num_experts}).to(router_logits.dtype());  // f: (E), no gradient
  const Tensor p = softmax(router_logits, -1).mean({0});                                 // P: (E)
  return (f * p).sum() * static_cast<double>(num_experts);
}

Tensor importance_loss(const Tensor& expert_indices, const Tensor& routing_weights, std::int64_t num_experts) {
  if (expert_indices.dim() != 2 || routing_weights.shape() != expert_indices.shape())
    throw ShapeError("importance_loss: expert_indices " + expert_indices.shape().str() + " and routing_weights " +
                     routing_weights.shape().str() + " must both be (tokens, k)");
  const std::int64_t n = expert_indices.size(0);
  const Tensor gates =
      scatter_add(zeros({n, num_experts}, routing_weights.dtype()), 1, expert_indices, routing_weights);  // (N, E)
  const Tensor importance = gates.sum({0});                                                               // (E)
  return importance.var({}, /*correction=*/0) / importance.mean().pow(2.0);
}

Tensor router_z_loss(const Tensor& router_logits) {
  check_logits(router_logits, "router_z_loss");
  return logsumexp(router_logits, {-1}).pow(2.0).mean();
}

Tensor normal_cdf(const Tensor& x) { return (erf(x * (1.0 / std::sqrt(2.0))) + 1.0) * 0.5; }

Tensor noisy_top_k_load_loss(const Tensor& clean_logits, const Tensor& noisy_logits, const Tensor& noise_stddev,
                             std::int64_t k) {
  check_logits(clean_logits, "noisy_top_k_load_loss");
  if (noisy_logits.shape() != clean_logits.shape() || noise_stddev.shape() != clean_logits.shape())
    throw ShapeError("noisy_top_k_load_loss: clean logits " + clean_logits.shape().str() + ", noisy logits " +
                     noisy_logits.shape().str() + " and noise stddev " + noise_stddev.shape().str() +
                     " must have one shape");
  const std::int64_t num_experts = clean_logits.size(1);
  if (k <= 0 || k >= num_experts)
    throw ValueError(message("noisy_top_k_load_loss: need 0 < k < E, got k ", k, " and E ", num_experts));
  const Tensor top = topk(noisy_logits, k + 1, 1).first;  // (N, k + 1), largest first
  const Tensor threshold_in = top.narrow(1, k, 1);        // (N, 1): the (k+1)-th, for experts in the top k
  const Tensor threshold_out = top.narrow(1, k - 1, 1);   // (N, 1): the k-th, for the others
  const Tensor in_top = gt(noisy_logits, threshold_in);   // (N, E)
  const Tensor p_in = normal_cdf((clean_logits - threshold_in) / noise_stddev);
  const Tensor p_out = normal_cdf((clean_logits - threshold_out) / noise_stddev);
  const Tensor load = where(in_top, p_in, p_out).sum({0});  // (E)
  return load.var({}, /*correction=*/0) / load.mean().pow(2.0);
}

}  // namespace tapegrad::nn
