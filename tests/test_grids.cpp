// meshgrid, cartesian_prod, kron, diag_embed, cdist, tril/triu_indices, searchsorted, bucketize and
// histc (ops.h, ops/grids.cpp): values from torch 1.13's documentation and runs, gradchecks of the
// differentiable ones, and the errors.

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "tapegrad/autograd/autograd.h"
#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::check_gradients;
using tapegrad::testing::check_values;
using tapegrad::testing::max_abs_diff;

namespace {

std::vector<std::int64_t> ints(const Tensor& t) { return t.to_vector<std::int64_t>(); }

}  // namespace

TEST_CASE("grids: meshgrid in both indexings, cartesian_prod, kron and diag_embed") {
  const Tensor a = tensor({1.0, 2.0, 3.0}, kFloat64), b = tensor({10.0, 20.0}, kFloat64);
  const std::vector<Tensor> ij = meshgrid({a, b});
  CHECK(ij[0].shape() == Shape{3, 2});
  CHECK(ij[0].to_vector<double>() == std::vector<double>{1, 1, 2, 2, 3, 3});
  CHECK(ij[1].to_vector<double>() == std::vector<double>{10, 20, 10, 20, 10, 20});
  const std::vector<Tensor> xy = meshgrid({a, b}, MeshIndexing::XY);
  CHECK(xy[0].shape() == Shape{2, 3});
  CHECK(xy[0].to_vector<double>() == std::vector<double>{1, 2, 3, 1, 2, 3});
  CHECK(xy[1].to_vector<double>() == std::vector<double>{10, 10, 10, 20, 20, 20});
  CHECK(cartesian_prod({a, b}).to_vector<double>() == std::vector<double>{1, 10, 1, 20, 2, 10, 2, 20, 3, 10, 3, 20});
  CHECK_THROWS_WITH_AS(meshgrid({a, b.reshape({1, 2})}), "meshgrid: tensor 1 must be 1-D, got (1,2)", ShapeError);
  CHECK_THROWS_WITH_AS(cartesian_prod({}), "cartesian_prod: expected at least one tensor", ValueError);
  CHECK_THROWS_WITH_AS(kron(ones({1, 1, 1, 1, 2}), ones({2})),
                       "kron: inputs of at most 4 axes (its product takes twice as many), got (1,1,1,1,2) and (2)",
                       ShapeError);

  // torch's documented kron(eye(2), ones(2, 2)), and a vector against a matrix (leading 1s).
  CHECK(kron(eye(2, std::nullopt, kFloat64), ones({2, 2}, kFloat64)).to_vector<double>() ==
        std::vector<double>{1, 1, 0, 0, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0, 1, 1});
  const Tensor mat = tensor({1.0, 10.0, 100.0, 1000.0}, kFloat64).reshape({2, 2});
  CHECK(kron(tensor({1.0, 2.0}, kFloat64), mat).to_vector<double>() ==
        std::vector<double>{1, 10, 2, 20, 100, 1000, 200, 2000});

  const Tensor x = tensor({1.0, 2.0, 3.0, 4.0, 5.0, 6.0}, kFloat64).reshape({2, 3});
  const Tensor above = diag_embed(x, 1);  // torch: (2, 4, 4), x[n, i] at [i, i + 1]
  CHECK(above.shape() == Shape{2, 4, 4});
  CHECK(above.select(0, 0).to_vector<double>() == std::vector<double>{0, 1, 0, 0, 0, 0, 2, 0, 0, 0, 0, 3, 0, 0, 0, 0});
  CHECK(diag_embed(x, -1).select(0, 1).to_vector<double>() ==
        std::vector<double>{0, 0, 0, 0, 4, 0, 0, 0, 0, 5, 0, 0, 0, 0, 6, 0});
  CHECK(max_abs_diff(diagonal(diag_embed(x), 0, -2, -1), x) == 0.0);
  CHECK_THROWS_WITH_AS(diag_embed(x, std::numeric_limits<std::int64_t>::min()),
                       "diag_embed: offset -9223372036854775808 is outside [-2^31, 2^31]", ValueError);

  Generator gen(101);
  const Tensor u = randn({2, 3}, gen, kFloat64), v = randn({3, 2}, gen, kFloat64);
  check_gradients([](const TensorList& in) { return kron(in[0], in[1]); }, {u, v});
  check_gradients([](const TensorList& in) { return diag_embed(in[0], -2); }, {u});
  check_gradients(
      [](const TensorList& in) {
        return cartesian_prod({in[0], in[1]});
      },
      {u.select(0, 0), v.select(1, 0)});
}

