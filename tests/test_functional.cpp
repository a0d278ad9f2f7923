// nn::functional (torch::nn::functional's forms): each module equals its functional form, rms_norm
// against its formula, and multi_head_attention_forward against torch 1.13's
// F.multi_head_attention_forward (the fixture below, made by the script in its comment); the
// activations and pad against PyTorch 1.13's values and gradients.

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "tapegrad/nn/nn.h"
#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::check_gradients;
using tapegrad::testing::check_values;
using tapegrad::testing::max_abs_diff;
namespace F = tapegrad::nn::functional;

namespace {

Tensor f64(const std::vector<double>& values, const Shape& shape) { return from_vector(values, shape); }

// torch 1.13, float64, inputs multiples of 1/8 drawn by torch.randint(-8, 9, shape) / 8 after
// torch.manual_seed(0), in this order: x, w_in, b_in, w_o, b_o (a), then q, k, v, wq, wk, wv, b_in, w_o (b).
// torch's layout is (T, B, E), so the inputs were transposed in and the outputs out:
// (a) B 2, T 3, E 4, 2 heads, self-attention through in_proj_weight, key_padding_mask
//     [[F, F, F], [F, F, T]] and attn_mask triu(ones(3, 3), 1) (torch: true = masked):
//     out, w = F.multi_head_attention_forward(xt, xt, xt, 4, 2, w_in, b_in, None, None, False, 0.0, w_o, b_o,
//         training=False, key_padding_mask=pad, need_weights=True, attn_mask=causal, average_attn_weights=False)
// (b) Tq 3, Tk 4, kdim 3, vdim 2, use_separate_proj_weight=True with q/k/v_proj_weight, in_proj_bias,
//     no out_proj bias, no masks, average_attn_weights=False.
// (2, 3, 4)
const std::vector<double> a_x = {-0.125, -0.625, 0.5, 1.0,    -0.75,  -1.0,  1.0, 0.25,  -0.25, -0.375, 1.0,   0.25,
                                 0.625,  0.125,  0.0, -0.125, -0.625, -0.25, 1.0, 0.375, -1.0,  0.25,   0.875, -0.375};
// (12, 4)
const std::vector<double> a_w_in = {0.125, -0.75, -0.125, 0.0,   0.375,  0.75,   -1.0,   -0.375, -0.625, 1.0,
                                    0.375, -0.5,  1.0,    -0.75, 1.0,    -0.875, -0.125, -0.5,   -0.375, -0.5,
                                    1.0,   -0.25, -1.0,   0.0,   0.625,  0.25,   0.625,  0.625,  -0.625, 0.75,
                                    0.125, 0.875, -0.25,  0.125, -0.75,  0.625,  -0.625, -0.25,  -0.375, 0.25,
                                    -0.5,  -0.75, 0.375,  0.375, -0.875, 0.625,  0.125,  -0.625};
// (12,)
const std::vector<double> a_b_in = {0.0, 0.0, -0.125, -0.875, 1.0, 0.5, -0.5, 0.875, 0.0, -0.75, 0.5, -0.125};
// (4, 4)
const std::vector<double> a_w_o = {0.25, 0.75,   -0.75,  -0.75, 0.75, 0.375, -0.625, 0.0,
                                   0.5,  -0.125, -0.875, 1.0,   -1.0, 0.875, 0.0,    0.5};
// (4,)
const std::vector<double> a_b_o = {0.0, 0.75, 0.25, 0.75};
// (2, 3, 4)
const std::vector<double> a_out = {-0.7578125,          -0.263671875,         -1.955078125,        -0.333984375,
                                   -1.4020993050745614, -0.8690743000807284,  -2.0530935279019746, 0.6036496270221465,
                                   -1.4566132344742317, -0.8233170460939472,  -1.7935416448901411, 0.5149591471265306,
                                   -0.60546875,         0.10546875,           -0.265625,           -0.341796875,
                                   -0.8321821963452353, -0.15051297702202338, -0.6513993388825685, 0.4453925995168988,
                                   -0.8307017797788847, -0.13590816962789154, -0.6182575110248303, 0.3645323791497432};
// (2, 2, 3, 3)
const std::vector<double> a_weights = {1.0,
                                       0.0,
                                       0.0,
                                       0.1519001676594719,
                                       0.8480998323405281,
                                       0.0,
                                       0.1640978985540685,
                                       0.49846448514608516,
                                       0.33743761629984637,
                                       1.0,
                                       0.0,
                                       0.0,
                                       0.4461750912471548,
                                       0.5538249087528451,
                                       0.0,
                                       0.3233952140737035,
                                       0.3447258764224795,
                                       0.33187890950381704,
                                       1.0,
                                       0.0,
                                       0.0,
                                       0.08428898896405408,
                                       0.915711011035946,
                                       0.0,
                                       0.18399952444754633,
                                       0.8160004755524537,
                                       0.0,
                                       1.0,
                                       0.0,
                                       0.0,
                                       0.6159339599335807,
                                       0.38406604006641926,
                                       0.0,
                                       0.6432999818525257,
                                       0.3567000181474743,
                                       0.0};
// (2, 3, 4)
const std::vector<double> b_q = {-0.5,   0.375,  -1.0, -0.375, 0.875, 0.625,  -0.5, -0.625, -0.5,   0.625, 0.75, 0.875,
                                 -0.625, -0.375, 0.5,  1.0,    0.375, -0.625, 1.0,  0.25,   -0.125, 0.375, 1.0,  -0.25};
// (2, 4, 3)
const std::vector<double> b_k = {-0.875, 0.125, -0.375, -0.875, 0.5,   -0.375, 0.625,  -0.25,
                                 -0.75,  0.0,   0.125,  0.125,  0.0,   0.0,    -0.375, -0.5,
                                 0.5,    -0.75, 0.25,   0.125,  -0.25, -0.625, -0.5,   -0.125};
// (2, 4, 2)
const std::vector<double> b_v = {0.0,   0.75, -0.375, -0.125, 0.375,  -0.125, -0.125, -0.125,
                                 0.625, 1.0,  0.375,  -0.875, -0.875, -0.75,  -0.75,  -0.375};
// (4, 4)
const std::vector<double> b_wq = {0.0,    -0.75,  0.75,   0.875, -1.0,  -0.625, 0.75,  -0.375,
                                  -0.875, -0.125, -0.125, -0.75, 0.375, -0.625, 0.375, -0.25};
// (4, 3)
const std::vector<double> b_wk = {0.375, 0.375, 0.375, 0.0, 1.0, -0.75, 0.625, 0.125, -0.625, 0.125, 0.75, 1.0};
// (4, 2)
const std::vector<double> b_wv = {-0.125, -0.375, 0.5, -0.875, -0.75, 0.5, 0.5, -0.25};
// (12,)
const std::vector<double> b_b_in = {0.25, -0.5, 0.875, -0.125, 0.25, -0.625, 1.0, -1.0, 0.0, 0.875, 1.0, 0.25};
// (4, 4)
const std::vector<double> b_w_o = {0.5,   0.25, -0.75, -0.875, 0.375,  0.375, 0.625, -0.5,
                                   0.125, -0.5, 0.75,  1.0,    -0.875, -0.25, 1.0,   0.875};
// (2, 3, 4)
const std::vector<double> b_out = {-0.7801438656032798, 0.6278107291590631, 0.6055848152958082,  1.0124052088165374,
                                   -0.8057890972939195, 0.7766684309630258, 0.6162628399958363,  1.0752325817240025,
                                   -0.7773649848695805, 0.790462123960848,  0.5954255273297475,  1.032170094038134,
                                   -0.624012976185131,  0.9192243784110519, 0.4684634495015161,  0.8214459663934709,
                                   -0.63368045310164,   0.9286897321046028, 0.47996899489008693, 0.8372751635033213,
                                   -0.6259617734476417, 0.9105408566919296, 0.46899977677697674, 0.8235504584062122};
// (2, 2, 3, 4)
const std::vector<double> b_weights = {
    0.2942195978526079,  0.21066740578421125, 0.2495437047285809,  0.24556929163459998, 0.282750710530894,
    0.1522729388455233,  0.25572251628975395, 0.30925383433382886, 0.20437102416736427, 0.21894440758665226,
    0.25747450345039347, 0.31921006479559,    0.12828779501774876, 0.11500770642510107, 0.6382511185438601,
    0.11845338001329019, 0.21475852171489052, 0.20948560364709612, 0.3612196848380395,  0.21453618979997388,
    0.22052243705209854, 0.1972852878879468,  0.40087777992155366, 0.18131449513840092, 0.2595005170447499,
    0.26511541196235167, 0.3312463810309462,  0.14413768996195223, 0.26266946412038616, 0.24421405564018075,
    0.3297805367709991,  0.163335943468434,   0.25305662098582865, 0.27406626908638426, 0.2718046276560681,
    0.20107248227171895, 0.2641511151795475,  0.2644248649059689,  0.2669014141593024,  0.2045226057551812,
    0.25556250376432155, 0.24671893669172235, 0.29626113598894055, 0.2014574235550155,  0.26960557477090424,
    0.266275222616834,   0.2896796303004407,  0.17443957231182106};

}  // namespace

