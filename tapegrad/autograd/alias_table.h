#pragma once
// Walker's alias method (in Vose's numerically stable construction): after O(C) set-up from C
// category weights, each draw costs O(1) — one bounded integer and one uniform from the Generator —
// however many categories there are. For drawing many samples from one fixed distribution, such as
// word2vec's negatives from the unigram^0.75 distribution; multinomial (ops.h) suits one-off draws.
//
//   AliasTable noise(counts_to_the_075);        // weights need not sum to 1
//   std::int64_t word = noise.sample(gen);
//   Tensor negatives = noise.sample({B, 5}, gen);  // Int64
//
// The same generator state gives the same draws.

#include <cstdint>
#include <vector>

#include "tapegrad/autograd/generator.h"
#include "tapegrad/autograd/tensor.h"

namespace tapegrad {

class AliasTable {
 public:
  // ValueError for no categories, a negative, infinite or NaN weight, or weights summing to 0 (or
  // to more than a double holds).
  explicit AliasTable(const std::vector<double>& weights);
  // The same from a 1-D floating-point tensor (ShapeError for another rank or dtype).
  explicit AliasTable(const Tensor& weights);

  std::int64_t sample(Generator& gen) const {
    const std::int64_t i = static_cast<std::int64_t>(gen.randint(static_cast<std::uint64_t>(size())));
    return gen.uniform() < keep_[static_cast<std::size_t>(i)] ? i : alias_[static_cast<std::size_t>(i)];
  }
  // Int64 tensor of `shape`, filled in order with independent draws.
  Tensor sample(const Shape& shape, Generator& gen) const;

  std::int64_t size() const { return static_cast<std::int64_t>(keep_.size()); }
  // The probability of category i: its weight over the sum. IndexError outside [0, size()).
  double probability(std::int64_t i) const;

 private:
  std::vector<double> keep_;         // the chance that a draw landing on column i keeps i
  std::vector<std::int64_t> alias_;  // what it takes otherwise
  std::vector<double> probability_;
};

}  // namespace tapegrad
