// Row-sparse embedding gradients: SparseRows (coalesce, to_dense, append, errors), the sparse
// embedding's backward against the dense one (duplicates, padding, several backwards, bit for bit
// after coalescing), its finite-difference check, what a sparse gradient refuses (create_graph,
// autograd::grad, gradient hooks, a computed weight), SGD's lazy step and SparseAdam against
// their formulas with untouched rows bitwise unchanged, the optimisers that refuse a kind of
// gradient, and clipping.

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <set>
#include <vector>

#include "tapegrad/nn/nn.h"
#include "tapegrad/optim/optim.h"
#include "testing.h"

using namespace tapegrad;
using tapegrad::testing::max_abs_diff;

namespace {

Tensor ids_of(const std::vector<std::int64_t>& ids, const Shape& shape) { return from_vector(ids, shape); }

// Two tables with the same values, one with sparse gradients; the same weighting of their rows.
struct Pair {
  nn::Embedding sparse;
  nn::Embedding dense;
  Pair(std::int64_t v, std::int64_t d, std::optional<std::int64_t> pad, DType dtype = kFloat32)
      : sparse(nn::EmbeddingOptions(v, d).padding_idx(pad).sparse(true)),
        dense(nn::EmbeddingOptions(v, d).padding_idx(pad)) {
    sparse->to(dtype);
    dense->to(dtype);
    NoGradGuard no_grad;
    dense->weight().copy_(sparse->weight());
  }
};

Tensor weighted_sum(const Tensor& rows, const Tensor& weights) { return (rows * weights).sum(); }

// The largest |a[i] - b[i]|.
double worst_gap(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, static_cast<double>(std::abs(a[i] - b[i])));
  return worst;
}

// run(threads) with the pool at each of the thread counts in turn, its own count restored after.
template <class F>
auto on_threads(const std::vector<int>& counts, F run) {
  const int threads = num_threads();
  std::vector<decltype(run(1))> out;
  for (const int count : counts) {
    set_num_threads(count);
    out.push_back(run(count));
  }
  set_num_threads(threads);
  return out;
}

}  // namespace

TEST_CASE("sparse grad: SparseRows coalesces in order, densifies, appends and checks its input") {
  const Tensor values = from_vector(std::vector<float>{1, 2, 10, 20, 3, 4, 100, 200}, {4, 2});
  const SparseRows rows(ids_of({3, 1, 3, 0}, {4}), values, 5);
  CHECK(rows.nnz() == 4);
  CHECK(rows.shape() == Shape{5, 2});
  CHECK_FALSE(rows.is_coalesced());
  const SparseRows c = rows.coalesce();
  CHECK(c.is_coalesced());
  CHECK(c.indices().to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 1, 3});
  CHECK(c.values().to_vector<float>() == std::vector<float>{100, 200, 10, 20, 4, 6});
  CHECK(rows.to_dense().to_vector<float>() == std::vector<float>{100, 200, 10, 20, 0, 0, 4, 6, 0, 0});
  const SparseRows both = rows.append(c);
  CHECK(both.nnz() == 7);
  CHECK(both.coalesce().values().to_vector<float>() == std::vector<float>{200, 400, 20, 40, 8, 12});

  CHECK_THROWS_WITH_AS(SparseRows(ids_of({0, 5}, {2}), zeros({2, 2}), 5),
                       "SparseRows: index 5 at position 1 is out of range for 5 rows", IndexError);
  CHECK_THROWS_WITH_AS(SparseRows(ids_of({-1}, {1}), zeros({1, 2}), 5),
                       "SparseRows: index -1 at position 0 is out of range for 5 rows", IndexError);
  CHECK_THROWS_WITH_AS(SparseRows(ids_of({0, 1}, {2}), zeros({3, 2}), 5),
                       "SparseRows: expected indices (N) and values (N, D), got (2) and (3,2)", ShapeError);
  CHECK_THROWS_WITH_AS(SparseRows(zeros({2}), zeros({2, 2}), 5), "SparseRows: indices must be int64, got float32",
                       TypeError);
  CHECK_THROWS_WITH_AS(SparseRows(ids_of({2, 2}, {2}), zeros({2, 2}), 5, /*coalesced=*/true),
                       "SparseRows: coalesced indices must be strictly increasing, got 2 then 2 at position 1",
                       ValueError);
  CHECK_THROWS_WITH_AS(rows.append(SparseRows(ids_of({0}, {1}), zeros({1, 3}), 5)),
                       "SparseRows::append: rows of a (5,3) float32 table appended to a (5,2) float32 one", ShapeError);
}