TEST_CASE("functional: multi_head_attention_forward equals torch 1.13's, fused and separate projections") {
  SUBCASE("(a) in_proj_weight, key padding and causal masks") {
    nn::AttentionForwardOptions masks;
    masks.is_causal(true).need_weights(true);
    masks.key_padding_mask(from_vector(std::vector<bool>{false, false, false, false, false, true}, {2, 3}));
    auto opts = F::MultiHeadAttentionForwardFuncOptions(2, f64(a_w_o, {4, 4}), f64(a_b_o, {4}))
                    .in_proj_weight(f64(a_w_in, {12, 4}))
                    .in_proj_bias(f64(a_b_in, {12}));
    Tensor x = f64(a_x, {2, 3, 4});
    auto r = F::multi_head_attention_forward(x, x, x, opts, masks);
    CHECK(max_abs_diff(r.output, f64(a_out, {2, 3, 4})) < 1e-12);
    CHECK(max_abs_diff(r.weights, f64(a_weights, {2, 2, 3, 3})) < 1e-12);
  }
  SUBCASE("(b) q/k/v_proj_weight with kdim 3, vdim 2, no output bias") {
    auto opts = F::MultiHeadAttentionForwardFuncOptions(2, f64(b_w_o, {4, 4}), Tensor())
                    .q_proj_weight(f64(b_wq, {4, 4}))
                    .k_proj_weight(f64(b_wk, {4, 3}))
                    .v_proj_weight(f64(b_wv, {4, 2}))
                    .in_proj_bias(f64(b_b_in, {12}));
    auto r = F::multi_head_attention_forward(f64(b_q, {2, 3, 4}), f64(b_k, {2, 4, 3}), f64(b_v, {2, 4, 2}), opts,
                                             nn::AttentionForwardOptions().need_weights(true));
    CHECK(max_abs_diff(r.output, f64(b_out, {2, 3, 4})) < 1e-12);
    CHECK(max_abs_diff(r.weights, f64(b_weights, {2, 2, 3, 4})) < 1e-12);
  }
}

