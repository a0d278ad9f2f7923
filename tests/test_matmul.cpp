// matmul: torch.matmul semantics on gemm, checked against a naive reference loop written here
// (float64), gradients by gradcheck, layouts (transposes must not be copied, counted through
// the buffer pool), and the gemm loop path against the BLAS path. Over 400 lines because every
// path a product can take (loop, BLAS, split over the pool, batched, broadcast, linear) is checked
// here against the same reference loop.

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "tapegrad/autograd/autograd.h"
#include "tapegrad/autograd/kernels/blas.h"
#include "tapegrad/autograd/storage.h"
#include "testing.h"

using namespace tapegrad;
using tapegrad::testing::check_gradients;
using tapegrad::testing::check_values;

namespace {

// torch.matmul by definition: promote 1-D operands, broadcast the batch axes, three nested
// loops per batch entry, then drop the promoted axes. Works on the row-major values only, so
// it is independent of strides and of gemm.
Tensor reference_matmul(const Tensor& a, const Tensor& b) {
  Shape as = a.shape();
  Shape bs = b.shape();
  const bool a_vector = as.size() == 1;
  const bool b_vector = bs.size() == 1;
  if (a_vector) as = {1, as[0]};
  if (b_vector) bs = {bs[0], 1};
  const std::int64_t n = as[as.size() - 2], k = as[as.size() - 1], m = bs[bs.size() - 1];
  REQUIRE(bs[bs.size() - 2] == k);
  const int rank = std::max(as.size(), bs.size()) - 2;
  // Batch sizes of a and b padded on the left to `rank` axes.
  std::vector<std::int64_t> ab(rank, 1), bb(rank, 1), batch(rank, 1);
  for (int d = 0; d < as.size() - 2; ++d) ab[rank - (as.size() - 2) + d] = as[d];
  for (int d = 0; d < bs.size() - 2; ++d) bb[rank - (bs.size() - 2) + d] = bs[d];
  std::int64_t batch_count = 1;
  for (int d = 0; d < rank; ++d) {
    REQUIRE((ab[d] == bb[d] || ab[d] == 1 || bb[d] == 1));
    batch[d] = std::max(ab[d], bb[d]);
    batch_count *= batch[d];
  }
  const std::vector<double> va = a.to_vector<double>();
  const std::vector<double> vb = b.to_vector<double>();
  std::vector<double> out(batch_count * n * m, 0.0);
  for (std::int64_t flat = 0; flat < batch_count; ++flat) {
    // The batch index of out, and the matching (broadcast) batch entries of a and b.
    std::int64_t rest = flat, a_entry = 0, b_entry = 0, a_scale = 1, b_scale = 1;
    for (int d = rank - 1; d >= 0; --d) {
      const std::int64_t i = rest % batch[d];
      rest /= batch[d];
      a_entry += (ab[d] == 1 ? 0 : i) * a_scale;
      b_entry += (bb[d] == 1 ? 0 : i) * b_scale;
      a_scale *= ab[d];
      b_scale *= bb[d];
    }
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < m; ++j) {
        double total = 0.0;
        for (std::int64_t p = 0; p < k; ++p) total += va[a_entry * n * k + i * k + p] * vb[b_entry * k * m + p * m + j];
        out[flat * n * m + i * m + j] = total;
      }
  }
  Shape shape(batch.begin(), batch.end());
  if (!a_vector) shape.push_back(n);
  if (!b_vector) shape.push_back(m);
  return from_vector(out, shape);
}

void check_close(const Tensor& actual, const Tensor& expected, double tol) {
  REQUIRE(actual.shape() == expected.shape());
  const std::vector<double> x = actual.to_vector<double>();
  const std::vector<double> y = expected.to_vector<double>();
  for (std::size_t i = 0; i < x.size(); ++i)
    CHECK_MESSAGE(std::abs(x[i] - y[i]) <= tol * (1.0 + std::abs(y[i])),
                  "element " << i << ": " << x[i] << " vs " << y[i]);
}

// Buffers the pool hands out while fn runs (every new tensor and every copy takes one).
std::size_t allocations_during(const std::function<void()>& fn) {
  const std::size_t before = pool_stats().allocations;
  fn();
  return pool_stats().allocations - before;
}

struct ShapeCase {
  Shape a, b, out;
};

// Every shape combination torch.matmul accepts, with the result shape it gives.
const std::vector<ShapeCase> kShapeCases = {
    {{2, 3}, {3, 4}, {2, 4}},                    // 2-D x 2-D
    {{3}, {3}, {}},                              // dot
    {{3}, {3, 4}, {4}},                          // 1-D lhs promoted to (1, 3)
    {{2, 3}, {3}, {2}},                          // 1-D rhs promoted to (3, 1)
    {{3}, {2, 3, 4}, {2, 4}},                    // 1-D lhs against a batch
    {{2, 5, 3}, {3}, {2, 5}},                    // batch against a 1-D rhs
    {{2, 5, 3}, {3, 4}, {2, 5, 4}},              // one B for the whole batch
    {{2, 2, 5, 3}, {3, 4}, {2, 2, 5, 4}},        // two batch axes, one B
    {{2, 3}, {4, 3, 5}, {4, 2, 5}},              // A broadcast over b's batch
    {{4, 2, 3}, {4, 3, 5}, {4, 2, 5}},           // same batch
    {{2, 1, 3, 4}, {5, 4, 2}, {2, 5, 3, 2}},     // (B,1,n,k) x (H,k,m)
    {{1, 2, 3}, {4, 3, 5}, {4, 2, 5}},           // size-1 batch axis in a
    {{4, 2, 3}, {1, 3, 5}, {4, 2, 5}},           // size-1 batch axis in b
    {{2, 5, 3}, {1, 1, 3, 4}, {1, 2, 5, 4}},     // b's size-1 batch axes outrank a's
    {{3, 1, 2, 3}, {1, 4, 3, 2}, {3, 4, 2, 2}},  // both broadcast
};

}  // namespace

