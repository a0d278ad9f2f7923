#include "tapegrad/nn/ctc.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>

#include "tapegrad/autograd/autocast.h"
#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/graph.h"
#include "tapegrad/autograd/ops.h"
#include "tapegrad/autograd/parallel.h"

namespace tapegrad::nn {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// log(exp(a) + exp(b)), exact at -inf.
double log_add(double a, double b) {
  if (a == kNegInf) return b;
  if (b == kNegInf) return a;
  return std::max(a, b) + std::log1p(std::exp(-std::abs(a - b)));
}

// One sequence: its frames (input length) and its labels.
struct Sequence {
  std::int64_t frames = 0;
  std::vector<std::int64_t> labels;
};

// The layout the recursions read: y[(t * N + n) * C + c] = log_probs[t, n, c].
struct Frames {
  const std::vector<double>& y;
  std::int64_t batch;
  std::int64_t classes;
  double at(std::int64_t t, std::int64_t n, std::int64_t c) const {
    return y[static_cast<std::size_t>((t * batch + n) * classes + c)];
  }
};

// Sequence n's loss, and with `grad` its gradient d loss / d log_probs[t, n, c] written into grad's
// (T, N, C) slots for t below its frames. Over the extended labels l' = (blank, l1, blank, l2, ...,
// blank), L = 2S + 1 of them, alpha[t][s] is the log-probability of the alignments of frames 0..t
// ending at l'_s and beta[t][s] that of frames t..end starting at l'_s (both include frame t).
double sequence_loss(const Frames& lp, std::int64_t n, const Sequence& seq, std::int64_t blank, bool zero_infinity,
                     double* grad) {
  const std::int64_t frames = seq.frames;
  const auto labels = static_cast<std::int64_t>(seq.labels.size());
  if (frames == 0) return labels == 0 ? 0.0 : (zero_infinity ? 0.0 : std::numeric_limits<double>::infinity());
  const std::int64_t extended = 2 * labels + 1;
  const auto label = [&](std::int64_t s) { return s % 2 == 0 ? blank : seq.labels[static_cast<std::size_t>(s / 2)]; };
  // Whether an alignment may move from l'_{s-2} to l'_s, skipping the blank between two labels.
  const auto skips_to = [&](std::int64_t s) {
    return s % 2 == 1 && s >= 3 &&
           seq.labels[static_cast<std::size_t>(s / 2)] != seq.labels[static_cast<std::size_t>(s / 2 - 1)];
  };
  const auto cell = [&](std::int64_t t, std::int64_t s) { return static_cast<std::size_t>(t * extended + s); };

  std::vector<double> alpha(static_cast<std::size_t>(frames * extended), kNegInf);
  alpha[cell(0, 0)] = lp.at(0, n, blank);
  if (extended > 1) alpha[cell(0, 1)] = lp.at(0, n, label(1));
  for (std::int64_t t = 1; t < frames; ++t)
    for (std::int64_t s = 0; s < extended; ++s) {
      double a = alpha[cell(t - 1, s)];
      if (s >= 1) a = log_add(a, alpha[cell(t - 1, s - 1)]);
      if (skips_to(s)) a = log_add(a, alpha[cell(t - 1, s - 2)]);
      alpha[cell(t, s)] = a == kNegInf ? kNegInf : a + lp.at(t, n, label(s));
    }
  const double log_p =
      log_add(alpha[cell(frames - 1, extended - 1)], extended > 1 ? alpha[cell(frames - 1, extended - 2)] : kNegInf);
  if (log_p == kNegInf && zero_infinity) return 0.0;
  const double loss = -log_p;
  if (grad == nullptr) return loss;
  if (log_p == kNegInf) {  // no alignment: the gradient is NaN over its frames, as torch's
    for (std::int64_t t = 0; t < frames; ++t)
      for (std::int64_t c = 0; c < lp.classes; ++c)
        grad[(t * lp.batch + n) * lp.classes + c] = std::numeric_limits<double>::quiet_NaN();
    return loss;
  }

  std::vector<double> beta(alpha.size(), kNegInf);
  beta[cell(frames - 1, extended - 1)] = lp.at(frames - 1, n, blank);
  if (extended > 1) beta[cell(frames - 1, extended - 2)] = lp.at(frames - 1, n, label(extended - 2));
  for (std::int64_t t = frames - 2; t >= 0; --t)
    for (std::int64_t s = 0; s < extended; ++s) {
      double b = beta[cell(t + 1, s)];
      if (s + 1 < extended) b = log_add(b, beta[cell(t + 1, s + 1)]);
      if (s + 2 < extended && skips_to(s + 2)) b = log_add(b, beta[cell(t + 1, s + 2)]);
      beta[cell(t, s)] = b == kNegInf ? kNegInf : b + lp.at(t, n, label(s));
    }
  // alpha beta counts frame t's factor twice: d loss / d log y_t(c) = -sum_{l'_s = c} alpha beta / (y_t(c) p).
  std::vector<double> through(static_cast<std::size_t>(lp.classes));
  for (std::int64_t t = 0; t < frames; ++t) {
    std::fill(through.begin(), through.end(), kNegInf);
    for (std::int64_t s = 0; s < extended; ++s) {
      double& c = through[static_cast<std::size_t>(label(s))];
      c = log_add(c, alpha[cell(t, s)] + beta[cell(t, s)]);
    }
    for (std::int64_t c = 0; c < lp.classes; ++c) {
      const double alignments = through[static_cast<std::size_t>(c)];
      // No alignment through c at t (a class of probability 0 included): 0, not exp(-inf + inf).
      grad[(t * lp.batch + n) * lp.classes + c] =
          alignments == kNegInf ? 0.0 : -std::exp(alignments + loss - lp.at(t, n, c));
    }
  }
  return loss;
}

// The N sequences' losses (N) as a recorded op on log_probs (T, N, C).
Tensor sequence_losses(const Tensor& log_probs, const std::vector<Sequence>& sequences, std::int64_t blank,
                       bool zero_infinity) {
  const std::int64_t frames = log_probs.size(0), batch = log_probs.size(1), classes = log_probs.size(2);
  const std::vector<double> y = log_probs.contiguous().to_vector<double>();
  const Frames lp{y, batch, classes};
  const bool needs_grad = any_requires_grad({&log_probs});
  std::vector<double> losses(static_cast<std::size_t>(batch));
  std::vector<double> grad(needs_grad ? y.size() : 0, 0.0);
  parallel_for(0, batch, 1, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t n = lo; n < hi; ++n)
      losses[static_cast<std::size_t>(n)] = sequence_loss(lp, n, sequences[static_cast<std::size_t>(n)], blank,
                                                          zero_infinity, needs_grad ? grad.data() : nullptr);
  });
  Tensor out = from_vector(losses, {batch}).to(log_probs.dtype());
  if (!needs_grad) return out;
  const Tensor dloss = from_vector(grad, {frames, batch, classes}).to(log_probs.dtype());
  record("ctc_loss", out, {log_probs}, [dloss, batch](const Tensor& g) -> TensorList {
    if (is_grad_enabled())
      throw GraphError(
          "ctc_loss: its gradient cannot be differentiated again (torch has no double backward for it either); "
          "call backward without create_graph");
    return {dloss * g.reshape({1, batch, 1})};
  });
  return out;
}

