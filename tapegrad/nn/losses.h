#pragma once
// Loss functions, as free functions with torch.nn.functional's semantics. Each is composed from
// autograd ops (log_softmax, gather, where, sum ...), so its gradient comes from the engine.
//
//   Tensor loss = nn::cross_entropy(logits, targets);                        // logits (N, C), targets (N)
//   Tensor lm = nn::cross_entropy(logits.transpose(1, 2), tokens, {nn::Reduction::Mean, /*ignore_index=*/0});
//   Tensor kl = nn::kl_div(student.log_softmax(-1), teacher_probs, nn::Reduction::BatchMean);
//
// Shapes follow PyTorch: the class axis of cross_entropy / nll_loss is axis 1, so sequence logits
// (N, T, C) are passed as (N, C, T) (a transposed view, no copy).

#include <cstdint>
#include <optional>

#include "tapegrad/autograd/arg.h"
#include "tapegrad/autograd/ops.h"
#include "tapegrad/autograd/tensor.h"

namespace tapegrad::nn {

// None keeps the per-element losses; Sum adds them; Mean averages them (for cross_entropy and
// nll_loss: over the targets that are not ignored). BatchMean (sum / batch size) is for kl_div
// only; the other losses reject it with a ValueError.
enum class Reduction { None, Mean, Sum, BatchMean };

// PyTorch's defaults: {Reduction::Mean, -100, 0.0, no weight}.
struct CrossEntropyOptions {
  Reduction reduction = Reduction::Mean;
  std::int64_t ignore_index = -100;  // targets equal to it contribute 0 and are left out of the mean
  double label_smoothing = 0.0;      // in [0, 1]
  Tensor weight = Tensor();          // optional class weights (C), the input's dtype; no gradient flows into it
};

struct NllLossOptions {
  Reduction reduction = Reduction::Mean;
  std::int64_t ignore_index = -100;
  Tensor weight = Tensor();  // optional class weights (C), as in CrossEntropyOptions
};

// Negative log-likelihood of class indices.
//   log_probs: (N, C) or (N, C, d1, ...), or (C); targets: Int64 (N) or (N, d1, ...), or () for (C).
//   loss[n, d...] = -log_probs[n, targets[n, d...], d...], and 0 where targets == ignore_index.
//   Mean = sum / (number of non-ignored targets); NaN when every target is ignored (as PyTorch).
//   With class weights w: loss[n, d...] = -w[t] log_probs[n, t, d...] (t = targets[n, d...]), and Mean divides
//   by the sum of w[t] over the non-ignored targets (a weighted mean, as PyTorch).
// Targets outside [0, C) other than ignore_index: IndexError. Shapes that do not fit: ShapeError.
Tensor nll_loss(const Tensor& log_probs, const Tensor& targets, const NllLossOptions& options = {});

// Cross-entropy from unnormalised logits: nll_loss(log_softmax(logits, 1), targets), with
// optional label smoothing eps:
//   loss[n] = (1 - eps) * nll[n] + eps * mean_c(-log_softmax(logits)[n, c])   (0 where ignored)
// which is the cross-entropy against the target (1 - eps) * one_hot + eps / C. Shapes as nll_loss.
// With class weights w (PyTorch 1.13): nll[n] is weighted as in nll_loss, the smoothing term becomes
// eps * mean_c(-w[c] log_softmax(logits)[n, c]), and Mean divides both by the sum of w[t] over the non-ignored
// targets.
// Floating-point targets of logits' shape are class probabilities (soft labels), as in PyTorch:
//   loss[n, d...] = -sum_c p'[n, c, d...] log_softmax(logits)[n, c, d...],  p' = (1 - eps) p + eps / C,
// with Mean over all N * d... positions (ignore_index does not apply); class weights multiply each term:
// -sum_c w[c] p'[n, c, d...] log_softmax(...), Mean still over the positions.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, const CrossEntropyOptions& options = {});

// KL divergence, PyTorch's argument order: input holds log-probabilities log q, target holds
// probabilities p (or log p when log_target), broadcast together.
//   pointwise = p * (log p - input), with 0 where p == 0 (0 log 0 = 0, also in the gradient);
//   log_target: exp(t) * (t - input).
// Mean averages over all elements (PyTorch's default, rarely what is wanted); BatchMean divides
// the sum by input.size(0), which is the mathematical KL(p || q) per sample.
Tensor kl_div(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean,
              bool log_target = false);

// Binary cross-entropy on logits x with float targets y in [0, 1], of x's shape:
//   loss = max(x, 0) - x y + log(1 + exp(-|x|))   (= -[y log s(x) + (1 - y) log(1 - s(x))]).
// pos_weight p (broadcast against x, typically (C) for x (N, C)) weights the positive term, weight
// w (broadcast against x) each element, as PyTorch's weight and pos_weight:
//   loss = w ((1 - y) x + (1 + (p - 1) y) softplus(-x)).
// One fused op each way (logistic_loss, ops.h), then the reduction.
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets,
                                        Reduction reduction = Reduction::Mean, const Tensor& pos_weight = Tensor(),
                                        const Tensor& weight = Tensor());