TEST_CASE("sparse grad: equals the dense gradient bit for bit after coalescing, with duplicates and padding") {
  manual_seed(3);
  Pair pair(7, 4, /*pad=*/2);
  const Tensor ids = ids_of({5, 2, 5, 0, 6, 5, 2, 0, 3}, {3, 3});  // 5 three times, the padding index twice
  const Tensor w = randn({3, 3, 4});
  weighted_sum(pair.sparse(ids), w).backward();
  weighted_sum(pair.dense(ids), w).backward();
  const Tensor& table = pair.sparse->weight();
  REQUIRE(table.has_sparse_grad());
  const SparseRows g = table.sparse_grad();
  CHECK(g.nnz() == 7);  // the two padding positions are left out
  const SparseRows c = g.coalesce();
  CHECK(c.indices().to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 3, 5, 6});
  CHECK(c.to_dense().to_vector<float>() == pair.dense->weight().grad().to_vector<float>());
  CHECK(g.to_dense().to_vector<float>() == pair.dense->weight().grad().to_vector<float>());
  CHECK_THROWS_WITH_AS(table.grad(), doctest::Contains("grad: the gradient of this (7,4) tensor is row-sparse (7 rows"),
                       GraphError);
  table.zero_grad();
  CHECK_FALSE(table.has_sparse_grad());
  CHECK_FALSE(table.grad().defined());
}

TEST_CASE("sparse grad: accumulates over several backwards") {
  manual_seed(4);
  Pair pair(6, 3, std::nullopt, kFloat64);
  const std::vector<Tensor> batches{ids_of({1, 4, 1}, {3}), ids_of({4, 0}, {2}), ids_of({1}, {1})};
  for (const Tensor& ids : batches) {
    const Tensor w = randn({ids.numel(), 3}, kFloat64);
    weighted_sum(pair.sparse(ids), w).backward();
    weighted_sum(pair.dense(ids), w).backward();
  }
  const SparseRows g = pair.sparse->weight().sparse_grad();
  CHECK(g.nnz() == 6);
  CHECK(max_abs_diff(g.coalesce().to_dense(), pair.dense->weight().grad()) < 1e-14);
}

TEST_CASE("sparse grad: matches central differences in float64") {
  manual_seed(5);
  nn::Embedding emb{nn::EmbeddingOptions(4, 3).sparse(true).padding_idx(3)};
  emb->to(kFloat64);
  const Tensor ids = ids_of({1, 3, 1, 0}, {4});
  const Tensor c = randn({4, 3}, kFloat64);
  auto loss = [&] { return (tanh(emb(ids)) * c).sum(); };
  loss().backward();
  const Tensor analytic = emb->weight().sparse_grad().to_dense();
  const Tensor& table = emb->weight();
  std::vector<double> numeric;
  const double h = 1e-6;
  for (std::int64_t k = 0; k < table.numel(); ++k) {
    NoGradGuard no_grad;
    const Tensor flat = table.reshape({table.numel()});
    const double x = flat.select(0, k).item<double>();
    flat.select(0, k).fill_(x + h);
    const double up = loss().item<double>();
    flat.select(0, k).fill_(x - h);
    const double down = loss().item<double>();
    flat.select(0, k).fill_(x);
    numeric.push_back((up - down) / (2 * h));
  }
  // Rows 0 to 2 as the differences say (row 2 is unused: zero); the padding row (3) is a constant
  // by definition and gets nothing, though the loss reads it.
  const Tensor expected = from_vector(numeric, {4, 3});
  CHECK(max_abs_diff(analytic.narrow(0, 0, 3), expected.narrow(0, 0, 3)) < 1e-8);
  CHECK(expected.select(0, 3).abs().sum().item<double>() > 0.1);
  CHECK(analytic.select(0, 3).abs().sum().item<double>() == 0.0);
  CHECK(analytic.select(0, 2).abs().sum().item<double>() == 0.0);
}

TEST_CASE("sparse grad: a table used densely too gets a dense gradient") {
  manual_seed(6);
  Pair pair(5, 3, std::nullopt);
  const Tensor ids = ids_of({0, 4, 4}, {3});
  const Tensor x = randn({2, 3});
  // The same table as an embedding and as a tied output projection, in both orders.
  auto loss = [&](nn::Embedding& e) { return e(ids).sum() + matmul(x, e->weight().transpose(0, 1)).pow(2.0).sum(); };
  loss(pair.sparse).backward();
  loss(pair.dense).backward();
  CHECK_FALSE(pair.sparse->weight().has_sparse_grad());
  CHECK(max_abs_diff(pair.sparse->weight().grad(), pair.dense->weight().grad()) < 1e-6);
  // A sparse gradient left by one backward folds into the dense one of the next.
  pair.sparse->weight().zero_grad(true);
  pair.sparse(ids).sum().backward();
  REQUIRE(pair.sparse->weight().has_sparse_grad());
  matmul(x, pair.sparse->weight().transpose(0, 1)).pow(2.0).sum().backward();
  CHECK_FALSE(pair.sparse->weight().has_sparse_grad());
  CHECK(max_abs_diff(pair.sparse->weight().grad(), pair.dense->weight().grad()) < 1e-6);
}