TEST_CASE("functional: multi_head_attention_forward gradcheck and errors") {
  Generator gen(21);
  Tensor x = randn({2, 3, 4}, gen, kFloat64), mem = randn({2, 5, 3}, gen, kFloat64);
  Tensor wq = randn({4, 4}, gen, kFloat64), wk = randn({4, 3}, gen, kFloat64), wv = randn({4, 3}, gen, kFloat64);
  Tensor b = randn({12}, gen, kFloat64), wo = randn({4, 4}, gen, kFloat64), bo = randn({4}, gen, kFloat64);
  check_gradients(
      [](const TensorList& in) {
        auto o = F::MultiHeadAttentionForwardFuncOptions(2, in[6], in[7])
                     .q_proj_weight(in[2])
                     .k_proj_weight(in[3])
                     .v_proj_weight(in[4])
                     .in_proj_bias(in[5]);
        return F::multi_head_attention_forward(in[0], in[1], in[1], o, nn::AttentionForwardOptions().is_causal(true))
            .output;
      },
      {x, mem, wq, wk, wv, b, wo, bo});
  auto opts = F::MultiHeadAttentionForwardFuncOptions(2, wo, bo).q_proj_weight(wq).k_proj_weight(wk).v_proj_weight(wv);
  CHECK_THROWS_WITH_AS(F::multi_head_attention_forward(x, mem, randn({2, 5, 2}, gen, kFloat64), opts),
                       "multi_head_attention_forward: v_proj_weight must have shape (4,2), got (4,3)", ShapeError);
  CHECK_THROWS_WITH_AS(F::multi_head_attention_forward(x, mem, mem, F::MultiHeadAttentionForwardFuncOptions(3, wo, bo)),
                       "multi_head_attention_forward: embed_dim 4 is not divisible by num_heads 3", ValueError);
  CHECK_THROWS_WITH_AS(F::multi_head_attention_forward(x, Tensor(), Tensor(), opts),
                       "multi_head_attention_forward: key and value are undefined and there is no filled cache to "
                       "take them from",
                       ValueError);
  CHECK_THROWS_WITH_AS(F::multi_head_attention_forward(x, x, x, F::MultiHeadAttentionForwardFuncOptions(2, wo, bo)),
                       "multi_head_attention_forward: q_proj_weight (or in_proj_weight) is required", ValueError);
}