// Binary cross-entropy on probabilities p in [0, 1] (after a sigmoid), targets y of p's shape:
//   loss = -w (y log p + (1 - y) log(1 - p)),  each log clamped at -100 as torch's,
// so p = 0 or 1 gives a finite loss. Gradient torch's (p - y) / max(p (1 - p), 1e-12) for p and
// log(1 - p) - log p for y. Prefer binary_cross_entropy_with_logits on logits (stable).
// ValueError for a p outside [0, 1] (the message gives the range found).
Tensor binary_cross_entropy(const Tensor& probs, const Tensor& targets, Reduction reduction = Reduction::Mean,
                            const Tensor& weight = Tensor());

// ---------------------------------------------------------------- margins
// torch's soft_margin_loss: log(1 + exp(-y x)) for labels y in {-1, 1}.
Tensor soft_margin_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
// torch's margin_ranking_loss: max(0, -y (x1 - x2) + margin), y = 1 when x1 should rank higher.
Tensor margin_ranking_loss(const Tensor& input1, const Tensor& input2, const Tensor& target, double margin = 0.0,
                           Reduction reduction = Reduction::Mean);

struct TripletMarginLossOptions {
  TAPEGRAD_ARG(double, margin) = 1.0;
  TAPEGRAD_ARG(double, p) = 2.0;
  TAPEGRAD_ARG(double, eps) = 1e-6;
  TAPEGRAD_ARG(bool, swap) = false;
  TAPEGRAD_ARG(Reduction, reduction) = Reduction::Mean;
};
// torch's triplet_margin_loss over the last axis: max(0, d(a, p) - d(a, n) + margin), d(x, y) the
// p-norm of x - y + eps; with swap, d(a, n) is replaced by d(p, n) where that is smaller.
Tensor triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                           const TripletMarginLossOptions& options = {});
// torch's cosine_embedding_loss on rows of (N, D): 1 - cos(x1, x2) where y = 1, max(0, cos - margin)
// where y = -1 (other labels add 0); cos as torch computes it, dot / sqrt((|x1|^2 + 1e-12) (|x2|^2
// + 1e-12)).
Tensor cosine_embedding_loss(const Tensor& input1, const Tensor& input2, const Tensor& target, double margin = 0.0,
                             Reduction reduction = Reduction::Mean);

// torch's hinge_embedding_loss: x where y = 1, max(0, margin - x) where y = -1 (x a distance, y
// whether the pair is similar); other labels add both terms, as torch's. input and target of one shape.
Tensor hinge_embedding_loss(const Tensor& input, const Tensor& target, double margin = 1.0,
                            Reduction reduction = Reduction::Mean);

struct MultiMarginLossOptions {
  TAPEGRAD_ARG(std::int64_t, p) = 1;  // 1 or 2
  TAPEGRAD_ARG(double, margin) = 1.0;
  TAPEGRAD_ARG(Tensor, weight) = Tensor();  // optional class weights (C), the input's dtype; no gradient
  TAPEGRAD_ARG(Reduction, reduction) = Reduction::Mean;
};
// torch's multi_margin_loss, the multi-class hinge: input (N, C) or (C), target Int64 (N) or () /
// (1) for a (C) input. Per example, with y its class and w[y] its weight (1 without),
//   loss = w[y] sum over i != y of max(0, margin - x[y] + x[i])^p / C,
// the gradient 0 where the hinge is 0 (as torch's). None keeps the target's shape.
Tensor multi_margin_loss(const Tensor& input, const Tensor& target, const MultiMarginLossOptions& options = {});

// torch's multilabel_margin_loss: input (N, C) or (C); target Int64 of the input's shape, each row
// the example's classes followed by -1 (what follows the first -1 is not read). Per example, with
// Y its classes,
//   loss = sum over j in Y, i not in Y of max(0, 1 - (x[j] - x[i])) / C.
// IndexError for a class outside [-1, C). None gives (N), or () for a (C) input.
Tensor multilabel_margin_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);

// torch's multilabel_soft_margin_loss: per example the mean over the C classes (the last axis) of
// -w (y log sigmoid(x) + (1 - y) log sigmoid(-x)), y in [0, 1] of the input's shape; weight (C) or
// broadcast to the input, optional. None keeps the leading axes.
Tensor multilabel_soft_margin_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean,
                                   const Tensor& weight = Tensor());

