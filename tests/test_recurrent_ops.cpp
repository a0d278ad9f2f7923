// recurrent_layer and the one-step cells: the fused op against the cells' formulas written step
// by step with ops, float64 gradcheck and gradgradcheck for every mode, lengths and reverse, and
// the errors.

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "testing.h"

using namespace tapegrad;
using tapegrad::testing::check_gradients;
using tapegrad::testing::max_abs_diff;

namespace {

const RecurrentMode kModes[] = {RecurrentMode::RnnTanh, RecurrentMode::RnnRelu, RecurrentMode::Lstm,
                                RecurrentMode::Gru};

// The layer as PyTorch's documentation writes the cells, one step at a time with ops; an item
// whose length is over keeps its state and outputs 0.
TensorList reference_layer(RecurrentMode mode, const Tensor& xg, const Tensor& h0, const Tensor& c0, const Tensor& w,
                           const Tensor& b, const std::vector<std::int64_t>& lengths, bool reverse) {
  const std::int64_t T = xg.shape()[0], B = xg.shape()[1];
  Tensor h = h0, c = c0;
  TensorList outs(static_cast<std::size_t>(T));
  for (std::int64_t s = 0; s < T; ++s) {
    const std::int64_t t = reverse ? T - 1 - s : s;
    std::vector<bool> run;
    for (std::int64_t i = 0; i < B; ++i) run.push_back(t < lengths[static_cast<std::size_t>(i)]);
    const Tensor mask = from_vector(run, {B, 1});
    const Tensor gi = select(xg, 0, t);
    Tensor gh = matmul(h, w.mT());
    if (b.defined()) gh = gh + b;
    Tensor h_new, c_new;
    if (mode == RecurrentMode::Lstm) {
      const auto a = chunk(gi + gh, 4, 1);
      c_new = a[1].sigmoid() * c + a[0].sigmoid() * a[2].tanh();
      h_new = a[3].sigmoid() * c_new.tanh();
      c = where(mask, c_new, c);
    } else if (mode == RecurrentMode::Gru) {
      const auto i = chunk(gi, 3, 1), hh = chunk(gh, 3, 1);
      const Tensor r = (i[0] + hh[0]).sigmoid(), z = (i[1] + hh[1]).sigmoid();
      const Tensor n = (i[2] + r * hh[2]).tanh();
      h_new = (1.0 - z) * n + z * h;
    } else {
      h_new = mode == RecurrentMode::RnnTanh ? (gi + gh).tanh() : (gi + gh).relu();
    }
    h = where(mask, h_new, h);
    outs[static_cast<std::size_t>(t)] = where(mask, h_new, 0.0);
  }
  TensorList r{stack(outs, 0), h};
  if (mode == RecurrentMode::Lstm) r.push_back(c);
  return r;
}

struct Problem {
  Tensor xg, h0, c0, w, b, lengths;
  std::vector<std::int64_t> len;
};

Problem problem(RecurrentMode mode, std::int64_t T, std::int64_t B, std::int64_t H, std::vector<std::int64_t> len,
                DType dtype, std::uint64_t seed) {
  Generator gen(seed);
  const std::int64_t G = recurrent_gates(mode) * H;
  Problem p;
  p.xg = randn({T, B, G}, gen, dtype);
  p.h0 = randn({B, H}, gen, dtype) * 0.5;
  if (mode == RecurrentMode::Lstm) p.c0 = randn({B, H}, gen, dtype) * 0.5;
  p.w = randn({G, H}, gen, dtype) * 0.5;
  p.b = randn({G}, gen, dtype) * 0.5;
  p.len = std::move(len);
  p.lengths = from_vector(p.len, {B});
  return p;
}

Tensor flat(const TensorList& outputs) {
  TensorList parts;
  for (const Tensor& t : outputs) parts.push_back(t.reshape({-1}));
  return concat(parts, 0);
}

}  // namespace

TEST_CASE("recurrent_layer equals the cells written step by step, forward and backward") {
  for (RecurrentMode mode : kModes) {
    for (bool reverse : {false, true}) {
      CAPTURE(recurrent_mode_name(mode));
      CAPTURE(reverse);
      Problem p = problem(mode, 5, 4, 6, {5, 3, 0, 1}, kFloat64, 11);
      TensorList leaves{p.xg, p.h0, p.w, p.b};
      if (p.c0.defined()) leaves.push_back(p.c0);
      for (Tensor& t : leaves) t.requires_grad_(true);
      const TensorList fused = recurrent_layer(mode, p.xg, p.h0, p.c0, p.w, p.b, p.lengths, reverse);
      const TensorList ref = reference_layer(mode, p.xg, p.h0, p.c0, p.w, p.b, p.len, reverse);
      REQUIRE(fused.size() == ref.size());
      for (std::size_t i = 0; i < ref.size(); ++i) CHECK(max_abs_diff(fused[i], ref[i]) < 1e-12);
      Generator gen(5);
      const Tensor u = randn(flat(ref).shape(), gen, kFloat64);
      const TensorList g_fused = autograd::grad({(flat(fused) * u).sum()}, leaves);
      const TensorList g_ref = autograd::grad({(flat(ref) * u).sum()}, leaves);
      for (std::size_t i = 0; i < leaves.size(); ++i) CHECK(max_abs_diff(g_fused[i], g_ref[i]) < 1e-12);
    }
  }
}

