// nn::LanguageModel's position and attention options (learned, sinusoidal, rotary; multi-head,
// grouped-query, latent), its cache, and nucleus sampling.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "tapegrad/nn/nn.h"
#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::check_gradients;
using tapegrad::testing::copy_tied_into_untied;
using tapegrad::testing::parameter;

namespace {

double max_diff(const Tensor& a, const Tensor& b) { return (a.to(kFloat64) - b.to(kFloat64)).abs().max().item(); }

enum class Attn { MHA, GQA, MLA };

nn::LanguageModel make_lm(nn::PositionEncoding positions, Attn attn, std::int64_t max_len = 12) {
  nn::TransformerLayerOptions layer = nn::TransformerLayerOptions(/*d_model=*/8, /*nhead=*/2)
                                          .dim_feedforward(12)
                                          .activation(nn::Activation::GELU)
                                          .dropout(0.0)
                                          .norm_first(true);
  if (attn == Attn::GQA) layer.num_kv_heads(1);
  if (attn == Attn::MLA)
    layer.latent_attention(nn::MultiHeadLatentAttentionOptions(8, 2)
                               .kv_lora_rank(6)
                               .qk_nope_head_dim(4)
                               .qk_rope_head_dim(2)
                               .v_head_dim(4)
                               .max_len(max_len));
  return nn::LanguageModel(
      nn::LanguageModelOptions().vocab_size(7).max_len(max_len).num_layers(2).positions(positions).layer(layer));
}

const char* name(Attn a) { return a == Attn::MHA ? "mha" : a == Attn::GQA ? "gqa" : "mla"; }

}  // namespace

TEST_CASE("language model: every position and attention option decodes with its cache as it runs whole") {
  for (nn::PositionEncoding positions :
       {nn::PositionEncoding::Learned, nn::PositionEncoding::Sinusoidal, nn::PositionEncoding::Rotary}) {
    for (Attn attn : {Attn::MHA, Attn::GQA, Attn::MLA}) {
      CAPTURE(static_cast<int>(positions));
      CAPTURE(name(attn));
      manual_seed(3);
      nn::LanguageModel lm = make_lm(positions, attn);
      const Tensor tokens = randint(0, 7, {2, 7}, default_generator());
      const Tensor whole = lm(tokens);
      CHECK(whole.shape() == Shape{2, 7, 7});
      NoGradGuard guard;
      nn::LanguageModelCache cache;
      const Tensor a = lm->forward(tokens.narrow(1, 0, 4), &cache);
      const Tensor b = lm->forward(tokens.narrow(1, 4, 1), &cache);
      const Tensor c = lm->forward(tokens.narrow(1, 5, 2), &cache);
      CHECK(cache.length() == 7);
      CHECK(max_diff(a, whole.narrow(1, 0, 4)) < 1e-5);
      CHECK(max_diff(b, whole.narrow(1, 4, 1)) < 1e-5);
      CHECK(max_diff(c, whole.narrow(1, 5, 2)) < 1e-5);
      // The cache holds key/value heads (or the latent) only: bytes per token and layer, float32.
      const double expected = attn == Attn::MHA ? 2 * 8 * 4 : attn == Attn::GQA ? 2 * 4 * 4 : (6 + 2) * 4;
      CHECK(cache.bytes_per_token_per_layer() == expected);
      CHECK((attn == Attn::MLA ? cache.kv.empty() && cache.latent.size() == 2 : cache.kv.size() == 2));
      // Only learned positions have parameters of their own.
      bool has_pos_emb = false;
      for (const auto& [key, value] : lm->named_parameters()) has_pos_emb = has_pos_emb || key == "pos_emb.weight";
      CHECK(has_pos_emb == (positions == nn::PositionEncoding::Learned));
    }
  }
}

TEST_CASE("language model: positions matter: rotary and sinusoidal models see token order") {
  for (nn::PositionEncoding positions : {nn::PositionEncoding::Sinusoidal, nn::PositionEncoding::Rotary}) {
    manual_seed(5);
    nn::LanguageModel lm = make_lm(positions, Attn::MHA);
    NoGradGuard guard;
    // The same tokens in another order give another prediction at the last position.
    const Tensor x = tensor({{1, 2, 3, 4}}, kInt64), y = tensor({{3, 2, 1, 4}}, kInt64);
    CHECK(max_diff(lm(x).select(1, -1), lm(y).select(1, -1)) > 1e-4);
  }
}

TEST_CASE("language model: float64 gradients of the rotary, grouped-query and latent-attention models") {
  for (auto [positions, attn] :
       {std::pair{nn::PositionEncoding::Rotary, Attn::GQA}, std::pair{nn::PositionEncoding::Sinusoidal, Attn::MLA},
        std::pair{nn::PositionEncoding::Rotary, Attn::MLA}}) {
    CAPTURE(name(attn));
    manual_seed(7);
    nn::LanguageModel lm = make_lm(positions, attn, 6);
    lm->to(kFloat64);
    const Tensor tokens = randint(0, 7, {1, 3}, default_generator());
    check_gradients([&](const TensorList&) { return lm(tokens); }, {}, {}, lm->parameters());
  }
}

