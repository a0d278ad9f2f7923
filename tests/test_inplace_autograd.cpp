// In-place writes on the tape (tapegrad/autograd/inplace.h): every recorded write against finite
// differences, writes through views into the base's gradient (CopySlices), views made before their
// base was written, operands that alias the written tensor, saved tensors written afterwards, the
// refusals, and second derivatives.

#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <tuple>
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

TEST_CASE("inplace autograd: elementwise math in place equals the out-of-place op, values and gradients") {
  Generator gen(4);
  const Tensor x = rand({2, 3}, gen, kFloat64) + 0.25;  // positive, away from 0 (log, sqrt, reciprocal)
  using Method = const Tensor& (Tensor::*)() const;
  using Op = Tensor (*)(const Tensor&);
  const std::vector<std::tuple<std::string, Method, Op>> ops{
      {"relu_", &Tensor::relu_, tapegrad::relu},
      {"sigmoid_", &Tensor::sigmoid_, tapegrad::sigmoid},
      {"tanh_", &Tensor::tanh_, tapegrad::tanh},
      {"exp_", &Tensor::exp_, tapegrad::exp},
      {"log_", &Tensor::log_, tapegrad::log},
      {"sqrt_", &Tensor::sqrt_, tapegrad::sqrt},
      {"abs_", &Tensor::abs_, tapegrad::abs},
      {"neg_", &Tensor::neg_, tapegrad::neg},
      {"reciprocal_", &Tensor::reciprocal_, tapegrad::reciprocal},
      {"sin_", &Tensor::sin_, tapegrad::sin},
      {"cos_", &Tensor::cos_, tapegrad::cos},
      {"floor_", &Tensor::floor_, tapegrad::floor},
      {"ceil_", &Tensor::ceil_, tapegrad::ceil},
      {"round_", &Tensor::round_, tapegrad::round},
      {"trunc_", &Tensor::trunc_, tapegrad::trunc},
  };
  const Tensor g = randn({2, 3}, gen, kFloat64);
  for (const auto& [name, method, op] : ops) {
    CAPTURE(name);
    const Tensor a = x.clone().requires_grad_(), b = x.clone().requires_grad_();
    const Tensor ya = a * 3.0;
    (ya.*method)();
    CHECK(std::string(ya.grad_fn()->name) == name);
    const Tensor yb = op(b * 3.0);
    check_close(ya, yb, 0.0);
    ya.backward(g);
    yb.backward(g);
    check_close(a.grad(), b.grad(), 0.0);
    check_write(name,
                [method = method](const TensorList& in) {
                  const Tensor y = in[0] * 3.0;
                  (y.*method)();
                  return y * in[0];
                },
                {x});
  }
  check_write("pow_",
              [](const TensorList& in) {
                const Tensor y = in[0] * 3.0;
                y.pow_(1.5);
                return y;
              },
              {x});
  // Without grad mode they write, whatever needs grad; an int64 tensor keeps what casts back.
  const Tensor ids = tensor({-2, 3}, kInt64);
  check_values(ids.abs_().neg_(), {-2, -3}, 1e-15);
  CHECK_THROWS_WITH_AS(ids.exp_(), "exp_: the result's dtype float32 cannot be written into a tensor of dtype int64",
                       TypeError);
  check_values(ids, {-2, -3}, 1e-15);
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

TEST_CASE("index writes: index_add, index_copy, index_fill and scatter give torch's values and gradients") {
  // torch 1.13 on x = arange(12).reshape(3, 4), float64.
  const Tensor x = arange(0.0, 12.0, 1.0, kFloat64).reshape({3, 4});
  const Tensor src = tensor({{10, 20, 30, 40}, {50, 60, 70, 80}}, kFloat64);
  const Tensor rows = tensor({2, 0}, kInt64);
  check_values(index_add(x, 0, rows, src, 0.5), {25, 31, 37, 43, 4, 5, 6, 7, 13, 19, 25, 31}, 1e-15);
  check_values(index_copy(x, 0, rows, src), {50, 60, 70, 80, 4, 5, 6, 7, 10, 20, 30, 40}, 1e-15);
  check_values(index_fill(x, 1, tensor({1, 3}, kInt64), -1.0), {0, -1, 2, -1, 4, -1, 6, -1, 8, -1, 10, -1}, 1e-15);
  const Tensor cols = tensor({{1, 2}, {0, 3}}, kInt64);
  const Tensor wide = tensor({{100, 200, 300}, {400, 500, 600}}, kFloat64);  // only its (2, 2) corner is read
  check_values(scatter(x, 1, cols, wide), {0, 100, 200, 3, 400, 5, 6, 500, 8, 9, 10, 11}, 1e-15);
  check_values(scatter(x, 1, cols, 7.0), {0, 7, 7, 3, 7, 5, 6, 7, 8, 9, 10, 11}, 1e-15);

  // Gradients, torch's for the weights w = x + 1: index_copy's x gets w where it was kept, src
  // w's rows 2 and 0; scatter's src gets w at the written entries.
  const Tensor w = x + 1.0;
  const Tensor xa = x.clone().requires_grad_(), sa = src.clone().requires_grad_();
  (index_copy(xa, 0, rows, sa) * w).sum().backward();
  check_values(xa.grad(), {0, 0, 0, 0, 5, 6, 7, 8, 0, 0, 0, 0}, 1e-15);
  check_values(sa.grad(), {9, 10, 11, 12, 1, 2, 3, 4}, 1e-15);
  const Tensor xb = x.clone().requires_grad_(), sb = tensor({{100, 200}, {400, 500}}, kFloat64).requires_grad_();
  (scatter(xb, 1, cols, sb) * w).sum().backward();
  check_values(xb.grad(), {1, 0, 0, 4, 0, 6, 7, 0, 9, 10, 11, 12}, 1e-15);
  check_values(sb.grad(), {2, 3, 5, 8}, 1e-15);

  Generator gen(9);
  const Tensor xs = randn({3, 4}, gen, kFloat64), ss = randn({2, 4}, gen, kFloat64);
  check_write("index_add", [&](const TensorList& in) { return index_add(in[0], 0, rows, in[1], -2.0); }, {xs, ss});
  check_write("index_copy", [&](const TensorList& in) { return index_copy(in[0] * in[0], 0, rows, in[1]); }, {xs, ss});
  check_write("index_fill", [&](const TensorList& in) { return index_fill(in[0], 1, cols.select(0, 0), 2.0); }, {xs});
  check_write("scatter", [&](const TensorList& in) { return scatter(in[0], 1, cols, in[1] * in[1]); },
              {xs, randn({2, 3}, gen, kFloat64)});
  // In place, through a view, recorded.
  check_write("scatter_ into a view",
              [&](const TensorList& in) {
                const Tensor y = in[0] * 1.0;
                y.narrow(0, 1, 2).scatter_(1, cols, in[1]);
                y.index_add_(1, tensor({3, 3}, kInt64), in[0].narrow(1, 0, 2));  // a repeated index adds twice
                y.index_fill_(0, tensor({0}, kInt64), 0.5);
                return y * in[0];
              },
              {xs, randn({2, 2}, gen, kFloat64)});
  check_write("index_copy_ and scatter_add_",
              [&](const TensorList& in) {
                const Tensor buffer = zeros({3, 4}, kFloat64);
                buffer.index_copy_(0, rows, in[1]);
                buffer.scatter_add_(1, cols, in[0].narrow(0, 0, 2));
                buffer.scatter_(1, cols.narrow(0, 0, 1), 3.0);
                return buffer * buffer;
              },
              {xs, ss});
}

TEST_CASE("index writes: unrecorded in-place forms write row by row and equal the out-of-place ops") {
  Generator gen(12);
  const Tensor table = randn({50, 4}, gen, kFloat64);
  const Tensor rows = tensor({7, 3, 7, 49}, kInt64);  // 7 twice: copy keeps the last, add adds both
  const Tensor src = randn({4, 4}, gen, kFloat64);
  check_close(table.clone().index_copy_(0, rows, src), index_copy(table, 0, rows, src), 0.0);
  check_close(table.clone().index_add_(0, rows, src, -0.5), index_add(table, 0, rows, src, -0.5), 1e-15);
  check_close(table.clone().index_fill_(1, tensor({0, 2}, kInt64), 9.0),
              index_fill(table, 1, tensor({0, 2}, kInt64), 9.0), 0.0);
  const Tensor cols = randn({50, 2}, gen, kFloat64);
  check_close(table.clone().index_copy_(1, tensor({3, 1}, kInt64), cols),
              index_copy(table, 1, tensor({3, 1}, kInt64), cols), 0.0);
  const Tensor kept = table.clone();
  CHECK_THROWS_WITH_AS(kept.index_copy_(0, tensor({1, 50}, kInt64), randn({2, 4}, gen, kFloat64)),
                       "index_copy_: index 50 is out of range for size 50 along axis 0", IndexError);
  check_close(kept, table, 0.0);
}

TEST_CASE("index writes: errors name the op and the values, and leave the tensor as it was") {
  const Tensor x = zeros({3, 4});
  CHECK_THROWS_WITH_AS(index_add(x, 0, tensor({3}, kInt64), ones({1, 4})),
                       "index_add: index 3 is out of range for size 3 along axis 0", IndexError);
  CHECK_THROWS_WITH_AS(index_copy(x, 1, tensor({0, 1}, kInt64), ones({3, 3})),
                       "index_copy: src of shape (3,3) does not fit x of shape (3,4) and 2 indices along axis 1 "
                       "(expected (3,2))",
                       ShapeError);
  CHECK_THROWS_WITH_AS(index_fill(x, 0, tensor({{0}}, kInt64), 1.0), "index_fill: index must be 1-D, got shape (1,1)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(index_add(x, 0, tensor({0}), ones({1, 4})),
                       "index_add: index must be an int64 tensor, got float32", TypeError);
  CHECK_THROWS_WITH_AS(index_copy(x, 0, tensor({0}, kInt64), ones({1, 4}, kFloat64)),
                       "index_copy: x is float32 but src is float64", TypeError);
  CHECK_THROWS_WITH_AS(scatter(x, 1, tensor({{0, -1}}, kInt64), 1.0),
                       "scatter: index -1 is out of range for size 4 along axis 1", IndexError);
  CHECK_THROWS_WITH_AS(scatter(x, 1, tensor({{0, 1}}, kInt64), ones({1, 1})),
                       "scatter: index of shape (1,2) is larger than src of shape (1,1) at axis 1", ShapeError);
  CHECK_THROWS_AS(x.index_fill_(0, tensor({5}, kInt64), 1.0), IndexError);
  check_values(x, std::vector<double>(12, 0.0), 1e-15);
}

TEST_CASE("index writes: a repeated index keeps the last write, as torch's CPU kernels") {
  // torch 1.13: zeros(5).index_put_((tensor([1, 3, 1]),), tensor([10, 20, 30])) and index_copy give
  // [0, 30, 0, 20, 0]; scatter along axis 1 of zeros(2, 5) with [[1, 3, 1], [0, 0, 4]] and
  // [[10, 20, 30], [1, 2, 3]] gives [[0, 30, 0, 20, 0], [2, 0, 0, 0, 3]].
  const Tensor v = tensor({10, 20, 30}, kFloat64).requires_grad_();
  const Tensor at = tensor({1, 3, 1}, kInt64);
  check_values(index_put(zeros({5}, kFloat64), {at}, v), {0, 30, 0, 20, 0}, 1e-15);
  const Tensor y = index_copy(zeros({5}, kFloat64), 0, at, v);
  check_values(y, {0, 30, 0, 20, 0}, 1e-15);
  // The overwritten 10 had no effect, so no gradient (torch gives it the written entry's, 2).
  (y * arange(1.0, 6.0, 1.0, kFloat64)).sum().backward();
  check_values(v.grad(), {0, 4, 2}, 1e-15);
  check_values(scatter(zeros({2, 5}, kFloat64), 1, tensor({{1, 3, 1}, {0, 0, 4}}, kInt64),
                       tensor({{10, 20, 30}, {1, 2, 3}}, kFloat64)),
               {0, 30, 0, 20, 0, 2, 0, 0, 0, 3}, 1e-15);
  check_write("scatter with repeats",
              [](const TensorList& in) {
                return scatter(in[0], 1, tensor({{1, 3, 1}, {0, 0, 4}}, kInt64), in[1] * in[1]) * in[0];
              },
              {tensor({{0.1, 0.2, 0.3, 0.4, 0.5}, {0.6, 0.7, 0.8, 0.9, 1.0}}, kFloat64),
               tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}, kFloat64)});
}

