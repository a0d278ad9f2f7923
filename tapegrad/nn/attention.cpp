#include "tapegrad/nn/attention.h"

#include <cmath>
#include <limits>
#include <string>

#include "tapegrad/autograd/autocast.h"
#include "tapegrad/nn/functional.h"

namespace tapegrad::nn {

namespace {

constexpr const char* kSdpa = "scaled_dot_product_attention";
constexpr double kMinusInf = -std::numeric_limits<double>::infinity();

// True when `mask` broadcasts to `target` with NumPy's rules (without widening target).
bool broadcasts_to(const Shape& mask, const Shape& target) {
  if (mask.size() > target.size()) return false;
  const int lead = target.size() - mask.size();
  for (int i = 0; i < mask.size(); ++i)
    if (mask[i] != 1 && mask[i] != target[lead + i]) return false;
  return true;
}

Tensor or_masks(const Tensor& acc, const Tensor& more) { return acc.defined() ? logical_or(acc, more) : more; }

// x's shape without its last two axes.
Shape leading(const Tensor& x) {
  Shape s = x.shape();
  s.pop_back();
  s.pop_back();
  return s;
}

// Query heads per key/value head: H / Hkv when q (..., H, Tq, D) and k, v (..., Hkv, Tk, .) agree
// but for the heads and Hkv divides H (grouped-query attention; Hkv = 1 is multi-query); 1 when the
// leading shapes are equal; 0 otherwise (they broadcast, or fail to).
std::int64_t head_group(const Tensor& q, const Tensor& k, const Tensor& v) {
  const Shape lq = leading(q), lk = leading(k);
  if (lk != leading(v) || lq.size() != lk.size()) return 0;
  if (lq == lk) return 1;
  const int heads = lq.size() - 1;
  if (heads < 0 || lk[heads] < 1 || lq[heads] % lk[heads] != 0) return 0;
  for (int a = 0; a < heads; ++a)
    if (lq[a] != lk[a]) return 0;
  return lq[heads] / lk[heads];
}

// Checks q (..., Tq, D), k (..., Tk, D), v (..., Tk, Dv) and returns the scores' shape
// (L..., Tq, Tk), L the broadcast of the three leading shapes.
Shape check_sdpa_shapes(const Tensor& q, const Tensor& k, const Tensor& v) {
  if (q.dim() < 2 || k.dim() < 2 || v.dim() < 2)
    throw ShapeError(message(kSdpa, ": expected q, k, v of rank >= 2 (..., T, D), got ", q.shape().str(), ", ",
                             k.shape().str(), ", ", v.shape().str()));
  if (!q.is_floating_point() || k.dtype() != q.dtype() || v.dtype() != q.dtype())
    throw TypeError(message(kSdpa, ": q, k, v must share one floating-point dtype"));
  if (q.size(-1) != k.size(-1) || k.size(-2) != v.size(-2))
    throw ShapeError(message(kSdpa, ": q ", q.shape().str(), ", k ", k.shape().str(), " and v ", v.shape().str(),
                             " do not fit (..., Tq, D), (..., Tk, D), (..., Tk, Dv)"));
  const std::int64_t group = head_group(q, k, v);
  Shape scores =
      group > 1 ? leading(q) : broadcast_shapes(broadcast_shapes(leading(q), leading(k), kSdpa), leading(v), kSdpa);
  scores.push_back(q.size(-2));
  scores.push_back(k.size(-2));
  return scores;
}

// options with attn_mask moved into keep_mask (Bool) or additive_mask (float).
AttentionForwardOptions resolve_attn_mask(const AttentionForwardOptions& options) {
  const Tensor& mask = options.attn_mask();
  if (!mask.defined()) return options;
  if (options.keep_mask().defined() || options.additive_mask().defined())
    throw ValueError(message(kSdpa, ": give attn_mask or keep_mask / additive_mask, not both"));
  AttentionForwardOptions resolved = options;
  resolved.attn_mask(Tensor());
  if (mask.dtype() == kBool) resolved.keep_mask(mask);
  else resolved.additive_mask(mask);
  return resolved;
}

// The causal mask's offset: query i sees keys j <= i + offset.
std::int64_t causal_offset(const AttentionForwardOptions& masks, std::int64_t tq, std::int64_t tk) {
  return masks.causal_alignment() == CausalAlignment::BottomRight ? tk - tq : 0;
}

// The Bool mask, true = the key is excluded, in the smallest shape that broadcasts to the
// scores (L..., Tq, Tk): (Tq, Tk) for causal, (B, 1, ..., 1, Tk) for padding, and so on.
// Undefined when nothing is masked.
Tensor excluded_keys(const AttentionForwardOptions& masks, const Shape& scores, DType dtype) {
  const int rank = scores.size();
  const std::int64_t tq = scores[rank - 2], tk = scores[rank - 1];
  Tensor excluded;
  if (masks.is_causal()) {
    const double offset = static_cast<double>(causal_offset(masks, tq, tk));
    Tensor key_pos = arange(0.0, static_cast<double>(tk), 1.0, kFloat64).reshape({1, tk});                // (1, Tk)
    Tensor query_pos = arange(offset, offset + static_cast<double>(tq), 1.0, kFloat64).reshape({tq, 1});  // (Tq, 1)
    excluded = gt(key_pos, query_pos);                                                                    // (Tq, Tk)
  }
  if (masks.key_padding_mask().defined()) {
    const Tensor& pad = masks.key_padding_mask();
    if (pad.dtype() != kBool)
      throw TypeError(
          message(kSdpa, ": key_padding_mask must be Bool (true = padding), got ", dtype_name(pad.dtype())));
    if (rank < 3)
      throw ShapeError(
          message(kSdpa, ": key_padding_mask (B, Tk) needs a batch axis, but the scores have shape ", scores.str()));
    const std::int64_t b = scores[0];
    if (pad.shape() != Shape{b, tk})
      throw ShapeError(message(kSdpa, ": key_padding_mask must have shape (B, Tk) = ", Shape{b, tk}.str(), ", got ",
                               pad.shape().str()));
    Shape padded = Dims::filled(rank, 1);  // (B, 1, ..., 1, Tk)
    padded[0] = b;
    padded[rank - 1] = tk;
    excluded = or_masks(excluded, pad.reshape(padded));
  }
  if (masks.keep_mask().defined()) {
    const Tensor& keep = masks.keep_mask();
    if (keep.dtype() != kBool)
      throw TypeError(message(kSdpa, ": keep_mask must be Bool (true = keep), got ", dtype_name(keep.dtype())));
    if (!broadcasts_to(keep.shape(), scores))
      throw ShapeError(message(kSdpa, ": keep_mask of shape ", keep.shape().str(),
                               " does not broadcast to the scores' shape ", scores.str()));
    excluded = or_masks(excluded, logical_not(keep));
  }
  if (masks.additive_mask().defined()) {
    const Tensor& add = masks.additive_mask();
    if (add.dtype() != dtype)
      throw TypeError(
          message(kSdpa, ": additive_mask must have q's dtype ", dtype_name(dtype), ", got ", dtype_name(add.dtype())));
    if (!broadcasts_to(add.shape(), scores))
      throw ShapeError(message(kSdpa, ": additive_mask of shape ", add.shape().str(),
                               " does not broadcast to the scores' shape ", scores.str()));
    Tensor minus_inf = eq(add.detach(), kMinusInf);
    if (minus_inf.to(kFloat32).sum().item() > 0) excluded = or_masks(excluded, minus_inf);
  }
  return excluded;
}

// Checks a cross-attention key or value sequence t: (B, Tk, dim) for the query (B, Tq, d).
void check_memory(const Tensor& t, std::int64_t dim, std::int64_t b, const Tensor& query, const char* name) {
  if (t.dim() != 3 || t.shape()[0] != b || t.shape()[2] != dim)
    throw ShapeError(message("MultiHeadAttention: expected ", name, " of shape (", b, ",Tk,", dim, ") for query ",
                             query.shape().str(), ", got ", t.shape().str()));
}

// scaled_dot_product_attention once q, k and v share their dtype.
AttentionResult attention_of_one_dtype(const Tensor& q, const Tensor& k, const Tensor& v,
                                       const AttentionForwardOptions& options, double dropout_p, Generator* gen) {
  const Shape scores_shape = check_sdpa_shapes(q, k, v);  // (L..., Tq, Tk)
  if (!(dropout_p >= 0.0 && dropout_p < 1.0))
    throw ValueError(message(kSdpa, ": dropout probability must be in [0, 1), got ", dropout_p));
  const AttentionForwardOptions masks = resolve_attn_mask(options);
  const std::int64_t tq = q.size(-2), tk = k.size(-2), d = q.size(-1);
  const std::int64_t offset = causal_offset(masks, tq, tk);
  const double scale = masks.scale() ? *masks.scale() : 1.0 / std::sqrt(static_cast<double>(d));

  // The fused kernel (fused_attention) unless the weights are asked for, dropped out, or a mask
  // is to be differentiated; it also needs one leading shape (the unfused path broadcasts).
  const std::int64_t group = head_group(q, k, v);
  const bool fused = !masks.need_weights() && dropout_p == 0.0 &&
                     !(masks.additive_mask().defined() && masks.additive_mask().requires_grad()) && group >= 1;
  if (fused) {
    FusedAttentionMask mask;
    mask.causal = masks.is_causal();
    mask.causal_offset = offset;
    AttentionForwardOptions others = masks;  // every mask but the causal one, as a bias (-inf = masked)
    others.is_causal(false);
    const Tensor excluded = excluded_keys(others, scores_shape, q.dtype());
    const Tensor& add = masks.additive_mask();
    if (excluded.defined())
      mask.bias = add.defined() ? where(logical_not(excluded), add, kMinusInf)
                                : masked_fill(zeros(excluded.shape(), q.dtype()), excluded, kMinusInf);
    else mask.bias = add;
    AttentionResult result;
    result.output = fused_attention(q, k, v, scale, mask);
    return result;
  }

  // A causal mask alone leaves every row at least one key when the offset is not negative (key
  // 0 for query 0): the fused causal_softmax needs no mask tensor and no check for fully masked rows.
  const bool causal_only = masks.is_causal() && offset >= 0 && !masks.key_padding_mask().defined() &&
                           !masks.keep_mask().defined() && !masks.additive_mask().defined();
  // Broadcasts to the scores; undefined when nothing is masked or the mask is causal only.
  const Tensor excluded = causal_only ? Tensor() : excluded_keys(masks, scores_shape, q.dtype());

  // Scaling q costs Tq * D multiplies instead of Tq * Tk for the scores.
  // scores: (L..., Tq, Tk); k.mT() is a view that gemm reads with a transpose flag.
  const Tensor& keys = group > 1 ? repeat_heads(k, group) : k;
  Tensor scores = matmul(q * scale, keys.mT());
  if (masks.additive_mask().defined()) {
    // -inf entries are already in `excluded`; adding them would turn a fully masked row's
    // scores into -inf and its softmax into NaN, so they are added as 0.
    const Tensor& add = masks.additive_mask();
    scores = scores + (excluded.defined() ? masked_fill(add, eq(add.detach(), kMinusInf), 0.0) : add);
  }

  Tensor weights;  // (L..., Tq, Tk)
  if (causal_only) {
    weights = causal_softmax(scores, offset);
  } else if (!excluded.defined()) {
    weights = softmax(scores, -1);
  } else {
    // A row with every key excluded would be softmax(-inf, ..., -inf) = NaN. Such rows keep
    // their raw scores for the softmax (finite, so no NaN even transiently) and are zeroed
    // afterwards; the zeroing passes no gradient, so the row contributes nothing backward.
    // Masked entries get -inf rather than a large finite negative: exactly zero weight in
    // float32 too, whatever the scale of the scores.
    // fully_excluded: excluded's shape with the last axis 1 (a size-1 last axis stands for all Tk).
    const Tensor fully_excluded = eq(excluded.to(kFloat32).sum({-1}, /*keepdim=*/true),
                                     static_cast<double>(excluded.shape()[excluded.dim() - 1]));
    if (fully_excluded.to(kFloat32).sum().item() > 0) {
      const Tensor partly_excluded = logical_and(excluded, logical_not(fully_excluded));
      weights = softmax(masked_fill(scores, partly_excluded, kMinusInf), -1);
      weights = masked_fill(weights, fully_excluded, 0.0);
    } else {
      weights = softmax(masked_fill(scores, excluded, kMinusInf), -1);
    }
  }

  const Tensor mixed =
      dropout_p > 0.0 ? dropout(weights, dropout_p, /*training=*/true, generator_or_default(gen)) : weights;
  AttentionResult result;
  result.output = matmul(mixed, group > 1 ? repeat_heads(v, group) : v);  // (L..., Tq, Dv)
  if (masks.need_weights()) result.weights = weights;
  return result;
}

}  // namespace

AttentionResult scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                             const AttentionForwardOptions& options, double dropout_p, Generator* gen) {
  // bfloat16 beside float32 (rotary positions promote q and k but not v): under autocast the
  // products' policy takes all three to bfloat16; outside it they meet in float32.
  const auto floats = [](const Tensor& t) { return t.dtype() == kFloat32 || t.dtype() == kBFloat16; };
  if ((q.dtype() != k.dtype() || q.dtype() != v.dtype()) && floats(q) && floats(k) && floats(v)) {
    const DType common = autocast_enabled() ? kBFloat16 : kFloat32;
    return attention_of_one_dtype(q.to(common), k.to(common), v.to(common), options, dropout_p, gen);
  }
  return attention_of_one_dtype(q, k, v, options, dropout_p, gen);
}

