#pragma once
// Connectionist temporal classification (Graves et al. 2006): the negative log-likelihood of a label
// sequence under per-frame class distributions, summed over every alignment that collapses to it
// (repeats merged, then blanks removed), by the forward-backward recursions in log space. The layout
// and options are torch.nn.functional.ctc_loss's.
//
//   Tensor log_probs = log_softmax(logits, 2);            // (T, N, C), class 0 the blank
//   Tensor loss = nn::ctc_loss(log_probs, targets, input_lengths, target_lengths);
//
// log_probs: (T, N, C), or (T, C) for one sequence.
// targets: Int64, (N, S) padded (row n's first target_lengths[n] entries are its labels), or 1-D
//   holding the N label sequences one after another (target_lengths summed entries); (S) for one
//   sequence.
// input_lengths, target_lengths: N lengths each (Int64 (N) tensors or vectors); one each, () or (1),
//   for one sequence.
//
// Per sequence the loss is -log sum over alignments of prod_t y_t(pi_t), +inf when no alignment fits
// in its input length (a target needs its length plus its adjacent repeats in frames; its gradient
// over its frames is then NaN, as torch's); zero_infinity makes those losses and their gradients 0.
// A class of probability 0 (log_probs -inf) gets gradient 0 where torch's is NaN. None gives (N)
// (() for one sequence), Sum their sum, Mean the batch mean of each loss divided by its target length
// (at least 1), as torch's.
//
// The gradient with respect to log_probs is that of the loss as written, -(alignments through class
// c at frame t) / (all alignments), 0 past each sequence's input length. torch's kernel adds
// exp(log_probs) to it, which log_softmax's backward cancels: through log_softmax both give the same
// gradient to the logits, and only this one agrees with finite differences of the loss itself. The
// gradient is not differentiable again (backward with create_graph through it is a GraphError, as
// torch has no double backward for ctc_loss). The recursions run in float64 whatever the dtype; a
// bfloat16 input follows the losses' float32 policy (autograd/autocast.h).
//
// Errors name ctc_loss and the values: ShapeError for a layout that does not fit, IndexError for a
// label outside [0, C), ValueError for a label equal to the blank, a blank outside [0, C), or a length
// outside [0, T] (inputs) or [0, S] (the targets' width, or all the labels of 1-D targets).

#include <cstdint>
#include <vector>

#include "tapegrad/autograd/arg.h"
#include "tapegrad/autograd/tensor.h"
#include "tapegrad/nn/losses.h"

namespace tapegrad::nn {

struct CTCLossOptions {
  TAPEGRAD_ARG(std::int64_t, blank) = 0;
  TAPEGRAD_ARG(Reduction, reduction) = Reduction::Mean;
  TAPEGRAD_ARG(bool, zero_infinity) = false;
};

Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const std::vector<std::int64_t>& input_lengths,
                const std::vector<std::int64_t>& target_lengths, const CTCLossOptions& options = {});
Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                const Tensor& target_lengths, const CTCLossOptions& options = {});

}  // namespace tapegrad::nn
