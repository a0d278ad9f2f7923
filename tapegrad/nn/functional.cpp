// The functional forms of the nn layers (functional.h): linear, the norms, the activations, pad, dropout,
// attention and the multi-head attention forward that MultiHeadAttention runs.
#include "tapegrad/nn/functional.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tapegrad/autograd/format.h"
#include "tapegrad/nn/conv.h"

namespace tapegrad::nn::functional {

namespace {

constexpr const char* kMha = "multi_head_attention_forward";

// (B, T, H * Dh) -> (B, H, T, Dh): views; gemm reads each head with row stride H * Dh.
Tensor split_heads(const Tensor& x, std::int64_t num_heads) {
  const std::int64_t b = x.size(0), t = x.size(1), e = x.size(2);
  return x.view({b, t, num_heads, e / num_heads}).transpose(1, 2);
}

// Entries [start, start + length) of in_proj_bias, or undefined.
Tensor bias_rows(const Tensor& in_proj_bias, std::int64_t start, std::int64_t length) {
  return in_proj_bias.defined() ? in_proj_bias.narrow(0, start, length) : Tensor();
}

void check_weight(const Tensor& w, const Shape& expected, const char* name) {
  if (!w.defined()) throw ValueError(message(kMha, ": ", name, " is required"));
  if (w.shape() != expected)
    throw ShapeError(message(kMha, ": ", name, " must have shape ", expected.str(), ", got ", w.shape().str()));
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) { return tapegrad::linear(x, weight, bias); }

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  return tapegrad::layer_norm(x, normalized_shape, weight, bias, eps);
}

Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, std::optional<double> eps) {
  const int n = normalized_shape.size();
  bool fits = n > 0 && x.dim() >= n;
  for (int i = 0; fits && i < n; ++i) fits = x.shape()[x.dim() - n + i] == normalized_shape[i];
  if (!fits)
    throw ShapeError("rms_norm: expected input (..., " + normalized_shape.str() + "), got shape " + x.shape().str());
  if (weight.defined() && weight.shape() != normalized_shape)
    throw ShapeError("rms_norm: weight must have shape " + normalized_shape.str() + ", got " + weight.shape().str());
  const double e = eps ? *eps
                       : (x.dtype() == kFloat64 ? std::numeric_limits<double>::epsilon()
                                                : static_cast<double>(std::numeric_limits<float>::epsilon()));
  if (!(e >= 0.0)) throw ValueError(message("rms_norm: eps must be >= 0, got ", e));
  Dims axes;
  for (int i = -n; i < 0; ++i) axes.push_back(i);
  // x: (..., *normalized_shape); rms: (..., 1, ..., 1). The gradient comes from the tape.
  const Tensor rms = sqrt(mean(x * x, axes, /*keepdim=*/true) + e);
  const Tensor y = x / rms;
  return weight.defined() ? y * weight : y;
}

namespace {

void check_floating(const Tensor& x, const char* op) {
  if (!x.is_floating_point())
    throw TypeError(message(op, ": x must be a floating-point tensor, got ", dtype_name(x.dtype())));
}

// alpha (exp(x / alpha) - 1) where x <= 0 and x elsewhere (celu; elu is input_scale 1). The negative
// branch sees min(x, 0), so that exp cannot overflow where it is not taken (inf * 0 is NaN in the
// gradient).
Tensor exponential_unit(const Tensor& x, double alpha, double input_scale) {
  const Tensor negative = expm1(clamp(x, std::nullopt, 0.0) * input_scale) * alpha;
  return where(gt(x, 0.0), x, negative);
}

}  // namespace

Tensor leaky_relu(const Tensor& x, double negative_slope) {
  check_floating(x, "leaky_relu");
  return where(gt(x, 0.0), x, x * negative_slope);
}

Tensor elu(const Tensor& x, double alpha) {
  check_floating(x, "elu");
  return exponential_unit(x, alpha, 1.0);
}

Tensor selu(const Tensor& x) {
  constexpr double kAlpha = 1.6732632423543772848;
  constexpr double kScale = 1.0507009873554804934;
  check_floating(x, "selu");
  return exponential_unit(x, kAlpha, 1.0) * kScale;
}