MultiHeadAttentionImpl::MultiHeadAttentionImpl(const MultiHeadAttentionOptions& options)
    : d_model_(options.embed_dim()),
      num_heads_(options.num_heads()),
      num_kv_heads_(options.num_kv_heads() > 0 ? options.num_kv_heads() : options.num_heads()),
      head_dim_(0),
      options_(options) {
  const std::int64_t d_model = d_model_, num_heads = num_heads_;
  options_.generator(nullptr);  // not kept: it need not outlive the construction
  if (d_model <= 0 || num_heads <= 0)
    throw ValueError(
        message("MultiHeadAttention: d_model and num_heads must be positive, got ", d_model, " and ", num_heads));
  if (d_model % num_heads != 0)
    throw ValueError(message("MultiHeadAttention: d_model ", d_model, " is not divisible by num_heads ", num_heads));
  if (options.num_kv_heads() < 0 || num_heads % num_kv_heads_ != 0)
    throw ValueError(
        message("MultiHeadAttention: num_kv_heads ", options.num_kv_heads(), " does not divide num_heads ", num_heads));
  if (!(options.dropout() >= 0.0 && options.dropout() < 1.0))
    throw ValueError(message("MultiHeadAttention: dropout must be in [0, 1), got ", options.dropout()));
  for (std::int64_t dim : {options.kdim(), options.vdim()})
    if (dim < 0 || (dim != 0 && !options.cross_attention()))
      throw ValueError(message("MultiHeadAttention: kdim ", options.kdim(), " and vdim ", options.vdim(),
                               " are only for cross-attention and must be positive"));
  head_dim_ = d_model / num_heads;
  if (options.rotary_max_len() < 0 || (options.rotary_max_len() > 0 && options.cross_attention()))
    throw ValueError(message("MultiHeadAttention: rotary_max_len ", options.rotary_max_len(),
                             " is only for self-attention and must not be negative"));
  const std::int64_t kdim = options.kdim() > 0 ? options.kdim() : d_model;
  const std::int64_t vdim = options.vdim() > 0 ? options.vdim() : (options.kdim() > 0 ? kdim : d_model);
  options_.kdim(kdim).vdim(vdim);
  Generator& gen = generator_or_default(options.generator());
  // Uniform in +-1/sqrt(fan_in), the draws Linear layers of these shapes would make.
  auto draw = [&gen](const Shape& shape, std::int64_t fan_in) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    return uniform(shape, -bound, bound, gen);
  };
  const std::int64_t d_kv = num_kv_heads_ * head_dim_;  // rows of the k and v projections
  if (kdim == d_model && vdim == d_model) {
    in_proj_weight_ = register_parameter("in_proj_weight", draw({d_model + 2 * d_kv, d_model}, d_model));
  } else {
    q_proj_weight_ = register_parameter("q_proj_weight", draw({d_model, d_model}, d_model));
    k_proj_weight_ = register_parameter("k_proj_weight", draw({d_kv, kdim}, kdim));
    v_proj_weight_ = register_parameter("v_proj_weight", draw({d_kv, vdim}, vdim));
  }
  if (options.bias()) in_proj_bias_ = register_parameter("in_proj_bias", draw({d_model + 2 * d_kv}, d_model));
  out_proj_ = register_module("out_proj", Linear(LinearOptions(d_model, d_model).bias(options.bias()).generator(&gen)));
  if (options.rotary_max_len() > 0)
    rotary_ = register_module("rotary", RotaryEmbedding(head_dim_, options.rotary_max_len()));
  dropout_gen_.manual_seed(gen.next_u64());
  register_generator("dropout_generator", dropout_gen_);
}

