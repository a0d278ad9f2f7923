// Transformer blocks, stacks and the language model: gradchecks for both norm orders with
// masks, names, causality, cached decoding against full recomputation, generation.

#include <doctest/doctest.h>

#include "tapegrad/nn/nn.h"
#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::check_gradients;

namespace {

nn::TransformerLayerOptions tiny(bool norm_first) {
  nn::TransformerLayerOptions options;
  options.d_model = 4;
  options.num_heads = 2;
  options.ff_hidden = 6;
  options.activation = nn::Activation::GELU;
  options.norm_first = norm_first;
  return options;
}

// A one-layer encoder-decoder over 6 tokens and up to 8 positions, with tiny pre-norm layers.
nn::EncoderDecoderOptions tiny_seq2seq(nn::PositionEncoding positions = nn::PositionEncoding::Learned) {
  nn::EncoderDecoderOptions options;
  options.src_vocab = 6;
  options.tgt_vocab = 6;
  options.max_len = 8;
  options.encoder_layers = 1;
  options.decoder_layers = 1;
  options.positions = positions;
  options.layer = tiny(true);
  return options;
}

Tensor padding(std::vector<bool> values, std::int64_t b, std::int64_t t) { return from_vector(values, {b, t}); }

double max_diff(const Tensor& a, const Tensor& b) { return (a.to(kFloat64) - b.to(kFloat64)).abs().max().item(); }

}  // namespace

TEST_CASE("transformer: encoder layer gradcheck, pre- and post-norm, with key padding") {
  for (bool norm_first : {true, false}) {
    Generator gen(0);
    nn::TransformerEncoderLayer layer(tiny(norm_first), gen);
    layer.to(kFloat64);
    const Tensor x = randn({2, 3, 4}, gen, kFloat64);
    const Tensor pad = padding({false, false, true, false, false, false}, 2, 3);
    check_gradients([&](const TensorList& in) { return layer(in[0], pad); }, {x}, {}, layer.parameters());
  }
}

TEST_CASE("transformer: decoder layer gradcheck, pre- and post-norm, with both padding masks") {
  for (bool norm_first : {true, false}) {
    Generator gen(1);
    nn::TransformerDecoderLayer layer(tiny(norm_first), gen);
    layer.to(kFloat64);
    const Tensor x = randn({2, 3, 4}, gen, kFloat64);
    const Tensor memory = randn({2, 2, 4}, gen, kFloat64);
    nn::DecoderLayerInputs inputs;
    inputs.tgt_key_padding_mask = padding({false, false, true, false, false, false}, 2, 3);
    inputs.memory_key_padding_mask = padding({false, true, false, false}, 2, 2);
    check_gradients([&](const TensorList& in) { return layer.forward(in[0], in[1], inputs); }, {x, memory}, {},
                    layer.parameters());
  }
}

TEST_CASE("transformer: stacks name their layers and keep decoder outputs causal") {
  Generator gen(2);
  nn::TransformerEncoder encoder(2, tiny(true), gen);
  nn::TransformerDecoder decoder(2, tiny(true), gen);
  const auto names = encoder.named_parameters();
  CHECK(names.front().first == "layers.0.self_attn.qkv_proj.weight");
  CHECK(names.back().first == "norm.bias");
  bool has_cross = false;
  for (const auto& entry : decoder.named_parameters())
    has_cross = has_cross || entry.first == "layers.1.cross_attn.q_proj.weight";
  CHECK(has_cross);
  nn::TransformerEncoder post(1, tiny(false), gen);
  CHECK(post.named_parameters().back().first == "layers.0.norm2.bias");  // no final norm after post-norm

  const Tensor memory = encoder(randn({1, 4, 4}, gen));
  Tensor x = randn({1, 5, 4}, gen);
  const Tensor full = decoder.forward(x, memory);
  // Changing positions after t leaves outputs at positions <= t unchanged.
  Tensor changed = x.clone();
  {
    NoGradGuard guard;
    changed.narrow(1, 3, 2).copy_(randn({1, 2, 4}, gen));
  }
  const Tensor again = decoder.forward(changed, memory);
  CHECK(max_diff(full.narrow(1, 0, 3), again.narrow(1, 0, 3)) < 1e-6);
  CHECK(max_diff(full.narrow(1, 3, 2), again.narrow(1, 3, 2)) > 1e-3);
}

TEST_CASE("transformer: cached incremental decoding equals full recomputation") {
  Generator gen(3);
  nn::TransformerDecoder decoder(2, tiny(true), gen);
  const Tensor memory = randn({2, 3, 4}, gen);
  const Tensor x = randn({2, 5, 4}, gen);
  const Tensor full = decoder.forward(x, memory);
  NoGradGuard guard;
  nn::DecoderCache cache;
  for (std::int64_t t = 0; t < 5; ++t) {
    const Tensor step = decoder.forward(x.narrow(1, t, 1), memory, Tensor(), Tensor(), &cache);
    CHECK(max_diff(step, full.narrow(1, t, 1)) < 1e-5);
  }
  CHECK(cache.length() == 5);
  std::vector<Tensor> weights;
  decoder.forward(x, memory, Tensor(), Tensor(), nullptr, &weights);
  REQUIRE(weights.size() == 2);
  CHECK(weights[0].shape() == Shape{2, 2, 5, 3});
}

