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
      throw ValueError(message("stratified_split: ", name, " must lie in [0, 1], got ", f));
  };
  check(train_fraction, "train_fraction");
  check(validation_fraction, "validation_fraction");
  if (train_fraction + validation_fraction > 1.0 + 1e-12)
    throw ValueError(message("stratified_split: train_fraction + validation_fraction must be <= 1, got ",
                             train_fraction, " + ", validation_fraction));

  std::map<std::int64_t, std::vector<std::size_t>> classes;  // ascending label order
  for (std::size_t i = 0; i < labels.size(); ++i) classes[labels[i]].push_back(i);

  Split split;
  Generator gen(seed);
  for (auto& [label, rows] : classes) {
    gen.shuffle(rows);
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

namespace {

// ValueError unless 2 <= folds <= rows; `where` names the caller.
void check_folds(const char* where, std::int64_t folds, std::size_t rows, const char* what) {
  if (folds < 2 || static_cast<std::uint64_t>(folds) > rows)
    throw ValueError(message(where, ": folds must be at least 2 and at most the ", rows, " ", what, ", got ", folds));
}

// stratified_folds with its errors naming `where`.
std::vector<std::vector<std::size_t>> deal_folds(const char* where, const std::vector<std::int64_t>& labels,
                                                 const std::vector<std::size_t>& rows, std::int64_t folds,
                                                 std::uint64_t seed) {
  std::map<std::int64_t, std::vector<std::size_t>> classes;  // ascending label order
  for (const std::size_t r : rows) {
    if (r >= labels.size()) throw IndexError(message(where, ": row ", r, " is outside the ", labels.size(), " labels"));
    classes[labels[r]].push_back(r);
  }
  std::vector<std::vector<std::size_t>> out(static_cast<std::size_t>(folds));
  Generator gen(seed);
  std::size_t dealt = 0;
  for (auto& [label, members] : classes) {
    std::sort(members.begin(), members.end());  // the same folds for any order of `rows`
    const auto repeated = std::adjacent_find(members.begin(), members.end());
    if (repeated != members.end()) throw ValueError(message(where, ": row ", *repeated, " is given twice"));
    gen.shuffle(members);
    for (const std::size_t r : members) out[dealt++ % out.size()].push_back(r);
  }
  for (std::vector<std::size_t>& fold : out) std::sort(fold.begin(), fold.end());
  return out;
}

}  // namespace

std::vector<std::vector<std::size_t>> stratified_folds(const std::vector<std::int64_t>& labels,
                                                       const std::vector<std::size_t>& rows, std::int64_t folds,
                                                       std::uint64_t seed) {
  check_folds("stratified_folds", folds, rows.size(), "rows");
  return deal_folds("stratified_folds", labels, rows, folds, seed);
}

Split cross_validation_round(const Split& split, const std::vector<std::int64_t>& labels, std::int64_t folds,
                             std::int64_t round, std::uint64_t seed) {
  std::vector<std::size_t> pool = split.train;
  pool.insert(pool.end(), split.validation.begin(), split.validation.end());
  check_folds("cross_validation_round", folds, pool.size(), "training and validation rows");
  if (round < 0 || round >= folds)
    throw ValueError(message("cross_validation_round: round must be in [0, ", folds, "), got ", round));
  std::vector<std::vector<std::size_t>> parts = deal_folds("cross_validation_round", labels, pool, folds, seed);
  Split out;
  for (std::int64_t k = 0; k < folds; ++k) {
    std::vector<std::size_t>& part = parts[static_cast<std::size_t>(k)];
    std::vector<std::size_t>& into = k == round ? out.validation : out.train;
    into.insert(into.end(), part.begin(), part.end());
  }
  std::sort(out.train.begin(), out.train.end());
  out.test = split.test;
  return out;
}

}  // namespace tapegrad::data
