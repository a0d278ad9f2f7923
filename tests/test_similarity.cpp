// norm (ops), nn::normalize and nn::cosine_similarity: values and gradients against PyTorch 1.13
// (torch.linalg.vector_norm, F.normalize, F.cosine_similarity in float64), float64 gradchecks, the zero-vector and
// below-eps cases, and errors.

#include <doctest/doctest.h>

#include <limits>

#include "tapegrad/nn/similarity.h"
#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::check_gradients;
using tapegrad::testing::check_values;

namespace {

Tensor leaf(const std::vector<double>& values, const Shape& shape) {
  return from_vector(values, shape).requires_grad_();
}

}  // namespace

TEST_CASE("norm: p = 2, 1, 3, infinity along an axis and over everything, against torch") {
  struct Case {
    double p;
    std::vector<double> value, grad;
  };
  const double inf = std::numeric_limits<double>::infinity();
  // x = [[3, -4, 0], [2, -2, 1]], upstream u = [1, -2] on the row norms.
  const std::vector<Case> cases{
      {2.0, {5.0, 3.0}, {0.6, -0.8, 0.0, -4.0 / 3, 4.0 / 3, -2.0 / 3}},
      {1.0, {7.0, 5.0}, {1.0, -1.0, 0.0, -2.0, 2.0, -2.0}},
      {3.0,
       {4.497941445275415, 2.571281590658235},
       {0.4448513517305356, -0.7908468475209521, 0.0, -1.2100148661921108, 1.2100148661921108, -0.3025037165480277}},
      // The tie |2| = |-2| shares the gradient: each gets half.
      {inf, {4.0, 2.0}, {0.0, -1.0, 0.0, -1.0, 1.0, 0.0}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.p);
    Tensor x = leaf({3, -4, 0, 2, -2, 1}, {2, 3});
    const Tensor n = norm(x, c.p, {1});
    check_values(n, c.value, 1e-12);
    (n * from_vector(std::vector<double>{1.0, -2.0}, {2})).sum().backward();
    check_values(x.grad(), c.grad, 1e-12);
  }
  Tensor x = leaf({3, -4, 0, 2, -2, 1}, {2, 3});
  Tensor all = norm(x);
  CHECK(all.dim() == 0);
  check_values(all, {5.830951894845301}, 1e-14);
  all.backward();
  check_values(
      x.grad(),
      {0.5144957554275265, -0.6859943405700353, 0.0, 0.34299717028501764, -0.34299717028501764, 0.17149858514250882},
      1e-12);
  CHECK(norm(x.detach(), 2.0, {1}, /*keepdim=*/true).shape() == Shape{2, 1});

  Generator gen(0);
  for (double p : {1.0, 1.5, 2.0, 3.0}) {
    CAPTURE(p);
    // Away from 0 (|x| has a kink there).
    Tensor y = randn({3, 4}, gen, kFloat64);
    y = where(lt(abs(y), 0.1), y + 0.5, y);
    check_gradients([p](const TensorList& in) { return norm(in[0], p, {1}); }, {y});
    check_gradients([p](const TensorList& in) { return norm(in[0], p, {0, 1}); }, {y});
  }
  // The zero vector: gradient 0, not NaN.
  Tensor zero = zeros({3}, kFloat64).requires_grad_();
  norm(zero).backward();
  check_values(zero.grad(), {0.0, 0.0, 0.0});
  CHECK_THROWS_WITH_AS(norm(x, 0.0), "norm: p must be positive (or infinity), got 0", ValueError);
  CHECK_THROWS_AS(norm(from_vector(std::vector<std::int64_t>{1, 2}, {2})), TypeError);
}

TEST_CASE("normalize: rows of unit p-norm, zero rows stay zero, below-eps rows divided by eps (torch values)") {
  // x rows: zero, [3, 4, -12] (2-norm 13), [1e-13, 0, 0] (below eps = 1e-12); upstream u.
  const std::vector<double> u{1, 2, 3, 3, -1, 0.5, 1, 1, 1};
  struct Case {
    double p;
    std::vector<double> value, middle_grad;
  };
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<Case> cases{
      {2.0,
       {0.23076923076923078, 0.3076923076923077, -0.9230769230769231},
       {0.2321347291761493, -0.07510241238051889, 0.03299954483386436}},
      {1.0,
       {0.15789473684210525, 0.21052631578947367, -0.631578947368421},
       {0.16066481994459833, -0.04986149584487534, 0.023545706371191133}},
      {3.0,
       {0.24575952277998406, 0.3276793637066454, -0.9830380911199362},
       {0.24616484359820284, -0.0811992705831613, 0.034474787371830275}},
      {inf, {0.25, 1.0 / 3, -1.0}, {0.25, -0.08333333333333333, 0.034722222222222224}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.p);
    Tensor x = leaf({0, 0, 0, 3, 4, -12, 1e-13, 0, 0}, {3, 3});
    const Tensor y = nn::normalize(x, c.p);
    std::vector<double> expected{0, 0, 0};
    expected.insert(expected.end(), c.value.begin(), c.value.end());
    expected.insert(expected.end(), {0.1, 0.0, 0.0});
    check_values(y, expected, 1e-12);
    (y * from_vector(u, {3, 3})).sum().backward();
    std::vector<double> grad{1e12, 2e12, 3e12};  // u / eps: the clamped denominator is a constant
    grad.insert(grad.end(), c.middle_grad.begin(), c.middle_grad.end());
    grad.insert(grad.end(), {1e12, 1e12, 1e12});
    check_values(x.grad(), grad, 1e-10);
  }
  Generator gen(1);
  const Tensor y = randn({2, 3, 4}, gen, kFloat64);
  check_gradients([](const TensorList& in) { return nn::normalize(in[0]); }, {y});
  check_gradients([](const TensorList& in) { return nn::normalize(in[0], 3.0, -1); }, {y});
  // Along the last axis every row has norm 1.
  check_values(norm(nn::normalize(y, 2.0, -1), 2.0, {-1}), std::vector<double>(6, 1.0), 1e-14);
}