TEST_CASE("functional: modules equal their functional forms") {
  manual_seed(22);
  Generator& gen = default_generator();
  Tensor x = randn({2, 3, 8}, gen, kFloat64);
  SUBCASE("Linear, LayerNorm, RMSNorm, Dropout") {
    nn::Linear fc(8, 5);
    fc->to(kFloat64);
    CHECK(max_abs_diff(fc(x), F::linear(x, fc->weight(), fc->bias())) == 0.0);
    nn::LayerNorm ln(8);
    ln->to(kFloat64);
    CHECK(max_abs_diff(ln(x), F::layer_norm(x, {8}, ln->weight(), ln->bias())) == 0.0);
    nn::RMSNorm rms(8);
    rms->to(kFloat64);
    {
      NoGradGuard no_grad;
      rms->weight().copy_(randn({8}, gen, kFloat64));
    }
    CHECK(max_abs_diff(rms(x), F::rms_norm(x, {8}, rms->weight(), 1e-6)) == 0.0);
    nn::Dropout drop(0.5);
    Generator twin;
    twin.manual_seed(0);
    drop->generator().manual_seed(0);
    CHECK(max_abs_diff(drop(x), F::dropout(x, 0.5, true, twin)) == 0.0);
  }
  SUBCASE("MultiHeadAttention, self and cross, against multi_head_attention_forward") {
    nn::MultiHeadAttention self(8, 2);
    self->to(kFloat64);
    const Tensor& w_in = self->in_proj_weight();
    auto o = F::MultiHeadAttentionForwardFuncOptions(2, self->out_proj()->weight(), self->out_proj()->bias())
                 .in_proj_weight(w_in)
                 .in_proj_bias(self->in_proj_bias());
    auto causal = nn::AttentionForwardOptions().is_causal(true);
    CHECK(max_abs_diff(self(x, Tensor(), causal).output, F::multi_head_attention_forward(x, x, x, o, causal).output) ==
          0.0);
    // The functional form with the fused weight's row blocks given as separate weights.
    auto separate = F::MultiHeadAttentionForwardFuncOptions(2, self->out_proj()->weight(), self->out_proj()->bias())
                        .q_proj_weight(w_in.narrow(0, 0, 8))
                        .k_proj_weight(w_in.narrow(0, 8, 8))
                        .v_proj_weight(w_in.narrow(0, 16, 8))
                        .in_proj_bias(self->in_proj_bias());
    CHECK(max_abs_diff(self(x).output, F::multi_head_attention_forward(x, x, x, separate).output) == 0.0);
  }
}

