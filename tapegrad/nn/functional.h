#pragma once
// Functional forms of the nn layers, as torch::nn::functional: the computation of a module given
// its weights as arguments. A thin layer over the ops; the modules (Linear, LayerNorm, RMSNorm,
// Dropout, MultiHeadAttention) call these, so each computation has one implementation.
//
//   namespace F = tapegrad::nn::functional;
//   Tensor y = F::linear(x, w, b);                            // x: (..., in), w: (out, in) -> (..., out)
//   Tensor n = F::rms_norm(x, {64}, weight, 1e-6);             // x: (..., 64)
//   Tensor a = F::scaled_dot_product_attention(q, k, v, nn::AttentionForwardOptions().is_causal(true));
//   auto r = F::multi_head_attention_forward(x, x, x, F::MultiHeadAttentionForwardFuncOptions(8, wo, bo)
//                                                         .in_proj_weight(w_in).in_proj_bias(b_in));

#include <cstdint>
#include <optional>
#include <vector>

#include "tapegrad/nn/attention.h"
#include "tapegrad/nn/similarity.h"

namespace tapegrad::nn::functional {

// F.normalize and F.cosine_similarity (similarity.h).
using nn::cosine_similarity;
using nn::normalize;

// torch's F.linear: x (..., in) @ weight (out, in)^T + bias (out), the bias optional.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// torch's F.layer_norm over the trailing axes normalized_shape (the fused op):
//   (x - mean) / sqrt(var + eps) * weight + bias,  var biased; weight and bias optional.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

// torch's F.rms_norm over the trailing axes normalized_shape:
//   x / sqrt(mean(x^2 over those axes) + eps) * weight,  weight (normalized_shape) optional.
// eps defaults to the machine epsilon of x's dtype, as torch's. Composed from differentiable ops.
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                std::optional<double> eps = std::nullopt);

// torch's F.leaky_relu: x where x > 0, negative_slope * x elsewhere (gradient negative_slope at 0,
// as torch's). TypeError for a tensor that is not floating-point.
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);

// torch's F.elu: x where x > 0, alpha (exp(x) - 1) elsewhere, computed with expm1 (gradient alpha
// at 0, as torch's). selu is scale * elu(x, alpha) with the constants of self-normalising networks
// (alpha 1.6732632423543772, scale 1.0507009873554805); celu is max(0, x) + min(0, alpha (exp(x /
// alpha) - 1)), ValueError for alpha 0.
Tensor elu(const Tensor& x, double alpha = 1.0);
Tensor selu(const Tensor& x);
Tensor celu(const Tensor& x, double alpha = 1.0);

// torch's F.softplus: log(1 + exp(beta x)) / beta, and x itself where beta x > threshold (gradient
// 1 there). ValueError for beta 0.
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);

// torch's F.mish: x tanh(softplus(x)).
Tensor mish(const Tensor& x);

// torch's F.hardtanh: x clamped to [min_val, max_val], the gradient 1 strictly inside and 0 at and
// beyond the bounds (as torch's). ValueError when max_val < min_val. relu6 is hardtanh(x, 0, 6).
Tensor hardtanh(const Tensor& x, double min_val = -1.0, double max_val = 1.0);
Tensor relu6(const Tensor& x);
// torch's F.hardsigmoid, x / 6 + 1/2 clamped to [0, 1] (gradient 1/6 strictly inside (-3, 3)), and
// F.hardswish, x * hardsigmoid(x) (gradient x / 3 + 1/2 on [-3, 3], as torch's at the ends too).
Tensor hardsigmoid(const Tensor& x);
Tensor hardswish(const Tensor& x);
// torch's F.logsigmoid, log(sigmoid(x)) = -softplus(-x) without overflow; F.softsign, x / (1 + |x|).
Tensor logsigmoid(const Tensor& x);
Tensor softsign(const Tensor& x);
// torch's F.softshrink: x - lambd above lambd, x + lambd below -lambd, 0 between (gradient 1 outside
// [-lambd, lambd], 0 on it); F.hardshrink: x where |x| > lambd, else 0; F.tanhshrink: x - tanh(x);
// F.threshold: x where x > threshold, else value (gradient 0 there). ValueError for a negative
// lambd of softshrink (as torch's).
Tensor softshrink(const Tensor& x, double lambd = 0.5);
Tensor hardshrink(const Tensor& x, double lambd = 0.5);
Tensor tanhshrink(const Tensor& x);
Tensor threshold(const Tensor& x, double threshold, double value);
// torch's F.softmin: softmax(-x) along axis.
Tensor softmin(const Tensor& x, std::int64_t axis);
// torch's F.pairwise_distance: the p-norm of x1 - x2 + eps over the last axis (broadcast together),
// that axis kept with keepdim.
Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p = 2.0, double eps = 1e-6, bool keepdim = false);
// torch's F.glu: x's halves a and b along axis, a * sigmoid(b). ValueError for an odd axis size.
Tensor glu(const Tensor& x, std::int64_t axis = -1);
// torch's F.prelu: x where x > 0, weight * x elsewhere; weight has one entry, or one per channel
// (x's axis 1). ShapeError for another weight size.
Tensor prelu(const Tensor& x, const Tensor& weight);