TEST_CASE(
    "language model: nucleus sampling keeps the smallest likely set, a tiny nucleus is greedy, a sliding window "
    "continues past max_len") {
  manual_seed(9);
  nn::LanguageModel lm = make_lm(nn::PositionEncoding::Learned, Attn::MLA);
  const Tensor prompt = tensor({{1, 2}, {3, 4}}, kInt64);
  nn::GenerationOptions greedy;
  greedy.max_new_tokens = 6;
  greedy.temperature = 0.0;
  const Tensor expected = lm->generate(prompt, greedy, default_generator());
  // A nucleus too small for two tokens keeps the most likely one: greedy, at any temperature.
  nn::GenerationOptions nucleus = greedy;
  nucleus.temperature = 1.5;
  nucleus.top_p = 1e-9;
  Generator gen(1);
  CHECK(lm->generate(prompt, nucleus, gen).to_vector<std::int64_t>() == expected.to_vector<std::int64_t>());
  // top_p = 1 is plain sampling: the same draws as without it.
  nn::GenerationOptions plain = greedy, whole = greedy;
  plain.temperature = whole.temperature = 1.0;
  whole.top_p = 1.0;
  Generator g1(4), g2(4);
  CHECK(lm->generate(prompt, plain, g1).to_vector<std::int64_t>() ==
        lm->generate(prompt, whole, g2).to_vector<std::int64_t>());
  // With top_p 0.5, over many draws only tokens inside the nucleus of the first step appear.
  nn::GenerationOptions half = plain;
  half.max_new_tokens = 1;
  half.top_p = 0.5;
  std::vector<double> probs;
  {
    NoGradGuard guard;
    lm->eval();
    probs = softmax(lm(prompt.narrow(0, 0, 1)).select(1, -1).to(kFloat64), -1).to_vector<double>();
    lm->train();
  }
  std::vector<std::size_t> order(probs.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return probs[a] > probs[b]; });
  std::vector<bool> inside(probs.size(), false);
  double mass = 0.0;
  for (std::size_t i = 0; i < order.size() && (i == 0 || mass < 0.5); ++i) {
    inside[order[i]] = true;
    mass += probs[order[i]];
  }
  Generator draws(11);
  for (int i = 0; i < 200; ++i) {
    const std::int64_t token = lm->generate(prompt.narrow(0, 0, 1), half, draws).to_vector<std::int64_t>().back();
    CHECK(inside[static_cast<std::size_t>(token)]);
  }

  // Past max_len (12) with a sliding window: each token is the argmax over the last 12 tokens.
  nn::GenerationOptions slide = greedy;
  slide.max_new_tokens = 15;
  slide.sliding_window = true;
  const Tensor long_run = lm->generate(prompt, slide, gen);
  CHECK(long_run.shape() == Shape{2, 17});
  Tensor reference = prompt;
  for (int i = 0; i < 15; ++i) {
    NoGradGuard guard;
    lm->eval();
    const std::int64_t t = reference.shape()[1];
    const Tensor seen = t > 12 ? reference.narrow(1, t - 12, 12).contiguous() : reference;
    const Tensor next = argmax(lm(seen).select(1, -1), -1).unsqueeze(1);
    reference = concat({reference, next}, 1);
  }
  lm->train();
  CHECK(long_run.to_vector<std::int64_t>() == reference.to_vector<std::int64_t>());

  nn::GenerationOptions bad = plain;
  bad.top_p = 0.0;
  CHECK_THROWS_WITH_AS(lm->generate(prompt, bad, gen), doctest::Contains("top_p must be in (0, 1], got 0"), ValueError);
  nn::LanguageModelCache cache;
  NoGradGuard guard;
  lm->forward(randint(0, 7, {1, 10}, gen), &cache);
  CHECK_THROWS_WITH_AS(lm->forward(randint(0, 7, {1, 3}, gen), &cache),
                       "LanguageModel: positions 10 .. 12 exceed max_len 12", ValueError);
  // A latent-attention layer refuses masks and a key/value cache.
  nn::TransformerEncoderLayer layer(nn::TransformerLayerOptions(8, 2).dropout(0.0).latent_attention(
      nn::MultiHeadLatentAttentionOptions(8, 2).kv_lora_rank(4).qk_nope_head_dim(4).qk_rope_head_dim(2).v_head_dim(4)));
  CHECK_THROWS_WITH_AS(layer(randn({1, 3, 8}), nn::AttentionForwardOptions()),
                       doctest::Contains("latent attention is causal self-attention without masks"), ValueError);
}

