// word2vec's output layers: huffman_tree (optimal code lengths, prefix-free codes, O(V) build on
// sorted counts equal to the sorted-first build), hierarchical_softmax_loss (a distribution over the
// vocabulary: the probabilities sum to 1), negative_sampling_loss (the formula), float64 gradcheck
// of both, and errors.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <queue>
#include <set>
#include <vector>

#include "tapegrad/nn/nn.h"
#include "testing.h"

using namespace tapegrad;
using tapegrad::testing::check_gradients;
using tapegrad::testing::max_abs_diff;

namespace {

// The cost sum(count * code length) of an optimal prefix code: the sum of every merge's weight.
std::int64_t optimal_cost(const std::vector<std::int64_t>& counts) {
  std::priority_queue<std::int64_t, std::vector<std::int64_t>, std::greater<>> heap(counts.begin(), counts.end());
  std::int64_t cost = 0;
  while (heap.size() > 1) {
    const std::int64_t a = heap.top();
    heap.pop();
    const std::int64_t b = heap.top();
    heap.pop();
    cost += a + b;
    heap.push(a + b);
  }
  return cost;
}

std::vector<std::int64_t> random_counts(std::size_t n, Generator& gen, bool sorted) {
  std::vector<std::int64_t> c(n);
  for (auto& x : c) x = 1 + static_cast<std::int64_t>(gen.randint(1000));
  if (sorted) std::sort(c.begin(), c.end(), std::greater<>());
  return c;
}

}  // namespace

TEST_CASE("huffman_tree: optimal, prefix-free codes whose paths start at the root") {
  Generator gen(1);
  for (bool sorted : {true, false}) {
    CAPTURE(sorted);
    const std::vector<std::int64_t> counts = random_counts(200, gen, sorted);
    const nn::HuffmanTree tree = nn::huffman_tree(counts);
    REQUIRE(tree.num_words() == 200);
    CHECK(tree.num_inner_nodes() == 199);
    std::int64_t cost = 0;
    std::set<std::vector<std::uint8_t>> codes;
    std::set<std::int64_t> inner;
    for (std::size_t w = 0; w < counts.size(); ++w) {
      REQUIRE(tree.nodes[w].size() == tree.codes[w].size());
      CHECK(tree.nodes[w].front() == 198);  // the root
      cost += counts[w] * static_cast<std::int64_t>(tree.codes[w].size());
      codes.insert(tree.codes[w]);
      inner.insert(tree.nodes[w].begin(), tree.nodes[w].end());
    }
    CHECK(cost == optimal_cost(counts));
    CHECK(codes.size() == counts.size());  // no two words share a code
    CHECK(inner.size() == 199);
    CHECK(*inner.begin() == 0);
    // No code is a prefix of another: in sorted order a prefix would sit right before its extension.
    for (auto it = codes.begin(); std::next(it) != codes.end(); ++it) {
      const auto& a = *it;
      const auto& b = *std::next(it);
      CHECK(!(a.size() <= b.size() && std::equal(a.begin(), a.end(), b.begin())));
    }
  }
  // Sorting first changes nothing: each word gets the code it gets in the sorted build.
  const std::vector<std::int64_t> shuffled{5, 40, 1, 40, 7, 3, 3, 12};
  std::vector<std::size_t> order{1, 3, 7, 4, 0, 5, 6, 2};  // decreasing counts, ties by index
  std::vector<std::int64_t> sorted;
  for (std::size_t i : order) sorted.push_back(shuffled[i]);
  const nn::HuffmanTree a = nn::huffman_tree(shuffled), b = nn::huffman_tree(sorted);
  for (std::size_t r = 0; r < order.size(); ++r) {
    CHECK(a.codes[order[r]] == b.codes[r]);
    CHECK(a.nodes[order[r]] == b.nodes[r]);
  }
  // Ties between a leaf and a merged node go to the merged node, as in word2vec.c: for counts
  // 2, 1, 1 the two 1s merge into node 0, which (weight 2) is taken before the leaf of count 2.
  const nn::HuffmanTree tied = nn::huffman_tree({2, 1, 1});
  CHECK(tied.codes[0] == std::vector<std::uint8_t>{1});
  CHECK(tied.codes[1] == std::vector<std::uint8_t>{0, 1});
  CHECK(tied.codes[2] == std::vector<std::uint8_t>{0, 0});
  CHECK(tied.nodes[1] == std::vector<std::int64_t>{1, 0});
  // Two words: one inner node, codes 0 and 1; one word: an empty path.
  const nn::HuffmanTree two = nn::huffman_tree({3, 9});
  CHECK(two.codes[0].size() == 1);
  CHECK(two.codes[0][0] + two.codes[1][0] == 1);
  const nn::HuffmanTree one = nn::huffman_tree({4});
  CHECK(one.nodes[0].empty());
  // A one-word vocabulary: empty paths, probability 1, loss 0.
  const nn::HuffmanPaths p = one.paths(zeros({2}, kInt64));
  CHECK(p.nodes.shape() == Shape{2, 0});
  const Tensor loss =
      nn::hierarchical_softmax_loss(ones({2, 3}), zeros({2, 0, 3}), p.codes, p.mask, nn::Reduction::None);
  CHECK(loss.abs().max().item<double>() == 0.0);
}

