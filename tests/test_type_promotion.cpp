// Type promotion: the dtypes that ops of several tensors meet in, as torch.result_type gives them
// (the table below was read off PyTorch 1.13), the values computed in that dtype, gradients back in
// each operand's own dtype, integer and bool arithmetic, and the ops that do not promote.

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::check_values;

namespace {

// A tensor of `dtype` holding 1, 2, 3 (shape (3,)) or 2 (0-dim).
Tensor operand(DType dtype, bool zero_dim) {
  const Tensor t = zero_dim ? scalar_tensor(2.0, kFloat64) : tensor({1.0, 2.0, 3.0}, kFloat64);
  return dtype == kBool ? gt(t, 0.0) : t.to(dtype);
}

struct Case {
  DType a;
  bool a_zero_dim;
  DType b;
  bool b_zero_dim;
  DType expected;  // torch.result_type, from PyTorch 1.13
};

}  // namespace

TEST_CASE("promotion: promote_types orders bool, int64 and the floating types as torch's") {
  CHECK(promote_types(kFloat32, kFloat64) == kFloat64);
  CHECK(promote_types(kBFloat16, kFloat32) == kFloat32);
  CHECK(promote_types(kFloat64, kBFloat16) == kFloat64);
  CHECK(promote_types(kInt64, kBFloat16) == kBFloat16);
  CHECK(promote_types(kInt64, kFloat32) == kFloat32);
  CHECK(promote_types(kBool, kInt64) == kInt64);
  CHECK(promote_types(kBool, kFloat64) == kFloat64);
  CHECK(promote_types(kBool, kBool) == kBool);
  for (const DType a : {kBool, kInt64, kBFloat16, kFloat32, kFloat64})
    for (const DType b : {kBool, kInt64, kBFloat16, kFloat32, kFloat64})
      CHECK(promote_types(a, b) == promote_types(b, a));
}

TEST_CASE("promotion: result_type and the ops follow torch's table, 0-dim tensors included") {
  const std::vector<Case> cases = {
      {kFloat32, false, kFloat64, false, kFloat64},  {kFloat32, false, kFloat64, true, kFloat32},
      {kInt64, false, kFloat32, false, kFloat32},    {kInt64, false, kFloat64, true, kFloat64},
      {kBool, false, kFloat32, false, kFloat32},     {kBool, false, kInt64, false, kInt64},
      {kBFloat16, false, kFloat32, false, kFloat32}, {kBFloat16, false, kFloat32, true, kBFloat16},
      {kBFloat16, true, kFloat32, false, kFloat32},  {kBFloat16, true, kInt64, false, kBFloat16},
      {kFloat64, true, kFloat32, true, kFloat64},    {kInt64, true, kFloat32, false, kFloat32},
      {kBool, false, kInt64, true, kInt64},          {kBool, true, kFloat32, false, kFloat32},
      {kFloat64, true, kBFloat16, false, kBFloat16}, {kBFloat16, false, kFloat64, false, kFloat64},
      {kInt64, false, kBool, true, kInt64},          {kBool, false, kBool, true, kBool},
  };
  const Tensor condition = from_vector(std::vector<bool>{true, false, true}, {3});
  for (const Case& c : cases) {
    const Tensor a = operand(c.a, c.a_zero_dim), b = operand(c.b, c.b_zero_dim);
    CAPTURE(dtype_name(c.a));
    CAPTURE(c.a_zero_dim);
    CAPTURE(dtype_name(c.b));
    CAPTURE(c.b_zero_dim);
    CHECK(result_type(a, b) == c.expected);
    CHECK(result_type(b, a) == c.expected);
    CHECK((a + b).dtype() == c.expected);
    CHECK((b * a).dtype() == c.expected);
    CHECK(maximum(a, b).dtype() == c.expected);
    CHECK(minimum(b, a).dtype() == c.expected);
    CHECK(where(condition, a, b).dtype() == c.expected);
    CHECK(eq(a, b).dtype() == kBool);
    // Division is true division: integer and bool operands divide in float32.
    CHECK((a / b).dtype() == (is_floating(c.expected) ? c.expected : kFloat32));
  }
}

