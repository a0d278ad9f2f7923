// matmul with torch.matmul's semantics, and linear (x W^T + b), on gemm (autograd/kernels/blas.h).
//
//   C (..., n, m) = A (..., n, k) @ B (..., k, m), batch axes broadcast;
//   a 1-D A is promoted to (1, k) and a 1-D B to (k, 1), and the added axis is removed from C.
//   dA = dC @ B^T and dB = A^T @ dC, each summed over the batch axes its operand was broadcast along.
//
// Layout: gemm takes each matrix as a pointer, a transpose flag and a row stride, so any
// matrix whose last two strides are (s, 1) or (1, s) is multiplied in place; transposed views
// (x.mT()) cost nothing. Only other layouts (a step in the last axis, an expanded axis) are
// copied first.

#include <algorithm>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "tapegrad/autograd/autocast.h"
#include "tapegrad/autograd/kernels/blas.h"
#include "tapegrad/autograd/kernels/elementwise.h"
#include "tapegrad/autograd/kernels/strided.h"
#include "tapegrad/autograd/ops.h"
#include "tapegrad/autograd/parallel.h"

namespace tapegrad {

namespace {

// Multiply-adds a chunk of a batched product should hold before it goes to another thread.
constexpr std::int64_t kBatchedGemmGrainWork = std::int64_t{1} << 18;

// How gemm reads a (rows, cols) matrix with element strides (row_stride, col_stride).
struct GemmLayout {
  bool usable = false;
  bool transposed = false;  // stored as its transpose (cols, rows), row-major
  std::int64_t ld = 0;      // the stored matrix's row stride
};

GemmLayout gemm_layout(std::int64_t rows, std::int64_t cols, std::int64_t row_stride, std::int64_t col_stride) {
  // Nothing steps along a size-1 axis, so its stride does not constrain the layout.
  const bool one_row = rows == 1;
  const bool one_col = cols == 1;
  if ((one_col || col_stride == 1) && (one_row || row_stride >= std::max<std::int64_t>(cols, 1)))
    return {true, false, one_row ? cols : row_stride};
  if ((one_row || row_stride == 1) && (one_col || col_stride >= std::max<std::int64_t>(rows, 1)))
    return {true, true, one_col ? rows : col_stride};
  return {};
}

GemmLayout matrix_layout(const Tensor& t) {
  const int r = t.dim();
  return gemm_layout(t.shape()[r - 2], t.shape()[r - 1], t.strides()[r - 2], t.strides()[r - 1]);
}

// 1-D operands as matrices: A (k) -> (1, k), B (k) -> (k, 1). Views without a graph edge.
Tensor promote_lhs(const Tensor& a) {
  if (a.dim() != 1) return a;
  const std::int64_t k = a.shape()[0];
  return detail::make_view(a, {1, k}, {k * a.strides()[0], a.strides()[0]}, a.offset());
}
Tensor promote_rhs(const Tensor& b) {
  if (b.dim() != 1) return b;
  return detail::make_view(b, {b.shape()[0], 1}, {b.strides()[0], 1}, b.offset());
}

std::int64_t batch_numel(const Shape& shape) {
  std::int64_t n = 1;
  for (int d = 0; d + 2 < shape.size(); ++d) n *= shape[d];
  return n;
}

struct MatmulShapes {
  Shape batch;  // the broadcast batch axes
  std::int64_t n = 0, k = 0, m = 0;
  Shape out;  // batch + (n, m)
};

// Shapes of promoted operands; the error names the shapes the user passed.
MatmulShapes matmul_shapes(const Shape& a, const Shape& b, const Shape& a_given, const Shape& b_given) {
  auto mismatch = [&] { return ShapeError("matmul: cannot multiply " + a_given.str() + " by " + b_given.str()); };
  MatmulShapes s;
  s.n = a[a.size() - 2];
  s.k = a[a.size() - 1];
  s.m = b[b.size() - 1];
  if (b[b.size() - 2] != s.k) throw mismatch();
  const int a_batch = a.size() - 2;
  const int b_batch = b.size() - 2;
  const int rank = std::max(a_batch, b_batch);
  for (int d = 0; d < rank; ++d) {
    const std::int64_t da = d < rank - a_batch ? 1 : a[d - (rank - a_batch)];
    const std::int64_t db = d < rank - b_batch ? 1 : b[d - (rank - b_batch)];
    if (da != db && da != 1 && db != 1) throw mismatch();
    s.batch.push_back(da == 1 ? db : da);
  }
  s.out = s.batch;
  s.out.push_back(s.n);
  s.out.push_back(s.m);
  return s;
}

// If the batch and row axes of a (..., n, k) are evenly spaced in memory, i.e. together they
// form one axis of N = numel / k rows, the row stride of that axis.
std::optional<std::int64_t> merged_row_stride(const Tensor& a) {
  std::optional<std::int64_t> stride;
  std::int64_t span = 0;  // stride * size of the rows merged so far
  for (int d = a.dim() - 2; d >= 0; --d) {
    const std::int64_t size = a.shape()[d];
    if (size == 1) continue;
    if (!stride) {
      stride = a.strides()[d];
      span = *stride * size;
    } else {
      if (a.strides()[d] != span) return std::nullopt;
      span *= size;
    }
  }
  if (!stride) stride = a.shape().back();  // a single row: any stride will do
  return stride;
}

// C (n, m, row stride ldc) = op(A) op(B): kernels::gemm, or for bfloat16 gemm_rounded (float32
// accumulation, rounded once).
template <class T>
void product(bool trans_a, bool trans_b, std::int64_t n, std::int64_t m, std::int64_t k, const T* a, std::int64_t lda,
             const T* b, std::int64_t ldb, T* c, std::int64_t ldc) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    kernels::gemm_rounded(trans_a, trans_b, n, m, k, a, lda, b, ldb, nullptr, c, ldc);
  } else {
    kernels::gemm(trans_a, trans_b, n, m, k, T(1), a, lda, b, ldb, T(0), c, ldc);
  }
}