TEST_CASE("matmul: hand-worked 2x3 @ 3x2") {
  // [[1,2,3],[4,5,6]] @ [[7,8],[9,10],[11,12]]:
  //   1*7+2*9+3*11 = 58, 1*8+2*10+3*12 = 64, 4*7+5*9+6*11 = 139, 4*8+5*10+6*12 = 154
  for (DType dtype : {kFloat32, kFloat64}) {
    Tensor a = tensor({{1, 2, 3}, {4, 5, 6}}, dtype);
    Tensor b = tensor({{7, 8}, {9, 10}, {11, 12}}, dtype);
    Tensor c = matmul(a, b);
    CHECK(c.dtype() == dtype);
    CHECK(c.shape() == Shape{2, 2});
    CHECK(c.to_vector<double>() == std::vector<double>{58, 64, 139, 154});
    CHECK(a.matmul(b).to_vector<double>() == std::vector<double>{58, 64, 139, 154});
  }
  // 1-D: [1,2,3] . [4,5,6] = 32; [1,2,3] @ [[7,8],[9,10],[11,12]] = [58, 64]
  Tensor dot = matmul(tensor({1, 2, 3}), tensor({4, 5, 6}));
  CHECK(dot.shape() == Shape{});
  CHECK(dot.item() == 32.0);
  CHECK(matmul(tensor({1, 2, 3}), tensor({{7, 8}, {9, 10}, {11, 12}})).to_vector<double>() ==
        std::vector<double>{58, 64});
  CHECK(matmul(tensor({{1, 2, 3}, {4, 5, 6}}), tensor({1, 0, -1})).to_vector<double>() == std::vector<double>{-2, -2});
}

TEST_CASE("matmul: every shape combination against the reference loop") {
  Generator gen(1);
  for (const ShapeCase& c : kShapeCases) {
    CAPTURE(c.a.str());
    CAPTURE(c.b.str());
    Tensor a = randn(c.a, gen, kFloat64);
    Tensor b = randn(c.b, gen, kFloat64);
    Tensor out = matmul(a, b);
    CHECK(out.shape() == c.out);
    check_close(out, reference_matmul(a, b), 1e-12);
    // float32 runs sgemm on the same values.
    check_close(matmul(a.to(kFloat32), b.to(kFloat32)), reference_matmul(a, b), 1e-5);
  }
}

TEST_CASE("matmul: empty axes give empty or zero results") {
  Generator gen(2);
  CHECK(matmul(randn({0, 3}, gen), randn({3, 4}, gen)).shape() == Shape{0, 4});
  CHECK(matmul(randn({2, 3}, gen), randn({0, 3, 4}, gen)).shape() == Shape{0, 2, 4});
  Tensor k_zero = matmul(randn({2, 0}, gen), randn({0, 3}, gen));
  CHECK(k_zero.shape() == Shape{2, 3});
  CHECK(k_zero.to_vector<double>() == std::vector<double>(6, 0.0));
}

TEST_CASE("matmul: transposed and sliced operands") {
  Generator gen(3);
  Tensor x = randn({3, 2}, gen, kFloat64);  // x.mT(): (2,3) with strides (1,2)
  Tensor y = randn({4, 3}, gen, kFloat64);  // y.mT(): (3,4) with strides (1,3)
  Tensor b = randn({3, 4}, gen, kFloat64);
  Tensor a = randn({2, 3}, gen, kFloat64);
  Tensor wide = randn({4, 7}, gen, kFloat64);

  struct LayoutCase {
    const char* what;
    Tensor a, b;
    std::size_t buffers;  // the output, plus one per operand that had to be copied
  };
  const std::vector<LayoutCase> cases = {
      {"a transposed", x.mT(), b, 1},
      {"b transposed", a, y.mT(), 1},
      {"both transposed", x.mT(), y.mT(), 1},
      {"every other row of a (row stride 6)", randn({4, 3}, gen, kFloat64).slice(0, 0, 4, 2), b, 1},
      {"columns 2..5 of a wider b (row stride 7)", a, wide.narrow(1, 2, 4).narrow(0, 0, 3), 1},
      {"transposed slice of b (strides (1,7))", a, wide.narrow(1, 1, 3).mT(), 1},
      {"every other column of a: copied", randn({2, 6}, gen, kFloat64).slice(1, 0, 6, 2), b, 2},
      {"a row expanded to a matrix: copied", randn({1, 3}, gen, kFloat64).expand({2, 3}), b, 2},
      {"both need copies", randn({2, 6}, gen, kFloat64).slice(1, 0, 6, 2),
       randn({3, 8}, gen, kFloat64).slice(1, 0, 8, 2), 3},
  };
  NoGradGuard no_grad;
  for (const LayoutCase& c : cases) {
    CAPTURE(c.what);
    Tensor out;
    CHECK(allocations_during([&] { out = matmul(c.a, c.b); }) == c.buffers);
    check_close(out, reference_matmul(c.a, c.b), 1e-12);
  }
}

