// In-place writes beyond fill_ and copy_: add_, sub_, mul_, div_, addcmul_, addcdiv_, clamp_ and
// masked_fill_, with torch's rules for dtypes (the result must cast to the written tensor's dtype)
// and shapes (the operands broadcast to it), values checked against PyTorch 1.13, and the
// autograd guards (grad mode, saved tensors).

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::check_values;
using V = std::vector<std::int64_t>;

TEST_CASE("inplace: arithmetic values are torch's, with broadcasting and alpha") {
  // torch: y = [[1, 2], [3, 4]]; y.sub_([1, 1], alpha=2); y.mul_([[2], [3]]); y.div_([2, 4]);
  // y.clamp_(0, 1.5) gives [[-1, 0], [1, 2]], [[-2, 0], [3, 6]], [[-1, 0], [1.5, 1.5]], [[0, 0], [1.5, 1.5]].
  const Tensor y = tensor({{1, 2}, {3, 4}});
  y.sub_(tensor({1, 1}), 2.0);
  check_values(y, {-1, 0, 1, 2}, 1e-15);
  y.mul_(tensor({{2}, {3}}));
  check_values(y, {-2, 0, 3, 6}, 1e-15);
  y.div_(tensor({2, 4}));
  check_values(y, {-1, 0, 1.5, 1.5}, 1e-15);
  y.clamp_(0.0, 1.5);
  check_values(y, {0, 0, 1.5, 1.5}, 1e-15);
  y.add_(1.0).sub_(0.5).div_(2.0);
  check_values(y, {0.25, 0.25, 1, 1}, 1e-15);
  // addcmul_ and addcdiv_: torch gives [3, 7, 12] and [0.5, 1.2, 2].
  const Tensor a = tensor({1, 2, 3}), b = tensor({4, 5, 6});
  check_values(tensor({1, 2, 3}).addcmul_(a, b, 0.5), {3, 7, 12}, 1e-7);
  check_values(tensor({1, 2, 3}).addcdiv_(a, b, -2.0), {0.5, 1.2, 2}, 1e-7);
  check_values(tensor({1, 2, 3}).masked_fill_(tensor({1, 0, 1}).to(kBool), -1.0), {-1, 2, -1}, 1e-15);
  // A view is written through to its base.
  const Tensor base = zeros({2, 3});
  base.select(0, 1).add_(tensor({1, 2, 3}));
  check_values(base, {0, 0, 0, 1, 2, 3}, 1e-15);
  // An operand overlapping the written entries shifted is read whole before the write (torch
  // refuses these; each entry as if the op were out of place), and an exact alias entry by entry.
  const Tensor shifted = tensor({1, 2, 3});
  shifted.narrow(0, 1, 2).add_(shifted.narrow(0, 0, 2));
  check_values(shifted, {1, 3, 5}, 1e-15);
  shifted.narrow(0, 1, 2).copy_(shifted.narrow(0, 0, 2));
  check_values(shifted, {1, 1, 3}, 1e-15);
  shifted.add_(shifted);
  check_values(shifted, {2, 2, 6}, 1e-15);
}