TEST_CASE("promotion: values are computed in the promoted dtype") {
  const Tensor f32 = from_vector(std::vector<float>{0.1f, 1.5f, -2.25f}, {3});
  const Tensor f64 = tensor({0.2, 0.25, 1e-12}, kFloat64);
  const Tensor sum = f32 + f64;
  REQUIRE(sum.dtype() == kFloat64);
  // float32 0.1 widened exactly, then added in float64: 1e-12 survives, as it would not in float32.
  check_values(sum, {static_cast<double>(0.1f) + 0.2, 1.75, -2.25 + 1e-12}, 1e-15);
  const Tensor ids = tensor({3, -1, 7}, kInt64);
  check_values(ids * f32, {3 * 0.1f, -1.5f, 7 * -2.25f}, 1e-15);
  CHECK((ids * f32).dtype() == kFloat32);
  // A 0-dim float64 does not widen a float32 tensor: the product is float32, rounded as float32's.
  const Tensor third = scalar_tensor(1.0 / 3.0, kFloat64);
  const Tensor scaled = f32 * third;
  REQUIRE(scaled.dtype() == kFloat32);
  CHECK(scaled.to_vector<float>() == std::vector<float>{0.1f * static_cast<float>(1.0 / 3.0),
                                                        1.5f * static_cast<float>(1.0 / 3.0),
                                                        -2.25f * static_cast<float>(1.0 / 3.0)});
  // Comparisons compare in the promoted dtype: float32 0.1 is not float64 0.1.
  CHECK(eq(f32, tensor({0.1, 1.5, -2.25}, kFloat64)).to_vector<int>() == std::vector<int>{0, 1, 1});
  CHECK(lt(ids, f32).to_vector<int>() == std::vector<int>{0, 1, 0});
  // where and concat take every operand's values in the promoted dtype.
  const Tensor mask = from_vector(std::vector<bool>{false, true, false}, {3});
  check_values(where(mask, ids, f64), {0.2, -1.0, 1e-12}, 1e-15);
  const Tensor joined = concat({ids, f32, f64}, 0);
  REQUIRE(joined.dtype() == kFloat64);
  check_values(joined, {3, -1, 7, static_cast<double>(0.1f), 1.5, -2.25, 0.2, 0.25, 1e-12}, 1e-15);
  CHECK(stack({ids, f32}, 0).dtype() == kFloat32);
  CHECK(stack({scalar_tensor(1.0, kFloat32), scalar_tensor(2.0, kFloat64)}, 0).dtype() == kFloat64);
}

TEST_CASE("promotion: gradients return to each operand in its own dtype") {
  const Tensor a = from_vector(std::vector<float>{0.5f, -1.25f}, {2}).requires_grad_();
  const Tensor b = tensor({2.0, 4.0}, kFloat64).requires_grad_();
  const Tensor c = scalar_tensor(3.0, kFloat64).requires_grad_();
  const Tensor loss = (a * b + a / b).sum() + (a * c).sum() + maximum(a, b).sum() + where(gt(b, 3.0), a, b).sum();
  CHECK(loss.dtype() == kFloat64);
  loss.backward();
  REQUIRE(a.grad().defined());
  REQUIRE(b.grad().defined());
  REQUIRE(c.grad().defined());
  CHECK(a.grad().dtype() == kFloat32);
  CHECK(b.grad().dtype() == kFloat64);
  CHECK(c.grad().dtype() == kFloat64);
  // d/da: b + 1/b + c + [a > b] + [b > 3];  d/db: a - a/b^2 + [b >= a] + [b <= 3];  d/dc: sum a.
  check_values(a.grad(), {2.0 + 0.5 + 3.0 + 0.0 + 0.0, 4.0 + 0.25 + 3.0 + 0.0 + 1.0});
  check_values(b.grad(), {0.5 - 0.5 / 4.0 + 1.0 + 1.0, -1.25 + 1.25 / 16.0 + 1.0 + 0.0});
  check_values(c.grad(), {0.5 - 1.25});
  // float64 gradcheck through a promotion: the float64 operand is checked, the float32 one is fixed.
  const Tensor fixed = from_vector(std::vector<float>{0.75f, -0.5f, 2.0f}, {3});
  testing::check_gradients(
      [&](const TensorList& t) {
        return t[0] * fixed + concat({fixed, t[0]}, 0).sum();
      },
      {tensor({0.3, -1.1, 0.6}, kFloat64)});
}

