// In-place writes on the tape (tapegrad/autograd/inplace.h): every recorded write against finite
// differences, writes through views into the base's gradient (CopySlices), views made before their
// base was written, operands that alias the written tensor, saved tensors written afterwards, the
// refusals, and second derivatives.

#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::check_close;
using tapegrad::testing::check_values;

namespace {

// Checks f's gradients against finite differences, and that f's output came out of op `name`.
void check_write(const std::string& name, const GradcheckFunction& f, const TensorList& inputs) {
  CAPTURE(name);
  const GradcheckResult first = gradcheck(f, inputs);
  CHECK_MESSAGE(first.passed, first.message());
  const GradcheckResult second = gradgradcheck(f, inputs);
  CHECK_MESSAGE(second.passed, second.message());
}

}  // namespace

TEST_CASE("inplace autograd: every write is recorded and its gradients match finite differences") {
  Generator gen(3);
  const Tensor x = randn({2, 3}, gen, kFloat64);
  const Tensor row = randn({3}, gen, kFloat64);
  const Tensor away = rand({2, 3}, gen, kFloat64) + 0.5;  // divisors away from 0
  const Tensor mask = tensor({{1, 0, 0}, {0, 1, 1}}).to(kBool);
  // Each write goes into a non-leaf (x * 1.5), and the result is multiplied by x again, so a write
  // that dropped the written tensor's earlier history would lose part of x's gradient.
  using Write = std::function<void(const Tensor& y, const TensorList& in)>;
  const std::vector<std::pair<std::string, Write>> writes{
      {"add_", [](const Tensor& y, const TensorList& in) { y.add_(in[1], 0.5); }},
      {"add_", [](const Tensor& y, const TensorList&) { y.add_(2.0); }},
      {"sub_", [](const Tensor& y, const TensorList& in) { y.sub_(in[1], 2.0); }},
      {"sub_", [](const Tensor& y, const TensorList&) { y.sub_(1.0); }},
      {"mul_", [](const Tensor& y, const TensorList& in) { y.mul_(in[1]); }},
      {"mul_", [](const Tensor& y, const TensorList&) { y.mul_(3.0); }},
      {"div_", [](const Tensor& y, const TensorList& in) { y.div_(in[2]); }},
      {"div_", [](const Tensor& y, const TensorList&) { y.div_(4.0); }},
      {"addcmul_", [](const Tensor& y, const TensorList& in) { y.addcmul_(in[1], in[2], 0.5); }},
      {"addcdiv_", [](const Tensor& y, const TensorList& in) { y.addcdiv_(in[1], in[2], -2.0); }},
      {"clamp_", [](const Tensor& y, const TensorList&) { y.clamp_(-0.4, 0.4); }},
      {"masked_fill_", [mask](const Tensor& y, const TensorList&) { y.masked_fill_(mask, 2.0); }},
      {"fill_", [](const Tensor& y, const TensorList&) { y.fill_(3.0); }},
      {"copy_", [](const Tensor& y, const TensorList& in) { y.copy_(in[1]); }},
  };
  for (const auto& [name, write] : writes) {
    check_write(name,
                [&write = write](const TensorList& in) {
                  const Tensor y = in[0] * 1.5;
                  write(y, in);
                  return y * in[0];
                },
                {x, row, away});
    // The written tensor's history is the op's.
    const Tensor y = x.clone().requires_grad_() * 1.5;
    write(y, {x, row.clone().requires_grad_(), away});
    REQUIRE(y.grad_fn());
    CHECK(std::string(y.grad_fn()->name) == name);
  }
}

TEST_CASE("inplace autograd: values worked by hand, and grad_fn printed") {
  // y = 2x; y += w; y *= x: dy/dx = 4x + w, dy/dw = x.
  const Tensor x = tensor({1.0, 2.0}, kFloat64).requires_grad_();
  const Tensor w = tensor({3.0, -1.0}, kFloat64).requires_grad_();
  const Tensor y = x * 2.0;
  y.add_(w).mul_(x);
  check_values(y, {5, 6}, 1e-15);
  CHECK(y.str() == "tensor([5.0000, 6.0000], dtype=float64, grad_fn=<mul_>)");
  y.sum().backward();
  check_values(x.grad(), {7, 7}, 1e-15);
  check_values(w.grad(), {1, 2}, 1e-15);
  // A constant written over a tensor cuts its history: nothing flows back, as in torch.
  const Tensor z = x * 3.0;
  z.fill_(1.0);
  CHECK(z.requires_grad());
  (z * x).sum().backward();
  check_values(x.grad(), {8, 8}, 1e-15);  // 7 + 1 from z * x only
}

