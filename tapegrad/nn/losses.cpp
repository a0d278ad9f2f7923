#include "tapegrad/nn/losses.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "tapegrad/autograd/autocast.h"
#include "tapegrad/autograd/error.h"

namespace tapegrad::nn {

namespace {

const char* reduction_name(Reduction reduction) {
  switch (reduction) {
    case Reduction::None:
      return "None";
    case Reduction::Mean:
      return "Mean";
    case Reduction::Sum:
      return "Sum";
    case Reduction::BatchMean:
      return "BatchMean";
  }
  return "?";
}

// BatchMean belongs to kl_div alone; the other losses check before doing any work.
void reject_batch_mean(Reduction reduction, const char* op) {
  if (reduction == Reduction::BatchMean)
    throw ValueError(
        message(op, ": reduction ", reduction_name(reduction), " is only defined for kl_div; use None, Mean or Sum"));
}

using detail::is_bf16;

// None / Sum / Mean over every element.
Tensor reduce_loss(const Tensor& loss, Reduction reduction, const char* op) {
  reject_batch_mean(reduction, op);
  if (reduction == Reduction::Sum) return sum(loss);
  if (reduction == Reduction::Mean) return mean(loss);
  return loss;
}

void check_floating(const Tensor& t, const char* op, const char* what) {
  if (!t.is_floating_point())
    throw TypeError(message(op, ": ", what, " must be a floating-point tensor, got ", dtype_name(t.dtype())));
}

// The arguments of an elementwise loss of input against target: both floating, the same shape
// (PyTorch only warns; a (N, 1) prediction against (N) targets broadcasting to (N, N) is nearly
// always a bug, so it is an error), a reduction other than BatchMean.
void check_elementwise_pair(const Tensor& input, const Tensor& target, Reduction reduction, const char* op) {
  check_floating(input, op, "input");
  check_floating(target, op, "target");
  if (input.shape() != target.shape())
    throw ShapeError(
        message(op, ": target of shape ", target.shape().str(), " must match input of shape ", input.shape().str()));
  reject_batch_mean(reduction, op);
}

// A loss of each element of input against the same element of target, `pointwise` of their
// difference, reduced. bfloat16 operands follow the float32 policy (autograd/autocast.h).
template <class Pointwise>
Tensor pointwise_loss(const Tensor& input, const Tensor& target, Reduction reduction, const char* op,
                      const Pointwise& pointwise) {
  if (is_bf16(input) || is_bf16(target))
    return detail::precision_result(
        pointwise_loss(detail::widen_bf16(input), detail::widen_bf16(target), reduction, op, pointwise), kBFloat16);
  check_elementwise_pair(input, target, reduction, op);
  return reduce_loss(pointwise(input - target), reduction, op);
}

// p log q with the convention 0 log q = 0: where p == 0 the product and its gradient are 0,
// even when q is 0 too (log is evaluated at 1 there, so no -inf reaches the backward).
Tensor xlogy(const Tensor& p, const Tensor& q) {
  const Tensor positive = gt(p.detach(), 0.0);
  const Tensor safe_q = where(positive, q, 1.0);
  return where(positive, p * log(safe_q), 0.0);
}

// The arguments entropy, cross_entropy_between and kl_divergence share, checked before any op runs
// so that errors name the caller: p (and q) floating, axis within the rank of p (broadcast with q),
// log_base finite, positive and not 1.
void check_information_args(const Tensor& p, const Tensor* q, std::int64_t axis, std::optional<double> log_base,
                            const char* op) {
  check_floating(p, op, "p");
  if (q) check_floating(*q, op, "q");
  normalize_axis(axis, std::max(p.dim(), q ? q->dim() : 0), op);
  if (log_base && (!(*log_base > 0.0) || *log_base == 1.0 || !std::isfinite(*log_base)))
    throw ValueError(message(op, ": log_base must be finite, positive and not 1, got ", *log_base));
}

Tensor in_log_base(const Tensor& nats, std::optional<double> log_base) {
  return log_base ? nats / std::log(*log_base) : nats;
}

// The class-index loss shared by nll_loss and cross_entropy: the per-element losses (0 at
// ignored targets, scaled by the target's class weight), the keep mask and what Mean divides by.
struct PickedLoss {
  Tensor loss;         // (N, d...), or (1) for a (C) input
  Tensor keep;         // Bool, loss's shape: target != ignore_index
  double denominator;  // the kept targets' class weights summed (their number without weights)
};

// A class-weight tensor must be (C) and of the input's floating dtype; it takes no gradient (as in PyTorch).
Tensor checked_class_weight(const Tensor& weight, const Tensor& input, std::int64_t classes, const char* op) {
  if (!weight.defined()) return weight;
  if (weight.dim() != 1 || weight.size(0) != classes)
    throw ShapeError(
        message(op, ": weight must have shape (", classes, ") for ", classes, " classes, got ", weight.shape().str()));
  if (weight.dtype() != input.dtype())
    throw TypeError(
        message(op, ": weight is ", dtype_name(weight.dtype()), " but the input is ", dtype_name(input.dtype())));
  return weight.detach();
}

// log_probs: (N, C, d...) -> -log_probs[n, t[n, d...], d...]. A (C) input with a () target is
// handled as a batch of one.
PickedLoss pick_negative_log_probs(const Tensor& log_probs, const Tensor& targets, std::int64_t ignore_index,
                                   const Tensor& weight, const char* op) {
  check_floating(log_probs, op, "input");
  if (targets.dtype() != kInt64)
    throw TypeError(
        message(op, ": targets must be an int64 tensor of class indices, got ", dtype_name(targets.dtype())));
  if (log_probs.dim() == 0) throw ShapeError(message(op, ": input must have a class axis, got a scalar"));
  // PyTorch's layout: (C) pairs with a () target, (N, C, d...) with (N, d...).
  Shape expected;
  for (int axis = 0; axis < log_probs.dim(); ++axis)
    if (axis != (log_probs.dim() == 1 ? 0 : 1)) expected.push_back(log_probs.size(axis));
  if (targets.shape() != expected)
    throw ShapeError(message(op, ": input of shape ", log_probs.shape().str(), " needs targets of shape ",
                             expected.str(), ", got targets of shape ", targets.shape().str()));

  const bool unbatched = log_probs.dim() == 1;
  // x: (N, C, d...)
  const Tensor x = unbatched ? log_probs.unsqueeze(0) : log_probs;
  const std::int64_t classes = x.size(1);
  const Tensor w = checked_class_weight(weight, log_probs, classes, op);
  const std::vector<double> class_weight = w.defined() ? w.to_vector<double>() : std::vector<double>();

  // The targets are data, not part of the graph: validate them and replace ignored entries by
  // class 0, so gather stays in range; the keep mask zeroes those entries afterwards.
  std::vector<std::int64_t> safe = targets.to_vector<std::int64_t>();
  std::vector<bool> keep(safe.size());
  std::vector<double> target_weight(safe.size(), 0.0);  // the class weight of each kept target
  double denominator = 0.0;
  for (std::size_t i = 0; i < safe.size(); ++i) {
    const std::int64_t t = safe[i];
    keep[i] = t != ignore_index;
    if (!keep[i]) {
      safe[i] = 0;
      continue;
    }
    if (t < 0 || t >= classes)
      throw IndexError(message(op, ": target ", t, " is out of range for ", classes, " classes (ignore_index is ",
                               ignore_index, ")"));
    target_weight[i] = class_weight.empty() ? 1.0 : class_weight[static_cast<std::size_t>(t)];
    denominator += target_weight[i];
  }
  Shape target_shape = x.shape();
  target_shape[1] = 1;
  // index: (N, 1, d...), picked: (N, d...)
  const Tensor index = from_vector(safe, target_shape);
  const Tensor picked = gather(x, 1, index).squeeze(1);
  const Tensor keep_mask = from_vector(keep, picked.shape());
  if (class_weight.empty()) return {where(keep_mask, -picked, 0.0), keep_mask, denominator};
  const Tensor scale = from_vector(target_weight, picked.shape()).to(picked.dtype());  // (N, d...)
  return {where(keep_mask, -picked * scale, 0.0), keep_mask, denominator};
}

// weight (C) shaped to broadcast along the class axis of an input of `rank` axes: (1, C, 1, ...), or (C).
Tensor along_class_axis(const Tensor& weight, int rank) {
  if (rank == 1) return weight;
  Shape shape(std::vector<std::int64_t>(static_cast<std::size_t>(rank), 1));
  shape[1] = weight.size(0);
  return weight.reshape(shape);
}

// Reduces per-target losses: Mean divides by the kept targets' weights summed (their number without class
// weights), so it is 0 / 0 = NaN when all are ignored, as in PyTorch.
Tensor reduce_class_loss(const Tensor& loss, double denominator, Reduction reduction, bool unbatched, const char* op) {
  switch (reduction) {
    case Reduction::None:
      return unbatched ? loss.squeeze(0) : loss;
    case Reduction::Sum:
      return sum(loss);
    case Reduction::Mean:
      return sum(loss) / denominator;
    case Reduction::BatchMean:
      break;
  }
  reject_batch_mean(reduction, op);
  return loss;
}

// (1 - eps) * p + eps / C: the smoothed version of probability targets p.
Tensor eps_smooth(const Tensor& p, double eps, double classes) {
  return eps > 0.0 ? p * (1.0 - eps) + eps / classes : p;
}

}  // namespace

Tensor nll_loss(const Tensor& log_probs, const Tensor& targets, const NllLossOptions& options) {
  if (is_bf16(log_probs))  // float32 policy (autograd/autocast.h)
    return detail::precision_result(nll_loss(log_probs.to(kFloat32), targets, options), kBFloat16);
  reject_batch_mean(options.reduction, "nll_loss");
  const PickedLoss picked =
      pick_negative_log_probs(log_probs, targets, options.ignore_index, options.weight, "nll_loss");
  return reduce_class_loss(picked.loss, picked.denominator, options.reduction, log_probs.dim() == 1, "nll_loss");
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, const CrossEntropyOptions& options) {
  if (is_bf16(logits) || is_bf16(targets))  // float32 policy (autograd/autocast.h)
    return detail::precision_result(cross_entropy(detail::widen_bf16(logits), detail::widen_bf16(targets), options),
                                    kBFloat16);
  const char* op = "cross_entropy";
  reject_batch_mean(options.reduction, op);
  if (!(options.label_smoothing >= 0.0 && options.label_smoothing <= 1.0))
    throw ValueError(message(op, ": label_smoothing must be in [0, 1], got ", options.label_smoothing));
  check_floating(logits, op, "input");
  if (logits.dim() == 0) throw ShapeError(message(op, ": input must have a class axis, got a scalar"));
  const bool unbatched = logits.dim() == 1;
  const std::int64_t class_axis = unbatched ? 0 : 1;
  // log_probs: logits' shape, normalised over the class axis (fused, stable).
  const Tensor log_probs = log_softmax(logits, class_axis);
  if (targets.is_floating_point()) {
    // Class probabilities (soft labels, distillation): no index to ignore, so Mean averages over
    // every position, as in PyTorch.
    if (targets.shape() != logits.shape())
      throw ShapeError(message(op, ": probability targets of shape ", targets.shape().str(),
                               " must match input of shape ", logits.shape().str()));
    const double classes = static_cast<double>(logits.size(class_axis));
    const Tensor smoothed = eps_smooth(targets, options.label_smoothing, classes);
    const Tensor w = checked_class_weight(options.weight, logits, logits.size(class_axis), op);
    // loss: targets' shape without the class axis; with class weights -sum_c w_c p_c log q_c, and Mean still
    // averages over the positions (PyTorch 1.13).
    const Tensor weighted = w.defined() ? smoothed * along_class_axis(w, logits.dim()) : smoothed;
    const Tensor loss = -sum(weighted * log_probs, {class_axis});
    return reduce_loss(loss, options.reduction, op);
  }
  PickedLoss picked = pick_negative_log_probs(log_probs, targets, options.ignore_index, options.weight, op);
  Tensor loss = picked.loss;
  const double eps = options.label_smoothing;
  if (eps > 0.0) {
    // The uniform part of the smoothed target: -mean over classes of log p (of w_c log p with class weights),
    // per target, with ignored targets left out like the nll part.
    Tensor uniform_part = options.weight.defined()
                              ? -mean(log_probs * along_class_axis(options.weight.detach(), logits.dim()), {class_axis})
                              : -mean(log_probs, {class_axis});
    if (unbatched) uniform_part = uniform_part.unsqueeze(0);
    loss = (1.0 - eps) * loss + eps * where(picked.keep, uniform_part, 0.0);
  }
  return reduce_class_loss(loss, picked.denominator, options.reduction, unbatched, op);
}

Tensor kl_div(const Tensor& input, const Tensor& target, Reduction reduction, bool log_target) {
  if (is_bf16(input) || is_bf16(target))  // float32 policy (autograd/autocast.h)
    return detail::precision_result(
        kl_div(detail::widen_bf16(input), detail::widen_bf16(target), reduction, log_target), kBFloat16);
  const char* op = "kl_div";
  check_floating(input, op, "input");
  check_floating(target, op, "target");
  Tensor pointwise;
  if (log_target) {
    pointwise = exp(target) * (target - input);
  } else {
    // p log p - p input, with both terms 0 where p == 0: an impossible event costs nothing,
    // whatever the model gives it (even input = -inf).
    const Tensor positive = gt(target.detach(), 0.0);
    pointwise = where(positive, xlogy(target, target) - target * where(positive, input, 0.0), 0.0);
  }
  switch (reduction) {
    case Reduction::None:
      return pointwise;
    case Reduction::Sum:
      return sum(pointwise);
    case Reduction::Mean:
      return mean(pointwise);
    case Reduction::BatchMean: {
      // PyTorch divides by input's first size; a 0-d input is its own batch of one.
      const Tensor total = sum(pointwise);
      return input.dim() == 0 ? total : total / static_cast<double>(input.size(0));
    }
  }
  throw ValueError("kl_div: unknown reduction");
}

Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets, Reduction reduction,
                                        const Tensor& pos_weight, const Tensor& weight) {
  if (is_bf16(logits) || is_bf16(targets) || is_bf16(pos_weight) || is_bf16(weight)) {
    // float32 policy (autocast.h); the result follows the logits
    const Tensor out =
        binary_cross_entropy_with_logits(detail::widen_bf16(logits), detail::widen_bf16(targets), reduction,
                                         detail::widen_bf16(pos_weight), detail::widen_bf16(weight));
    return is_bf16(logits) ? detail::precision_result(out, kBFloat16) : out;
  }
  const char* op = "binary_cross_entropy_with_logits";
  check_floating(logits, op, "logits");
  check_floating(targets, op, "targets");
  if (pos_weight.defined()) check_floating(pos_weight, op, "pos_weight");
  if (weight.defined()) check_floating(weight, op, "weight");
  if (logits.shape() != targets.shape())
    throw ShapeError(message(op, ": targets of shape ", targets.shape().str(), " must match logits of shape ",
                             logits.shape().str()));
  reject_batch_mean(reduction, op);
  return reduce_loss(logistic_loss(logits, targets, pos_weight, weight), reduction, op);
}

