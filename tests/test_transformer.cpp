// Transformer blocks, stacks and the language model: gradchecks for both norm orders with
// masks, names, causality, cached decoding against full recomputation, generation.

#include <doctest/doctest.h>

#include "tapegrad/nn/nn.h"
#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::check_gradients;

namespace {

nn::TransformerLayerOptions tiny(bool norm_first) {
  return nn::TransformerLayerOptions(/*d_model=*/4, /*nhead=*/2)
      .dim_feedforward(6)
      .activation(nn::Activation::GELU)
      .dropout(0.0)
      .norm_first(norm_first);
}

// A one-layer encoder-decoder over 6 tokens and up to 8 positions, with tiny pre-norm layers.
nn::EncoderDecoderOptions tiny_seq2seq(nn::PositionEncoding positions = nn::PositionEncoding::Learned) {
  return nn::EncoderDecoderOptions()
      .src_vocab(6)
      .tgt_vocab(6)
      .max_len(8)
      .encoder_layers(1)
      .decoder_layers(1)
      .positions(positions)
      .layer(tiny(true));
}

Tensor padding(const std::vector<bool>& values, std::int64_t b, std::int64_t t) { return from_vector(values, {b, t}); }

double max_diff(const Tensor& a, const Tensor& b) { return (a.to(kFloat64) - b.to(kFloat64)).abs().max().item(); }

}  // namespace

TEST_CASE("transformer: encoder layer gradcheck, pre- and post-norm, with key padding") {
  for (bool norm_first : {true, false}) {
    manual_seed(0);
    Generator& gen = default_generator();  // the modules and the inputs draw from it
    nn::TransformerEncoderLayer layer(tiny(norm_first));
    layer->to(kFloat64);
    const Tensor x = randn({2, 3, 4}, gen, kFloat64);
    const Tensor pad = padding({false, false, true, false, false, false}, 2, 3);
    const auto padded = nn::AttentionForwardOptions().key_padding_mask(pad);
    check_gradients([&](const TensorList& in) { return layer(in[0], padded); }, {x}, {}, layer->parameters());
  }
}

TEST_CASE("transformer: nn::Transformer gradcheck, post-norm stacks with final norms and source padding") {
  manual_seed(0);
  Generator& gen = default_generator();
  nn::Transformer model(nn::TransformerOptions(tiny(false)).num_encoder_layers(1).num_decoder_layers(1));
  model->to(kFloat64);
  const Tensor src = randn({2, 3, 4}, gen, kFloat64), tgt = randn({2, 2, 4}, gen, kFloat64);
  const Tensor pad = padding({false, false, true, false, false, false}, 2, 3);
  const auto padded = nn::AttentionForwardOptions().key_padding_mask(pad);
  check_gradients(
      [&](const TensorList& in) { return model(in[0], in[1], padded, nn::AttentionForwardOptions(), padded); },
      {src, tgt}, {}, model->parameters());
}

TEST_CASE("transformer: decoder layer gradcheck, pre- and post-norm, with both padding masks") {
  for (bool norm_first : {true, false}) {
    manual_seed(1);
    Generator& gen = default_generator();  // the modules and the inputs draw from it
    nn::TransformerDecoderLayer layer(tiny(norm_first));
    layer->to(kFloat64);
    const Tensor x = randn({2, 3, 4}, gen, kFloat64);
    const Tensor memory = randn({2, 2, 4}, gen, kFloat64);
    const auto self =
        nn::AttentionForwardOptions().key_padding_mask(padding({false, false, true, false, false, false}, 2, 3));
    const auto cross = nn::AttentionForwardOptions().key_padding_mask(padding({false, true, false, false}, 2, 2));
    check_gradients([&](const TensorList& in) { return layer(in[0], in[1], self, cross).output; }, {x, memory}, {},
                    layer->parameters());
  }
}