TEST_CASE("functional: rms_norm against its formula, over several trailing axes, default eps") {
  Generator gen(23);
  Tensor x = randn({2, 3, 4}, gen, kFloat64), w = randn({3, 4}, gen, kFloat64);
  // Over the last two axes: each (3, 4) block divided by the root of its mean square plus eps.
  const double eps = 0.01;
  Tensor y = F::rms_norm(x, {3, 4}, w, eps);
  const std::vector<double> xs = x.to_vector<double>(), ws = w.to_vector<double>();
  std::vector<double> expected;
  for (int b = 0; b < 2; ++b) {
    double ms = 0.0;
    for (int i = 0; i < 12; ++i) ms += xs[b * 12 + i] * xs[b * 12 + i] / 12.0;
    for (int i = 0; i < 12; ++i) expected.push_back(xs[b * 12 + i] / std::sqrt(ms + eps) * ws[i]);
  }
  check_values(y, expected, 1e-12);
  // eps defaults to the dtype's machine epsilon (torch's): a zero row stays zero, no NaN.
  Tensor zero_row = F::rms_norm(zeros({1, 4}, kFloat64), {4});
  check_values(zero_row, {0, 0, 0, 0}, 1e-300);
  CHECK(max_abs_diff(F::rms_norm(x, {4}), F::rms_norm(x, {4}, Tensor(), std::numeric_limits<double>::epsilon())) ==
        0.0);
  check_gradients([](const TensorList& in) { return F::rms_norm(in[0], {3, 4}, in[1], 0.01); }, {x, w});
  CHECK_THROWS_WITH_AS(F::rms_norm(x, {5}), "rms_norm: expected input (..., (5)), got shape (2,3,4)", ShapeError);
  CHECK_THROWS_WITH_AS(F::rms_norm(x, {4}, ones({3}, kFloat64)), "rms_norm: weight must have shape (4), got (3)",
                       ShapeError);
}

// ---------------------------------------------------------------- leaky_relu, pad

TEST_CASE("functional: leaky_relu and LeakyReLU match PyTorch, slope at 0 included") {
  // F.leaky_relu(y, 0.1) and the gradient of its sum, PyTorch 1.13.
  const Tensor y = tensor({-2.0, -0.0, 0.0, 0.5, 3.0}, kFloat64).requires_grad_(true);
  const Tensor out = F::leaky_relu(y, 0.1);
  check_values(out, {-0.2, 0.0, 0.0, 0.5, 3.0}, 1e-15);
  sum(out).backward();
  check_values(y.grad(), {0.1, 0.1, 0.1, 1.0, 1.0}, 1e-15);
  check_values(nn::LeakyReLU()(tensor({-3.0, 2.0}, kFloat64)), {-0.03, 2.0}, 1e-15);
  check_values(nn::LeakyReLU(nn::LeakyReLUOptions().negative_slope(0.5))(tensor({-3.0, 2.0}, kFloat64)), {-1.5, 2.0},
               1e-15);
  CHECK(nn::LeakyReLU()->parameters().empty());
  Generator gen(8);
  check_gradients([](const TensorList& in) { return F::leaky_relu(in[0], 0.2) * in[0]; },
                  {randn({3, 4}, gen, kFloat64)});
  CHECK_THROWS_WITH_AS(F::leaky_relu(tensor({1, 2}, kInt64)),
                       "leaky_relu: x must be a floating-point tensor, got int64", TypeError);
}

