// sequence_reversal's options check, strings, tensors and measures. See reversal.h.

#include "examples/reversal/reversal.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <string>

namespace tapegrad::examples::reversal {

using C = ReversalConfig;

void validate(const ReversalConfig& config) {
  const std::string program = "sequence_reversal";
  require_positive(program, config, &C::seeds, &C::alphabet, &C::train_size, &C::heldout_size, &C::eval_size,
                   &C::min_train_length, &C::train_length, &C::max_len, &C::d_model, &C::heads, &C::encoder_layers,
                   &C::decoder_layers, &C::ff_hidden, &C::hidden, &C::position_range, &C::batch_size, &C::steps,
                   &C::beam_size, &C::log_every);
  require(config.alphabet <= 5, program, "--alphabet must be at most 5" + got(config, &C::alphabet));
  require(config.min_train_length <= config.train_length, program,
          "--min_train_length must be at most --train_length, got " + std::to_string(config.min_train_length) +
              " and " + std::to_string(config.train_length));
  std::int64_t longest = config.train_length;
  for (std::int64_t length : parse_lengths(config.eval_lengths)) longest = std::max(longest, length);
  require(config.max_len >= longest + 2, program,
          "--max_len " + std::to_string(config.max_len) +
              " must be at least the longest string + 2 = " + std::to_string(longest + 2));
  require(config.position_range >= config.max_len, program,
          "--position_range must be at least --max_len, got " + std::to_string(config.position_range) + " and " +
              std::to_string(config.max_len));
  require(config.location_kernel % 2 == 1 && config.location_kernel > 0, program,
          "--location_kernel must be a positive odd number" + got(config, &C::location_kernel));
  require_non_negative(program, config, &C::eval_every, &C::checkpoint_every);
  require(config.lr > 0, program, "--lr must be positive" + got(config, &C::lr));
  require(config.dropout >= 0 && config.dropout < 1, program, "--dropout must be in [0, 1)" + got(config, &C::dropout));
}

std::vector<std::int64_t> parse_lengths(const std::string& text) {
  std::vector<std::int64_t> lengths;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    std::size_t used = 0;
    long long value = 0;
    try {
      value = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || value < 1)
      throw ConfigError("sequence_reversal: --eval_lengths must be positive integers separated by commas, got \"" +
                        text + "\"");
    lengths.push_back(value);
    start = comma + 1;
  }
  return lengths;
}

Strings random_strings(std::int64_t count, std::int64_t min_length, std::int64_t max_length, std::int64_t alphabet,
                       Generator& gen, std::set<std::vector<std::int64_t>>& seen) {
  Strings out;
  double possible = 0;
  for (std::int64_t length = min_length; length <= max_length; ++length)
    possible += std::pow(static_cast<double>(alphabet), static_cast<double>(length));
  // Half the strings of these lengths at most, counting those already taken.
  double taken = 0;
  for (const auto& row : seen)
    taken += static_cast<std::int64_t>(row.size()) >= min_length && static_cast<std::int64_t>(row.size()) <= max_length;
  if (static_cast<double>(count) + taken > possible / 2)
    throw ConfigError(message("sequence_reversal: cannot draw ", count, " distinct strings of lengths ", min_length,
                              " to ", max_length, " over ", alphabet, " letters"));
  while (static_cast<std::int64_t>(out.rows.size()) < count) {
    const std::int64_t length =
        min_length + static_cast<std::int64_t>(gen.randint(static_cast<std::uint64_t>(max_length - min_length + 1)));
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

Tensor sequence_loss(const Tensor& logits, const Tensor& target) {
  nn::CrossEntropyOptions options;
  options.ignore_index = kPad;
  return nn::cross_entropy(logits.transpose(1, 2), target, options);  // logits (B, T, V) -> (B, V, T)
}

}  // namespace tapegrad::examples::reversal