TEST_CASE("sparse grad: what it refuses, and its post-accumulate hooks") {
  manual_seed(7);
  nn::Embedding emb{nn::EmbeddingOptions(5, 2).sparse(true)};
  const Tensor ids = ids_of({1, 2}, {2});
  CHECK_THROWS_WITH_AS(emb(ids).pow(2.0).sum().backward(Tensor(), std::nullopt, /*create_graph=*/true),
                       doctest::Contains("embedding: sparse gradients cannot be differentiated again"), GraphError);
  CHECK_THROWS_WITH_AS(autograd::grad({emb(ids).sum()}, {emb->weight()}),
                       doctest::Contains("embedding: autograd::grad returns dense gradients"), GraphError);
  CHECK_FALSE(emb->weight().has_sparse_grad());

  const Tensor base = randn({5, 2}).requires_grad_();
  CHECK_THROWS_WITH_AS(
      embedding(base * 2.0, ids, std::nullopt, /*sparse=*/true),
      "embedding: sparse gradients go to a leaf weight, but this (5,2) weight was computed by mul; use "
      "dense gradients",
      GraphError);

  int calls = 0;
  std::int64_t seen_rows = 0;
  RemovableHandle post = emb->weight().register_post_accumulate_grad_hook([&](const Tensor& w) {
    ++calls;
    seen_rows = w.sparse_grad().nnz();
  });
  emb(ids).sum().backward();
  CHECK(calls == 1);
  CHECK(seen_rows == 2);
  post.remove();

  RemovableHandle hook = emb->weight().register_hook([](const Tensor& g) { return g; });
  CHECK_THROWS_WITH_AS(emb(ids).sum().backward(), doctest::Contains("embedding: the (5,2) weight has gradient hooks"),
                       GraphError);
  hook.remove();
}

TEST_CASE("sparse grad: SGD steps only the touched rows, as the dense step does up to rounding") {
  manual_seed(8);
  Pair pair(9, 3, /*pad=*/0);
  const Tensor before = pair.sparse->weight().clone();
  const Tensor ids = ids_of({4, 0, 4, 7}, {4});
  const Tensor w = randn({4, 3});
  optim::SGD sparse_opt(pair.sparse->parameters(), optim::SGDOptions(0.5));
  optim::SGD dense_opt(pair.dense->parameters(), optim::SGDOptions(0.5));
  weighted_sum(pair.sparse(ids), w).backward();
  weighted_sum(pair.dense(ids), w).backward();
  sparse_opt.step();
  dense_opt.step();
  // Row 4 is stepped twice (once per use), the dense step once with the sum: equal up to rounding.
  CHECK(max_abs_diff(pair.sparse->weight(), pair.dense->weight()) < 1e-6);
  CHECK(pair.sparse->weight().select(0, 7).to_vector<float>() == pair.dense->weight().select(0, 7).to_vector<float>());
  for (std::int64_t row = 0; row < 9; ++row) {
    const bool touched = row == 4 || row == 7;
    const bool same =
        pair.sparse->weight().select(0, row).to_vector<float>() == before.select(0, row).to_vector<float>();
    CHECK_MESSAGE(same != touched, "row ", row);
  }
  sparse_opt.zero_grad();
  CHECK_FALSE(pair.sparse->weight().has_sparse_grad());

  optim::SGD momentum(pair.sparse->parameters(), optim::SGDOptions(0.5).momentum(0.9));
  optim::SGD decay(pair.sparse->parameters(), optim::SGDOptions(0.5).weight_decay(0.01));
  pair.sparse(ids).sum().backward();
  const Tensor kept = pair.sparse->weight().clone();
  CHECK_THROWS_WITH_AS(momentum.step(),
                       "SGD: group 0 parameter 0 (shape (9,3)) has a row-sparse gradient, but momentum keeps a dense "
                       "buffer of every row (momentum 0.9); sparse gradients need momentum 0",
                       ValueError);
  CHECK_THROWS_WITH_AS(decay.step(),
                       "SGD: group 0 parameter 0 (shape (9,3)) has a row-sparse gradient, but weight decay changes "
                       "every row (weight_decay 0.01); sparse gradients need weight_decay 0",
                       ValueError);
  CHECK(pair.sparse->weight().to_vector<float>() == kept.to_vector<float>());
}