TEST_CASE("promotion: int64 and bool arithmetic stay in their dtype, as torch's") {
  const Tensor i = tensor({7, -3, 4}, kInt64), j = tensor({2, 5, -4}, kInt64);
  CHECK((i + j).dtype() == kInt64);
  CHECK((i + j).to_vector<std::int64_t>() == std::vector<std::int64_t>{9, 2, 0});
  CHECK((i - j).to_vector<std::int64_t>() == std::vector<std::int64_t>{5, -8, 8});
  CHECK((i * j).to_vector<std::int64_t>() == std::vector<std::int64_t>{14, -15, -16});
  CHECK(maximum(i, j).to_vector<std::int64_t>() == std::vector<std::int64_t>{7, 5, 4});
  CHECK(minimum(i, j).to_vector<std::int64_t>() == std::vector<std::int64_t>{2, -3, -4});
  const Tensor quotient = i / j;
  CHECK(quotient.dtype() == kFloat32);
  check_values(quotient, {3.5, -0.6, -1.0}, 1e-7);
  // int64 wraps around on overflow, as torch's does.
  const Tensor big = from_vector(std::vector<std::int64_t>{std::numeric_limits<std::int64_t>::max()}, {1});
  CHECK((big + from_vector(std::vector<std::int64_t>{1}, {1})).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{std::numeric_limits<std::int64_t>::min()});
  CHECK((big * from_vector(std::vector<std::int64_t>{2}, {1})).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{-2});
  // bool: + is or, * is and, maximum and minimum too; bool with int64 counts in int64.
  const Tensor p = from_vector(std::vector<bool>{true, true, false, false}, {4});
  const Tensor q = from_vector(std::vector<bool>{true, false, true, false}, {4});
  CHECK((p + q).dtype() == kBool);
  CHECK((p + q).to_vector<int>() == std::vector<int>{1, 1, 1, 0});
  CHECK((p * q).to_vector<int>() == std::vector<int>{1, 0, 0, 0});
  CHECK(maximum(p, q).to_vector<int>() == std::vector<int>{1, 1, 1, 0});
  CHECK(minimum(p, q).to_vector<int>() == std::vector<int>{1, 0, 0, 0});
  CHECK((p + tensor({1, 1, 1, 1}, kInt64)).to_vector<std::int64_t>() == std::vector<std::int64_t>{2, 2, 1, 1});
  CHECK((p / q).dtype() == kFloat32);
}

TEST_CASE("promotion: what does not promote throws a TypeError naming the op and the dtypes") {
  const Tensor f32 = from_vector(std::vector<float>{1, 2}, {2});
  const Tensor f64 = tensor({1.0, 2.0}, kFloat64);
  const Tensor i64 = tensor({1, 2}, kInt64);
  const Tensor mask = from_vector(std::vector<bool>{true, false}, {2});
  // Subtraction with a bool tensor is refused whatever the other operand, as torch's.
  const char* const refused = "subtraction with a bool tensor is not supported; invert a mask with logical_not";
  CHECK_THROWS_WITH_AS(mask - mask, (std::string("sub: ") + refused).c_str(), TypeError);
  CHECK_THROWS_WITH_AS(mask - f32, (std::string("sub: ") + refused).c_str(), TypeError);
  CHECK_THROWS_WITH_AS(f64 - mask, (std::string("sub: ") + refused).c_str(), TypeError);
  CHECK_THROWS_WITH_AS(mask - 1, (std::string("sub: ") + refused).c_str(), TypeError);
  CHECK_THROWS_WITH_AS(mask - 0.5, (std::string("sub: ") + refused).c_str(), TypeError);
  CHECK_THROWS_WITH_AS(1 - mask, (std::string("rsub: ") + refused).c_str(), TypeError);
  CHECK_THROWS_WITH_AS(0.5 - mask, (std::string("rsub: ") + refused).c_str(), TypeError);
  CHECK_THROWS_WITH_AS(matmul(f32, f64), "matmul: dtype mismatch, float32 and float64", TypeError);
  CHECK_THROWS_WITH_AS(gelu(i64), doctest::Contains("gelu"), TypeError);
  CHECK_THROWS_WITH_AS(result_type({}), "result_type: expected at least one tensor", ValueError);
}

