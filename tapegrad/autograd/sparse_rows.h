// A row-sparse gradient of a (num_rows, D) table: the rows `values` (N, D) that belong at rows
// `indices` (N) of the table, duplicates allowed and summed. What an Embedding built with
// sparse gradients leaves on its weight instead of a dense (num_rows, D) gradient, so a step
// touches the rows a batch used and nothing else.
//
//   nn::Embedding emb{nn::EmbeddingOptions(1'000'000, 100).sparse(true)};
//   emb(ids).sum().backward();
//   SparseRows g = emb->weight().sparse_grad();  // N rows, N = ids.numel()
//   Tensor dense = g.to_dense();                 // (1'000'000, 100)
//   optim::SparseAdam opt(emb->parameters(), optim::SparseAdamOptions(1e-3));
#pragma once

#include <cstdint>

#include "tapegrad/autograd/tensor.h"

namespace tapegrad {

class SparseRows {
 public:
  SparseRows() = default;
  // indices: Int64 (N), each in [0, num_rows); values: floating (N, D). ShapeError, IndexError
  // or TypeError (naming what is wrong and the values) otherwise. `coalesced` promises the
  // indices are strictly increasing (checked).
  SparseRows(Tensor indices, Tensor values, std::int64_t num_rows, bool coalesced = false);

  bool defined() const { return indices_.defined(); }
  const Tensor& indices() const { return indices_; }  // Int64 (N)
  const Tensor& values() const { return values_; }    // (N, D)
  std::int64_t num_rows() const { return num_rows_; }
  std::int64_t nnz() const { return indices_.defined() ? indices_.numel() : 0; }
  // The dense shape (num_rows, D) and the dtype of the values.
  Shape shape() const;
  DType dtype() const { return values_.dtype(); }
  bool is_coalesced() const { return coalesced_; }

  // Indices sorted and unique, the rows of each index summed in the order they were added (so
  // the sum equals the dense gradient's, bit for bit). Itself when already coalesced.
  SparseRows coalesce() const;
  // The (num_rows, D) dense tensor: zeros with the rows added at their indices.
  Tensor to_dense() const;
  // These rows followed by other's (same num_rows, D and dtype, else ShapeError).
  SparseRows append(const SparseRows& other) const;

 private:
  Tensor indices_;
  Tensor values_;
  std::int64_t num_rows_ = 0;
  bool coalesced_ = false;
};

}  // namespace tapegrad
