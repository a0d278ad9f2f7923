#include "tapegrad/nn/loss_modules.h"

namespace tapegrad::nn {

// Each weight is registered as a buffer when given, and the options keep the buffer's handle, which
// to(dtype) converts in place.

CrossEntropyLossImpl::CrossEntropyLossImpl(const CrossEntropyOptions& options) : options_(options) {
  if (options_.weight.defined()) options_.weight = register_buffer("weight", options_.weight);
}

Tensor CrossEntropyLossImpl::forward(const Tensor& input, const Tensor& target) {
  return cross_entropy(input, target, options_);
}

NLLLossImpl::NLLLossImpl(const NllLossOptions& options) : options_(options) {
  if (options_.weight.defined()) options_.weight = register_buffer("weight", options_.weight);
}

Tensor NLLLossImpl::forward(const Tensor& input, const Tensor& target) { return nll_loss(input, target, options_); }

BCELossImpl::BCELossImpl(const BCELossOptions& options) : options_(options) {
  if (options_.weight().defined()) options_.weight(register_buffer("weight", options_.weight()));
}

Tensor BCELossImpl::forward(const Tensor& input, const Tensor& target) {
  return binary_cross_entropy(input, target, options_.reduction(), options_.weight());
}

BCEWithLogitsLossImpl::BCEWithLogitsLossImpl(const BCEWithLogitsLossOptions& options) : options_(options) {
  if (options_.weight().defined()) options_.weight(register_buffer("weight", options_.weight()));
  if (options_.pos_weight().defined()) options_.pos_weight(register_buffer("pos_weight", options_.pos_weight()));
}

Tensor BCEWithLogitsLossImpl::forward(const Tensor& input, const Tensor& target) {
  return binary_cross_entropy_with_logits(input, target, options_.reduction(), options_.pos_weight(),
                                          options_.weight());
}

MultiMarginLossImpl::MultiMarginLossImpl(const MultiMarginLossOptions& options) : options_(options) {
  if (options_.weight().defined()) options_.weight(register_buffer("weight", options_.weight()));
}

MultiLabelSoftMarginLossImpl::MultiLabelSoftMarginLossImpl(const MultiLabelSoftMarginLossOptions& options)
    : options_(options) {
  if (options_.weight().defined()) options_.weight(register_buffer("weight", options_.weight()));
}

}  // namespace tapegrad::nn
