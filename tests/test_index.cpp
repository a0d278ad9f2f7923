// Indexing ops: index_select, gather, scatter_add, embedding, topk, one_hot.
// Forward values were worked by hand and cross-checked with PyTorch 1.13 (except where noted);
// gradients are checked against hand-worked numbers (repeated indices must accumulate) and with
// gradcheck and gradgradcheck in float64, on contiguous and transposed inputs.

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "tapegrad/autograd/autograd.h"
#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::check_gradients;

namespace {

Tensor ints(const std::vector<std::int64_t>& values, const Shape& shape) { return from_vector(values, shape); }

std::vector<float> floats(const Tensor& t) { return t.to_vector<float>(); }
std::vector<std::int64_t> longs(const Tensor& t) { return t.to_vector<std::int64_t>(); }

// x[i][j] = 4 i + j: [[0,1,2,3],[4,5,6,7],[8,9,10,11]]
Tensor iota34() { return arange(0.0, 12.0, 1.0, kFloat32).reshape({3, 4}); }

// 15 distinct values with gaps of 1, so topk's selection is far from any tie at gradcheck's eps.
Tensor distinct35() {
  return from_vector(std::vector<double>{3, 14, 1, 9, 6, 11, 0, 7, 12, 4, 2, 8, 13, 5, 10}, {3, 5});
}

}  // namespace

// ---------------------------------------------------------------- index_select
TEST_CASE("index: index_select picks rows and columns, repeats allowed") {
  Tensor x = iota34();
  Tensor rows = index_select(x, 0, ints({2, 0, 2}, {3}));
  CHECK(rows.shape() == Shape{3, 4});
  CHECK(floats(rows) == std::vector<float>{8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11});
  Tensor cols = index_select(x, -1, ints({3, 1}, {2}));
  CHECK(cols.shape() == Shape{3, 2});
  CHECK(floats(cols) == std::vector<float>{3, 1, 7, 5, 11, 9});
  // Int64 values are copied too (e.g. shuffling a batch of token ids).
  CHECK(longs(index_select(arange(5), 0, ints({4, 1}, {2}))) == std::vector<std::int64_t>{4, 1});
  // An empty index gives an empty axis.
  CHECK(index_select(x, 0, ints({}, {0})).shape() == Shape{0, 4});
}

TEST_CASE("index: index_select reads a transposed view through its strides") {
  Tensor xt = iota34().transpose(0, 1);  // (4,3): [[0,4,8],[1,5,9],[2,6,10],[3,7,11]]
  REQUIRE_FALSE(xt.is_contiguous());
  CHECK(floats(index_select(xt, 0, ints({1, 3}, {2}))) == std::vector<float>{1, 5, 9, 3, 7, 11});
  CHECK(floats(index_select(xt, 1, ints({2, 0}, {2}))) == std::vector<float>{8, 0, 9, 1, 10, 2, 11, 3});
  // A strided index (every other element of [2, 9, 0, 9]).
  Tensor strided_index = ints({2, 9, 0, 9}, {4}).slice(0, 0, 4, 2);
  CHECK(floats(index_select(xt, 1, strided_index)) == std::vector<float>{8, 0, 9, 1, 10, 2, 11, 3});
}

TEST_CASE("index: index_select backward accumulates repeated indices") {
  Tensor x = tensor({{1, 2}, {3, 4}, {5, 6}}).requires_grad_();
  Tensor y = index_select(x, 0, ints({2, 0, 2}, {3}));
  (y * tensor({{1, 2}, {3, 4}, {5, 6}})).sum().backward();
  // Row 2 was picked twice: it collects upstream rows 0 and 2; row 1 was never picked.
  CHECK(floats(x.grad()) == std::vector<float>{3, 4, 0, 0, 6, 8});
}