// Lengths given as a tensor: Int64, one per sequence.
std::vector<std::int64_t> lengths_of(const Tensor& lengths, const char* what) {
  if (lengths.dtype() != kInt64 || lengths.dim() > 1)
    throw TypeError(message("ctc_loss: ", what, " must be an int64 tensor of one axis (or a scalar), got ",
                            dtype_name(lengths.dtype()), " ", lengths.shape().str()));
  return lengths.contiguous().to_vector<std::int64_t>();
}

}  // namespace

Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                const Tensor& target_lengths, const CTCLossOptions& options) {
  return ctc_loss(log_probs, targets, lengths_of(input_lengths, "input_lengths"),
                  lengths_of(target_lengths, "target_lengths"), options);
}

Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const std::vector<std::int64_t>& input_lengths,
                const std::vector<std::int64_t>& target_lengths, const CTCLossOptions& options) {
  if (detail::is_bf16(log_probs))  // the losses' float32 policy
    return detail::precision_result(
        ctc_loss(detail::widen_bf16(log_probs), targets, input_lengths, target_lengths, options), kBFloat16);
  if (options.reduction() == Reduction::BatchMean)
    throw ValueError("ctc_loss: reduction BatchMean is only defined for kl_div; use None, Mean or Sum");
  if (!log_probs.is_floating_point())
    throw TypeError(
        message("ctc_loss: log_probs must be a floating-point tensor, got ", dtype_name(log_probs.dtype())));
  if (log_probs.dim() != 2 && log_probs.dim() != 3)
    throw ShapeError(message("ctc_loss: log_probs must be (T, N, C) or (T, C), got ", log_probs.shape().str()));
  if (targets.dtype() != kInt64)
    throw TypeError(message("ctc_loss: targets must be an int64 tensor of labels, got ", dtype_name(targets.dtype())));
  const bool unbatched = log_probs.dim() == 2;
  const Tensor lp = unbatched ? log_probs.unsqueeze(1) : log_probs;  // (T, N, C)
  const std::int64_t frames = lp.size(0), batch = lp.size(1), classes = lp.size(2);
  const std::int64_t blank = options.blank();
  if (blank < 0 || blank >= classes)
    throw ValueError(message("ctc_loss: blank ", blank, " is out of range for ", classes, " classes"));
  if (static_cast<std::int64_t>(input_lengths.size()) != batch ||
      static_cast<std::int64_t>(target_lengths.size()) != batch)
    throw ShapeError(message("ctc_loss: log_probs of shape ", log_probs.shape().str(), " hold ", batch,
                             " sequences, but there are ", input_lengths.size(), " input lengths and ",
                             target_lengths.size(), " target lengths"));
  const bool padded = !unbatched && targets.dim() == 2;
  if (padded ? targets.size(0) != batch : targets.dim() != 1)
    throw ShapeError(message("ctc_loss: targets must be ", unbatched ? "(S)" : "(N, S) padded or 1-D concatenated",
                             " for log_probs of shape ", log_probs.shape().str(), ", got ", targets.shape().str()));
  const std::int64_t width = padded ? targets.size(1) : targets.numel();  // what one sequence may read
  std::int64_t concatenated = 0;
  for (std::size_t n = 0; n < input_lengths.size(); ++n) {
    if (input_lengths[n] < 0 || input_lengths[n] > frames)
      throw ValueError(message("ctc_loss: input_lengths[", n, "] = ", input_lengths[n], " is outside [0, ", frames,
                               "], the frames of log_probs"));
    if (target_lengths[n] < 0 || target_lengths[n] > width)
      throw ValueError(message("ctc_loss: target_lengths[", n, "] = ", target_lengths[n], " is outside [0, ", width,
                               padded ? "], the padded targets' width" : "], the labels the 1-D targets hold"));
    concatenated += target_lengths[n];
  }
  if (!padded && concatenated != width)
    throw ShapeError(
        message("ctc_loss: the target lengths sum to ", concatenated, " but the 1-D targets hold ", width, " labels"));

  const std::vector<std::int64_t> values = targets.contiguous().to_vector<std::int64_t>();
  std::vector<Sequence> sequences(static_cast<std::size_t>(batch));
  std::int64_t start = 0;
  for (std::size_t n = 0; n < sequences.size(); ++n) {
    Sequence& seq = sequences[n];
    seq.frames = input_lengths[n];
    const std::int64_t first = padded ? static_cast<std::int64_t>(n) * width : start;
    for (std::int64_t i = 0; i < target_lengths[n]; ++i) {
      const std::int64_t label = values[static_cast<std::size_t>(first + i)];
      if (label < 0 || label >= classes)
        throw IndexError(
            message("ctc_loss: label ", label, " of sequence ", n, " is out of range for ", classes, " classes"));
      if (label == blank)
        throw ValueError(message("ctc_loss: sequence ", n, " has the blank (", blank, ") among its labels"));
      seq.labels.push_back(label);
    }
    start += target_lengths[n];
  }

  const Tensor losses = sequence_losses(lp, sequences, blank, options.zero_infinity());  // (N)
  if (options.reduction() == Reduction::None) return unbatched ? losses.squeeze(0) : losses;
  if (options.reduction() == Reduction::Sum) return sum(losses);
  std::vector<double> labels_counted(sequences.size());  // Mean: each loss over its target length, at least 1
  for (std::size_t n = 0; n < labels_counted.size(); ++n)
    labels_counted[n] = static_cast<double>(std::max<std::int64_t>(target_lengths[n], 1));
  return mean(losses / from_vector(labels_counted, {batch}).to(losses.dtype()));
}

}  // namespace tapegrad::nn