TEST_CASE("cosine_similarity: torch values, broadcasting, tiny norms clamped per vector, gradients") {
  Tensor a = leaf({1, 2, 3, 0.5, -1, 2, 1e-9, 2e-9, 0}, {3, 3});
  Tensor b = leaf({-1, 0.5, 2, 1e-10, 0, 0, 1, 2, 3}, {3, 3});
  // Row 2: |b| = 1e-10 < eps, so b is divided by eps (PyTorch 1.13 clamps each norm on its own).
  const Tensor c = nn::cosine_similarity(a, b);
  CHECK(c.shape() == Shape{3});
  check_values(c, {0.6998542122237652, 0.002182178902359924, 0.1336306209562122}, 1e-12);
  // Gradient against torch where no norm is clamped.
  Tensor x1 = leaf({1, 2, 3}, {1, 3});
  Tensor x2 = leaf({-1, 0.5, 2}, {1, 3});
  nn::cosine_similarity(x1, x2).sum().backward();
  // d cos / d x1 = x2 / (|x1||x2|) - cos x1 / |x1|^2.
  const double n1 = std::sqrt(14.0), n2 = std::sqrt(5.25), cosine = 6.0 / (n1 * n2);
  check_values(x1.grad(),
               {-1 / (n1 * n2) - cosine / 14, 0.5 / (n1 * n2) - 2 * cosine / 14, 2 / (n1 * n2) - 3 * cosine / 14},
               1e-12);
  // dim 0 with x2 (3, 1) broadcast against x1 (3, 2).
  const Tensor a2 = from_vector(std::vector<double>{1, 2, 3, -4, 0.5, 1}, {3, 2});
  const Tensor b2 = from_vector(std::vector<double>{2, 1, -1}, {3, 1});
  check_values(nn::cosine_similarity(a2, b2, 0), {0.5738190417570045, -0.08908708063747481}, 1e-12);
  Generator gen(2);
  check_gradients([](const TensorList& in) { return nn::cosine_similarity(in[0], in[1], -1); },
                  {randn({4, 5}, gen, kFloat64), randn({5}, gen, kFloat64)});
  CHECK_THROWS_AS(nn::cosine_similarity(a2, from_vector(std::vector<double>{1, 2}, {2, 1}), 0), ShapeError);
}

TEST_CASE("nearest_neighbors: the most cosine-similar rows, best first, the query's own row left out") {
  // Rows at known angles to the query (1, 0): 0 deg, 30 deg (scaled x5), 60 deg, 90 deg, 180 deg.
  const double pi = std::acos(-1.0);
  std::vector<double> rows;
  for (double deg : {0.0, 30.0, 60.0, 90.0, 180.0}) {
    const double scale = deg == 30.0 ? 5.0 : 1.0;
    rows.push_back(scale * std::cos(deg * pi / 180));
    rows.push_back(scale * std::sin(deg * pi / 180));
  }
  const Tensor table = from_vector(rows, {5, 2});
  const nn::Neighbors n = nn::nearest_neighbors(table, from_vector(std::vector<double>{2.0, 0.0}, {2}), 3);
  CHECK(n.indices.to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 1, 2});
  CHECK(n.similarities.at({0}) == doctest::Approx(1.0));
  CHECK(n.similarities.at({1}) == doctest::Approx(std::cos(pi / 6)));
  CHECK(n.similarities.at({2}) == doctest::Approx(0.5));
  // A batch of queries, each leaving out its own row: row 0's neighbours are 1 then 2; row 4's are 3 then 2.
  const nn::Neighbors b =
      nn::nearest_neighbors(table, index_select(table, 0, from_vector(std::vector<std::int64_t>{0, 4}, {2})), 2,
                            from_vector(std::vector<std::int64_t>{0, 4}, {2}));
  CHECK(b.indices.to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 2, 3, 2});
  CHECK(b.similarities.at({1, 0}) == doctest::Approx(0.0).scale(1.0));
  CHECK(b.similarities.at({1, 1}) == doctest::Approx(-0.5));
  CHECK_THROWS_WITH_AS(nn::nearest_neighbors(table, zeros({3}, kFloat64), 1),
                       "nearest_neighbors: expected a table (V, D) and queries (Q, D) or (D), got (5,2) and (3)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(nn::nearest_neighbors(table, zeros({2}, kFloat64), 5, scalar_tensor(0, kInt64)),
                       "nearest_neighbors: k must be in [1, 4] for a table of 5 rows less the excluded one, got 5",
                       ValueError);
  CHECK_THROWS_WITH_AS(nn::nearest_neighbors(table, zeros({2}, kFloat64), 2, scalar_tensor(7, kInt64)),
                       "nearest_neighbors: excluded row 7 is outside [-1, 5)", ValueError);
}
