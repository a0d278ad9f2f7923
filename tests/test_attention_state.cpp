// MultiHeadAttention's parameters under torch.nn.MultiheadAttention's names: the layouts for equal
// and different kdim / vdim, a state dict shared by self- and cross-attention, separate key and
// value sequences, and torch state dicts loaded by name (literal fixtures from torch 1.13).

#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "tapegrad/nn/nn.h"
#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::check_gradients;
using tapegrad::testing::max_abs_diff;

namespace {

// The module's weights as functional options.
nn::functional::MultiHeadAttentionForwardFuncOptions functional_options(const nn::MultiHeadAttention& m) {
  return nn::functional::MultiHeadAttentionForwardFuncOptions(m->num_heads(), m->out_proj()->weight(),
                                                              m->out_proj()->bias())
      .in_proj_weight(m->in_proj_weight())
      .q_proj_weight(m->q_proj_weight())
      .k_proj_weight(m->k_proj_weight())
      .v_proj_weight(m->v_proj_weight())
      .in_proj_bias(m->in_proj_bias());
}

// Made with torch 1.13 (float64): parameters and inputs drawn as torch.randint(-8, 9, shape) / 8 after
// torch.manual_seed(1), the output from m(query, key, value, need_weights=False).
// torch.nn.MultiheadAttention(4, 2, batch_first=True).state_dict()
const std::vector<std::pair<std::string, std::pair<Shape, std::vector<double>>>> same_state = {
    {"in_proj_weight",
     {Shape{12, 4}, {-0.25,  0.375,  -1.0,  -0.875, -0.375, 0.5,    0.75,  0.75,   0.25,   -1.0,   0.375,  0.875,
                     -0.125, 0.5,    0.375, -0.625, -0.75,  -0.875, 0.0,   -0.375, -0.875, -0.375, 0.25,   -0.75,
                     0.625,  0.625,  0.625, 0.25,   0.0,    0.375,  0.875, 0.75,   -0.625, 0.625,  0.875,  -0.125,
                     0.25,   -0.125, 0.125, -0.625, 1.0,    -0.75,  -0.75, 0.25,   -0.875, -0.125, -0.375, 0.0}}},
    {"in_proj_bias", {Shape{12}, {0.375, 0.5, 0.0, 0.875, -1.0, 0.125, -0.25, -0.125, 1.0, 0.75, 0.625, -0.25}}},
    {"out_proj.weight",
     {Shape{4, 4},
      {0.25, -0.5, 0.625, 0.375, -0.125, 0.875, -0.25, -0.5, -0.375, 0.75, 0.875, 0.625, 0.125, -0.5, 1.0, -0.75}}},
    {"out_proj.bias", {Shape{4}, {0.125, 0.125, 0.25, 0.25}}},
};
// (1, 2, 4)
const std::vector<double> same_query = {0.0, 0.25, 0.125, 0.5, 0.25, 0.375, -0.875, -0.875};
// (1, 3, 4)
const std::vector<double> same_key = {-0.625, 0.625, 0.75,  0.125,  0.625, 0.625,
                                      0.625,  0.625, 0.375, -0.125, 0.625, 0.75};
// (1, 3, 4)
const std::vector<double> same_value = {-0.375, 0.25, -0.875, 0.625, 0.375, -0.5,
                                        -0.125, 0.75, 0.625,  0.25,  -1.0,  0.25};
// (1, 2, 4)
const std::vector<double> same_out = {0.910799384468061,  0.07871300538892108, 1.5269915023249236, 1.7992672802054113,
                                      0.8251631077214986, 0.13330951400114832, 1.619357691590686,  1.579508025332769};
// torch.nn.MultiheadAttention(4, 2, batch_first=True, kdim=3, vdim=2).state_dict()
const std::vector<std::pair<std::string, std::pair<Shape, std::vector<double>>>> separate_state = {
    {"q_proj_weight",
     {Shape{4, 4},
      {-1.0, -0.75, 0.5, 0.875, 0.5, -0.375, 0.25, -0.875, -0.75, 1.0, 0.875, 0.5, -1.0, -0.875, 0.75, 0.25}}},
    {"k_proj_weight", {Shape{4, 3}, {0.0, 0.75, 1.0, 0.0, -0.625, 0.5, -0.625, -0.625, -0.625, -0.625, 0.125, -0.125}}},
    {"v_proj_weight", {Shape{4, 2}, {-0.625, 0.5, 0.75, 0.5, -0.125, -0.375, 1.0, 0.875}}},
    {"in_proj_bias", {Shape{12}, {0.5, 0.75, 0.375, 0.625, 0.875, -0.5, -0.375, 0.5, -0.25, 1.0, 1.0, 0.125}}},
    {"out_proj.weight",
     {Shape{4, 4},
      {0.25, 0.0, 0.0, 0.375, -0.5, -0.25, -0.375, 1.0, 0.5, -0.625, 1.0, -1.0, 0.75, 0.75, -0.875, -1.0}}},
    {"out_proj.bias", {Shape{4}, {0.375, -0.75, 0.625, -0.375}}},
};
// (1, 2, 4)
const std::vector<double> separate_query = {0.0, -1.0, -0.625, -0.375, -0.875, 0.125, 1.0, -0.375};
// (1, 3, 3)
const std::vector<double> separate_key = {-0.125, -0.625, -0.625, 0.75, -1.0, 0.375, -0.625, -0.625, -0.25};
// (1, 3, 2)
const std::vector<double> separate_value = {0.125, 0.875, -0.125, 0.5, 0.0, 1.0};
// (1, 2, 4)
const std::vector<double> separate_out = {0.6957934914543438,  -0.6489732595899029, -0.18591657408945617,
                                          -0.679464357545084,  0.776961673103743,   -0.4019884774060676,
                                          -0.4718347324195986, -0.8374240789056495};

NamedTensors state_of(const std::vector<std::pair<std::string, std::pair<Shape, std::vector<double>>>>& entries) {
  NamedTensors state;
  for (const auto& [name, value] : entries) state.emplace_back(name, from_vector(value.second, value.first));
  return state;
}

}  // namespace

