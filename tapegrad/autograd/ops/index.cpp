// Indexing ops: index_select, gather, scatter_add, index_add, index_copy, index_fill, scatter,
// embedding, topk, one_hot.
//
// index_select, gather and the backward of index_select, gather and topk all go through two
// strided kernels, kernels::gather and kernels::scatter_add (kernels/index.h, with the other
// loops of this file), which walk the index's shape with for_each_run and replace the
// coordinate along `axis` by the index value. index_select is a
// gather whose index is a broadcast view (stride 0 off the axis), so each innermost run reads one
// index and copies a strided row. embedding has its own row-memcpy forward and row-add backward:
// it runs on every training step and is the one place a per-element loop would show.
//
// Indices are Int64 and must lie in [0, size): negative indices are an IndexError (as in
// PyTorch's gather and embedding), never wrapped.

#include <algorithm>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tapegrad/autograd/kernels/elementwise.h"
#include "tapegrad/autograd/kernels/index.h"
#include "tapegrad/autograd/kernels/strided.h"
#include "tapegrad/autograd/ops.h"
#include "tapegrad/autograd/sparse_rows.h"

namespace tapegrad {

namespace {

std::string str(std::int64_t v) { return std::to_string(v); }

void check_index_dtype(const Tensor& index, const char* op, const char* what = "index") {
  if (index.dtype() != kInt64)
    throw TypeError(message(op, ": ", what, " must be an int64 tensor, got ", dtype_name(index.dtype())));
}

void check_has_axes(const Tensor& x, const char* op) {
  if (x.dim() == 0) throw ShapeError(message(op, ": expected a tensor with at least one dimension, got a scalar"));
}

// Index tensors are saved for backward as SavedTensors (graph.h): an in-place write between
// forward and backward, which would silently send the gradient to the wrong rows, is an error.

// g added into zeros of `shape` at `index` along axis (the backward of a gather): the kernel, or,
// in a taped backward, the scatter_add op, whose own backward gathers again.
Tensor scatter_into_zeros(const Tensor& g, int axis, const Tensor& index, const Shape& shape, const char* op) {
  // bfloat16 sums are accumulated in float32 and rounded once.
  if (g.dtype() == kBFloat16) return scatter_into_zeros(g.to(kFloat32), axis, index, shape, op).to(kBFloat16);
  if (any_requires_grad({&g})) return scatter_add(zeros(shape, g.dtype()), axis, index, g);
  Tensor gx = zeros(shape, g.dtype());
  dispatch_floating(g.dtype(), op, [&](auto tag) { kernels::scatter_add<decltype(tag)>(gx, axis, index, g, op); });
  return gx;
}

// A 1-D index (n) seen as a tensor of out_shape (x's shape with n along axis) that varies only
// along axis, so index_select and its backward are a gather and a scatter_add.
Tensor index_along_axis(const Tensor& index, const Shape& out_shape, int axis) {
  Dims strides = Dims::filled(out_shape.size(), 0);
  strides[axis] = index.strides()[0];
  return detail::make_view(index, out_shape, strides, index.offset());
}

// The shape checks gather and scatter_add share: same rank, index no larger than x off the axis.
void check_index_fits(const Tensor& x, int axis, const Tensor& index, const char* op) {
  if (index.dim() != x.dim())
    throw ShapeError(message(op, ": index has rank ", str(index.dim()), " but x has rank ", str(x.dim()), " (shapes ",
                             index.shape().str(), " and ", x.shape().str(), ")"));
  for (int d = 0; d < x.dim(); ++d)
    if (d != axis && index.shape()[d] > x.shape()[d])
      throw ShapeError(message(op, ": index of shape ", index.shape().str(), " is larger than x of shape ",
                               x.shape().str(), " at axis ", str(d), " (only axis ", str(axis), " may differ)"));
}

// The src check scatter_add and scatter share: src has index's rank and is no smaller along any
// axis (as in PyTorch, a larger src is allowed: only its leading index-shaped corner is used).
void check_src_fits(const Tensor& index, const Tensor& src, const char* op) {
  if (src.dim() != index.dim())
    throw ShapeError(message(op, ": src has rank ", src.dim(), " but index has rank ", index.dim(), " (shapes ",
                             src.shape().str(), " and ", index.shape().str(), ")"));
  for (int d = 0; d < src.dim(); ++d)
    if (index.shape()[d] > src.shape()[d])
      throw ShapeError(message(op, ": index of shape ", index.shape().str(), " is larger than src of shape ",
                               src.shape().str(), " at axis ", d));
}

}  // namespace

// ---------------------------------------------------------------- nonzero
Tensor nonzero(const Tensor& x) {
  const std::vector<double> values = x.detach().to_vector<double>();
  const int rank = x.dim();
  std::vector<std::int64_t> coordinates;
  std::int64_t n = 0;
  Dims at = Dims::filled(rank, 0);  // the coordinates of the current value, counted in row-major order
  for (const double v : values) {
    if (v != 0.0) {
      coordinates.insert(coordinates.end(), at.begin(), at.end());
      ++n;
    }
    for (int d = rank - 1; d >= 0 && ++at[d] == x.shape()[d]; --d) at[d] = 0;
  }
  return from_vector(coordinates, {n, rank});
}

// ---------------------------------------------------------------- index_select
Tensor index_select(const Tensor& x, std::int64_t axis_arg, const Tensor& index) {
  check_index_dtype(index, "index_select");
  if (index.dim() != 1) throw ShapeError("index_select: index must be 1-D, got shape " + index.shape().str());
  check_has_axes(x, "index_select");
  const int axis = normalize_axis(axis_arg, x.dim(), "index_select");
  Shape out_shape = x.shape();
  out_shape[axis] = index.numel();
  const Tensor index_view = index_along_axis(index, out_shape, axis);  // (out_shape), stride 0 off the axis
  Tensor out = empty(out_shape, x.dtype());
  dispatch_all(x.dtype(), [&](auto tag) { kernels::gather<decltype(tag)>(x, axis, index_view, out, "index_select"); });
  if (any_requires_grad({&x}))
    record("index_select", out, {x},
           [axis, saved = SavedTensor(index_view), in = x.shape()](const Tensor& g) -> TensorList {
             return {scatter_into_zeros(g, axis, saved.unpack(), in, "index_select")};
           });
  return out;
}

// ---------------------------------------------------------------- gather
Tensor gather(const Tensor& x, std::int64_t axis_arg, const Tensor& index) {
  check_index_dtype(index, "gather");
  check_has_axes(x, "gather");
  const int axis = normalize_axis(axis_arg, x.dim(), "gather");
  check_index_fits(x, axis, index, "gather");
  Tensor out = empty(index.shape(), x.dtype());
  dispatch_all(x.dtype(), [&](auto tag) { kernels::gather<decltype(tag)>(x, axis, index, out, "gather"); });
  if (any_requires_grad({&x}))
    record("gather", out, {x}, [axis, saved = SavedTensor(index), in = x.shape()](const Tensor& g) -> TensorList {
      return {scatter_into_zeros(g, axis, saved.unpack(), in, "gather")};
    });
  return out;
}

// ---------------------------------------------------------------- scatter_add
Tensor scatter_add(const Tensor& x, std::int64_t axis_arg, const Tensor& index, const Tensor& src) {
  check_index_dtype(index, "scatter_add");
  check_has_axes(x, "scatter_add");
  if (x.dtype() == kBFloat16 && src.dtype() == kBFloat16)  // accumulated in float32, rounded once
    return scatter_add(x.to(kFloat32), axis_arg, index, src.to(kFloat32)).to(kBFloat16);
  if (src.dtype() != x.dtype())
    throw TypeError(message("scatter_add: x is ", dtype_name(x.dtype()), " but src is ", dtype_name(src.dtype())));
  const int axis = normalize_axis(axis_arg, x.dim(), "scatter_add");
  check_index_fits(x, axis, index, "scatter_add");
  check_src_fits(index, src, "scatter_add");

  Tensor out = empty(x.shape(), x.dtype());
  dispatch_numeric(x.dtype(), "scatter_add", [&](auto tag) {
    using T = decltype(tag);
    kernels::copy_strided(x.data_ptr<T>(), x.strides(), out.data_ptr<T>(), out.strides(), x.shape());
    kernels::scatter_add<T>(out, axis, index, src, "scatter_add");
  });
  if (any_requires_grad({&x, &src}))
    record("scatter_add", out, {x, src},
           [axis, saved = SavedTensor(index), src_shape = src.shape(), x_needs = x.requires_grad(),
            src_needs = src.requires_grad()](const Tensor& g) -> TensorList {
             // d out / d x is the identity; d out / d src reads g back where src was added.
             Tensor gsrc;
             if (src_needs && any_requires_grad({&g})) {
               // Taped: gather, then pad with zeros to src's shape (only its index-shaped corner was used).
               const Tensor& idx = saved.unpack();
               gsrc = gather(g, axis, idx);
               for (int d = 0; d < gsrc.dim(); ++d) {
                 if (gsrc.shape()[d] == src_shape[d]) continue;
                 Shape rest = gsrc.shape();
                 rest[d] = src_shape[d] - gsrc.shape()[d];
                 gsrc = concat({gsrc, zeros(rest, g.dtype())}, d);
               }
             } else if (src_needs) {
               const Tensor& idx = saved.unpack();
               gsrc = zeros(src_shape, g.dtype());
               // The index-shaped corner of gsrc; the rest of src was never used.
               const Tensor corner = detail::make_view(gsrc, idx.shape(), gsrc.strides(), gsrc.offset());
               dispatch_floating_or_bf16(g.dtype(), "scatter_add", [&](auto tag) {
                 kernels::gather<decltype(tag)>(g, axis, idx, corner, "scatter_add");
               });
             }
             return {x_needs ? g : Tensor(), gsrc};
           });
  return out;
}

// ---------------------------------------------------------------- writes at indices
// index_add, index_copy, index_fill and scatter, composed of scatter_add, where and masked_fill,
// which carry their gradients: x's flows where x was kept, src's is read back where src was written.
namespace {

// Every entry of index in [0, size): an IndexError naming op otherwise (the kernels would name
// scatter_add).
void check_index_range(const Tensor& index, std::int64_t size, int axis, const char* op) {
  const Tensor c = index.contiguous();
  const std::int64_t* p = c.data_ptr<std::int64_t>();
  for (std::int64_t i = 0; i < c.numel(); ++i)
    if (p[i] < 0 || p[i] >= size)
      throw IndexError(message(op, ": index ", p[i], " is out of range for size ", size, " along axis ", axis));
}

// The checks of index_add, index_copy and index_fill: a 1-D int64 index into x's axis, and src
// (when given) of x's shape but for index.numel() entries along the axis, in x's dtype. Returns the axis.
int check_index_write(const Tensor& x, std::int64_t axis_arg, const Tensor& index, const Tensor* src, const char* op) {
  check_index_dtype(index, op);
  check_has_axes(x, op);
  const int axis = normalize_axis(axis_arg, x.dim(), op);
  if (index.dim() != 1) throw ShapeError(message(op, ": index must be 1-D, got shape ", index.shape().str()));
  check_index_range(index, x.shape()[axis], axis, op);
  if (src) {
    Shape expected = x.shape();
    expected[axis] = index.numel();
    if (src->shape() != expected)
      throw ShapeError(message(op, ": src of shape ", src->shape().str(), " does not fit x of shape ", x.shape().str(),
                               " and ", index.numel(), " indices along axis ", axis, " (expected ", expected.str(),
                               ")"));
    if (src->dtype() != x.dtype())
      throw TypeError(message(op, ": x is ", dtype_name(x.dtype()), " but src is ", dtype_name(src->dtype())));
  }
  return axis;
}

// A 1-D index as a scatter index of `shape`: its entries along axis, broadcast over the other axes.
Tensor spread_index(const Tensor& index, int axis, Shape shape) {
  Shape along = Shape::filled(shape.size(), 1);
  along[axis] = index.numel();
  shape[axis] = index.numel();
  return index.reshape(along).expand(shape);
}

// Bool of x's shape: the entries a scatter along axis at `index` writes.
Tensor written_mask(const Tensor& x, int axis, const Tensor& index) {
  return ne(scatter_add(zeros(x.shape(), kInt64), axis, index, ones(index.shape(), kInt64)), 0.0);
}

// Bool of index's shape: whether each entry is the last, in row-major order, to write its entry of
// x (a scatter along axis); undefined when every entry is (no entry of x is written twice). Memory
// and time follow the index's size, not x's (an index_copy_ of a few rows into a large table).
Tensor last_writes(const Tensor& x, int axis, const Tensor& index) {
  const Tensor idx = index.contiguous();
  const std::int64_t* p = idx.data_ptr<std::int64_t>();
  const Dims x_strides = contiguous_strides(x.shape());
  std::vector<std::pair<std::int64_t, std::int64_t>> writes;  // (x's entry, the index entry writing it)
  writes.reserve(static_cast<std::size_t>(idx.numel()));
  Dims coord = Dims::filled(idx.dim(), 0);
  for (std::int64_t i = 0; i < idx.numel(); ++i) {
    std::int64_t offset = 0;
    for (int d = 0; d < idx.dim(); ++d) offset += (d == axis ? p[i] : coord[d]) * x_strides[d];
    writes.emplace_back(offset, i);
    for (int d = idx.dim() - 1; d >= 0 && ++coord[d] == idx.shape()[d]; --d) coord[d] = 0;  // next coordinate
  }
  std::sort(writes.begin(), writes.end());
  std::vector<bool> keep(writes.size(), true);
  bool repeated = false;
  for (std::size_t k = 0; k + 1 < writes.size(); ++k)
    if (writes[k].first == writes[k + 1].first) {  // a later write of the same entry follows
      keep[static_cast<std::size_t>(writes[k].second)] = false;
      repeated = true;
    }
  return repeated ? from_vector(keep, idx.shape()) : Tensor();
}

// x with src's entries written where a scatter along axis at index puts them, the last writer of an
// entry winning (as torch's CPU kernels); earlier writers of the same entry get no gradient.
Tensor scatter_written(const Tensor& x, int axis, const Tensor& index, const Tensor& src) {
  Tensor used = src;
  if (const Tensor keep = last_writes(x, axis, index); keep.defined()) {
    for (int d = 0; d < used.dim(); ++d) used = used.narrow(d, 0, index.shape()[d]);  // the corner scatter reads
    used = where(keep, used, 0.0);
  }
  return where(written_mask(x, axis, index), scatter_add(zeros_like(x), axis, index, used), x);
}

// The checks of scatter (as scatter_add's, with the op's name). Returns the axis.
int check_scatter(const Tensor& x, std::int64_t axis_arg, const Tensor& index, const char* op) {
  check_index_dtype(index, op);
  check_has_axes(x, op);
  const int axis = normalize_axis(axis_arg, x.dim(), op);
  check_index_fits(x, axis, index, op);
  check_index_range(index, x.shape()[axis], axis, op);
  return axis;
}

}  // namespace

namespace detail {

void write_rows(const Tensor& target, std::int64_t axis_arg, const Tensor& index, const Tensor& src, double value,
                RowWrite mode, const char* op) {
  const int axis = check_index_write(target, axis_arg, index, mode == RowWrite::Fill ? nullptr : &src, op);
  const Tensor idx = index.contiguous();
  const std::int64_t* p = idx.data_ptr<std::int64_t>();
  for (std::int64_t i = 0; i < idx.numel(); ++i) {
    const Tensor row = target.select(axis, p[i]);
    if (mode == RowWrite::Fill) row.fill_(value);
    else if (mode == RowWrite::Copy) row.copy_(src.select(axis, i));
    else row.add_(src.select(axis, i), value);
  }
}

}  // namespace detail

Tensor index_add(const Tensor& x, std::int64_t axis_arg, const Tensor& index, const Tensor& src, double alpha) {
  const int axis = check_index_write(x, axis_arg, index, &src, "index_add");
  return scatter_add(x, axis, spread_index(index, axis, x.shape()), alpha == 1.0 ? src : src * alpha);
}

Tensor index_copy(const Tensor& x, std::int64_t axis_arg, const Tensor& index, const Tensor& src) {
  const int axis = check_index_write(x, axis_arg, index, &src, "index_copy");
  return scatter_written(x, axis, spread_index(index, axis, x.shape()), src);
}

Tensor index_fill(const Tensor& x, std::int64_t axis_arg, const Tensor& index, double value) {
  const int axis = check_index_write(x, axis_arg, index, nullptr, "index_fill");
  return masked_fill(x, written_mask(x, axis, spread_index(index, axis, x.shape())), value);
}

Tensor scatter(const Tensor& x, std::int64_t axis_arg, const Tensor& index, const Tensor& src) {
  const int axis = check_scatter(x, axis_arg, index, "scatter");
  if (src.dtype() != x.dtype())
    throw TypeError(message("scatter: x is ", dtype_name(x.dtype()), " but src is ", dtype_name(src.dtype())));
  check_src_fits(index, src, "scatter");
  return scatter_written(x, axis, index, src);
}

Tensor scatter(const Tensor& x, std::int64_t axis_arg, const Tensor& index, double value) {
  const int axis = check_scatter(x, axis_arg, index, "scatter");
  return masked_fill(x, written_mask(x, axis, index), value);
}

// ---------------------------------------------------------------- advanced indexing
// index and index_put: k int64 index tensors for x's first k axes, broadcast together, read as one
// linear index into those axes flattened, then index_select / index_copy / index_add along it.
namespace {

struct LinearIndex {
  Tensor linear;      // int64, 1-D: the broadcast indices' entries as rows of x.reshape({lead, rest...})
  Shape index_shape;  // the indices' broadcast shape
  Shape rows_shape;   // {lead, x.shape[k:]...}
  Shape rest;         // x.shape[k:]
};

LinearIndex linear_index(const Tensor& x, const std::vector<Tensor>& indices, const char* op) {
  const int k = static_cast<int>(indices.size());
  if (k == 0 || k > x.dim())
    throw ShapeError(message(op, ": ", k, " index tensors for a tensor of shape ", x.shape().str(),
                             " (one for each of its first axes, at least one)"));
  Shape index_shape = indices[0].shape();
  for (int d = 0; d < k; ++d) {
    check_index_dtype(indices[d], op, d == 0 ? "index 0" : "every index");
    index_shape = broadcast_shapes(index_shape, indices[d].shape(), op);
  }
  // Row-major linear index over the first k axes; negative entries count from the end, as torch's.
  std::vector<std::int64_t> linear(static_cast<std::size_t>(index_shape.numel()), 0);
  std::int64_t lead = 1;
  for (int d = 0; d < k; ++d) {
    const std::int64_t size = x.shape()[d];
    const Tensor idx = indices[d].expand(index_shape).contiguous();
    const std::int64_t* p = idx.data_ptr<std::int64_t>();
    for (std::size_t i = 0; i < linear.size(); ++i) {
      if (p[i] < -size || p[i] >= size)
        throw IndexError(message(op, ": index ", p[i], " is out of range for size ", size, " along axis ", d));
      linear[i] = linear[i] * size + (p[i] < 0 ? p[i] + size : p[i]);
    }
    lead *= size;
  }
  Shape rest;
  for (int d = k; d < x.dim(); ++d) rest.push_back(x.shape()[d]);
  Shape rows_shape{lead};
  for (const std::int64_t n : rest) rows_shape.push_back(n);
  return {from_vector(linear, {static_cast<std::int64_t>(linear.size())}), index_shape, rows_shape, rest};
}

Shape concat_shapes(const Shape& a, const Shape& b) {
  Shape out = a;
  for (const std::int64_t n : b) out.push_back(n);
  return out;
}

}  // namespace

Tensor index(const Tensor& x, const std::vector<Tensor>& indices) {
  const LinearIndex li = linear_index(x, indices, "index");
  return index_select(x.reshape(li.rows_shape), 0, li.linear).reshape(concat_shapes(li.index_shape, li.rest));
}

Tensor index_put(const Tensor& x, const std::vector<Tensor>& indices, const Tensor& values, bool accumulate) {
  const char* op = accumulate ? "index_put (accumulate)" : "index_put";
  const LinearIndex li = linear_index(x, indices, op);
  if (values.dtype() != x.dtype())
    throw TypeError(message(op, ": x is ", dtype_name(x.dtype()), " but values are ", dtype_name(values.dtype())));
  const Shape written = concat_shapes(li.index_shape, li.rest);
  if (broadcast_shapes(values.shape(), written, op) != written)
    throw ShapeError(message(op, ": values of shape ", values.shape().str(), " do not broadcast to the indexed shape ",
                             written.str()));
  Shape rows_written = li.rows_shape;
  rows_written[0] = li.linear.numel();
  const Tensor rows = values.expand(written).reshape(rows_written);
  const Tensor flat = x.reshape(li.rows_shape);
  return (accumulate ? index_add(flat, 0, li.linear, rows) : index_copy(flat, 0, li.linear, rows)).reshape(x.shape());
}

// ---------------------------------------------------------------- embedding
Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<std::int64_t> padding_idx, bool sparse) {
  check_index_dtype(indices, "embedding", "indices");
  if (weight.dim() != 2)
    throw ShapeError("embedding: weight must be 2-D (num_embeddings, embedding_dim), got shape " +
                     weight.shape().str());
  const std::int64_t num_embeddings = weight.shape()[0];
  const std::int64_t dim = weight.shape()[1];
  std::optional<std::int64_t> pad;
  if (padding_idx) {
    const std::int64_t p = *padding_idx;
    if (p < -num_embeddings || p >= num_embeddings)
      throw IndexError("embedding: padding_idx " + str(p) + " is out of range for " + str(num_embeddings) +
                       " embeddings");
    pad = p < 0 ? p + num_embeddings : p;
  }
  Shape out_shape = indices.shape();
  out_shape.push_back(dim);

  const Tensor w = kernels::dense(weight);        // w: (V, D)
  const Tensor ids = kernels::dense(indices);     // ids: (N) flattened, N = indices.numel()
  Tensor out = empty(out_shape, weight.dtype());  // out: (N, D) flattened
  dispatch_floating(weight.dtype(), "embedding", [&](auto tag) {
    using T = decltype(tag);
    kernels::embedding_forward<T>(w.data_ptr<T>(), ids.data_ptr<std::int64_t>(), ids.numel(), num_embeddings, dim,
                                  out.data_ptr<T>());
  });
  if (sparse && any_requires_grad({&weight})) {
    if (!weight.is_leaf())
      throw GraphError("embedding: sparse gradients go to a leaf weight, but this " + weight.shape().str() +
                       " weight was computed by " + weight.grad_fn()->name + "; use dense gradients");
    record("embedding", out, {weight},
           [saved = SavedTensor(ids), leaf = std::weak_ptr<TensorImpl>(weight.impl_ptr()), num_embeddings, dim,
            pad](const Tensor& g) -> TensorList {
             const std::shared_ptr<TensorImpl> table = leaf.lock();
             if (!table) return {Tensor()};  // the weight is gone: nobody can read its gradient
             const Tensor& ids = saved.unpack();
             const Tensor gd = kernels::dense(g);  // gd: (N, D) flattened
             const std::int64_t n = ids.numel();
             const std::int64_t* id = ids.data_ptr<std::int64_t>();
             std::int64_t kept = n;
             if (pad) kept -= std::count(id, id + n, *pad);
             if (kept == n) {  // no padding: the rows are g's own, as they are (PyTorch's are a view too)
               detail::accumulate_sparse_grad(
                   table, SparseRows(ids.reshape({n}).clone(), gd.reshape({n, dim}), num_embeddings), "embedding");
               return {Tensor()};
             }
             Tensor rows_ids = empty({kept}, kInt64);      // (kept)
             Tensor rows = empty({kept, dim}, g.dtype());  // (kept, D): the rows of g off the padding index
             dispatch_floating(g.dtype(), "embedding", [&](auto tag) {
               using T = decltype(tag);
               const T* src = gd.data_ptr<T>();
               T* dst = rows.data_ptr<T>();
               std::int64_t* dst_id = rows_ids.data_ptr<std::int64_t>();
               for (std::int64_t t = 0, k = 0; t < n; ++t) {
                 if (pad && id[t] == *pad) continue;
                 dst_id[k] = id[t];
                 std::copy(src + t * dim, src + (t + 1) * dim, dst + k * dim);
                 ++k;
               }
             });
             detail::accumulate_sparse_grad(table, SparseRows(rows_ids, rows, num_embeddings), "embedding");
             return {Tensor()};
           });
  } else if (any_requires_grad({&weight})) {
    record("embedding", out, {weight},
           [saved = SavedTensor(ids), num_embeddings, dim, pad](const Tensor& g) -> TensorList {
             const Tensor& ids = saved.unpack();
             if (any_requires_grad({&g})) {
               const Tensor idx = reshape(ids, {ids.numel()});  // (N)
               // Taped: the rows of g added into zeros at their ids (scatter_add along axis 0), the
               // padding row's left out.
               Tensor rows = reshape(g, {idx.numel(), dim});  // (N, D)
               if (pad) rows = masked_fill(rows, unsqueeze(eq(idx, static_cast<double>(*pad)), 1), 0.0);
               const Tensor at = index_along_axis(idx, {idx.numel(), dim}, 0);  // (N, D), ids down the rows
               return {scatter_add(zeros({num_embeddings, dim}, g.dtype()), 0, at, rows)};
             }
             const Tensor& idx = ids;
             const Tensor gd = kernels::dense(g);                  // gd: (N, D) flattened
             Tensor gw = zeros({num_embeddings, dim}, g.dtype());  // gw: (V, D)
             dispatch_floating(g.dtype(), "embedding", [&](auto tag) {
               using T = decltype(tag);
               kernels::embedding_backward<T>(gd.data_ptr<T>(), idx.data_ptr<std::int64_t>(), idx.numel(), dim, pad,
                                              gw.data_ptr<T>());
             });
             return {gw};
           });
  }
  return out;
}

