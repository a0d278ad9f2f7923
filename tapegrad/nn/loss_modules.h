#pragma once
// The losses of losses.h as modules, with torch.nn's names: CrossEntropyLoss, NLLLoss, MSELoss,
// L1Loss, SmoothL1Loss, HuberLoss, KLDivLoss, BCELoss, BCEWithLogitsLoss, SoftMarginLoss,
// MarginRankingLoss, CosineEmbeddingLoss, TripletMarginLoss, HingeEmbeddingLoss, MultiMarginLoss,
// MultiLabelMarginLoss, MultiLabelSoftMarginLoss, PoissonNLLLoss, GaussianNLLLoss and CTCLoss. Each
// keeps its options and calls its function on forward(input, target) (three tensors for the ranking,
// embedding and triplet losses, forward(input, target, var) for GaussianNLLLoss, and
// forward(log_probs, targets, input_lengths, target_lengths) for CTCLoss);
// class and element weights (weight, pos_weight) are buffers, so state_dict() lists them and to(dtype)
// converts them, as torch's modules do.
//
//   nn::CrossEntropyOptions options;
//   options.label_smoothing = 0.1;
//   nn::CrossEntropyLoss criterion(options);
//   Tensor loss = criterion(logits, targets);     // forward hooks see (logits, targets)
//   nn::BCEWithLogitsLoss bce(nn::BCEWithLogitsLossOptions().pos_weight(full({C}, 3.0)));

#include "tapegrad/nn/ctc.h"
#include "tapegrad/nn/losses.h"
#include "tapegrad/nn/module.h"

namespace tapegrad::nn {

class CrossEntropyLossImpl : public Module {
 public:
  explicit CrossEntropyLossImpl(const CrossEntropyOptions& options = {});
  Tensor forward(const Tensor& input, const Tensor& target);
  const CrossEntropyOptions& options() const { return options_; }  // its weight: the buffer

 private:
  CrossEntropyOptions options_;
};
TAPEGRAD_MODULE(CrossEntropyLoss);

class NLLLossImpl : public Module {
 public:
  explicit NLLLossImpl(const NllLossOptions& options = {});
  Tensor forward(const Tensor& input, const Tensor& target);
  const NllLossOptions& options() const { return options_; }

 private:
  NllLossOptions options_;
};
TAPEGRAD_MODULE(NLLLoss);

namespace detail {

// A loss whose only option is the reduction, calling Loss.
template <Tensor (*Loss)(const Tensor&, const Tensor&, Reduction)>
class ReductionLoss : public Module {
 public:
  explicit ReductionLoss(Reduction reduction = Reduction::Mean) : reduction_(reduction) {}
  Tensor forward(const Tensor& input, const Tensor& target) { return Loss(input, target, reduction_); }
  Reduction reduction() const { return reduction_; }

 private:
  Reduction reduction_;
};

}  // namespace detail

class MSELossImpl : public detail::ReductionLoss<mse_loss> {
  using ReductionLoss::ReductionLoss;
};
TAPEGRAD_MODULE(MSELoss);

class L1LossImpl : public detail::ReductionLoss<l1_loss> {
  using ReductionLoss::ReductionLoss;
};
TAPEGRAD_MODULE(L1Loss);

class SoftMarginLossImpl : public detail::ReductionLoss<soft_margin_loss> {
  using ReductionLoss::ReductionLoss;
};
TAPEGRAD_MODULE(SoftMarginLoss);

struct SmoothL1LossOptions {
  TAPEGRAD_ARG(Reduction, reduction) = Reduction::Mean;
  TAPEGRAD_ARG(double, beta) = 1.0;
};

class SmoothL1LossImpl : public Module {
 public:
  explicit SmoothL1LossImpl(const SmoothL1LossOptions& options = {}) : options_(options) {}
  Tensor forward(const Tensor& input, const Tensor& target) {
    return smooth_l1_loss(input, target, options_.reduction(), options_.beta());
  }
  const SmoothL1LossOptions& options() const { return options_; }