TEST_CASE("recurrent_layer gradcheck and gradgradcheck in float64, with lengths and both directions") {
  for (RecurrentMode mode : kModes) {
    for (bool reverse : {false, true}) {
      CAPTURE(recurrent_mode_name(mode));
      CAPTURE(reverse);
      Problem p = problem(mode, 3, 3, 2, {3, 2, 0}, kFloat64, 3);
      TensorList inputs{p.xg, p.h0, p.w, p.b};
      if (p.c0.defined()) inputs.push_back(p.c0);
      const Tensor lengths = p.lengths;
      auto f = [mode, reverse, lengths](const TensorList& x) {
        const Tensor c0 = x.size() > 4 ? x[4] : Tensor();
        return flat(recurrent_layer(mode, x[0], x[1], c0, x[2], x[3], lengths, reverse));
      };
      const GradcheckResult first = gradcheck(f, inputs);
      CHECK_MESSAGE(first.passed, first.message());
      const GradcheckResult second = gradgradcheck(f, inputs);
      CHECK_MESSAGE(second.passed, second.message());
    }
  }
}

TEST_CASE("recurrent_layer without a bias or lengths, and float32 against float64") {
  for (RecurrentMode mode : kModes) {
    CAPTURE(recurrent_mode_name(mode));
    Problem p = problem(mode, 6, 3, 5, {6, 6, 6}, kFloat64, 21);
    const TensorList full = recurrent_layer(mode, p.xg, p.h0, p.c0, p.w, Tensor());
    const TensorList ref = reference_layer(mode, p.xg, p.h0, p.c0, p.w, Tensor(), p.len, false);
    for (std::size_t i = 0; i < ref.size(); ++i) CHECK(max_abs_diff(full[i], ref[i]) < 1e-12);
    const TensorList single =
        recurrent_layer(mode, p.xg.to(kFloat32), p.h0.to(kFloat32), p.c0.defined() ? p.c0.to(kFloat32) : Tensor(),
                        p.w.to(kFloat32), p.b.to(kFloat32), p.lengths);
    const TensorList dbl = recurrent_layer(mode, p.xg, p.h0, p.c0, p.w, p.b, p.lengths);
    for (std::size_t i = 0; i < dbl.size(); ++i) CHECK(max_abs_diff(single[i].to(kFloat64), dbl[i]) < 1e-5);
  }
}

TEST_CASE("recurrent_layer: an item in a padded batch equals the item run alone, and padding gets no gradient") {
  for (RecurrentMode mode : kModes) {
    for (bool reverse : {false, true}) {
      CAPTURE(recurrent_mode_name(mode));
      CAPTURE(reverse);
      Problem p = problem(mode, 7, 3, 4, {7, 4, 2}, kFloat64, 8);
      p.xg.requires_grad_(true);
      const TensorList batch = recurrent_layer(mode, p.xg, p.h0, p.c0, p.w, p.b, p.lengths, reverse);
      (batch[0].sum() + batch[1].sum()).backward();
      for (std::int64_t i = 0; i < 3; ++i) {
        const std::int64_t L = p.len[static_cast<std::size_t>(i)];
        const Tensor xi = narrow(narrow(p.xg.detach(), 1, i, 1), 0, 0, L).contiguous().requires_grad_(true);
        const Tensor ci = p.c0.defined() ? narrow(p.c0, 0, i, 1) : Tensor();
        const TensorList alone = recurrent_layer(mode, xi, narrow(p.h0, 0, i, 1), ci, p.w, p.b, Tensor(), reverse);
        CHECK(max_abs_diff(alone[0], narrow(narrow(batch[0], 1, i, 1), 0, 0, L)) < 1e-12);
        CHECK(max_abs_diff(alone[1], narrow(batch[1], 0, i, 1)) < 1e-12);
        (alone[0].sum() + alone[1].sum()).backward();
        CHECK(max_abs_diff(xi.grad(), narrow(narrow(p.xg.grad(), 1, i, 1), 0, 0, L)) < 1e-12);
        // Padded steps: output 0 and no gradient to the input there.
        if (L < 7) {
          CHECK(narrow(narrow(batch[0], 1, i, 1), 0, L, 7 - L).abs().max().item<double>() == 0.0);
          CHECK(narrow(narrow(p.xg.grad(), 1, i, 1), 0, L, 7 - L).abs().max().item<double>() == 0.0);
        }
      }
    }
  }
}

