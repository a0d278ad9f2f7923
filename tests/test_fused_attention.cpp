// fused_attention (online softmax over key tiles): values against a plain float64 loop, gradients
// against the unfused attention's autograd, at lengths on both sides of the 64-row tiles, causal
// or not, with masks that empty whole rows and whole tiles, grouped-query heads, in float32 and
// float64; gradcheck and gradgradcheck; argument errors.

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "tapegrad/nn/nn.h"
#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::any_nan;
using tapegrad::testing::check_gradients;
using tapegrad::testing::max_abs_diff;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// softmax(scale q k^T + bias, causal) v by loops in double, on contiguous (N, T, D) copies; k and
// v have N / group matrices. Rows with no visible key give 0.
std::vector<double> loop_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal,
                                   std::int64_t offset, const Tensor& bias) {
  const int r = q.dim();
  const std::int64_t tq = q.size(-2), tk = k.size(-2), d = q.size(-1), dv = v.size(-1);
  const std::int64_t n = q.numel() / (tq * d), group = n / (k.numel() / std::max<std::int64_t>(tk * d, 1));
  const std::vector<double> qv = q.to_vector<double>(), kv = k.to_vector<double>(), vv = v.to_vector<double>();
  Shape scores_shape = q.shape();
  scores_shape[r - 1] = tk;
  const std::vector<double> bv =
      bias.defined() ? expand(bias, scores_shape).contiguous().to_vector<double>() : std::vector<double>();
  std::vector<double> out(static_cast<std::size_t>(n * tq * dv), 0.0), s(static_cast<std::size_t>(tk));
  for (std::int64_t m = 0; m < n; ++m)
    for (std::int64_t i = 0; i < tq; ++i) {
      double best = -kInf;
      for (std::int64_t j = 0; j < tk; ++j) {
        double dot = 0;
        for (std::int64_t c = 0; c < d; ++c) dot += qv[(m * tq + i) * d + c] * kv[((m / group) * tk + j) * d + c];
        s[j] = scale * dot + (bias.defined() ? bv[(m * tq + i) * tk + j] : 0.0);
        if (causal && j > i + offset) s[j] = -kInf;
        best = std::max(best, s[j]);
      }
      if (best == -kInf) continue;
      double total = 0;
      for (std::int64_t j = 0; j < tk; ++j) total += s[j] = std::exp(s[j] - best);
      for (std::int64_t j = 0; j < tk; ++j)
        for (std::int64_t c = 0; c < dv; ++c)
          out[(m * tq + i) * dv + c] += s[j] / total * vv[((m / group) * tk + j) * dv + c];
    }
  return out;
}

double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

// The unfused attention (nn's path when weights are asked for), as the gradient reference; k and
// v repeated over the query heads for grouped-query inputs.
Tensor unfused(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal, std::int64_t offset,
               const Tensor& bias) {
  const std::int64_t group = q.size(-3) / k.size(-3);
  auto repeat = [&](const Tensor& x) {
    if (group == 1) return x;
    Shape e = x.shape();
    e.insert(x.dim() - 2, group);
    Shape m = x.shape();
    m[x.dim() - 3] *= group;
    return x.unsqueeze(x.dim() - 2).expand(e).reshape(m);
  };
  nn::AttentionForwardOptions o;
  o.scale(scale).need_weights(true).is_causal(causal);
  if (causal && offset != 0) {
    REQUIRE(offset == k.size(-2) - q.size(-2));
    o.causal_alignment(nn::CausalAlignment::BottomRight);
  }
  if (bias.defined()) o.additive_mask(bias);
  return nn::scaled_dot_product_attention(q, repeat(k), repeat(v), o).output;
}