Tensor celu(const Tensor& x, double alpha) {
  check_floating(x, "celu");
  if (alpha == 0.0) throw ValueError("celu: alpha must not be 0");
  return exponential_unit(x, alpha, 1.0 / alpha);
}

Tensor softplus(const Tensor& x, double beta, double threshold) {
  check_floating(x, "softplus");
  if (beta == 0.0) throw ValueError("softplus: beta must not be 0");
  const Tensor scaled = x * beta;
  const Tensor smooth = beta == 1.0 ? tapegrad::softplus(scaled) : tapegrad::softplus(scaled) / beta;
  return where(gt(scaled, threshold), x, smooth);
}

Tensor mish(const Tensor& x) {
  check_floating(x, "mish");
  return x * tanh(tapegrad::softplus(x));
}

Tensor hardtanh(const Tensor& x, double min_val, double max_val) {
  check_floating(x, "hardtanh");
  if (max_val < min_val) throw ValueError(message("hardtanh: max_val ", max_val, " is smaller than min_val ", min_val));
  // The bounds as constants where x reaches them, so the gradient is 0 there, as torch's.
  return where(le(x, min_val), full_like(x, min_val), where(ge(x, max_val), full_like(x, max_val), x));
}

Tensor relu6(const Tensor& x) { return hardtanh(x, 0.0, 6.0); }

Tensor hardsigmoid(const Tensor& x) {
  check_floating(x, "hardsigmoid");
  return where(le(x, -3.0), zeros_like(x), where(ge(x, 3.0), ones_like(x), x / 6.0 + 0.5));
}

Tensor hardswish(const Tensor& x) {
  check_floating(x, "hardswish");
  return where(lt(x, -3.0), zeros_like(x), where(le(x, 3.0), x * (x + 3.0) / 6.0, x));
}

Tensor logsigmoid(const Tensor& x) {
  check_floating(x, "logsigmoid");
  return -tapegrad::softplus(-x);
}

Tensor softsign(const Tensor& x) {
  check_floating(x, "softsign");
  return x / (abs(x) + 1.0);
}

Tensor softshrink(const Tensor& x, double lambd) {
  check_floating(x, "softshrink");
  if (!(lambd >= 0.0)) throw ValueError(message("softshrink: lambd must be at least 0, got ", lambd));
  return where(gt(x, lambd), x - lambd, where(lt(x, -lambd), x + lambd, zeros_like(x)));
}

Tensor hardshrink(const Tensor& x, double lambd) {
  check_floating(x, "hardshrink");
  return where(gt(abs(x), lambd), x, zeros_like(x));
}

Tensor tanhshrink(const Tensor& x) {
  check_floating(x, "tanhshrink");
  return x - tanh(x);
}

Tensor threshold(const Tensor& x, double threshold, double value) {
  return where(gt(x, threshold), x, full_like(x, value));
}

Tensor softmin(const Tensor& x, std::int64_t axis) { return softmax(-x, axis); }

Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p, double eps, bool keepdim) {
  return norm(x1 - x2 + eps, p, {-1}, keepdim);
}

Tensor glu(const Tensor& x, std::int64_t axis_arg) {
  check_floating(x, "glu");
  if (x.dim() == 0) throw ShapeError("glu: expected a tensor with at least one axis, got a scalar");
  const int axis = normalize_axis(axis_arg, x.dim(), "glu");
  const std::int64_t n = x.shape()[axis];
  if (n % 2 != 0)
    throw ValueError(
        message("glu: axis ", axis_arg, " of shape ", x.shape().str(), " has odd size ", n, ", which does not halve"));
  return x.narrow(axis, 0, n / 2) * sigmoid(x.narrow(axis, n / 2, n / 2));
}

Tensor prelu(const Tensor& x, const Tensor& weight) {
  check_floating(x, "prelu");
  const std::int64_t channels = x.dim() >= 2 ? x.shape()[1] : 1;
  if (weight.dim() > 1 || (weight.numel() != 1 && weight.numel() != channels))
    throw ShapeError(message("prelu: expected a weight of one entry or one per channel (", channels,
                             ") for an input of shape ", x.shape().str(), ", got ", weight.shape().str()));
  Tensor w = weight.reshape({weight.numel()});
  if (weight.numel() > 1) {
    Shape shape = Shape::filled(x.dim(), 1);
    shape[1] = channels;
    w = w.reshape(shape);
  }
  return where(gt(x, 0.0), x, x * w);
}