TEST_CASE("matmul: non-contiguous batches and broadcast batch strides") {
  Generator gen(4);
  NoGradGuard no_grad;
  // a: (2,3,4) from permuting (3,2,4): batch stride 4, row stride 8, so the batch rows are not
  // one evenly spaced run; each matrix is still used in place.
  Tensor a1 = randn({3, 2, 4}, gen, kFloat64).permute({1, 0, 2});
  Tensor w = randn({4, 5}, gen, kFloat64);
  Tensor out;
  CHECK(allocations_during([&] { out = matmul(a1, w); }) == 1);
  check_close(out, reference_matmul(a1, w), 1e-12);
  // a: (2,3,4) from permuting (4,2,3): the 6 rows are evenly spaced with column stride 6, so one
  // transposed gemm covers the batch.
  Tensor a2 = randn({4, 2, 3}, gen, kFloat64).permute({1, 2, 0});
  CHECK(allocations_during([&] { out = matmul(a2, w); }) == 1);
  check_close(out, reference_matmul(a2, w), 1e-12);
  // b expanded along the batch (stride 0) and transposed per matrix.
  Tensor b = randn({5, 4}, gen, kFloat64).mT().expand({3, 4, 5});
  Tensor a3 = randn({3, 2, 4}, gen, kFloat64);
  CHECK(allocations_during([&] { out = matmul(a3, b); }) == 1);
  check_close(out, reference_matmul(a3, b), 1e-12);
  // A batch of transposed matrices against a batch of sliced ones.
  Tensor a4 = randn({2, 4, 3}, gen, kFloat64).mT();
  Tensor b4 = randn({2, 4, 10}, gen, kFloat64).slice(2, 0, 5);
  CHECK(allocations_during([&] { out = matmul(a4, b4); }) == 1);
  check_close(out, reference_matmul(a4, b4), 1e-12);
  // 1-D operands with a stride.
  Tensor v = randn({8}, gen, kFloat64).slice(0, 0, 8, 2);
  Tensor m = randn({4, 3}, gen, kFloat64);
  check_close(matmul(v, m), reference_matmul(v, m), 1e-12);
  check_close(matmul(m.mT(), v), reference_matmul(m.mT(), v), 1e-12);
  check_close(matmul(v, v), reference_matmul(v, v), 1e-12);
}

TEST_CASE("matmul: gradcheck over every shape combination") {
  Generator gen(5);
  for (const ShapeCase& c : kShapeCases) {
    CAPTURE(c.a.str());
    CAPTURE(c.b.str());
    check_gradients([](const TensorList& x) { return matmul(x[0], x[1]); },
                    {randn(c.a, gen, kFloat64), randn(c.b, gen, kFloat64)});
  }
}

TEST_CASE("matmul: gradcheck through transposed, sliced and expanded operands") {
  Generator gen(6);
  using F = std::function<Tensor(const TensorList&)>;
  struct GradCase {
    const char* what;
    F f;
    TensorList inputs;
  };
  const std::vector<GradCase> cases = {
      {"a^T @ b",
       [](const TensorList& x) { return matmul(x[0].mT(), x[1]); },
       {randn({3, 2}, gen, kFloat64), randn({3, 4}, gen, kFloat64)}},
      {"a @ b^T",
       [](const TensorList& x) { return matmul(x[0], x[1].mT()); },
       {randn({2, 3}, gen, kFloat64), randn({4, 3}, gen, kFloat64)}},
      {"batched a^T @ b^T",
       [](const TensorList& x) { return matmul(x[0].mT(), x[1].mT()); },
       {randn({2, 3, 2}, gen, kFloat64), randn({2, 4, 3}, gen, kFloat64)}},
      {"column slice (copied)",
       [](const TensorList& x) { return matmul(x[0].slice(1, 0, 6, 2), x[1]); },
       {randn({2, 6}, gen, kFloat64), randn({3, 4}, gen, kFloat64)}},
      {"row slice",
       [](const TensorList& x) { return matmul(x[0].slice(0, 1, 5, 2), x[1]); },
       {randn({5, 3}, gen, kFloat64), randn({3, 4}, gen, kFloat64)}},
      {"expanded b",
       [](const TensorList& x) {
         return matmul(x[0], x[1].expand({3, 4, 2}));
       },
       {randn({3, 2, 4}, gen, kFloat64), randn({4, 2}, gen, kFloat64)}},
      {"permuted batch @ shared b",
       [](const TensorList& x) {
         return matmul(x[0].permute({1, 0, 2}), x[1]);
       },
       {randn({3, 2, 4}, gen, kFloat64), randn({4, 5}, gen, kFloat64)}},
      {"strided vector",
       [](const TensorList& x) { return matmul(x[0].slice(0, 0, 6, 2), x[1].mT()); },
       {randn({6}, gen, kFloat64), randn({4, 3}, gen, kFloat64)}},
      {"same tensor twice",
       [](const TensorList& x) { return matmul(x[0], x[0].mT()); },
       {randn({3, 4}, gen, kFloat64)}},
  };
  for (const GradCase& c : cases) {
    CAPTURE(c.what);
    check_gradients(c.f, c.inputs);
  }
}