// ---------------------------------------------------------------- likelihoods
struct PoissonNLLLossOptions {
  TAPEGRAD_ARG(bool, log_input) = true;  // the input is log(rate); false: the rate itself
  TAPEGRAD_ARG(bool, full) = false;      // add Stirling's term for log(target!)
  TAPEGRAD_ARG(double, eps) = 1e-8;      // log(rate + eps) when log_input is false
  TAPEGRAD_ARG(Reduction, reduction) = Reduction::Mean;
};
// torch's poisson_nll_loss, the negative log-likelihood of counts y under Poisson rates:
//   log_input: exp(x) - y x;  otherwise x - y log(x + eps);
//   full adds y log y - y + 0.5 log(2 pi y) where y > 1 (Stirling's approximation of log y!).
// input and target of one shape; the target takes a gradient too, as torch's.
Tensor poisson_nll_loss(const Tensor& input, const Tensor& target, const PoissonNLLLossOptions& options = {});

struct GaussianNLLLossOptions {
  TAPEGRAD_ARG(bool, full) = false;  // add 0.5 log(2 pi)
  TAPEGRAD_ARG(double, eps) = 1e-6;  // variances below it count as eps (the gradient passes as if not clamped)
  TAPEGRAD_ARG(Reduction, reduction) = Reduction::Mean;
};
// torch's gaussian_nll_loss: the negative log-likelihood of target under N(input, var),
//   0.5 (log max(var, eps) + (input - target)^2 / max(var, eps)),
// with torch's clamp: the clamp's values are used, its gradient is the identity. input and target
// of one shape; var of the input's shape, or that shape with the last axis 1 or without it (one
// variance per row). ValueError for a negative variance (the message gives the smallest).
Tensor gaussian_nll_loss(const Tensor& input, const Tensor& target, const Tensor& var,
                         const GaussianNLLLossOptions& options = {});

// ---------------------------------------------------------------- word2vec's losses
// Losses that train an output layer over a large vocabulary without its full softmax. hidden
// (B, D) is what predicts the word: the center word's input vector (skip-gram) or the mean of the
// context's (CBOW). Both reduce over the B examples (None keeps (B)).

// Negative sampling (Mikolov et al. 2013): with the target's output vector u_o (positive, (B, D))
// and K noise words' (negatives, (B, K, D)), per example
//   -log sigmoid(h . u_o) - sum_k log sigmoid(-h . u_k).
Tensor negative_sampling_loss(const Tensor& hidden, const Tensor& positive, const Tensor& negatives,
                              Reduction reduction = Reduction::Mean);

// Hierarchical softmax: with the output vectors of the inner nodes on each target's Huffman path
// (nodes (B, L, D)), the branches taken (codes (B, L), 0 or 1) and which of the L entries are on
// the path (mask Bool (B, L); paths differ in length, see huffman.h), per example
//   -log p(word | h) = -sum_i log sigmoid((1 - 2 code_i) h . v_i)   over the path's nodes.
// Over all words of a tree these probabilities sum to 1.
Tensor hierarchical_softmax_loss(const Tensor& hidden, const Tensor& nodes, const Tensor& codes, const Tensor& mask,
                                 Reduction reduction = Reduction::Mean);

// ---------------------------------------------------------------- regression
// Elementwise losses of input against target, which must have the same shape (ShapeError, where
// PyTorch broadcasts with a warning); d = input - target. Gradients at the kinks are those of
// PyTorch: sign(0) = 0 for |d|, and at |d| = beta (delta) both pieces give the same slope.
// Squared error d^2.
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
// Absolute error |d|.
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
// 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta: quadratic near 0, slope 1 beyond beta.
// beta = 0 is l1_loss (its gradient 0 at d = 0, as PyTorch 2's; 1.13 gives -1 there). ValueError
// for a negative or non-finite beta.
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean,
                      double beta = 1.0);
// 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta): smooth_l1_loss times delta, slope delta
// beyond it. ValueError for delta <= 0 or not finite.
Tensor huber_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean, double delta = 1.0);

// ---------------------------------------------------------------- distributions
// Information measures of probability vectors along `axis` (the axis is reduced away). Natural
// logarithm (nats) unless log_base is given: log_base = 2 gives bits. 0 log 0 = 0 throughout.
// ValueError for an integer p or q or a log_base that is not finite, positive and other than 1;
// IndexError for an axis outside the inputs' (broadcast) rank.
//   p = [0.1, 0.2, 0.4, 0.2, 0.1]: entropy(p, -1, 2) = 2.12 bits,
//   cross_entropy_between(p, uniform(5), -1, 2) = log2(5) = 2.32 bits.
// entropy H(p) = -sum p log p.
Tensor entropy(const Tensor& p, std::int64_t axis = -1, std::optional<double> log_base = std::nullopt);
// Cross-entropy H(p, q) = -sum p log q (p and q broadcast); +inf where q = 0 < p.
Tensor cross_entropy_between(const Tensor& p, const Tensor& q, std::int64_t axis = -1,
                             std::optional<double> log_base = std::nullopt);
// KL(p || q) = H(p, q) - H(p) = sum p log(p / q); 0 when p == q.
Tensor kl_divergence(const Tensor& p, const Tensor& q, std::int64_t axis = -1,
                     std::optional<double> log_base = std::nullopt);

}  // namespace tapegrad::nn