// out (contiguous, s.out) = a @ b for promoted operands of element type T.
template <class T>
void matmul_into(Tensor a, Tensor b, const MatmulShapes& s, const Tensor& out) {
  T* po = out.data_ptr<T>();  // out: (batch..., n, m)
  if (out.numel() == 0) return;
  if (s.k == 0) {
    for (std::int64_t i = 0; i < out.numel(); ++i) po[i] = T(0.0f);
    return;
  }
  GemmLayout la = matrix_layout(a);
  if (!la.usable) {
    a = kernels::dense(a);
    la = matrix_layout(a);
  }
  GemmLayout lb = matrix_layout(b);
  if (!lb.usable) {
    b = kernels::dense(b);
    lb = matrix_layout(b);
  }
  const T* pa = a.data_ptr<T>();
  const T* pb = b.data_ptr<T>();

  // One B for the whole batch ((..., n, k) @ (k, m)): C's rows are A's rows times B, so when
  // A's rows lie evenly spaced this is a single (N, k) @ (k, m) gemm with N = prod(...) * n,
  // which is far faster than many small ones.
  if (batch_numel(b.shape()) == 1) {
    if (const auto row_stride = merged_row_stride(a)) {
      const std::int64_t rows = a.numel() / s.k;
      const GemmLayout rows_layout = gemm_layout(rows, s.k, *row_stride, a.strides()[a.dim() - 1]);
      if (rows_layout.usable) {
        product(rows_layout.transposed, lb.transposed, rows, s.m, s.k, pa, rows_layout.ld, pb, lb.ld, po, s.m);
        return;
      }
    }
  }

  // One gemm per batch entry, on raw pointers; a broadcast batch axis has stride 0.
  auto batch_strides = [&](const Tensor& t) {
    const Shape own(t.shape().begin(), t.shape().end() - 2);
    const Dims own_strides(t.strides().begin(), t.strides().end() - 2);
    return kernels::broadcast_strides(own, own_strides, s.batch);
  };
  Dims out_strides = contiguous_strides(s.batch);
  for (std::int64_t& st : out_strides) st *= s.n * s.m;
  auto entry_product = [&](const kernels::Offsets<3>& off) {
    product(la.transposed, lb.transposed, s.n, s.m, s.k, pa + off[1], la.ld, pb + off[2], lb.ld, po + off[0], s.m);
  };
  std::vector<kernels::Offsets<3>> entries;  // (out, a, b) offsets of each batch entry
  entries.reserve(static_cast<std::size_t>(batch_numel(s.out)));
  kernels::for_each_run<3>(s.batch, {out_strides, batch_strides(a), batch_strides(b)},
                           [&](kernels::Offsets<3> off, std::int64_t count, kernels::Offsets<3> step) {
                             for (std::int64_t i = 0; i < count; ++i)
                               entries.push_back({off[0] + i * step[0], off[1] + i * step[1], off[2] + i * step[2]});
                           });
  // Independent products (attention's per-head scores, say) go to the pool whole, enough of them
  // per chunk to be worth a thread; a single large one is split inside gemm instead.
  const std::int64_t work = std::max<std::int64_t>(s.n * s.m * s.k, 1);
  const std::int64_t grain = std::max<std::int64_t>(1, kBatchedGemmGrainWork / work);
  parallel_for(0, static_cast<std::int64_t>(entries.size()), grain, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; ++i) entry_product(entries[static_cast<std::size_t>(i)]);
  });
}