namespace {

// The (before, after) pairs in pads, checked: an even count, at most one pair per axis of x.
std::size_t pad_pairs(const Tensor& x, const std::vector<std::int64_t>& pads, const char* op) {
  if (pads.size() % 2 != 0)
    throw ValueError(message(op, ": pads come in (before, after) pairs, got ", pads.size(), " values"));
  const std::size_t pairs = pads.size() / 2;
  if (pairs > static_cast<std::size_t>(x.dim()))
    throw ValueError(
        message(op, ": ", pairs, " pairs of pads for a tensor of rank ", x.dim(), " (shape ", x.shape().str(), ")"));
  return pairs;
}

}  // namespace

Tensor pad(const Tensor& x, const std::vector<std::int64_t>& pads, double value) {
  const char* op = "pad";
  const std::size_t pairs = pad_pairs(x, pads, op);
  Tensor out = x;
  bool copied = false;
  for (std::size_t p = 0; p < pairs; ++p) {
    const int axis = x.dim() - 1 - static_cast<int>(p);
    const std::int64_t before = pads[2 * p], after = pads[2 * p + 1], size = out.size(axis);
    // Crops first: what is left of the axis must be an ordinary range of it.
    const std::int64_t start = std::max<std::int64_t>(0, -before), stop = size - std::max<std::int64_t>(0, -after);
    if (start > stop)
      throw ValueError(message(op, ": pads (", before, ", ", after, ") crop more than the ", size, " elements of axis ",
                               axis, " of shape ", x.shape().str()));
    if (start > 0 || stop < size) out = out.narrow(axis, start, stop - start);
    std::vector<Tensor> parts;
    auto filler = [&](std::int64_t count) {
      Shape shape = out.shape();
      shape[axis] = count;
      return full(shape, value, out.dtype());
    };
    if (before > 0) parts.push_back(filler(before));
    parts.push_back(out);
    if (after > 0) parts.push_back(filler(after));
    if (parts.size() > 1) {
      out = concat(parts, axis);
      copied = true;
    }
  }
  return copied ? out : out.clone();  // a copy in every case, as torch's, never x or a view of it
}

Tensor pad(const Tensor& x, const std::vector<std::int64_t>& pads, PadMode mode, double value) {
  if (mode == PadMode::Constant) return pad(x, pads, value);
  const char* op = mode == PadMode::Reflect     ? "pad (reflect)"
                   : mode == PadMode::Replicate ? "pad (replicate)"
                                                : "pad (circular)";
  const std::size_t pairs = pad_pairs(x, pads, op);
  Tensor out = x;
  bool copied = false;
  for (std::size_t p = 0; p < pairs; ++p) {
    const int axis = x.dim() - 1 - static_cast<int>(p);
    const std::int64_t before = pads[2 * p], after = pads[2 * p + 1], n = x.size(axis);
    const std::int64_t larger = std::max(before, after);
    const bool fits = mode == PadMode::Reflect    ? larger < n
                      : mode == PadMode::Circular ? larger <= n
                                                  : n > 0 || larger == 0;
    if (before < 0 || after < 0 || !fits)
      throw ValueError(message(op, ": pads (", before, ", ", after, ") do not fit axis ", axis, " of shape ",
                               x.shape().str(), ": each must be at least 0",
                               mode == PadMode::Reflect    ? " and smaller than the axis's size"
                               : mode == PadMode::Circular ? " and at most the axis's size"
                                                           : ", and the axis must not be empty"));
    if (larger == 0) continue;
    // The entry each position of the padded axis copies: position i stands at i - before of x's axis.
    std::vector<std::int64_t> index;
    for (std::int64_t i = -before; i < n + after; ++i) {
      std::int64_t j = i;
      if (mode == PadMode::Reflect) j = j < 0 ? -j : j >= n ? 2 * (n - 1) - j : j;
      else if (mode == PadMode::Replicate) j = std::min(std::max<std::int64_t>(j, 0), n - 1);
      else j = ((j % n) + n) % n;
      index.push_back(j);
    }
    out = index_select(out, axis, from_vector(index, {static_cast<std::int64_t>(index.size())}));
    copied = true;
  }
  return copied ? out : out.clone();  // a copy in every case, as the constant mode's
}