TEST_CASE("inplace autograd: writes through views reach the base, as an output buffer filled step by step") {
  Generator gen(5);
  const Tensor w = randn({3, 3}, gen, kFloat64);
  const Tensor h0 = randn({3}, gen, kFloat64);
  // An RNN's outputs written row by row into a buffer that does not require grad, against the same
  // outputs stacked.
  const auto run = [](const Tensor& w_, const Tensor& h0_, bool into_buffer) {
    Tensor h = h0_;
    const Tensor buffer = zeros({4, 3}, kFloat64);
    std::vector<Tensor> steps;
    for (int t = 0; t < 4; ++t) {
      h = tanh(matmul(w_, h));
      if (into_buffer) buffer.select(0, t).copy_(h);
      else steps.push_back(h);
    }
    return into_buffer ? buffer : stack(steps, 0);
  };
  const Tensor wa = w.clone().requires_grad_(), wb = w.clone().requires_grad_();
  const Tensor a = run(wa, h0, true), b = run(wb, h0, false);
  CHECK(std::string(a.grad_fn()->name) == "copy_");
  const Tensor g = randn({4, 3}, gen, kFloat64);
  a.backward(g);
  b.backward(g);
  check_close(wa.grad(), wb.grad(), 1e-14);
  check_write("rows of a buffer", [&run](const TensorList& in) { return run(in[0], in[1], true); }, {w, h0});

  // A base with history, written through a column view: y = x with columns 1..2 times v.
  const Tensor x = tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}, kFloat64).requires_grad_();
  const Tensor v = tensor({10.0, 100.0}, kFloat64).requires_grad_();
  const Tensor y = x.clone();
  y.narrow(1, 1, 2).mul_(v);
  check_values(y, {1, 20, 300, 4, 50, 600}, 1e-15);
  CHECK(std::string(y.grad_fn()->name) == "mul_");
  y.sum().backward();
  check_values(x.grad(), {1, 10, 100, 1, 10, 100}, 1e-15);
  check_values(v.grad(), {7, 9}, 1e-15);

  // Views of every kind: a transposed view's row, a strided slice, and a base that is itself laid
  // out transposed (a detached view, so it owns no history of its own).
  check_write("column of a transposed view",
              [](const TensorList& in) {
                const Tensor y2 = in[0] * in[0];  // (exp would keep its output, which the write changes)
                y2.mT().select(0, 1).addcmul_(in[1], in[1]);
                return y2 * in[0];
              },
              {randn({2, 3}, gen, kFloat64), randn({2}, gen, kFloat64)});
  check_write("strided slice",
              [](const TensorList& in) {
                const Tensor y2 = in[0] * 1.0;
                y2.slice(1, 0, 4, 2).div_(in[1]);
                return y2.tanh();
              },
              {randn({2, 4}, gen, kFloat64), rand({2, 2}, gen, kFloat64) + 0.5});
  check_write("transposed base",
              [](const TensorList& in) {
                const Tensor base = zeros({3, 2}, kFloat64).mT().detach();  // (2, 3), strides (1, 2)
                base.select(0, 1).copy_(in[0]);
                base.select(0, 0).add_(in[0] * in[0]);
                return base * 2.0;
              },
              {randn({3}, gen, kFloat64)});
}