TEST_CASE("sparse grad: dense optimisers refuse it before updating anything") {
  manual_seed(9);
  nn::Linear lin(3, 2);
  nn::Embedding emb{nn::EmbeddingOptions(4, 3).sparse(true)};
  optim::Adam adam(std::vector<optim::ParamGroup>{{lin->parameters()}, {emb->parameters()}}, optim::AdamOptions(0.1));
  (lin(emb(ids_of({1, 2}, {2}))).sum()).backward();
  const Tensor lin_before = lin->weight().clone();
  CHECK_THROWS_WITH_AS(adam.step(),
                       "Adam: group 1 parameter 0 (shape (4,3)) has a row-sparse gradient, but Adam takes dense "
                       "gradients only; step embeddings with sparse gradients with optim::SGD (no momentum or weight "
                       "decay), optim::Adagrad (no weight decay) or optim::SparseAdam",
                       ValueError);
  CHECK(lin->weight().to_vector<float>() == lin_before.to_vector<float>());
  optim::SparseAdam sparse_adam(lin->parameters(), optim::SparseAdamOptions(0.1));
  CHECK_THROWS_WITH_AS(sparse_adam.step(),
                       "SparseAdam: group 0 parameter 0 (shape (2,3)) has a dense gradient, but SparseAdam takes "
                       "row-sparse gradients only (embeddings with sparse gradients); step dense parameters with "
                       "optim::Adam",
                       ValueError);
  CHECK_THROWS_WITH_AS(optim::SparseAdam(std::vector<optim::ParamGroup>{{emb->parameters(), std::nullopt, 0.1}},
                                         optim::SparseAdamOptions()),
                       "SparseAdam: group 0 has weight_decay 0.1; SparseAdam has no weight decay", ValueError);
  CHECK_THROWS_WITH_AS(optim::SparseAdam(emb->parameters(), optim::SparseAdamOptions().betas({1.0, 0.999})),
                       "SparseAdam: invalid beta1 1 (must be in [0, 1))", ValueError);
}

TEST_CASE("sparse grad: SparseAdam follows its formula at touched rows and leaves the rest") {
  manual_seed(10);
  const std::int64_t v = 6, d = 2;
  nn::Embedding emb{nn::EmbeddingOptions(v, d).sparse(true)};
  emb->to(kFloat64);
  const double lr = 0.05, beta1 = 0.8, beta2 = 0.9, eps = 1e-6;
  optim::SparseAdam opt(emb->parameters(), optim::SparseAdamOptions(lr).betas({beta1, beta2}).eps(eps));
  std::vector<double> p = emb->weight().to_vector<double>(), m(v * d, 0.0), s(v * d, 0.0);
  const std::vector<Tensor> batches{ids_of({1, 3, 1}, {3}), ids_of({3}, {1}), ids_of({5, 1}, {2})};
  int t = 0;
  for (const Tensor& ids : batches) {
    const Tensor w = randn({ids.numel(), d}, kFloat64);
    weighted_sum(emb(ids), w).backward();
    const SparseRows g = emb->weight().sparse_grad().coalesce();
    ++t;
    const double step_size = lr * std::sqrt(1 - std::pow(beta2, t)) / (1 - std::pow(beta1, t));
    const std::vector<std::int64_t> rows = g.indices().to_vector<std::int64_t>();
    const std::vector<double> gv = g.values().to_vector<double>();
    for (std::size_t k = 0; k < rows.size(); ++k) {
      for (std::int64_t j = 0; j < d; ++j) {
        const std::size_t at = static_cast<std::size_t>(rows[k] * d + j);
        const double gj = gv[k * d + static_cast<std::size_t>(j)];
        m[at] = beta1 * m[at] + (1 - beta1) * gj;
        s[at] = beta2 * s[at] + (1 - beta2) * gj * gj;
        p[at] -= step_size * m[at] / (std::sqrt(s[at]) + eps);
      }
    }
    const std::vector<double> before = emb->weight().to_vector<double>();
    opt.step();
    opt.zero_grad();
    const std::vector<double> after = emb->weight().to_vector<double>();
    for (std::int64_t r = 0; r < v; ++r) {
      const bool touched = std::count(rows.begin(), rows.end(), r) > 0;
      for (std::int64_t j = 0; j < d; ++j) {
        const std::size_t at = static_cast<std::size_t>(r * d + j);
        if (touched) CHECK(std::abs(after[at] - p[at]) < 1e-12);
        else CHECK(after[at] == before[at]);  // bitwise: never written
      }
    }
  }
  // Row 0, 2 and 4 were never touched: their moments are still zero.
  const NamedTensors state = opt.state_tensors();
  for (const auto& [name, tensor] : state) {
    if (name != "group0.param0.exp_avg") continue;
    for (std::int64_t r : {0, 2, 4}) CHECK(tensor.select(0, r).abs().sum().item<double>() == 0.0);
  }

  // Resumed from its state, a second optimiser takes the same next step.
  nn::Embedding copy{nn::EmbeddingOptions(v, d).sparse(true)};
  copy->to(kFloat64);
  {
    NoGradGuard no_grad;
    copy->weight().copy_(emb->weight());
  }
  optim::SparseAdam resumed(copy->parameters(), optim::SparseAdamOptions(lr).betas({beta1, beta2}).eps(eps));
  resumed.load_state(opt.state_tensors());
  const Tensor ids = ids_of({1, 2}, {2});
  emb(ids).sum().backward();
  copy(ids).sum().backward();
  opt.step();
  resumed.step();
  CHECK(emb->weight().to_vector<double>() == copy->weight().to_vector<double>());
}