// A bias (1, 1, Tq, Tk) with -inf at random entries, at every entry of the rows in `empty_rows`
// and of rows 64..127 (a whole query tile) when `empty_tile`; other entries small values.
Tensor masking_bias(std::int64_t tq, std::int64_t tk, DType dtype, const std::vector<std::int64_t>& empty_rows,
                    bool empty_tile, Generator& gen) {
  std::vector<double> b(static_cast<std::size_t>(tq * tk));
  for (std::int64_t i = 0; i < tq; ++i)
    for (std::int64_t j = 0; j < tk; ++j) {
      const bool row_empty =
          std::find(empty_rows.begin(), empty_rows.end(), i) != empty_rows.end() || (empty_tile && i >= 64 && i < 128);
      b[i * tk + j] = row_empty || gen.uniform() < 0.2 ? -kInf : 0.5 * (gen.uniform() - 0.5);
    }
  return from_vector(b, {1, 1, tq, tk}).to(dtype);
}

struct Case {
  std::int64_t tq, tk;
  bool causal;
};

}  // namespace

TEST_CASE("fused attention: values equal a float64 loop at lengths around the tiles, causal or not, masked or not") {
  Generator gen(5);
  const std::vector<std::int64_t> lengths{1, 31, 32, 63, 64, 191, 192, 513, 767, 1000};
  for (const DType dtype : {kFloat32, kFloat64})
    for (const std::int64_t t : lengths)
      for (const bool causal : {false, true})
        for (const bool masked : {false, true}) {
          CAPTURE(t);
          CAPTURE(causal);
          CAPTURE(masked);
          CAPTURE(dtype_name(dtype));
          const std::int64_t d = 8;
          const Tensor q = randn({1, 2, t, d}, gen, dtype), k = randn({1, 2, t, d}, gen, dtype),
                       v = randn({1, 2, t, 6}, gen, dtype);
          FusedAttentionMask mask;
          mask.causal = causal;
          if (masked) mask.bias = masking_bias(t, t, dtype, {0, t - 1, t / 2}, t > 128, gen);
          const Tensor out = fused_attention(q, k, v, 0.35, mask);
          CHECK(out.shape() == Shape{1, 2, t, 6});
          const double tol = dtype == kFloat32 ? 2e-5 : 1e-12;
          CHECK(max_diff(out.to_vector<double>(), loop_attention(q, k, v, 0.35, causal, 0, mask.bias)) < tol);
          if (masked) {  // the fully masked rows are exactly zero
            const Tensor last = out.select(2, t - 1);
            CHECK(last.abs().sum().item() == 0.0);
          }
        }
}

TEST_CASE("fused attention: Tq != Tk with a bottom-right causal offset, and more queries than keys") {
  Generator gen(6);
  for (const Case& c : std::vector<Case>{{1, 200, true}, {70, 130, true}, {130, 70, true}, {65, 1, true}}) {
    const std::int64_t tq = c.tq, tk = c.tk;
    CAPTURE(tq);
    CAPTURE(tk);
    const Tensor q = randn({2, 1, tq, 4}, gen, kFloat64), k = randn({2, 1, tk, 4}, gen, kFloat64),
                 v = randn({2, 1, tk, 3}, gen, kFloat64);
    for (const std::int64_t offset : {tk - tq, std::int64_t{0}}) {
      FusedAttentionMask mask;
      mask.causal = true;
      mask.causal_offset = offset;
      const Tensor out = fused_attention(q, k, v, 0.5, mask);
      CHECK(max_diff(out.to_vector<double>(), loop_attention(q, k, v, 0.5, true, offset, Tensor())) < 1e-12);
    }
  }
}

