#pragma once
// EmbeddingBag, as torch.nn.EmbeddingBag for 1-D input with offsets: the rows of a table for
// bags of indices, reduced per bag without building the (N, D) rows a caller would sum itself.
//
//   nn::EmbeddingBag bag{nn::EmbeddingBagOptions(1000, 16).mode(nn::BagMode::Mean).sparse(true)};
//   // two bags: indices[0:3] and indices[3:5]
//   Tensor out = bag(from_vector<std::int64_t>({4, 9, 9, 1, 2}, {5}), from_vector<std::int64_t>({0, 3}, {2}));
//   // out: (2, 16)
//
// Bag b holds indices[offsets[b] .. offsets[b + 1]) (the last bag runs to the end). Sum adds its
// rows, each times its per-sample weight when weights are given (Sum only, as in torch); Mean
// divides the sum by the bag's size. An empty bag gives a zero row. One op, embedding_bag_sum, adds
// the scaled rows straight into the bags; its backward gives the table one row per index (row-sparse
// when sparse is set: fastText's subword tables) and the per-sample weights their gradient.

#include <cstdint>

#include "tapegrad/nn/layers.h"
#include "tapegrad/nn/module.h"

namespace tapegrad::nn {

enum class BagMode { Sum, Mean };

// The bags' reductions: (B, D) for indices (N) and offsets (B), both Int64. ValueError for offsets
// that do not start at 0, decrease or pass N, weights that are not (N) of the table's dtype, or
// weights with Mean; IndexError (from embedding_bag_sum) for an index outside the table.
Tensor embedding_bag(const Tensor& weight, const Tensor& indices, const Tensor& offsets, BagMode mode = BagMode::Mean,
                     const Tensor& per_sample_weights = Tensor(), bool sparse = false);

struct EmbeddingBagOptions {
  EmbeddingBagOptions(std::int64_t num_embeddings, std::int64_t embedding_dim)
      : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {}
  TAPEGRAD_ARG(std::int64_t, num_embeddings);
  TAPEGRAD_ARG(std::int64_t, embedding_dim);
  TAPEGRAD_ARG(BagMode, mode) = BagMode::Mean;  // torch's default
  TAPEGRAD_ARG(EmbeddingInit, init) = EmbeddingInit::Normal;
  TAPEGRAD_ARG(double, init_scale) = 0.0;
  TAPEGRAD_ARG(Generator*, generator) = nullptr;
  TAPEGRAD_ARG(bool, sparse) = false;
};

// The table is initialised as Embedding's (EmbeddingOptions::init); state dict key "weight", as
// torch's.
class EmbeddingBagImpl : public Module {
 public:
  explicit EmbeddingBagImpl(const EmbeddingBagOptions& options);
  Tensor forward(const Tensor& indices, const Tensor& offsets, const Tensor& per_sample_weights = Tensor());

  const Tensor& weight() const { return weight_; }
  BagMode mode() const { return mode_; }
  bool sparse() const { return sparse_; }

 private:
  BagMode mode_;
  bool sparse_;
  Tensor weight_;
};
TAPEGRAD_MODULE(EmbeddingBag);

}  // namespace tapegrad::nn