 private:
  SmoothL1LossOptions options_;
};
TAPEGRAD_MODULE(SmoothL1Loss);

struct HuberLossOptions {
  TAPEGRAD_ARG(Reduction, reduction) = Reduction::Mean;
  TAPEGRAD_ARG(double, delta) = 1.0;
};

class HuberLossImpl : public Module {
 public:
  explicit HuberLossImpl(const HuberLossOptions& options = {}) : options_(options) {}
  Tensor forward(const Tensor& input, const Tensor& target) {
    return huber_loss(input, target, options_.reduction(), options_.delta());
  }
  const HuberLossOptions& options() const { return options_; }

 private:
  HuberLossOptions options_;
};
TAPEGRAD_MODULE(HuberLoss);

struct KLDivLossOptions {
  TAPEGRAD_ARG(Reduction, reduction) = Reduction::Mean;
  TAPEGRAD_ARG(bool, log_target) = false;
};

class KLDivLossImpl : public Module {
 public:
  explicit KLDivLossImpl(const KLDivLossOptions& options = {}) : options_(options) {}
  Tensor forward(const Tensor& input, const Tensor& target) {
    return kl_div(input, target, options_.reduction(), options_.log_target());
  }
  const KLDivLossOptions& options() const { return options_; }

 private:
  KLDivLossOptions options_;
};
TAPEGRAD_MODULE(KLDivLoss);

struct BCELossOptions {
  TAPEGRAD_ARG(Tensor, weight);  // broadcast against the input; a buffer of the module
  TAPEGRAD_ARG(Reduction, reduction) = Reduction::Mean;
};

class BCELossImpl : public Module {
 public:
  explicit BCELossImpl(const BCELossOptions& options = {});
  Tensor forward(const Tensor& input, const Tensor& target);
  const BCELossOptions& options() const { return options_; }

 private:
  BCELossOptions options_;
};
TAPEGRAD_MODULE(BCELoss);

struct BCEWithLogitsLossOptions {
  TAPEGRAD_ARG(Tensor, weight);  // broadcast against the input; a buffer of the module
  TAPEGRAD_ARG(Reduction, reduction) = Reduction::Mean;
  TAPEGRAD_ARG(Tensor, pos_weight);  // the positive term's weight, (C) for (N, C); a buffer
};

class BCEWithLogitsLossImpl : public Module {
 public:
  explicit BCEWithLogitsLossImpl(const BCEWithLogitsLossOptions& options = {});
  Tensor forward(const Tensor& input, const Tensor& target);
  const BCEWithLogitsLossOptions& options() const { return options_; }

 private:
  BCEWithLogitsLossOptions options_;
};
TAPEGRAD_MODULE(BCEWithLogitsLoss);

// MarginRankingLoss and CosineEmbeddingLoss: forward(input1, input2, target).
struct MarginLossOptions {
  TAPEGRAD_ARG(double, margin) = 0.0;
  TAPEGRAD_ARG(Reduction, reduction) = Reduction::Mean;
};
using MarginRankingLossOptions = MarginLossOptions;
using CosineEmbeddingLossOptions = MarginLossOptions;

class MarginRankingLossImpl : public Module {
 public:
  explicit MarginRankingLossImpl(const MarginRankingLossOptions& options = {}) : options_(options) {}
  Tensor forward(const Tensor& input1, const Tensor& input2, const Tensor& target) {
    return margin_ranking_loss(input1, input2, target, options_.margin(), options_.reduction());
  }
  const MarginRankingLossOptions& options() const { return options_; }

 private:
  MarginRankingLossOptions options_;
};
TAPEGRAD_MODULE(MarginRankingLoss);

class CosineEmbeddingLossImpl : public Module {
 public:
  explicit CosineEmbeddingLossImpl(const CosineEmbeddingLossOptions& options = {}) : options_(options) {}
  Tensor forward(const Tensor& input1, const Tensor& input2, const Tensor& target) {
    return cosine_embedding_loss(input1, input2, target, options_.margin(), options_.reduction());
  }
  const CosineEmbeddingLossOptions& options() const { return options_; }

 private:
  CosineEmbeddingLossOptions options_;
};
TAPEGRAD_MODULE(CosineEmbeddingLoss);

// forward(anchor, positive, negative).
class TripletMarginLossImpl : public Module {
 public:
  explicit TripletMarginLossImpl(const TripletMarginLossOptions& options = {}) : options_(options) {}
  Tensor forward(const Tensor& anchor, const Tensor& positive, const Tensor& negative) {
    return triplet_margin_loss(anchor, positive, negative, options_);
  }
  const TripletMarginLossOptions& options() const { return options_; }