TEST_CASE("attention: parameter names of self- and cross-attention are torch.nn.MultiheadAttention's") {
  manual_seed(0);
  auto names_of = [](const nn::MultiHeadAttention& m) {
    std::vector<std::string> names;
    for (const auto& p : m->named_parameters()) names.push_back(p.first);
    return names;
  };
  nn::MultiHeadAttention self(8, 2);
  CHECK(names_of(self) ==
        std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"});
  CHECK(self->in_proj_weight().shape() == Shape{24, 8});
  CHECK(self->in_proj_bias().shape() == Shape{24});
  // Cross-attention with kdim = vdim = embed_dim has the same parameters as self-attention.
  nn::MultiHeadAttention cross{nn::MultiHeadAttentionOptions(8, 2).cross_attention(true)};
  CHECK(names_of(cross) == names_of(self));
  nn::MultiHeadAttention bare{nn::MultiHeadAttentionOptions(8, 2).cross_attention(true).bias(false)};
  CHECK(names_of(bare) == std::vector<std::string>{"in_proj_weight", "out_proj.weight"});
  // kdim / vdim != embed_dim: separate projection weights (torch's _qkv_same_embed_dim false).
  nn::MultiHeadAttention separate{nn::MultiHeadAttentionOptions(8, 2).cross_attention(true).kdim(6).vdim(5)};
  CHECK(names_of(separate) == std::vector<std::string>{"q_proj_weight", "k_proj_weight", "v_proj_weight",
                                                       "in_proj_bias", "out_proj.weight", "out_proj.bias"});
  CHECK_FALSE(separate->qkv_same_embed_dim());
  CHECK(separate->k_proj_weight().shape() == Shape{8, 6});
  CHECK(separate->v_proj_weight().shape() == Shape{8, 5});
}

TEST_CASE("attention: a state dict moves between self- and cross-attention") {
  manual_seed(10);
  Generator& gen = default_generator();
  nn::MultiHeadAttention self(8, 2), cross{nn::MultiHeadAttentionOptions(8, 2).cross_attention(true)};
  self->to(kFloat64);
  cross->to(kFloat64);
  cross->load_state_dict(self->state_dict());
  Tensor x = randn({2, 4, 8}, gen, kFloat64);
  auto causal = nn::AttentionForwardOptions().is_causal(true);
  CHECK(max_abs_diff(cross(x, x, causal).output, self(x, Tensor(), causal).output) == 0.0);
  // Cross-attention projects q through the first row block and k, v through the other two.
  Tensor mem = randn({2, 3, 8}, gen, kFloat64);
  const Tensor& w = cross->in_proj_weight();
  auto blocks =
      nn::functional::MultiHeadAttentionForwardFuncOptions(2, cross->out_proj()->weight(), cross->out_proj()->bias())
          .q_proj_weight(w.narrow(0, 0, 8))
          .k_proj_weight(w.narrow(0, 8, 8))
          .v_proj_weight(w.narrow(0, 16, 8))
          .in_proj_bias(cross->in_proj_bias());
  CHECK(max_abs_diff(cross(x, mem).output, nn::functional::multi_head_attention_forward(x, mem, mem, blocks).output) ==
        0.0);
}

TEST_CASE("attention: separate key and value sequences with kdim != vdim") {
  manual_seed(11);
  Generator& gen = default_generator();
  nn::MultiHeadAttention m{nn::MultiHeadAttentionOptions(8, 2).cross_attention(true).kdim(6).vdim(3)};
  m->to(kFloat64);
  Tensor x = randn({2, 3, 8}, gen, kFloat64), key = randn({2, 5, 6}, gen, kFloat64);
  Tensor value = randn({2, 5, 3}, gen, kFloat64);
  auto o = functional_options(m);
  CHECK(max_abs_diff(m(x, key, value).output, nn::functional::multi_head_attention_forward(x, key, value, o).output) ==
        0.0);
  check_gradients([&](const TensorList& in) { return m(in[0], in[1], in[2]).output; }, {x, key, value}, {},
                  m->parameters());
  CHECK_THROWS_WITH_AS(m(x, key, randn({2, 5, 4}, gen, kFloat64)),
                       "MultiHeadAttention: expected value of shape (2,Tk,3) for query (2,3,8), got (2,5,4)",
                       ShapeError);
}

TEST_CASE("attention: loads a torch.nn.MultiheadAttention state dict by name and computes its output") {
  manual_seed(12);
  SUBCASE("kdim = vdim = embed_dim: in_proj_weight") {
    nn::MultiHeadAttention m{nn::MultiHeadAttentionOptions(4, 2).cross_attention(true)};
    m->to(kFloat64);
    m->load_state_dict(state_of(same_state));
    Tensor out =
        m(from_vector(same_query, {1, 2, 4}), from_vector(same_key, {1, 3, 4}), from_vector(same_value, {1, 3, 4}))
            .output;
    CHECK(max_abs_diff(out, from_vector(same_out, {1, 2, 4})) < 1e-12);
    // The same state dict loads into self-attention.
    nn::MultiHeadAttention self(4, 2);
    self->to(kFloat64);
    self->load_state_dict(state_of(same_state));
    CHECK(max_abs_diff(self->in_proj_weight(), m->in_proj_weight()) == 0.0);
  }
  SUBCASE("kdim 3, vdim 2: q_proj_weight, k_proj_weight, v_proj_weight") {
    nn::MultiHeadAttention m{nn::MultiHeadAttentionOptions(4, 2).cross_attention(true).kdim(3).vdim(2)};
    m->to(kFloat64);
    m->load_state_dict(state_of(separate_state));
    Tensor out = m(from_vector(separate_query, {1, 2, 4}), from_vector(separate_key, {1, 3, 3}),
                   from_vector(separate_value, {1, 3, 2}))
                     .output;
    CHECK(max_abs_diff(out, from_vector(separate_out, {1, 2, 4})) < 1e-12);
  }
}