namespace {

// log p clamped at -100, as torch's, so that p = 0 gives a finite loss (log reads 1 there).
Tensor clamped_log(const Tensor& p) {
  const Tensor positive = gt(p.detach(), 0.0);
  return where(positive, clamp(log(where(positive, p, 1.0)), -100.0, std::nullopt), -100.0);
}

// -(y log p + (1 - y) log(1 - p)) elementwise, with torch's gradient (p - y) / max(p (1 - p), 1e-12)
// for p (0, not the 1 / (1 - p) of the clamped logs, at p = y = 0) and log(1 - p) - log p for y;
// both written with ops, so they differentiate again.
Tensor binary_cross_entropy_terms(const Tensor& p, const Tensor& y) {
  Tensor out;
  {
    NoGradGuard values_only;
    out = neg(y * clamped_log(p) + rsub(1.0, y) * clamped_log(rsub(1.0, p)));
  }
  if (any_requires_grad({&p, &y}))
    record("binary_cross_entropy", out, {p, y},
           [sp = SavedTensor(p), sy = SavedTensor(y)](const Tensor& g) -> TensorList {
             const Tensor& p = sp.unpack();
             const Tensor& y = sy.unpack();
             return {g * (p - y) / clamp(p * rsub(1.0, p), 1e-12, std::nullopt),
                     g * (clamped_log(rsub(1.0, p)) - clamped_log(p))};
           });
  return out;
}

}  // namespace

