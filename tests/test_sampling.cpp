// multinomial: shapes, reproducibility from the seed, frequencies within a statistical bound with and without
// replacement, zero-probability categories never drawn, and errors.

#include <doctest/doctest.h>

#include <cmath>
#include <set>
#include <vector>

#include "tapegrad/autograd/autograd.h"

using namespace tapegrad;

namespace {

// Counts of each category in draws.
std::vector<double> frequencies(const std::vector<std::int64_t>& draws, std::int64_t classes) {
  std::vector<double> f(static_cast<std::size_t>(classes), 0.0);
  for (const std::int64_t d : draws) f.at(static_cast<std::size_t>(d)) += 1.0;
  for (double& v : f) v /= static_cast<double>(draws.size());
  return f;
}

}  // namespace

TEST_CASE("multinomial: with replacement, frequencies match the (unnormalised) probabilities") {
  Generator gen(7);
  // Weights 1 : 2 : 0 : 5 (sum 8), as float32.
  const Tensor weights = from_vector(std::vector<float>{1, 2, 0, 5}, {4});
  const std::int64_t n = 200000;
  const Tensor draws = multinomial(weights, n, /*replacement=*/true, gen);
  CHECK(draws.shape() == Shape{n});
  CHECK(draws.dtype() == kInt64);
  const std::vector<double> f = frequencies(draws.to_vector<std::int64_t>(), 4);
  const std::vector<double> p{1.0 / 8, 2.0 / 8, 0.0, 5.0 / 8};
  for (std::size_t c = 0; c < 4; ++c) {
    CAPTURE(c);
    // Five standard deviations of a frequency over n draws: a false failure has probability below 1e-6.
    const double bound = 5.0 * std::sqrt(p[c] * (1 - p[c]) / static_cast<double>(n));
    CHECK(std::abs(f[c] - p[c]) <= bound);
  }
  CHECK(f[2] == 0.0);  // a zero-probability category is never drawn

  // The same seed gives the same draws; another seed other draws.
  Generator again(7), other(8);
  const std::vector<std::int64_t> first = draws.to_vector<std::int64_t>();
  CHECK(multinomial(weights, n, true, again).to_vector<std::int64_t>() == first);
  CHECK(multinomial(weights, 100, true, other).to_vector<std::int64_t>() !=
        std::vector<std::int64_t>(first.begin(), first.begin() + 100));
}

TEST_CASE("multinomial: 2-D rows are sampled independently") {
  Generator gen(3);
  const Tensor probs = from_vector(std::vector<double>{0.0, 1.0, 0.0, 0.5, 0.0, 0.5}, {2, 3});
  const Tensor draws = multinomial(probs, 1000, true, gen);
  CHECK(draws.shape() == Shape{2, 1000});
  const std::vector<std::int64_t> d = draws.to_vector<std::int64_t>();
  const std::vector<std::int64_t> row0(d.begin(), d.begin() + 1000), row1(d.begin() + 1000, d.end());
  CHECK(std::set<std::int64_t>(row0.begin(), row0.end()) == std::set<std::int64_t>{1});
  CHECK(std::set<std::int64_t>(row1.begin(), row1.end()) == std::set<std::int64_t>{0, 2});
  const double f0 = frequencies(row1, 3)[0];
  CHECK(std::abs(f0 - 0.5) <= 5.0 * std::sqrt(0.25 / 1000));
}

TEST_CASE("multinomial: without replacement, distinct draws with the sequential probabilities") {
  Generator gen(11);
  // p = (0.5, 0.3, 0.2). Two draws without replacement: P(i then j) = p_i p_j / (1 - p_i).
  const std::vector<double> p{0.5, 0.3, 0.2};
  const Tensor probs = from_vector(p, {1, 3}).expand({3000, 3}).contiguous();  // 3000 rows, one pair each
  std::vector<double> pair_count(9, 0.0);
  const std::int64_t repeats = 20;
  for (std::int64_t r = 0; r < repeats; ++r) {
    const std::vector<std::int64_t> d = multinomial(probs, 2, /*replacement=*/false, gen).to_vector<std::int64_t>();
    for (std::size_t k = 0; k < d.size(); k += 2) {
      REQUIRE(d[k] != d[k + 1]);
      pair_count[static_cast<std::size_t>(d[k] * 3 + d[k + 1])] += 1.0;
    }
  }
  const double n = 3000.0 * static_cast<double>(repeats);
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 3; ++j) {
      CAPTURE(i);
      CAPTURE(j);
      const double expected = i == j ? 0.0 : p[i] * p[j] / (1 - p[i]);
      const double bound = 5.0 * std::sqrt(expected * (1 - expected) / n);
      CHECK(std::abs(pair_count[i * 3 + j] / n - expected) <= bound);
    }
  // Drawing every category: a permutation.
  const std::vector<std::int64_t> all = multinomial(from_vector(p, {3}), 3, false, gen).to_vector<std::int64_t>();
  CHECK(std::set<std::int64_t>(all.begin(), all.end()) == std::set<std::int64_t>{0, 1, 2});
}

