#pragma once
// The router of a mixture of experts as functions of its logits (N tokens, E experts): the top-k assignment and
// the auxiliary losses, so they can be used without a MixtureOfExperts module (which calls these same functions).
//
//   auto [ids, weights] = nn::top_k_routing(logits, 2, nn::RouterWeighting::SoftmaxTopK);
//   Tensor aux = 0.01 * nn::load_balancing_loss(logits, ids) + 1e-3 * nn::router_z_loss(logits);
//
// Formulas (moe.h): probs = softmax(logits) over experts;
//   load_balancing (Switch Transformer): E * sum_i f_i * P_i, f_i = fraction of tokens whose top-1 expert is i
//     (a constant), P_i = mean over tokens of probs[:, i] (carries the gradient). 1 when perfectly balanced.
//   importance (Shazeer et al.): CV^2 of importance_i = sum over tokens of the routing weight given to expert i;
//     CV^2 = population variance / mean^2.
//   router_z (ST-MoE): mean over tokens of logsumexp(logits)^2.
//   load (Shazeer et al., noisy gating): CV^2 of each expert's smooth load (noisy_top_k_load_loss).

#include <cstdint>
#include <utility>

#include "tapegrad/autograd/ops.h"
#include "tapegrad/nn/moe.h"

namespace tapegrad::nn {

// logits (N, E) -> expert ids (N, k) Int64, highest score first, and routing weights (N, k): softmax over the
// k selected logits (SoftmaxTopK), or softmax(logits) at the selected experts renormalised to sum to 1
// (SoftmaxThenTopK). ValueError unless 0 < k <= E; ShapeError for logits that are not 2-D.
std::pair<Tensor, Tensor> top_k_routing(const Tensor& router_logits, std::int64_t k, RouterWeighting weighting);

// expert_indices (N, k): the top-k assignment, its column 0 being each token's top-1 expert; when undefined, the
// top-1 expert is argmax(logits) (the same expert: topk puts the largest first).
Tensor load_balancing_loss(const Tensor& router_logits, const Tensor& expert_indices = Tensor());

// expert_indices and routing_weights: (N, k) from top_k_routing.
Tensor importance_loss(const Tensor& expert_indices, const Tensor& routing_weights, std::int64_t num_experts);

Tensor router_z_loss(const Tensor& router_logits);

// The standard normal CDF, 0.5 (1 + erf(x / sqrt(2))).
Tensor normal_cdf(const Tensor& x);

// The load loss of noisy top-k gating (Shazeer et al. 2017), from the clean logits x W_g (N, E), the
// noisy ones H the top-k was taken of (N, E) and the noise's standard deviation (N, E): the smooth
// load of expert i is sum over tokens of P(i) = Phi((clean_i - kth_excluding(H, k, i)) / stddev_i), the
// chance that i stays in the top k when its own noise is drawn again, where kth_excluding is the k-th
// largest of H without entry i (the (k+1)-th largest of H when i is in the top k, else the k-th); the
// loss is CV^2 of the loads, population variance / mean^2. Gradient reaches the clean logits, the
// stddev and the thresholds. ValueError unless 0 < k < E; ShapeError for mismatched shapes.
Tensor noisy_top_k_load_loss(const Tensor& clean_logits, const Tensor& noisy_logits, const Tensor& noise_stddev,
                             std::int64_t k);

}  // namespace tapegrad::nn