TEST_CASE("functional: elu, selu, celu, softplus and mish match PyTorch, the kinks included") {
  // F.elu(x, 0.7), F.selu(x), F.celu(x, 1.5), F.softplus(x, 2.0, 3.0), F.mish(x) and the gradients of
  // their sums, PyTorch 1.13, float64.
  const std::vector<double> values{-3.0, -1e-8, 0.0, 1e-8, 0.5, 2.0};
  struct Case {
    const char* name;
    std::function<Tensor(const Tensor&)> f;
    std::vector<double> out, grad;
  };
  const std::vector<Case> cases{
      {"elu",
       [](const Tensor& x) { return F::elu(x, 0.7); },
       {-0.6651490521424952, -6.999999957457703e-09, 0.0, 1e-08, 0.5, 2.0},
       {0.03485094785750476, 0.699999993, 0.7, 1.0, 1.0, 1.0}},
      {"selu",
       [](const Tensor& x) { return F::selu(x); },
       {-1.6705687287671118, -1.758099330162579e-08, 0.0, 1.0507009873554805e-08, 0.5253504936777402,
        2.101401974710961},
       {0.08753061208026487, 1.7580993232663833, 1.7580993408473766, 1.0507009873554805, 1.0507009873554805,
        1.0507009873554805}},
      {"celu",
       [](const Tensor& x) { return F::celu(x, 1.5); },
       {-1.296997075145081, -9.999999994736442e-09, 0.0, 1e-08, 0.5, 2.0},
       {0.1353352832366127, 0.9999999933333333, 1.0, 1.0, 1.0, 1.0}},
      {"softplus",  // beta x = 4 > 3 at x = 2: x itself, gradient 1
       [](const Tensor& x) { return F::softplus(x, 2.0, 3.0); },
       {0.0012378425688652247, 0.3465735852799727, 0.34657359027997264, 0.34657359527997267, 0.6566308437591114, 2.0},
       {0.0024726231566347748, 0.49999999500000003, 0.5, 0.5000000050000001, 0.7310585786300049, 1.0}},
      {"mish",
       [](const Tensor& x) { return F::mish(x); },
       {-0.1456474612756246, -5.999999968000001e-09, 0.0, 6.000000032000001e-09, 0.3752452113048951,
        1.9439589595339946},
       {-0.09339311453232084, 0.5999999936, 0.6, 0.6000000064000001, 0.8864243753577272, 1.0693179342794896}},
  };
  Generator gen(12);
  const Tensor r = randn({3, 4}, gen, kFloat64);
  for (const Case& c : cases) {
    CAPTURE(c.name);
    const Tensor x = from_vector(values, {6}).requires_grad_(true);
    const Tensor y = c.f(x);
    check_values(y, c.out, 1e-15);
    y.sum().backward();
    check_values(x.grad(), c.grad, 1e-15);
    check_gradients([&](const TensorList& in) { return c.f(in[0]); }, {r});
    CHECK_THROWS_WITH_AS(c.f(tensor({1, 2}, kInt64)),
                         (std::string(c.name) + ": x must be a floating-point tensor, got int64").c_str(), TypeError);
  }
  // Far above zero the untaken exponential branch does not turn the gradient into NaN.
  const Tensor big = tensor({100.0, 1000.0}).requires_grad_(true);
  (F::elu(big) + F::celu(big, 0.5) + F::selu(big)).sum().backward();
  check_values(big.grad(), {1.0 + 1.0 + 1.0507009873554805, 1.0 + 1.0 + 1.0507009873554805}, 1e-6);
  CHECK_THROWS_WITH_AS(F::celu(r, 0.0), "celu: alpha must not be 0", ValueError);
  CHECK_THROWS_WITH_AS(F::softplus(r, 0.0), "softplus: beta must not be 0", ValueError);
}

TEST_CASE("functional: the activation modules, Identity and Flatten") {
  const Tensor x = tensor({{-1.0, 0.5, 2.0}, {0.25, -0.75, 1.5}}, kFloat64);
  const auto same = [](const Tensor& a, const Tensor& b) { return max_abs_diff(a, b) == 0.0; };
  CHECK(same(nn::ELU(nn::ELUOptions().alpha(0.5))(x), F::elu(x, 0.5)));
  CHECK(same(nn::SELU()(x), F::selu(x)));
  CHECK(same(nn::CELU(nn::CELUOptions().alpha(2.0))(x), F::celu(x, 2.0)));
  CHECK(same(nn::Softplus(nn::SoftplusOptions().beta(3.0).threshold(4.0))(x), F::softplus(x, 3.0, 4.0)));
  CHECK(same(nn::Mish()(x), F::mish(x)));
  CHECK(same(nn::Tanh()(x), tanh(x)));
  CHECK(same(nn::Sigmoid()(x), sigmoid(x)));
  CHECK(same(nn::Softmax(0)(x), softmax(x, 0)));
  CHECK(same(nn::LogSoftmax(-1)(x), log_softmax(x, -1)));
  CHECK(nn::Identity()(x).data_ptr<double>() == x.data_ptr<double>());
  CHECK(nn::Flatten()(zeros({2, 3, 4, 5})).shape() == Shape{2, 60});
  CHECK(nn::Flatten(nn::FlattenOptions().start_axis(0).end_axis(1))(zeros({2, 3, 4})).shape() == Shape{6, 4});
  CHECK(nn::ELU()->name() == "ELU");
  CHECK(nn::Sequential(nn::Flatten(), nn::Linear(6, 2), nn::Tanh())->parameters().size() == 2);
  CHECK_THROWS_WITH_AS(nn::CELU(nn::CELUOptions().alpha(0.0)), "CELU: alpha must not be 0", ValueError);
  CHECK_THROWS_WITH_AS(nn::Softplus(nn::SoftplusOptions().beta(0.0)), "Softplus: beta must not be 0", ValueError);
}