TEST_CASE("promotion: C++ numbers take a floating tensor's dtype, integral tensors stay integral with integers") {
  const Tensor f32 = from_vector(std::vector<float>{1.5f, -2}, {2});
  const Tensor f64 = tensor({1.5, -2.0}, kFloat64);
  const Tensor ids = tensor({7, -3}, kInt64);
  const Tensor mask = from_vector(std::vector<bool>{true, false}, {2});
  CHECK((f32 + 2.5).dtype() == kFloat32);
  CHECK((f64 * 2.5).dtype() == kFloat64);
  CHECK((f32 + 1).dtype() == kFloat32);
  check_values(f32 * 2, {3.0, -4.0});
  check_values(3 - f64, {1.5, 5.0});
  CHECK((2 * f64).dtype() == kFloat64);
  // int64 with an integer: int64.
  const auto values = [](const Tensor& t) {
    CHECK(t.dtype() == kInt64);
    return t.to_vector<std::int64_t>();
  };
  CHECK(values(ids + 1) == std::vector<std::int64_t>{8, -2});
  CHECK(values(1 + ids) == std::vector<std::int64_t>{8, -2});
  CHECK(values(ids - std::int64_t{3}) == std::vector<std::int64_t>{4, -6});
  CHECK(values(5 - ids) == std::vector<std::int64_t>{-2, 8});
  CHECK(values(ids * 2) == std::vector<std::int64_t>{14, -6});
  CHECK(values(2u * ids) == std::vector<std::int64_t>{14, -6});
  CHECK(values(add(ids, 10)) == std::vector<std::int64_t>{17, 7});
  // bool with an integer counts in int64.
  CHECK(values(mask + 1) == std::vector<std::int64_t>{2, 1});
  CHECK(values(mask * 3) == std::vector<std::int64_t>{3, 0});
  const Tensor big = from_vector(std::vector<std::int64_t>{std::numeric_limits<std::int64_t>::max()}, {1});
  CHECK(values(big + 1) == std::vector<std::int64_t>{std::numeric_limits<std::int64_t>::min()});
  // int64 or bool with a double, and division: float32.
  for (const Tensor& t : {ids + 2.5, ids * 0.5, ids / 2, 1.0 / ids, mask + 0.5, mask * 0.5, ids - 0.5, 0.5 - ids})
    CHECK(t.dtype() == kFloat32);
  check_values(ids / 2, {3.5, -1.5});
  check_values(ids + 2.5, {9.5, -0.5});
  check_values(1.0 / ids, {1.0 / 7, -1.0 / 3});
  check_values(mask + 0.5, {1.5, 0.5});
  CHECK(eq(ids, 7).to_vector<int>() == std::vector<int>{1, 0});
}

TEST_CASE("promotion: unary math takes int64 and Bool as float32, and keeps int64 where results are whole") {
  const Tensor ids = tensor({4, -1, 0}, kInt64);
  const Tensor mask = from_vector(std::vector<bool>{true, false, true}, {3});
  const Tensor as_float = ids.to(kFloat32);
  // Values as the float32 op's on the converted input, for int64 and Bool alike.
  const std::vector<std::pair<const char*, Tensor (*)(const Tensor&)>> to_float = {
      {"exp", exp},     {"log", log}, {"sqrt", sqrt}, {"tanh", tanh},   {"sigmoid", sigmoid},       {"expm1", expm1},
      {"log1p", log1p}, {"sin", sin}, {"cos", cos},   {"rsqrt", rsqrt}, {"reciprocal", reciprocal}, {"erf", erf}};
  for (const auto& [name, f] : to_float) {
    CAPTURE(name);
    const Tensor y = f(ids);
    REQUIRE(y.dtype() == kFloat32);
    const std::vector<float> got = y.to_vector<float>(), expected = f(as_float).to_vector<float>();
    for (std::size_t i = 0; i < got.size(); ++i)
      CHECK((got[i] == expected[i] || (std::isnan(got[i]) && std::isnan(expected[i]))));
    CHECK(f(mask).to_vector<float>() == f(mask.to(kFloat32)).to_vector<float>());
  }
  const auto int64_values = [](const Tensor& t) {
    CHECK(t.dtype() == kInt64);
    return t.to_vector<std::int64_t>();
  };
  CHECK(int64_values(neg(ids)) == std::vector<std::int64_t>{-4, 1, 0});
  CHECK(int64_values(-ids) == std::vector<std::int64_t>{-4, 1, 0});
  CHECK(int64_values(abs(ids)) == std::vector<std::int64_t>{4, 1, 0});
  CHECK(int64_values(sign(ids)) == std::vector<std::int64_t>{1, -1, 0});
  CHECK(int64_values(relu(ids)) == std::vector<std::int64_t>{4, 0, 0});
  const std::vector<Tensor (*)(const Tensor&)> roundings = {floor, ceil, round, trunc};
  for (Tensor (*f)(const Tensor&) : roundings) CHECK(int64_values(f(ids)) == std::vector<std::int64_t>{4, -1, 0});
  // -INT64_MIN and |INT64_MIN| wrap around to INT64_MIN, as torch's.
  const std::int64_t lowest = std::numeric_limits<std::int64_t>::min();
  const Tensor low = from_vector(std::vector<std::int64_t>{lowest}, {1});
  CHECK(int64_values(neg(low)) == std::vector<std::int64_t>{lowest});
  CHECK(int64_values(abs(low)) == std::vector<std::int64_t>{lowest});
  CHECK_THROWS_WITH_AS(neg(mask), doctest::Contains("neg"), TypeError);
  CHECK_THROWS_WITH_AS(silu(ids), doctest::Contains("silu"), TypeError);
}

