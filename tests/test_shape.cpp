// Shape ops: views share storage, copies happen only when strides demand them, gradients map
// back onto the input's shape.

#include <doctest/doctest.h>

#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::check_gradients;
using tapegrad::testing::check_values;

TEST_CASE("shape: reshape and view share storage when strides allow") {
  Tensor x = arange(0.0, 6.0, 1.0);
  Tensor r = x.reshape({2, 3});
  CHECK(r.shape() == Shape{2, 3});
  CHECK(r.data_ptr<float>() == x.data_ptr<float>());
  CHECK(x.reshape({3, -1}).shape() == Shape{3, 2});
  CHECK(x.reshape({-1}).shape() == Shape{6});
  CHECK(x.view({1, 2, 3}).strides() == Dims{6, 3, 1});
  CHECK(scalar_tensor(2.0).reshape({1, 1}).shape() == Shape{1, 1});

  Tensor t = r.transpose(0, 1);  // (3, 2), strides (1, 3)
  CHECK_FALSE(t.is_contiguous());
  Tensor copied = t.reshape({6});  // no view exists: copies
  check_values(copied, {0, 3, 1, 4, 2, 5});
  CHECK(copied.data_ptr<float>() != x.data_ptr<float>());
  // Splitting one axis of a transposed tensor is still a view.
  Tensor split_view = t.reshape({3, 2, 1});
  CHECK(split_view.data_ptr<float>() == x.data_ptr<float>());
  CHECK(x.reshape({2, 3}).flatten().shape() == Shape{6});
  CHECK(zeros({2, 3, 4}).flatten(1).shape() == Shape{2, 12});
  CHECK(zeros({2, 3, 4}).flatten(0, 1).shape() == Shape{6, 4});
}

TEST_CASE("shape: transpose, permute, squeeze, unsqueeze, expand") {
  Tensor x = arange(0.0, 6.0, 1.0).reshape({2, 3});
  check_values(x.transpose(0, 1), {0, 3, 1, 4, 2, 5});
  check_values(x.mT(), {0, 3, 1, 4, 2, 5});
  Tensor y = arange(0.0, 24.0, 1.0).reshape({2, 3, 4});
  Tensor p = y.permute({2, 0, 1});
  CHECK(p.shape() == Shape{4, 2, 3});
  CHECK(p.at({3, 1, 2}) == y.at({1, 2, 3}));
  CHECK(x.unsqueeze(0).shape() == Shape{1, 2, 3});
  CHECK(x.unsqueeze(-1).shape() == Shape{2, 3, 1});
  CHECK(x.unsqueeze(1).squeeze(1).shape() == Shape{2, 3});
  Tensor e = tensor({1, 2, 3}).expand({2, 3});
  check_values(e, {1, 2, 3, 1, 2, 3});
  CHECK(e.strides() == Dims{0, 1});
  CHECK(tensor({1, 2}).reshape({2, 1}).expand({-1, 3}).shape() == Shape{2, 3});
  CHECK(broadcast_to(tensor({5}), {2, 2}).sum().item() == 20.0);
}

TEST_CASE("shape: narrow, slice and select are views with offsets") {
  Tensor x = arange(0.0, 12.0, 1.0).reshape({3, 4});
  check_values(x.narrow(1, 1, 2), {1, 2, 5, 6, 9, 10});
  check_values(x.narrow(0, -1, 1), {8, 9, 10, 11});
  check_values(x.slice(1, 0, 4, 2), {0, 2, 4, 6, 8, 10});
  check_values(x.slice(1, -2, 100), {2, 3, 6, 7, 10, 11});  // Python clamping
  CHECK(x.slice(0, 2, 1).shape() == Shape{0, 4});           // empty
  check_values(x.select(0, 1), {4, 5, 6, 7});
  check_values(x.select(1, -1), {3, 7, 11});
  CHECK(x.select(1, 2).data_ptr<float>() == x.data_ptr<float>() + 2);
}

TEST_CASE("shape: concat, stack, split and chunk") {
  Tensor a = tensor({{1, 2}, {3, 4}});
  Tensor b = tensor({{5, 6}});
  check_values(concat({a, b}, 0), {1, 2, 3, 4, 5, 6});
  check_values(concat({a, a.transpose(0, 1)}, 1), {1, 2, 1, 3, 3, 4, 2, 4});
  Tensor s = stack({tensor({1, 2}), tensor({3, 4})}, 1);
  CHECK(s.shape() == Shape{2, 2});
  check_values(s, {1, 3, 2, 4});
  auto pieces = split(arange(0.0, 5.0, 1.0), 2, 0);
  REQUIRE(pieces.size() == 3);
  check_values(pieces[2], {4});
  auto sized = split(arange(0.0, 5.0, 1.0), std::vector<std::int64_t>{1, 4}, 0);
  check_values(sized[1], {1, 2, 3, 4});
  auto chunks = chunk(arange(0.0, 6.0, 1.0).reshape({2, 3}), 3, 1);
  REQUIRE(chunks.size() == 3);
  check_values(chunks[1], {1, 4});
}