// torch's F.pad in constant mode: pads holds (before, after) pairs for the last axis first, then
// the one before it, and so on (at most one pair per axis); each pads that many `value` elements
// before and after the axis, and a negative count crops instead. The gradient of the padding is
// dropped, the rest flows back to x.
//   F::pad(x, {1, 1})          // (N, T) -> (N, T + 2), a zero each side of every row
//   F::pad(x, {0, 0, 2, 0})    // (N, T) -> (N + 2, T), two rows of zeros on top
// ValueError for an odd number of pads, more pairs than axes, or crops that do not fit an axis
// (the message names the axis, its size and the pair).
Tensor pad(const Tensor& x, const std::vector<std::int64_t>& pads, double value = 0.0);

// torch's F.pad modes: Constant (the value above), Reflect (mirrored about the edge entry, which is
// not repeated: [a b c] padded by 2 before is [c b a b c]; a pad must be smaller than the axis),
// Replicate (the edge entry repeated) and Circular (wrapped around; a pad at most the axis's size).
// The gradient of each padded entry goes back to the entry it copies.
enum class PadMode { Constant, Reflect, Replicate, Circular };
// pad with a mode, pads as above; ValueError for a negative pad in the modes other than Constant,
// or a pad the axis cannot give (naming the axis, its size and the pair).
Tensor pad(const Tensor& x, const std::vector<std::int64_t>& pads, PadMode mode, double value = 0.0);

// torch's F.dropout: when training, zeroes each element with probability p (drawn from gen) and
// scales the rest by 1 / (1 - p); the identity otherwise.
Tensor dropout(const Tensor& x, double p, bool training, Generator& gen);
// torch's F.dropout1d and F.dropout2d: when training, zeroes whole channels with probability p (one
// draw per sample and channel) and scales the rest by 1 / (1 - p). dropout1d takes (N, C, L) or
// (C, L); dropout2d (N, C, H, W) only (torch 1.13 reads a 3-D input as (N, C, L) and later versions
// as (C, H, W): unsqueeze or use dropout1d to say which).
Tensor dropout1d(const Tensor& x, double p, bool training, Generator& gen);
Tensor dropout2d(const Tensor& x, double p, bool training, Generator& gen);
// torch's F.dropout3d: the same over (N, C, D, H, W), or unbatched (C, D, H, W).
Tensor dropout3d(const Tensor& x, double p, bool training, Generator& gen);
// torch's F.alpha_dropout, dropout for self-normalising (SELU) networks: when training each element
// is dropped with probability p to SELU's negative saturation -alpha' (alpha' = 1.7580993408473766,
// SELU's scale times its alpha), then all are mapped by a x + b with a = 1 / sqrt((alpha'^2 p + 1)
// (1 - p)) and b = a alpha' p, so inputs of mean 0 and variance 1 keep them. p = 1 gives zeros; the
// identity when not training. feature_alpha_dropout draws one mask entry per (sample, channel) of
// (N, C, ...) instead. ValueError for a p outside [0, 1].
Tensor alpha_dropout(const Tensor& x, double p, bool training, Generator& gen);
Tensor feature_alpha_dropout(const Tensor& x, double p, bool training, Generator& gen);

// torch's F.rrelu, the randomised leaky ReLU: x where x > 0, else a x, with a drawn uniformly from
// [lower, upper] for each element when training and (lower + upper) / 2 otherwise; the gradient is
// that slope. ValueError unless 0 <= lower <= upper.
Tensor rrelu(const Tensor& x, double lower, double upper, bool training, Generator& gen);

// torch's F.local_response_norm over the channels of (N, C, ...): x / (k + alpha / size * sum of x^2
// over the `size` channels around each one)^beta, the window running size / 2 channels before and
// (size - 1) / 2 after, zeros past the ends. ShapeError for fewer than 3 axes; ValueError for size < 1.
Tensor local_response_norm(const Tensor& x, std::int64_t size, double alpha = 1e-4, double beta = 0.75, double k = 1.0);