// ---------------------------------------------------------------- embedding_dot
Tensor embedding_dot(const Tensor& weight, const Tensor& indices, const Tensor& queries, bool sparse,
                     std::optional<std::int64_t> padding_idx, bool sum_repeated) {
  const char* op = "embedding_dot";
  check_index_dtype(indices, op, "indices");
  if (weight.dim() != 2 || indices.dim() != 2 || queries.dim() != 2 || queries.shape()[0] != indices.shape()[0] ||
      queries.shape()[1] != weight.shape()[1])
    throw ShapeError(message(op, ": expected weight (V, D), indices (B, N) and queries (B, D), got ",
                             weight.shape().str(), ", ", indices.shape().str(), " and ", queries.shape().str()));
  if (queries.dtype() != weight.dtype())
    throw TypeError(
        message(op, ": weight is ", dtype_name(weight.dtype()), " but queries are ", dtype_name(queries.dtype())));
  const std::int64_t num_embeddings = weight.shape()[0], dim = weight.shape()[1];
  const std::int64_t batch = indices.shape()[0], per_row = indices.shape()[1];
  const Tensor w = kernels::dense(weight);     // w: (V, D)
  const Tensor ids = kernels::dense(indices);  // ids: (B, N)
  const Tensor q = kernels::dense(queries);    // q: (B, D)
  kernels::check_embedding_ids(ids.data_ptr<std::int64_t>(), ids.numel(), num_embeddings, op);
  if (padding_idx && (*padding_idx < 0 || *padding_idx >= num_embeddings))
    throw IndexError(
        message(op, ": padding_idx ", *padding_idx, " is out of range for ", num_embeddings, " embeddings"));
  const std::int64_t pad = padding_idx.value_or(-1);
  Tensor out = empty({batch, per_row}, weight.dtype());  // out: (B, N)
  dispatch_floating(weight.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    kernels::embedding_dot_forward<T>(w.data_ptr<T>(), ids.data_ptr<std::int64_t>(), q.data_ptr<T>(), batch, per_row,
                                      dim, pad, out.data_ptr<T>());
  });
  if (!any_requires_grad({&weight, &queries})) return out;
  if (sparse && weight.requires_grad() && !weight.is_leaf())
    throw GraphError(message(op, ": sparse gradients go to a leaf weight, but this ", weight.shape().str(),
                             " weight was computed by ", weight.grad_fn()->name, "; use dense gradients"));
  const bool weight_needs = weight.requires_grad(), queries_needs = queries.requires_grad();
  record(op, out, {weight, queries},
         [saved_w = SavedTensor(weight), saved_ids = SavedTensor(ids), saved_q = SavedTensor(queries),
          leaf = sparse && weight_needs ? std::weak_ptr<TensorImpl>(weight.impl_ptr()) : std::weak_ptr<TensorImpl>(),
          sparse, sum_repeated, weight_needs, queries_needs, num_embeddings, dim, pad](const Tensor& g) -> TensorList {
           const Tensor& ids = saved_ids.unpack();
           const Tensor& wt = saved_w.unpack();
           const Tensor& qt = saved_q.unpack();
           if (is_grad_enabled() && any_requires_grad({&g, &wt, &qt})) {
             if (sparse && weight_needs)
               throw GraphError(
                   "embedding_dot: sparse gradients cannot be differentiated again; use dense gradients "
                   "to backward with create_graph");
             // Taped: the same products written with differentiable ops; padding's entries of g are 0.
             const Tensor gu =
                 unsqueeze(pad < 0 ? g : where(ne(ids, static_cast<double>(pad)), g, 0.0), 2);  // (B, N, 1)
             Tensor gq, gw;
             if (queries_needs) gq = sum(embedding(wt, ids) * gu, {1});  // (B, D)
             if (weight_needs) {
               const Tensor rows = reshape(gu * unsqueeze(qt, 1), {ids.numel(), dim});  // (B N, D)
               const Tensor at = index_along_axis(reshape(ids, {ids.numel()}), {ids.numel(), dim}, 0);
               gw = scatter_add(zeros({num_embeddings, dim}, g.dtype()), 0, at, rows);
             }
             return {gw, gq};
           }
           const Tensor gd = kernels::dense(g);  // (B, N)
           const Tensor w = kernels::dense(wt), q = kernels::dense(qt);
           const std::int64_t batch = ids.shape()[0], per_row = ids.shape()[1];
           Tensor gq, gw;
           dispatch_floating(g.dtype(), "embedding_dot", [&](auto tag) {
             using T = decltype(tag);
             if (queries_needs) {
               gq = empty({batch, dim}, g.dtype());
               kernels::embedding_dot_queries_backward<T>(w.data_ptr<T>(), ids.data_ptr<std::int64_t>(),
                                                          gd.data_ptr<T>(), batch, per_row, dim, pad, gq.data_ptr<T>());
             }
             if (!weight_needs) return;
             if (sparse) {
               // The rows of the indices that are not padding: one per position, g[b][n] q[b], or
               // with sum_repeated one per distinct index, the sum of its positions' rows.
               const std::int64_t* id = ids.data_ptr<std::int64_t>();
               std::vector<std::int64_t> at;
               at.reserve(static_cast<std::size_t>(ids.numel()));
               for (std::int64_t k = 0; k < ids.numel(); ++k)
                 if (id[k] != pad) at.push_back(k);
               const auto count = static_cast<std::int64_t>(at.size());
               std::vector<std::int64_t> kept;
               Tensor rows;
               if (sum_repeated) {
                 kernels::DistinctIds distinct = kernels::distinct_ids(id, at.data(), count);
                 rows = empty({static_cast<std::int64_t>(distinct.distinct.size()), dim}, g.dtype());  // (distinct, D)
                 kernels::embedding_dot_summed_rows<T>(q.data_ptr<T>(), gd.data_ptr<T>(), at.data(), distinct, per_row,
                                                       dim, rows.data_ptr<T>());
                 kept = std::move(distinct.distinct);
               } else {
                 kept.reserve(at.size());
                 for (const std::int64_t k : at) kept.push_back(id[k]);
                 rows = empty({count, dim}, g.dtype());  // (count, D)
                 kernels::embedding_dot_rows<T>(q.data_ptr<T>(), gd.data_ptr<T>(), at.data(), count, per_row, dim,
                                                rows.data_ptr<T>());
               }
               if (const std::shared_ptr<TensorImpl> table = leaf.lock()) {
                 const auto n = static_cast<std::int64_t>(kept.size());
                 detail::accumulate_sparse_grad(table, SparseRows(from_vector(kept, {n}), rows, num_embeddings),
                                                "embedding_dot");
               }
             } else {
               gw = zeros({num_embeddings, dim}, g.dtype());
               kernels::embedding_dot_weight_backward<T>(q.data_ptr<T>(), ids.data_ptr<std::int64_t>(),
                                                         gd.data_ptr<T>(), batch, per_row, dim, pad, gw.data_ptr<T>());
             }
           });
           return {gw, gq};
         });
  return out;
}