TEST_CASE("transformer: stacks name their layers and keep decoder outputs causal") {
  manual_seed(2);
  Generator& gen = default_generator();  // the modules and the inputs draw from it
  nn::TransformerEncoder encoder(tiny(true), /*num_layers=*/2);
  nn::TransformerDecoder decoder(tiny(true), /*num_layers=*/2);
  const auto names = encoder->named_parameters();
  CHECK(names.front().first == "layers.0.self_attn.in_proj_weight");
  CHECK(names.back().first == "norm.bias");
  bool has_cross = false;
  for (const auto& entry : decoder->named_parameters())
    has_cross = has_cross || entry.first == "layers.1.cross_attn.in_proj_weight";
  CHECK(has_cross);
  nn::TransformerEncoder post(tiny(false), /*num_layers=*/1);
  CHECK(post->named_parameters().back().first == "layers.0.norm2.bias");  // no final norm after post-norm

  const Tensor memory = encoder(randn({1, 4, 4}, gen));
  Tensor x = randn({1, 5, 4}, gen);
  const Tensor full = decoder(x, memory).output;
  // Changing positions after t leaves outputs at positions <= t unchanged.
  Tensor changed = x.clone();
  {
    NoGradGuard guard;
    changed.narrow(1, 3, 2).copy_(randn({1, 2, 4}, gen));
  }
  const Tensor again = decoder(changed, memory).output;
  CHECK(max_diff(full.narrow(1, 0, 3), again.narrow(1, 0, 3)) < 1e-6);
  CHECK(max_diff(full.narrow(1, 3, 2), again.narrow(1, 3, 2)) > 1e-3);
}

TEST_CASE("transformer: the encoder stack takes the padding mask through its call, unusable options are refused") {
  manual_seed(8);
  Generator& gen = default_generator();  // the modules and the inputs draw from it
  nn::TransformerEncoder encoder(tiny(true), /*num_layers=*/2);
  Tensor x = randn({2, 4, 4}, gen);
  const Tensor pad = padding({false, false, true, true, false, false, false, false}, 2, 4);
  const auto padded = nn::AttentionForwardOptions().key_padding_mask(pad);
  const Tensor y = encoder(x, padded);
  // The padded positions of batch 0 can hold anything: the other positions' outputs do not change.
  Tensor changed = x.clone();
  {
    NoGradGuard guard;
    changed.select(0, 0).narrow(0, 2, 2).copy_(full({2, 4}, 50.0));
  }
  const Tensor again = encoder(changed, padded);
  CHECK(max_diff(y.select(0, 0).narrow(0, 0, 2), again.select(0, 0).narrow(0, 0, 2)) < 1e-6);
  CHECK(max_diff(y.select(0, 1), again.select(0, 1)) < 1e-6);
  // Without the mask they do.
  CHECK(max_diff(encoder(x).select(0, 0).narrow(0, 0, 2), encoder(changed).select(0, 0).narrow(0, 0, 2)) > 1e-3);

  nn::KVCache cache;
  CHECK_THROWS_WITH_AS(
      encoder(x, nn::AttentionForwardOptions().cache(&cache)),
      "TransformerEncoder: options.cache must be null; a stack keeps one cache per layer (DecoderCache)", ValueError);
  nn::TransformerDecoder decoder(tiny(true), /*num_layers=*/1);
  CHECK_THROWS_WITH_AS(decoder(x, y, nn::AttentionForwardOptions(), nn::AttentionForwardOptions().cache(&cache)),
                       "TransformerDecoder: cross.cache must be null; a stack keeps one cache per layer (DecoderCache)",
                       ValueError);
  nn::TransformerEncoderLayer layer(tiny(true));
  CHECK_THROWS_WITH_AS(
      layer(x, nn::AttentionForwardOptions().need_weights(true)),
      "TransformerEncoderLayer: need_weights is not supported (the layer returns one tensor); call its "
      "self-attention for the weights",
      ValueError);
  // A decoder layer returns the cross-attention weights when asked, (B, H, T, S).
  nn::TransformerDecoderLayer decoder_layer(tiny(true));
  const nn::DecoderLayerResult r =
      decoder_layer(x, y, nn::AttentionForwardOptions(), nn::AttentionForwardOptions().need_weights(true));
  CHECK(r.cross_weights.shape() == Shape{2, 2, 4, 4});
  CHECK_FALSE(decoder_layer(x, y).cross_weights.defined());
}

