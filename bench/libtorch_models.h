#pragma once
// The transformer parts of the libtorch counterparts (libtorch_bench's W2 and W3, libtorch_lm), written
// with PyTorch's C++ API to mirror tapegrad's nn modules shape for shape: multi-head attention with a
// fused qkv projection, the feed-forward sublayer, the pre-norm block and a decoder-only language model.
// Initial values are drawn from the same distributions as tapegrad's (Linear and the projections
// U(+-1/sqrt(fan_in)), embeddings N(0, 1), LayerNorm 1 and 0), by libtorch's own generator.
//
//   bench::LanguageModel lm{bench::LanguageModelOptions{/*vocab=*/256, /*max_len=*/128, /*d_model=*/256,
//                                                      /*heads=*/8, /*layers=*/4, /*ff_hidden=*/1024}};
//   torch::Tensor logits = lm(tokens);   // tokens (B, T) int64 -> (B, T, 256)
//
// Dropout p (0 by default) sits where tapegrad's TransformerEncoderLayer puts it: on the attention
// weights, after the feed-forward activation, and on both residual branches.

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace bench {

// x unchanged in eval mode or for p = 0 (no mask drawn), else inverted dropout.
inline torch::Tensor maybe_dropout(const torch::Tensor& x, double p, bool training) {
  return p > 0.0 && training ? torch::dropout(x, p, true) : x;
}

// Multi-head attention computed as tapegrad's MultiHeadAttention does (gemms over the row blocks of its
// in_proj_weight): self-attention one fused Linear(d, 3d); cross-attention Linear(d, d) for the queries
// and a fused Linear(d, 2d) for keys and values. Parameter names here are the benchmark's own.
struct AttentionImpl : torch::nn::Module {
  std::int64_t d, heads;
  bool cross;
  double dropout;
  torch::nn::Linear qkv{nullptr}, q{nullptr}, kv{nullptr}, out{nullptr};
  AttentionImpl(std::int64_t d_model, std::int64_t num_heads, bool cross_attention, double dropout_p = 0.0)
      : d(d_model), heads(num_heads), cross(cross_attention), dropout(dropout_p) {
    if (cross) {
      q = register_module("q_proj", torch::nn::Linear(d, d));
      kv = register_module("kv_proj", torch::nn::Linear(d, 2 * d));
    } else {
      qkv = register_module("qkv_proj", torch::nn::Linear(d, 3 * d));
    }
    out = register_module("out_proj", torch::nn::Linear(d, d));
  }
  // (B, T, n d) -> n tensors (B, H, T, Dh)
  std::vector<torch::Tensor> split(const torch::Tensor& x, std::int64_t n) const {
    const auto b = x.size(0), t = x.size(1);
    auto heads_view = x.view({b, t, n, heads, d / heads}).permute({2, 0, 3, 1, 4});
    return heads_view.unbind(0);
  }
  // x: (B, Tq, d); memory: (B, Tk, d) for cross-attention, undefined for self-attention.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& memory, bool causal) {
    torch::Tensor qh, kh, vh;
    if (cross) {
      qh = split(q(x), 1)[0];
      auto kvh = split(kv(memory), 2);
      kh = kvh[0];
      vh = kvh[1];
    } else {
      auto all = split(qkv(x), 3);
      qh = all[0];
      kh = all[1];
      vh = all[2];
    }
    const auto tq = qh.size(2), tk = kh.size(2);
    auto scores = torch::matmul(qh * (1.0 / std::sqrt(double(d / heads))), kh.transpose(-2, -1));  // (B, H, Tq, Tk)
    if (causal) {
      const auto mask = torch::ones({tq, tk}, torch::kBool).triu(1 + (tk - tq));  // key j > query i: hidden
      scores = scores.masked_fill(mask, -std::numeric_limits<float>::infinity());
    }
    const auto weights = maybe_dropout(torch::softmax(scores, -1), dropout, is_training());  // (B, H, Tq, Tk)
    const auto mixed = torch::matmul(weights, vh);                                           // (B, H, Tq, Dh)
    return out(mixed.transpose(1, 2).reshape({x.size(0), tq, d}));
  }
};
TORCH_MODULE(Attention);