TEST_CASE("matmul: gradients match the formulas and skip inputs that need none") {
  // y = sum(A @ B): dA = ones @ B^T (row sums of B), dB = A^T @ ones (column sums of A).
  Tensor a = tensor({{1, 2, 3}, {4, 5, 6}}).requires_grad_();
  Tensor b = tensor({{7, 8}, {9, 10}, {11, 12}}).requires_grad_();
  matmul(a, b).sum().backward();
  CHECK(a.grad().to_vector<double>() == std::vector<double>{15, 19, 23, 15, 19, 23});
  CHECK(b.grad().to_vector<double>() == std::vector<double>{5, 5, 7, 7, 9, 9});

  Tensor c = tensor({{1, 2}, {3, 4}});
  Tensor d = tensor({{1, 0}, {0, 1}}).requires_grad_();
  matmul(c, d).sum().backward();
  CHECK_FALSE(c.grad().defined());
  CHECK(d.grad().to_vector<double>() == std::vector<double>{4, 4, 6, 6});
}

TEST_CASE("matmul: the gradient of a batch-shared B is one gemm over the flattened rows") {
  Generator gen(7);
  Tensor a = randn({4, 5, 3}, gen);
  Tensor b = randn({3, 2}, gen).requires_grad_();
  Tensor y = matmul(a, b);
  Tensor g = randn({4, 5, 2}, gen);
  // The gemm's output is the only buffer (it becomes b.grad); a batched product followed by a
  // sum over the batch would take at least two.
  CHECK(allocations_during([&] { y.backward(g); }) == 1);
  check_close(b.grad(), reference_matmul(a.reshape({20, 3}).mT(), g.reshape({20, 2})), 1e-5);
}

TEST_CASE("matmul: the gradient of W in x @ W^T arrives in W's layout, equal to the copied path") {
  Generator gen(8);
  const Tensor x = randn({4, 5, 3}, gen);
  const Tensor g = randn({4, 5, 6}, gen);
  for (const Tensor& w_values : {randn({6, 3}, gen), randn({1, 3}, gen)}) {
    const Shape out_shape{4, 5, w_values.shape()[0]};
    const Tensor upstream = g.narrow(2, 0, w_values.shape()[0]).contiguous();
    // Special-cased: W^T is a transposed view, so dW is computed as G^T X in W's layout.
    const Tensor w = w_values.clone().requires_grad_();
    matmul(x, w.mT()).backward(upstream);
    // The general path: the same values as a contiguous (3, out) matrix.
    const Tensor wt = w_values.mT().contiguous().requires_grad_();
    matmul(x, wt).backward(upstream);
    CHECK(w.grad().is_contiguous());
    check_close(w.grad(), wt.grad().mT().contiguous(), 1e-5);
  }
  // The gemm's output becomes W.grad with no copy: the product and the view of it are all.
  const Tensor w = randn({6, 3}, gen).requires_grad_();
  const Tensor y = matmul(x, w.mT());
  CHECK(allocations_during([&] { y.backward(g); }) == 1);
}

TEST_CASE("matmul: errors name the op and the shapes") {
  Generator gen(8);
  CHECK_THROWS_WITH_AS(matmul(randn({2, 3}, gen), randn({4, 5}, gen)), "matmul: cannot multiply (2,3) by (4,5)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(matmul(randn({2, 3}, gen, kFloat64), randn({4, 5}, gen, kFloat64)),
                       "matmul: cannot multiply (2,3) by (4,5)", ShapeError);
  CHECK_THROWS_WITH_AS(matmul(randn({3}, gen), randn({4}, gen)), "matmul: cannot multiply (3) by (4)", ShapeError);
  CHECK_THROWS_WITH_AS(matmul(randn({2, 5, 3}, gen), randn({2, 3}, gen)), "matmul: cannot multiply (2,5,3) by (2,3)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(matmul(randn({2, 2, 3}, gen), randn({3, 3, 4}, gen)),
                       "matmul: cannot multiply (2,2,3) by (3,3,4)", ShapeError);
  CHECK_THROWS_WITH_AS(matmul(scalar_tensor(2.0), randn({3}, gen)),
                       "matmul: both operands need at least one dimension, got shapes () and (3)", ShapeError);
  CHECK_THROWS_WITH_AS(matmul(randn({2, 3}, gen), randn({3, 2}, gen, kFloat64)),
                       "matmul: dtype mismatch, float32 and float64", TypeError);
  CHECK_THROWS_WITH_AS(matmul(arange(6).reshape({2, 3}), arange(6).reshape({3, 2})),
                       "matmul: expected a floating-point tensor (float32 or float64), got int64", TypeError);
}

