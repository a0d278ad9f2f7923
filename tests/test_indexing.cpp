// torch-style index lists (tapegrad/autograd/indexing.h): x.index({...}) and x.index_put_({...}, v)
// against the values and gradients PyTorch 1.13 gives for the same Python indexing, on
// x = arange(24).reshape(2, 3, 4); views stay views; gradients against finite differences; nonzero;
// the errors.

#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "tests/testing.h"

using namespace tapegrad;
using namespace tapegrad::indexing;
using tapegrad::testing::check_values;

namespace {

Tensor x24(DType dtype = kFloat32) { return arange(0, 24, 1, dtype).reshape({2, 3, 4}); }

std::vector<double> range(int n) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(i);
  return v;
}

}  // namespace

TEST_CASE("indexing: integers, slices, None and Ellipsis make views with torch's values") {
  const Tensor x = x24();
  // torch: x[:, 0]
  const Tensor a = x.index({Slice(), 0});
  CHECK(a.shape() == Shape{2, 4});
  check_values(a, {0, 1, 2, 3, 12, 13, 14, 15});
  // x[1::2, None]
  CHECK(x.index({Slice(1, None, 2), None}).shape() == Shape{1, 1, 3, 4});
  // x[..., -1]
  check_values(x.index({Ellipsis, -1}), {3, 7, 11, 15, 19, 23});
  CHECK(x.index({Ellipsis, -1}).shape() == Shape{2, 3});
  // x[1, -1, 1:3]
  check_values(x.index({1, -1, Slice(1, 3)}), {21, 22});
  // x[-1:, :, ::3]
  const Tensor b = x.index({Slice(-1, None), Slice(), Slice(None, None, 3)});
  CHECK(b.shape() == Shape{1, 3, 2});
  check_values(b, {12, 15, 16, 19, 20, 23});
  // x[None, True] and x[False]: new axes of size 1 and 0
  CHECK(x.index({None, true}).shape() == Shape{1, 1, 2, 3, 4});
  CHECK(x.index({false}).shape() == Shape{0, 2, 3, 4});
  // A 0-dim bool tensor as well (torch: x[tensor(True)] has shape (1, 2, 3, 4)).
  CHECK(x.index({full({}, 1.0, kBool)}).shape() == Shape{1, 2, 3, 4});
  CHECK(x.index({Slice(), full({}, 0.0, kBool)}).shape() == Shape{2, 0, 3, 4});
  // An empty list, and an Ellipsis standing for nothing, give x's own shape.
  CHECK(x.index({}).shape() == x.shape());
  CHECK(x.index({0, 0, 0, Ellipsis}).dim() == 0);
  // Bounds beyond the axis clamp as Python's do.
  CHECK(x.index({Slice(-10, 10)}).shape() == Shape{2, 3, 4});
  CHECK(x.index({Slice(2, 1)}).shape() == Shape{0, 3, 4});

  // Views: writing one writes x.
  const Tensor y = x24();
  y.index({Slice(), 0}).fill_(-1.0);
  CHECK(y.at({1, 0, 3}) == -1.0);
  CHECK(y.at({1, 1, 0}) == 16.0);
}