TEST_CASE("transformer: cached incremental decoding equals full recomputation") {
  manual_seed(3);
  Generator& gen = default_generator();  // the modules and the inputs draw from it
  nn::TransformerDecoder decoder(tiny(true), /*num_layers=*/2);
  const Tensor memory = randn({2, 3, 4}, gen);
  const Tensor x = randn({2, 5, 4}, gen);
  const Tensor full = decoder(x, memory).output;
  NoGradGuard guard;
  nn::DecoderCache cache;
  const nn::AttentionForwardOptions none;
  for (std::int64_t t = 0; t < 5; ++t) {
    const Tensor step = decoder(x.narrow(1, t, 1), memory, none, none, &cache).output;
    CHECK(max_diff(step, full.narrow(1, t, 1)) < 1e-5);
  }
  CHECK(cache.length() == 5);
  const std::vector<Tensor> weights =
      decoder(x, memory, none, nn::AttentionForwardOptions().need_weights(true)).cross_weights;
  REQUIRE(weights.size() == 2);
  CHECK(weights[0].shape() == Shape{2, 2, 5, 3});
}

TEST_CASE("transformer: language model cache, gradcheck and generation") {
  manual_seed(4);
  Generator& gen = default_generator();  // the modules and the inputs draw from it
  nn::LanguageModel lm{nn::LanguageModelOptions().vocab_size(7).max_len(12).num_layers(2).layer(tiny(true))};
  const Tensor tokens = randint(0, 7, {2, 6}, gen);
  const Tensor logits = lm(tokens);
  CHECK(logits.shape() == Shape{2, 6, 7});
  {
    NoGradGuard guard;
    nn::LanguageModelCache caches;
    const Tensor first = lm->forward(tokens.narrow(1, 0, 4), &caches);
    const Tensor rest = lm->forward(tokens.narrow(1, 4, 2), &caches);
    CHECK(max_diff(first, logits.narrow(1, 0, 4)) < 1e-5);
    CHECK(max_diff(rest, logits.narrow(1, 4, 2)) < 1e-5);
  }
  // Greedy generation equals the argmax of full recomputation, token by token.
  const Tensor prompt = tokens.narrow(1, 0, 2);
  nn::GenerationOptions greedy;
  greedy.max_new_tokens = 5;
  greedy.temperature = 0.0;
  const Tensor generated = lm->generate(prompt, greedy, gen);
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
  CHECK(lm->generate(prompt, top1, gen).to_vector<std::int64_t>() == reference.to_vector<std::int64_t>());
  nn::GenerationOptions sample;
  sample.max_new_tokens = 5;
  sample.top_k = 3;
  Generator a(9), b(9);
  CHECK(lm->generate(prompt, sample, a).to_vector<std::int64_t>() ==
        lm->generate(prompt, sample, b).to_vector<std::int64_t>());
  CHECK(lm->is_training());  // generate restores the mode

  nn::GenerationOptions too_long;
  too_long.max_new_tokens = 11;
  CHECK_THROWS_WITH_AS(lm->generate(prompt, too_long, gen),
                       "LanguageModel::generate: prompt length 2 plus 11 new tokens exceeds max_len 12 (sliding_window "
                       "continues past it)",
                       ValueError);
  CHECK_THROWS_WITH_AS(lm(zeros({2, 3, 4}, kInt64)), "LanguageModel: expected tokens (B, T), got shape (2,3,4)",
                       ShapeError);

  lm->to(kFloat64);
  const Tensor small = randint(0, 7, {1, 3}, gen);
  check_gradients([&](const TensorList&) { return lm(small); }, {}, {}, lm->parameters());
}