Tensor binary_cross_entropy(const Tensor& probs, const Tensor& targets, Reduction reduction, const Tensor& weight) {
  if (is_bf16(probs) || is_bf16(targets) || is_bf16(weight)) {  // float32 policy (autocast.h)
    const Tensor out = binary_cross_entropy(detail::widen_bf16(probs), detail::widen_bf16(targets), reduction,
                                            detail::widen_bf16(weight));
    return is_bf16(probs) ? detail::precision_result(out, kBFloat16) : out;
  }
  const char* op = "binary_cross_entropy";
  check_floating(probs, op, "probs");
  check_floating(targets, op, "targets");
  if (weight.defined()) check_floating(weight, op, "weight");
  if (probs.shape() != targets.shape())
    throw ShapeError(
        message(op, ": targets of shape ", targets.shape().str(), " must match probs of shape ", probs.shape().str()));
  reject_batch_mean(reduction, op);
  if (probs.numel() > 0) {
    const double low = min(probs.detach()).item(), high = max(probs.detach()).item();
    if (!(low >= 0.0 && high <= 1.0))
      throw ValueError(message(op, ": probs must lie in [0, 1], got values from ", low, " to ", high));
  }
  Tensor loss = binary_cross_entropy_terms(probs, targets);
  if (weight.defined()) loss = loss * weight;
  return reduce_loss(loss, reduction, op);
}