TEST_CASE("index: index_select gradcheck, contiguous and transposed") {
  Generator gen(1);
  const Tensor index = ints({3, 0, 3, 1}, {4});
  auto along1 = [&](const TensorList& x) { return index_select(x[0], 1, index); };
  check_gradients(along1, {randn({3, 4}, gen, kFloat64)});
  auto transposed = [&](const TensorList& x) { return index_select(x[0].transpose(0, 1), 1, index); };
  check_gradients(transposed, {randn({4, 3}, gen, kFloat64)});
  auto along0 = [&](const TensorList& x) { return index_select(x[0].transpose(0, 1), 0, ints({2, 2, 0}, {3})); };
  check_gradients(along0, {randn({4, 3}, gen, kFloat64)});
}

TEST_CASE("index: index_select errors") {
  Tensor x = iota34();
  CHECK_THROWS_WITH_AS(index_select(x, 0, ints({0, 3}, {2})),
                       "index_select: index 3 is out of range for axis 0 of size 3", IndexError);
  CHECK_THROWS_WITH_AS(index_select(x, 1, ints({-1}, {1})),
                       "index_select: index -1 is out of range for axis 1 of size 4", IndexError);
  CHECK_THROWS_WITH_AS(index_select(x, 0, tensor({0, 1})), "index_select: index must be an int64 tensor, got float32",
                       TypeError);
  CHECK_THROWS_WITH_AS(index_select(x, 0, ints({0, 1}, {1, 2})), "index_select: index must be 1-D, got shape (1,2)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(index_select(x, 2, ints({0}, {1})),
                       "index_select: axis 2 is out of range for a tensor of rank 2", IndexError);
}

// ---------------------------------------------------------------- gather
TEST_CASE("index: gather along each axis") {
  Tensor x = tensor({{1, 2, 3}, {4, 5, 6}});
  // out[i][j] = x[i][index[i][j]]
  Tensor along1 = gather(x, 1, ints({2, 0, 1, 1}, {2, 2}));
  CHECK(along1.shape() == Shape{2, 2});
  CHECK(floats(along1) == std::vector<float>{3, 1, 5, 5});
  // out[i][j] = x[index[i][j]][j]; index may be shorter than x along the gather axis.
  Tensor along0 = gather(x, 0, ints({1, 0, 1}, {1, 3}));
  CHECK(along0.shape() == Shape{1, 3});
  CHECK(floats(along0) == std::vector<float>{4, 2, 6});
  // ... and off the gather axis too (only the first column of rows here).
  CHECK(floats(gather(x, 1, ints({2}, {1, 1}))) == std::vector<float>{3});
}

TEST_CASE("index: gather reads a transposed view through its strides") {
  Tensor xt = tensor({{1, 2, 3}, {4, 5, 6}}).transpose(0, 1);  // (3,2): [[1,4],[2,5],[3,6]]
  CHECK(floats(gather(xt, 0, ints({2, 0, 1, 2}, {2, 2}))) == std::vector<float>{3, 4, 2, 6});
  // A transposed index: index^T = [[2,1],[0,2]]
  Tensor index_t = ints({2, 0, 1, 2}, {2, 2}).transpose(0, 1);
  CHECK(floats(gather(xt, 0, index_t)) == std::vector<float>{3, 5, 1, 6});
}

TEST_CASE("index: gather backward accumulates repeated indices") {
  Tensor x = tensor({{1, 2, 3}, {4, 5, 6}}).requires_grad_();
  Tensor y = gather(x, 1, ints({2, 0, 1, 1}, {2, 2}));
  (y * tensor({{1, 2}, {3, 4}})).sum().backward();
  CHECK(floats(x.grad()) == std::vector<float>{2, 0, 1, 0, 7, 0});
}

TEST_CASE("index: gather gradcheck, contiguous and transposed") {
  Generator gen(2);
  const Tensor index0 = ints({2, 0, 2, 1, 2, 2, 0, 1}, {2, 4});
  auto along0 = [&](const TensorList& x) { return gather(x[0], 0, index0); };
  check_gradients(along0, {randn({3, 4}, gen, kFloat64)});
  const Tensor index1 = ints({3, 3, 0, 1, 2, 3}, {3, 2});
  auto transposed = [&](const TensorList& x) { return gather(x[0].transpose(0, 1), 1, index1); };
  check_gradients(transposed, {randn({4, 3}, gen, kFloat64)});
}