TEST_CASE("sparse grad: SGD's lazy step on a gradient the pool splits is the loop's on 1 2 and 3 threads") {
  // 1200 rows of 40 (above the split at 32,768 values) over a table of 300: every row several times.
  const std::int64_t v = 300, d = 40;
  const auto results = on_threads({1, 2, 3}, [&](int) {
    manual_seed(5);
    nn::Embedding emb{nn::EmbeddingOptions(v, d).sparse(true)};
    optim::SGD opt(emb->parameters(), optim::SGDOptions(0.1));
    std::vector<std::int64_t> ids;
    for (std::int64_t i = 0; i < 1200; ++i) ids.push_back((i * i + 3 * i) % v);
    weighted_sum(emb(from_vector(ids, {1200})), randn({1200, d})).backward();
    std::vector<float> reference = emb->weight().to_vector<float>();
    const SparseRows& g = emb->weight().sparse_grad();
    const std::vector<std::int64_t> rows = g.indices().to_vector<std::int64_t>();
    const std::vector<float> values = g.values().to_vector<float>();
    for (std::size_t k = 0; k < rows.size(); ++k)
      for (std::int64_t j = 0; j < d; ++j)
        reference[static_cast<std::size_t>(rows[k] * d + j)] -= 0.1f * values[k * d + static_cast<std::size_t>(j)];
    opt.step();
    const std::vector<float> got = emb->weight().to_vector<float>();
    CHECK(worst_gap(got, reference) <= 1e-6);
    return got;
  });
  CHECK(results[0] == results[1]);
  CHECK(results[0] == results[2]);
}

TEST_CASE("sparse grad: SparseAdam's vector loop matches the formula on wide rows, the same on 1 and 2 threads") {
  // 37 columns: whole vector batches and a tail in every row; 300 of 2000 rows touched, some twice.
  const std::int64_t v = 2000, d = 37;
  const auto results = on_threads({1, 2}, [&](int) {
    manual_seed(12);
    nn::Embedding emb{nn::EmbeddingOptions(v, d).sparse(true)};
    optim::SparseAdam opt(emb->parameters(), optim::SparseAdamOptions(0.01));
    std::vector<std::int64_t> ids;
    for (std::int64_t i = 0; i < 300; ++i) ids.push_back((i * 37 + 11) % 1500);
    ids.push_back(5);
    ids.push_back(5);
    const Tensor index = from_vector(ids, {static_cast<std::int64_t>(ids.size())});
    std::vector<float> reference = emb->weight().to_vector<float>();
    std::vector<float> m(static_cast<std::size_t>(v * d), 0.0f), s(m.size(), 0.0f);
    for (int t = 1; t <= 3; ++t) {
      const Tensor w = randn({index.numel(), d});
      weighted_sum(emb(index), w).backward();
      const SparseRows g = emb->weight().sparse_grad().coalesce();
      const double step_size = 0.01 * std::sqrt(1 - std::pow(0.999, t)) / (1 - std::pow(0.9, t));
      const std::vector<std::int64_t> rows = g.indices().to_vector<std::int64_t>();
      const std::vector<float> gv = g.values().to_vector<float>();
      for (std::size_t k = 0; k < rows.size(); ++k)
        for (std::int64_t j = 0; j < d; ++j) {
          const std::size_t at = static_cast<std::size_t>(rows[k] * d + j);
          const float gj = gv[k * d + static_cast<std::size_t>(j)];
          m[at] = m[at] + (gj - m[at]) * (1.0f - 0.9f);
          s[at] = s[at] + (gj * gj - s[at]) * static_cast<float>(1.0 - 0.999);
          reference[at] += static_cast<float>(-step_size) * (m[at] / (std::sqrt(s[at]) + 1e-8f));
        }
      opt.step();
      opt.zero_grad();
    }
    const std::vector<float> got = emb->weight().to_vector<float>();
    CHECK(worst_gap(got, reference) <= 1e-6);
    return got;
  });
  CHECK(results[0] == results[1]);
}