TEST_CASE("indexing: index tensors and masks follow torch's advanced indexing") {
  const Tensor x = x24();
  const Tensor r = tensor({1, 0}, kInt64), c = tensor({3, 2}, kInt64);
  // torch: x[r, :, c], the indexed axes apart, the index shape in front
  const Tensor a = x.index({r, Slice(), c});
  CHECK(a.shape() == Shape{2, 3});
  check_values(a, {15, 19, 23, 2, 6, 10});
  // x[:, r2, c2], adjacent: the index shape (2, 2) where the indexed axes were
  const Tensor r2 = tensor({{0, 2}, {1, 1}}, kInt64), c2 = tensor({1, 3}, kInt64);
  const Tensor b = x.index({Slice(), r2, c2});
  CHECK(b.shape() == Shape{2, 2, 2});
  check_values(b, {1, 11, 5, 7, 13, 23, 17, 19});
  // torch applies integers first: x4[:, rows, :, 0] has shape (2, 3, 4), not numpy's (3, 2, 4).
  const Tensor x4 = arange(0, 120, 1).reshape({2, 3, 4, 5});
  const Tensor rows = tensor({2, 0, 1}, kInt64);
  const Tensor d = x4.index({Slice(), rows, Slice(), 0});
  CHECK(d.shape() == Shape{2, 3, 4});
  CHECK(d.at({0, 0, 1}) == x4.at({0, 2, 1, 0}));
  CHECK(d.at({1, 2, 3}) == x4.at({1, 1, 3, 0}));
  // x[m] with a (2, 3) mask: the rows of the true entries, in order
  const Tensor m = tensor({{1, 0, 1}, {0, 0, 1}}).to(kBool);
  const Tensor e = x.index({m});
  CHECK(e.shape() == Shape{3, 4});
  check_values(e, {0, 1, 2, 3, 8, 9, 10, 11, 20, 21, 22, 23});
  // x[:, m1]
  const Tensor f = x.index({Slice(), tensor({0, 1, 1}).to(kBool)});
  CHECK(f.shape() == Shape{2, 2, 4});
  check_values(f, {4, 5, 6, 7, 8, 9, 10, 11, 16, 17, 18, 19, 20, 21, 22, 23});
  // Negative entries count from the end, as in index().
  check_values(x.index({0, tensor({-1}, kInt64)}), {8, 9, 10, 11});
  // A copy: writing it leaves x alone.
  a.fill_(0.0);
  CHECK(x.at({1, 0, 3}) == 15.0);
}

TEST_CASE("indexing: gradients equal torch's and finite differences") {
  const Tensor r = tensor({1, 0}, kInt64), c = tensor({3, 2}, kInt64);
  const Tensor r2 = tensor({{0, 2}, {1, 1}}, kInt64), c2 = tensor({1, 3}, kInt64);
  {
    // torch: (x[r, :, c] * arange(6).reshape(2, 3)).sum().backward()
    const Tensor x = x24(kFloat64).requires_grad_();
    (x.index({r, Slice(), c}) * arange(0, 6, 1, kFloat64).reshape({2, 3})).sum().backward();
    check_values(x.grad(), {0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2}, 1e-15);
  }
  {
    // torch: (x[:, r2, c2] * arange(8).reshape(2, 2, 2)).sum().backward(); r2 repeats (1, 1)
    const Tensor x = x24(kFloat64).requires_grad_();
    (x.index({Slice(), r2, c2}) * arange(0, 8, 1, kFloat64).reshape({2, 2, 2})).sum().backward();
    check_values(x.grad(), {0, 0, 0, 0, 0, 2, 0, 3, 0, 0, 0, 1, 0, 4, 0, 0, 0, 6, 0, 7, 0, 0, 0, 5}, 1e-15);
  }
  Generator gen(5);
  const Tensor m = tensor({{1, 0, 1}, {0, 0, 1}}).to(kBool);
  const std::vector<std::pair<const char*, GradcheckFunction>> cases = {
      {"x[1:, None, ..., ::2]",
       [](const TensorList& in) {
         return in[0].index({Slice(1), None, Ellipsis, Slice(None, None, 2)});
       }},
      {"x[r, :, c]",
       [r, c](const TensorList& in) {
         return in[0].index({r, Slice(), c});
       }},
      {"x[:, r2, c2]",
       [r2, c2](const TensorList& in) {
         return in[0].index({Slice(), r2, c2});
       }},
      {"x[m]", [m](const TensorList& in) { return in[0].index({m}); }},
      {"y[:, 0] = v",
       [](const TensorList& in) {
         const Tensor y = in[0] * 2.0;
         y.index_put_({Slice(), 0}, in[1].select(1, 0));
         return y;
       }},
      {"y[r, :, c] = v",
       [r, c](const TensorList& in) {
         const Tensor y = in[0] * 2.0;
         y.index_put_({r, Slice(), c}, in[1].select(2, 0).narrow(1, 0, 3));
         return y;
       }},
      {"y[:, r2, c2] += v",
       [r2, c2](const TensorList& in) {
         const Tensor y = in[0] * 2.0;
         y.index_put_({Slice(), r2, c2}, in[1].narrow(2, 0, 2).narrow(1, 0, 2), true);
         return y;
       }},
      {"y[m] = 0",
       [m](const TensorList& in) {
         const Tensor y = in[0] * in[1];
         y.index_put_({m}, 1e-15);
         return y;
       }},
  };
  for (const auto& [name, f] : cases) {
    CAPTURE(name);
    const TensorList inputs = {randn({2, 3, 4}, gen, kFloat64).requires_grad_(),
                               randn({2, 3, 4}, gen, kFloat64).requires_grad_()};
    const GradcheckResult first = gradcheck(f, inputs);
    CHECK_MESSAGE(first.passed, first.message());
    const GradcheckResult second = gradgradcheck(f, inputs);
    CHECK_MESSAGE(second.passed, second.message());
  }
}