TEST_CASE("fused attention: gradients equal the unfused attention's, also through empty rows and tiles") {
  Generator gen(7);
  const std::vector<Case> cases{{1, 1, false},     {63, 63, true},    {64, 64, false}, {65, 65, true},
                                {191, 191, false}, {200, 130, false}, {513, 513, true}};
  for (const DType dtype : {kFloat64, kFloat32})
    for (const Case& c : cases)
      for (const bool masked : {false, true}) {
        CAPTURE(c.tq);
        CAPTURE(c.tk);
        CAPTURE(c.causal);
        CAPTURE(masked);
        CAPTURE(dtype_name(dtype));
        Tensor q = randn({2, 2, c.tq, 8}, gen, dtype).requires_grad_(),
               k = randn({2, 2, c.tk, 8}, gen, dtype).requires_grad_(),
               v = randn({2, 2, c.tk, 5}, gen, dtype).requires_grad_();
        FusedAttentionMask mask;
        mask.causal = c.causal;
        if (masked) mask.bias = masking_bias(c.tq, c.tk, dtype, {0, c.tq - 1}, c.tq > 128, gen);
        const Tensor g = randn({2, 2, c.tq, 5}, gen, dtype);
        const TensorList fused = autograd::grad({fused_attention(q, k, v, 0.3, mask)}, {q, k, v}, {g});
        const TensorList reference = autograd::grad({unfused(q, k, v, 0.3, c.causal, 0, mask.bias)}, {q, k, v}, {g});
        const double tol = dtype == kFloat32 ? 5e-5 : 1e-11;
        for (int i = 0; i < 3; ++i) {
          CAPTURE(i);
          CHECK_FALSE(any_nan(fused[i]));
          CHECK(max_abs_diff(fused[i], reference[i]) < tol);
        }
        if (masked) CHECK(fused[0].select(2, c.tq - 1).abs().sum().item() == 0.0);  // a fully masked row
      }
}

TEST_CASE("fused attention: grouped-query heads read their key/value head and sum its gradients") {
  Generator gen(8);
  for (const std::int64_t kv_heads : {1, 2}) {  // multi-query and grouped-query
    CAPTURE(kv_heads);
    Tensor q = randn({2, 4, 70, 8}, gen, kFloat64).requires_grad_();
    Tensor k = randn({2, kv_heads, 90, 8}, gen, kFloat64).requires_grad_();
    Tensor v = randn({2, kv_heads, 90, 6}, gen, kFloat64).requires_grad_();
    FusedAttentionMask mask;
    mask.causal = true;
    mask.causal_offset = 20;
    const Tensor out = fused_attention(q, k, v, 0.4, mask);
    CHECK(max_diff(out.to_vector<double>(), loop_attention(q, k, v, 0.4, true, 20, Tensor())) < 1e-12);
    const Tensor g = randn({2, 4, 70, 6}, gen, kFloat64);
    const TensorList fused = autograd::grad({out}, {q, k, v}, {g});
    const TensorList reference = autograd::grad({unfused(q, k, v, 0.4, true, 20, Tensor())}, {q, k, v}, {g});
    for (int i = 0; i < 3; ++i) CHECK(max_abs_diff(fused[i], reference[i]) < 1e-11);
  }
}

TEST_CASE("fused attention: gradcheck and gradgradcheck, with masks, causal, grouped heads") {
  Generator gen(9);
  const Tensor q = randn({1, 2, 5, 3}, gen, kFloat64), k = randn({1, 1, 7, 3}, gen, kFloat64),
               v = randn({1, 1, 7, 2}, gen, kFloat64);
  FusedAttentionMask mask;
  mask.causal = true;
  mask.causal_offset = 1;
  std::vector<double> b(5 * 7, 0.0);
  b[2] = -kInf;
  for (int j = 0; j < 7; ++j) b[4 * 7 + j] = -kInf;  // row 4 sees nothing
  b[10] = 0.3;
  mask.bias = from_vector(b, {1, 1, 5, 7}).to(kFloat64);
  check_gradients([&](const TensorList& x) { return fused_attention(x[0], x[1], x[2], 0.7, mask); }, {q, k, v});
  FusedAttentionMask none;
  check_gradients([&](const TensorList& x) { return fused_attention(x[0], x[1], x[2], 0.7, none); },
                  {randn({3, 4, 2}, gen, kFloat64), randn({3, 6, 2}, gen, kFloat64), randn({3, 6, 3}, gen, kFloat64)});
}

