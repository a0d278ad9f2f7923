// fused_attention: scaled dot-product attention in one op, forward and backward on the tiled
// kernels of kernels/attention.h, and the same backward written with ops for a taped backward.

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tapegrad/autograd/autocast.h"
#include "tapegrad/autograd/kernels/attention.h"
#include "tapegrad/autograd/ops.h"

namespace tapegrad {

namespace {

constexpr const char* kOp = "fused_attention";
constexpr double kMinusInf = -std::numeric_limits<double>::infinity();

std::string shapes(const Tensor& q, const Tensor& k, const Tensor& v) {
  return "q " + q.shape().str() + ", k " + k.shape().str() + ", v " + v.shape().str();
}

// The kernel's view of the problem, after checking q (L..., Tq, D), k (Lkv..., Tk, D), v (Lkv..., Tk, Dv).
kernels::AttentionShape attention_shape(const Tensor& q, const Tensor& k, const Tensor& v) {
  if (q.dim() < 2 || k.dim() != q.dim() || v.dim() != q.dim())
    throw ShapeError(message(kOp, ": expected q, k, v of one rank >= 2, got ", shapes(q, k, v)));
  if (!q.is_floating_point() || k.dtype() != q.dtype() || v.dtype() != q.dtype())
    throw TypeError(message(kOp, ": q, k, v must share one floating-point dtype, got ", dtype_name(q.dtype()), ", ",
                            dtype_name(k.dtype()), ", ", dtype_name(v.dtype())));
  const int r = q.dim();
  kernels::AttentionShape s;
  s.tq = q.shape()[r - 2];
  s.tk = k.shape()[r - 2];
  s.d = q.shape()[r - 1];
  s.dv = v.shape()[r - 1];
  bool fits = k.shape()[r - 1] == s.d && v.shape()[r - 2] == s.tk && s.d > 0 && s.dv > 0;
  s.n = 1;
  for (int a = 0; a < r - 2; ++a) {
    const std::int64_t lq = q.shape()[a], lk = k.shape()[a];
    fits = fits && v.shape()[a] == lk;
    if (a == r - 3) {  // the heads: q's may be a multiple of k's and v's
      fits = fits && lk > 0 && lq % lk == 0;
      if (lk > 0) s.group = lq / lk;
    } else {
      fits = fits && lq == lk;
    }
    s.n *= lq;
  }
  if (!fits)
    throw ShapeError(
        message(kOp, ": ", shapes(q, k, v),
                " do not fit (L..., Tq, D), (Lkv..., Tk, D), (Lkv..., Tk, Dv) with Lkv = L but for the heads, "
                "which must divide q's"));
  return s;
}

// The adjoint of repeat_heads: (..., Hkv * group, Tk, C) summed over each group.
Tensor sum_heads(const Tensor& x, std::int64_t group) {
  if (group == 1) return x;
  const int r = x.dim();
  Shape split = x.shape();
  split[r - 3] /= group;
  split.insert(r - 2, group);
  return sum(reshape(x, split), {r - 2});
}

// The backward as ops, for create_graph: p is recomputed with softmax (so it stays a function of
// q and k), and dv = p^T g, ds = p (g v^T - rowsum(p g v^T)), dq = scale ds k, dk = scale ds^T q.
TensorList backward_taped(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& lse,
                          const Tensor& bias, const FusedAttentionMask& mask, std::int64_t group, double scale) {
  const int r = q.dim();
  const std::int64_t tq = q.shape()[r - 2], tk = k.shape()[r - 2];
  const Tensor kr = repeat_heads(k, group), vr = repeat_heads(v, group);
  Tensor scores = matmul(q * scale, kr.mT());  // (L..., Tq, Tk)
  Tensor excluded;                             // Bool, broadcast to the scores
  if (bias.defined()) {
    excluded = eq(bias, kMinusInf);
    scores = scores + masked_fill(bias, excluded, 0.0);
  }
  if (mask.causal) {
    const double offset = static_cast<double>(mask.causal_offset);
    const Tensor key = arange(0.0, static_cast<double>(tk), 1.0, kFloat64).reshape({1, tk});
    const Tensor query = arange(offset, offset + static_cast<double>(tq), 1.0, kFloat64).reshape({tq, 1});
    const Tensor hidden = gt(key, query);  // (Tq, Tk)
    excluded = excluded.defined() ? logical_or(excluded, hidden) : hidden;
  }
  // Rows with every key masked (lse -inf) keep their finite scores for the softmax and are zeroed
  // after it, so no NaN appears and they pass no gradient.
  const Tensor fully = eq(unsqueeze(lse, -1), kMinusInf);  // (L..., Tq, 1)
  if (excluded.defined()) scores = masked_fill(scores, logical_and(excluded, logical_not(fully)), kMinusInf);
  const Tensor p = masked_fill(softmax(scores, -1), fully, 0.0);
  const Tensor dp = matmul(g, vr.mT());
  const Tensor ds = p * (dp - sum(p * dp, {-1}, /*keepdim=*/true));
  return {matmul(ds, kr) * scale, sum_heads(matmul(ds.mT(), q) * scale, group), sum_heads(matmul(p.mT(), g), group)};
}

// offsets[i] = where matrix i of t (L..., rows, cols) starts, in elements from t.data_ptr(), the
// matrices in the order of their multi-index over the leading axes (last fastest).
void matrix_starts(const Tensor& t, std::vector<std::int64_t>& offsets) {
  const int r = t.dim();
  const Shape& shape = t.shape();
  std::int64_t n = 1;
  for (int a = 0; a < r - 2; ++a) n *= shape[a];
  offsets.assign(static_cast<std::size_t>(n), 0);
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t rest = i, offset = 0;
    for (int a = r - 3; a >= 0; --a) {
      offset += (rest % shape[a]) * t.strides()[a];
      rest /= shape[a];
    }
    offsets[static_cast<std::size_t>(i)] = offset;
  }
}

// bias expanded to the scores (L..., Tq, Tk): each attention matrix's start and the two inner strides.
template <class T>
kernels::AttentionBias<T> bias_view(const Tensor& expanded, std::vector<std::int64_t>& offsets) {
  kernels::AttentionBias<T> b;
  if (!expanded.defined()) return b;
  const int r = expanded.dim();
  matrix_starts(expanded, offsets);
  b.data = expanded.data_ptr<T>();
  b.offsets = offsets.data();
  b.stride_q = expanded.strides()[r - 2];
  b.stride_k = expanded.strides()[r - 1];
  return b;
}

// t itself when the rows of each of its matrices can be read with one row stride (values
// adjacent, rows at least a row apart), else a contiguous copy.
Tensor with_readable_rows(const Tensor& t) {
  const int r = t.dim();
  const std::int64_t rows = t.shape()[r - 2], cols = t.shape()[r - 1];
  const bool adjacent = cols <= 1 || t.strides()[r - 1] == 1;
  const bool spaced = rows <= 1 || t.strides()[r - 2] >= cols;
  return adjacent && spaced ? t : t.contiguous();
}

// Where t's matrices (L..., rows, cols) lie for the kernels, relative to t.data_ptr(); `offsets`
// holds each matrix's start and must outlive the result.
kernels::AttentionRows rows_of(const Tensor& t, std::vector<std::int64_t>& offsets) {
  const int r = t.dim();
  const std::int64_t rows = t.shape()[r - 2], cols = t.shape()[r - 1];
  matrix_starts(t, offsets);
  kernels::AttentionRows layout;
  layout.offsets = offsets.data();
  layout.ld = rows <= 1 ? std::max<std::int64_t>(cols, 1) : t.strides()[r - 2];
  return layout;
}

// An uninitialised dense tensor of `shape` whose axes lie in memory in the order of like's strides
// (the last axis innermost): for the heads of one projection, (B, T, H, Dh) seen as (B, H, T, Dh),
// the result's (B, T, H, Dh) view is contiguous, so merging the heads back costs no copy.
Tensor empty_in_order_of(const Tensor& like, const Shape& shape, DType dtype) {
  const int r = like.dim();
  std::vector<int> order(static_cast<std::size_t>(r));
  for (int a = 0; a < r; ++a) order[static_cast<std::size_t>(a)] = a;
  std::stable_sort(order.begin(), order.end() - 1, [&](int a, int b) { return like.strides()[a] > like.strides()[b]; });
  Shape stored;
  Dims inverse = Dims::filled(r, 0);
  for (int i = 0; i < r; ++i) {
    stored.push_back(shape[order[static_cast<std::size_t>(i)]]);
    inverse[order[static_cast<std::size_t>(i)]] = i;
  }
  return empty(stored, dtype).permute(inverse);
}

// A dense float32 gradient rounded to bfloat16 with the same strides (one pass over its storage).
Tensor round_dense(const Tensor& grad) {
  Tensor out = empty_in_order_of(grad, grad.shape(), kBFloat16);
  kernels::round_to_bfloat16(grad.data_ptr<float>(), out.data_ptr<BFloat16>(), grad.numel());
  return out;
}

}  // namespace