TEST_CASE("matmul: the gemm loop and BLAS agree on every transpose combination") {
  Generator gen(10);
  struct Dims3 {
    std::int64_t m, n, k;
  };
  // Covers the loop's forms: register blocks (n >= 8: row blocks of 4, 3, 2, 1 and column blocks
  // of 8, 4, 1, with a transposed B repacked), contiguous dots, strided dots, and a transposed B
  // too large to repack (k n > 4096).
  const std::vector<Dims3> sizes = {{1, 2, 20}, {2, 20, 1}, {4, 4, 4},  {5, 20, 20}, {3, 7, 11},
                                    {1, 1, 9},  {7, 29, 5}, {6, 13, 1}, {9, 8, 3},   {2, 70, 64}};
  for (Dims3 d : sizes) {
    for (int flags = 0; flags < 4; ++flags) {
      const bool ta = flags & 1, tb = flags & 2;
      CAPTURE(d.m);
      CAPTURE(d.n);
      CAPTURE(d.k);
      CAPTURE(ta);
      CAPTURE(tb);
      // Stored operands with padded rows (ld larger than the row) to exercise the strides.
      const std::int64_t a_rows = ta ? d.k : d.m, a_cols = ta ? d.m : d.k;
      const std::int64_t b_rows = tb ? d.n : d.k, b_cols = tb ? d.k : d.n;
      for (DType dtype : {kFloat32, kFloat64}) {
        Tensor a = randn({a_rows, a_cols + 3}, gen, dtype);
        Tensor b = randn({b_rows, b_cols + 2}, gen, dtype);
        Tensor c0 = randn({d.m, d.n + 1}, gen, dtype);
        Tensor c_loop = c0.clone(), c_blas = c0.clone();
        dispatch_floating(dtype, "test", [&](auto tag) {
          using T = decltype(tag);
          const T alpha = T(0.5), beta = T(-2);
          kernels::gemm_loop(ta, tb, d.m, d.n, d.k, alpha, a.data_ptr<T>(), a_cols + 3, b.data_ptr<T>(), b_cols + 2,
                             beta, c_loop.data_ptr<T>(), d.n + 1);
          kernels::gemm_blas(ta, tb, d.m, d.n, d.k, alpha, a.data_ptr<T>(), a_cols + 3, b.data_ptr<T>(), b_cols + 2,
                             beta, c_blas.data_ptr<T>(), d.n + 1);
          return 0;
        });
        check_close(c_loop, c_blas, dtype == kFloat32 ? 1e-5 : 1e-12);
        // The padding column of C is untouched by both.
        CHECK(c_loop.select(1, d.n).to_vector<double>() == c0.select(1, d.n).to_vector<double>());
      }
    }
  }
  // beta = 0 must not read C: NaN there does not leak into the result.
  std::vector<float> a{1, 2}, b{3, 4}, c_loop{NAN}, c_blas{NAN};
  kernels::gemm_loop(false, false, 1, 1, 2, 1.0f, a.data(), 2, b.data(), 1, 0.0f, c_loop.data(), 1);
  kernels::gemm_blas(false, false, 1, 1, 2, 1.0f, a.data(), 2, b.data(), 1, 0.0f, c_blas.data(), 1);
  CHECK(c_loop[0] == 11.0f);
  CHECK(c_blas[0] == 11.0f);
  // The same for the register-blocked form (n >= 8).
  std::vector<float> a8(2, 1.0f), b8(16, 2.0f), c8(8, NAN);
  kernels::gemm_loop(false, false, 1, 8, 2, 1.0f, a8.data(), 2, b8.data(), 8, 0.0f, c8.data(), 8);
  for (float v : c8) CHECK(v == 4.0f);
}

TEST_CASE("matmul: small products take the loop, larger ones BLAS, with the same results") {
  // The spam toy's products, (1,20) @ (20,2) and (5,20) @ (20,20), are below the crossover;
  // (5,20) @ (20,1000) is above it. matmul must give the reference values on both sides.
  CHECK(kernels::gemm_uses_loop(1, 2, 20));
  CHECK(kernels::gemm_uses_loop(5, 20, 20));
  CHECK_FALSE(kernels::gemm_uses_loop(5, 1000, 20));
  Generator gen(11);
  for (Shape b_shape : {Shape{20, 2}, Shape{20, 20}, Shape{20, 1000}}) {
    Tensor x = randn({5, 20}, gen, kFloat64);
    Tensor w = randn(b_shape, gen, kFloat64);
    check_close(matmul(x.select(0, 0), w), reference_matmul(x.select(0, 0), w), 1e-12);
    check_close(matmul(x, w), reference_matmul(x, w), 1e-12);
    check_close(matmul(x.mT().mT(), w.mT().contiguous().mT()), reference_matmul(x, w), 1e-12);
  }
}

TEST_CASE("linear: equals matmul(x, W^T) + b bit for bit, for any x layout, with and without bias") {
  Generator gen(31);
  const Tensor w = randn({40, 24}, gen);  // w: (out, in)
  const Tensor b = randn({40}, gen);
  const Tensor x3 = randn({3, 50, 24}, gen);
  const Tensor xt = randn({24, 60}, gen).mT();              // (60, 24), column-major
  const Tensor xs = randn({70, 48}, gen).narrow(1, 8, 24);  // (70, 24), row stride 48
  const Tensor big = randn({600, 24}, gen);                 // split over the pool
  for (const Tensor& x : {x3, xt, xs, big, x3.select(1, 0)}) {
    CAPTURE(x.shape().str());
    const std::vector<float> with_bias = linear(x, w, b).to_vector<float>();
    CHECK(with_bias == (matmul(x, w.mT()) + b).to_vector<float>());
    CHECK(linear(x, w).to_vector<float>() == matmul(x, w.mT()).to_vector<float>());
    CHECK(linear(x, w, b).shape() == (matmul(x, w.mT()) + b).shape());
  }
  const Tensor v = randn({24}, gen);  // a 1-D x gives a 1-D result, as torch's F.linear
  CHECK(linear(v, w, b).shape() == Shape{40});
  // A matrix-vector product sums in another order: float32 rounding of 24 products of size ~5 (~1e-6).
  check_values(linear(v, w, b), (matmul(w, v) + b).to_vector<double>(), 1e-5);
  // A transposed weight view is read in place.
  const Tensor wt = randn({24, 40}, gen).mT();
  CHECK(linear(x3, wt, b).to_vector<float>() == (matmul(x3, wt.mT()) + b).to_vector<float>());
  CHECK(linear(randn({0, 24}, gen), w, b).shape() == Shape{0, 40});
  check_values(linear(randn({2, 0}, gen), randn({3, 0}, gen), full({3}, 1.5)), {1.5, 1.5, 1.5, 1.5, 1.5, 1.5});
  check_values(linear(randn({2, 0}, gen), randn({3, 0}, gen)), {0, 0, 0, 0, 0, 0});
}