TEST_CASE("language model: tied embeddings are one table, used twice, with both uses' gradient") {
  const auto options = [](bool tied) {
    return nn::LanguageModelOptions().vocab_size(7).max_len(6).num_layers(1).tie_embeddings(tied).layer(
        nn::TransformerLayerOptions(8, 2).dim_feedforward(12).dropout(0.0).norm_first(true));
  };
  manual_seed(3);
  nn::LanguageModel tied(options(true));
  nn::LanguageModel untied(options(false));
  std::vector<std::string> names;
  for (const auto& [name, tensor] : tied->state_dict()) names.push_back(name);
  CHECK(std::count(names.begin(), names.end(), "tok_emb.weight") == 1);
  CHECK(std::none_of(names.begin(), names.end(), [](const std::string& n) { return n.rfind("head.", 0) == 0; }));
  // The tied table starts N(0, 1/d), d = 8.
  const Tensor table = parameter(*tied, "tok_emb.weight");
  const double rms = std::sqrt((table * table).mean().item());
  CHECK(rms > 0.2);
  CHECK(rms < 0.5);

  // The same weights in the untied model, its head a copy of the table with a zero bias: the same
  // logits, and the tied table's gradient is the sum of the untied table's and head's.
  copy_tied_into_untied(*tied, *untied, "tok_emb.weight");
  const Tensor tokens = from_vector(std::vector<std::int64_t>{1, 4, 4, 0, 6, 2}, {2, 3});
  const Tensor tied_logits = tied(tokens), untied_logits = untied(tokens);
  CHECK(max_diff(tied_logits, untied_logits) < 1e-6);
  Generator gen(4);
  const Tensor w = randn(tied_logits.shape(), gen);
  (tied_logits * w).sum().backward();
  (untied_logits * w).sum().backward();
  const Tensor both = parameter(*untied, "tok_emb.weight").grad() + parameter(*untied, "head.weight").grad();
  CHECK(max_diff(table.grad(), both) < 1e-5);
  CHECK(max_diff(parameter(*untied, "head.weight").grad(), zeros_like(both)) > 1e-3);  // the head's share is real

  // float64 gradients of the tied model against finite differences.
  tied->to(kFloat64);
  check_gradients([&](const TensorList&) { return tied(tokens); }, {}, {}, tied->parameters());
}

TEST_CASE("language model: mixture-of-experts blocks report their routing and train through their losses") {
  manual_seed(8);
  nn::TransformerLayerOptions layer =
      nn::TransformerLayerOptions(8, 2).dim_feedforward(12).dropout(0.0).norm_first(true);
  layer.moe(nn::MoEOptions(8).num_experts(3).top_k(2).hidden(6).capacity_factor(1.0).noisy_gating(true));
  nn::LanguageModel lm(nn::LanguageModelOptions().vocab_size(7).max_len(6).num_layers(2).layer(layer));
  std::vector<std::string> names;
  for (const auto& [name, tensor] : lm->state_dict()) names.push_back(name);
  CHECK(std::count(names.begin(), names.end(), "blocks.1.moe.router.weight") == 1);
  CHECK(std::count(names.begin(), names.end(), "blocks.0.moe.noise.weight") == 1);
  CHECK(std::none_of(names.begin(), names.end(),
                     [](const std::string& n) { return n.find(".ff.") != std::string::npos; }));
  CHECK(lm->last_moe().size() == 2);
  const Tensor tokens = from_vector(std::vector<std::int64_t>{1, 4, 4, 0, 6, 2, 3, 5}, {2, 4});
  const Tensor logits = lm(tokens);
  for (const nn::MoEOutput* m : lm->last_moe()) {
    CHECK(m->capacity == 6);  // ceil(1.0 * 8 tokens * 2 / 3)
    std::int64_t kept = 0;
    for (const std::int64_t k : m->tokens_per_expert) kept += k;
    CHECK(kept + m->dropped_assignments == 16);
    CHECK(m->load_loss.defined());
  }
  // The router learns from the auxiliary losses alone.
  Tensor aux = lm->last_moe()[0]->load_balancing_loss + lm->last_moe()[0]->load_loss;
  aux.backward();
  CHECK(parameter(*lm, "blocks.0.moe.router.weight").grad().abs().max().item() > 0);
  CHECK(parameter(*lm, "blocks.0.moe.noise.weight").grad().abs().max().item() > 0);

  // float64 gradients of the logits and the losses, with the noise drawn the same at every evaluation.
  lm->to(kFloat64);
  lm->eval();
  const auto f = [&](const TensorList&) {
    const Tensor out = lm(tokens).reshape({-1});
    const nn::MoEOutput& m = *lm->last_moe()[1];
    return concat({out, m.load_balancing_loss.reshape({1}), m.load_loss.reshape({1})}, 0);
  };
  const GradcheckResult result = gradcheck(f, {}, {}, lm->parameters());
  CHECK_MESSAGE(result.passed, result.message());

  CHECK_THROWS_WITH_AS(nn::TransformerDecoderLayer{layer},
                       "TransformerDecoderLayer: a mixture-of-experts feed-forward (moe) is for encoder layers only",
                       ValueError);
  layer.moe()->dim(6);
  CHECK_THROWS_WITH_AS(nn::TransformerEncoderLayer{layer},
                       "TransformerEncoderLayer: moe has dim 6 but the layer d_model 8", ValueError);
}
