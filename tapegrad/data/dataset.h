#pragma once
// Examples, batches and a DataLoader that pads, masks and (reproducibly) shuffles them.
//
//   DataLoaderOptions opts;
//   opts.batch_size = 16;
//   opts.seed = 7;
//   DataLoader loader(dataset, opts);
//   Batch b = loader.batch_at(step);      // the same batch for the same step, on every run
//   // b.input: (B, T) int64, b.padding_mask: (B, T) bool, true where b.input is padding

#include <cstdint>
#include <memory>
#include <vector>

#include "tapegrad/autograd/tensor.h"
#include "tapegrad/data/vocab.h"

namespace tapegrad::data {

struct Example {
  std::vector<std::int64_t> input;
  std::vector<std::int64_t> target;  // empty when the task has no target sequence
  std::int64_t label = -1;           // -1: no class label
};
using Dataset = std::vector<Example>;

struct Batch {
  Tensor input;                      // (B, T) int64, padded with pad_id; T = longest row (at least 1)
  Tensor padding_mask;               // (B, T) bool, true = padding (nn's key_padding_mask convention)
  Tensor lengths;                    // (B) int64, tokens per row after truncation
  Tensor target;                     // (B, T2) int64 padded; undefined if no row has a target
  Tensor target_padding_mask;        // (B, T2) bool, true = padding; undefined with target
  Tensor labels;                     // (B) int64; undefined if the rows' labels are -1
  std::vector<std::size_t> indices;  // the dataset rows, in batch order
  std::int64_t tokens = 0;           // non-pad input tokens
  std::int64_t target_tokens = 0;    // non-pad target tokens

  std::int64_t size() const { return static_cast<std::int64_t>(indices.size()); }
};

struct DataLoaderOptions {
  std::int64_t batch_size = 32;
  bool shuffle = true;          // false: every epoch in dataset order
  bool drop_last = false;       // drop the last, smaller batch of an epoch
  std::uint64_t seed = 0;       // with the epoch number, decides each epoch's order
  std::int64_t max_length = 0;  // 0: no truncation; else inputs and targets keep their first max_length ids
  std::int64_t pad_id = Vocab::kPad;
  // Data parallelism (dist::DistributedDataParallel): batch_size is then the global batch, and rank
  // `rank` of `num_replicas` gets its own contiguous share of each global batch,
  // batch_size / num_replicas rows (batch_size must divide evenly). Every rank draws the same epoch
  // order from the shared seed, so the shares are disjoint, cover the batch, and are reshuffled every
  // epoch. An epoch's last, smaller batch is shared out in equal counts too: ceil(rows / num_replicas)
  // each, the shortfall taken from the start of the epoch's order.
  int num_replicas = 1;
  int rank = 0;
};

// The loader holds the dataset through a shared_ptr to a const copy made at construction (or
// moved in), so it never dangles and copies of a loader are cheap. Every method is const and a
// pure function of (dataset, options, arguments): batch(e, i) is the same on every call and
// every run, which is what resumable training needs.
class DataLoader {
 public:
  DataLoader(const Dataset& dataset, DataLoaderOptions options);
  DataLoader(Dataset&& dataset, DataLoaderOptions options);
  DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options);

  std::int64_t batches_per_epoch() const;
  std::int64_t dataset_size() const { return static_cast<std::int64_t>(dataset_->size()); }
  const DataLoaderOptions& options() const { return options_; }

  // Batch `index` of epoch `epoch` (this rank's share of it, see num_replicas). An epoch's order is a
  // permutation drawn (Fisher-Yates) from a Generator seeded by a mix of (seed, epoch); without
  // shuffle it is the dataset order.
  Batch batch(std::int64_t epoch, std::int64_t index) const;
  // Global step -> batch(step / batches_per_epoch(), step % batches_per_epoch()).
  Batch batch_at(std::int64_t step) const;
  // All batches of an epoch, in order (this rank's shares).
  std::vector<Batch> epoch(std::int64_t epoch) const;
  // The rows of an epoch in its order.
  std::vector<std::size_t> order(std::int64_t epoch) const;
  // Any rows, with the same truncation and padding rules.
  Batch collate(const std::vector<std::size_t>& rows) const;

 private:
  void validate() const;
  // This rank's rows of batch `index`, from the epoch's order.
  std::vector<std::size_t> batch_rows(const std::vector<std::size_t>& order, std::int64_t index) const;
  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions options_;
};

}  // namespace tapegrad::data