TEST_CASE("inplace autograd: a view made before its base was written is a view of the new history") {
  const Tensor x = tensor({{1.0, 2.0}, {3.0, 4.0}}, kFloat64).requires_grad_();
  const Tensor w = tensor({5.0, 7.0}, kFloat64).requires_grad_();
  const Tensor y = x.clone();
  const Tensor first = y.select(0, 0);
  y.mul_(w);
  check_values(first, {5, 14}, 1e-15);
  first.sum().backward();
  check_values(x.grad(), {5, 7, 0, 0}, 1e-15);
  check_values(w.grad(), {1, 2}, 1e-15);

  // A buffer's second row, viewed while the buffer needed no gradient, needs one once the buffer is
  // written from a tensor that does.
  const Tensor buffer = zeros({2, 2}, kFloat64);
  const Tensor second = buffer.select(0, 1);
  CHECK_FALSE(second.requires_grad());
  buffer.select(0, 0).copy_(w);
  buffer.select(0, 1).copy_(w * 3.0);
  CHECK(second.requires_grad());
  w.zero_grad(true);
  (second * second).sum().backward();
  check_values(w.grad(), {90, 126}, 1e-12);  // d/dw sum((3w)^2) = 18 w
}

TEST_CASE("inplace autograd: operands that share the written memory are read before the write") {
  check_write("y *= y",
              [](const TensorList& in) {
                const Tensor y = in[0] * 1.0;
                y.mul_(y);
                return y;
              },
              {tensor({1.0, -2.0, 0.5}, kFloat64)});
  check_write("rows added to each other",
              [](const TensorList& in) {
                const Tensor y = in[0] * in[0];
                y.narrow(0, 0, 2).add_(y.narrow(0, 1, 2));
                return y;
              },
              {tensor({{0.1, 0.2}, {0.3, 0.4}, {0.5, 0.6}}, kFloat64)});
  const Tensor x = tensor({1.0, 2.0, 3.0}, kFloat64).requires_grad_();
  const Tensor y = x * 1.0;
  y.narrow(0, 1, 2).add_(y.narrow(0, 0, 2));  // torch: [1, 3, 5] (the operand's values before the write)
  check_values(y, {1, 3, 5}, 1e-15);
}

TEST_CASE("inplace autograd: a backward that saved the written values is refused") {
  const Tensor x = tensor({1.0, 2.0}, kFloat64).requires_grad_();
  const Tensor e = x.exp();  // exp keeps its output for the backward
  e.add_(1.0);
  CHECK_THROWS_WITH_AS(e.sum().backward(), doctest::Contains("exp"), GraphError);
  const Tensor y = x * 2.0;
  const Tensor z = y * y;  // keeps y
  y.mul_(3.0);
  CHECK_THROWS_AS(z.sum().backward(), GraphError);
  // The write's own use of y is fine.
  y.sum().backward();
  check_values(x.grad(), {6, 6}, 1e-15);
}

TEST_CASE("inplace autograd: refused writes leave the tensor and its history as they were") {
  const Tensor w = tensor({1.0, 2.0}, kFloat64).requires_grad_();
  CHECK_THROWS_WITH_AS(w.add_(1.0),
                       "add_: a leaf tensor that requires grad cannot be modified in place while grad mode is on (use "
                       "NoGradGuard, as optimisers do)",
                       GraphError);
  CHECK_THROWS_WITH_AS(w.unsqueeze(0).mul_(w),
                       doctest::Contains("mul_: a view of a leaf tensor that requires grad (shape (2))"), GraphError);
  const Tensor y = w * 2.0;
  const Node* history = y.grad_fn().get();
  CHECK_THROWS_WITH_AS(y.add_(ones({3, 2}, kFloat64)),
                       "add_: the result's broadcast shape (3,2) does not match the shape of the tensor written in "
                       "place, (2)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(y.unsqueeze(0).expand({3, 2}).add_(w),
                       "add_: the tensor written in place (shape (3,2), strides (0,1)) has elements that share "
                       "memory, as an expanded tensor does; clone() it first",
                       ValueError);
  check_values(y, {2, 4}, 1e-15);
  CHECK(y.grad_fn().get() == history);
  // Without grad mode nothing is recorded: the values change, the history stays.
  {
    NoGradGuard no_grad;
    y.mul_(2.0);
  }
  check_values(y, {4, 8}, 1e-15);
  CHECK(y.grad_fn().get() == history);
  // set() cannot be recorded, so it is refused where a write would be.
  CHECK_THROWS_AS(y.set({0}, 1.0), GraphError);
}
