// bfloat16 products and autocast: the product against float64 arithmetic on the rounded
// operands, the policy's dtypes, the guard's scoping, and a transformer's loss and gradients under
// autocast against float32.

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tapegrad/autograd/kernels/blas.h"
#include "tapegrad/autograd/kernels/gemm_bf16.h"
#include "tapegrad/nn/nn.h"
#include "testing.h"

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

// a @ b in float64 from the bfloat16 values of a and b, and the bound on float32 accumulation error
// for each entry (k units of float32 rounding times sum_p |a_ip b_pj|).
struct Reference {
  Tensor value;  // float64
  Tensor bound;  // float64
};

Reference float64_product(const Tensor& a, const Tensor& b) {
  const Tensor a64 = a.to(kFloat64), b64 = b.to(kFloat64);
  const std::int64_t k = a.shape().back();
  const double unit = std::ldexp(1.0, -24);
  return {matmul(a64, b64), matmul(abs(a64), abs(b64)) * (static_cast<double>(k + 2) * unit)};
}

// Every entry of got (float32 or bfloat16) within its float32 accumulation bound of the reference,
// plus the final rounding to got's dtype (half a unit in the last place of bfloat16: 2^-9 relative).
void check_product(const Tensor& got, const Reference& ref) {
  REQUIRE(got.shape() == ref.value.shape());
  const double rounding = got.dtype() == kBFloat16 ? std::ldexp(1.0, -8) : 0.0;
  const std::vector<double> g = got.to(kFloat64).contiguous().to_vector<double>();
  const std::vector<double> v = ref.value.contiguous().to_vector<double>();
  const std::vector<double> b = ref.bound.contiguous().to_vector<double>();
  for (std::size_t i = 0; i < g.size(); ++i) {
    INFO("entry " << i << ": got " << g[i] << ", float64 " << v[i]);
    CHECK(std::abs(g[i] - v[i]) <= b[i] + rounding * std::abs(v[i]) + 1e-30);
  }
}

Tensor bf16_randn(const Shape& shape, Generator& gen) { return randn(shape, gen).to(kBFloat16); }

// Random bfloat16 operands of an (m, k) @ (k, n) product, stored transposed or not, with row strides
// past their rows (A's by 5, B's by 1): the stores, their strides, and op(A), op(B) as views.
struct Operands {
  Tensor a_store, b_store, op_a, op_b;
  std::int64_t lda, ldb;
};

Operands random_operands(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, Generator& gen) {
  const std::int64_t a_rows = ta ? k : m, a_cols = ta ? m : k;
  const std::int64_t b_rows = tb ? n : k, b_cols = tb ? k : n;
  Operands o;
  o.a_store = bf16_randn({a_rows, a_cols + 5}, gen);
  o.b_store = bf16_randn({b_rows, b_cols + 1}, gen);
  o.op_a = ta ? o.a_store.narrow(1, 0, a_cols).mT() : o.a_store.narrow(1, 0, a_cols);
  o.op_b = tb ? o.b_store.narrow(1, 0, b_cols).mT() : o.b_store.narrow(1, 0, b_cols);
  o.lda = a_cols + 5;
  o.ldb = b_cols + 1;
  return o;
}