TEST_CASE("fused attention: heads viewed in place give the values and gradients of contiguous copies") {
  // q, k, v as the heads of one (B, T, 4 * 8 + 2 * 8 + 2 * 6) projection, (B, T, H, Dh) seen as
  // (B, H, T, Dh): rows 64 values apart, read in place. The same through contiguous copies must
  // agree, the output's merged heads must be contiguous, and so must the heads of dq.
  Generator gen(10);
  for (const DType dtype : {kFloat64, kFloat32, kBFloat16}) {
    CAPTURE(dtype_name(dtype));
    const Tensor projection = randn({2, 70, 64}, gen).to(dtype).requires_grad_();
    const auto heads = [](const Tensor& x, std::int64_t start, std::int64_t h, std::int64_t dh) {
      return x.narrow(2, start, h * dh).reshape({2, 70, h, dh}).transpose(1, 2);
    };
    const Tensor q = heads(projection, 0, 4, 8), k = heads(projection, 32, 2, 8), v = heads(projection, 48, 2, 8);
    REQUIRE_FALSE(q.is_contiguous());
    const Tensor g = randn({2, 70, 4, 8}, gen).to(dtype).transpose(1, 2);  // do, strided as well
    FusedAttentionMask mask;
    mask.causal = true;
    const Tensor out = fused_attention(q, k, v, 0.35, mask);
    CHECK(out.transpose(1, 2).is_contiguous());
    autograd::GradOptions keep;
    keep.retain_graph = true;  // q, k, v's views are used again below
    const TensorList grads = autograd::grad({out}, {projection, q}, {g}, keep);
    const Tensor out_copied = fused_attention(q.contiguous(), k.contiguous(), v.contiguous(), 0.35, mask);
    const TensorList grads_copied = autograd::grad({out_copied}, {projection}, {g.contiguous()});
    CHECK(grads[1].transpose(1, 2).is_contiguous());
    // bfloat16's kernel packs its operands, so the row stride cannot change a bit; BLAS may add in
    // another order.
    const double tol = dtype == kFloat64 ? 1e-12 : dtype == kFloat32 ? 1e-5 : 0.0;
    CHECK(max_abs_diff(out.to(kFloat64), out_copied.to(kFloat64)) <= tol);
    CHECK(max_abs_diff(grads[0].to(kFloat64), grads_copied[0].to(kFloat64)) <= tol);
  }
  // gradcheck through the views.
  check_gradients(
      [](const TensorList& x) {
        const Tensor qkv = x[0].reshape({1, 5, 3, 2, 3}).permute({2, 0, 3, 1, 4});  // (3, B, H, T, Dh) views
        return fused_attention(qkv.select(0, 0), qkv.select(0, 1), qkv.select(0, 2), 0.6, FusedAttentionMask());
      },
      {randn({1, 5, 18}, gen, kFloat64)});
}