TEST_CASE("multinomial: errors name the row and the value") {
  Generator gen(0);
  const Tensor ok = from_vector(std::vector<double>{0.2, 0.8}, {2});
  CHECK_THROWS_WITH_AS(multinomial(from_vector(std::vector<double>{0.5, -0.1, 0.2, 0.3}, {2, 2}), 1, true, gen),
                       "multinomial: row 0 holds the probability -0.1 at 1 (must be finite and non-negative)",
                       ValueError);
  CHECK_THROWS_WITH_AS(multinomial(from_vector(std::vector<double>{0.5, 0.5, 0.0, 0.0}, {2, 2}), 1, true, gen),
                       "multinomial: row 1 sums to 0", ValueError);
  CHECK_THROWS_WITH_AS(multinomial(from_vector(std::vector<double>{1.0, 0.0, 0.0}, {3}), 2, false, gen),
                       "multinomial: row 0 has 1 categories of non-zero probability, fewer than the 2 samples to "
                       "draw without replacement",
                       ValueError);
  CHECK_THROWS_WITH_AS(multinomial(ok, 3, false, gen),
                       "multinomial: cannot draw 3 samples without replacement from 2 categories", ValueError);
  CHECK_THROWS_WITH_AS(multinomial(ok, 0, true, gen), "multinomial: num_samples must be positive, got 0", ValueError);
  CHECK_THROWS_WITH_AS(multinomial(zeros({2, 2, 2}), 1, true, gen),
                       "multinomial: probabilities must be 1-D (C) or 2-D (N, C), got shape (2,2,2)", ShapeError);
  CHECK_THROWS_AS(multinomial(from_vector(std::vector<std::int64_t>{1, 2}, {2}), 1, true, gen), TypeError);
  CHECK_THROWS_AS(multinomial(from_vector(std::vector<double>{1.0, NAN}, {2}), 1, true, gen), ValueError);
}

TEST_CASE("AliasTable: frequencies match the normalised weights, zero weights are never drawn") {
  // A word2vec-like noise distribution: Zipf counts to the power 0.75, with two words of count 0.
  std::vector<double> weights;
  for (int i = 0; i < 1000; ++i) weights.push_back(i == 3 || i == 500 ? 0.0 : std::pow(1e5 / (i + 1.0), 0.75));
  const AliasTable table(weights);
  double total = 0.0;
  for (double w : weights) total += w;
  CHECK(table.size() == 1000);
  for (int i : {0, 1, 3, 999})
    CHECK(table.probability(i) == doctest::Approx(weights[static_cast<std::size_t>(i)] / total).epsilon(1e-12));
  Generator gen(11);
  const std::int64_t n = 400000;
  const std::vector<std::int64_t> draws = table.sample({n}, gen).to_vector<std::int64_t>();
  const std::vector<double> f = frequencies(draws, 1000);
  double tv = 0.0;  // total variation distance
  for (std::size_t i = 0; i < 1000; ++i) {
    const double p = weights[i] / total;
    tv += 0.5 * std::abs(f[i] - p);
    if (p == 0.0) {
      CHECK(f[i] == 0.0);
    } else if (i < 20) {  // the frequent words, one by one
      CAPTURE(i);
      CHECK(std::abs(f[i] - p) < 5 * std::sqrt(p * (1 - p) / static_cast<double>(n)));
    }
  }
  // Expected TV of an exact sampler at this n is about 0.02; a table built wrong is far off.
  CHECK(tv < 0.03);
}

TEST_CASE("AliasTable: the same seed gives the same draws, shapes are kept, one category is always drawn") {
  const AliasTable table(from_vector(std::vector<float>{1, 2, 3, 4}, {4}));
  Generator a(3), b(3);
  const Tensor x = table.sample({2, 5}, a), y = table.sample({2, 5}, b);
  CHECK(x.shape() == Shape{2, 5});
  CHECK(x.dtype() == kInt64);
  CHECK(x.to_vector<std::int64_t>() == y.to_vector<std::int64_t>());
  const AliasTable one(std::vector<double>{0.0, 0.0, 7.0});
  for (int i = 0; i < 100; ++i) CHECK(one.sample(a) == 2);
}

TEST_CASE("AliasTable: bad weights are refused with the value") {
  CHECK_THROWS_WITH_AS(AliasTable(std::vector<double>{}), "AliasTable: no categories", ValueError);
  CHECK_THROWS_WITH_AS(AliasTable(std::vector<double>{1.0, -2.0}),
                       "AliasTable: weight 1 is -2; weights must be finite and non-negative", ValueError);
  CHECK_THROWS_WITH_AS(AliasTable(std::vector<double>{0.0, 0.0}), "AliasTable: the weights sum to 0", ValueError);
  CHECK_THROWS_WITH_AS(AliasTable(std::vector<double>{1e308, 1e308, 1.0}),
                       "AliasTable: the weights' sum overflows (scale them down)", ValueError);
  CHECK_THROWS_WITH_AS(AliasTable(std::vector<double>{1.0, 2.0}).probability(2),
                       "AliasTable::probability: category 2 is outside [0, 2)", IndexError);
  CHECK_THROWS_WITH_AS(AliasTable(zeros({2, 2})),
                       "AliasTable: expected 1-D float32 or float64 weights, got float32 (2,2)", ShapeError);
}