TEST_CASE("grids: cdist matches torch's distances, with a zero distance's gradient 0") {
  const Tensor a = tensor({0.0, 1.0, 2.0, -1.0, 1.5, 0.5}, kFloat64).reshape({3, 2});
  const Tensor b = tensor({1.0, 1.0, 0.0, 1.0}, kFloat64).reshape({2, 2});
  check_values(cdist(a, b), {1.0, 0.0, 2.23606797749979, 2.8284271247461903, 0.7071067811865476, 1.5811388300841898},
               1e-15);
  check_values(cdist(a, b, 1.0), {1.0, 0.0, 3.0, 4.0, 1.0, 2.0}, 1e-15);
  check_values(cdist(a, b, 3.0),
               {1.0, 0.0, 2.080083823051904, 2.5198420997897464, 0.6299605249474366, 1.5182944859378311}, 1e-15);
  const Tensor x1 = a.clone().requires_grad_(true);
  sum(cdist(x1, b)).backward();  // a[0] == b[1]: that pair adds nothing
  check_values(x1.grad().select(0, 0), {-1.0, 0.0}, 1e-15);
  Generator gen(102);
  check_gradients([](const TensorList& in) { return cdist(in[0], in[1], 2.5); },
                  {randn({2, 3, 4}, gen, kFloat64), randn({2, 5, 4}, gen, kFloat64)});
  CHECK_THROWS_WITH_AS(cdist(a, b, -1.0), "cdist: p must be non-negative, got -1", ValueError);
  CHECK_THROWS_WITH_AS(cdist(a, b, std::nan("")), "cdist: p must be non-negative, got nan", ValueError);
  CHECK_THROWS_WITH_AS(cdist(a.to(kInt64), b.to(kInt64)), "cdist: expected floating-point tensors, got int64 and int64",
                       TypeError);
  CHECK_THROWS_WITH_AS(cdist(a, b.narrow(1, 0, 1)),
                       "cdist: expected x1 (..., P, M) and x2 (..., R, M) with the same M, got (3,2) and (2,1)",
                       ShapeError);
}

TEST_CASE("grids: cdist's product form past 25 rows, p = 0 and p = infinity, as torch's") {
  // a = 2 sin(0.7 k) as (30, 3), b = cos(1.3 k) as (4, 3): 30 rows take torch's product form; the values
  // and the gradient of sum(d * w), w = arange(120) / 100 as (30, 4), printed by PyTorch 1.13 in float64.
  const Tensor a = (sin(arange(0, 90, 1, kFloat64) * 0.7) * 2.0).reshape({30, 3});
  const Tensor b = cos(arange(0, 12, 1, kFloat64) * 1.3).reshape({4, 3});
  const Tensor w = arange(0, 120, 1, kFloat64).reshape({30, 4}) / 100.0;
  const Tensor ra = a.clone().requires_grad_(true), rb = b.clone().requires_grad_(true);
  const Tensor d = cdist(ra, rb);
  check_values(d.select(0, 0), {3.1683903815962395, 1.4791553041600844, 3.378423355633548, 2.2614777488217013}, 1e-13);
  CHECK(std::abs(d.select(0, 29).select(0, 3).item() - 3.85671644759944) < 1e-13);
  sum(d * w).backward();
  check_values(ra.grad().select(0, 0), {-0.00400245708756256, 0.02383509399835963, 0.05000655379676802}, 1e-13);
  check_values(rb.grad().select(0, 1), {-5.5629933008063475, 1.3193188206102064, 4.268275488395135}, 1e-12);
  // The forms agree to cancellation error; every mode runs for p = 2 at any size.
  CHECK(max_abs_diff(d, cdist(a, b, 2.0, CdistMode::DonotMmForEuclid)) < 1e-12);
  CHECK(max_abs_diff(cdist(b, b, 2.0, CdistMode::MmForEuclid), cdist(b, b)) < 1e-7);

  // float64 gradcheck of the product form, batch axes broadcast: x1 (2, 26, 3), x2 (1, 4, 3).
  Generator gen(103);
  check_gradients([](const TensorList& in) { return cdist(in[0], in[1]); },
                  {randn({2, 26, 3}, gen, kFloat64), randn({1, 4, 3}, gen, kFloat64)});
  // A zero distance adds nothing to either gradient, as in the other form: a row of x2 equal to x1's first.
  // Quarters of small integers, so that every square, product and sum is exact and the distance is 0.
  const Tensor x1 = (randint(-8, 8, {27, 2}, gen).to(kFloat64) / 4.0).requires_grad_(true);
  const Tensor twin = concat({x1.detach().narrow(0, 0, 1), tensor({{5.0, 5.0}}, kFloat64)}, 0);
  sum(cdist(x1, twin)).backward();
  const Tensor direct = x1.detach().clone().requires_grad_(true);
  sum(cdist(direct, twin, 2.0, CdistMode::DonotMmForEuclid)).backward();
  CHECK(max_abs_diff(x1.grad(), direct.grad()) < 1e-12);
  CHECK(std::isfinite(max(abs(x1.grad())).item()));

  // Under autocast the product form runs in float32 and returns float32, from float32 or bfloat16 rows.
  {
    AutocastGuard autocast(kBFloat16);
    CHECK(cdist(a.to(kFloat32), b.to(kFloat32)).dtype() == kFloat32);
    CHECK(cdist(a.to(kBFloat16), b.to(kFloat32)).dtype() == kFloat32);
    CHECK(cdist(a.to(kBFloat16), b.to(kBFloat16)).dtype() == kFloat32);
    CHECK(cdist(b.to(kBFloat16), b.to(kBFloat16)).dtype() == kFloat32);  // 4 rows: the difference form
    CHECK(max_abs_diff(cdist(a.to(kFloat32), b.to(kFloat32)).to(kFloat64), d.detach()) < 1e-5);
  }

  // p = 0 counts the coordinates that differ, with a zero gradient; p = infinity the largest difference.
  const Tensor x = tensor({{0.0, 1.0, 2.0}, {1.0, 1.0, 0.0}}, kFloat64);
  const Tensor y = tensor({{0.0, 1.0, 2.5}, {3.0, 1.0, 0.0}, {0.0, 1.0, 2.0}}, kFloat64);
  check_values(cdist(x, y, 0.0), {1, 2, 0, 2, 1, 2}, 1e-15);
  check_values(cdist(x, y, HUGE_VAL), {0.5, 3, 0, 2.5, 2, 2}, 1e-15);
  // An infinite coordinate is one more that differs, and its gradient is 0 too.
  const Tensor rx = tensor({{0.0, 1.0, HUGE_VAL}, {1.0, 1.0, 0.0}}, kFloat64).requires_grad_(true);
  check_values(cdist(rx, y, 0.0), {1, 2, 1, 2, 1, 2}, 1e-15);
  sum(cdist(rx, y, 0.0)).backward();
  check_values(rx.grad(), {0, 0, 0, 0, 0, 0}, 1e-15);
}