TEST_CASE("functional: pad pads and crops as PyTorch's F.pad, last axis first") {
  const Tensor x = tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}, kFloat64);
  const Tensor a = F::pad(x, {1, 2});
  CHECK(a.shape() == Shape{2, 6});
  check_values(a, {0, 1, 2, 3, 0, 0, 0, 4, 5, 6, 0, 0}, 1e-15);
  const Tensor b = F::pad(x, {0, 0, 2, 0}, -1.0);
  CHECK(b.shape() == Shape{4, 3});
  check_values(b, {-1, -1, -1, -1, -1, -1, 1, 2, 3, 4, 5, 6}, 1e-15);
  // Negative pads crop: the first column and the last row go.
  const Tensor c = F::pad(x, {-1, 1, 1, -1}, 9.0);
  CHECK(c.shape() == Shape{2, 3});
  check_values(c, {9, 9, 9, 2, 3, 9}, 1e-15);
  const Tensor ints = F::pad(tensor({1, 2}, kInt64).reshape({1, 2}), {1, 0});
  CHECK(ints.dtype() == kInt64);
  CHECK(ints.to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 1, 2});
  // Always a copy, as torch's: with no pads, and when it only crops, writing into the result leaves x alone.
  const Tensor unpadded = F::pad(x, {0, 0});
  CHECK(unpadded.data_ptr<double>() != x.data_ptr<double>());
  const Tensor cropped = F::pad(x, {0, -1});
  check_values(cropped, {1, 2, 4, 5}, 1e-15);
  cropped.fill_(7.0);
  unpadded.fill_(8.0);
  check_values(x, {1, 2, 3, 4, 5, 6}, 1e-15);

  // The gradient of (pad(x, (-1, 2, 1, 0)) * w).sum() with w = arange(12).reshape(3, 4), PyTorch 1.13:
  // the cropped column and the padding get none.
  const Tensor xg = x.detach().requires_grad_(true);
  const Tensor padded = F::pad(xg, {-1, 2, 1, 0});
  CHECK(padded.shape() == Shape{3, 4});
  sum(padded * arange(0.0, 12.0, 1.0, kFloat64).reshape({3, 4})).backward();
  check_values(xg.grad(), {0, 4, 5, 0, 8, 9}, 1e-15);
  Generator gen(9);
  check_gradients(
      [](const TensorList& in) {
        return F::pad(in[0].transpose(0, 1), {2, -1, 0, 1}, 0.5);
      },
      {randn({3, 4}, gen, kFloat64)});

  CHECK_THROWS_WITH_AS(F::pad(x, {1}), "pad: pads come in (before, after) pairs, got 1 values", ValueError);
  CHECK_THROWS_WITH_AS(F::pad(x, {1, 1, 1, 1, 1, 1}), "pad: 3 pairs of pads for a tensor of rank 2 (shape (2,3))",
                       ValueError);
  CHECK_THROWS_WITH_AS(F::pad(x, {-2, -2}), "pad: pads (-2, -2) crop more than the 3 elements of axis 1 of shape (2,3)",
                       ValueError);
}