// torch's F.channel_shuffle (ShuffleNet): the C channels of (N, C, ...) read as (groups, C / groups)
// and written transposed, so channel g * (C / groups) + i moves to i * groups + g. ShapeError for
// fewer than 3 axes; ValueError for groups < 1 or not dividing C.
Tensor channel_shuffle(const Tensor& x, std::int64_t groups);

// torch's F.scaled_dot_product_attention (see attention.h): q: (..., Tq, D), k: (..., Tk, D),
// v: (..., Tk, Dv) -> (..., Tq, Dv). nn::scaled_dot_product_attention also returns the weights.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionForwardOptions& options = {}, double dropout_p = 0.0,
                                    Generator* gen = nullptr);

// The weights of multi_head_attention_forward, named as torch's F.multi_head_attention_forward
// arguments. The input projection is either in_proj_weight (3E, E), rows [W_q; W_k; W_v], when
// key and value have E features, or q_proj_weight (E, E), k_proj_weight (E, kdim) and
// v_proj_weight (E, vdim) (torch's use_separate_proj_weight); in_proj_bias (3E) serves both.
// Grouped-query attention (num_kv_heads = Hkv < H, dividing H; 1 is multi-query attention): keys
// and values have Hkv heads of the same size, Ekv = Hkv * E / H features, so in_proj_weight is
// (E + 2 Ekv, E), k_proj_weight (Ekv, kdim), v_proj_weight (Ekv, vdim), in_proj_bias (E + 2 Ekv),
// and a KV cache holds (B, Hkv, T, E / H): query head h reads key/value head h / (H / Hkv).
//   MultiHeadAttentionForwardFuncOptions(/*num_heads=*/8, out_w, out_b).in_proj_weight(w).in_proj_bias(b)
struct MultiHeadAttentionForwardFuncOptions {
  MultiHeadAttentionForwardFuncOptions(std::int64_t num_heads, Tensor out_proj_weight, Tensor out_proj_bias)
      : num_heads_(num_heads), out_proj_weight_(std::move(out_proj_weight)), out_proj_bias_(std::move(out_proj_bias)) {}
  TAPEGRAD_ARG(std::int64_t, num_heads);
  TAPEGRAD_ARG(std::int64_t, num_kv_heads) = 0;  // 0: num_heads (see above)
  TAPEGRAD_ARG(Tensor, out_proj_weight);         // (E, E)
  TAPEGRAD_ARG(Tensor, out_proj_bias);           // (E) or undefined
  TAPEGRAD_ARG(Tensor, in_proj_weight);          // (3E, E), or undefined with the three below
  TAPEGRAD_ARG(Tensor, in_proj_bias);            // (3E) or undefined
  TAPEGRAD_ARG(Tensor, q_proj_weight);           // (E, E)
  TAPEGRAD_ARG(Tensor, k_proj_weight);           // (E, kdim)
  TAPEGRAD_ARG(Tensor, v_proj_weight);           // (E, vdim)
  TAPEGRAD_ARG(double, dropout_p) = 0.0;         // on the attention weights, when training
  TAPEGRAD_ARG(bool, training) = true;
  TAPEGRAD_ARG(Generator*, generator) = nullptr;  // the dropout masks' source (default generator if null)
  // Beyond torch: rotary position embeddings applied to the projected q and k (self-attention),
  // positions continuing after the cached ones. Called through the handle, so its forward hooks run.
  TAPEGRAD_ARG(RotaryEmbedding, rotary) = nullptr;
};

// torch's F.multi_head_attention_forward with the batch first (batch_first = true):
//   query (B, Tq, E), key (B, Tk, kdim), value (B, Tk, vdim)
//   q, k, v = the input projections, split into num_heads heads of E / num_heads: (B, H, T, Dh)
//   output  = out_proj(scaled_dot_product_attention(q, k, v) with the heads concatenated): (B, Tq, E)
// weights (when attention.need_weights) are per head, (B, H, Tq, Tk), before dropout (torch's
// average_attn_weights = false). Each projection is a gemm over a view of its weight's rows.
// With attention.cache: the projected k, v are appended to the cache and attention runs over all
// of it (causal masking then bottom-right aligned); when key and value are undefined, the cached
// k, v are used as they are (cross-attention while decoding, the memory unchanged).
// Throws ShapeError / ValueError naming the shapes.
AttentionResult multi_head_attention_forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                             const MultiHeadAttentionForwardFuncOptions& options,
                                             const AttentionForwardOptions& attention = {});

}  // namespace tapegrad::nn::functional
