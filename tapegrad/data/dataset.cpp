#include "tapegrad/data/dataset.h"

#include <algorithm>
#include <numeric>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/generator.h"

namespace tapegrad::data {

namespace {

// Seeds of neighbouring (seed, epoch) pairs land far apart, so the epochs' permutations are
// unrelated rather than shifted copies of one mt19937 stream.
std::uint64_t epoch_seed(std::uint64_t seed, std::int64_t epoch) {
  return derive_seed(seed, static_cast<std::uint64_t>(epoch));
}

// Pads rows of ids into a (B, T) tensor and its padding mask; T is the longest row, at least 1
// so that a batch of empty rows still has a valid shape.
void pad_rows(const std::vector<const std::vector<std::int64_t>*>& rows, std::int64_t max_length, std::int64_t pad_id,
              Tensor& ids, Tensor& mask, std::vector<std::int64_t>& lengths) {
  const auto batch = static_cast<std::int64_t>(rows.size());
  lengths.assign(rows.size(), 0);
  std::int64_t width = 1;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    auto n = static_cast<std::int64_t>(rows[r]->size());
    if (max_length > 0) n = std::min(n, max_length);
    lengths[r] = n;
    width = std::max(width, n);
  }
  std::vector<std::int64_t> values(static_cast<std::size_t>(batch * width), pad_id);
  std::vector<bool> pad(values.size(), true);
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const auto base = static_cast<std::size_t>(static_cast<std::int64_t>(r) * width);
    for (std::int64_t t = 0; t < lengths[r]; ++t) {
      values[base + t] = (*rows[r])[static_cast<std::size_t>(t)];
      pad[base + t] = false;
    }
  }
  ids = from_vector(values, Shape{batch, width});
  mask = from_vector(pad, Shape{batch, width});
}

}  // namespace

DataLoader::DataLoader(const Dataset& dataset, DataLoaderOptions options)
    : DataLoader(std::make_shared<const Dataset>(dataset), options) {}

DataLoader::DataLoader(Dataset&& dataset, DataLoaderOptions options)
    : DataLoader(std::make_shared<const Dataset>(std::move(dataset)), options) {}

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options)
    : dataset_(std::move(dataset)), options_(options) {
  validate();
}

void DataLoader::validate() const {
  if (!dataset_ || dataset_->empty()) throw ValueError("DataLoader: the dataset is empty");
  if (options_.batch_size <= 0)
    throw ValueError(message("DataLoader: batch_size must be positive, got ", options_.batch_size));
  if (options_.max_length < 0)
    throw ValueError(message("DataLoader: max_length must be >= 0 (0: no truncation), got ", options_.max_length));
  if (options_.num_replicas < 1 || options_.rank < 0 || options_.rank >= options_.num_replicas)
    throw ValueError(message("DataLoader: rank ", options_.rank, " of num_replicas ", options_.num_replicas,
                             " is not a rank (need num_replicas >= 1, 0 <= rank < it)"));
  if (options_.batch_size % options_.num_replicas != 0)
    throw ValueError(message("DataLoader: the global batch_size ", options_.batch_size, " does not divide among ",
                             options_.num_replicas, " replicas"));
}

std::vector<std::size_t> DataLoader::batch_rows(const std::vector<std::size_t>& order, std::int64_t index) const {
  const auto begin = static_cast<std::size_t>(index * options_.batch_size);
  const auto end = std::min(order.size(), begin + static_cast<std::size_t>(options_.batch_size));
  if (options_.num_replicas == 1) return std::vector<std::size_t>(order.begin() + begin, order.begin() + end);
  const std::size_t rows = end - begin;
  const auto replicas = static_cast<std::size_t>(options_.num_replicas);
  const std::size_t share = (rows + replicas - 1) / replicas;
  std::vector<std::size_t> out;
  out.reserve(share);
  for (std::size_t k = 0; k < share; ++k) {
    const std::size_t position = static_cast<std::size_t>(options_.rank) * share + k;  // within the global batch
    out.push_back(position < rows ? order[begin + position] : order[(position - rows) % order.size()]);
  }
  return out;
}