TEST_CASE("index: gather errors") {
  Tensor x = tensor({{1, 2, 3}, {4, 5, 6}});
  CHECK_THROWS_WITH_AS(gather(x, 1, ints({0, 1}, {2})),
                       "gather: index has rank 1 but x has rank 2 (shapes (2) and (2,3))", ShapeError);
  CHECK_THROWS_WITH_AS(
      gather(x, 1, ints({0, 1, 2}, {3, 1})),
      "gather: index of shape (3,1) is larger than x of shape (2,3) at axis 0 (only axis 1 may differ)", ShapeError);
  CHECK_THROWS_WITH_AS(gather(x, 1, ints({0, 3}, {2, 1})), "gather: index 3 is out of range for axis 1 of size 3",
                       IndexError);
  CHECK_THROWS_WITH_AS(gather(x, 0, ints({-1}, {1, 1})), "gather: index -1 is out of range for axis 0 of size 2",
                       IndexError);
  CHECK_THROWS_WITH_AS(gather(x, 1, tensor({{0}, {1}})), "gather: index must be an int64 tensor, got float32",
                       TypeError);
}

// ---------------------------------------------------------------- scatter_add
TEST_CASE("index: scatter_add adds src at the index, repeats accumulating") {
  // Axis 1: row 0 gets 1 and 3 at column 0 and 2 at column 2; row 1 gets 4 + 5 + 6 at column 1.
  Tensor along1 = scatter_add(ones({2, 3}), 1, ints({0, 2, 0, 1, 1, 1}, {2, 3}), tensor({{1, 2, 3}, {4, 5, 6}}));
  CHECK(floats(along1) == std::vector<float>{5, 1, 3, 1, 16, 1});
  Tensor along0 = scatter_add(zeros({3, 2}), 0, ints({2, 0, 2, 1}, {2, 2}), tensor({{1, 2}, {3, 4}}));
  CHECK(floats(along0) == std::vector<float>{0, 2, 0, 4, 4, 0});
  // Int64 counts, e.g. tokens routed to each expert.
  CHECK(longs(scatter_add(zeros({4}, kInt64), 0, ints({1, 3, 1, 1}, {4}), ones({4}, kInt64))) ==
        std::vector<std::int64_t>{0, 3, 0, 1});
  // x is not modified.
  Tensor x = zeros({3});
  scatter_add(x, 0, ints({1}, {1}), ones({1}));
  CHECK(floats(x) == std::vector<float>{0, 0, 0});
}

TEST_CASE("index: scatter_add on transposed x and src") {
  // x^T = [[0,1],[10,11],[20,21]] (3,2); src^T = [[1,2],[3,4]] (2,2)
  Tensor xt = tensor({{0, 10, 20}, {1, 11, 21}}).transpose(0, 1);
  Tensor srct = tensor({{1, 3}, {2, 4}}).transpose(0, 1);
  Tensor out = scatter_add(xt, 0, ints({2, 0, 2, 1}, {2, 2}), srct);
  // out[2][0] += 1, out[0][1] += 2, out[2][0] += 3, out[1][1] += 4
  CHECK(floats(out) == std::vector<float>{0, 3, 10, 15, 24, 21});
}

TEST_CASE("index: scatter_add gradients for x and src") {
  Tensor x = zeros({2, 3}).requires_grad_();
  Tensor src = tensor({{1, 2, 3}, {4, 5, 6}}).requires_grad_();
  Tensor out = scatter_add(x, 1, ints({0, 2, 0, 1, 1, 1}, {2, 3}), src);
  Tensor weights = tensor({{1, 2, 3}, {4, 5, 6}});
  (out * weights).sum().backward();
  CHECK(floats(x.grad()) == std::vector<float>{1, 2, 3, 4, 5, 6});  // the identity
  // src[i][j] landed at column index[i][j]: its gradient is weights[i][index[i][j]].
  CHECK(floats(src.grad()) == std::vector<float>{1, 3, 1, 5, 5, 5});
}