TEST_CASE(
    "hierarchical_softmax_loss: the probabilities of all words sum to 1, and each is the product along its path") {
  Generator gen(2);
  const std::vector<std::int64_t> counts{30, 20, 9, 9, 5, 2, 1};
  const nn::HuffmanTree tree = nn::huffman_tree(counts);
  const std::int64_t v = 7, d = 4;
  const Tensor node_vectors = randn({v - 1, d}, gen, kFloat64);
  const Tensor hidden = randn({3, d}, gen, kFloat64);
  std::vector<std::int64_t> all(v);
  for (std::int64_t w = 0; w < v; ++w) all[static_cast<std::size_t>(w)] = w;
  const nn::HuffmanPaths p = tree.paths(from_vector(all, {v}));
  // Padded with a padding row's index instead of 0: the same nodes where the paths are.
  const nn::HuffmanPaths padded = tree.paths(from_vector(all, {v}), v - 1);
  const std::vector<std::int64_t> plain_nodes = p.nodes.to_vector<std::int64_t>();
  const std::vector<std::int64_t> padded_nodes = padded.nodes.to_vector<std::int64_t>();
  const std::vector<std::int64_t> on_path = p.mask.to(kInt64).to_vector<std::int64_t>();
  for (std::size_t k = 0; k < on_path.size(); ++k) CHECK(padded_nodes[k] == (on_path[k] != 0 ? plain_nodes[k] : v - 1));
  for (std::int64_t i = 0; i < 3; ++i) {
    const Tensor h = expand(hidden.narrow(0, i, 1), {v, d});
    const Tensor loss = nn::hierarchical_softmax_loss(h, embedding(node_vectors, p.nodes), p.codes, p.mask,
                                                      nn::Reduction::None);  // (V): -log p(w | h)
    CHECK(exp(-loss).sum().item<double>() == doctest::Approx(1.0).epsilon(1e-12));
    for (std::int64_t w = 0; w < v; ++w) {
      double prob = 1.0;
      for (std::size_t j = 0; j < tree.nodes[static_cast<std::size_t>(w)].size(); ++j) {
        const double x = (hidden.select(0, i) * node_vectors.select(0, tree.nodes[static_cast<std::size_t>(w)][j]))
                             .sum()
                             .item<double>();
        prob *= 1.0 / (1.0 + std::exp(tree.codes[static_cast<std::size_t>(w)][j] ? x : -x));
      }
      CHECK(std::exp(-loss.at({w})) == doctest::Approx(prob).epsilon(1e-12));
    }
  }
}

TEST_CASE("negative_sampling_loss: -log sigmoid(h . u_o) - sum_k log sigmoid(-h . u_k)") {
  Generator gen(3);
  const Tensor h = randn({4, 5}, gen, kFloat64), pos = randn({4, 5}, gen, kFloat64),
               neg = randn({4, 3, 5}, gen, kFloat64);
  const Tensor loss = nn::negative_sampling_loss(h, pos, neg, nn::Reduction::None);
  REQUIRE(loss.shape() == Shape{4});
  auto log_sigmoid = [](double x) { return -std::log1p(std::exp(-x)); };
  for (std::int64_t b = 0; b < 4; ++b) {
    double want = -log_sigmoid((h.select(0, b) * pos.select(0, b)).sum().item<double>());
    for (std::int64_t k = 0; k < 3; ++k)
      want -= log_sigmoid(-(h.select(0, b) * neg.select(0, b).select(0, k)).sum().item<double>());
    CHECK(loss.at({b}) == doctest::Approx(want).epsilon(1e-12));
  }
  CHECK(nn::negative_sampling_loss(h, pos, neg).item<double>() == doctest::Approx(loss.mean().item<double>()));
  CHECK(nn::negative_sampling_loss(h, pos, neg, nn::Reduction::Sum).item<double>() ==
        doctest::Approx(loss.sum().item<double>()));
}

