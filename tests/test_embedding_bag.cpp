// EmbeddingBag: sums and means of bags against a loop, per-sample weights, empty bags, gradients
// (gradcheck and gradgradcheck, the sparse gradient against the dense one), the module, refusals.

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tapegrad/autograd/error.h"
#include "tapegrad/nn/nn.h"
#include "tests/testing.h"

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

const std::vector<std::int64_t> kIndices{3, 0, 6, 6, 1, 3, 2, 5, 4};
const std::vector<std::int64_t> kOffsets{0, 2, 2, 6};  // bags of 2, 0, 4 and 3 indices

Tensor ids(const std::vector<std::int64_t>& values) {
  return from_vector(values, {static_cast<std::int64_t>(values.size())});
}

// The bags' sums (or means) by a loop over the indices, weighted when weights are given.
std::vector<double> loop_bags(const Tensor& table, bool mean, const std::vector<double>& weights = {}) {
  const std::vector<double> t = table.to_vector<double>();
  const std::int64_t dim = table.shape()[1];
  std::vector<double> out;
  for (std::size_t b = 0; b < kOffsets.size(); ++b) {
    const std::int64_t first = kOffsets[b];
    const auto last = b + 1 < kOffsets.size() ? kOffsets[b + 1] : static_cast<std::int64_t>(kIndices.size());
    for (std::int64_t d = 0; d < dim; ++d) {
      double total = 0.0;
      for (std::int64_t i = first; i < last; ++i) {
        const double w = weights.empty() ? 1.0 : weights[static_cast<std::size_t>(i)];
        total += w * t[static_cast<std::size_t>(kIndices[static_cast<std::size_t>(i)] * dim + d)];
      }
      out.push_back(mean && last > first ? total / static_cast<double>(last - first) : total);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("embedding_bag: sums and means equal a loop over the bags, an empty bag gives zeros") {
  Generator gen(1);
  const Tensor table = randn({7, 3}, gen, kFloat64);
  const Tensor sum = nn::embedding_bag(table, ids(kIndices), ids(kOffsets), nn::BagMode::Sum);
  CHECK(sum.shape() == Shape{4, 3});
  check_values(sum, loop_bags(table, false), 1e-12);
  check_values(nn::embedding_bag(table, ids(kIndices), ids(kOffsets), nn::BagMode::Mean), loop_bags(table, true),
               1e-12);
  const std::vector<double> weights{0.5, -1.0, 2.0, 0.25, 1.5, -0.75, 3.0, 0.1, -2.0};
  const Tensor weighted =
      nn::embedding_bag(table, ids(kIndices), ids(kOffsets), nn::BagMode::Sum, from_vector(weights, {9}));
  check_values(weighted, loop_bags(table, false, weights), 1e-12);
  CHECK(sum.select(0, 1).abs().sum().item<double>() == 0.0);
}

TEST_CASE("embedding_bag: gradients of the table and of the per-sample weights check") {
  Generator gen(2);
  const Tensor table = randn({7, 3}, gen, kFloat64);
  const Tensor weights = randn({9}, gen, kFloat64);
  check_gradients(
      [](const TensorList& x) {
        return nn::embedding_bag(x[0], ids(kIndices), ids(kOffsets), nn::BagMode::Sum, x[1]).tanh();
      },
      {table, weights});
  check_gradients(
      [](const TensorList& x) { return nn::embedding_bag(x[0], ids(kIndices), ids(kOffsets), nn::BagMode::Mean); },
      {table});
}

TEST_CASE("embedding_bag: the sparse gradient is the dense one after coalescing") {
  Generator gen(3);
  const Tensor start = randn({7, 3}, gen, kFloat64);
  const Tensor c = randn({4, 3}, gen, kFloat64);
  const Tensor dense = start.clone().requires_grad_(), sparse = start.clone().requires_grad_();
  for (const nn::BagMode mode : {nn::BagMode::Sum, nn::BagMode::Mean}) {
    dense.zero_grad(true);
    sparse.zero_grad(true);
    (nn::embedding_bag(dense, ids(kIndices), ids(kOffsets), mode) * c).sum().backward();
    (nn::embedding_bag(sparse, ids(kIndices), ids(kOffsets), mode, Tensor(), /*sparse=*/true) * c).sum().backward();
    REQUIRE(sparse.has_sparse_grad());
    CHECK(max_abs_diff(sparse.sparse_grad().to_dense(), dense.grad()) < 1e-14);
  }
}

TEST_CASE("embedding_bag: the module keeps torch's state dict name and reduces as the function does") {
  Generator gen(4);
  nn::EmbeddingBag bag{nn::EmbeddingBagOptions(7, 3).mode(nn::BagMode::Sum).generator(&gen).sparse(true)};
  const NamedTensors state = bag->state_dict();
  REQUIRE(state.size() == 1);
  CHECK(state[0].first == "weight");
  CHECK(bag->weight().shape() == Shape{7, 3});
  const Tensor out = bag(ids(kIndices), ids(kOffsets));
  check_values(out, loop_bags(bag->weight().detach().to(kFloat64), false), 1e-6);
  out.sum().backward();
  CHECK(bag->weight().has_sparse_grad());
}

TEST_CASE("embedding_bag: offsets out of order, weights with Mean and mis-shaped weights are refused") {
  const Tensor table = zeros({7, 3});
  CHECK_THROWS_WITH_AS(nn::embedding_bag(table, ids(kIndices), ids({1, 3})),
                       "embedding_bag: offsets must start at 0, never decrease and stay within the 9 indices, got "
                       "offsets[0] = 1",
                       ValueError);
  CHECK_THROWS_WITH_AS(nn::embedding_bag(table, ids(kIndices), ids({0, 5, 4})),
                       "embedding_bag: offsets must start at 0, never decrease and stay within the 9 indices, got "
                       "offsets[2] = 4 after 5",
                       ValueError);
  CHECK_THROWS_WITH_AS(nn::embedding_bag(table, ids(kIndices), ids({0, 10})),
                       "embedding_bag: offsets must start at 0, never decrease and stay within the 9 indices, got "
                       "offsets[1] = 10 after 0",
                       ValueError);
  CHECK_THROWS_WITH_AS(nn::embedding_bag(table, ids(kIndices), ids(kOffsets), nn::BagMode::Mean, zeros({9})),
                       "embedding_bag: per_sample_weights are only supported with mode Sum, as in torch", ValueError);
  CHECK_THROWS_WITH_AS(nn::embedding_bag(table, ids(kIndices), ids(kOffsets), nn::BagMode::Sum, zeros({8})),
                       "embedding_bag: per_sample_weights must be (9) float32 like the indices and the table, got "
                       "float32 (8)",
                       ValueError);
  CHECK_THROWS_AS(nn::embedding_bag(table, ids({7}), ids({0})), IndexError);
}

TEST_CASE("embedding_bag_sum: scaled sums against a loop, both gradients checked, its refusals") {
  // The fused op under nn::embedding_bag: scale[i] times row indices[i], summed per bag, without
  // the (N, D) rows; its gradients go to the table (dense or row-sparse) and to the scales.
  Generator gen(5);
  const Tensor table = randn({7, 3}, gen, kFloat64);
  const std::vector<double> scales{0.5, -1.0, 2.0, 0.25, 1.5, -0.75, 3.0, 0.1, -2.0};
  const Tensor out = embedding_bag_sum(table, ids(kIndices), kOffsets, from_vector(scales, {9}));
  check_values(out, loop_bags(table, false, scales), 1e-12);
  check_values(embedding_bag_sum(table, ids(kIndices), kOffsets), loop_bags(table, false), 1e-12);
  check_gradients([](const TensorList& x) { return embedding_bag_sum(x[0], ids(kIndices), kOffsets, x[1]).tanh(); },
                  {table, from_vector(scales, {9})});
  check_gradients([](const TensorList& x) { return embedding_bag_sum(x[0], ids(kIndices), kOffsets).tanh(); }, {table});
  // Non-contiguous operands: a transposed table, every other index.
  const Tensor wide = randn({3, 7}, gen, kFloat64);
  const Tensor spaced = ids({3, 9, 0, 9, 6, 9, 6, 9, 1, 9, 3, 9, 2, 9, 5, 9, 4, 9}).reshape({9, 2}).select(1, 0);
  check_values(embedding_bag_sum(wide.transpose(0, 1), spaced, kOffsets),
               loop_bags(wide.transpose(0, 1).contiguous(), false), 1e-12);

  // The table is saved (and checked for in-place writes) only when the scales need its rows.
  {
    const Tensor w = table.clone().requires_grad_();
    const Tensor plain = embedding_bag_sum(w, ids(kIndices), kOffsets).sum();
    const Tensor weighted =
        embedding_bag_sum(w, ids(kIndices), kOffsets, from_vector(scales, {9}).requires_grad_()).sum();
    {
      NoGradGuard no_grad;
      w.mul_(2.0);
    }
    plain.backward();  // reads only the indices and g
    CHECK_THROWS_AS(weighted.backward(), GraphError);
  }

  // Row-sparse: the rows of each index, scaled, in order; the dense gradient after coalescing.
  const Tensor sparse = table.clone().requires_grad_(), dense = table.clone().requires_grad_();
  const Tensor c = randn({4, 3}, gen, kFloat64);
  (embedding_bag_sum(sparse, ids(kIndices), kOffsets, from_vector(scales, {9}), /*sparse=*/true) * c).sum().backward();
  (embedding_bag_sum(dense, ids(kIndices), kOffsets, from_vector(scales, {9})) * c).sum().backward();
  REQUIRE(sparse.has_sparse_grad());
  CHECK(sparse.sparse_grad().nnz() == 9);
  CHECK(max_abs_diff(sparse.sparse_grad().to_dense(), dense.grad()) < 1e-14);

  const Tensor leaf = table.clone().requires_grad_();
  const Tensor twice = embedding_bag_sum(leaf, ids(kIndices), kOffsets, Tensor(), true).sum();
  autograd::GradOptions create_graph;
  create_graph.create_graph = true;
  CHECK_THROWS_WITH_AS(autograd::grad({twice}, {leaf}, {}, create_graph),
                       "embedding_bag_sum: sparse gradients cannot be differentiated again; build the embedding "
                       "with dense gradients to backward with create_graph",
                       GraphError);
  // With scales that need a gradient the backward is taped, and the sparse table refused there.
  const Tensor scale = from_vector(scales, {9}).requires_grad_();
  const Tensor scaled = embedding_bag_sum(leaf, ids(kIndices), kOffsets, scale, true).sum();
  CHECK_THROWS_WITH_AS(autograd::grad({scaled}, {leaf, scale}, {}, create_graph),
                       "embedding_bag_sum: sparse gradients cannot be differentiated again; use dense gradients to "
                       "backward with create_graph",
                       GraphError);
  CHECK_THROWS_WITH_AS(embedding_bag_sum(leaf * 2.0, ids(kIndices), kOffsets, Tensor(), true),
                       "embedding_bag_sum: sparse gradients go to a leaf weight, but this (7,3) weight was computed by "
                       "mul; use dense gradients",
                       GraphError);
  CHECK_THROWS_WITH_AS(embedding_bag_sum(table, ids(kIndices), kOffsets, zeros({9})),
                       "embedding_bag_sum: weight is float64 but scale is float32", TypeError);
  CHECK_THROWS_WITH_AS(embedding_bag_sum(table, ids(kIndices), kOffsets, zeros({8}, kFloat64)),
                       "embedding_bag_sum: expected scale (9), got (8)", ShapeError);
  CHECK_THROWS_WITH_AS(embedding_bag_sum(table, ids(kIndices), {}),
                       "embedding_bag_sum: 9 indices and no bag to hold them", ValueError);
  CHECK_THROWS_WITH_AS(nn::embedding_bag(table, ids(kIndices), from_vector(std::vector<std::int64_t>{}, {0})),
                       "embedding_bag_sum: 9 indices and no bag to hold them", ValueError);
  CHECK(embedding_bag_sum(table, ids({}), {}).shape() == Shape{0, 3});
  CHECK_THROWS_WITH_AS(embedding_bag_sum(table, ids(kIndices), {0, 5, 4}),
                       "embedding_bag_sum: bag 1 runs from 5 to 4, outside the 9 indices or backwards", ValueError);
  CHECK_THROWS_WITH_AS(embedding_bag_sum(table, ids(kIndices), {2, 5}),
                       "embedding_bag_sum: the first bag starts at 2, not 0", ValueError);
  CHECK_THROWS_WITH_AS(embedding_bag_sum(table, ids({7}), {0}),
                       "embedding_bag_sum: index 7 is out of range for 7 embeddings", IndexError);
}

// sum_repeated: a row per distinct index in the order of first appearance, equal to the dense
// gradient (bit for bit without scales); a batch the pool splits gives the same bits on 1, 2 and 3
// threads.
TEST_CASE("embedding_bag_sum: sum_repeated leaves one row per distinct index equal to the dense gradient") {
  Generator gen(6);
  const Tensor table = randn({7, 3}, gen, kFloat64);
  const std::vector<double> scales{0.5, -1.0, 2.0, 0.25, 1.5, -0.75, 3.0, 0.1, -2.0};
  const Tensor c = randn({4, 3}, gen, kFloat64);
  for (const bool scaled : {false, true}) {
    CAPTURE(scaled);
    const Tensor scale = scaled ? from_vector(scales, {9}) : Tensor();
    const Tensor summed = table.clone().requires_grad_(), dense = table.clone().requires_grad_();
    (embedding_bag_sum(summed, ids(kIndices), kOffsets, scale, /*sparse=*/true, /*sum_repeated=*/true) * c)
        .sum()
        .backward();
    (embedding_bag_sum(dense, ids(kIndices), kOffsets, scale) * c).sum().backward();
    REQUIRE(summed.has_sparse_grad());
    CHECK(summed.sparse_grad().indices().to_vector<std::int64_t>() == std::vector<std::int64_t>{3, 0, 6, 1, 2, 5, 4});
    if (scaled) {
      CHECK(max_abs_diff(summed.sparse_grad().to_dense(), dense.grad()) < 1e-14);
    } else {
      CHECK(max_abs_diff(summed.sparse_grad().to_dense(), dense.grad()) == 0.0);
    }
  }

  // 3000 indices of 20 over 200 rows in 500 bags: above the pool's split at 32,768 values.
  std::vector<std::int64_t> many(3000), starts;
  for (std::size_t i = 0; i < many.size(); ++i) many[i] = static_cast<std::int64_t>((i * i + 11 * i) % 200);
  for (std::int64_t b = 0; b < 500; ++b) starts.push_back(b * 6);
  const Tensor wide = randn({200, 20}, gen, kFloat32);
  const Tensor g = randn({500, 20}, gen, kFloat32);
  const int threads = num_threads();
  std::vector<std::vector<float>> results;
  for (const int count : {1, 2, 3}) {
    set_num_threads(count);
    const Tensor summed = wide.clone().requires_grad_(), dense = wide.clone().requires_grad_();
    (embedding_bag_sum(summed, ids(many), starts, Tensor(), true, true) * g).sum().backward();
    (embedding_bag_sum(dense, ids(many), starts) * g).sum().backward();
    CHECK(max_abs_diff(summed.sparse_grad().to_dense(), dense.grad()) == 0.0);
    results.push_back(summed.sparse_grad().values().to_vector<float>());
  }
  set_num_threads(threads);
  CHECK(results[0] == results[1]);
  CHECK(results[0] == results[2]);
}