TEST_CASE("linear: gradcheck for x, weight and bias, and gradients equal the composite's") {
  Generator gen(32);
  const Tensor x = randn({2, 3, 4}, gen);
  const Tensor w = randn({5, 4}, gen);
  const Tensor b = randn({5}, gen);
  check_gradients([](const TensorList& in) { return linear(in[0], in[1], in[2]); }, {x, w, b});
  check_gradients([](const TensorList& in) { return linear(in[0].mT(), in[1]); }, {randn({4, 6}, gen), w});

  const Tensor g = randn({2, 3, 5}, gen);
  TensorList fused, composite;
  for (bool use_linear : {true, false}) {
    const Tensor xi = x.detach().requires_grad_(), wi = w.detach().requires_grad_(), bi = b.detach().requires_grad_();
    const Tensor y = use_linear ? linear(xi, wi, bi) : matmul(xi, wi.mT()) + bi;
    (y * g).sum().backward();
    (use_linear ? fused : composite) = {xi.grad(), wi.grad(), bi.grad()};
  }
  for (int i = 0; i < 3; ++i) {
    CAPTURE(i);
    CHECK(max(abs(fused[i] - composite[i])).item() < 1e-5);
  }
  // Only the inputs that need a gradient get one.
  const Tensor wi = w.detach().requires_grad_();
  linear(x, wi, b).sum().backward();
  CHECK(wi.grad().defined());
}

TEST_CASE("linear: errors name the op, the shapes and the dtypes") {
  Generator gen(33);
  CHECK_THROWS_WITH_AS(linear(randn({2, 3}, gen), randn({4, 5}, gen)),
                       "linear: expected x (..., in) and weight (out, in), got (2,3) and (4,5)", ShapeError);
  CHECK_THROWS_WITH_AS(linear(randn({2, 3}, gen), randn({4, 3}, gen), randn({5}, gen)),
                       "linear: expected bias (4) for weight (4,3), got (5)", ShapeError);
  CHECK_THROWS_WITH_AS(linear(randn({2, 3}, gen), randn({4, 3}, gen).to(kFloat64)),
                       "linear: dtype mismatch, x float32, weight float64", TypeError);
}

// ---------------------------------------------------------------- einsum