// Whether two float32 tensors hold the same bits (NaN included).
bool same_bits(const Tensor& x, const Tensor& y) {
  const std::vector<float> u = x.contiguous().to_vector<float>(), v = y.contiguous().to_vector<float>();
  return u.size() == v.size() && std::memcmp(u.data(), v.data(), u.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("bfloat16 product: the kernel equals float64 arithmetic on the bfloat16 values") {
  Generator gen(11);
  struct Case {
    bool ta, tb;
    std::int64_t m, n, k;
  };
  for (const Case c : {Case{false, false, 1, 1, 1}, Case{false, false, 7, 13, 5}, Case{true, false, 9, 3, 17},
                       Case{false, true, 33, 65, 129}, Case{true, true, 64, 48, 300}, Case{false, false, 1, 257, 31},
                       Case{false, false, 130, 1, 77}}) {
    CAPTURE(c.m);
    CAPTURE(c.n);
    CAPTURE(c.k);
    const Operands o = random_operands(c.ta, c.tb, c.m, c.n, c.k, gen);
    Tensor out = full({c.m, c.n}, 0.5);  // beta = 1 adds it
    kernels::gemm(c.ta, c.tb, c.m, c.n, c.k, 2.0f, o.a_store.data_ptr<BFloat16>(), o.lda,
                  o.b_store.data_ptr<BFloat16>(), o.ldb, 1.0f, out.data_ptr<float>(), c.n);
    Reference ref = float64_product(o.op_a, o.op_b);
    ref.value = ref.value * 2.0 + 0.5;
    ref.bound = ref.bound * 2.0 + std::ldexp(1.0, -24);
    check_product(out, ref);
  }
}

TEST_CASE("bfloat16 product: the vdpbf16ps kernel and the widening one both equal float64 arithmetic") {
  // The shapes cross the dot-product kernel's blocks: k past one block of 256 (and odd, so the last
  // pair is half empty), rows past one block of 168 and not a multiple of the 14-row tile (401 rows:
  // 29 tiles, in four blocks of 7 or 8 on two threads), columns past one packed block of 4096 and not a multiple of
  // the 32-column tile, and a single row block (its columns then split among the threads).
  const bool dot_product = kernels::cpu_has_avx512_bf16();
  CHECK(kernels::bf16_gemm_kernel() ==
        (dot_product ? kernels::Bf16GemmKernel::kDotProduct : kernels::Bf16GemmKernel::kWidening));
  if (!dot_product) MESSAGE("this CPU has no AVX512_BF16: only the widening kernel is checked here");
  Generator gen(12);
  struct Case {
    bool ta, tb;
    std::int64_t m, n, k;
    float beta;
  };
  for (const Case c : {Case{false, false, 200, 45, 513, 0.0f}, Case{true, false, 171, 33, 257, 0.5f},
                       Case{false, true, 15, 4100, 3, 1.0f}, Case{true, true, 29, 70, 600, 0.0f},
                       Case{false, false, 5, 200, 64, -2.0f}, Case{false, true, 1, 1, 1, 0.0f},
                       Case{true, false, 401, 40, 70, 0.0f}}) {
    CAPTURE(c.ta);
    CAPTURE(c.tb);
    CAPTURE(c.m);
    CAPTURE(c.n);
    CAPTURE(c.k);
    const Operands o = random_operands(c.ta, c.tb, c.m, c.n, c.k, gen);
    // C's row stride is n + 2; beta = 0 must not read C, which starts as NaN then.
    const Tensor c_start =
        c.beta == 0.0f ? full({c.m, c.n + 2}, std::numeric_limits<double>::quiet_NaN()) : randn({c.m, c.n + 2}, gen);
    Reference ref = float64_product(o.op_a, o.op_b);
    ref.value = ref.value * -1.5;
    ref.bound = ref.bound * 1.5 + std::ldexp(1.0, -24) * abs(ref.value);
    if (c.beta != 0.0f) {
      const Tensor c64 = c_start.narrow(1, 0, c.n).to(kFloat64);
      ref.value = ref.value + c64 * static_cast<double>(c.beta);
      ref.bound = ref.bound + abs(c64) * (std::abs(static_cast<double>(c.beta)) * std::ldexp(1.0, -23));
    }
    const auto run = [&](auto kernel) {
      Tensor out = c_start.clone();
      kernel(c.ta, c.tb, c.m, c.n, c.k, -1.5f, o.a_store.data_ptr<BFloat16>(), o.lda, o.b_store.data_ptr<BFloat16>(),
             o.ldb, c.beta, out.data_ptr<float>(), c.n + 2);
      // The two columns past n are never written.
      CHECK(same_bits(out.narrow(1, c.n, 2), c_start.narrow(1, c.n, 2)));
      return out.narrow(1, 0, c.n);
    };
    check_product(run(kernels::gemm_bf16_widening), ref);
    if (dot_product) check_product(run(kernels::gemm_bf16_avx512), ref);
  }
}

TEST_CASE("bfloat16 product: the rounded kernels add the bias and round the float32 sum once") {
  // The same block edges as above, k = 0 and 1 included, with and without a bias; C's row stride is
  // n + 3 and the columns past n keep their bits.
  const bool dot_product = kernels::cpu_has_avx512_bf16();
  Generator gen(13);
  struct Case {
    bool ta, tb;
    std::int64_t m, n, k;
    bool bias;
  };
  for (const Case c :
       {Case{false, true, 200, 45, 513, true}, Case{true, false, 171, 33, 257, false},
        Case{false, false, 15, 70, 3, true}, Case{true, true, 29, 70, 600, false}, Case{false, true, 30, 64, 256, true},
        Case{false, false, 4, 5, 0, true}, Case{false, true, 1, 1, 1, false}}) {
    CAPTURE(c.ta);
    CAPTURE(c.tb);
    CAPTURE(c.m);
    CAPTURE(c.n);
    CAPTURE(c.k);
    CAPTURE(c.bias);
    const Operands o = random_operands(c.ta, c.tb, c.m, c.n, c.k, gen);
    const Tensor bias = randn({c.n}, gen);
    const float* pbias = c.bias ? bias.data_ptr<float>() : nullptr;
    const Tensor c_start = bf16_randn({c.m, c.n + 3}, gen);
    Reference ref = float64_product(o.op_a, o.op_b);
    if (c.bias) ref.value = ref.value + bias.to(kFloat64);
    ref.bound = ref.bound + abs(ref.value) * std::ldexp(1.0, -24);
    const auto run = [&](auto kernel) {
      Tensor out = c_start.clone();
      kernel(c.ta, c.tb, c.m, c.n, c.k, o.a_store.data_ptr<BFloat16>(), o.lda, o.b_store.data_ptr<BFloat16>(), o.ldb,
             pbias, out.data_ptr<BFloat16>(), c.n + 3);
      CHECK(same_bits(out.narrow(1, c.n, 3).to(kFloat32), c_start.narrow(1, c.n, 3).to(kFloat32)));
      return out.narrow(1, 0, c.n);
    };
    // The float32 kernels' sums, with the bias as the rounded kernels add it: the widening one
    // starts its sum from the bias (beta = 1), the dot-product one adds it to the finished sum.
    const auto float32_sum = [&](auto kernel, bool bias_first) {
      Tensor sum = zeros({c.m, c.n});
      if (c.bias && bias_first) sum = sum + bias;
      kernel(c.ta, c.tb, c.m, c.n, c.k, 1.0f, o.a_store.data_ptr<BFloat16>(), o.lda, o.b_store.data_ptr<BFloat16>(),
             o.ldb, c.bias && bias_first ? 1.0f : 0.0f, sum.data_ptr<float>(), c.n);
      return c.bias && !bias_first ? sum + bias : sum;
    };
    const Tensor widened = run(kernels::gemm_bf16_widening_rounded);
    check_product(widened, ref);
    CHECK(same_bits(widened.to(kFloat32), float32_sum(kernels::gemm_bf16_widening, true).to(kBFloat16).to(kFloat32)));
    if (dot_product) {
      const Tensor dotted = run(kernels::gemm_bf16_avx512_rounded);
      check_product(dotted, ref);
      CHECK(same_bits(dotted.to(kFloat32), float32_sum(kernels::gemm_bf16_avx512, false).to(kBFloat16).to(kFloat32)));
    }
  }
}

TEST_CASE("bfloat16 product: TAPEGRAD_BF16_GEMM picks the kernel and refuses what cannot run") {
  using kernels::Bf16GemmKernel;
  CHECK(kernels::bf16_gemm_kernel_from(nullptr, true) == Bf16GemmKernel::kDotProduct);
  CHECK(kernels::bf16_gemm_kernel_from(nullptr, false) == Bf16GemmKernel::kWidening);
  CHECK(kernels::bf16_gemm_kernel_from("", true) == Bf16GemmKernel::kDotProduct);
  CHECK(kernels::bf16_gemm_kernel_from("widen", true) == Bf16GemmKernel::kWidening);
  CHECK(kernels::bf16_gemm_kernel_from("avx512", true) == Bf16GemmKernel::kDotProduct);
  CHECK_THROWS_WITH_AS(kernels::bf16_gemm_kernel_from("avx512", false),
                       "TAPEGRAD_BF16_GEMM = 'avx512', but this CPU has no AVX512_BF16 instructions", ValueError);
  CHECK_THROWS_WITH_AS(kernels::bf16_gemm_kernel_from("amx", true),
                       "TAPEGRAD_BF16_GEMM = 'amx': expected 'avx512' or 'widen'", ValueError);
}

TEST_CASE("bfloat16 product: matmul and linear on every operand layout") {
  Generator gen(12);
  // (a shape, b shape): vectors, odd sizes, transposed operands, broadcast batches.
  const std::vector<std::pair<Shape, Shape>> shapes = {{{5}, {5}},           {{5}, {5, 3}},
                                                       {{4, 5}, {5}},        {{1, 1}, {1, 1}},
                                                       {{7, 13}, {13, 9}},   {{2, 1, 3, 4}, {5, 4, 6}},
                                                       {{3, 8, 16}, {16, 4}}};
  for (const auto& [sa, sb] : shapes) {
    CAPTURE(sa.str());
    CAPTURE(sb.str());
    const Tensor a = bf16_randn(sa, gen), b = bf16_randn(sb, gen);
    const Tensor y = matmul(a, b);
    CHECK(y.dtype() == kBFloat16);
    check_product(y, float64_product(a, b));
  }
  // Transposed views multiply in place.
  const Tensor a = bf16_randn({6, 10}, gen), b = bf16_randn({7, 10}, gen);
  check_product(matmul(a, b.mT()), float64_product(a, b.mT()));
  check_product(matmul(a.mT().contiguous().mT(), b.mT()), float64_product(a, b.mT()));
  // linear: x W^T + b, the bias added before the single rounding.
  const Tensor x = bf16_randn({2, 3, 10}, gen), w = bf16_randn({4, 10}, gen), bias = bf16_randn({4}, gen);
  const Tensor y = linear(x, w, bias);
  CHECK(y.dtype() == kBFloat16);
  Reference ref = float64_product(x, w.mT());
  ref.value = ref.value + bias.to(kFloat64);
  check_product(y, ref);
}

TEST_CASE("autocast: products run in bfloat16, precision-sensitive ops in float32, the rest follow") {
  Generator gen(13);
  const Tensor x = randn({4, 6}, gen), w = randn({5, 6}, gen), b = randn({5}, gen);
  CHECK_FALSE(autocast_enabled());
  CHECK(autocast_dtype() == kBFloat16);
  {
    AutocastGuard autocast(kBFloat16);
    CHECK(autocast_enabled());
    const Tensor y = linear(x, w, b);
    CHECK(y.dtype() == kBFloat16);
    CHECK(matmul(x, w.mT()).dtype() == kBFloat16);
    CHECK(matmul(x.to(kBFloat16), w.mT()).dtype() == kBFloat16);
    CHECK(softmax(y, 1).dtype() == kFloat32);
    CHECK(log_softmax(y, 1).dtype() == kFloat32);
    CHECK(layer_norm(y, {5}, ones({5}), zeros({5}), 1e-5).dtype() == kFloat32);
    CHECK(sum(y).dtype() == kFloat32);
    CHECK(cumsum(y, 1).dtype() == kFloat32);
    CHECK(mean(y, {0}).dtype() == kFloat32);
    CHECK(exp(y).dtype() == kFloat32);
    CHECK(log(abs(y) + 1.0).dtype() == kFloat32);
    CHECK(logsumexp(y, {1}).dtype() == kFloat32);
    CHECK(nn::cross_entropy(y, tensor({0, 1, 2, 3}, kInt64)).dtype() == kFloat32);
    CHECK(nn::mse_loss(y, zeros({4, 5})).dtype() == kFloat32);
    CHECK(nn::l1_loss(y, zeros({4, 5})).dtype() == kFloat32);
    CHECK(nn::smooth_l1_loss(y, zeros({4, 5})).dtype() == kFloat32);
    CHECK(nn::huber_loss(y, zeros({4, 5}), nn::Reduction::None).dtype() == kFloat32);
    // Followers.
    CHECK(gelu(y).dtype() == kBFloat16);
    CHECK(relu(y).dtype() == kBFloat16);
    CHECK(tanh(y).dtype() == kBFloat16);
    CHECK((y * 2.0).dtype() == kBFloat16);
    CHECK((y + y).dtype() == kBFloat16);
    CHECK(y.reshape({20}).dtype() == kBFloat16);
    CHECK(y.transpose(0, 1).contiguous().dtype() == kBFloat16);
    // A bfloat16 operand beside a float32 one meets it in float32.
    CHECK((y + randn({4, 5}, gen)).dtype() == kFloat32);
    CHECK((randn({4, 5}, gen) * y).dtype() == kFloat32);
    // float64 is never touched.
    const Tensor y64 = linear(x.to(kFloat64), w.to(kFloat64), b.to(kFloat64));
    CHECK(y64.dtype() == kFloat64);
    {
      AutocastGuard off(kBFloat16, false);
      CHECK_FALSE(autocast_enabled());
      CHECK(linear(x, w, b).dtype() == kFloat32);
    }
    CHECK(autocast_enabled());
  }
  CHECK_FALSE(autocast_enabled());
  // Outside autocast a bfloat16 input gives a bfloat16 result, computed in float32.
  const Tensor h = randn({3, 4}, gen).to(kBFloat16);
  CHECK(softmax(h, 1).dtype() == kBFloat16);
  CHECK(sum(h).dtype() == kBFloat16);
  CHECK(sum(h).item() == doctest::Approx(static_cast<double>(sum(h.to(kFloat32)).to(kBFloat16).item())));
  CHECK(nn::cross_entropy(h, tensor({0, 1, 3}, kInt64)).dtype() == kBFloat16);
  CHECK(max(h).dtype() == kBFloat16);
  CHECK(max(h).item() == max(h.to(kFloat32)).item());
  CHECK(argmax(h, 1).to_vector<std::int64_t>() == argmax(h.to(kFloat32), 1).to_vector<std::int64_t>());
  CHECK_THROWS_WITH_AS(AutocastGuard{kFloat64}, "AutocastGuard: only bfloat16 autocast exists, got float64",
                       ValueError);
}

TEST_CASE("autocast: the state belongs to the thread") {
  AutocastGuard autocast(kBFloat16);
  bool other_thread_sees = true;
  std::thread other([&] { other_thread_sees = autocast_enabled(); });
  other.join();
  CHECK_FALSE(other_thread_sees);
  CHECK(autocast_enabled());
}

TEST_CASE("autocast: casts are on the tape, so float32 leaves get float32 gradients") {
  Generator gen(14);
  const Tensor x = randn({3, 4}, gen);
  const Tensor w = randn({2, 4}, gen).requires_grad_();
  const Tensor b = randn({2}, gen).requires_grad_();
  Tensor loss;
  {
    AutocastGuard autocast(kBFloat16);
    loss = sum(gelu(linear(x, w, b)));
  }
  CHECK(loss.dtype() == kFloat32);
  loss.backward();
  REQUIRE(w.grad().defined());
  CHECK(w.grad().dtype() == kFloat32);
  CHECK(b.grad().dtype() == kFloat32);
  // Against float32: within bfloat16's precision.
  const Tensor w32 = w.detach().requires_grad_(), b32 = b.detach().requires_grad_();
  sum(gelu(linear(x, w32, b32))).backward();
  CHECK(max_abs_diff(w.grad(), w32.grad()) <= 0.03 * max(abs(w32.grad())).item() + 1e-3);
  CHECK(max_abs_diff(b.grad(), b32.grad()) <= 0.03 * max(abs(b32.grad())).item() + 1e-3);
}

TEST_CASE("autocast: backward called inside the scope runs as outside it") {
  Generator gen(15);
  const Tensor x = randn({5, 8}, gen);
  const Tensor w = randn({6, 8}, gen).requires_grad_();
  auto run = [&](bool backward_inside) {
    w.zero_grad(true);
    AutocastGuard autocast(kBFloat16);
    const Tensor loss = sum(softmax(linear(x, w), 1) * linear(x, w));
    if (backward_inside) {
      loss.backward();
    } else {
      AutocastGuard off(kBFloat16, false);
      loss.backward();
    }
    return w.grad().clone();
  };
  const Tensor inside = run(true);
  const Tensor outside = run(false);
  CHECK(max_abs_diff(inside, outside) == 0.0);
}

TEST_CASE("autocast: a transformer language model's loss and gradients stay within bfloat16 tolerance") {
  manual_seed(21);
  nn::LanguageModel lm(nn::LanguageModelOptions().vocab_size(11).max_len(16).num_layers(2).layer(
      nn::TransformerLayerOptions(/*d_model=*/32, /*nhead=*/4)
          .dim_feedforward(64)
          .activation(nn::Activation::GELU)
          .dropout(0.0)
          .norm_first(true)));
  Generator gen(22);
  const Tensor tokens = randint(0, 11, {3, 16}, gen);
  const Tensor targets = randint(0, 11, {3 * 16}, gen);
  auto loss_of = [&](bool bf16) {
    lm->zero_grad();
    Tensor loss;
    {
      AutocastGuard autocast(kBFloat16, bf16);
      const Tensor logits = lm->forward(tokens);  // (3, 16, 11)
      if (bf16) CHECK(logits.dtype() == kBFloat16);
      loss = nn::cross_entropy(logits.reshape({3 * 16, 11}), targets);
    }
    CHECK(loss.dtype() == kFloat32);
    loss.backward();
    NamedTensors grads;
    for (const auto& [name, p] : lm->named_parameters()) {
      REQUIRE(p.grad().defined());
      CHECK(p.grad().dtype() == kFloat32);
      grads.emplace_back(name, p.grad().clone());
    }
    return std::make_pair(loss.item(), grads);
  };
  const auto [loss32, grads32] = loss_of(false);
  const auto [loss16, grads16] = loss_of(true);
  CHECK(std::abs(loss16 - loss32) <= 0.01 * std::abs(loss32));
  // Each parameter's gradient within 5% of the float32 one, relative to its norm.
  for (std::size_t i = 0; i < grads32.size(); ++i) {
    const Tensor& g32 = grads32[i].second;
    const Tensor& g16 = grads16[i].second;
    const double norm = std::sqrt(sum(g32 * g32).item());
    const Tensor diff = g16 - g32;
    const double error = std::sqrt(sum(diff * diff).item());
    INFO(grads32[i].first << ": |g16 - g32| = " << error << ", |g32| = " << norm);
    CHECK(error <= 0.05 * norm + 1e-6);
  }
}

TEST_CASE("autocast: float64 gradcheck is unaffected") {
  Generator gen(16);
  const Tensor x = randn({3, 4}, gen, kFloat64).requires_grad_();
  const Tensor w = randn({2, 4}, gen, kFloat64).requires_grad_();
  AutocastGuard autocast(kBFloat16);
  const GradcheckResult result =
      gradcheck([](const TensorList& in) { return softmax(linear(in[0], in[1]), 1) * sum(in[0]); }, {x, w});
  CHECK_MESSAGE(result.passed, result.message());
}

TEST_CASE("autocast: ops that meet bfloat16 and float32 promote, and bfloat16-only ones round once") {
  Generator gen(17);
  const Tensor h = randn({2, 3}, gen).to(kBFloat16), f = randn({2, 3}, gen);
  const Tensor c = concat({h, f}, 0);
  CHECK(c.dtype() == kFloat32);
  CHECK(c.narrow(0, 0, 2).to_vector<float>() == h.to(kFloat32).to_vector<float>());
  CHECK(concat({h, h}, 1).dtype() == kBFloat16);
  // topk of bfloat16: exact values and the float32 indices.
  const auto [values, indices] = topk(h, 2, 1);
  CHECK(values.dtype() == kBFloat16);
  CHECK(indices.to_vector<std::int64_t>() == topk(h.to(kFloat32), 2, 1).second.to_vector<std::int64_t>());
  // scatter_add in bfloat16: summed in float32, rounded once.
  const Tensor index = tensor({0, 0, 0}, kInt64).reshape({1, 3});
  const Tensor src = full({1, 3}, 1.0 + 1.0 / 256.0, kBFloat16);  // 1 + 2^-8 is not a bfloat16: 1 (ties to even)
  const Tensor summed = scatter_add(zeros({1, 3}, kBFloat16), 1, index, src);
  CHECK(summed.dtype() == kBFloat16);
  CHECK(summed.narrow(1, 0, 1).item() == 3.0);
  // In-place arithmetic on bfloat16 (the engine accumulates gradients so).
  const Tensor acc = full({4}, 1.0, kBFloat16);
  acc.add_(full({4}, 0.5, kBFloat16), 2.0);
  CHECK(acc.to_vector<float>() == std::vector<float>(4, 2.0f));
  acc.mul_(0.25);
  CHECK(acc.to_vector<float>() == std::vector<float>(4, 0.5f));
  // Attention with rotary-promoted q, k (float32) and a bfloat16 v: bfloat16 under autocast, float32 outside.
  const Tensor q = randn({1, 2, 4, 8}, gen), k = randn({1, 2, 4, 8}, gen), v = randn({1, 2, 4, 8}, gen).to(kBFloat16);
  CHECK(nn::scaled_dot_product_attention(q, k, v).output.dtype() == kFloat32);
  {
    AutocastGuard autocast(kBFloat16);
    CHECK(nn::scaled_dot_product_attention(q, k, v).output.dtype() == kBFloat16);
  }
}

TEST_CASE("autocast: every model family of the examples trains a step") {
  // A recurrent encoder-decoder step: the LSTM's input projection is bfloat16, its states float32.
  manual_seed(31);
  nn::LSTM lstm(6, 8);
  Generator gen(32);
  const Tensor x = randn({5, 3, 6}, gen);  // (T, B, in)
  Tensor loss;
  {
    AutocastGuard autocast(kBFloat16);
    loss = sum(lstm->forward(x).output);
  }
  CHECK(loss.dtype() == kFloat32);
  loss.backward();
  for (const Tensor& p : lstm->parameters()) {
    REQUIRE(p.grad().defined());
    CHECK(p.grad().dtype() == kFloat32);
  }
}

TEST_CASE("bfloat16: fused attention and gelu keep bfloat16 on the tape and match float32 on the rounded inputs") {
  Generator gen(18);
  const Tensor q = randn({2, 3, 6, 8}, gen).to(kBFloat16).requires_grad_();
  const Tensor k = randn({2, 3, 6, 8}, gen).to(kBFloat16).requires_grad_();
  const Tensor v = randn({2, 3, 6, 8}, gen).to(kBFloat16).requires_grad_();
  FusedAttentionMask causal;
  causal.causal = true;
  const Tensor out = fused_attention(q, k, v, 0.35, causal);
  CHECK(out.dtype() == kBFloat16);
  sum(gelu(out) * out).backward();
  // The same in float32 from the same (bfloat16) values.
  const Tensor q32 = q.detach().to(kFloat32).requires_grad_(), k32 = k.detach().to(kFloat32).requires_grad_(),
               v32 = v.detach().to(kFloat32).requires_grad_();
  const Tensor out32 = fused_attention(q32, k32, v32, 0.35, causal);
  sum(gelu(out32) * out32).backward();
  CHECK(max_abs_diff(out.to(kFloat32), out32) <= std::ldexp(1.0, -8) * max(abs(out32)).item());
  for (const auto& [got, want] : {std::pair{q, q32}, std::pair{k, k32}, std::pair{v, v32}}) {
    REQUIRE(got.grad().defined());
    CHECK(got.grad().dtype() == kBFloat16);
    CHECK(max_abs_diff(got.grad().to(kFloat32), want.grad()) <= 0.03 * max(abs(want.grad())).item() + 1e-3);
  }
}

TEST_CASE("bfloat16: fused attention across key and query tiles matches float32 on the rounded inputs") {
  // 150 queries and 140 keys (three tiles of 64 each way), four query heads on two key/value heads,
  // a bias with masked entries, causal with an offset and not: q, k, v, the output and do stay
  // bfloat16 and the products run on the bfloat16 kernel, the softmax in float32.
  Generator gen(20);
  for (const bool causal : {false, true}) {
    CAPTURE(causal);
    const Tensor q = randn({2, 4, 150, 24}, gen).to(kBFloat16).requires_grad_();
    const Tensor k = randn({2, 2, 140, 24}, gen).to(kBFloat16).requires_grad_();
    const Tensor v = randn({2, 2, 140, 16}, gen).to(kBFloat16).requires_grad_();
    const Tensor g = randn({2, 4, 150, 16}, gen).to(kBFloat16);
    Tensor bias = randn({150, 140}, gen);
    bias = masked_fill(bias, gt(rand({150, 140}, gen), 0.9), -std::numeric_limits<double>::infinity());
    FusedAttentionMask mask;
    mask.causal = causal;
    mask.causal_offset = -10;
    mask.bias = bias.to(kBFloat16);
    const Tensor out = fused_attention(q, k, v, 0.2, mask);
    REQUIRE(out.dtype() == kBFloat16);
    out.backward(g);
    const Tensor q32 = q.detach().to(kFloat32).requires_grad_(), k32 = k.detach().to(kFloat32).requires_grad_(),
                 v32 = v.detach().to(kFloat32).requires_grad_();
    mask.bias = mask.bias.to(kFloat32);
    const Tensor out32 = fused_attention(q32, k32, v32, 0.2, mask);
    out32.backward(g.to(kFloat32));
    // Rounding the probabilities and the output (2^-9 each) against float32: 2^-7 of the largest entry.
    CHECK(max_abs_diff(out.to(kFloat32), out32) <= std::ldexp(1.0, -7) * max(abs(out32)).item());
    for (const auto& [got, want] : {std::pair{q, q32}, std::pair{k, k32}, std::pair{v, v32}}) {
      REQUIRE(got.grad().dtype() == kBFloat16);
      const Tensor diff = got.grad().to(kFloat32) - want.grad();
      CHECK(std::sqrt(sum(diff * diff).item()) <= 0.01 * std::sqrt(sum(want.grad() * want.grad()).item()));
    }
  }
}

TEST_CASE("bfloat16: gelu and its gradient have the bits of the float32 kernel on the widened values") {
  // 100,011 elements: several pool blocks, many 512-element conversion chunks, and a scalar tail.
  Generator gen(19);
  for (const GeluApproximation approximate : {GeluApproximation::None, GeluApproximation::Tanh}) {
    const Tensor x = (randn({3, 33337}, gen) * 3.0).to(kBFloat16).requires_grad_();
    const Tensor g = randn({3, 33337}, gen).to(kBFloat16);
    const Tensor y = gelu(x, approximate);
    REQUIRE(y.dtype() == kBFloat16);
    y.backward(g);
    const Tensor x32 = x.detach().to(kFloat32).requires_grad_();
    const Tensor y32 = gelu(x32, approximate);
    y32.backward(g.to(kFloat32));
    CHECK(same_bits(y.to(kFloat32), y32.to(kBFloat16).to(kFloat32)));
    REQUIRE(x.grad().dtype() == kBFloat16);
    CHECK(same_bits(x.grad().to(kFloat32), x32.grad().to(kBFloat16).to(kFloat32)));
    // Transposed (not contiguous) input: the same values.
    CHECK(same_bits(gelu(x.detach().mT(), approximate).to(kFloat32), y.detach().mT().to(kFloat32)));
  }
}

namespace {

// Runs forward() twice on the same module, in float32 and under autocast, backpropagates
// sum(y * c) for a fixed c, and checks the outputs within 2% and every parameter's gradient
// (float32 both times) within 5% of the float32 ones, relative to their norms.
void check_module_under_autocast(nn::Module& module, const std::function<Tensor()>& forward, DType expected) {
  auto run = [&](bool bf16) {
    module.zero_grad(true);
    Tensor y, loss;
    {
      AutocastGuard autocast(kBFloat16, bf16);
      y = forward();
      Generator gen(99);
      loss = sum(y * randn(y.shape(), gen));
    }
    if (bf16) CHECK(y.dtype() == expected);
    else CHECK(y.dtype() == kFloat32);
    loss.backward();
    std::vector<Tensor> grads;
    for (const auto& [name, p] : module.named_parameters()) {
      INFO(name);
      REQUIRE(p.grad().defined());
      CHECK(p.grad().dtype() == kFloat32);
      grads.push_back(p.grad().clone());
    }
    return std::make_pair(y.detach().to(kFloat32), grads);
  };
  const auto [y32, grads32] = run(false);
  const auto [y16, grads16] = run(true);
  const Tensor y_diff = y16 - y32;
  CHECK(std::sqrt(sum(y_diff * y_diff).item()) <= 0.02 * std::sqrt(sum(y32 * y32).item()));
  const NamedTensors params = module.named_parameters();
  for (std::size_t i = 0; i < grads32.size(); ++i) {
    const Tensor diff = grads16[i] - grads32[i];
    const double error = std::sqrt(sum(diff * diff).item());
    const double norm = std::sqrt(sum(grads32[i] * grads32[i]).item());
    INFO(params[i].first << ": |g16 - g32| = " << error << ", |g32| = " << norm);
    CHECK(error <= 0.05 * norm + 1e-4);
  }
}

}  // namespace

TEST_CASE("autocast: modules give float32 gradients within bfloat16 tolerance of float32") {
  Generator gen(40);
  SUBCASE("encoder-decoder transformer") {
    manual_seed(41);
    nn::Transformer model(nn::TransformerOptions(nn::TransformerLayerOptions(16, 2).dim_feedforward(32).dropout(0.0)));
    const Tensor src = randn({2, 5, 16}, gen), tgt = randn({2, 4, 16}, gen);
    check_module_under_autocast(
        *model, [&] { return model->forward(src, tgt); }, kFloat32);  // ends in a LayerNorm
  }
  SUBCASE("mixture of experts") {
    manual_seed(42);
    nn::MixtureOfExperts moe(nn::MoEOptions(16).num_experts(4).top_k(2).hidden(32));
    const Tensor x = randn({24, 16}, gen);
    check_module_under_autocast(
        *moe,
        [&] {
          const nn::MoEOutput r = moe->forward(x);
          return r.output + 0.0 * r.load_balancing_loss;
        },
        kFloat32);  // weighted by float32 router probabilities
  }
  SUBCASE("GRU") {
    manual_seed(43);
    nn::GRU gru(6, 8);
    const Tensor x = randn({7, 2, 6}, gen);
    check_module_under_autocast(
        *gru, [&] { return gru->forward(x).output; }, kFloat32);
  }
  SUBCASE("language model with latent attention and rotary positions") {
    manual_seed(44);
    nn::LanguageModel lm(
        nn::LanguageModelOptions()
            .vocab_size(9)
            .max_len(8)
            .num_layers(1)
            .positions(nn::PositionEncoding::Rotary)
            .layer(nn::TransformerLayerOptions(16, 2).dim_feedforward(32).dropout(0.0).latent_attention(
                nn::MultiHeadLatentAttentionOptions(16, 2)
                    .kv_lora_rank(6)
                    .qk_nope_head_dim(4)
                    .qk_rope_head_dim(2)
                    .v_head_dim(4)
                    .max_len(8))));
    const Tensor tokens = randint(0, 9, {2, 8}, gen);
    check_module_under_autocast(
        *lm, [&] { return lm->forward(tokens); }, kBFloat16);  // the head is a Linear
  }
}

TEST_CASE("bfloat16 product: cpuid's answer agrees with the kernel's flags in /proc/cpuinfo") {
  std::ifstream cpuinfo("/proc/cpuinfo");
  REQUIRE(cpuinfo.good());
  std::string line;
  bool listed = false;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line);
    for (std::string word; words >> word;) listed = listed || word == "avx512_bf16" || word == "amx_bf16";
    break;  // the first CPU's flags
  }
  CHECK(kernels::cpu_has_bf16_instructions() == listed);
}