TEST_CASE("promotion: pow and clamp keep int64 with C++ integers and give float32 with doubles") {
  const Tensor ids = tensor({3, -2, 0, 7}, kInt64);
  const Tensor squared = pow(ids, 2);
  CHECK(squared.dtype() == kInt64);
  CHECK(squared.to_vector<std::int64_t>() == std::vector<std::int64_t>{9, 4, 0, 49});
  CHECK(pow(ids, 3).to_vector<std::int64_t>() == std::vector<std::int64_t>{27, -8, 0, 343});
  CHECK(pow(ids, 0).to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 1, 1, 1});
  // 3^41 overflows int64: wraps around as repeated multiplication in int64 would.
  std::uint64_t wrapped = 1;
  for (int i = 0; i < 41; ++i) wrapped *= 3;
  CHECK(pow(tensor({3}, kInt64), 41).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{static_cast<std::int64_t>(wrapped)});
  CHECK_THROWS_WITH_AS(pow(ids, -1),
                       "pow: an integer tensor to a negative integer power (-1) is not allowed; convert it with "
                       "to(kFloat32) first",
                       ValueError);
  const Tensor root = pow(ids, 0.5);
  CHECK(root.dtype() == kFloat32);
  CHECK(root.to_vector<float>()[0] == std::sqrt(3.0f));
  // A floating tensor takes an integer power as a double: the same values and gradient.
  const Tensor x = tensor({1.5, -2.0}, kFloat64).requires_grad_();
  pow(x, 3).sum().backward();
  check_values(x.grad(), {3 * 1.5 * 1.5, 3 * 4.0});
  // clamp between integers keeps int64; double bounds give float32.
  const Tensor clamped = clamp(ids, 0, 5);
  CHECK(clamped.dtype() == kInt64);
  CHECK(clamped.to_vector<std::int64_t>() == std::vector<std::int64_t>{3, 0, 0, 5});
  CHECK(clamp(from_vector(std::vector<bool>{true, false}, {2}), 0, 0).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{0, 0});
  const Tensor halves = clamp(ids, -0.5, 2.5);
  CHECK(halves.dtype() == kFloat32);
  check_values(halves, {2.5, -0.5, 0, 2.5});
  CHECK_THROWS_WITH_AS(clamp(ids, 2, 1), "clamp: min must not exceed max, got min 2, max 1", ValueError);
  check_values(clamp(tensor({-3.0, 0.25, 9.0}), -1, 1), {-1, 0.25, 1});
  // One integer bound keeps int64 too (torch: ids.clamp(min=0), ids.clamp(max=2), clamp_min, clamp_max).
  using V = std::vector<std::int64_t>;
  CHECK(clamp(ids, 0, std::nullopt).dtype() == kInt64);
  CHECK(clamp(ids, 0, std::nullopt).to_vector<std::int64_t>() == V{3, 0, 0, 7});
  CHECK(clamp(ids, std::nullopt, 2).to_vector<std::int64_t>() == V{2, -2, 0, 2});
  CHECK(clamp_min(ids, 1).to_vector<std::int64_t>() == V{3, 1, 1, 7});
  CHECK(clamp_max(ids, 0).to_vector<std::int64_t>() == V{0, -2, 0, 0});
  CHECK(clamp_min(ids, 0.5).dtype() == kFloat32);
  check_values(clamp_max(tensor({-3.0, 0.25, 9.0}), 1.0), {-3, 0.25, 1});
}