AttentionResult MultiHeadAttentionImpl::forward(const Tensor& query, const Tensor& key_value,
                                                const AttentionForwardOptions& options) {
  const bool cached = options.cache() != nullptr && options.cache()->k.defined();
  if (options_.cross_attention() && key_value.defined() && !cached && query.dim() == 3)
    check_memory(key_value, options_.kdim(), query.shape()[0], query, "key_value");
  return forward(query, key_value, key_value, options);
}

AttentionResult MultiHeadAttentionImpl::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                                const AttentionForwardOptions& options) {
  const bool cross = options_.cross_attention();
  if (query.dim() != 3 || query.shape()[2] != d_model_)
    throw ShapeError(
        message("MultiHeadAttention: expected query of shape (B,Tq,", d_model_, "), got ", query.shape().str()));
  const std::int64_t b = query.shape()[0];
  KVCache* cache = options.cache();
  functional::MultiHeadAttentionForwardFuncOptions weights(num_heads_, out_proj_->weight(), out_proj_->bias());
  weights.num_kv_heads(num_kv_heads_)
      .in_proj_weight(in_proj_weight_)
      .q_proj_weight(q_proj_weight_)
      .k_proj_weight(k_proj_weight_)
      .v_proj_weight(v_proj_weight_)
      .in_proj_bias(in_proj_bias_)
      .dropout_p(options_.dropout())
      .training(is_training())
      .generator(&dropout_gen_);
  if (!cross) {
    if (key.defined() || value.defined())
      throw ValueError("MultiHeadAttention: built for self-attention, but given a key/value sequence of shape " +
                       (key.defined() ? key : value).shape().str() + "; build it with cross_attention = true");
    if (rotary_) weights.rotary(rotary_);
    return functional::multi_head_attention_forward(query, query, query, weights, options);
  }
  if (cache != nullptr && cache->k.defined()) {
    // The memory's projections are cached: key and value are taken from there.
    return functional::multi_head_attention_forward(query, Tensor(), Tensor(), weights, options);
  }
  if (!key.defined() || !value.defined())
    throw ValueError("MultiHeadAttention: built for cross-attention, but given no key_value sequence");
  check_memory(key, options_.kdim(), b, query, "key");
  check_memory(value, options_.vdim(), b, query, "value");
  return functional::multi_head_attention_forward(query, key, value, weights, options);
}

}  // namespace tapegrad::nn