TEST_CASE("transformer: language model cache, gradcheck and generation") {
  Generator gen(4);
  nn::LanguageModelOptions options;
  options.vocab_size = 7;
  options.max_len = 12;
  options.num_layers = 2;
  options.layer = tiny(true);
  nn::LanguageModel lm(options, gen);
  const Tensor tokens = randint(0, 7, {2, 6}, gen);
  const Tensor logits = lm(tokens);
  CHECK(logits.shape() == Shape{2, 6, 7});
  {
    NoGradGuard guard;
    std::vector<nn::KVCache> caches;
    const Tensor first = lm.forward(tokens.narrow(1, 0, 4), &caches);
    const Tensor rest = lm.forward(tokens.narrow(1, 4, 2), &caches);
    CHECK(max_diff(first, logits.narrow(1, 0, 4)) < 1e-5);
    CHECK(max_diff(rest, logits.narrow(1, 4, 2)) < 1e-5);
  }
  // Greedy generation equals the argmax of full recomputation, token by token.
  const Tensor prompt = tokens.narrow(1, 0, 2);
  nn::GenerationOptions greedy;
  greedy.max_new_tokens = 5;
  greedy.temperature = 0.0;
  const Tensor generated = lm.generate(prompt, greedy, gen);
  CHECK(generated.shape() == Shape{2, 7});
  Tensor reference = prompt;
  for (int i = 0; i < 5; ++i) {
    NoGradGuard guard;
    const Tensor next = argmax(lm(reference).select(1, -1), -1).unsqueeze(1);
    reference = concat({reference, next}, 1);
  }
  CHECK(generated.to_vector<std::int64_t>() == reference.to_vector<std::int64_t>());
  // Sampling from the top 1 is greedy; sampling is reproducible from the seed.
  nn::GenerationOptions top1;
  top1.max_new_tokens = 5;
  top1.temperature = 0.7;
  top1.top_k = 1;
  CHECK(lm.generate(prompt, top1, gen).to_vector<std::int64_t>() == reference.to_vector<std::int64_t>());
  nn::GenerationOptions sample;
  sample.max_new_tokens = 5;
  sample.top_k = 3;
  Generator a(9), b(9);
  CHECK(lm.generate(prompt, sample, a).to_vector<std::int64_t>() ==
        lm.generate(prompt, sample, b).to_vector<std::int64_t>());
  CHECK(lm.is_training());  // generate restores the mode

  nn::GenerationOptions too_long;
  too_long.max_new_tokens = 11;
  CHECK_THROWS_WITH_AS(lm.generate(prompt, too_long, gen),
                       "LanguageModel::generate: prompt length 2 plus 11 new tokens exceeds max_len 12", ValueError);
  CHECK_THROWS_WITH_AS(lm(zeros({2, 3, 4}, kInt64)), "LanguageModel: expected tokens (B, T), got shape (2,3,4)",
                       ShapeError);

  lm.to(kFloat64);
  const Tensor small = randint(0, 7, {1, 3}, gen);
  check_gradients([&](const TensorList&) { return lm(small); }, {}, {}, lm.parameters());
}

TEST_CASE("transformer: encoder-decoder gradcheck, greedy decoding against full recomputation, learning") {
  for (auto positions : {nn::PositionEncoding::Learned, nn::PositionEncoding::Sinusoidal, nn::PositionEncoding::Rotary}) {
    Generator gen(5);
    const nn::EncoderDecoderOptions options = tiny_seq2seq(positions);
    nn::EncoderDecoder model(options, gen);
    const Tensor src = randint(0, 6, {2, 4}, gen);
    const Tensor tgt = randint(0, 6, {2, 3}, gen);
    CHECK(model.forward(src, tgt).shape() == Shape{2, 3, 6});

    // Greedy decoding with the cache equals argmax over full recomputation.
    const Tensor decoded = model.greedy_decode(src, /*sos=*/0, /*eos=*/5, /*max_new_tokens=*/4);
    Tensor reference = full({2, 1}, 0.0, kInt64);
    {
      NoGradGuard guard;
      const Tensor memory = model.encode(src);
      for (int i = 0; i < decoded.shape()[1] - 1; ++i) {
        const Tensor next = argmax(model.decode(reference, memory).select(1, -1), -1).unsqueeze(1);
        reference = concat({reference, next}, 1);
      }
    }
    // Rows that emitted eos are padded with eos afterwards; compare up to the first eos.
    for (std::int64_t b = 0; b < 2; ++b)
      for (std::int64_t t = 0; t < decoded.shape()[1]; ++t) {
        CHECK(decoded.at({b, t}) == reference.at({b, t}));
        if (decoded.at({b, t}) == 5.0) break;
      }
    CHECK_THROWS_WITH_AS(model.greedy_decode(src, 0, 5, 8),
                         "EncoderDecoder::greedy_decode: max_new_tokens 8 must be in [0, max_len - 1 = 7]", ValueError);

    model.to(kFloat64);
    const Tensor pad = padding({false, false, false, true, false, false, false, false}, 2, 4);
    check_gradients([&](const TensorList&) { return model.forward(src, tgt, pad); }, {}, {}, model.parameters());
  }
}

