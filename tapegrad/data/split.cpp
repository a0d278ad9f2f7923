#include "tapegrad/data/split.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/generator.h"

namespace tapegrad::data {

Split stratified_split(const std::vector<std::int64_t>& labels, double train_fraction, double validation_fraction,
                       std::uint64_t seed) {
  auto check = [](double f, const char* name) {
    if (!(f >= 0.0 && f <= 1.0))  // also rejects NaN
      throw ValueError(std::string("stratified_split: ") + name + " must lie in [0, 1], got " + std::to_string(f));
  };
  check(train_fraction, "train_fraction");
  check(validation_fraction, "validation_fraction");
  if (train_fraction + validation_fraction > 1.0 + 1e-12)
    throw ValueError("stratified_split: train_fraction + validation_fraction must be <= 1, got " +
                     std::to_string(train_fraction) + " + " + std::to_string(validation_fraction));

  std::map<std::int64_t, std::vector<std::size_t>> classes;  // ascending label order
  for (std::size_t i = 0; i < labels.size(); ++i) classes[labels[i]].push_back(i);

  Split split;
  Generator gen(seed);
  for (auto& [label, rows] : classes) {
    for (std::size_t i = rows.size(); i > 1; --i) std::swap(rows[i - 1], rows[gen.randint(i)]);
    const auto n = static_cast<std::int64_t>(rows.size());
    const std::int64_t n_train = std::min<std::int64_t>(n, std::llround(static_cast<double>(n) * train_fraction));
    const std::int64_t n_val =
        std::min<std::int64_t>(n - n_train, std::llround(static_cast<double>(n) * validation_fraction));
    split.train.insert(split.train.end(), rows.begin(), rows.begin() + n_train);
    split.validation.insert(split.validation.end(), rows.begin() + n_train, rows.begin() + n_train + n_val);
    split.test.insert(split.test.end(), rows.begin() + n_train + n_val, rows.end());
  }
  std::sort(split.train.begin(), split.train.end());
  std::sort(split.validation.begin(), split.validation.end());
  std::sort(split.test.begin(), split.test.end());
  return split;
}

}  // namespace tapegrad::data