Tensor soft_margin_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  const char* op = "soft_margin_loss";
  check_elementwise_pair(input, target, reduction, op);
  return reduce_loss(softplus(neg(input * target)), reduction, op);
}

Tensor margin_ranking_loss(const Tensor& input1, const Tensor& input2, const Tensor& target, double margin,
                           Reduction reduction) {
  const char* op = "margin_ranking_loss";
  check_floating(input1, op, "input1");
  check_floating(input2, op, "input2");
  check_floating(target, op, "target");
  if (input1.shape() != input2.shape() || input1.shape() != target.shape())
    throw ShapeError(message(op, ": input1 ", input1.shape().str(), ", input2 ", input2.shape().str(), " and target ",
                             target.shape().str(), " must have the same shape"));
  reject_batch_mean(reduction, op);
  // clamp, not relu: torch's clamp_min passes the gradient where the hinge is exactly 0.
  return reduce_loss(clamp(neg(target) * (input1 - input2) + margin, 0.0, std::nullopt), reduction, op);
}

Tensor triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                           const TripletMarginLossOptions& options) {
  const char* op = "triplet_margin_loss";
  check_floating(anchor, op, "anchor");
  check_floating(positive, op, "positive");
  check_floating(negative, op, "negative");
  if (anchor.dim() < 1 || anchor.shape() != positive.shape() || anchor.shape() != negative.shape())
    throw ShapeError(message(op, ": anchor ", anchor.shape().str(), ", positive ", positive.shape().str(),
                             " and negative ", negative.shape().str(),
                             " must have the same shape, of at least one axis"));
  if (!(options.p() > 0.0)) throw ValueError(message(op, ": p must be positive, got ", options.p()));
  reject_batch_mean(options.reduction(), op);
  // torch's pairwise_distance: the p-norm of x1 - x2 + eps over the last axis.
  const auto distance = [&](const Tensor& a, const Tensor& b) {
    return norm(a - b + options.eps(), options.p(), {-1});
  };
  const Tensor to_positive = distance(anchor, positive);
  Tensor to_negative = distance(anchor, negative);
  if (options.swap()) to_negative = minimum(to_negative, distance(positive, negative));
  return reduce_loss(clamp(to_positive - to_negative + options.margin(), 0.0, std::nullopt), options.reduction(), op);
}