Tensor repeat_heads(const Tensor& x, std::int64_t group) {
  if (group == 1) return x;
  const int r = x.dim();
  if (r < 3 || group < 1)
    throw ValueError(
        message("repeat_heads: expected (..., H, T, C) and a group >= 1, got ", x.shape().str(), " and ", group));
  Shape expanded = x.shape();
  expanded.insert(r - 2, group);  // (..., Hkv, group, Tk, C)
  Shape merged = x.shape();
  merged[r - 3] *= group;
  return reshape(expand(unsqueeze(x, r - 2), expanded), merged);
}

Tensor fused_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, double scale,
                       const FusedAttentionMask& mask) {
  kernels::AttentionShape sh = attention_shape(q_in, k_in, v_in);
  sh.causal = mask.causal;
  sh.offset = mask.causal_offset;
  if (!std::isfinite(scale)) throw ValueError(message(kOp, ": scale must be finite, got ", scale));
  Shape scores_shape = q_in.shape();
  scores_shape[scores_shape.size() - 1] = sh.tk;  // (L..., Tq, Tk)
  Tensor bias;                                    // detached, expanded to the scores
  if (mask.bias.defined()) {
    if (mask.bias.dtype() != q_in.dtype())
      throw TypeError(message(kOp, ": bias must have q's dtype ", dtype_name(q_in.dtype()), ", got ",
                              dtype_name(mask.bias.dtype())));
    if (mask.bias.requires_grad() && is_grad_enabled())
      throw ValueError(
          message(kOp, ": the bias receives no gradient; pass it detached (shape ", mask.bias.shape().str(), ")"));
    if (mask.bias.dim() > scores_shape.size())
      throw ShapeError(message(kOp, ": bias of shape ", mask.bias.shape().str(),
                               " does not broadcast to the scores' shape ", scores_shape.str()));
    bias = expand(detail::widen_bf16(mask.bias.detach()), scores_shape);  // ShapeError when it does not broadcast
  }
  // bfloat16 keeps q, k, v and the output in bfloat16 and runs the products on the bfloat16 kernel
  // (kernels/attention.h); the log-sum-exp is float32. The tape holds bfloat16, half the bytes.
  // q, k and v are read in place when their rows allow (heads of a projection do), and the output
  // takes q's order of axes.
  const bool bf16 = q_in.dtype() == kBFloat16;
  const Tensor q = with_readable_rows(q_in), k = with_readable_rows(k_in), v = with_readable_rows(v_in);
  Shape out_shape = q.shape();
  out_shape[out_shape.size() - 1] = sh.dv;
  Shape lse_shape = q.shape();
  lse_shape.pop_back();  // (L..., Tq)
  Tensor out = empty_in_order_of(q, out_shape, q.dtype());
  Tensor lse = empty(lse_shape, bf16 ? kFloat32 : q.dtype());
  std::vector<std::int64_t> q_offsets, k_offsets, v_offsets, o_offsets;
  kernels::AttentionLayouts layouts;
  layouts.q = rows_of(q, q_offsets);
  layouts.k = rows_of(k, k_offsets);
  layouts.v = rows_of(v, v_offsets);
  layouts.o = rows_of(out, o_offsets);
  if (bf16) {
    std::vector<std::int64_t> offsets;
    const kernels::AttentionBias<float> b = bias_view<float>(bias, offsets);
    if (out.numel() > 0 || lse.numel() > 0)
      kernels::attention_forward<float, BFloat16>(sh, layouts, b, static_cast<float>(scale), q.data_ptr<BFloat16>(),
                                                  k.data_ptr<BFloat16>(), v.data_ptr<BFloat16>(),
                                                  out.data_ptr<BFloat16>(), lse.data_ptr<float>());
  } else {
    dispatch_floating(q.dtype(), kOp, [&](auto tag) {
      using T = decltype(tag);
      std::vector<std::int64_t> offsets;
      const kernels::AttentionBias<T> b = bias_view<T>(bias, offsets);
      if (out.numel() > 0 || lse.numel() > 0)
        kernels::attention_forward<T>(sh, layouts, b, static_cast<T>(scale), q.data_ptr<T>(), k.data_ptr<T>(),
                                      v.data_ptr<T>(), out.data_ptr<T>(), lse.data_ptr<T>());
    });
  }
  FusedAttentionMask structure = mask;  // what the backward needs of the masks; the bias is saved apart
  structure.bias = Tensor();
  if (any_requires_grad({&q_in, &k_in, &v_in}))
    record(kOp, out, {q_in, k_in, v_in},
           [sq = SavedTensor(q), sk = SavedTensor(k), sv = SavedTensor(v), so = SavedTensor::output(out),
            slse = SavedTensor(lse), sbias = bias.defined() ? SavedTensor(bias) : SavedTensor(), structure, sh,
            scale](const Tensor& g) -> TensorList {
             using detail::widen_bf16;
             const Tensor& lse = slse.unpack();
             const Tensor bias = sbias.defined() ? sbias.unpack() : Tensor();
             const bool bf16 = g.dtype() == kBFloat16;
             const auto as_input = [bf16](const Tensor& grad) { return bf16 ? grad.to(kBFloat16) : grad; };
             const Tensor& q = sq.unpack();
             const Tensor& k = sk.unpack();
             const Tensor& v = sv.unpack();
             if (any_requires_grad({&g, &q, &k, &v})) {
               // Taped (create_graph): differentiable ops, in float32 for bfloat16.
               const TensorList grads = backward_taped(widen_bf16(g), widen_bf16(q), widen_bf16(k), widen_bf16(v), lse,
                                                       bias, structure, sh.group, scale);
               return {as_input(grads[0]), as_input(grads[1]), as_input(grads[2])};
             }
             // Untaped: the kernel, on the stored dtype (bfloat16 read in place), every operand in its own
             // layout; dq, dk, dv in the order of q's, k's and v's axes (float32 for bfloat16, rounded on
             // return), so that the heads' gradients merge back without a copy.
             const Tensor& o = so.unpack();
             const Tensor gr = with_readable_rows(g);
             const DType grad_dtype = bf16 ? kFloat32 : q.dtype();
             Tensor dq = empty_in_order_of(q, q.shape(), grad_dtype), dk = empty_in_order_of(k, k.shape(), grad_dtype),
                    dv = empty_in_order_of(v, v.shape(), grad_dtype);
             std::vector<std::int64_t> offsets[8];
             kernels::AttentionLayouts layouts;
             layouts.q = rows_of(q, offsets[0]);
             layouts.k = rows_of(k, offsets[1]);
             layouts.v = rows_of(v, offsets[2]);
             layouts.o = rows_of(o, offsets[3]);
             layouts.dout = rows_of(gr, offsets[4]);
             layouts.dq = rows_of(dq, offsets[5]);
             layouts.dk = rows_of(dk, offsets[6]);
             layouts.dv = rows_of(dv, offsets[7]);
             if (bf16) {
               std::vector<std::int64_t> bias_offsets;
               const kernels::AttentionBias<float> b = bias_view<float>(bias, bias_offsets);
               if (dq.numel() > 0 || dk.numel() > 0)
                 kernels::attention_backward<float, BFloat16>(
                     sh, layouts, b, static_cast<float>(scale), q.data_ptr<BFloat16>(), k.data_ptr<BFloat16>(),
                     v.data_ptr<BFloat16>(), o.data_ptr<BFloat16>(), lse.data_ptr<float>(), gr.data_ptr<BFloat16>(),
                     dq.data_ptr<float>(), dk.data_ptr<float>(), dv.data_ptr<float>());
               return {round_dense(dq), round_dense(dk), round_dense(dv)};
             }
             dispatch_floating(q.dtype(), "fused_attention backward", [&](auto tag) {
               using T = decltype(tag);
               std::vector<std::int64_t> bias_offsets;
               const kernels::AttentionBias<T> b = bias_view<T>(bias, bias_offsets);
               if (dq.numel() > 0 || dk.numel() > 0)
                 kernels::attention_backward<T>(sh, layouts, b, static_cast<T>(scale), q.data_ptr<T>(), k.data_ptr<T>(),
                                                v.data_ptr<T>(), o.data_ptr<T>(), lse.data_ptr<T>(), gr.data_ptr<T>(),
                                                dq.data_ptr<T>(), dk.data_ptr<T>(), dv.data_ptr<T>());
             });
             return {dq, dk, dv};
           });
  return out;
}

}  // namespace tapegrad