TEST_CASE("index: scatter_add uses only the index-shaped corner of a larger src") {
  // PyTorch 1.13 computes this forward but its backward rejects the shapes; here the unused
  // part of src gets a zero gradient (worked by hand).
  Tensor x = zeros({2, 3}).requires_grad_();
  Tensor src = tensor({{5, 6}, {7, 8}}).requires_grad_();
  Tensor out = scatter_add(x, 1, ints({1}, {1, 1}), src);
  CHECK(floats(out) == std::vector<float>{0, 5, 0, 0, 0, 0});
  (out * arange(0.0, 6.0, 1.0).reshape({2, 3})).sum().backward();
  CHECK(floats(src.grad()) == std::vector<float>{1, 0, 0, 0});
  CHECK(floats(x.grad()) == std::vector<float>{0, 1, 2, 3, 4, 5});
}

TEST_CASE("index: scatter_add gradcheck for x and src, contiguous and transposed") {
  Generator gen(3);
  const Tensor index = ints({2, 0, 2, 1, 2, 2, 0, 1}, {2, 4});
  auto plain = [&](const TensorList& x) { return scatter_add(x[0], 0, index, x[1]); };
  check_gradients(plain, {randn({3, 4}, gen, kFloat64), randn({2, 4}, gen, kFloat64)});
  auto transposed = [&](const TensorList& x) {
    return scatter_add(x[0].transpose(0, 1), 0, index, x[1].transpose(0, 1));
  };
  check_gradients(transposed, {randn({4, 3}, gen, kFloat64), randn({4, 2}, gen, kFloat64)});
  auto larger_src = [&](const TensorList& x) { return scatter_add(x[0], 1, ints({3, 0, 3, 1}, {2, 2}), x[1]); };
  check_gradients(larger_src, {randn({3, 4}, gen, kFloat64), randn({3, 5}, gen, kFloat64)});
}

TEST_CASE("index: scatter_add errors") {
  CHECK_THROWS_WITH_AS(scatter_add(zeros({2, 3}), 1, ints({3}, {1, 1}), ones({1, 1})),
                       "scatter_add: index 3 is out of range for axis 1 of size 3", IndexError);
  CHECK_THROWS_WITH_AS(scatter_add(zeros({2, 3}), 1, ints({0}, {1, 1}), ones({1, 1}, kFloat64)),
                       "scatter_add: x is float32 but src is float64", TypeError);
  CHECK_THROWS_WITH_AS(scatter_add(zeros({2, 3}), 1, tensor({{0}}), ones({1, 1})),
                       "scatter_add: index must be an int64 tensor, got float32", TypeError);
  CHECK_THROWS_WITH_AS(scatter_add(zeros({2, 3}), 1, ints({0, 1}, {1, 2}), ones({1, 1})),
                       "scatter_add: index of shape (1,2) is larger than src of shape (1,1) at axis 1", ShapeError);
  CHECK_THROWS_WITH_AS(scatter_add(zeros({2, 3}), 1, ints({0}, {1}), ones({1})),
                       "scatter_add: index has rank 1 but x has rank 2 (shapes (1) and (2,3))", ShapeError);
}

// ---------------------------------------------------------------- embedding
namespace {
// Row i of the table is [10 i, 10 i + 1, 10 i + 2].
Tensor table53() { return arange(0.0, 15.0, 1.0).reshape({5, 3}) + arange(0.0, 5.0, 1.0).reshape({5, 1}) * 7.0; }
}  // namespace

TEST_CASE("index: embedding looks up rows for indices of any shape") {
  Tensor w = table53();
  REQUIRE(floats(w.select(0, 4)) == std::vector<float>{40, 41, 42});
  Tensor out = embedding(w, ints({4, 0, 4, 2}, {2, 2}));
  CHECK(out.shape() == Shape{2, 2, 3});
  CHECK(floats(out) == std::vector<float>{40, 41, 42, 0, 1, 2, 40, 41, 42, 20, 21, 22});
  // A 0-d index gives one row; the padding row is still looked up as it is.
  CHECK(floats(embedding(w, ints({3}, {}))) == std::vector<float>{30, 31, 32});
  CHECK(floats(embedding(w, ints({4}, {1}), 4)) == std::vector<float>{40, 41, 42});
  // A transposed table and transposed indices.
  Tensor wt = w.transpose(0, 1).contiguous().transpose(0, 1);
  REQUIRE_FALSE(wt.is_contiguous());
  CHECK(floats(embedding(wt, ints({4, 0, 4, 2}, {2, 2}).transpose(0, 1))) ==
        std::vector<float>{40, 41, 42, 40, 41, 42, 0, 1, 2, 20, 21, 22});
}