TEST_CASE("shape: gradcheck of every view and join, including non-contiguous inputs") {
  Generator gen(0);
  const Tensor x = randn({3, 4}, gen);
  const Tensor y = randn({2, 4}, gen);
  const Tensor w = randn({2, 3, 4}, gen);
  check_gradients([](const TensorList& t) { return t[0].reshape({4, 3}) * 2.0; }, {x});
  check_gradients([](const TensorList& t) { return t[0].transpose(0, 1).reshape({12}); }, {x});  // copying reshape
  check_gradients([](const TensorList& t) { return t[0].view({2, 6}); }, {x});
  check_gradients([](const TensorList& t) { return t[0].flatten(); }, {w});
  check_gradients([](const TensorList& t) { return t[0].permute({1, 2, 0}) * t[0].permute({1, 2, 0}); }, {w});
  check_gradients([](const TensorList& t) { return t[0].unsqueeze(1).squeeze(1).exp(); }, {x});
  check_gradients([](const TensorList& t) { return t[0].unsqueeze(0).expand({5, 3, 4}); }, {x});
  check_gradients([](const TensorList& t) { return t[0].narrow(1, 1, 2); }, {x});
  check_gradients([](const TensorList& t) { return t[0].slice(1, 0, 4, 3) + t[0].slice(1, 1, 4, 2).sum(); }, {x});
  check_gradients([](const TensorList& t) { return t[0].transpose(0, 1).select(1, 2); }, {x});
  check_gradients([](const TensorList& t) { return concat({t[0], t[1], t[0].narrow(0, 0, 1)}, 0); }, {x, y});
  check_gradients([](const TensorList& t) { return concat({t[0].transpose(0, 1), t[1].transpose(0, 1)}, 1); }, {x, y});
  check_gradients([](const TensorList& t) { return stack({t[0].narrow(0, 0, 2), t[1]}, 1); }, {x, y});
  check_gradients(
      [](const TensorList& t) {
        auto parts = split(t[0], 3, 1);  // widths 3 and 1
        return parts[0].sum({1}) * parts[1].squeeze(1);
      },
      {x});
}

TEST_CASE("shape: split, chunk and unbind make one node whose backward runs once") {
  Generator gen(4);
  const Tensor x = randn({4, 6}, gen, kFloat64).requires_grad_();
  const auto pieces = split(x, 2, 1);
  REQUIRE(pieces.size() == 3);
  CHECK(pieces[0].grad_fn() == pieces[2].grad_fn());
  CHECK(std::string(pieces[0].grad_fn()->name) == "split");
  CHECK(pieces[1].data_ptr<double>() == x.data_ptr<double>() + 2);  // still views
  // Gradient through two of the three pieces: the third's columns get zeros.
  (pieces[0].sum() + (pieces[2] * 3.0).sum()).backward();
  for (std::int64_t r = 0; r < 4; ++r) {
    CHECK(x.grad().at({r, 0}) == 1.0);
    CHECK(x.grad().at({r, 2}) == 0.0);
    CHECK(x.grad().at({r, 5}) == 3.0);
  }
  const auto rows = unbind(x, 0);
  REQUIRE(rows.size() == 4);
  CHECK(rows[3].shape() == Shape{6});
  CHECK(rows[0].grad_fn() == rows[3].grad_fn());
  CHECK(std::string(rows[0].grad_fn()->name) == "unbind");
  check_values(rows[2], x.select(0, 2).to_vector<double>());
  const auto halves = chunk(x, 2, 0);
  CHECK(halves[0].grad_fn() == halves[1].grad_fn());
  // First and second derivatives through several outputs of each.
  check_gradients(
      [](const TensorList& t) {
        auto parts = split(t[0], std::vector<std::int64_t>{1, 3, 2}, 1);
        return parts[0] * parts[2].sum({1}, true) + parts[1].tanh().sum({1}, true);
      },
      {randn({3, 6}, gen)});
  check_gradients(
      [](const TensorList& t) {
        auto r = unbind(t[0], 1);
        return r[0] * r[2] + r[1].exp();
      },
      {randn({4, 3}, gen)});
  check_gradients(
      [](const TensorList& t) {
        auto c = chunk(t[0].transpose(0, 1), 2, 0);
        return c[1] * c[1];
      },
      {randn({3, 4}, gen)});
  CHECK_THROWS_WITH_AS(unbind(scalar_tensor(1.0), 0), "unbind: cannot unbind a 0-dimensional tensor", ShapeError);
}