std::int64_t DataLoader::batches_per_epoch() const {
  const std::int64_t n = dataset_size(), b = options_.batch_size;
  return n / b + (!options_.drop_last && n % b != 0 ? 1 : 0);  // no n + b - 1: b may be near INT64_MAX
}

std::vector<std::size_t> DataLoader::order(std::int64_t epoch) const {
  if (epoch < 0) throw IndexError(message("DataLoader: epoch must be >= 0, got ", epoch));
  std::vector<std::size_t> rows(dataset_->size());
  std::iota(rows.begin(), rows.end(), std::size_t{0});
  if (options_.shuffle) {
    Generator gen(epoch_seed(options_.seed, epoch));
    gen.shuffle(rows);
  }
  return rows;
}

Batch DataLoader::batch(std::int64_t epoch, std::int64_t index) const {
  const std::int64_t count = batches_per_epoch();
  if (index < 0 || index >= count)
    throw IndexError(message("DataLoader::batch: index ", index, " is out of range for ", count, " batches per epoch"));
  return collate(batch_rows(order(epoch), index));
}

Batch DataLoader::batch_at(std::int64_t step) const {
  if (step < 0) throw IndexError(message("DataLoader::batch_at: step must be >= 0, got ", step));
  const std::int64_t count = batches_per_epoch();
  if (count == 0)
    throw ValueError(message("DataLoader::batch_at: no batch per epoch (", dataset_size(), " rows, batch_size ",
                             options_.batch_size, ", drop_last)"));
  return batch(step / count, step % count);
}

std::vector<Batch> DataLoader::epoch(std::int64_t epoch) const {
  const std::vector<std::size_t> rows = order(epoch);
  std::vector<Batch> batches;
  const std::int64_t count = batches_per_epoch();
  for (std::int64_t i = 0; i < count; ++i) batches.push_back(collate(batch_rows(rows, i)));
  return batches;
}

Batch DataLoader::collate(const std::vector<std::size_t>& rows) const {
  if (rows.empty()) throw ValueError("DataLoader::collate: no rows given");
  std::vector<const std::vector<std::int64_t>*> inputs, targets;
  std::vector<std::int64_t> labels;
  bool any_target = false;
  std::size_t labelled = 0;
  for (std::size_t row : rows) {
    if (row >= dataset_->size())
      throw IndexError(
          message("DataLoader::collate: row ", row, " is out of range for a dataset of ", dataset_->size(), " rows"));
    const Example& example = (*dataset_)[row];
    inputs.push_back(&example.input);
    targets.push_back(&example.target);
    any_target = any_target || !example.target.empty();
    labels.push_back(example.label);
    if (example.label != -1) ++labelled;
  }
  if (labelled != 0 && labelled != rows.size()) {
    const auto unlabelled = static_cast<std::size_t>(std::find(labels.begin(), labels.end(), -1) - labels.begin());
    throw ValueError(message("DataLoader::collate: some rows have a label and some do not, e.g. row ", rows[unlabelled],
                             " (label -1)"));
  }

  Batch batch;
  batch.indices = rows;
  std::vector<std::int64_t> lengths;
  pad_rows(inputs, options_.max_length, options_.pad_id, batch.input, batch.padding_mask, lengths);
  batch.tokens = std::accumulate(lengths.begin(), lengths.end(), std::int64_t{0});
  batch.lengths = from_vector(lengths, Shape{static_cast<std::int64_t>(rows.size())});
  if (any_target) {
    std::vector<std::int64_t> target_lengths;
    pad_rows(targets, options_.max_length, options_.pad_id, batch.target, batch.target_padding_mask, target_lengths);
    batch.target_tokens = std::accumulate(target_lengths.begin(), target_lengths.end(), std::int64_t{0});
  }
  if (labelled != 0) batch.labels = from_vector(labels, Shape{static_cast<std::int64_t>(rows.size())});
  return batch;
}

}  // namespace tapegrad::data