TEST_CASE("index: embedding backward accumulates repeated tokens and skips padding_idx") {
  const Tensor ids = ints({4, 0, 4, 2}, {2, 2});
  const Tensor upstream = arange(0.0, 12.0, 1.0).reshape({2, 2, 3});
  // Token 4 appears at positions 0 and 2: its row collects upstream rows [0,1,2] + [6,7,8].
  const std::vector<float> no_padding{3, 4, 5, 0, 0, 0, 9, 10, 11, 0, 0, 0, 6, 8, 10};
  const std::vector<float> padding_4{3, 4, 5, 0, 0, 0, 9, 10, 11, 0, 0, 0, 0, 0, 0};
  Tensor w = table53().detach().requires_grad_();
  (embedding(w, ids) * upstream).sum().backward();
  CHECK(floats(w.grad()) == no_padding);
  w.zero_grad(true);
  (embedding(w, ids, 4) * upstream).sum().backward();
  CHECK(floats(w.grad()) == padding_4);
  w.zero_grad(true);
  (embedding(w, ids, -1) * upstream).sum().backward();  // -1 is row 4
  CHECK(floats(w.grad()) == padding_4);
}

TEST_CASE("index: embedding gradcheck, contiguous and transposed weight") {
  Generator gen(4);
  const Tensor ids = ints({4, 0, 4, 2, 2, 1}, {2, 3});
  auto plain = [&](const TensorList& x) { return embedding(x[0], ids); };
  check_gradients(plain, {randn({5, 3}, gen, kFloat64)});
  // No padding_idx here: its row deliberately gets no gradient although the output reads it.
  auto transposed = [&](const TensorList& x) { return embedding(x[0].transpose(0, 1), ids); };
  check_gradients(transposed, {randn({3, 5}, gen, kFloat64)});
}

TEST_CASE("index: embedding errors") {
  Tensor w = zeros({5, 3});
  CHECK_THROWS_WITH_AS(embedding(w, ints({1, 7}, {2})), "embedding: index 7 is out of range for 5 embeddings",
                       IndexError);
  CHECK_THROWS_WITH_AS(embedding(w, ints({-1}, {1})), "embedding: index -1 is out of range for 5 embeddings",
                       IndexError);
  CHECK_THROWS_WITH_AS(embedding(w, tensor({1, 2})), "embedding: indices must be an int64 tensor, got float32",
                       TypeError);
  CHECK_THROWS_WITH_AS(embedding(zeros({5}), ints({1}, {1})),
                       "embedding: weight must be 2-D (num_embeddings, embedding_dim), got shape (5)", ShapeError);
  CHECK_THROWS_WITH_AS(embedding(w, ints({1}, {1}), 5), "embedding: padding_idx 5 is out of range for 5 embeddings",
                       IndexError);
}

TEST_CASE("index: backward refuses indices modified in place after the forward") {
  Tensor w = zeros({5, 3}).requires_grad_();
  Tensor ids = ints({1, 2}, {2});
  Tensor out = embedding(w, ids);
  ids.fill_(0);  // the data loader reusing its buffer too early, say
  CHECK_THROWS_WITH_AS(out.sum().backward(),
                       doctest::Contains("backward of embedding: one of the variables needed for gradient computation "
                                         "has been modified by an inplace operation: a tensor of shape (2) saved at "
                                         "version 0 is now at version 1"),
                       GraphError);
}