Tensor cosine_embedding_loss(const Tensor& input1, const Tensor& input2, const Tensor& target, double margin,
                             Reduction reduction) {
  const char* op = "cosine_embedding_loss";
  check_floating(input1, op, "input1");
  check_floating(input2, op, "input2");
  check_floating(target, op, "target");
  if (input1.dim() != 2 || input1.shape() != input2.shape() || target.shape() != Shape{input1.size(0)})
    throw ShapeError(message(op, ": expected input1 and input2 (N, D) and target (N), got ", input1.shape().str(), ", ",
                             input2.shape().str(), " and ", target.shape().str()));
  reject_batch_mean(reduction, op);
  // torch's formula: the squared norms each get 1e-12 before the square root of their product.
  constexpr double kEps = 1e-12;
  const Tensor dot = sum(input1 * input2, {1});
  const Tensor cos = dot / sqrt((sum(input1 * input1, {1}) + kEps) * (sum(input2 * input2, {1}) + kEps));
  const Tensor zero = zeros_like(cos);
  const Tensor loss = where(eq(target, 1.0), rsub(1.0, cos), zero) +
                      where(eq(target, -1.0), clamp(cos - margin, 0.0, std::nullopt), zero);
  return reduce_loss(loss, reduction, op);
}

Tensor hinge_embedding_loss(const Tensor& input, const Tensor& target, double margin, Reduction reduction) {
  const char* op = "hinge_embedding_loss";
  check_elementwise_pair(input, target, reduction, op);
  const Tensor zero = zeros_like(input);
  const Tensor hinge = where(ne(target, 1.0), clamp(rsub(margin, input), 0.0, std::nullopt), zero);
  const Tensor distance = where(ne(target, -1.0), input, zero);
  return reduce_loss(hinge + distance, reduction, op);
}

namespace {

// Class-index targets of a (N, C) or (C) input, as read by the multi-class losses: N values in [0, C).
std::vector<std::int64_t> class_targets(const Tensor& input, const Tensor& target, const char* op) {
  if (target.dtype() != kInt64)
    throw TypeError(message(op, ": target must be an int64 tensor of class indices, got ", dtype_name(target.dtype())));
  const bool unbatched = input.dim() == 1;
  const bool fits =
      unbatched ? target.numel() == 1 && target.dim() <= 1 : target.dim() == 1 && target.size(0) == input.size(0);
  if (!fits)
    throw ShapeError(message(op, ": input of shape ", input.shape().str(), " needs target of shape ",
                             unbatched ? "() or (1)" : Shape{input.size(0)}.str(), ", got ", target.shape().str()));
  const std::int64_t classes = input.size(-1);
  std::vector<std::int64_t> values = target.to_vector<std::int64_t>();
  for (const std::int64_t t : values)
    if (t < 0 || t >= classes)
      throw IndexError(message(op, ": target ", t, " is out of range for ", classes, " classes"));
  return values;
}

void check_class_input(const Tensor& input, const char* op) {
  check_floating(input, op, "input");
  if ((input.dim() != 1 && input.dim() != 2) || input.size(-1) == 0)
    throw ShapeError(message(op, ": input must be (N, C) or (C) with C > 0, got ", input.shape().str()));
}

}  // namespace