Tensor dropout(const Tensor& x, double p, bool training, Generator& gen) {
  return tapegrad::dropout(x, p, training, gen);
}

namespace {

// x times a mask of one draw per (sample, channel): dropout's over ones of shape (N, C, 1, ...).
Tensor channel_dropout(const Tensor& x, double p, bool training, Generator& gen) {
  Shape channels = Shape::filled(x.dim(), 1);
  channels[0] = x.shape()[0];
  channels[1] = x.shape()[1];
  const Tensor mask = tapegrad::dropout(ones(channels, x.dtype()), p, training, gen);
  return !training || p == 0.0 ? x : x * mask;
}

}  // namespace

Tensor dropout1d(const Tensor& x, double p, bool training, Generator& gen) {
  if (x.dim() == 2) return dropout1d(x.unsqueeze(0), p, training, gen).squeeze(0);
  if (x.dim() != 3)
    throw ShapeError(message("dropout1d: expected an input of shape (N, C, L) or (C, L), got ", x.shape().str()));
  return channel_dropout(x, p, training, gen);
}

Tensor dropout3d(const Tensor& x, double p, bool training, Generator& gen) {
  if (x.dim() == 4) return dropout3d(x.unsqueeze(0), p, training, gen).squeeze(0);
  if (x.dim() != 5)
    throw ShapeError(
        message("dropout3d: expected an input of shape (N, C, D, H, W) or (C, D, H, W), got ", x.shape().str()));
  return channel_dropout(x, p, training, gen);
}

Tensor dropout2d(const Tensor& x, double p, bool training, Generator& gen) {
  if (x.dim() != 4)
    throw ShapeError(message("dropout2d: expected an input of shape (N, C, H, W), got ", x.shape().str(),
                             " (a 3-D input: unsqueeze it to (1, C, H, W), or use dropout1d for (N, C, L))"));
  return channel_dropout(x, p, training, gen);
}

namespace {

// Alpha dropout with one mask entry per element of mask_shape (x's shape, or (N, C, 1, ...)).
Tensor alpha_dropout_over(const Tensor& x, double p, bool training, Generator& gen, const Shape& mask_shape,
                          const char* op) {
  if (!(p >= 0.0 && p <= 1.0)) throw ValueError(message(op, ": p must be in [0, 1], got ", p));
  if (!training || p == 0.0) return x;
  if (p == 1.0) return x * 0.0;
  constexpr double kSaturation = 1.7580993408473766;  // SELU's scale times its alpha
  const double a = 1.0 / std::sqrt((kSaturation * kSaturation * p + 1.0) * (1.0 - p));
  const Tensor keep = gt(tapegrad::dropout(ones(mask_shape, x.dtype()), p, true, gen), 0.0).to(x.dtype());
  // kept: a x + a alpha' p; dropped: a alpha' (p - 1), the saturation mapped as the kept ones are.
  return x * (keep * a) + (keep - 1.0) * (kSaturation * a) + kSaturation * a * p;
}

}  // namespace

Tensor alpha_dropout(const Tensor& x, double p, bool training, Generator& gen) {
  return alpha_dropout_over(x, p, training, gen, x.shape(), "alpha_dropout");
}

Tensor feature_alpha_dropout(const Tensor& x, double p, bool training, Generator& gen) {
  if (x.dim() < 2)
    throw ShapeError(message("feature_alpha_dropout: expected an input (N, C, ...), got ", x.shape().str()));
  Shape channels = Shape::filled(x.dim(), 1);
  channels[0] = x.shape()[0];
  channels[1] = x.shape()[1];
  return alpha_dropout_over(x, p, training, gen, channels, "feature_alpha_dropout");
}