// ---------------------------------------------------------------- topk
TEST_CASE("index: topk largest and smallest along each axis") {
  Tensor x = tensor({{1, 5, 3, 4.5}, {4, 2, 8, 0}});
  auto [values, indices] = topk(x, 2);
  CHECK(values.shape() == Shape{2, 2});
  CHECK(indices.dtype() == kInt64);
  CHECK(floats(values) == std::vector<float>{5, 4.5, 8, 4});
  CHECK(longs(indices) == std::vector<std::int64_t>{1, 3, 2, 0});
  auto [small_values, small_indices] = topk(x, 2, -1, /*largest=*/false);
  CHECK(floats(small_values) == std::vector<float>{1, 3, 0, 2});
  CHECK(longs(small_indices) == std::vector<std::int64_t>{0, 2, 3, 1});
  auto [column_values, column_indices] = topk(x, 1, 0);
  CHECK(column_values.shape() == Shape{1, 4});
  CHECK(floats(column_values) == std::vector<float>{4, 5, 8, 4.5});
  CHECK(longs(column_indices) == std::vector<std::int64_t>{1, 0, 1, 0});
  // k = 0 and k = size are both allowed.
  CHECK(topk(x, 0).first.shape() == Shape{2, 0});
  CHECK(floats(topk(x, 4, 1, true, /*sorted=*/false).first) == std::vector<float>{5, 4.5, 3, 1, 8, 4, 2, 0});
}

TEST_CASE("index: topk on a transposed view") {
  Tensor xt = tensor({{1, 5, 3, 4.5}, {4, 2, 8, 0}}).transpose(0, 1);  // (4,2)
  auto [values, indices] = topk(xt, 2, 0);
  CHECK(floats(values) == std::vector<float>{5, 8, 4.5, 4});
  CHECK(longs(indices) == std::vector<std::int64_t>{1, 2, 3, 0});
}

TEST_CASE("index: topk breaks ties by the lower index and ranks NaN highest") {
  // Hand-worked: our rule (stable, lower index first), not PyTorch's unspecified tie order.
  auto [v1, i1] = topk(tensor({2, 7, 7, 1, 7}), 2);
  CHECK(floats(v1) == std::vector<float>{7, 7});
  CHECK(longs(i1) == std::vector<std::int64_t>{1, 2});
  auto [v2, i2] = topk(tensor({3, 1, 1, 0, 1}), 3, 0, false);
  CHECK(floats(v2) == std::vector<float>{0, 1, 1});
  CHECK(longs(i2) == std::vector<std::int64_t>{3, 1, 2});
  CHECK(longs(topk(tensor({5, 5, 5}), 3).second) == std::vector<std::int64_t>{0, 1, 2});
  // NaN as in PyTorch: first among the largest, last among the smallest.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto [v3, i3] = topk(tensor({1, nan, 3}), 2);
  CHECK(std::isnan(v3.at({0})));
  CHECK(v3.at({1}) == 3);
  CHECK(longs(i3) == std::vector<std::int64_t>{1, 2});
  CHECK(longs(topk(tensor({1, nan, 3}), 3, 0, false).second) == std::vector<std::int64_t>{0, 2, 1});
}

TEST_CASE("index: topk gradient goes to the selected entries only") {
  Tensor x = tensor({{1, 5, 3, 4.5}, {4, 2, 8, 0}}).requires_grad_();
  auto [values, indices] = topk(x, 2);
  (values * tensor({{1, 2}, {3, 4}})).sum().backward();
  CHECK(floats(x.grad()) == std::vector<float>{0, 1, 0, 2, 4, 0, 3, 0});
}

TEST_CASE("index: topk gradcheck, contiguous and transposed") {
  auto largest = [](const TensorList& x) { return topk(x[0], 2, 1).first; };
  check_gradients(largest, {distinct35()});
  auto smallest_transposed = [](const TensorList& x) { return topk(x[0].transpose(0, 1), 3, 0, false).first; };
  check_gradients(smallest_transposed, {distinct35()});
}