TEST_CASE("sparse grad: clip_grad_norm clips the coalesced rows as it clips the dense gradient") {
  manual_seed(11);
  Pair pair(8, 3, std::nullopt, kFloat64);
  const Tensor ids = ids_of({2, 6, 2, 2}, {4});
  const Tensor w = randn({4, 3}, kFloat64);
  weighted_sum(pair.sparse(ids), w).backward();
  weighted_sum(pair.dense(ids), w).backward();
  const double sparse_norm = optim::clip_grad_norm(pair.sparse->parameters(), 0.1);
  const double dense_norm = optim::clip_grad_norm(pair.dense->parameters(), 0.1);
  CHECK(std::abs(sparse_norm - dense_norm) < 1e-12);
  CHECK(pair.sparse->weight().sparse_grad().is_coalesced());
  CHECK(max_abs_diff(pair.sparse->weight().sparse_grad().to_dense(), pair.dense->weight().grad()) < 1e-15);
}

namespace {

// Two leaf copies each of a weight and of queries: one pair for the sparse path, one for the dense.
std::array<Tensor, 4> leaf_copies(const Tensor& weight, const Tensor& queries) {
  return {weight.clone().requires_grad_(), weight.clone().requires_grad_(), queries.clone().requires_grad_(),
          queries.clone().requires_grad_()};
}

}  // namespace

TEST_CASE("sparse grad: embedding_dot equals the gathered product, gradchecks, and its sparse gradient is the dense") {
  Generator gen(12);
  const Tensor weight = randn({6, 4}, gen, kFloat64);
  const Tensor ids = ids_of({1, 5, 1, 0, 2, 2}, {2, 3});
  const Tensor queries = randn({2, 4}, gen, kFloat64);
  const Tensor composite = (embedding(weight, ids) * queries.unsqueeze(1)).sum({2});
  CHECK(max_abs_diff(embedding_dot(weight, ids, queries), composite) < 1e-14);

  // Both inputs, first and second order (the second through the taped backward).
  tapegrad::testing::check_gradients([&](const TensorList& in) { return embedding_dot(in[0], ids, in[1]).pow(2.0); },
                                     {weight, queries});

  // Sparse: the weight's rows (one per index, duplicates kept) sum to the dense gradient.
  const auto [w_sparse, w_dense, q_sparse, q_dense] = leaf_copies(weight, queries);
  const Tensor c = randn({2, 3}, gen, kFloat64);
  (tanh(embedding_dot(w_sparse, ids, q_sparse, /*sparse=*/true)) * c).sum().backward();
  (tanh(embedding_dot(w_dense, ids, q_dense)) * c).sum().backward();
  REQUIRE(w_sparse.has_sparse_grad());
  CHECK(w_sparse.sparse_grad().nnz() == 6);
  CHECK(max_abs_diff(w_sparse.sparse_grad().to_dense(), w_dense.grad()) < 1e-14);
  CHECK(max_abs_diff(q_sparse.grad(), q_dense.grad()) < 1e-14);

  CHECK_THROWS_WITH_AS(embedding_dot(weight, ids_of({6}, {1, 1}), queries.narrow(0, 0, 1)),
                       "embedding_dot: index 6 is out of range for 6 embeddings", IndexError);
  CHECK_THROWS_WITH_AS(embedding_dot(weight, ids, randn({3, 4}, gen, kFloat64)),
                       "embedding_dot: expected weight (V, D), indices (B, N) and queries (B, D), got (6,4), (2,3) and "
                       "(3,4)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(embedding_dot(weight, ids, queries.to(kFloat32)),
                       "embedding_dot: weight is float64 but queries are float32", TypeError);
}

TEST_CASE("sparse grad: embedding_dot's padding index scores 0 and sends no gradient, dense or sparse") {
  Generator gen(13);
  const Tensor weight = randn({6, 4}, gen, kFloat64);
  // Row 5 pads the shorter first row: its entries score 0 and weigh nothing, the others as without padding.
  const Tensor ids = ids_of({1, 5, 5, 0, 2, 2}, {2, 3});
  const Tensor queries = randn({2, 4}, gen, kFloat64);
  const Tensor not_pad = ne(ids, 5.0);
  const Tensor composite = where(not_pad, (embedding(weight, ids) * queries.unsqueeze(1)).sum({2}), 0.0);
  CHECK(max_abs_diff(embedding_dot(weight, ids, queries, false, 5), composite) < 1e-14);
  tapegrad::testing::check_gradients(
      [&](const TensorList& in) { return embedding_dot(in[0], ids, in[1], false, 5).pow(2.0) + in[1].sum(); },
      {weight, queries});

  const auto [w_sparse, w_dense, q_sparse, q_dense] = leaf_copies(weight, queries);
  const Tensor c = randn({2, 3}, gen, kFloat64);
  (tanh(embedding_dot(w_sparse, ids, q_sparse, /*sparse=*/true, 5)) * c).sum().backward();
  (tanh(where(ne(ids, 5.0), (embedding(w_dense, ids) * q_dense.unsqueeze(1)).sum({2}), 0.0)) * c).sum().backward();
  REQUIRE(w_sparse.has_sparse_grad());
  CHECK(w_sparse.sparse_grad().nnz() == 4);  // the padding's two entries give no row
  CHECK(max_abs_diff(w_sparse.sparse_grad().to_dense(), w_dense.grad()) < 1e-14);
  CHECK(max_abs_diff(q_sparse.grad(), q_dense.grad()) < 1e-14);
  // The dense kernel's gradient: the same, and exactly 0 on the padding row.
  const Tensor w_kernel = weight.clone().requires_grad_();
  (tanh(embedding_dot(w_kernel, ids, queries, /*sparse=*/false, 5)) * c).sum().backward();
  CHECK(max_abs_diff(w_kernel.grad(), w_dense.grad()) < 1e-14);
  CHECK(max_abs_diff(w_kernel.grad().select(0, 5), zeros({4}, kFloat64)) == 0.0);

  CHECK_THROWS_WITH_AS(embedding_dot(weight, ids, queries, false, 6),
                       "embedding_dot: padding_idx 6 is out of range for 6 embeddings", IndexError);
}