TEST_CASE("fused attention: argument errors name the op and the shapes") {
  const Tensor q = zeros({1, 2, 4, 8}), k = zeros({1, 2, 5, 8}), v = zeros({1, 2, 5, 3});
  CHECK_THROWS_WITH_AS(fused_attention(q, zeros({1, 2, 5, 7}), v, 1.0),
                       doctest::Contains("fused_attention: q (1,2,4,8), k (1,2,5,7), v (1,2,5,3) do not fit"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(fused_attention(q, zeros({1, 3, 5, 8}), zeros({1, 3, 5, 3}), 1.0),
                       doctest::Contains("which must divide q's"), ShapeError);
  CHECK_THROWS_WITH_AS(fused_attention(q, k.to(kFloat64), v, 1.0), doctest::Contains("one floating-point dtype"),
                       TypeError);
  CHECK_THROWS_WITH_AS(fused_attention(zeros({8}), zeros({8}), zeros({8}), 1.0), doctest::Contains("rank >= 2"),
                       ShapeError);
  FusedAttentionMask mask;
  mask.bias = zeros({3, 5});
  CHECK_THROWS_AS(fused_attention(q, k, v, 1.0, mask), ShapeError);
  mask.bias = zeros({4, 5}, kFloat64);
  CHECK_THROWS_WITH_AS(fused_attention(q, k, v, 1.0, mask), doctest::Contains("bias must have q's dtype float32"),
                       TypeError);
  mask.bias = zeros({4, 5}).requires_grad_();
  CHECK_THROWS_WITH_AS(fused_attention(q, k, v, 1.0, mask), doctest::Contains("the bias receives no gradient"),
                       ValueError);
  CHECK_THROWS_AS(fused_attention(q, k, v, std::nan("")), ValueError);
}

TEST_CASE("fused attention: nn's attention takes the fused path without weights, with every kind of mask") {
  Generator gen(10);
  const std::int64_t b = 2, h = 3, t = 70, d = 8;
  Tensor q = randn({b, h, t, d}, gen, kFloat64).requires_grad_(),
         k = randn({b, h, t, d}, gen, kFloat64).requires_grad_(),
         v = randn({b, h, t, d}, gen, kFloat64).requires_grad_();
  std::vector<bool> pad(static_cast<std::size_t>(b * t), false);
  for (std::int64_t j = 60; j < t; ++j) pad[static_cast<std::size_t>(t + j)] = true;  // batch 1: last 10 keys padding
  std::vector<bool> keep(static_cast<std::size_t>(t * t), true);
  for (std::int64_t j = 0; j < t; ++j) keep[static_cast<std::size_t>(5 * t + j)] = false;  // row 5 sees nothing
  const Tensor additive = randn({1, h, t, t}, gen, kFloat64) * 0.3;
  for (const bool causal : {false, true}) {
    CAPTURE(causal);
    nn::AttentionForwardOptions o;
    o.is_causal(causal).key_padding_mask(from_vector(pad, {b, t})).keep_mask(from_vector(keep, {t, t}));
    o.additive_mask(additive);
    const Tensor g = randn({b, h, t, d}, gen, kFloat64);
    const Tensor fused = nn::scaled_dot_product_attention(q, k, v, o).output;
    const Tensor reference =
        nn::scaled_dot_product_attention(q, k, v, nn::AttentionForwardOptions(o).need_weights(true)).output;
    CHECK(max_abs_diff(fused, reference) < 1e-12);
    CHECK(fused.grad_fn()->name == std::string("fused_attention"));
    const TensorList a = autograd::grad({fused}, {q, k, v}, {g}), r = autograd::grad({reference}, {q, k, v}, {g});
    for (int i = 0; i < 3; ++i) CHECK(max_abs_diff(a[i], r[i]) < 1e-11);
  }
  // MultiHeadAttention: the same output with and without weights asked for.
  nn::MultiHeadAttention attn(nn::MultiHeadAttentionOptions(16, 4).generator(&gen));
  const Tensor x = randn({2, 30, 16}, gen);
  const auto causal = nn::AttentionForwardOptions().is_causal(true);
  const Tensor without = attn(x, Tensor(), causal).output;
  const Tensor with = attn(x, Tensor(), nn::AttentionForwardOptions(causal).need_weights(true)).output;
  CHECK(max_abs_diff(without, with) < 1e-5);
}

TEST_CASE("fused attention: memory grows linearly in T, the scores are never materialised") {
  Generator gen(11);
  const std::int64_t t = 1024, h = 4, d = 16;
  Tensor q = randn({1, h, t, d}, gen).requires_grad_(), k = randn({1, h, t, d}, gen).requires_grad_(),
         v = randn({1, h, t, d}, gen).requires_grad_();
  const std::size_t scores_bytes = static_cast<std::size_t>(h * t * t) * sizeof(float);  // 16 MiB
  reset_peak_pool_stats();
  const std::size_t before = pool_stats().bytes_in_use;
  const Tensor out = nn::scaled_dot_product_attention(q, k, v, nn::AttentionForwardOptions().is_causal(true)).output;
  out.sum().backward();
  const std::size_t fused_peak = pool_stats().peak_bytes_in_use - before;
  CHECK(fused_peak < scores_bytes / 8);
  for (const Tensor* p : {&q, &k, &v}) p->zero_grad(/*set_to_none=*/true);
  reset_peak_pool_stats();
  const Tensor unfused =
      nn::scaled_dot_product_attention(q, k, v, nn::AttentionForwardOptions().is_causal(true).need_weights(true))
          .output;
  unfused.sum().backward();
  CHECK(pool_stats().peak_bytes_in_use - before > scores_bytes);  // the unfused path holds at least the scores
}