TEST_CASE("transformer: an encoder-decoder learns to reverse short sequences") {
  Generator gen(6);
  nn::EncoderDecoderOptions options;
  options.src_vocab = 5;  // tokens 0..2, 3 = <sos>, 4 = <eos>
  options.tgt_vocab = 5;
  options.max_len = 6;
  options.encoder_layers = 1;
  options.decoder_layers = 1;
  options.layer.d_model = 16;
  options.layer.num_heads = 2;
  options.layer.ff_hidden = 32;
  nn::EncoderDecoder model(options, gen);
  const Tensor src = randint(0, 3, {16, 3}, gen);
  const Tensor reversed = concat({src.select(1, 2).unsqueeze(1), src.select(1, 1).unsqueeze(1), src.select(1, 0).unsqueeze(1)}, 1);
  const Tensor tgt_in = concat({full({16, 1}, 3.0, kInt64), reversed}, 1);   // <sos> + reversed
  const Tensor tgt_out = concat({reversed, full({16, 1}, 4.0, kInt64)}, 1);  // reversed + <eos>
  auto loss_of = [&] {
    const Tensor logits = model.forward(src, tgt_in);  // (16, 4, 5)
    const Tensor logp = log_softmax(logits, -1);
    return -gather(logp, 2, tgt_out.unsqueeze(2)).mean();
  };
  const double first = loss_of().item();
  for (int step = 0; step < 150; ++step) {
    model.zero_grad();
    loss_of().backward();
    NoGradGuard guard;
    for (const Tensor& p : model.parameters()) p.add_(p.grad(), -0.1);
  }
  const double last = loss_of().item();
  CHECK(last < 0.5 * first);
}

TEST_CASE("transformer: scale_embeddings multiplies the token embeddings, and only them, by sqrt(d_model)") {
  nn::EncoderDecoderOptions options = tiny_seq2seq();
  Generator gen_a(21), gen_b(21);
  nn::EncoderDecoder plain(options, gen_a);
  options.scale_embeddings = true;
  nn::EncoderDecoder scaled(options, gen_b);
  Generator data(22);
  const Tensor src = randint(0, 6, {2, 5}, data);
  const Tensor tgt = randint(0, 6, {2, 4}, data);
  CHECK(max(abs(plain.forward(src, tgt) - scaled.forward(src, tgt))).item() > 1e-3);
  // The plain model given token tables sqrt(d) times larger computes what the scaled one does.
  NamedTensors state = scaled.state_dict();
  const double root_d = std::sqrt(static_cast<double>(options.layer.d_model));
  for (auto& [name, t] : state)
    if (name == "src_emb.weight" || name == "tgt_emb.weight") t = t * root_d;
  plain.load_state_dict(state);
  CHECK(max(abs(plain.forward(src, tgt) - scaled.forward(src, tgt))).item() < 1e-5);
}

TEST_CASE("transformer: rotary self-attention with a cache equals the full pass, and is gradchecked") {
  Generator gen(7);
  nn::MultiHeadAttentionOptions options;
  options.rotary_max_len = 8;
  nn::MultiHeadAttention attn(8, 2, gen, options);
  const Tensor x = randn({2, 5, 8}, gen);
  nn::MultiHeadAttentionForwardOptions causal;
  causal.is_causal = true;
  const Tensor full_pass = attn(x, Tensor(), causal).output;
  {
    NoGradGuard guard;
    nn::KVCache cache;
    causal.cache = &cache;
    const Tensor head = attn(x.narrow(1, 0, 3), Tensor(), causal).output;
    const Tensor tail = attn(x.narrow(1, 3, 2), Tensor(), causal).output;
    CHECK(max_diff(concat({head, tail}, 1), full_pass) < 1e-5);
    causal.cache = nullptr;
  }
  // Without rotation the same weights give a different output: the positions are used.
  nn::MultiHeadAttention plain(8, 2, *std::make_unique<Generator>(7));
  CHECK(max_diff(plain(x, Tensor(), causal).output, full_pass) > 1e-4);
  nn::MultiHeadAttentionOptions cross;
  cross.cross_attention = true;
  cross.rotary_max_len = 4;
  CHECK_THROWS_WITH_AS(nn::MultiHeadAttention(8, 2, gen, cross),
                       "MultiHeadAttention: rotary_max_len 4 is only for self-attention and must not be negative",
                       ValueError);
  attn.to(kFloat64);
  check_gradients([&](const TensorList& in) { return attn(in[0], Tensor(), causal).output; },
                  {randn({1, 3, 8}, gen, kFloat64)}, {}, attn.parameters());
}