TEST_CASE("sparse grad: embedding_dot's scores four rows at a time equal the gathered product at every width") {
  // Rows of 11 positions with padding (row 9) among them: groups of four, a rest of fewer, and the
  // widths around the vector lanes (a rest of 1 to 15 elements after the batches).
  Generator gen(14);
  const Tensor ids = ids_of({1, 9, 3, 4, 4, 9, 0, 8, 2, 7, 6,  //
                             9, 9, 5, 1, 2, 3, 9, 4, 5, 6, 7,  //
                             0, 1, 2, 3, 9, 9, 9, 9, 9, 9, 9},
                            {3, 11});
  const Tensor not_pad = ne(ids, 9.0);
  for (const DType dtype : {kFloat32, kFloat64})
    for (const std::int64_t dim : {1, 3, 4, 15, 16, 17, 37, 100}) {
      INFO(dtype_name(dtype) << ", width " << dim);
      const Tensor weight = randn({10, dim}, gen, dtype), queries = randn({3, dim}, gen, dtype);
      const Tensor composite = where(not_pad, (embedding(weight, ids) * queries.unsqueeze(1)).sum({2}), 0.0);
      const double tolerance = dtype == kFloat32 ? 1e-5 * static_cast<double>(dim) : 1e-13;
      CHECK(max_abs_diff(embedding_dot(weight, ids, queries, false, 9), composite) < tolerance);
    }
}

// sum_repeated: a row per distinct index, in the order of first appearance, each the dense
// gradient's row bit for bit; on a batch small enough for one thread and on one the pool splits.
TEST_CASE("sparse grad: embedding_dot with sum_repeated leaves one row per distinct index equal to the dense") {
  Generator gen(33);
  {
    const Tensor weight = randn({6, 4}, gen, kFloat64);
    const Tensor ids = ids_of({2, 5, 0, 2, 2, 4, 0, 5, 3, 2, 5, 5}, {3, 4});  // 5 is padding
    const Tensor queries = randn({3, 4}, gen, kFloat64);
    const auto [w_summed, w_dense, q_summed, q_dense] = leaf_copies(weight, queries);
    const Tensor c = randn({3, 4}, gen, kFloat64);
    (tanh(embedding_dot(w_summed, ids, q_summed, /*sparse=*/true, 5, /*sum_repeated=*/true)) * c).sum().backward();
    (tanh(embedding_dot(w_dense, ids, q_dense, /*sparse=*/false, 5)) * c).sum().backward();
    REQUIRE(w_summed.has_sparse_grad());
    CHECK(w_summed.sparse_grad().indices().to_vector<std::int64_t>() == std::vector<std::int64_t>{2, 0, 4, 3});
    CHECK(max_abs_diff(w_summed.sparse_grad().to_dense(), w_dense.grad()) == 0.0);
    CHECK(max_abs_diff(q_summed.grad(), q_dense.grad()) == 0.0);
    // A second backward appends its own distinct rows.
    (embedding_dot(w_summed, ids, q_summed.detach(), true, 5, true) * c).sum().backward();
    CHECK(w_summed.sparse_grad().nnz() == 8);
  }
  {
    const Tensor weight = randn({30, 40}, gen, kFloat32);
    std::vector<std::int64_t> values(64 * 20);
    for (std::size_t k = 0; k < values.size(); ++k) values[k] = static_cast<std::int64_t>((k * k + 7 * k) % 30);
    const Tensor ids = ids_of(values, {64, 20});  // 1280 positions x 40: the pool splits the rows
    const Tensor queries = randn({64, 40}, gen, kFloat32);
    const auto [w_summed, w_dense, q_summed, q_dense] = leaf_copies(weight, queries);
    const Tensor c = randn({64, 20}, gen, kFloat32);
    (embedding_dot(w_summed, ids, q_summed, true, std::nullopt, true) * c).sum().backward();
    (embedding_dot(w_dense, ids, q_dense) * c).sum().backward();
    const std::int64_t distinct =
        static_cast<std::int64_t>(std::set<std::int64_t>(values.begin(), values.end()).size());
    CHECK(w_summed.sparse_grad().nnz() == distinct);
    CHECK(max_abs_diff(w_summed.sparse_grad().to_dense(), w_dense.grad()) == 0.0);
  }
}