TEST_CASE("the one-step cells: gradcheck and gradgradcheck, and each equals one step of its layer") {
  Generator gen(4);
  const std::int64_t B = 3, I = 4, H = 2;
  for (RecurrentMode mode : kModes) {
    CAPTURE(recurrent_mode_name(mode));
    const std::int64_t G = recurrent_gates(mode) * H;
    TensorList in{randn({B, I}, gen, kFloat64), randn({B, H}, gen, kFloat64), randn({G, I}, gen, kFloat64),
                  randn({G, H}, gen, kFloat64), randn({G}, gen, kFloat64),    randn({G}, gen, kFloat64),
                  randn({B, H}, gen, kFloat64)};
    auto f = [mode](const TensorList& x) -> Tensor {
      switch (mode) {
        case RecurrentMode::RnnTanh:
          return rnn_tanh_cell(x[0], x[1], x[2], x[3], x[4], x[5]);
        case RecurrentMode::RnnRelu:
          return rnn_relu_cell(x[0], x[1], x[2], x[3], x[4], x[5]);
        case RecurrentMode::Lstm: {
          const auto [h, c] = lstm_cell(x[0], x[1], x[6], x[2], x[3], x[4], x[5]);
          return concat({h, c}, 1);
        }
        default:
          return gru_cell(x[0], x[1], x[2], x[3], x[4], x[5]);
      }
    };
    check_gradients(f, in);
    const Tensor xg = unsqueeze(linear(in[0], in[2], in[4]), 0);
    const Tensor c0 = mode == RecurrentMode::Lstm ? in[6] : Tensor();
    const TensorList step = reference_layer(mode, xg, in[1], c0, in[3], in[5], {1, 1, 1}, false);
    const Tensor expected = mode == RecurrentMode::Lstm ? concat({step[1], step[2]}, 1) : step[1];
    CHECK(max_abs_diff(f(in), expected) < 1e-12);
  }
}

TEST_CASE("recurrent_layer: a zero-step sequence returns the initial states") {
  Problem p = problem(RecurrentMode::Lstm, 0, 2, 3, {0, 0}, kFloat32, 1);
  const TensorList r = recurrent_layer(RecurrentMode::Lstm, p.xg, p.h0, p.c0, p.w, p.b);
  CHECK(r[0].shape() == Shape{0, 2, 3});
  CHECK(max_abs_diff(r[1], p.h0) == 0.0);
  CHECK(max_abs_diff(r[2], p.c0) == 0.0);
}

TEST_CASE("recurrent_layer errors name the op and the values") {
  Problem p = problem(RecurrentMode::Lstm, 4, 2, 3, {4, 2}, kFloat32, 1);
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(message([&] { recurrent_layer(RecurrentMode::Lstm, p.xg, p.h0, Tensor(), p.w, p.b); }) ==
        "lstm_layer: the LSTM needs c0");
  CHECK(message([&] { recurrent_layer(RecurrentMode::Gru, p.xg, p.h0, p.c0, p.w, p.b); }) ==
        "gru_layer: c0 is for the LSTM only");
  CHECK(message([&] { recurrent_layer(RecurrentMode::Gru, p.xg, p.h0, Tensor(), p.w, p.b); }) ==
        "gru_layer: input_gates' last axis must be 3 H = 9 for hidden size 3, got shape (4,2,12)");
  CHECK(message([&] { recurrent_layer(RecurrentMode::Lstm, p.xg, p.h0, p.c0, p.w.mT(), p.b); }) ==
        "lstm_layer: w_hh must be (12,3), got shape (3,12)");
  CHECK(message([&] {
          recurrent_layer(RecurrentMode::Lstm, p.xg, p.h0, p.c0, p.w, p.b,
                          from_vector(std::vector<std::int64_t>{4, 5}, {2}));
        }) == "lstm_layer: lengths[1] = 5 is outside [0, 4]");
  CHECK(message([&] { recurrent_layer(RecurrentMode::Lstm, p.xg, p.h0.to(kFloat64), p.c0, p.w, p.b); }) ==
        "lstm_layer: dtype mismatch, input_gates is float32 and a state or weight is float64");
  CHECK(message([&] { recurrent_layer(RecurrentMode::Lstm, p.xg, p.h0, p.c0, p.w, p.b, p.lengths.to(kFloat32)); }) ==
        "lstm_layer: lengths must be int64 of shape (2), got float32 of shape (2)");
  CHECK(message([&] {
          gru_cell(randn({2, 5}, default_generator()), p.h0, p.w, p.w);
        }) == "gru_cell: w_ih of shape (12,3) does not take input of shape (2,5)");
}