TEST_CASE("transformer: encoder-decoder gradcheck, greedy decoding against full recomputation, learning") {
  for (auto positions :
       {nn::PositionEncoding::Learned, nn::PositionEncoding::Sinusoidal, nn::PositionEncoding::Rotary}) {
    manual_seed(5);
    Generator& gen = default_generator();  // the modules and the inputs draw from it
    const nn::EncoderDecoderOptions options = tiny_seq2seq(positions);
    nn::EncoderDecoder model(options);
    const Tensor src = randint(0, 6, {2, 4}, gen);
    const Tensor tgt = randint(0, 6, {2, 3}, gen);
    CHECK(model->forward(src, tgt).shape() == Shape{2, 3, 6});

    // Greedy decoding with the cache equals argmax over full recomputation.
    const Tensor decoded = model->greedy_decode(src, /*sos=*/0, /*eos=*/5, /*max_new_tokens=*/4);
    Tensor reference = full({2, 1}, 0.0, kInt64);
    {
      NoGradGuard guard;
      const Tensor memory = model->encode(src);
      for (int i = 0; i < decoded.shape()[1] - 1; ++i) {
        const Tensor next = argmax(model->decode(reference, memory).output.select(1, -1), -1).unsqueeze(1);
        reference = concat({reference, next}, 1);
      }
    }
    // Rows that emitted eos are padded with eos afterwards; compare up to the first eos.
    for (std::int64_t b = 0; b < 2; ++b)
      for (std::int64_t t = 0; t < decoded.shape()[1]; ++t) {
        CHECK(decoded.at({b, t}) == reference.at({b, t}));
        if (decoded.at({b, t}) == 5.0) break;
      }
    CHECK_THROWS_WITH_AS(model->greedy_decode(src, 0, 5, 8),
                         "EncoderDecoder::greedy_decode: max_new_tokens 8 must be in [0, max_len - 1 = 7]", ValueError);
    CHECK_THROWS_WITH_AS(model->greedy_decode(src, 0, 6, 4),
                         "EncoderDecoder::greedy_decode: sos 0 and eos 6 must be target token ids in [0, 6)",
                         ValueError);
    // A failed call leaves the model in the mode it found it in.
    model->train();
    CHECK_THROWS_AS(model->greedy_decode(full({2, 4}, 99.0, kInt64), 0, 5, 4), IndexError);  // no such token
    CHECK(model->is_training());

    model->to(kFloat64);
    const Tensor pad = padding({false, false, false, true, false, false, false, false}, 2, 4);
    check_gradients([&](const TensorList&) { return model->forward(src, tgt, pad); }, {}, {}, model->parameters());
  }
}

TEST_CASE("transformer: an encoder-decoder learns to reverse short sequences") {
  manual_seed(6);
  Generator& gen = default_generator();  // the modules and the inputs draw from it
  nn::EncoderDecoderOptions options;
  options.src_vocab(5);  // tokens 0..2, 3 = <sos>, 4 = <eos>
  options.tgt_vocab(5);
  options.max_len(6);
  options.encoder_layers(1);
  options.decoder_layers(1);
  // The layer configuration this test was tuned with: pre-norm, ReLU, no dropout.
  options.layer(nn::TransformerLayerOptions(16, 2).dim_feedforward(32).dropout(0.0).norm_first(true));
  nn::EncoderDecoder model(options);
  const Tensor src = randint(0, 3, {16, 3}, gen);
  const Tensor reversed =
      concat({src.select(1, 2).unsqueeze(1), src.select(1, 1).unsqueeze(1), src.select(1, 0).unsqueeze(1)}, 1);
  const Tensor tgt_in = concat({full({16, 1}, 3.0, kInt64), reversed}, 1);   // <sos> + reversed
  const Tensor tgt_out = concat({reversed, full({16, 1}, 4.0, kInt64)}, 1);  // reversed + <eos>
  auto loss_of = [&] {
    const Tensor logits = model->forward(src, tgt_in);  // (16, 4, 5)
    const Tensor logp = log_softmax(logits, -1);
    return -gather(logp, 2, tgt_out.unsqueeze(2)).mean();
  };
  const double first = loss_of().item();
  for (int step = 0; step < 150; ++step) {
    model->zero_grad();
    loss_of().backward();
    NoGradGuard guard;
    for (const Tensor& p : model->parameters()) p.add_(p.grad(), -0.1);
  }
  const double last = loss_of().item();
  CHECK(last < 0.5 * first);
}