TEST_CASE("shape: errors name the op and the shapes") {
  CHECK_THROWS_WITH_AS(zeros({2, 3}).reshape({4, 2}),
                       "reshape: cannot reshape a tensor of shape (2,3) (6 elements) into (4,2)", ShapeError);
  CHECK_THROWS_WITH_AS(zeros({2, 3}).reshape({-1, -1}), "reshape: only one dimension can be -1, got (-1,-1)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(zeros({2, 3}).reshape({4, -1}), "reshape: cannot reshape a tensor of shape (2,3) into (4,-1)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(zeros({2, 3}).transpose(0, 1).view({6}),
                       "view: a tensor of shape (3,2) with strides (1,3) cannot be viewed as (6); use reshape, which "
                       "copies",
                       ShapeError);
  CHECK_THROWS_WITH_AS(zeros({2, 3}).transpose(0, 2), "transpose: axis 2 is out of range for a tensor of rank 2",
                       IndexError);
  CHECK_THROWS_WITH_AS(zeros({2, 3}).permute({0, 0}), "permute: axis 0 appears twice in (0,0)", IndexError);
  CHECK_THROWS_WITH_AS(zeros({2, 3}).permute({0}), "permute: 1 axes (0) for a tensor of rank 2", ShapeError);
  CHECK_THROWS_WITH_AS(zeros({2, 3}).squeeze(0), "squeeze: axis 0 of shape (2,3) has size 2, not 1", ShapeError);
  CHECK_THROWS_WITH_AS(zeros({2, 3}).expand({4, 3}), "expand: cannot expand shape (2,3) to (4,3)", ShapeError);
  CHECK_THROWS_WITH_AS(zeros({2, 3}).narrow(1, 2, 2),
                       "narrow: start 2 and length 2 are out of range for axis 1 of shape (2,3)", IndexError);
  CHECK_THROWS_WITH_AS(zeros({2, 3}).select(0, 2), "select: index 2 is out of range for axis 0 of shape (2,3)",
                       IndexError);
  CHECK_THROWS_WITH_AS(zeros({2, 3}).slice(0, 0, 2, 0), "slice: step must be positive, got 0", ValueError);
  CHECK_THROWS_WITH_AS(concat({zeros({2, 3}), zeros({2, 4})}, 0),
                       "concat: tensor 1 has shape (2,4), which does not match (2,3) outside axis 0", ShapeError);
  CHECK_THROWS_WITH_AS(concat({}, 0), "concat: expected at least one tensor", ValueError);
  CHECK_THROWS_WITH_AS(stack({zeros({2}), zeros({3})}, 0), "stack: tensor 1 has shape (3), tensor 0 has (2)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(split(zeros({5}), std::vector<std::int64_t>{2, 2}, 0),
                       "split: piece sizes add up to 4 but axis 0 of shape (5) has 5", ShapeError);
  CHECK_THROWS_WITH_AS(chunk(zeros({5}), 0, 0), "chunk: the number of chunks must be positive, got 0", ValueError);
}

TEST_CASE("shape: roll, tile, repeat, tril and triu match torch") {
  const Tensor z = arange(0.0, 12.0, 1.0, kFloat64).reshape({3, 4});
  // torch.roll(z, (1, -1), (0, 1)) and torch.roll(z, 5), PyTorch 1.13.
  check_values(roll(z, {1, -1}, {0, 1}), {9, 10, 11, 8, 1, 2, 3, 0, 5, 6, 7, 4}, 1e-15);
  check_values(roll(z, {5}), {7, 8, 9, 10, 11, 0, 1, 2, 3, 4, 5, 6}, 1e-15);
  check_values(roll(z, {-8}, {1}), z.to_vector<double>(), 1e-15);  // a whole number of turns
  CHECK(roll(z, {4}, {1}).data_ptr<double>() != z.data_ptr<double>());
  Generator gen(13);
  const Tensor r = randn({3, 4}, gen, kFloat64);
  check_gradients([](const TensorList& in) { return roll(in[0], {2, 1}, {1, 0}) * in[0]; }, {r});
  CHECK_THROWS_WITH_AS(roll(z, {1, 2}, {0}), "roll: 2 shifts for 1 axes: (1,2) and (0)", ValueError);
  CHECK_THROWS_WITH_AS(roll(z, {1, 2}), "roll: without axes, expected one shift, got (1,2)", ValueError);

  // torch.tile([[1, 2], [3, 4]], (2,)) and torch.tensor([[1, 2]]).repeat(2, 1, 2).
  const Tensor small = tensor({{1, 2}, {3, 4}}, kInt64);
  const Tensor tiled = tile(small, {2});
  CHECK(tiled.shape() == Shape{2, 4});
  CHECK(tiled.to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 2, 1, 2, 3, 4, 3, 4});
  CHECK(tile(tensor({1, 2}, kInt64), {2, 1, 2}).shape() == Shape{2, 1, 4});
  const Tensor repeated = tensor({{1, 2}}, kInt64).repeat({2, 1, 2});
  CHECK(repeated.shape() == Shape{2, 1, 4});
  CHECK(repeated.to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 2, 1, 2, 1, 2, 1, 2});
  CHECK(tile(z, {1, 1}).data_ptr<double>() != z.data_ptr<double>());
  // The gradient of (torch.tile(x, (2, 3)) * arange(24).reshape(4, 6)).sum(): the copies summed.
  const Tensor x = tensor({{1.0, 2.0}, {3.0, 4.0}}, kFloat64).requires_grad_(true);
  (tile(x, {2, 3}) * arange(0.0, 24.0, 1.0, kFloat64).reshape({4, 6})).sum().backward();
  check_values(x.grad(), {48, 54, 84, 90}, 1e-15);
  check_gradients([](const TensorList& in) { return tile(in[0].transpose(0, 1), {2, 1, 2}); }, {r});
  CHECK_THROWS_WITH_AS(small.repeat({2}),
                       "repeat: 1 repetitions (2) for a tensor of rank 2 (use tile() to repeat only the last axes)",
                       ValueError);
  CHECK_THROWS_WITH_AS(tile(small, {2, -1}), "tile: repetitions must be non-negative, got (2,-1)", ValueError);

  // torch.tril(z, 1) and torch.triu(z, -1).
  check_values(tril(z, 1), {0, 1, 0, 0, 4, 5, 6, 0, 8, 9, 10, 11}, 1e-15);
  check_values(triu(z, -1), {0, 1, 2, 3, 4, 5, 6, 7, 0, 9, 10, 11}, 1e-15);
  check_values(tril(z) + triu(z, 1), z.to_vector<double>(), 1e-15);
  const Tensor batch = ones({2, 2, 3}, kInt64);
  CHECK(triu(batch).to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 1, 1, 0, 1, 1, 1, 1, 1, 0, 1, 1});
  check_gradients([](const TensorList& in) { return tril(in[0], -1) * in[0] + triu(in[0], 2); }, {r});
  CHECK_THROWS_WITH_AS(tril(ones({3})), "tril: expected a tensor of at least 2 dimensions, got shape (3)", ShapeError);
}