TEST_CASE("indexing: index_put_ writes what torch writes") {
  const Tensor r = tensor({1, 0}, kInt64), c = tensor({3, 2}, kInt64);
  {
    const Tensor y = x24();
    y.index_put_({Slice(), 0}, 1.0);  // torch: y[:, 0] = 1
    check_values(y, {1, 1, 1, 1, 4, 5, 6, 7, 8, 9, 10, 11, 1, 1, 1, 1, 16, 17, 18, 19, 20, 21, 22, 23}, 1e-15);
  }
  {
    const Tensor y = x24();
    y.index_put_({r, Slice(), c}, tensor({{100, 101, 102}, {200, 201, 202}}));  // torch: y[r, :, c] = v
    check_values(y, {0, 1, 200, 3, 4, 5, 201, 7, 8, 9, 202, 11, 12, 13, 14, 100, 16, 17, 18, 101, 20, 21, 22, 102},
                 1e-15);
  }
  {
    const Tensor y = x24();
    // torch: y[:, r2, c2] = tensor([-1, -2]), values broadcast to the indexed shape (2, 2, 2)
    y.index_put_({Slice(), tensor({{0, 2}, {1, 1}}, kInt64), tensor({1, 3}, kInt64)}, tensor({-1, -2}));
    check_values(y, {0, -1, 2, 3, 4, -1, 6, -2, 8, 9, 10, -2, 12, -1, 14, 15, 16, -1, 18, -2, 20, 21, 22, -2}, 1e-15);
  }
  {
    const Tensor y = x24();
    y.index_put_({tensor({{1, 0, 1}, {0, 0, 1}}).to(kBool)}, 0.0);  // torch: y[m] = 0
    check_values(y, {0, 0, 0, 0, 4, 5, 6, 7, 0, 0, 0, 0, 12, 13, 14, 15, 16, 17, 18, 19, 0, 0, 0, 0}, 1e-15);
  }
  {
    // torch: z.index_put_((tensor([0, 0, 1]), tensor([1, 1, 4])), tensor([10, 20, 30]), accumulate=True)
    const Tensor z = zeros({2, 5});
    z.index_put_({tensor({0, 0, 1}, kInt64), tensor({1, 1, 4}, kInt64)}, tensor({10, 20, 30}), true);
    check_values(z, {0, 30, 0, 0, 0, 0, 0, 0, 0, 30}, 1e-15);
  }
  {
    // accumulate without index tensors adds into the view
    const Tensor y = x24();
    y.index_put_({1, Slice(1, 2)}, tensor({1, 1, 1, 1}), true);
    check_values(y.index({1, 1}), {17, 18, 19, 20}, 1e-15);
  }
}