// The count of distinct indices behind sum_repeated on a call with many of them (the probe table
// collides and grows), then a small call (the table, kept per thread, is reused), then one that is
// all padding; split by the pool on 2 and 3 threads and not on 1, the same bits every time.
TEST_CASE("sparse grad: embedding_dot's sum_repeated holds on many indices few and none on 1 2 and 3 threads") {
  const std::int64_t v = 5000, d = 40;
  const auto results = on_threads({1, 2, 3}, [&](int) {
    Generator gen(8);
    const Tensor weight = randn({v, d}, gen, kFloat32);
    std::vector<Tensor> grads;
    for (const std::int64_t batch : {60, 3, 2}) {
      std::vector<std::int64_t> values(static_cast<std::size_t>(batch * 40));
      for (std::size_t k = 0; k < values.size(); ++k)
        values[k] = batch == 2 ? v - 1 : static_cast<std::int64_t>((k * 7919 + k * k) % static_cast<std::size_t>(v));
      const Tensor ids = ids_of(values, {batch, 40});  // v - 1 is padding; the last call has nothing else
      const Tensor queries = randn({batch, d}, gen, kFloat32);
      const auto [w_summed, w_dense, q_summed, q_dense] = leaf_copies(weight, queries);
      const Tensor c = randn({batch, 40}, gen, kFloat32);
      (embedding_dot(w_summed, ids, q_summed, true, v - 1, true) * c).sum().backward();
      (embedding_dot(w_dense, ids, q_dense, false, v - 1) * c).sum().backward();
      std::set<std::int64_t> distinct(values.begin(), values.end());
      distinct.erase(v - 1);
      REQUIRE(w_summed.has_sparse_grad());
      CHECK(w_summed.sparse_grad().nnz() == static_cast<std::int64_t>(distinct.size()));
      CHECK(max_abs_diff(w_summed.sparse_grad().to_dense(), w_dense.grad()) == 0.0);
      grads.push_back(w_summed.sparse_grad().values());
    }
    return grads;
  });
  for (std::size_t i = 0; i < results[0].size(); ++i) {
    CHECK(max_abs_diff(results[0][i], results[1][i]) == 0.0);
    CHECK(max_abs_diff(results[0][i], results[2][i]) == 0.0);
  }
}

// The kernels sum a row's terms in registers in stretches of four SIMD batches, then of one, then
// element by element: widths below, between and above those stretches, in both float types.
TEST_CASE("sparse grad: embedding_dot's query gradient and embedding_bag_sum's sums hold at every width") {
  Generator gen(21);
  const Tensor ids = ids_of({1, 5, 1, 0, 2, 2, 3, 5, 4, 0, 5, 1}, {3, 4});  // row 5 is padding below
  for (const DType dtype : {kFloat32, kFloat64}) {
    const double tolerance = dtype == kFloat32 ? 1e-5 : 1e-12;
    for (const std::int64_t dim : {1, 3, 8, 16, 43, 64, 100, 137}) {
      CAPTURE(dim);
      const Tensor weight = randn({6, dim}, gen, dtype);
      const Tensor queries = randn({3, dim}, gen, dtype).requires_grad_();
      const Tensor composite_queries = queries.detach().clone().requires_grad_();
      const Tensor c = randn({3, 4}, gen, dtype);
      (embedding_dot(weight, ids, queries, /*sparse=*/false, 5) * c).sum().backward();
      const Tensor kept = ne(ids, 5.0).to(dtype);
      ((embedding(weight, ids) * composite_queries.unsqueeze(1)).sum({2}) * kept * c).sum().backward();
      CHECK(max_abs_diff(queries.grad(), composite_queries.grad()) < tolerance);

      const Tensor flat = ids.reshape({12});
      const Tensor scale = randn({12}, gen, dtype);
      const Tensor sums = embedding_bag_sum(weight, flat, {0, 5, 5, 9}, scale);  // bags of 5, 0, 4 and 3
      const Tensor rows = embedding(weight, flat) * scale.unsqueeze(1);
      const Tensor expected = stack({rows.narrow(0, 0, 5).sum({0}), zeros({dim}, dtype), rows.narrow(0, 5, 4).sum({0}),
                                     rows.narrow(0, 9, 3).sum({0})},
                                    0);
      CHECK(max_abs_diff(sums, expected) < tolerance);
    }
  }
}