Tensor rrelu(const Tensor& x, double lower, double upper, bool training, Generator& gen) {
  if (!(lower >= 0.0 && lower <= upper))
    throw ValueError(message("rrelu: expected 0 <= lower <= upper, got lower ", lower, " and upper ", upper));
  const Tensor positive = gt(x.detach(), 0.0);
  if (!training) return where(positive, x, x * (0.5 * (lower + upper)));
  const Tensor slopes = rand(x.shape(), gen, x.dtype()) * (upper - lower) + lower;
  return where(positive, x, x * slopes);
}

Tensor local_response_norm(const Tensor& x, std::int64_t size, double alpha, double beta, double k) {
  if (x.dim() < 3)
    throw ShapeError(
        message("local_response_norm: expected an input of 3 or more axes (N, C, ...), got ", x.shape().str()));
  if (size < 1) throw ValueError(message("local_response_norm: size must be at least 1, got ", size));
  if (x.numel() == 0) return x * 1.0;  // nothing to normalise (a zero batch, no channels or positions)
  const std::int64_t batch = x.size(0), channels = x.size(1);
  const std::int64_t rest = channels == 0 || batch == 0 ? 0 : x.numel() / (batch * channels);
  // The squares as (N, 1, C, rest), zero-padded along C, averaged over windows of `size` channels.
  const Tensor squares = (x * x).reshape({batch, 1, channels, rest});
  const Tensor padded = pad(squares, {0, 0, size / 2, (size - 1) / 2});
  const Tensor window_mean = avg_pool2d(padded, {size, 1}, {1, 1}).reshape(x.shape());
  return x / pow(window_mean * alpha + k, beta);
}

Tensor channel_shuffle(const Tensor& x, std::int64_t groups) {
  if (x.dim() < 3)
    throw ShapeError(
        message("channel_shuffle: expected an input of 3 or more axes (N, C, ...), got ", x.shape().str()));
  const std::int64_t channels = x.size(1);
  if (groups < 1 || channels % groups != 0)
    throw ValueError(
        message("channel_shuffle: groups must be positive and divide the ", channels, " channels, got ", groups));
  Shape grouped = x.shape();
  grouped[1] = channels / groups;
  grouped.insert(1, groups);  // (N, groups, C / groups, ...)
  return x.reshape(grouped).transpose(1, 2).reshape(x.shape());
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionForwardOptions& options, double dropout_p, Generator* gen) {
  return nn::scaled_dot_product_attention(q, k, v, options, dropout_p, gen).output;
}