TEST_CASE("advanced indexing: index and index_put are torch's x[i, j] and x[i, j] = v") {
  // torch 1.13, x = arange(24).reshape(2, 3, 4), r = [[1], [0]], c = [2, -1] (broadcast to (2, 2)).
  const Tensor x = arange(0.0, 24.0, 1.0, kFloat64).reshape({2, 3, 4});
  const Tensor r = tensor({{1}, {0}}, kInt64), c = tensor({2, -1}, kInt64);
  const Tensor picked = index(x, {r, c});
  CHECK(picked.shape() == Shape{2, 2, 4});
  check_values(picked, {20, 21, 22, 23, 20, 21, 22, 23, 8, 9, 10, 11, 8, 9, 10, 11}, 1e-15);
  const Tensor v = tensor({100, 200, 300, 400}, kFloat64);
  std::vector<double> put(24);
  for (int i = 0; i < 24; ++i) put[i] = i;
  for (int j = 0; j < 4; ++j) put[8 + j] = put[20 + j] = 100.0 * (j + 1);
  check_values(index_put(x, {r, c}, v), put, 1e-15);
  check_values(index_put(x, {tensor({0, 0}, kInt64), tensor({1, 1}, kInt64)}, tensor({1, 2, 3, 4}, kFloat64), true)
                   .narrow(1, 1, 1),
               {6, 9, 12, 15, 16, 17, 18, 19}, 1e-15);
  // Gradients: x's where it was kept (torch: w there, 0 at rows (0, 2) and (1, 2)), v's the sum of
  // w over the places it was written... once each: torch gives [60, 64, 68, 72] counting the
  // repeated (1, 2) twice; here the repeat's first write is overwritten and gets none: w[0][2] +
  // w[1][2] = [9 + 21, ...] = [30, 32, 34, 36].
  const Tensor w = x + 1.0;
  const Tensor xa = x.clone().requires_grad_(), va = v.clone().requires_grad_();
  (index_put(xa, {r, c}, va) * w).sum().backward();
  std::vector<double> gx(24);
  for (int i = 0; i < 24; ++i) gx[i] = (i / 4 == 2 || i / 4 == 5) ? 0.0 : i + 1.0;
  check_values(xa.grad(), gx, 1e-15);
  check_values(va.grad(), {30, 32, 34, 36}, 1e-15);

  Generator gen(11);
  const Tensor xs = randn({3, 4, 2}, gen, kFloat64);
  const Tensor rows = tensor({2, 0, 2}, kInt64), cols = tensor({1, 3, -4}, kInt64);
  check_write("index", [&](const TensorList& in) { return index(in[0] * in[0], {rows, cols}); }, {xs});
  check_write("index_put_",
              [&](const TensorList& in) {
                const Tensor y = in[0] * 1.0;
                y.index_put_({rows, cols}, in[1]);
                y.index_put_({tensor({1}, kInt64)}, in[1].narrow(0, 0, 1).sum({0}, true).expand({1, 4, 2}), true);
                return y * in[0];
              },
              {xs, randn({3, 2}, gen, kFloat64)});
  CHECK_THROWS_WITH_AS(index(x, {r, c, c, c}),
                       "index: 4 index tensors for a tensor of shape (2,3,4) (one for each of its first axes, at least "
                       "one)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(index(x, {tensor({2}, kInt64)}), "index: index 2 is out of range for size 2 along axis 0",
                       IndexError);
  CHECK_THROWS_WITH_AS(index_put(x, {r, c}, ones({3}, kFloat64)),
                       "index_put: shapes (3) and (2,2,4) cannot be broadcast together", ShapeError);
  CHECK_THROWS_WITH_AS(index_put(x, {r, c}, ones({3, 1, 1, 4}, kFloat64)),
                       "index_put: values of shape (3,1,1,4) do not broadcast to the indexed shape (2,2,4)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(index(x, {tensor({0})}), "index: index 0 must be an int64 tensor, got float32", TypeError);
}