// ---------------------------------------------------------------- embedding_bag_sum

Tensor embedding_bag_sum(const Tensor& weight, const Tensor& indices, const std::vector<std::int64_t>& bag_starts,
                         const Tensor& scale, bool sparse, bool sum_repeated) {
  const char* op = "embedding_bag_sum";
  check_index_dtype(indices, op, "indices");
  if (weight.dim() != 2 || indices.dim() != 1)
    throw ShapeError(message(op, ": expected weight (V, D) and indices (N), got ", weight.shape().str(), " and ",
                             indices.shape().str()));
  const std::int64_t num_embeddings = weight.shape()[0], dim = weight.shape()[1], n = indices.shape()[0];
  const auto bags = static_cast<std::int64_t>(bag_starts.size());
  if (scale.defined() && scale.shape() != Shape{n})
    throw ShapeError(message(op, ": expected scale (", str(n), "), got ", scale.shape().str()));
  if (scale.defined() && scale.dtype() != weight.dtype())
    throw TypeError(
        message(op, ": weight is ", dtype_name(weight.dtype()), " but scale is ", dtype_name(scale.dtype())));
  if (bags == 0 && n > 0) throw ValueError(message(op, ": ", str(n), " indices and no bag to hold them"));
  std::vector<std::int64_t> ends(bag_starts.size()), bag_of(static_cast<std::size_t>(n));
  for (std::int64_t b = 0; b < bags; ++b) {
    const std::int64_t first = bag_starts[static_cast<std::size_t>(b)];
    const std::int64_t last = b + 1 < bags ? bag_starts[static_cast<std::size_t>(b + 1)] : n;
    if (first < 0 || last < first || last > n)
      throw ValueError(message(op, ": bag ", str(b), " runs from ", str(first), " to ", str(last), ", outside the ",
                               str(n), " indices or backwards"));
    ends[static_cast<std::size_t>(b)] = last;
    for (std::int64_t i = first; i < last; ++i) bag_of[static_cast<std::size_t>(i)] = b;
  }
  if (bags > 0 && bag_starts[0] != 0)
    throw ValueError(message(op, ": the first bag starts at ", str(bag_starts[0]), ", not 0"));
  const Tensor w = kernels::dense(weight);     // w: (V, D)
  const Tensor ids = kernels::dense(indices);  // ids: (N)
  const Tensor s = scale.defined() ? kernels::dense(scale) : Tensor();
  kernels::check_embedding_ids(ids.data_ptr<std::int64_t>(), n, num_embeddings, op);
  Tensor out = empty({bags, dim}, weight.dtype());  // out: (B, D)
  dispatch_floating(weight.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    kernels::embedding_bag_sum_forward<T>(w.data_ptr<T>(), ids.data_ptr<std::int64_t>(),
                                          s.defined() ? s.data_ptr<T>() : nullptr, bag_starts.data(), ends.data(), bags,
                                          dim, out.data_ptr<T>());
  });
  if (!any_requires_grad({&weight, &scale})) return out;
  if (sparse && weight.requires_grad() && !weight.is_leaf())
    throw GraphError(message(op, ": sparse gradients go to a leaf weight, but this ", weight.shape().str(),
                             " weight was computed by ", weight.grad_fn()->name, "; use dense gradients"));
  const bool weight_needs = weight.requires_grad(), scale_needs = scale.defined() && scale.requires_grad();
  // The table is read back only for the scales' gradient and the scales only for the table's, so
  // each is saved (and version-checked) only then.
  record(
      op, out, {weight, scale},
      [saved_w = scale_needs ? SavedTensor(weight) : SavedTensor(), saved_ids = SavedTensor(ids),
       saved_s = weight_needs ? SavedTensor(scale) : SavedTensor(),
       leaf = sparse && weight_needs ? std::weak_ptr<TensorImpl>(weight.impl_ptr()) : std::weak_ptr<TensorImpl>(),
       bag_of = std::move(bag_of), sparse, sum_repeated, weight_needs, scale_needs, num_embeddings,
       dim](const Tensor& g) -> TensorList {
        const Tensor& ids = saved_ids.unpack();
        const Tensor& wt = saved_w.unpack();
        const Tensor& st = saved_s.unpack();
        const auto n = static_cast<std::int64_t>(bag_of.size());
        if (is_grad_enabled() && any_requires_grad({&g, &wt, &st})) {
          if (sparse && weight_needs)
            throw GraphError(
                "embedding_bag_sum: sparse gradients cannot be differentiated again; use dense gradients to "
                "backward with create_graph");
          // Taped: each index's row of g (its bag's), written with differentiable ops.
          const Tensor per_index = index_select(g, 0, from_vector(bag_of, {n}));  // (N, D)
          Tensor gw, gs;
          if (weight_needs) {
            const Tensor rows = st.defined() ? per_index * unsqueeze(st, 1) : per_index;
            gw = scatter_add(zeros({num_embeddings, dim}, g.dtype()), 0, index_along_axis(ids, {n, dim}, 0), rows);
          }
          if (scale_needs) gs = sum(per_index * embedding(wt, ids), {1});
          return {gw, gs};
        }
        const Tensor gd = kernels::dense(g);  // (B, D)
        Tensor gw, gs;
        dispatch_floating(g.dtype(), "embedding_bag_sum", [&](auto tag) {
          using T = decltype(tag);
          const Tensor sd = st.defined() ? kernels::dense(st) : Tensor();
          const T* scale_values = sd.defined() ? sd.data_ptr<T>() : nullptr;
          if (scale_needs) {
            gs = empty({n}, g.dtype());
            const Tensor w = kernels::dense(wt);
            kernels::embedding_bag_sum_scale_backward<T>(gd.data_ptr<T>(), bag_of.data(), w.data_ptr<T>(),
                                                         ids.data_ptr<std::int64_t>(), n, dim, gs.data_ptr<T>());
          }
          if (!weight_needs) return;
          if (sparse && sum_repeated) {
            // One row per distinct index: the sum of scale[i] g[bag of i] over its positions.
            const kernels::DistinctIds distinct = kernels::distinct_ids(ids.data_ptr<std::int64_t>(), nullptr, n);
            const auto count = static_cast<std::int64_t>(distinct.distinct.size());
            Tensor rows = empty({count, dim}, g.dtype());  // (distinct, D)
            kernels::embedding_bag_sum_summed_rows<T>(gd.data_ptr<T>(), bag_of.data(), scale_values, distinct, dim,
                                                      rows.data_ptr<T>());
            if (const std::shared_ptr<TensorImpl> table = leaf.lock())
              detail::accumulate_sparse_grad(table,
                                             SparseRows(from_vector(distinct.distinct, {count}), rows, num_embeddings),
                                             "embedding_bag_sum");
            return;
          }
          Tensor rows = empty({n, dim}, g.dtype());  // (N, D): scale[i] g[bag of i]
          kernels::embedding_bag_sum_rows<T>(gd.data_ptr<T>(), bag_of.data(), scale_values, n, dim, rows.data_ptr<T>());
          if (sparse) {
            if (const std::shared_ptr<TensorImpl> table = leaf.lock())
              detail::accumulate_sparse_grad(table, SparseRows(ids.clone().reshape({n}), rows, num_embeddings),
                                             "embedding_bag_sum");
          } else {
            gw = zeros({num_embeddings, dim}, g.dtype());
            kernels::embedding_backward<T>(rows.data_ptr<T>(), ids.data_ptr<std::int64_t>(), n, dim, std::nullopt,
                                           gw.data_ptr<T>());
          }
        });
        return {gw, gs};
      });
  return out;
}