TEST_CASE("word2vec losses pass float64 gradcheck and gradgradcheck") {
  Generator gen(4);
  auto ns = [](const TensorList& in) { return nn::negative_sampling_loss(in[0], in[1], in[2], nn::Reduction::None); };
  check_gradients(ns, {randn({3, 4}, gen, kFloat64), randn({3, 4}, gen, kFloat64), randn({3, 2, 4}, gen, kFloat64)});
  const nn::HuffmanTree tree = nn::huffman_tree({8, 5, 3, 2, 1});
  const nn::HuffmanPaths p = tree.paths(from_vector(std::vector<std::int64_t>{0, 4, 2}, {3}));
  auto hs = [&](const TensorList& in) {
    return nn::hierarchical_softmax_loss(in[0], embedding(in[1], p.nodes), p.codes, p.mask, nn::Reduction::None);
  };
  check_gradients(hs, {randn({3, 4}, gen, kFloat64), randn({4, 4}, gen, kFloat64)});
}

TEST_CASE("huffman_tree and the word2vec losses reject bad input with the values") {
  CHECK_THROWS_WITH_AS(nn::huffman_tree({}), "huffman_tree: no words", ValueError);
  CHECK_THROWS_WITH_AS(nn::huffman_tree({3, 0}), "huffman_tree: count 1 is 0; every word needs a count of at least 1",
                       ValueError);
  CHECK_THROWS_WITH_AS(nn::huffman_tree({std::numeric_limits<std::int64_t>::max(), 1}),
                       "huffman_tree: the counts sum to more than an int64 holds (at count 1)", ValueError);
  const nn::HuffmanTree tree = nn::huffman_tree({3, 2, 1});
  CHECK_THROWS_WITH_AS(tree.paths(from_vector(std::vector<std::int64_t>{0, 3}, {2})),
                       "HuffmanTree::paths: word 3 at 1 is outside [0, 3)", IndexError);
  CHECK_THROWS_WITH_AS(nn::negative_sampling_loss(zeros({2, 3}), zeros({2, 3}), zeros({2, 4, 2})),
                       "negative_sampling_loss: expected hidden (B, D), positive (B, D) and negatives (B, K, D), got "
                       "(2,3), (2,3) and (2,4,2)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(
      nn::hierarchical_softmax_loss(zeros({2, 3}), zeros({2, 2, 3}), zeros({2, 2}), zeros({2, 2})),
      "hierarchical_softmax_loss: expected hidden (B, D), nodes (B, L, D), codes (B, L) and a Bool mask (B, L), got "
      "(2,3), (2,2,3), (2,2) and float32 (2,2)",
      ShapeError);
  CHECK_THROWS_WITH_AS(nn::negative_sampling_loss(zeros({2, 3}), zeros({2, 3}, kFloat64), zeros({2, 4, 3})),
                       "negative_sampling_loss: hidden, positive and negatives must share a dtype, got float32, "
                       "float64 and float32",
                       TypeError);
  const Tensor mask = ones({2, 2}, kBool);
  CHECK_THROWS_WITH_AS(nn::hierarchical_softmax_loss(zeros({2, 3}), zeros({2, 2, 3}, kFloat64), zeros({2, 2}), mask),
                       "hierarchical_softmax_loss: hidden and nodes must share a dtype, got float32 and float64",
                       TypeError);
  // A code is a branch, 0 or 1; 0.5 or -1 would be read as a soft or a negated target.
  CHECK_THROWS_WITH_AS(nn::hierarchical_softmax_loss(zeros({2, 3}), zeros({2, 2, 3}),
                                                     from_vector(std::vector<float>{0, 1, 1, 0.5f}, {2, 2}), mask),
                       "hierarchical_softmax_loss: codes must be 0 or 1, got 0.5 at flat index 3", ValueError);
  CHECK(nn::hierarchical_softmax_loss(zeros({2, 3}), zeros({2, 2, 3}),
                                      from_vector(std::vector<float>{0, 1, 1, 0}, {2, 2}), mask)
            .item() == doctest::Approx(2 * std::log(2.0)));
}