Tensor multi_margin_loss(const Tensor& input, const Tensor& target, const MultiMarginLossOptions& options) {
  const char* op = "multi_margin_loss";
  check_class_input(input, op);
  if (options.p() != 1 && options.p() != 2) throw ValueError(message(op, ": p must be 1 or 2, got ", options.p()));
  reject_batch_mean(options.reduction(), op);
  const std::vector<std::int64_t> classes_of = class_targets(input, target, op);
  const Tensor x = input.dim() == 1 ? input.unsqueeze(0) : input;  // (N, C)
  const std::int64_t n = x.size(0);
  const std::int64_t classes = x.size(1);
  const Tensor w = checked_class_weight(options.weight(), input, classes, op);

  const Tensor picked = gather(x, 1, from_vector(classes_of, {n, 1}));  // x[y]: (N, 1)
  const Tensor z = x - picked + options.margin();                       // (N, C)
  // The hinge counts where it is positive, over the classes other than y: a mask, so the gradient is
  // 0 where z <= 0 (torch's rule) and at y.
  std::vector<bool> other(static_cast<std::size_t>(n * classes), true);
  for (std::int64_t i = 0; i < n; ++i) other[static_cast<std::size_t>(i * classes + classes_of[i])] = false;
  const Tensor counted = logical_and(from_vector(other, {n, classes}), gt(z.detach(), 0.0));
  Tensor hinge = where(counted, options.p() == 1 ? z : z * z, 0.0);
  if (w.defined()) hinge = hinge * gather(w, 0, from_vector(classes_of, {n})).unsqueeze(1);
  const Tensor loss = sum(hinge, {1}) / static_cast<double>(classes);  // (N)
  if (options.reduction() == Reduction::None) return loss.reshape(target.shape());
  return reduce_loss(loss, options.reduction(), op);
}

Tensor multilabel_margin_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  const char* op = "multilabel_margin_loss";
  check_class_input(input, op);
  if (target.dtype() != kInt64)
    throw TypeError(message(op, ": target must be an int64 tensor of class indices, got ", dtype_name(target.dtype())));
  if (target.shape() != input.shape())
    throw ShapeError(
        message(op, ": target of shape ", target.shape().str(), " must match input of shape ", input.shape().str()));
  reject_batch_mean(reduction, op);
  const Tensor x = input.dim() == 1 ? input.unsqueeze(0) : input;  // (N, C)
  const std::int64_t n = x.size(0);
  const std::int64_t classes = x.size(1);
  const auto c = static_cast<std::size_t>(classes);

  // Row i's classes Y_i: the target entries before its first -1, read up to the widest row J, so
  // the pairs take (N, J, C), not (N, C, C). listed[i, j] is Y_i's j-th class (0 past its end),
  // pairs[i, j, k] whether j < |Y_i| and class k is not in Y_i.
  const std::vector<std::int64_t> values = target.to_vector<std::int64_t>();
  std::vector<std::vector<std::int64_t>> rows(static_cast<std::size_t>(n));
  std::size_t widest = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    for (std::size_t j = 0; j < c; ++j) {
      const std::int64_t t = values[i * c + j];
      if (t == -1) break;
      if (t < -1 || t >= classes)
        throw IndexError(message(op, ": target ", t, " is out of range for ", classes, " classes (-1 ends a row)"));
      rows[i].push_back(t);
    }
    widest = std::max(widest, rows[i].size());
  }
  const auto width = static_cast<std::int64_t>(widest);
  std::vector<std::int64_t> listed(rows.size() * widest, 0);
  std::vector<bool> pairs(rows.size() * widest * c, false);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    std::vector<bool> in_y(c, false);
    for (const std::int64_t t : rows[i]) in_y[static_cast<std::size_t>(t)] = true;
    for (std::size_t j = 0; j < rows[i].size(); ++j) {
      listed[i * widest + j] = rows[i][j];
      for (std::size_t k = 0; k < c; ++k) pairs[(i * widest + j) * c + k] = !in_y[k];
    }
  }
  // z[i, j, k] = 1 - (x[i, Y_ij] - x[i, k]), counted where positive (the gradient 0 elsewhere, as torch's).
  const Tensor picked = gather(x, 1, from_vector(listed, {n, width}));  // (N, J)
  const Tensor z = rsub(1.0, picked.unsqueeze(2)) + x.unsqueeze(1);     // (N, J, C)
  const Tensor counted = logical_and(from_vector(pairs, {n, width, classes}), gt(z.detach(), 0.0));
  Tensor loss = sum(where(counted, z, 0.0), {1, 2}) / static_cast<double>(classes);  // (N)
  if (input.dim() == 1) loss = loss.squeeze(0);
  return reduce_loss(loss, reduction, op);
}