TEST_CASE("inplace: dtypes follow torch's casting rule") {
  // A float64 operand is computed in float64 and written back rounded to float32: torch gives
  // [1.1, 2.2, 3.3] in float32.
  const Tensor x = tensor({1, 2, 3});
  x.add_(tensor({0.1, 0.2, 0.3}, kFloat64));
  CHECK(x.dtype() == kFloat32);
  CHECK(x.to_vector<float>() == std::vector<float>{1.1f, 2.2f, 3.3f});
  // int64 stays int64 with int64, Bool and C++ integer operands: torch gives [2, 2, 4], [2, 10, 18]
  // (doubled [1, 5, 9]) and [-1, 7, 15].
  const Tensor ids = tensor({1, 2, 3}, kInt64);
  ids.add_(tensor({1, 0, 1}).to(kBool));
  CHECK(ids.to_vector<std::int64_t>() == V{2, 2, 4});
  const Tensor counts = tensor({1, 5, 9}, kInt64);
  counts.mul_(tensor({2, 2, 2}, kInt64));
  CHECK(counts.to_vector<std::int64_t>() == V{2, 10, 18});
  counts.sub_(3);
  CHECK(counts.to_vector<std::int64_t>() == V{-1, 7, 15});
  counts.add_(1).mul_(2);
  CHECK(counts.to_vector<std::int64_t>() == V{0, 16, 32});
  CHECK(counts.dtype() == kInt64);
  // Bool + Bool is or, as torch's.
  const Tensor flags = tensor({1, 0, 0}).to(kBool);
  flags.add_(tensor({0, 0, 1}).to(kBool));
  CHECK(flags.to_vector<int>() == std::vector<int>{1, 0, 1});
  // Floating results cannot go into int64, nor integers into Bool (torch's "result type Float can't
  // be cast to the desired output type Long").
  CHECK_THROWS_WITH_AS(ids.add_(tensor({0.5, 0.5, 0.5})),
                       "add_: the result's dtype float32 cannot be written into a tensor of dtype int64", TypeError);
  CHECK_THROWS_WITH_AS(ids.div_(2.0), "div_: the result's dtype float32 cannot be written into a tensor of dtype int64",
                       TypeError);
  CHECK_THROWS_WITH_AS(ids.mul_(2.5), "mul_: the result's dtype float32 cannot be written into a tensor of dtype int64",
                       TypeError);
  CHECK_THROWS_WITH_AS(flags.add_(tensor({1, 1, 1}, kInt64)),
                       "add_: the result's dtype int64 cannot be written into a tensor of dtype bool", TypeError);
  CHECK(ids.to_vector<std::int64_t>() == V{2, 2, 4});  // a refused write leaves the tensor as it was
}

TEST_CASE("inplace: the operands broadcast to the written tensor, not the other way") {
  // torch: zeros(3).add_(ones(2, 3)) is "output with shape [3] doesn't match the broadcast shape [2, 3]".
  const Tensor x = zeros({3});
  CHECK_THROWS_WITH_AS(
      x.add_(ones({2, 3})),
      "add_: the result's broadcast shape (2,3) does not match the shape of the tensor written in place, (3)",
      ShapeError);
  CHECK_THROWS_WITH_AS(
      x.mul_(ones({2, 3})),
      "mul_: the result's broadcast shape (2,3) does not match the shape of the tensor written in place, (3)",
      ShapeError);
  CHECK_THROWS_AS(x.sub_(ones({2})), ShapeError);
  check_values(x, {0, 0, 0}, 1e-15);
}

TEST_CASE("inplace: grad mode guards and saved-tensor versions hold for the new writes") {
  const Tensor w = tensor({1.0, 2.0}, kFloat64).requires_grad_(true);
  CHECK_THROWS_WITH_AS(w.mul_(tensor({2.0, 2.0}, kFloat64)),
                       doctest::Contains("mul_: a leaf tensor that requires grad"), GraphError);
  // A non-leaf is written and recorded (test_inplace_autograd.cpp): d/dw sum(2w + w*w) = 2 + 2w.
  const Tensor twice = w * 2.0;
  sum(twice.addcmul_(w, w)).backward();
  check_values(w.grad(), {4, 6}, 1e-15);
  w.zero_grad(true);
  // Under no grad a leaf may be written (an optimiser's update), and a backward that saved it
  // before the write is refused.
  const Tensor loss = sum(w * w);
  {
    NoGradGuard no_grad;
    w.addcdiv_(tensor({1.0, 1.0}, kFloat64), tensor({2.0, 4.0}, kFloat64), -1.0);
  }
  check_values(w, {0.5, 1.75}, 1e-15);
  CHECK_FALSE(w.grad().defined());
  CHECK_THROWS_AS(loss.backward(), GraphError);
}
