// DataParallel over tapegrad::dist when the build has it (TAPEGRAD_EXAMPLES_DIST), one process otherwise.
#include "examples/common/data_parallel.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/ops.h"
#include "tapegrad/autograd/sparse_rows.h"
#if TAPEGRAD_EXAMPLES_DIST
#include "tapegrad/dist/dist.h"
#endif

namespace tapegrad::examples {

DataParallel DataParallel::from_environment() {
  DataParallel parallel;
#if TAPEGRAD_EXAMPLES_DIST
  const auto group = std::make_shared<dist::ProcessGroup>(dist::init());
  parallel.rank_ = group->rank();
  parallel.size_ = group->size();
  parallel.replicas_ = dist::replicas(*group);
  parallel.group_ = group;
#else
  if (std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr && std::atoi(std::getenv("OMPI_COMM_WORLD_SIZE")) > 1)
    throw ValueError("started by mpirun, but this build has no tapegrad::dist (install libopenmpi-dev and rebuild)");
#endif
  return parallel;
}

DataParallel::~DataParallel() {
  if (size_ == 1 || std::uncaught_exceptions() <= uncaught_) return;
#if TAPEGRAD_EXAMPLES_DIST
  // One write: mpirun forwards the ranks' output line by line and may put its own between the pieces.
  std::cerr << ("rank " + std::to_string(rank_) + " of " + std::to_string(size_) + " failed; ending the job\n");
  static_cast<const dist::ProcessGroup*>(group_.get())->abort(1);
#endif
}

void DataParallel::replicate(const nn::Module& model) {
#if TAPEGRAD_EXAMPLES_DIST
  const auto& group = *static_cast<const dist::ProcessGroup*>(group_.get());
  if (group.size() == 1) return;
  dist::sync_module_state(model, group);
  reducer_ =
      std::make_shared<dist::GradientReducer>(model.named_parameters(), group, dist::DistributedDataParallelOptions());
#else
  (void)model;
#endif
}

Tensor DataParallel::share(const Tensor& global) const {
  if (size_ == 1) return global;
  const std::int64_t rows = global.size(0);
  if (rows % size_ != 0)
    throw ValueError(
        message("data parallelism: a global batch of ", rows, " rows does not divide among ", size_, " processes"));
  const std::int64_t share = rows / size_;
  return global.narrow(0, rank_ * share, share);
}

void DataParallel::barrier() const {
  if (replicas_.barrier) replicas_.barrier();
}

void DataParallel::all_reduce_sum(const Tensor& t) const {
  if (size_ == 1) return;
#if TAPEGRAD_EXAMPLES_DIST
  static_cast<const dist::ProcessGroup*>(group_.get())->all_reduce(t, dist::ReduceOp::Sum);
#else
  (void)t;
#endif
}

void DataParallel::gather_sparse_grads(const TensorList& leaves) const {
  for (std::size_t k = 0; k < leaves.size(); ++k) {
    if (!leaves[k].has_sparse_grad() && leaves[k].grad().defined())
      throw ValueError(message("gather_sparse_grads: leaf ", k, " of ", leaves.size(),
                               " has a dense gradient; only row-sparse ones are gathered"));
    if (leaves[k].dim() != 2 || leaves[k].dtype() != leaves[0].dtype())
      throw ValueError(
          message("gather_sparse_grads: leaf ", k, " is ", leaves[k].shape().str(), " ", dtype_name(leaves[k].dtype()),
                  "; the leaves must be tables of one dtype, like leaf 0's ", dtype_name(leaves[0].dtype())));
  }
  if (size_ == 1 || leaves.empty()) return;
#if TAPEGRAD_EXAMPLES_DIST
  const auto& group = *static_cast<const dist::ProcessGroup*>(group_.get());
  // Three collectives whatever the number of leaves: every rank's row count of every leaf, then
  // every rank's indices (leaf after leaf) and its rows' values (flattened, leaf after leaf), each
  // padded to the longest rank's and cut back to each rank's own.
  const auto n = static_cast<std::int64_t>(leaves.size());
  std::vector<std::int64_t> mine(leaves.size());
  for (std::size_t k = 0; k < leaves.size(); ++k) mine[k] = leaves[k].sparse_grad().nnz();
  const Tensor counts = group.all_gather(from_vector(mine, {n}));  // (size, leaves)
  const auto count = [&](int r, std::size_t k) {
    return static_cast<std::int64_t>(counts.at({r, static_cast<std::int64_t>(k)}));
  };
  std::int64_t longest_indices = 0, longest_values = 0;
  for (int r = 0; r < size_; ++r) {
    std::int64_t indices = 0, values = 0;
    for (std::size_t k = 0; k < leaves.size(); ++k) {
      indices += count(r, k);
      values += count(r, k) * leaves[k].size(1);
    }
    longest_indices = std::max(longest_indices, indices);
    longest_values = std::max(longest_values, values);
  }
  if (longest_indices == 0) return;
  Tensor indices = zeros({longest_indices}, kInt64), values = zeros({longest_values}, leaves[0].dtype());
  std::int64_t at_index = 0, at_value = 0;
  for (std::size_t k = 0; k < leaves.size(); ++k) {
    if (mine[k] == 0) continue;
    const SparseRows own = leaves[k].sparse_grad();
    const std::int64_t size = mine[k] * leaves[k].size(1);
    indices.narrow(0, at_index, mine[k]).copy_(own.indices());
    values.narrow(0, at_value, size).copy_(own.values().reshape({size}));
    at_index += mine[k];
    at_value += size;
  }
  const Tensor all_indices = group.all_gather(indices), all_values = group.all_gather(values);
  std::vector<std::int64_t> index_at(static_cast<std::size_t>(size_)), value_at(static_cast<std::size_t>(size_));
  for (std::size_t k = 0; k < leaves.size(); ++k) {
    const Tensor& leaf = leaves[k];
    const std::int64_t dim = leaf.size(1);
    TensorList index_parts, value_parts;
    for (int r = 0; r < size_; ++r) {
      const std::int64_t c = count(r, k);
      auto& i = index_at[static_cast<std::size_t>(r)];
      auto& v = value_at[static_cast<std::size_t>(r)];
      if (c > 0) {
        index_parts.push_back(all_indices.select(0, r).narrow(0, i, c));
        value_parts.push_back(all_values.select(0, r).narrow(0, v, c * dim).reshape({c, dim}));
      }
      i += c;
      v += c * dim;
    }
    if (!index_parts.empty())
      leaf.set_sparse_grad(SparseRows(concat(index_parts, 0), concat(value_parts, 0), leaf.size(0)));
  }
#endif
}

}  // namespace tapegrad::examples