Tensor multilabel_soft_margin_loss(const Tensor& input, const Tensor& target, Reduction reduction,
                                   const Tensor& weight) {
  const char* op = "multilabel_soft_margin_loss";
  check_elementwise_pair(input, target, reduction, op);
  if (input.dim() == 0) throw ShapeError(message(op, ": input must have a class axis, got a scalar"));
  if (weight.defined()) {
    if (weight.dtype() != input.dtype())
      throw TypeError(
          message(op, ": weight is ", dtype_name(weight.dtype()), " but the input is ", dtype_name(input.dtype())));
    bool fits = weight.dim() <= input.dim();
    for (int i = 1; fits && i <= weight.dim(); ++i) fits = weight.size(-i) == 1 || weight.size(-i) == input.size(-i);
    if (!fits)
      throw ShapeError(message(op, ": weight of shape ", weight.shape().str(),
                               " does not broadcast to the input's shape ", input.shape().str()));
  }
  // -(y log sigmoid(x) + (1 - y) log sigmoid(-x)) = y softplus(-x) + (1 - y) softplus(x)
  Tensor loss = target * softplus(neg(input)) + rsub(1.0, target) * softplus(input);
  if (weight.defined()) loss = loss * weight.detach();
  return reduce_loss(sum(loss, {-1}) / static_cast<double>(input.size(-1)), reduction, op);
}

Tensor poisson_nll_loss(const Tensor& input, const Tensor& target, const PoissonNLLLossOptions& options) {
  const char* op = "poisson_nll_loss";
  check_elementwise_pair(input, target, options.reduction(), op);
  Tensor loss = options.log_input() ? exp(input) - target * input : input - target * log(input + options.eps());
  if (options.full()) {
    // y log y - y + 0.5 log(2 pi y) where y > 1; elsewhere 0, with y read as 2 there so that no log
    // of 0 or below reaches the gradient.
    constexpr double kTwoPi = 6.28318530717958647692;
    const Tensor counted = gt(target.detach(), 1.0);
    const Tensor y = where(counted, target, 2.0);
    loss = loss + where(counted, y * log(y) - y + 0.5 * log(y * kTwoPi), 0.0);
  }
  return reduce_loss(loss, options.reduction(), op);
}

Tensor gaussian_nll_loss(const Tensor& input, const Tensor& target, const Tensor& var,
                         const GaussianNLLLossOptions& options) {
  const char* op = "gaussian_nll_loss";
  check_elementwise_pair(input, target, options.reduction(), op);
  check_floating(var, op, "var");
  // One variance per element, or per row: (..., D), (..., 1) or (...) for an input (..., D).
  Tensor v = var;
  if (var.shape() != input.shape()) {
    Shape rows = input.shape();
    if (!rows.empty()) rows.pop_back();
    Shape column = rows;
    column.push_back(1);
    if (!input.shape().empty() && var.shape() == rows) v = var.unsqueeze(-1);
    else if (input.shape().empty() || var.shape() != column)
      throw ShapeError(message(op, ": var of shape ", var.shape().str(), " must be the input's shape ",
                               input.shape().str(), ", or it with the last axis 1 or without it"));
  }
  if (v.numel() > 0) {
    const double smallest = min(v.detach()).item();
    if (smallest < 0.0) throw ValueError(message(op, ": var has a negative entry (the smallest is ", smallest, ")"));
  }
  // torch clamps a copy of var in place without recording it: the clamped values, the identity gradient.
  const Tensor held = v.detach();
  const Tensor clamped = v + (clamp(held, options.eps(), std::nullopt) - held);
  constexpr double kHalfLogTwoPi = 0.91893853320467274178;
  const Tensor d = input - target;
  Tensor loss = 0.5 * (log(clamped) + d * d / clamped);
  if (options.full()) loss = loss + kHalfLogTwoPi;
  return reduce_loss(loss, options.reduction(), op);
}

Tensor negative_sampling_loss(const Tensor& hidden, const Tensor& positive, const Tensor& negatives,
                              Reduction reduction) {
  const char* op = "negative_sampling_loss";
  check_floating(hidden, op, "hidden");
  if (hidden.dim() != 2 || positive.shape() != hidden.shape() || negatives.dim() != 3 ||
      negatives.shape()[0] != hidden.shape()[0] || negatives.shape()[2] != hidden.shape()[1])
    throw ShapeError(message(op, ": expected hidden (B, D), positive (B, D) and negatives (B, K, D), got ",
                             hidden.shape().str(), ", ", positive.shape().str(), " and ", negatives.shape().str()));
  if (positive.dtype() != hidden.dtype() || negatives.dtype() != hidden.dtype())
    throw TypeError(message(op, ": hidden, positive and negatives must share a dtype, got ", dtype_name(hidden.dtype()),
                            ", ", dtype_name(positive.dtype()), " and ", dtype_name(negatives.dtype())));
  // One score per output vector: (B, 1 + K, D) (B, D, 1) -> (B, 1 + K); the first is the target.
  const Tensor outputs = concat({unsqueeze(positive, 1), negatives}, 1);
  const Tensor scores = squeeze(matmul(outputs, unsqueeze(hidden, 2)), 2);
  std::vector<float> first(static_cast<std::size_t>(scores.shape()[1]), 0.0f);
  first[0] = 1.0f;
  const Tensor targets = expand(from_vector(first, {1, scores.shape()[1]}).to(scores.dtype()), scores.shape());
  return reduce_loss(sum(binary_cross_entropy_with_logits(scores, targets, Reduction::None), {1}), reduction, op);
}