TEST_CASE("index: sort and argsort are torch's stable sort, NaN largest, int64 too") {
  // torch.sort(s, stable=True) and with descending=True, PyTorch 1.13.
  const Tensor s = tensor({{3.0, 1.0, NAN, 1.0, -2.0}, {0.0, 5.0, 5.0, -1.0, 2.0}});
  const auto [up, up_at] = sort(s);
  CHECK(up_at.to_vector<std::int64_t>() == std::vector<std::int64_t>{4, 1, 3, 0, 2, 3, 0, 4, 1, 2});
  const std::vector<float> ups = up.to_vector<float>();
  CHECK(std::isnan(ups[4]));
  CHECK(std::vector<float>(ups.begin() + 5, ups.end()) == std::vector<float>{-1, 0, 2, 5, 5});
  const auto [down, down_at] = sort(s, -1, true);
  CHECK(down_at.to_vector<std::int64_t>() == std::vector<std::int64_t>{2, 0, 1, 3, 4, 1, 2, 4, 0, 3});
  // torch.argsort(s, dim=0, stable=True).
  CHECK(argsort(s, 0).to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 0, 1, 1, 0, 0, 1, 0, 0, 1});
  const auto [ints, ints_at] = sort(tensor({3, 1, 2, 1}, kInt64));
  CHECK(ints.to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 1, 2, 3});
  CHECK(ints_at.to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 3, 2, 0});
  // The gradient goes back to where each value came from: d/dy (sort(y) . [1, 10, 100]).
  const Tensor y = tensor({3.0, 1.0, 2.0}, kFloat64).requires_grad_(true);
  (sort(y).first * tensor({1.0, 10.0, 100.0}, kFloat64)).sum().backward();
  testing::check_values(y.grad(), {100, 1, 10}, 1e-15);
  Generator gen(14);
  check_gradients([](const TensorList& in) { return sort(in[0], 0, true).first; }, {randn({4, 3}, gen, kFloat64)});
  CHECK(sort(full({}, 2.0)).first.item() == 2.0);
  CHECK_THROWS_WITH_AS(sort(s, 2), "sort: axis 2 is out of range for a tensor of rank 2", IndexError);
}

TEST_CASE("index: topk errors") {
  Tensor x = zeros({2, 4});
  CHECK_THROWS_WITH_AS(topk(x, 5), "topk: k = 5 is larger than axis 1 of size 4 (shape (2,4))", ValueError);
  CHECK_THROWS_WITH_AS(topk(x, 3, 0), "topk: k = 3 is larger than axis 0 of size 2 (shape (2,4))", ValueError);
  CHECK_THROWS_WITH_AS(topk(x, -1), "topk: k must be non-negative, got -1", ValueError);
  CHECK_THROWS_WITH_AS(topk(from_vector(std::vector<bool>{true, false}, {2}), 1),
                       "topk: expected a float32, float64 or int64 tensor, got bool", TypeError);
}

// ---------------------------------------------------------------- one_hot
TEST_CASE("index: one_hot") {
  Tensor out = one_hot(ints({2, 0, 1, 2}, {2, 2}), 3);
  CHECK(out.shape() == Shape{2, 2, 3});
  CHECK(out.dtype() == kInt64);
  CHECK(longs(out) == std::vector<std::int64_t>{0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 1});
  // Transposed indices, float32 output.
  Tensor f = one_hot(ints({2, 0, 1, 2}, {2, 2}).transpose(0, 1), 3, kFloat32);
  CHECK(f.dtype() == kFloat32);
  CHECK(floats(f) == std::vector<float>{0, 0, 1, 0, 1, 0, 1, 0, 0, 0, 0, 1});
  Tensor b = one_hot(ints({1}, {}), 2, kBool);
  CHECK(b.shape() == Shape{2});
  CHECK(longs(b) == std::vector<std::int64_t>{0, 1});
}

TEST_CASE("index: one_hot errors") {
  CHECK_THROWS_WITH_AS(one_hot(ints({0, 3}, {2}), 3), "one_hot: index 3 is out of range for 3 classes", IndexError);
  CHECK_THROWS_WITH_AS(one_hot(ints({-1}, {1}), 3), "one_hot: index -1 is out of range for 3 classes", IndexError);
  CHECK_THROWS_WITH_AS(one_hot(ints({0}, {1}), 0), "one_hot: num_classes must be positive, got 0", ValueError);
  CHECK_THROWS_WITH_AS(one_hot(tensor({0, 1}), 3), "one_hot: indices must be an int64 tensor, got float32", TypeError);
}
