#pragma once
// Attention for recurrent decoders: a query (a decoder state) scores every source position's key
// (an encoder state), the scores are softmaxed over the source, and the context is the weighted
// sum of the keys:
//   Dot       (Luong)     score(h, z) = h . z                       (query_dim == key_dim)
//   General   (Luong)     score(h, z) = h . (W z)                   W: "weight" (query_dim, key_dim)
//   Concat    (Luong)     score(h, z) = v . tanh(W [h; z])          W: "proj.weight" (A, query_dim + key_dim)
//   Additive  (Bahdanau)  score(h, z) = v . tanh(W1 h + W2 z + b)   "query_proj" (with b), "key_proj", "v"
// with v: "v" (A) and A = attention_dim. Concat and Additive are the same family; Additive keeps
// the key projection separate (unbiased), so a decoder can project the keys once per sequence
// (project_keys) and reuse them at every step.
//
// Location-aware attention (Chorowski et al. 2015; Additive only): with location_kernel K (odd),
// each position's energy also sees the alignment of the step before around it,
//   score_t(h, z_j) = v . tanh(W1 h + W2 z_j + b + U [a_{t-1}(j - K/2), ..., a_{t-1}(j + K/2)])
// with U: "location_weight" (A, K) and a_{t-1} zero outside the source. The steps of a (B, T, dq)
// query then run one after another, each from the weights of the one before (the first from
// `previous`, zeros when undefined), so a decoder can learn moves ("one position to the left")
// that hold at any source length.
//
//   nn::AlignmentAttention attn{nn::AlignmentOptions(256, 512).score(nn::AlignmentScore::Additive)};
//   nn::AlignmentResult r = attn(h, memory, pad);  // h: (B, 256) or (B, T, 256), memory: (B, S, 512),
//                                                  // pad: Bool (B, S), true = padding
//   r.context;  // (B, 512) or (B, T, 512)
//   r.weights;  // (B, S) or (B, T, S), rows sum to 1, 0 at padding
//   r.scores;   // the scores before the softmax, -inf at padding (log_softmax gives a pointer
//               // network's log-probabilities over source positions)

#include <cstdint>

#include "tapegrad/nn/linear.h"
#include "tapegrad/nn/module.h"

namespace tapegrad::nn {

enum class AlignmentScore { Dot, General, Concat, Additive };

struct AlignmentOptions {
  AlignmentOptions(std::int64_t query_dim, std::int64_t key_dim) : query_dim_(query_dim), key_dim_(key_dim) {}
  TAPEGRAD_ARG(std::int64_t, query_dim);
  TAPEGRAD_ARG(std::int64_t, key_dim);
  TAPEGRAD_ARG(AlignmentScore, score) = AlignmentScore::General;
  TAPEGRAD_ARG(std::int64_t, attention_dim) = 0;    // Concat and Additive; 0: query_dim
  TAPEGRAD_ARG(std::int64_t, location_kernel) = 0;  // Additive: the width K of the location term; 0: none
  TAPEGRAD_ARG(Generator*, generator) = nullptr;    // initial weights (default generator if null)
};

struct AlignmentResult {
  Tensor context;
  Tensor weights;
  Tensor scores;
};

class AlignmentAttentionImpl : public Module {
 public:
  explicit AlignmentAttentionImpl(const AlignmentOptions& options);
  // query: (B, query_dim) or (B, T, query_dim); keys: (B, S, key_dim); padding: Bool (B, S), true
  // = padding, or undefined. ValueError when a row's positions are all padding. previous: (B, S),
  // the alignment before the first step (location-aware attention only; zeros when undefined).
  AlignmentResult forward(const Tensor& query, const Tensor& keys, const Tensor& padding = Tensor(),
                          const Tensor& previous = Tensor());
  // Additive only: keys (B, S, key_dim) through key_proj, to pass to forward_projected at every step.
  Tensor project_keys(const Tensor& keys);
  // forward with the keys' projection computed once by project_keys.
  AlignmentResult forward_projected(const Tensor& query, const Tensor& keys, const Tensor& projected_keys,
                                    const Tensor& padding = Tensor(), const Tensor& previous = Tensor());

  const AlignmentOptions& options() const { return options_; }

 private:
  AlignmentResult attend(const Tensor& query, const Tensor& keys, const Tensor& projected_keys, const Tensor& padding,
                         const Tensor& previous);
  // The location term of every position from the alignment before a step: (B, S) -> (B, S, A).
  Tensor location_term(const Tensor& previous) const;

  AlignmentOptions options_;
  Tensor weight_;  // General
  Linear proj_{nullptr}, query_proj_{nullptr}, key_proj_{nullptr};
  Tensor v_, location_weight_;
};
TAPEGRAD_MODULE(AlignmentAttention);

}  // namespace tapegrad::nn