// ---------------------------------------------------------------- topk
// sorted=false is accepted but the result is always sorted (largest first, or smallest first
// when !largest): the selection sorts its k winners anyway, and a fixed order is easier to test.
// Ties go to the lower index; NaN counts as larger than every number, as in PyTorch.
std::pair<Tensor, Tensor> topk(const Tensor& x, std::int64_t k, std::int64_t axis_arg, bool largest, bool sorted) {
  (void)sorted;
  check_has_axes(x, "topk");
  if (x.dtype() == kBFloat16) {  // bfloat16 values compare exactly in float32
    const auto [values, indices] = topk(x.to(kFloat32), k, axis_arg, largest, sorted);
    return {values.to(kBFloat16), indices};
  }
  const int axis = normalize_axis(axis_arg, x.dim(), "topk");
  const std::int64_t size = x.shape()[axis];
  if (k < 0) throw ValueError("topk: k must be non-negative, got " + str(k));
  if (k > size)
    throw ValueError("topk: k = " + str(k) + " is larger than axis " + str(axis) + " of size " + str(size) +
                     " (shape " + x.shape().str() + ")");
  Shape out_shape = x.shape();
  out_shape[axis] = k;
  Tensor values = empty(out_shape, x.dtype());  // values: (..., k, ...)
  Tensor indices = empty(out_shape, kInt64);    // indices: (..., k, ...)

  dispatch_numeric(x.dtype(), "topk", [&](auto tag) {
    using T = decltype(tag);
    const Tensor xd = kernels::dense(x);  // xd: (outer, size, inner)
    std::int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; ++d) outer *= x.shape()[d];
    for (int d = axis + 1; d < x.dim(); ++d) inner *= x.shape()[d];
    kernels::topk<T>(xd.data_ptr<T>(), outer, size, inner, k, largest, values.data_ptr<T>(),
                     indices.data_ptr<std::int64_t>());
  });
  if (any_requires_grad({&x}))
    record("topk", values, {x}, [axis, saved = SavedTensor(indices), in = x.shape()](const Tensor& g) -> TensorList {
      return {scatter_into_zeros(g, axis, saved.unpack(), in, "topk")};
    });
  return {values, indices};
}