TEST_CASE("grids: tril_indices, triu_indices, searchsorted, bucketize and histc as torch's") {
  CHECK(ints(tril_indices(3, 3)) == std::vector<std::int64_t>{0, 1, 1, 2, 2, 2, 0, 0, 1, 0, 1, 2});
  CHECK(ints(tril_indices(4, 3, -1)) == std::vector<std::int64_t>{1, 2, 2, 3, 3, 3, 0, 0, 1, 0, 1, 2});
  CHECK(ints(triu_indices(3, 3)) == std::vector<std::int64_t>{0, 0, 0, 1, 1, 2, 0, 1, 2, 1, 2, 2});
  CHECK(ints(triu_indices(4, 3, -1)) ==
        std::vector<std::int64_t>{0, 0, 0, 1, 1, 1, 2, 2, 3, 0, 1, 2, 0, 1, 2, 1, 2, 2});
  CHECK(tril_indices(0, 4).shape() == Shape{2, 0});

  // torch's documented examples.
  const Tensor sorted = tensor({1.0, 3.0, 5.0, 7.0, 9.0, 2.0, 4.0, 6.0, 8.0, 10.0}).reshape({2, 5});
  const Tensor values = tensor({3.0, 6.0, 9.0, 3.0, 6.0, 9.0}).reshape({2, 3});
  CHECK(ints(searchsorted(sorted, values)) == std::vector<std::int64_t>{1, 3, 4, 1, 2, 4});
  CHECK(ints(searchsorted(sorted, values, true)) == std::vector<std::int64_t>{2, 3, 5, 1, 3, 4});
  const Tensor boundaries = tensor({1.0, 3.0, 5.0, 7.0, 9.0});
  CHECK(ints(bucketize(values, boundaries)) == std::vector<std::int64_t>{1, 3, 4, 1, 3, 4});
  CHECK(ints(bucketize(values, boundaries, true)) == std::vector<std::int64_t>{2, 3, 5, 2, 3, 5});
  CHECK(bucketize(values, boundaries).shape() == Shape{2, 3});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(ints(searchsorted(tensor({1.0, 2.0, nan}, kFloat64), tensor({nan, 2.0, 5.0}, kFloat64))) ==
        std::vector<std::int64_t>{3, 1, 3});  // torch 1.13's answers
  CHECK_THROWS_WITH_AS(searchsorted(sorted, values.reshape({3, 2})),
                       "searchsorted: sorted (2,5) and values (3,2) must have the same leading axes (or sorted 1-D)",
                       ShapeError);

  check_values(histc(tensor({1.0, 2.0, 1.0, 7.0, -1.0, 3.0}), 4, 0.0, 3.0), {0, 2, 1, 1}, 1e-30);
  check_values(histc(tensor({1.0, 2.0, 1.0, 4.0}), 3), {2, 1, 1}, 1e-30);  // the data's range
  check_values(histc(tensor({2.0, 2.0}), 4), {0, 0, 2, 0}, 1e-30);         // constant data: [1, 3]
  CHECK(histc(tensor({1.0}).requires_grad_(true), 2).requires_grad() == false);
  CHECK_THROWS_WITH_AS(histc(tensor({1.0}), 0), "histc: bins must be at least 1, got 0", ValueError);
  CHECK_THROWS_WITH_AS(histc(tensor({1.0}), 2, 3.0, 1.0), "histc: min 3 is above max 1", ValueError);
  CHECK_THROWS_WITH_AS(histc(tensor({1.0}), 2, -std::numeric_limits<double>::infinity(), 1.0),
                       "histc: min and max must be finite, got -inf and 1", ValueError);
}