TEST_CASE("shape: flip reverses the given axes as torch.flip, and its gradient flips back") {
  const Tensor z = arange(0.0, 24.0, 1.0, kFloat64).reshape({2, 3, 4});
  // torch.flip(z, [0, 2]), PyTorch 1.13.
  check_values(flip(z, {0, 2}), {15, 14, 13, 12, 19, 18, 17, 16, 23, 22, 21, 20, 3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8},
               1e-15);
  // The gradient of (torch.flip(z, [-2]) * w).sum(), w = arange(24).reshape(2, 3, 4).
  const Tensor zg = z.detach().requires_grad_(true);
  sum(flip(zg, {-2}) * z).backward();
  check_values(zg.grad(), {8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3, 20, 21, 22, 23, 16, 17, 18, 19, 12, 13, 14, 15},
               1e-15);
  // Always a copy, also with nothing to reverse.
  const Tensor one = arange(0.0, 3.0, 1.0).reshape({3, 1});
  const Tensor same = flip(one, {1});
  CHECK(same.data_ptr<float>() != one.data_ptr<float>());
  check_values(same, {0, 1, 2}, 1e-15);
  CHECK(flip(tensor({1, 2, 3}, kInt64), {0}).to_vector<std::int64_t>() == std::vector<std::int64_t>{3, 2, 1});
  Generator gen(10);
  check_gradients(
      [](const TensorList& in) {
        return flip(in[0].transpose(0, 1), {0, 1}) * in[0].transpose(0, 1);
      },
      {randn({3, 4}, gen, kFloat64)});
  CHECK_THROWS_WITH_AS(flip(z, {0, 0}), "flip: axis 0 appears twice in (0,0)", IndexError);
  // A scalar takes axis 0 or -1 as torch's, once only.
  const Tensor s = full({}, 2.0);
  check_values(flip(s, {-1}), {2}, 1e-15);
  CHECK_THROWS_WITH_AS(flip(s, {0, -1}), "flip: axis -1 appears twice in (0,-1)", IndexError);
  CHECK_THROWS_WITH_AS(flip(z, {3}), "flip: axis 3 is out of range for a tensor of rank 3", IndexError);
}
