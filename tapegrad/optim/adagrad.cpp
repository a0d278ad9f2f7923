#include "tapegrad/optim/adagrad.h"

#include <string>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/format.h"
#include "tapegrad/autograd/kernels/optim.h"
#include "tapegrad/autograd/storage.h"

namespace tapegrad::optim {

namespace {

void check_options(const AdagradOptions& o) {
  auto check = [](const char* what, double v) {
    if (!(v >= 0.0)) throw ValueError(message("Adagrad: invalid ", what, " ", v, " (must be >= 0)"));
  };
  check("lr_decay", o.lr_decay());
  check("initial_accumulator_value", o.initial_accumulator_value());
  check("eps", o.eps());
}

}  // namespace

Adagrad::Adagrad(const TensorList& params, const AdagradOptions& options) : Adagrad(single_group(params), options) {}

Adagrad::Adagrad(std::vector<ParamGroup> groups, const AdagradOptions& options)
    : Optimizer(std::move(groups), GroupDefaults{options.lr(), options.weight_decay()}, "Adagrad"), options_(options) {
  check_options(options_);
}

double Adagrad::step_lr(const ParamGroup& group, const ParamState& state) const {
  return *group.lr / (1.0 + static_cast<double>(state.step - 1) * options_.lr_decay());
}

Tensor& Adagrad::accumulator(const Tensor& p, ParamState& state) const {
  auto found = state.buffers.find("sum");
  if (found == state.buffers.end())
    found = state.buffers.emplace("sum", full(p.shape(), options_.initial_accumulator_value(), p.dtype())).first;
  return found->second;
}

void Adagrad::update(const ParamGroup& group, const Tensor& p, const Tensor& g, ParamState& state) {
  Tensor& sum = accumulator(p, state);
  kernels::AdagradStep step;
  step.lr = step_lr(group, state);
  step.weight_decay = *group.weight_decay;
  step.eps = options_.eps();
  dispatch_floating(p.dtype(), "Adagrad", [&](auto tag) {
    using T = decltype(tag);
    kernels::adagrad_update<T>(p.data_ptr<T>(), g.data_ptr<T>(), sum.data_ptr<T>(), p.numel(), step);
  });
  sum.impl()->storage->bump_version();
}

std::string Adagrad::sparse_refusal(const ParamGroup& group) const { return weight_decay_refusal(group); }

void Adagrad::update_sparse(const ParamGroup& group, const Tensor& p, const SparseRows& grad, ParamState& state) {
  const SparseRows g = grad.coalesce();  // each touched row's sum grows once, by the row's whole gradient squared
  Tensor& sum = accumulator(p, state);
  kernels::AdagradStep step;
  step.lr = step_lr(group, state);
  step.eps = options_.eps();
  dispatch_floating(p.dtype(), "Adagrad", [&](auto tag) {
    using T = decltype(tag);
    kernels::adagrad_rows<T>(p.data_ptr<T>(), sum.data_ptr<T>(), g.indices().data_ptr<std::int64_t>(),
                             g.values().data_ptr<T>(), g.nnz(), p.shape()[1], step);
  });
  sum.impl()->storage->bump_version();
}

}  // namespace tapegrad::optim
