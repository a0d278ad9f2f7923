#pragma once
// Stratified train/validation/test split of a labelled dataset, and stratified k-fold cross-validation.

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

// Stratified k-fold cross-validation: `rows` (distinct indices into labels) dealt into `folds` folds.
// Each class, in ascending label order, is shuffled by one Generator(seed) and dealt to the folds in
// turn, the count carried from class to class, so the folds' sizes differ by at most one, and so do
// their counts of every class. Each fold ascending; the same folds for any order of `rows`.
// ValueError for folds < 2, more folds than rows or a row given twice; IndexError for a row outside
// labels.
std::vector<std::vector<std::size_t>> stratified_folds(const std::vector<std::int64_t>& labels,
                                                       const std::vector<std::size_t>& rows, std::int64_t folds,
                                                       std::uint64_t seed);

// Round `round` of k-fold cross-validation over a split's training and validation rows: they are dealt
// into `folds` stratified folds (stratified_folds), fold `round` becomes the validation rows and the
// rest the training rows; the test rows are kept as they are, so a choice made by cross-validation
// never sees them. ValueError for folds < 2, more folds than training and validation rows, a round
// outside [0, folds), or a row in both training and validation; IndexError for a row outside labels.
Split cross_validation_round(const Split& split, const std::vector<std::int64_t>& labels, std::int64_t folds,
                             std::int64_t round, std::uint64_t seed);

}  // namespace tapegrad::data