AttentionResult multi_head_attention_forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                             const MultiHeadAttentionForwardFuncOptions& options,
                                             const AttentionForwardOptions& attention) {
  if (query.dim() != 3) throw ShapeError(message(kMha, ": expected query (B, Tq, E), got shape ", query.shape().str()));
  const std::int64_t b = query.size(0), tq = query.size(1), e = query.size(2), h = options.num_heads();
  if (h <= 0 || e % h != 0) throw ValueError(message(kMha, ": embed_dim ", e, " is not divisible by num_heads ", h));
  KVCache* cache = attention.cache();
  const bool reuse_cache = !key.defined() && !value.defined();
  if (reuse_cache && (cache == nullptr || !cache->k.defined()))
    throw ValueError(message(kMha, ": key and value are undefined and there is no filled cache to take them from"));
  if (!reuse_cache) {
    if (!key.defined() || !value.defined() || key.dim() != 3 || value.dim() != 3 || key.size(0) != b ||
        value.size(0) != b || key.size(1) != value.size(1))
      throw ShapeError(message(kMha, ": expected key (B, Tk, kdim) and value (B, Tk, vdim) for query ",
                               query.shape().str(), ", got ", (key.defined() ? key.shape().str() : "undefined"),
                               " and ", (value.defined() ? value.shape().str() : "undefined")));
  }
  const std::int64_t hkv = options.num_kv_heads() > 0 ? options.num_kv_heads() : h;
  if (options.num_kv_heads() < 0 || h % hkv != 0)
    throw ValueError(message(kMha, ": num_kv_heads ", options.num_kv_heads(), " does not divide num_heads ", h));
  const std::int64_t ekv = hkv * (e / h);  // the key and value features
  check_weight(options.out_proj_weight(), Shape{e, e}, "out_proj_weight");
  if (options.in_proj_bias().defined() && options.in_proj_bias().shape() != Shape{e + 2 * ekv})
    throw ShapeError(message(kMha, ": in_proj_bias must have shape ", Shape{e + 2 * ekv}.str(), ", got ",
                             options.in_proj_bias().shape().str()));

  // The three projection weights (out, in): row blocks of in_proj_weight (views) or the separate ones.
  const Tensor& fused = options.in_proj_weight();
  Tensor wq, wk, wv;
  if (fused.defined()) {
    check_weight(fused, Shape{e + 2 * ekv, e}, "in_proj_weight");
    wq = fused.narrow(0, 0, e);
    wk = fused.narrow(0, e, ekv);
    wv = fused.narrow(0, e + ekv, ekv);
  } else {
    check_weight(options.q_proj_weight(), Shape{e, e}, "q_proj_weight (or in_proj_weight)");
    wq = options.q_proj_weight();
    wk = options.k_proj_weight();
    wv = options.v_proj_weight();
    if (!reuse_cache) {
      check_weight(wk, Shape{ekv, key.size(2)}, "k_proj_weight");
      check_weight(wv, Shape{ekv, value.size(2)}, "v_proj_weight");
    }
  }
  if (!reuse_cache && (key.size(2) != wk.size(1) || value.size(2) != wv.size(1)))
    throw ShapeError(message(kMha, ": key ", key.shape().str(), " and value ", value.shape().str(),
                             " do not fit the projections ", wk.shape().str(), " and ", wv.shape().str()));
  const Tensor& in_bias = options.in_proj_bias();

  // Each projection is its own gemm over a view of the weight's rows, so each output is
  // contiguous and its gradient comes back whole. q, k, v: (B, H, T, Dh).
  Tensor q = split_heads(tapegrad::linear(query, wq, bias_rows(in_bias, 0, e)), h);
  Tensor k, v;
  const std::int64_t cached = cache != nullptr ? cache->length() : 0;
  if (reuse_cache) {
    if (cache->k.size(0) != b)
      throw ShapeError(message(kMha, ": KV cache holds k ", cache->k.shape().str(), " for batch size ",
                               cache->k.size(0), ", but the query has shape ", query.shape().str()));
    k = cache->k;
    v = cache->v;
  } else {
    k = split_heads(tapegrad::linear(key, wk, bias_rows(in_bias, e, ekv)), hkv);
    v = split_heads(tapegrad::linear(value, wv, bias_rows(in_bias, e + ekv, ekv)), hkv);
  }
  if (options.rotary()) {
    // Positions of the new tokens start after the cached ones.
    q = options.rotary()(q, cached);
    if (!reuse_cache) k = options.rotary()(k, cached);
  }
  if (cache != nullptr && !reuse_cache) {
    if (cache->k.defined()) {
      const Shape expected{b, hkv, cached, e / h};
      if (cache->k.shape() != expected || !cache->v.defined() || cache->v.shape() != expected)
        throw ShapeError(message(kMha, ": KV cache holds k ", cache->k.shape().str(), " and v ",
                                 (cache->v.defined() ? cache->v.shape().str() : std::string("(undefined)")),
                                 ", expected (B, Hkv, T_cached, head_dim) = ", expected.str()));
      k = concat({cache->k, k}, 2);  // (B, Hkv, T_cached + Tk, Dh)
      v = concat({cache->v, v}, 2);
    }
    cache->k = k;
    cache->v = v;
  }

  // With a cache the Tq new queries are the last of the Tk positions: causal masking is bottom-right.
  AttentionForwardOptions masks = attention;
  if (cache != nullptr) masks.causal_alignment(CausalAlignment::BottomRight);
  const double p = options.training() ? options.dropout_p() : 0.0;
  AttentionResult heads = nn::scaled_dot_product_attention(q, k, v, masks, p, options.generator());

  // heads.output: (B, H, Tq, Dh) -> (B, Tq, H, Dh) (a view) -> (B, Tq, E) (one copy).
  AttentionResult result;
  result.output = tapegrad::linear(heads.output.transpose(1, 2).reshape({b, tq, e}), options.out_proj_weight(),
                                   options.out_proj_bias());
  result.weights = heads.weights;
  return result;
}

}  // namespace tapegrad::nn::functional