// fc2(dropout(act(fc1(x)))), act GELU (exact, erf) or ReLU.
struct FeedForwardImpl : torch::nn::Module {
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  bool gelu;
  double dropout;
  FeedForwardImpl(std::int64_t d, std::int64_t hidden, bool use_gelu, double dropout_p = 0.0)
      : gelu(use_gelu), dropout(dropout_p) {
    fc1 = register_module("fc1", torch::nn::Linear(d, hidden));
    fc2 = register_module("fc2", torch::nn::Linear(hidden, d));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    const auto h = fc1(x);
    return fc2(maybe_dropout(gelu ? torch::gelu(h) : torch::relu(h), dropout, is_training()));
  }
};
TORCH_MODULE(FeedForward);

// Pre-norm encoder layer (also the causal block of the language models):
//   x = x + dropout(attn(norm1(x)));  x = x + dropout(ff(norm2(x)))   (LayerNorm eps 1e-5)
struct EncoderLayerImpl : torch::nn::Module {
  Attention attn{nullptr};
  FeedForward ff{nullptr};
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  double dropout;
  EncoderLayerImpl(std::int64_t d, std::int64_t heads, std::int64_t hidden, bool gelu, double dropout_p = 0.0)
      : dropout(dropout_p) {
    attn = register_module("self_attn", Attention(d, heads, false, dropout_p));
    ff = register_module("ff", FeedForward(d, hidden, gelu, dropout_p));
    norm1 = register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
    norm2 = register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
  }
  torch::Tensor forward(torch::Tensor x, bool causal) {
    x = x + maybe_dropout(attn(norm1(x), torch::Tensor(), causal), dropout, is_training());
    return x + maybe_dropout(ff(norm2(x)), dropout, is_training());
  }
};
TORCH_MODULE(EncoderLayer);

// The sizes of a decoder-only language model (tapegrad's nn::LanguageModel with learned positions,
// pre-norm blocks and GELU).
struct LanguageModelOptions {
  std::int64_t vocab = 256;
  std::int64_t max_len = 128;  // positions learned
  std::int64_t d_model = 256;
  std::int64_t heads = 8;
  std::int64_t layers = 4;
  std::int64_t ff_hidden = 1024;
  double dropout = 0.0;
};

// tokens -> Embedding(vocab, d) + learned positions (max_len, d) -> `layers` causal pre-norm blocks ->
// LayerNorm -> Linear(d, vocab).
struct LanguageModelImpl : torch::nn::Module {
  torch::nn::Embedding tok{nullptr}, pos{nullptr};
  std::vector<EncoderLayer> blocks;
  torch::nn::LayerNorm norm{nullptr};
  torch::nn::Linear head{nullptr};
  explicit LanguageModelImpl(const LanguageModelOptions& o) {
    tok = register_module("tok_emb", torch::nn::Embedding(o.vocab, o.d_model));
    pos = register_module("pos_emb", torch::nn::Embedding(o.max_len, o.d_model));
    for (std::int64_t i = 0; i < o.layers; ++i)
      blocks.push_back(
          register_module("block" + std::to_string(i), EncoderLayer(o.d_model, o.heads, o.ff_hidden, true, o.dropout)));
    norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.d_model})));
    head = register_module("head", torch::nn::Linear(o.d_model, o.vocab));
  }
  // tokens: (B, T) int64 with T <= max_len -> logits (B, T, vocab)
  torch::Tensor forward(const torch::Tensor& tokens) {
    auto h = tok(tokens) + pos(torch::arange(tokens.size(1), torch::kLong));  // h: (B, T, d)
    for (auto& block : blocks) h = block(h, true);
    return head(norm(h));
  }
};
TORCH_MODULE(LanguageModel);

}  // namespace bench
