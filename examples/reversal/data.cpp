// sequence_reversal's options check, strings, tensors and measures. See reversal.h.

#include "examples/reversal/reversal.h"

#include <algorithm>
#include <cmath>

namespace tapegrad::examples::reversal {

using C = ReversalConfig;

void validate(const ReversalConfig& config) {
  const std::string program = "sequence_reversal";
  require_positive(program, config, &C::alphabet, &C::train_size, &C::heldout_size, &C::long_size, &C::train_length,
                   &C::long_length, &C::max_len, &C::d_model, &C::heads, &C::encoder_layers, &C::decoder_layers,
                   &C::ff_hidden, &C::batch_size, &C::steps, &C::log_every);
  require(config.alphabet <= 5, program, "--alphabet must be at most 5" + got(config, &C::alphabet));
  const std::int64_t longest = std::max(config.train_length, config.long_length);
  require(config.max_len >= longest + 2, program,
          "--max_len " + std::to_string(config.max_len) +
              " must be at least the longest string + 2 = " + std::to_string(longest + 2));
  require(config.heatmap_example >= 0 && config.heatmap_example < config.heldout_size, program,
          "--heatmap_example must be in [0, heldout_size = " + std::to_string(config.heldout_size) + "), got " +
              std::to_string(config.heatmap_example));
  require_non_negative(program, config, &C::eval_every, &C::checkpoint_every);
  require(config.lr > 0, program, "--lr must be positive" + got(config, &C::lr));
  require(config.dropout >= 0 && config.dropout < 1, program, "--dropout must be in [0, 1)" + got(config, &C::dropout));
}

Strings random_strings(std::int64_t count, std::int64_t length, std::int64_t alphabet, Generator& gen,
                       std::set<std::vector<std::int64_t>>& seen) {
  Strings out;
  const double possible = std::pow(static_cast<double>(alphabet), static_cast<double>(length));
  if (static_cast<double>(count) + static_cast<double>(seen.size()) > possible / 2)
    throw ConfigError("sequence_reversal: cannot draw " + std::to_string(count) + " distinct strings of length " +
                      std::to_string(length) + " over " + std::to_string(alphabet) + " letters");
  while (static_cast<std::int64_t>(out.rows.size()) < count) {
    std::vector<std::int64_t> row(static_cast<std::size_t>(length));
    for (auto& token : row)
      token = kFirstLetter + static_cast<std::int64_t>(gen.randint(static_cast<std::uint64_t>(alphabet)));
    if (seen.insert(row).second) out.rows.push_back(std::move(row));
  }
  return out;
}

Tensors to_tensors(const Strings& strings) {
  const std::int64_t n = static_cast<std::int64_t>(strings.rows.size());
  const std::int64_t length = static_cast<std::int64_t>(strings.rows.front().size());
  std::vector<std::int64_t> src, tgt_in, tgt_out;
  for (const auto& row : strings.rows) {
    std::vector<std::int64_t> reversed(row.rbegin(), row.rend());
    src.insert(src.end(), row.begin(), row.end());
    tgt_in.push_back(kSos);
    tgt_in.insert(tgt_in.end(), reversed.begin(), reversed.end());
    tgt_out.insert(tgt_out.end(), reversed.begin(), reversed.end());
    tgt_out.push_back(kEos);
  }
  return {from_vector(src, {n, length}), from_vector(tgt_in, {n, length + 1}), from_vector(tgt_out, {n, length + 1})};
}

data::Dataset to_dataset(const Strings& strings) {
  data::Dataset dataset;
  for (const auto& row : strings.rows) {
    data::Example example;
    example.input = row;
    example.target.push_back(kSos);
    example.target.insert(example.target.end(), row.rbegin(), row.rend());
    example.target.push_back(kEos);
    dataset.push_back(std::move(example));
  }
  return dataset;
}

Accuracy greedy_accuracy(const nn::EncoderDecoder& model, const Tensors& set) {
  const std::int64_t n = set.src.shape()[0], length = set.src.shape()[1];
  const Tensor decoded = model->greedy_decode(set.src, kSos, kEos, length + 1);  // (N, 1 + up to L + 1)
  const std::int64_t produced = decoded.shape()[1] - 1;
  std::int64_t exact = 0, tokens = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    bool same = true;
    for (std::int64_t t = 0; t <= length; ++t) {
      const bool ok = t < produced && decoded.at({i, t + 1}) == set.tgt_out.at({i, t});
      tokens += ok;
      same = same && ok;
    }
    exact += same;
  }
  return {static_cast<double>(exact) / static_cast<double>(n),
          static_cast<double>(tokens) / static_cast<double>(n * (length + 1))};
}

Tensor sequence_loss(const Tensor& logits, const Tensor& target) {
  nn::CrossEntropyOptions options;
  options.ignore_index = kPad;
  return nn::cross_entropy(logits.transpose(1, 2), target, options);  // logits (B, T, V) -> (B, V, T)
}

}  // namespace tapegrad::examples::reversal