std::pair<Tensor, Tensor> sort(const Tensor& x, std::int64_t axis, bool descending) {
  if (x.dim() == 0) return {x.clone(), zeros({}, kInt64)};
  const int a = normalize_axis(axis, x.dim(), "sort");
  return topk(x, x.size(a), a, descending, true);  // every entry, in order, ties by index
}

Tensor argsort(const Tensor& x, std::int64_t axis, bool descending) { return sort(x, axis, descending).second; }

// ---------------------------------------------------------------- one_hot
Tensor one_hot(const Tensor& indices, std::int64_t num_classes, DType dtype) {
  check_index_dtype(indices, "one_hot", "indices");
  if (num_classes <= 0) throw ValueError("one_hot: num_classes must be positive, got " + str(num_classes));
  Shape out_shape = indices.shape();
  out_shape.push_back(num_classes);
  Tensor out = zeros(out_shape, dtype);        // out: (N, C) flattened
  const Tensor ids = kernels::dense(indices);  // ids: (N) flattened
  dispatch_all(dtype, [&](auto tag) {
    using T = decltype(tag);
    kernels::one_hot<T>(ids.data_ptr<std::int64_t>(), ids.numel(), num_classes, out.data_ptr<T>());
  });
  return out;
}

}  // namespace tapegrad