// The promoted result's shape without the axes that promotion added.
Shape result_shape(const MatmulShapes& s, bool a_vector, bool b_vector) {
  Shape shape = s.out;
  if (b_vector) shape.erase(shape.size() - 1);
  if (a_vector) shape.erase(shape.size() - (b_vector ? 1 : 2));
  return shape;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  if (detail::autocast_lowers({&a, &b})) return matmul(detail::autocast_lower(a), detail::autocast_lower(b));
  if (a.dtype() != b.dtype())
    throw TypeError(message("matmul: dtype mismatch, ", dtype_name(a.dtype()), " and ", dtype_name(b.dtype())));
  if (a.dim() == 0 || b.dim() == 0)
    throw ShapeError("matmul: both operands need at least one dimension, got shapes " + a.shape().str() + " and " +
                     b.shape().str());
  const Tensor a_p = promote_lhs(a);
  const Tensor b_p = promote_rhs(b);
  const MatmulShapes s = matmul_shapes(a_p.shape(), b_p.shape(), a.shape(), b.shape());
  // bfloat16 accumulates in float32 and rounds once (not recorded: the op is recorded whole below).
  Tensor out = empty(s.out, a.dtype());
  if (a.dtype() == kBFloat16) {
    matmul_into<BFloat16>(a_p, b_p, s, out);
  } else {
    dispatch_floating(a.dtype(), "matmul", [&](auto tag) { matmul_into<decltype(tag)>(a_p, b_p, s, out); });
  }
  if (a.dim() == 1 || b.dim() == 1) {
    const Shape shape = result_shape(s, a.dim() == 1, b.dim() == 1);
    out = detail::make_view(out, shape, contiguous_strides(shape), 0);
  }

  if (any_requires_grad({&a, &b}))
    record("matmul", out, {a, b},
           [sa = SavedTensor(a), sb = SavedTensor(b), need_a = a.requires_grad(), need_b = b.requires_grad(),
            s](const Tensor& g) -> TensorList {
             // Written with ops (matmul, sum_to, reshape): differentiable again under create_graph.
             const Tensor& a = sa.unpack();
             const Tensor& b = sb.unpack();
             // reshape (a recorded view), not promote_*: a taped backward must keep a's and b's history.
             const Tensor a_p = a.dim() == 1 ? reshape(a, {1, s.k}) : a;  // a_p: (batch_a..., n, k)
             const Tensor b_p = b.dim() == 1 ? reshape(b, {s.k, 1}) : b;  // b_p: (batch_b..., k, m)
             const Tensor g_p = reshape(g, s.out);                        // g_p: (batch..., n, m)
             Tensor grad_a;
             Tensor grad_b;
             if (need_a) grad_a = reshape(sum_to(matmul(g_p, b_p.mT()), a_p.shape()), a.shape());
             if (need_b) {
               if (batch_numel(b_p.shape()) == 1 && (a_p.dim() > 2 || b.dim() == 2)) {
                 // B was shared by the whole batch: sum_i A_i^T G_i = A_rows^T G_rows over all
                 // prod(batch) * n rows, one gemm instead of a batched product and a sum.
                 const Tensor a_rows = reshape(a_p, {-1, s.k});  // a_rows: (N, k)
                 const Tensor g_rows = reshape(g_p, {-1, s.m});  // g_rows: (N, m)
                 if (b.dim() == 2 && b.strides()[0] == 1 && b.strides()[1] == s.k && s.k > 1 && s.m > 1) {
                   // B is a transposed view of a contiguous (m, k) matrix (x @ W^T): its gradient is
                   // computed as (G_rows^T A_rows)^T, so it arrives in W's own layout and reaches
                   // W.grad without a transposing copy.
                   grad_b = matmul(g_rows.mT(), a_rows).mT();
                 } else {
                   grad_b = reshape(matmul(a_rows.mT(), g_rows), b.shape());
                 }
               } else {
                 grad_b = reshape(sum_to(matmul(a_p.mT(), g_p), b_p.shape()), b.shape());
               }
             }
             return {grad_a, grad_b};
           });
  return out;
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (detail::autocast_lowers({&x, &weight, &bias}))
    return linear(detail::autocast_lower(x), detail::autocast_lower(weight), detail::autocast_lower(bias));
  if (x.dtype() != weight.dtype() || (bias.defined() && bias.dtype() != x.dtype()))
    throw TypeError(message("linear: dtype mismatch, x ", dtype_name(x.dtype()), ", weight ",
                            dtype_name(weight.dtype()),
                            (bias.defined() ? std::string(", bias ") + dtype_name(bias.dtype()) : "")));
  if (weight.dim() != 2 || x.dim() == 0 || x.shape().back() != weight.shape()[1])
    throw ShapeError("linear: expected x (..., in) and weight (out, in), got " + x.shape().str() + " and " +
                     weight.shape().str());
  const std::int64_t in = weight.shape()[1], out_features = weight.shape()[0];
  if (bias.defined() && (bias.dim() != 1 || bias.shape()[0] != out_features))
    throw ShapeError(message("linear: expected bias (", out_features, ") for weight ", weight.shape().str(), ", got ",
                             bias.shape().str()));
  Shape out_shape = x.shape();
  out_shape[out_shape.size() - 1] = out_features;
  // y = x W^T + b for element type T; bfloat16 accumulates in float32 and rounds once, with the
  // bias added before the rounding (not recorded: the op is recorded whole below).
  auto compute = [&](auto tag) {
    using T = decltype(tag);
    Tensor y = empty(out_shape, x.dtype());  // y: (..., out)
    if (y.numel() == 0) return y;
    const std::int64_t rows = y.numel() / out_features;
    // x's rows as one (rows, in) matrix: a copy only when they are not evenly spaced.
    Tensor xd = x;
    std::optional<std::int64_t> row_stride = x.dim() == 1 ? std::optional<std::int64_t>(in) : merged_row_stride(x);
    GemmLayout lx = row_stride ? gemm_layout(rows, in, *row_stride, x.strides()[x.dim() - 1]) : GemmLayout{};
    if (!lx.usable) {
      xd = kernels::dense(x);
      lx = gemm_layout(rows, in, in, 1);
    }
    const GemmLayout lw = matrix_layout(weight);  // weight (out, in), read as its transpose
    const Tensor wd = lw.usable ? weight : kernels::dense(weight);
    const GemmLayout lwd = matrix_layout(wd);
    T* py = y.data_ptr<T>();
    if constexpr (std::is_same_v<T, BFloat16>) {
      std::vector<float> wide_bias;
      if (bias.defined()) {
        const Tensor bd = kernels::dense(bias);
        wide_bias.assign(bd.data_ptr<BFloat16>(), bd.data_ptr<BFloat16>() + out_features);
      }
      kernels::gemm_rounded(lx.transposed, !lwd.transposed, rows, out_features, in, xd.data_ptr<T>(), lx.ld,
                            wd.data_ptr<T>(), lwd.ld, bias.defined() ? wide_bias.data() : nullptr, py, out_features);
    } else {
      T beta = T(0);
      if (bias.defined()) {
        const Tensor bd = kernels::dense(bias);
        const T* pb = bd.data_ptr<T>();
        parallel_for(0, rows, kernels::row_grain(out_features), [&](std::int64_t first, std::int64_t last) {
          for (std::int64_t r = first; r < last; ++r) std::copy(pb, pb + out_features, py + r * out_features);
        });
        beta = T(1);
      }
      kernels::gemm(lx.transposed, !lwd.transposed, rows, out_features, in, T(1), xd.data_ptr<T>(), lx.ld,
                    wd.data_ptr<T>(), lwd.ld, beta, py, out_features);
    }
    return y;
  };
  const Tensor out = x.dtype() == kBFloat16
                         ? compute(BFloat16{})
                         : dispatch_floating(x.dtype(), "linear", [&](auto tag) { return compute(tag); });
  if (any_requires_grad({&x, &weight, &bias}))
    record("linear", out, {x, weight, bias},
           [sx = SavedTensor(x), sw = SavedTensor(weight), need_x = x.requires_grad(), need_w = weight.requires_grad(),
            need_b = bias.defined() && bias.requires_grad(), in, out_features](const Tensor& g) -> TensorList {
             // g: (..., out). Written with ops: differentiable again under create_graph.
             const Tensor& x = sx.unpack();
             const Tensor& weight = sw.unpack();
             Tensor grad_x, grad_w, grad_b;
             if (need_x) grad_x = matmul(g, weight);  // (..., in)
             if (need_w || need_b) {
               const Tensor g_rows = reshape(g, {-1, out_features});            // (N, out)
               if (need_w) grad_w = matmul(g_rows.mT(), reshape(x, {-1, in}));  // (out, in), weight's layout
               if (need_b) grad_b = sum(g_rows, {0});
             }
             return {grad_x, grad_w, grad_b};
           });
  return out;
}

}  // namespace tapegrad