TEST_CASE("indexing: nonzero gives coordinates in row-major order") {
  const Tensor m = tensor({{0, 2, 0}, {-1, 0, 3}});
  const Tensor nz = nonzero(m);
  CHECK(nz.dtype() == kInt64);
  CHECK(nz.shape() == Shape{3, 2});
  check_values(nz, {0, 1, 1, 0, 1, 2}, 1e-15);
  CHECK(nonzero(zeros({4})).shape() == Shape{0, 1});
  CHECK(nonzero(full({}, 2.0)).shape() == Shape{1, 0});
  CHECK(nonzero(full({}, std::nan(""))).shape() == Shape{1, 0});  // NaN is nonzero, as in torch
  check_values(nonzero(tensor({0, 1, 1}).to(kBool)), {1, 2}, 1e-15);
  check_values(nonzero(arange(0, 6, 1)), {1, 2, 3, 4, 5}, 1e-15);
}

TEST_CASE("indexing: errors name the op, the item's position and the values") {
  const Tensor x = x24();
  CHECK_THROWS_WITH_AS(x.index({0, 3}),
                       "index: index 3 at position 1 is out of range for an axis of size 3 (shape (2,3,4))",
                       IndexError);
  CHECK_THROWS_WITH_AS(x.index({0, 0, 0, 0}),
                       "index: the index list takes 4 axes but the tensor of shape (2,3,4) has 3", IndexError);
  CHECK_THROWS_WITH_AS(x.index({Ellipsis, 0, Ellipsis}),
                       "index: a second Ellipsis at position 2 (an index list may hold one)", IndexError);
  CHECK_THROWS_WITH_AS(x.index({Slice(None, None, -1)}), "index: the Slice at position 0 has step -1, not positive",
                       ValueError);
  CHECK_THROWS_WITH_AS(x.index({Slice(), tensor({1.0})}),
                       "index: the tensor at position 1 is float32; index tensors must be int64 or bool", TypeError);
  CHECK_THROWS_WITH_AS(x.index({Slice(), tensor({1, 0}).to(kBool)}),
                       "index: the mask at position 1 has shape (2) but the axes it covers have shape (3)", IndexError);
  CHECK_THROWS_WITH_AS(x.index({Tensor()}), "index: the tensor at position 0 is undefined", ValueError);
  CHECK_THROWS_WITH_AS(x.index_put_({Slice(), tensor({0, 1}, kInt64), 0}, tensor({1, 2, 3})),
                       "index_put_: shapes (3) and (2,2) cannot be broadcast together", ShapeError);
  CHECK_THROWS_WITH_AS(
      x.index_put_({Slice(), tensor({0, 1}, kInt64), 0}, zeros({2, 2, 2})),
      "index_put_: values of shape (2,2,2) do not broadcast to (2,2), the shape of the entries indexed", ShapeError);
  CHECK_THROWS_WITH_AS(x.index_put_({0, 5}, 1.0),
                       "index_put_: index 5 at position 1 is out of range for an axis of size 3 (shape (2,3,4))",
                       IndexError);
  CHECK_THROWS_WITH_AS(x.index_put_({Slice(), tensor({0, 1}, kInt64)}, zeros({2, 2, 4}, kInt64)),
                       "index_put: x is float32 but values are int64", TypeError);
  CHECK_THROWS_WITH_AS(x.index({tensor({0, 1}, kInt64), tensor({0.0, 1.0})}),
                       "index: the tensor at position 1 is float32; index tensors must be int64 or bool", TypeError);
  CHECK_THROWS_WITH_AS(index(x, TensorList{tensor({0, 1}, kInt64), tensor({0.0, 1.0})}),
                       "index: every index must be an int64 tensor, got float32", TypeError);
  // Nothing was written by the refused calls.
  check_values(x, range(24), 1e-15);
  // An expanded tensor's entries share memory: a write through an index tensor is refused, as torch
  // refuses it; a row of it is an ordinary view and takes the write.
  const Tensor base = zeros({3});
  CHECK_THROWS_WITH_AS(base.expand({2, 3}).index_put_({tensor({0}, kInt64)}, 1.0),
                       "index_put_: the tensor written in place (shape (2,3), strides (0,1)) has elements that share "
                       "memory, as an expanded tensor does; clone() it first",
                       ValueError);
  check_values(base, {0, 0, 0});
  base.expand({2, 3}).index_put_({0}, 1.0);
  check_values(base, {1, 1, 1});
}
