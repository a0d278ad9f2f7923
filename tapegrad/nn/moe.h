#pragma once
// Mixture of experts (sparsely gated): a router Linear(D, E) scores every token, each token goes
// to its top-k experts, and the experts' outputs are summed with the routing weights.
//
//   x: (..., D) -> tokens (N, D); logits = router(tokens): (N, E); probs = softmax(logits): (N, E)
//   top-k of logits per token -> expert ids (N, k) and scores (N, k)
//   weights: softmax over the k selected scores (SoftmaxTopK), or the full softmax's
//            probabilities at the selected experts renormalised to sum to 1 (SoftmaxThenTopK)
//   out[n] = sum_j weights[n, j] * expert_{ids[n, j]}(x[n])
//
// Tokens are grouped per expert, so each expert runs one matrix product over all its tokens.
// Auxiliary losses, returned with the output (not yet scaled by any coefficient):
//   load_balancing (Switch Transformer): E * sum_i f_i * P_i, f_i = fraction of tokens whose
//     top-1 expert is i (a constant), P_i = mean over tokens of probs[:, i] (carries the
//     gradient to the router). 1 when routing is perfectly balanced.
//   importance (Shazeer et al.): CV^2 of importance_i = sum over tokens of the combine weight
//     given to expert i; CV^2 = population variance / mean^2.
//   router_z (ST-MoE): mean over tokens of logsumexp(logits)^2.
//   load (noisy gating, Shazeer et al.): CV^2 of the experts' smooth loads (routing.h).
// Noisy gating and an expert capacity with token dropping are options (MoEOptions).

#include <cstdint>
#include <memory>
#include <vector>

#include "tapegrad/nn/layers.h"
#include "tapegrad/nn/linear.h"
#include "tapegrad/nn/module.h"

namespace tapegrad::nn {

enum class RouterWeighting { SoftmaxTopK, SoftmaxThenTopK };

//   nn::MixtureOfExperts moe{nn::MoEOptions(/*dim=*/64).num_experts(4).top_k(1).hidden(128)};
struct MoEOptions {
  MoEOptions(std::int64_t dim) : dim_(dim) {}  // NOLINT(google-explicit-constructor)
  TAPEGRAD_ARG(std::int64_t, dim);             // D, the token size
  TAPEGRAD_ARG(std::int64_t, num_experts) = 8;
  TAPEGRAD_ARG(std::int64_t, top_k) = 2;
  TAPEGRAD_ARG(std::int64_t, hidden) = 1024;  // each expert: Linear(D, hidden) -> activation -> Linear(hidden, D)
  TAPEGRAD_ARG(RouterWeighting, weighting) = RouterWeighting::SoftmaxTopK;
  TAPEGRAD_ARG(Activation, activation) = Activation::ReLU;
  TAPEGRAD_ARG(bool, router_bias) = false;
  // Noisy top-k gating (Shazeer et al. 2017): in training the top k are taken of
  // H = x W_g + N(0, 1) * (softplus(x W_noise) + noise_epsilon), W_noise a bias-free Linear(D, E)
  // "noise" that starts at zero; in evaluation of the clean logits x W_g. The noise comes from the
  // module's "noise_generator" (seeded from the construction generator, kept in checkpoints).
  // Adds MoEOutput::load_loss.
  TAPEGRAD_ARG(bool, noisy_gating) = false;
  TAPEGRAD_ARG(double, noise_epsilon) = 1e-2;
  // Expert capacity: each expert takes at most ceil(capacity_factor * N * k / E) (token, slot)
  // pairs, every token's first choice first (in token order), then the second choices, and so on;
  // the pairs beyond are dropped: their weight is not given to any expert (the others' weights are
  // not renormalised), and a token dropped from every slot leaves the layer as zeros, so only the
  // residual connection around the layer carries it. 0: no limit.
  TAPEGRAD_ARG(double, capacity_factor) = 0.0;
  TAPEGRAD_ARG(Generator*, generator) = nullptr;  // initial weights (default generator if null)
};

struct MoEOutput {
  Tensor output;                                 // same shape as the input
  Tensor load_balancing_loss;                    // scalar
  Tensor importance_loss;                        // scalar
  Tensor router_z_loss;                          // scalar
  Tensor load_loss;                              // scalar, noisy gating only (noisy_top_k_load_loss)
  Tensor router_logits;                          // (N, E): the logits the top k were taken of (noisy in training)
  Tensor clean_logits;                           // (N, E): x W_g (the same tensor as router_logits without noise)
  Tensor noise_stddev;                           // (N, E): noisy gating only
  Tensor expert_indices;                         // (N, k) Int64
  Tensor routing_weights;                        // (N, k)
  std::vector<std::int64_t> tokens_per_expert;   // top-k assignments per expert that it ran on
  std::vector<std::int64_t> top1_per_expert;     // top-1 assignments per expert (sums to N)
  std::vector<std::int64_t> dropped_per_expert;  // assignments over the expert's capacity
  std::int64_t capacity = 0;                     // per expert (0: no limit)
  std::int64_t dropped_assignments = 0;          // sum of dropped_per_expert
  std::int64_t dropped_tokens = 0;               // tokens none of whose k assignments was kept
};

struct ExpertOptions {
  ExpertOptions(std::int64_t dim, std::int64_t hidden) : dim_(dim), hidden_(hidden) {}
  TAPEGRAD_ARG(std::int64_t, dim);
  TAPEGRAD_ARG(std::int64_t, hidden);
  TAPEGRAD_ARG(Activation, activation) = Activation::ReLU;
  TAPEGRAD_ARG(Generator*, generator) = nullptr;  // initial weights (default generator if null)
};

// One expert: Linear(D, hidden) -> activation -> Linear(hidden, D); children "fc1", "fc2".
class ExpertImpl : public UnaryModule {
 public:
  explicit ExpertImpl(const ExpertOptions& options);
  Tensor forward(const Tensor& x) override;
  const Linear& fc1() const { return fc1_; }
  const Linear& fc2() const { return fc2_; }

 private:
  Activation activation_;
  Linear fc1_{nullptr};
  Linear fc2_{nullptr};
};
TAPEGRAD_MODULE(Expert);

class MixtureOfExpertsImpl : public Module {
 public:
  // Children: "router", "noise" (noisy gating), "experts.0" ... "experts.{E-1}".
  explicit MixtureOfExpertsImpl(const MoEOptions& options);
  MoEOutput forward(const Tensor& x);

  const Linear& router() const { return router_; }
  const Expert& expert(std::int64_t i) const { return experts_.at(static_cast<std::size_t>(i)); }
  const MoEOptions& options() const { return options_; }
  Generator& noise_generator() { return noise_gen_; }

 private:
  MoEOptions options_;
  Generator noise_gen_;
  Linear router_{nullptr};
  Linear noise_{nullptr};
  std::vector<Expert> experts_;
};
TAPEGRAD_MODULE(MixtureOfExperts);

}  // namespace tapegrad::nn
