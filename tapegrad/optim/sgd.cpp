#include "tapegrad/optim/sgd.h"

#include <sstream>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/format.h"
#include "tapegrad/autograd/kernels/optim.h"
#include "tapegrad/autograd/kernels/rows.h"
#include "tapegrad/autograd/parallel.h"
#include "tapegrad/autograd/storage.h"

namespace tapegrad::optim {

namespace {

void check_options(const SGDOptions& o) {
  auto fail = [](const std::string& what, double v) {
    std::ostringstream out;
    out << "SGD: invalid " << what << " " << v;
    throw ValueError(out.str());
  };
  if (!(o.momentum() >= 0.0)) fail("momentum", o.momentum());
  if (!(o.dampening() >= 0.0 && o.dampening() <= 1.0)) fail("dampening", o.dampening());
  if (o.nesterov() && (o.momentum() <= 0.0 || o.dampening() != 0.0))
    throw ValueError(message("SGD: nesterov requires momentum > 0 and dampening 0 (got momentum ", o.momentum(),
                             ", dampening ", o.dampening(), ")"));
}

}  // namespace

SGD::SGD(const TensorList& params, const SGDOptions& options) : SGD(single_group(params), options) {}

SGD::SGD(std::vector<ParamGroup> groups, const SGDOptions& options)
    : Optimizer(std::move(groups), GroupDefaults{options.lr(), options.weight_decay()}, "SGD"), options_(options) {
  check_options(options_);
}

std::vector<std::string> SGD::state_buffer_names() const {
  if (options_.momentum() == 0.0) return {};
  return {"momentum_buffer"};
}

void SGD::update(const ParamGroup& group, const Tensor& p, const Tensor& g, ParamState& state) {
  const bool use_momentum = options_.momentum() != 0.0;
  const bool first = use_momentum && state.buffers.count("momentum_buffer") == 0;
  if (first) state.buffers["momentum_buffer"] = zeros_like(p);
  kernels::SgdStep step;
  step.lr = *group.lr;
  step.weight_decay = *group.weight_decay;
  step.momentum = options_.momentum();
  step.dampening = options_.dampening();
  step.nesterov = options_.nesterov();
  step.first = first;
  dispatch_floating(p.dtype(), "SGD", [&](auto tag) {
    using T = decltype(tag);
    T* buf = use_momentum ? state.buffers["momentum_buffer"].data_ptr<T>() : nullptr;
    kernels::sgd_update<T>(p.data_ptr<T>(), g.data_ptr<T>(), buf, p.numel(), step);
  });
  if (use_momentum) state.buffers["momentum_buffer"].impl()->storage->bump_version();
}

std::string SGD::sparse_refusal(const ParamGroup& group) const {
  if (options_.momentum() != 0.0)
    return "momentum keeps a dense buffer of every row (momentum " + format_number(options_.momentum()) +
           "); sparse gradients need momentum 0";
  return weight_decay_refusal(group);
}

void SGD::update_sparse(const ParamGroup& group, const Tensor& p, const SparseRows& g, ParamState& /*state*/) {
  const std::int64_t dim = p.shape()[1];
  const std::int64_t* rows = g.indices().data_ptr<std::int64_t>();
  dispatch_floating(p.dtype(), "SGD", [&](auto tag) {
    using T = decltype(tag);
    const T lr = static_cast<T>(*group.lr);  // as the dense kernel rounds it
    T* param = p.data_ptr<T>();
    const T* values = g.values().data_ptr<T>();
    // Each row's updates in the order they were added (a row may appear several times). The rows
    // are split by index among the threads (index % parts), so no two threads write one row and
    // the result does not depend on the thread count.
    const std::int64_t n = g.nnz();
    const auto update = [&](std::int64_t k) {
      T* row = param + rows[k] * dim;
      const T* grad = values + k * dim;
      for (std::int64_t j = 0; j < dim; ++j) row[j] -= lr * grad[j];
    };
    const std::int64_t parts = n * dim >= (1 << 15) && !in_parallel_region() ? num_threads() : 1;
    if (parts == 1) {  // no division per row to find its thread
      // With several threads the rows were likely last written on another core (word2vec's shards
      // compute their gradients on their own threads): the rows four on are asked for now.
      const bool prefetch = num_threads() > 1;
      for (std::int64_t k = 0; k < n; ++k) {
        if (prefetch && k + 4 < n) {
          kernels::prefetch_row</*ForWrite=*/true>(param + rows[k + 4] * dim, dim);
          kernels::prefetch_row(values + (k + 4) * dim, dim);
        }
        update(k);
      }
      return;
    }
    // A mask rather than a division when the parts are a power of two (two threads, say).
    const std::int64_t mask = (parts & (parts - 1)) == 0 ? parts - 1 : -1;
    parallel_for(0, parts, 1, [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t part = lo; part < hi; ++part)
        for (std::int64_t k = 0; k < n; ++k)
          if ((mask >= 0 ? rows[k] & mask : rows[k] % parts) == part) update(k);
    });
  });
}

}  // namespace tapegrad::optim
