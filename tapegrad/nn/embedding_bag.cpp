#include "tapegrad/nn/embedding_bag.h"

#include <string>
#include <vector>

#include "tapegrad/autograd/error.h"

namespace tapegrad::nn {

Tensor embedding_bag(const Tensor& weight, const Tensor& indices, const Tensor& offsets, BagMode mode,
                     const Tensor& per_sample_weights, bool sparse) {
  if (indices.dim() != 1 || indices.dtype() != kInt64 || offsets.dim() != 1 || offsets.dtype() != kInt64)
    throw ValueError(message("embedding_bag: expected Int64 indices (N) and offsets (B), got ",
                             dtype_name(indices.dtype()), " ", indices.shape().str(), " and ",
                             dtype_name(offsets.dtype()), " ", offsets.shape().str()));
  const std::int64_t n = indices.shape()[0], bags = offsets.shape()[0];
  const std::vector<std::int64_t> starts = offsets.contiguous().to_vector<std::int64_t>();
  for (std::int64_t b = 0; b < bags; ++b) {
    const std::int64_t start = starts[static_cast<std::size_t>(b)];
    const std::int64_t previous = b == 0 ? 0 : starts[static_cast<std::size_t>(b - 1)];
    if ((b == 0 && start != 0) || start < previous || start > n)
      throw ValueError(message("embedding_bag: offsets must start at 0, never decrease and stay within the ", n,
                               " indices, got offsets[", b, "] = ", start,
                               (b > 0 ? " after " + std::to_string(previous) : std::string())));
  }
  if (per_sample_weights.defined()) {
    if (mode != BagMode::Sum)
      throw ValueError("embedding_bag: per_sample_weights are only supported with mode Sum, as in torch");
    if (per_sample_weights.shape() != Shape{n} || per_sample_weights.dtype() != weight.dtype())
      throw ValueError(message("embedding_bag: per_sample_weights must be (", n, ") ", dtype_name(weight.dtype()),
                               " like the indices and the table, got ", dtype_name(per_sample_weights.dtype()), " ",
                               per_sample_weights.shape().str()));
  }
  if (weight.dim() != 2) throw ValueError("embedding_bag: expected a table (V, D), got " + weight.shape().str());

  // The mean scales each index's row by 1 / its bag's size.
  Tensor scale = per_sample_weights;
  if (mode == BagMode::Mean) {
    std::vector<double> inverse_size(static_cast<std::size_t>(n));
    for (std::int64_t b = 0; b < bags; ++b) {
      const std::int64_t first = starts[static_cast<std::size_t>(b)];
      const std::int64_t last = b + 1 < bags ? starts[static_cast<std::size_t>(b + 1)] : n;
      for (std::int64_t i = first; i < last; ++i)
        inverse_size[static_cast<std::size_t>(i)] = 1.0 / static_cast<double>(last - first);
    }
    scale = from_vector(inverse_size, {n}).to(weight.dtype());
  }
  return embedding_bag_sum(weight, indices, starts, scale, sparse);
}

EmbeddingBagImpl::EmbeddingBagImpl(const EmbeddingBagOptions& options)
    : mode_(options.mode()), sparse_(options.sparse()) {
  // The table as Embedding draws it, under this module's own name "weight".
  const EmbeddingImpl table(EmbeddingOptions(options.num_embeddings(), options.embedding_dim())
                                .init(options.init())
                                .init_scale(options.init_scale())
                                .generator(options.generator()));
  weight_ = register_parameter("weight", table.weight().detach());
}

Tensor EmbeddingBagImpl::forward(const Tensor& indices, const Tensor& offsets, const Tensor& per_sample_weights) {
  return embedding_bag(weight_, indices, offsets, mode_, per_sample_weights, sparse_);
}

}  // namespace tapegrad::nn