Tensor hierarchical_softmax_loss(const Tensor& hidden, const Tensor& nodes, const Tensor& codes, const Tensor& mask,
                                 Reduction reduction) {
  const char* op = "hierarchical_softmax_loss";
  check_floating(hidden, op, "hidden");
  check_floating(codes, op, "codes");
  if (hidden.dim() != 2 || nodes.dim() != 3 || nodes.shape()[0] != hidden.shape()[0] ||
      nodes.shape()[2] != hidden.shape()[1] || codes.shape() != Shape{nodes.shape()[0], nodes.shape()[1]} ||
      mask.shape() != codes.shape() || mask.dtype() != kBool)
    throw ShapeError(message(op, ": expected hidden (B, D), nodes (B, L, D), codes (B, L) and a Bool mask (B, L), got ",
                             hidden.shape().str(), ", ", nodes.shape().str(), ", ", codes.shape().str(), " and ",
                             dtype_name(mask.dtype()), " ", mask.shape().str()));
  if (nodes.dtype() != hidden.dtype())
    throw TypeError(message(op, ": hidden and nodes must share a dtype, got ", dtype_name(hidden.dtype()), " and ",
                            dtype_name(nodes.dtype())));
  {
    // A code is the branch taken: any other value would weigh a node by something that is no probability.
    const std::vector<double> branches = codes.to(kFloat64).to_vector<double>();
    for (std::size_t i = 0; i < branches.size(); ++i)
      if (branches[i] != 0.0 && branches[i] != 1.0)
        throw ValueError(message(op, ": codes must be 0 or 1, got ", branches[i], " at flat index ", i));
  }
  // Code 0 is the branch of probability sigmoid(h . v): a binary target of 1 - code on that logit.
  const Tensor scores = squeeze(matmul(nodes, unsqueeze(hidden, 2)), 2);  // (B, L)
  const Tensor per_node = binary_cross_entropy_with_logits(scores, 1.0 - codes.to(scores.dtype()), Reduction::None);
  return reduce_loss(sum(where(mask, per_node, 0.0), {1}), reduction, op);
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  return pointwise_loss(input, target, reduction, "mse_loss", [](const Tensor& diff) { return diff * diff; });
}

Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  return pointwise_loss(input, target, reduction, "l1_loss", [](const Tensor& diff) { return abs(diff); });
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction reduction, double beta) {
  const char* op = "smooth_l1_loss";
  if (!std::isfinite(beta) || beta < 0.0) throw ValueError(message(op, ": beta must be finite and >= 0, got ", beta));
  if (beta == 0.0) return pointwise_loss(input, target, reduction, op, [](const Tensor& diff) { return abs(diff); });
  return pointwise_loss(input, target, reduction, op, [beta](const Tensor& diff) {
    const Tensor size = abs(diff);
    return where(lt(size, beta), diff * diff * (0.5 / beta), size - 0.5 * beta);
  });
}

Tensor huber_loss(const Tensor& input, const Tensor& target, Reduction reduction, double delta) {
  const char* op = "huber_loss";
  if (!std::isfinite(delta) || delta <= 0.0)
    throw ValueError(message(op, ": delta must be finite and > 0, got ", delta));
  return pointwise_loss(input, target, reduction, op, [delta](const Tensor& diff) {
    const Tensor size = abs(diff);
    return where(lt(size, delta), diff * diff * 0.5, (size - 0.5 * delta) * delta);
  });
}

Tensor entropy(const Tensor& p, std::int64_t axis, std::optional<double> log_base) {
  check_information_args(p, nullptr, axis, log_base, "entropy");
  return in_log_base(-sum(xlogy(p, p), {axis}), log_base);
}

Tensor cross_entropy_between(const Tensor& p, const Tensor& q, std::int64_t axis, std::optional<double> log_base) {
  check_information_args(p, &q, axis, log_base, "cross_entropy_between");
  return in_log_base(-sum(xlogy(p, q), {axis}), log_base);
}

Tensor kl_divergence(const Tensor& p, const Tensor& q, std::int64_t axis, std::optional<double> log_base) {
  check_information_args(p, &q, axis, log_base, "kl_divergence");
  return in_log_base(sum(xlogy(p, p) - xlogy(p, q), {axis}), log_base);
}

}  // namespace tapegrad::nn