namespace {

// A loop over every assignment of the labels of an explicit equation of letters ("ij,jk->ik"):
// the product of the operands' entries (a size-1 axis read at 0, as broadcasting does) summed
// into the output. Independent of einsum's lowering, to check its values.
std::vector<double> loop_einsum(const std::string& equation, const TensorList& operands) {
  const std::size_t arrow = equation.find("->");
  std::vector<std::string> terms;
  for (std::size_t start = 0;;) {
    const std::size_t comma = equation.find(',', start);
    terms.push_back(equation.substr(start, std::min(comma, arrow) - start));
    if (comma == std::string::npos || comma > arrow) break;
    start = comma + 1;
  }
  const std::string output = equation.substr(arrow + 2);
  std::string labels;
  std::vector<std::int64_t> size(128, 1);
  std::vector<std::vector<double>> values;
  for (std::size_t i = 0; i < terms.size(); ++i) {
    values.push_back(operands[i].contiguous().to_vector<double>());
    for (std::size_t a = 0; a < terms[i].size(); ++a) {
      const char l = terms[i][a];
      if (labels.find(l) == std::string::npos) labels += l;
      size[static_cast<std::size_t>(l)] =
          std::max(size[static_cast<std::size_t>(l)], operands[i].shape()[static_cast<int>(a)]);
    }
  }
  const auto flat_index = [&](const std::string& term, const Shape& shape, const std::vector<std::int64_t>& at) {
    std::int64_t index = 0;
    for (std::size_t a = 0; a < term.size(); ++a) {
      const std::int64_t n = shape[static_cast<int>(a)];
      index = index * n + (n == 1 ? 0 : at[static_cast<std::size_t>(term[a])]);
    }
    return index;
  };
  Shape out_shape;
  std::int64_t out_size = 1;
  for (const char l : output) {
    out_shape.push_back(size[static_cast<std::size_t>(l)]);
    out_size *= size[static_cast<std::size_t>(l)];
  }
  std::vector<double> out(static_cast<std::size_t>(out_size), 0.0);
  std::vector<std::int64_t> at(128, 0);
  for (;;) {
    double product = 1.0;
    for (std::size_t i = 0; i < terms.size(); ++i)
      product *= values[i][static_cast<std::size_t>(flat_index(terms[i], operands[i].shape(), at))];
    out[static_cast<std::size_t>(flat_index(output, out_shape, at))] += product;
    std::size_t k = 0;
    for (; k < labels.size(); ++k) {
      std::int64_t& v = at[static_cast<std::size_t>(labels[k])];
      if (++v < size[static_cast<std::size_t>(labels[k])]) break;
      v = 0;
    }
    if (k == labels.size()) break;
  }
  return out;
}

struct EinsumCase {
  std::string equation;   // as given to einsum
  std::string reference;  // the same with explicit letters only, for loop_einsum
  std::vector<Shape> shapes;
  Shape out;
};

// Every product of transformer-numpy-notes.txt and the attention post, then awkward ones.
const std::vector<EinsumCase>& einsum_cases() {
  static const std::vector<EinsumCase> cases = {
      {"ij, jk -> ik", "ij,jk->ik", {{2, 3}, {3, 4}}, {2, 4}},
      {"nk,mk->nm", "nk,mk->nm", {{3, 4}, {5, 4}}, {3, 5}},
      {"nm,mv->nv", "nm,mv->nv", {{3, 5}, {5, 2}}, {3, 2}},
      {"nd,dhk->hnk", "nd,dhk->hnk", {{3, 4}, {4, 2, 3}}, {2, 3, 3}},
      {"hnk,hmk->hnm", "hnk,hmk->hnm", {{2, 3, 4}, {2, 5, 4}}, {2, 3, 5}},
      {"hnm,hmv->hnv", "hnm,hmv->hnv", {{2, 3, 5}, {2, 5, 4}}, {2, 3, 4}},
      {"hnv->nhv", "hnv->nhv", {{2, 3, 4}}, {3, 2, 4}},
      {"nx,xd->nd", "nx,xd->nd", {{3, 6}, {6, 4}}, {3, 4}},
      {"nd,df->nf", "nd,df->nf", {{3, 4}, {4, 5}}, {3, 5}},
      {"nd,vd->nv", "nd,vd->nv", {{3, 4}, {6, 4}}, {3, 6}},
      {"bhqd,bhkd->bhqk", "bhqd,bhkd->bhqk", {{2, 2, 3, 4}, {2, 2, 5, 4}}, {2, 2, 3, 5}},
      {"ii->i", "ii->i", {{3, 3}}, {3}},
      {"ii->", "ii->", {{3, 3}}, {}},
      {"ii", "ii->", {{3, 3}}, {}},
      {"iij->j", "iij->j", {{3, 3, 2}}, {2}},
      {"iji->j", "iji->j", {{3, 2, 3}}, {2}},
      {"ij->ji", "ij->ji", {{2, 3}}, {3, 2}},
      {"ba", "ba->ab", {{2, 3}}, {3, 2}},
      {"ij->", "ij->", {{2, 3}}, {}},
      {"i,j->ij", "i,j->ij", {{3}, {4}}, {3, 4}},
      {"i,i->", "i,i->", {{4}, {4}}, {}},
      {"i,i->i", "i,i->i", {{4}, {4}}, {4}},
      {"ij,ij->ij", "ij,ij->ij", {{3, 1}, {3, 4}}, {3, 4}},
      {"ij,jk", "ij,jk->ik", {{2, 3}, {3, 4}}, {2, 4}},
      {"Ab,bC->AC", "Ab,bC->AC", {{2, 3}, {3, 4}}, {2, 4}},
      {"bij,bjk->bik", "bij,bjk->bik", {{2, 3, 4}, {2, 4, 2}}, {2, 3, 2}},
      {"...ij,...jk->...ik", "abij,bjk->abik", {{2, 1, 3, 4}, {5, 4, 2}}, {2, 5, 3, 2}},
      {"...i->...", "abi->ab", {{2, 3, 4}}, {2, 3}},
      {"i...->i", "iab->i", {{3, 2, 2}}, {3}},
      {"...ij", "abij->abij", {{2, 1, 3, 2}}, {2, 1, 3, 2}},
      {"ij,jk,kl->il", "ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 2}}, {2, 2}},
      {"ii,i->i", "ii,i->i", {{3, 3}, {3}}, {3}},
      {"ijk,ikj->i", "ijk,ikj->i", {{2, 3, 4}, {2, 4, 3}}, {2}},
      {"ij,kl->ijkl", "ij,kl->ijkl", {{2, 3}, {2, 2}}, {2, 3, 2, 2}},
      {"bn,anm,bm->ba", "bn,anm,bm->ba", {{2, 3}, {4, 3, 2}, {2, 2}}, {2, 4}},
  };
  return cases;
}

TensorList einsum_inputs(const EinsumCase& c, Generator& gen) {
  TensorList inputs;
  for (const Shape& s : c.shapes) inputs.push_back(randn(s, gen, kFloat64).requires_grad_());
  return inputs;
}

}  // namespace

TEST_CASE("einsum: the seeds' products and awkward patterns equal a loop over every label") {
  Generator gen(5);
  for (const EinsumCase& c : einsum_cases()) {
    CAPTURE(c.equation);
    const TensorList inputs = einsum_inputs(c, gen);
    const Tensor out = einsum(c.equation, inputs);
    REQUIRE(out.shape() == c.out);
    const std::vector<double> got = out.contiguous().to_vector<double>(), want = loop_einsum(c.reference, inputs);
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-12));
  }
}

TEST_CASE("einsum: gradcheck and gradgradcheck in float64 on every pattern") {
  Generator gen(6);
  for (const EinsumCase& c : einsum_cases()) {
    CAPTURE(c.equation);
    const TensorList inputs = einsum_inputs(c, gen);
    const auto f = [&c](const TensorList& x) { return einsum(c.equation, x); };
    const GradcheckResult first = gradcheck(f, inputs);
    CHECK_MESSAGE(first.passed, first.message());
    const GradcheckResult second = gradgradcheck(f, inputs);
    CHECK_MESSAGE(second.passed, second.message());
  }
}

