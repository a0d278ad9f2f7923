#include "tapegrad/autograd/sparse_rows.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/kernels/elementwise.h"
#include "tapegrad/autograd/kernels/index.h"
#include "tapegrad/autograd/ops.h"

namespace tapegrad {

namespace {

std::string str(std::int64_t v) { return std::to_string(v); }

}  // namespace

SparseRows::SparseRows(Tensor indices, Tensor values, std::int64_t num_rows, bool coalesced)
    : num_rows_(num_rows), coalesced_(coalesced) {
  if (!indices.defined() || !values.defined()) throw ValueError("SparseRows: indices and values must be defined");
  if (indices.dtype() != kInt64)
    throw TypeError(message("SparseRows: indices must be int64, got ", dtype_name(indices.dtype())));
  if (values.dtype() != kFloat32 && values.dtype() != kFloat64)
    throw TypeError(message("SparseRows: values must be float32 or float64, got ", dtype_name(values.dtype())));
  if (indices.dim() != 1 || values.dim() != 2 || values.shape()[0] != indices.shape()[0])
    throw ShapeError("SparseRows: expected indices (N) and values (N, D), got " + indices.shape().str() + " and " +
                     values.shape().str());
  if (num_rows < 0) throw ValueError("SparseRows: num_rows must be non-negative, got " + str(num_rows));
  indices_ = kernels::dense(indices);
  values_ = kernels::dense(values);
  const std::int64_t* ids = indices_.data_ptr<std::int64_t>();
  for (std::int64_t n = 0; n < indices_.numel(); ++n) {
    if (ids[n] < 0 || ids[n] >= num_rows)
      throw IndexError("SparseRows: index " + str(ids[n]) + " at position " + str(n) + " is out of range for " +
                       str(num_rows) + " rows");
    if (coalesced && n > 0 && ids[n] <= ids[n - 1])
      throw ValueError("SparseRows: coalesced indices must be strictly increasing, got " + str(ids[n - 1]) + " then " +
                       str(ids[n]) + " at position " + str(n));
  }
}

Shape SparseRows::shape() const {
  if (!defined()) return Shape{};
  return Shape{num_rows_, values_.shape()[1]};
}

SparseRows SparseRows::coalesce() const {
  if (!defined() || coalesced_) return *this;
  const std::int64_t n = nnz();
  const std::int64_t dim = values_.shape()[1];
  const std::int64_t* ids = indices_.data_ptr<std::int64_t>();
  // Positions ordered by index, equal indices in the order they were added.
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  for (std::int64_t k = 0; k < n; ++k) order[static_cast<std::size_t>(k)] = k;
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) { return ids[a] < ids[b]; });
  std::int64_t unique = 0;
  for (std::int64_t k = 0; k < n; ++k)
    if (k == 0 || ids[order[k]] != ids[order[k - 1]]) ++unique;

  Tensor out_ids = empty({unique}, kInt64);           // (U)
  Tensor out_values = zeros({unique, dim}, dtype());  // (U, D)
  dispatch_floating(dtype(), "SparseRows::coalesce", [&](auto tag) {
    using T = decltype(tag);
    const T* rows = values_.data_ptr<T>();
    std::int64_t* uid = out_ids.data_ptr<std::int64_t>();
    T* sums = out_values.data_ptr<T>();
    std::int64_t u = -1;
    for (std::int64_t k = 0; k < n; ++k) {
      const std::int64_t pos = order[static_cast<std::size_t>(k)];
      if (k == 0 || ids[pos] != uid[u]) uid[++u] = ids[pos];
      T* sum = sums + u * dim;
      const T* row = rows + pos * dim;
      for (std::int64_t j = 0; j < dim; ++j) sum[j] += row[j];
    }
  });
  SparseRows out;
  out.indices_ = std::move(out_ids);
  out.values_ = std::move(out_values);
  out.num_rows_ = num_rows_;
  out.coalesced_ = true;
  return out;
}

Tensor SparseRows::to_dense() const {
  if (!defined()) throw ValueError("SparseRows::to_dense: the gradient is undefined");
  const std::int64_t dim = values_.shape()[1];
  Tensor out = zeros({num_rows_, dim}, dtype());  // (num_rows, D)
  dispatch_floating(dtype(), "SparseRows::to_dense", [&](auto tag) {
    using T = decltype(tag);
    kernels::embedding_backward<T>(values_.data_ptr<T>(), indices_.data_ptr<std::int64_t>(), nnz(), dim, std::nullopt,
                                   out.data_ptr<T>());
  });
  return out;
}

SparseRows SparseRows::append(const SparseRows& other) const {
  if (!defined()) return other;
  if (!other.defined()) return *this;
  if (other.shape() != shape() || other.dtype() != dtype())
    throw ShapeError("SparseRows::append: rows of a " + other.shape().str() + " " + dtype_name(other.dtype()) +
                     " table appended to a " + shape().str() + " " + dtype_name(dtype()) + " one");
  NoGradGuard no_grad;
  SparseRows out;
  out.indices_ = concat({indices_, other.indices_}, 0);
  out.values_ = concat({values_, other.values_}, 0);
  out.num_rows_ = num_rows_;
  out.coalesced_ = false;
  return out;
}

}  // namespace tapegrad
