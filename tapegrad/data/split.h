#pragma once
// Stratified train/validation/test split of a labelled dataset.

#include <cstdint>
#include <vector>

namespace tapegrad::data {

struct Split {
  std::vector<std::size_t> train, validation, test;  // row indices, each list ascending
};

// Each class (the rows sharing a label) is shuffled and cut on its own, so every part keeps the
// class ratio of the whole. For a class of n rows: n_train = round(n * train_fraction),
// n_validation = min(round(n * validation_fraction), n - n_train) (round: half away from zero)
// and the rest goes to test. The shuffle draws from one Generator(seed), the classes taken in
// ascending label order, so the split is a function of (labels, fractions, seed).
// Fractions must lie in [0, 1] with train_fraction + validation_fraction <= 1: ValueError.
Split stratified_split(const std::vector<std::int64_t>& labels, double train_fraction, double validation_fraction,
                       std::uint64_t seed);

}  // namespace tapegrad::data