TEST_CASE("einsum: attention scores and outputs are the matmul-written ones, bit for bit") {
  Generator gen(7);
  const Tensor q = randn({2, 4, 5, 8}, gen), k = randn({2, 4, 6, 8}, gen), v = randn({2, 4, 6, 8}, gen);
  const Tensor scores = einsum("bhqd,bhkd->bhqk", {q, k});
  CHECK(scores.to_vector<float>() == matmul(q, k.transpose(-2, -1)).to_vector<float>());
  const Tensor weights = softmax(scores, -1);
  CHECK(einsum("bhqk,bhkd->bhqd", {weights, v}).to_vector<float>() == matmul(weights, v).to_vector<float>());
}

TEST_CASE("einsum: under bfloat16 autocast its contractions are matmul's") {
  Generator gen(10);
  const Tensor a = randn({3, 4}, gen), b = randn({4, 5}, gen), c = randn({5}, gen);
  AutocastGuard autocast(kBFloat16);
  const Tensor product = einsum("ij,jk->ik", {a, b});
  CHECK(product.dtype() == kBFloat16);
  CHECK(product.to(kFloat32).to_vector<float>() == matmul(a, b).to(kFloat32).to_vector<float>());
  CHECK(einsum("i,j->ij", {c, c}).dtype() == kFloat32);  // no label summed: a mul, which follows its inputs
}

TEST_CASE("diagonal: offsets, axes and its gradient") {
  Generator gen(8);
  const Tensor x = randn({3, 4, 2}, gen, kFloat64).requires_grad_();
  const std::vector<double> xs = x.to_vector<double>();
  const Tensor d = diagonal(x, 1, 0, 1);  // x[i][i + 1][c], (2, 3)
  REQUIRE(d.shape() == Shape{2, 3});
  for (std::int64_t c = 0; c < 2; ++c)
    for (std::int64_t i = 0; i < 3; ++i)
      CHECK(d.contiguous().to_vector<double>()[static_cast<std::size_t>(c * 3 + i)] ==
            xs[static_cast<std::size_t>((i * 4 + i + 1) * 2 + c)]);
  CHECK(diagonal(x, -2, 0, 1).shape() == Shape{2, 1});
  CHECK(diagonal(x, 5, 0, 1).shape() == Shape{2, 0});
  CHECK(diagonal(x, 0, -1, 0).shape() == Shape{4, 2});
  for (const std::int64_t offset : {-1, 0, 2}) {
    CAPTURE(offset);
    const auto f = [offset](const TensorList& in) { return diagonal(in[0], offset, 1, 0); };
    const GradcheckResult first = gradcheck(f, {x});
    CHECK_MESSAGE(first.passed, first.message());
    const GradcheckResult second = gradgradcheck(f, {x});
    CHECK_MESSAGE(second.passed, second.message());
  }
  CHECK_THROWS_WITH_AS(diagonal(x, 0, 1, -2), "diagonal: axis1 and axis2 must differ, both are 1 of shape (3,4,2)",
                       ValueError);
}

TEST_CASE("einsum: malformed equations and unfitting operands are errors naming the equation") {
  Generator gen(9);
  const Tensor a = randn({2, 3}, gen), b = randn({3, 4}, gen);
  CHECK_THROWS_WITH_AS(einsum("ij,jk->ik->i", {a, b}), "einsum: equation \"ij,jk->ik->i\": more than one \"->\"",
                       ValueError);
  CHECK_THROWS_WITH_AS(einsum("ij,jk", {a}), "einsum: equation \"ij,jk\": 2 input terms for 1 operands", ValueError);
  CHECK_THROWS_WITH_AS(einsum("i1,jk->ik", {a, b}), doctest::Contains("'1' is not a letter"), ValueError);
  CHECK_THROWS_WITH_AS(einsum("..i..., j", {a, b}), doctest::Contains("a \".\" that is not part of \"...\""),
                       ValueError);
  CHECK_THROWS_WITH_AS(einsum("...i...,jk", {a, b}), doctest::Contains("\"...\" twice in \"...i...\""), ValueError);
  CHECK_THROWS_WITH_AS(einsum("ij,jk->iz", {a, b}), doctest::Contains("output label 'z' is in no input"), ValueError);
  CHECK_THROWS_WITH_AS(einsum("ij,jk->ii", {a, b}), doctest::Contains("output label 'i' appears twice"), ValueError);
  CHECK_THROWS_WITH_AS(einsum("ij", {}), "einsum: equation \"ij\": no operands", ValueError);
  CHECK_THROWS_WITH_AS(einsum("ijk,jk->i", {a, b}),
                       "einsum: equation \"ijk,jk->i\": operand 0 has shape (2,3) but its term has 3 labels",
                       ShapeError);
  CHECK_THROWS_WITH_AS(einsum("ij,ik->jk", {a, b}),
                       "einsum: equation \"ij,ik->jk\": label 'i' has size 2 and size 3 (operand 1, shape (3,4))",
                       ShapeError);
  CHECK_THROWS_WITH_AS(einsum("ii->i", {a}),
                       "einsum: equation \"ii->i\": label 'i' has size 2 and size 3 (operand 0, shape (2,3))",
                       ShapeError);
  // Size 1 broadcasts between operands, but a diagonal needs equal sizes.
  CHECK_THROWS_WITH_AS(einsum("ii->i", {randn({1, 3}, gen)}),
                       doctest::Contains("label 'i' is repeated in operand 0 over axes of sizes 1 and 3"), ShapeError);
  CHECK_THROWS_WITH_AS(einsum("ij,jk->ik", {a, b.to(kFloat64)}),
                       "einsum: equation \"ij,jk->ik\": operand 0 is float32 but operand 1 is float64", TypeError);
}