TEST_CASE("transformer: scale_embeddings multiplies the token embeddings, and only them, by sqrt(d_model)") {
  nn::EncoderDecoderOptions options = tiny_seq2seq();
  Generator gen_a(21), gen_b(21);
  nn::EncoderDecoder plain(nn::EncoderDecoderOptions(options).generator(&gen_a));
  options.scale_embeddings(true);
  nn::EncoderDecoder scaled(nn::EncoderDecoderOptions(options).generator(&gen_b));
  Generator data(22);
  const Tensor src = randint(0, 6, {2, 5}, data);
  const Tensor tgt = randint(0, 6, {2, 4}, data);
  CHECK(max(abs(plain->forward(src, tgt) - scaled->forward(src, tgt))).item() > 1e-3);
  // The plain model given token tables sqrt(d) times larger computes what the scaled one does.
  NamedTensors state = scaled->state_dict();
  const double root_d = std::sqrt(static_cast<double>(options.layer().d_model()));
  for (auto& [name, t] : state)
    if (name == "src_emb.weight" || name == "tgt_emb.weight") t = t * root_d;
  plain->load_state_dict(state);
  CHECK(max(abs(plain->forward(src, tgt) - scaled->forward(src, tgt))).item() < 1e-5);
}

TEST_CASE("transformer: rotary self-attention with a cache equals the full pass, and is gradchecked") {
  manual_seed(7);
  Generator& gen = default_generator();  // the modules and the inputs draw from it
  nn::MultiHeadAttention attn{nn::MultiHeadAttentionOptions(8, 2).rotary_max_len(8)};
  const Tensor x = randn({2, 5, 8}, gen);
  nn::AttentionForwardOptions causal;
  causal.is_causal(true);
  const Tensor full_pass = attn(x, Tensor(), causal).output;
  {
    NoGradGuard guard;
    nn::KVCache cache;
    causal.cache(&cache);
    const Tensor head = attn(x.narrow(1, 0, 3), Tensor(), causal).output;
    const Tensor tail = attn(x.narrow(1, 3, 2), Tensor(), causal).output;
    CHECK(max_diff(concat({head, tail}, 1), full_pass) < 1e-5);
    causal.cache(nullptr);
  }
  // Without rotation the same weights give a different output: the positions are used.
  Generator same_seed(7);
  nn::MultiHeadAttention plain{nn::MultiHeadAttentionOptions(8, 2).generator(&same_seed)};
  CHECK(max_diff(plain(x, Tensor(), causal).output, full_pass) > 1e-4);
  CHECK_THROWS_WITH_AS(
      nn::MultiHeadAttention(nn::MultiHeadAttentionOptions(8, 2).cross_attention(true).rotary_max_len(4)),
      "MultiHeadAttention: rotary_max_len 4 is only for self-attention and must not be negative", ValueError);
  attn->to(kFloat64);
  check_gradients([&](const TensorList& in) { return attn(in[0], Tensor(), causal).output; },
                  {randn({1, 3, 8}, gen, kFloat64)}, {}, attn->parameters());
}

TEST_CASE("transformer: an encoder-decoder with tied target embeddings has one table and both uses' gradient") {
  manual_seed(5);
  nn::EncoderDecoder tied(tiny_seq2seq().tie_embeddings(true));
  nn::EncoderDecoder untied(tiny_seq2seq());
  const Tensor table = testing::parameter(*tied, "tgt_emb.weight");
  REQUIRE(table.defined());
  CHECK_FALSE(testing::parameter(*tied, "head.weight").defined());
  testing::copy_tied_into_untied(*tied, *untied, "tgt_emb.weight");
  const Tensor src = from_vector(std::vector<std::int64_t>{1, 2, 3, 4, 5, 0}, {2, 3});
  const Tensor tgt = from_vector(std::vector<std::int64_t>{0, 3, 1, 0, 2, 2, 5, 4}, {2, 4});
  const Tensor tied_logits = tied(src, tgt), untied_logits = untied(src, tgt);
  CHECK(max_diff(tied_logits, untied_logits) < 1e-6);
  Generator gen(6);
  const Tensor w = randn(tied_logits.shape(), gen);
  (tied_logits * w).sum().backward();
  (untied_logits * w).sum().backward();
  CHECK(max_diff(table.grad(), testing::parameter(*untied, "tgt_emb.weight").grad() +
                                   testing::parameter(*untied, "head.weight").grad()) < 1e-5);
  tied->to(kFloat64);
  check_gradients([&](const TensorList&) { return tied(src, tgt); }, {}, {}, tied->parameters());
}