 private:
  TripletMarginLossOptions options_;
};
TAPEGRAD_MODULE(TripletMarginLoss);

struct HingeEmbeddingLossOptions {
  TAPEGRAD_ARG(double, margin) = 1.0;
  TAPEGRAD_ARG(Reduction, reduction) = Reduction::Mean;
};

class HingeEmbeddingLossImpl : public Module {
 public:
  explicit HingeEmbeddingLossImpl(const HingeEmbeddingLossOptions& options = {}) : options_(options) {}
  Tensor forward(const Tensor& input, const Tensor& target) {
    return hinge_embedding_loss(input, target, options_.margin(), options_.reduction());
  }
  const HingeEmbeddingLossOptions& options() const { return options_; }

 private:
  HingeEmbeddingLossOptions options_;
};
TAPEGRAD_MODULE(HingeEmbeddingLoss);

// Its class weight, when given, is a buffer.
class MultiMarginLossImpl : public Module {
 public:
  explicit MultiMarginLossImpl(const MultiMarginLossOptions& options = {});
  Tensor forward(const Tensor& input, const Tensor& target) { return multi_margin_loss(input, target, options_); }
  const MultiMarginLossOptions& options() const { return options_; }

 private:
  MultiMarginLossOptions options_;
};
TAPEGRAD_MODULE(MultiMarginLoss);

class MultiLabelMarginLossImpl : public detail::ReductionLoss<multilabel_margin_loss> {
  using ReductionLoss::ReductionLoss;
};
TAPEGRAD_MODULE(MultiLabelMarginLoss);

struct MultiLabelSoftMarginLossOptions {
  TAPEGRAD_ARG(Tensor, weight);  // (C) or broadcast against the input; a buffer of the module
  TAPEGRAD_ARG(Reduction, reduction) = Reduction::Mean;
};

class MultiLabelSoftMarginLossImpl : public Module {
 public:
  explicit MultiLabelSoftMarginLossImpl(const MultiLabelSoftMarginLossOptions& options = {});
  Tensor forward(const Tensor& input, const Tensor& target) {
    return multilabel_soft_margin_loss(input, target, options_.reduction(), options_.weight());
  }
  const MultiLabelSoftMarginLossOptions& options() const { return options_; }

 private:
  MultiLabelSoftMarginLossOptions options_;
};
TAPEGRAD_MODULE(MultiLabelSoftMarginLoss);

class PoissonNLLLossImpl : public Module {
 public:
  explicit PoissonNLLLossImpl(const PoissonNLLLossOptions& options = {}) : options_(options) {}
  Tensor forward(const Tensor& input, const Tensor& target) { return poisson_nll_loss(input, target, options_); }
  const PoissonNLLLossOptions& options() const { return options_; }

 private:
  PoissonNLLLossOptions options_;
};
TAPEGRAD_MODULE(PoissonNLLLoss);

// forward(input, target, var).
class GaussianNLLLossImpl : public Module {
 public:
  explicit GaussianNLLLossImpl(const GaussianNLLLossOptions& options = {}) : options_(options) {}
  Tensor forward(const Tensor& input, const Tensor& target, const Tensor& var) {
    return gaussian_nll_loss(input, target, var, options_);
  }
  const GaussianNLLLossOptions& options() const { return options_; }

 private:
  GaussianNLLLossOptions options_;
};
TAPEGRAD_MODULE(GaussianNLLLoss);

// forward(log_probs, targets, input_lengths, target_lengths), the lengths as Int64 tensors (ctc.h).
class CTCLossImpl : public Module {
 public:
  explicit CTCLossImpl(const CTCLossOptions& options = {}) : options_(options) {}
  Tensor forward(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                 const Tensor& target_lengths) {
    return ctc_loss(log_probs, targets, input_lengths, target_lengths, options_);
  }
  const CTCLossOptions& options() const { return options_; }

 private:
  CTCLossOptions options_;
};
TAPEGRAD_MODULE(CTCLoss);

}  // namespace tapegrad::nn
