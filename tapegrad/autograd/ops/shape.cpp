// Shape ops: views that share storage (reshape of viewable strides, transpose, permute,
// narrow, slice, select, expand, squeeze, unsqueeze), flip, and the joins that copy (concat, stack).
// A view's backward maps the gradient back onto the input's shape.

#include <algorithm>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "tapegrad/autograd/kernels/strided.h"
#include "tapegrad/autograd/ops.h"

namespace tapegrad {

namespace {

std::string str(std::int64_t v) { return std::to_string(v); }

// Resolves one -1 entry and checks the element count.
Shape infer_shape(const Shape& requested, std::int64_t numel, const Shape& from, const char* op) {
  Shape shape = requested;
  int infer = -1;
  std::int64_t known = 1;
  for (int d = 0; d < shape.size(); ++d) {
    if (shape[d] == -1) {
      if (infer >= 0) throw ShapeError(message(op, ": only one dimension can be -1, got ", requested.str()));
      infer = d;
    } else if (shape[d] < 0) {
      throw ShapeError(message(op, ": invalid dimension ", str(shape[d]), " in shape ", requested.str()));
    } else {
      known *= shape[d];
    }
  }
  if (infer >= 0) {
    if (known == 0 || numel % known != 0)
      throw ShapeError(message(op, ": cannot reshape a tensor of shape ", from.str(), " into ", requested.str()));
    shape[infer] = numel / known;
  }
  if (shape.numel() != numel)
    throw ShapeError(message(op, ": cannot reshape a tensor of shape ", from.str(), " (", str(numel),
                             " elements) into ", requested.str()));
  return shape;
}

// Strides that present (shape, strides) as new_shape without copying, if such strides exist:
// each run of old axes that is contiguous in memory may be split or merged freely.
std::optional<Dims> view_strides(const Shape& shape, const Dims& strides, const Shape& new_shape) {
  if (shape.numel() == 0 || shape.size() == 0) return contiguous_strides(new_shape);
  Dims result = Dims::filled(new_shape.size(), 0);
  int view_d = new_shape.size() - 1;
  std::int64_t chunk_base_stride = strides.back();
  std::int64_t tensor_numel = 1;
  std::int64_t view_numel = 1;
  for (int d = shape.size() - 1; d >= 0; --d) {
    tensor_numel *= shape[d];
    if (d == 0 || (shape[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
        result[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return result;
}

// A view of x recorded with backward `grad_fn`.
template <class F>
Tensor record_view(const char* op, const Tensor& x, const Shape& shape, const Dims& strides, std::int64_t offset,
                   F grad_fn) {
  Tensor out = detail::make_view(x, shape, strides, offset);
  if (any_requires_grad({&x})) record(op, out, {x}, grad_fn);
  return out;
}

// Backward of a view that picks part of x: scatter g into zeros of x's shape through the same
// view. An op of its own (`op`), whose backward takes the same view of its gradient, so that the
// backward of a view is differentiable again.
template <class MakeView>
Tensor scatter_into_zeros(const Tensor& g, const Shape& shape, MakeView make, const char* op) {
  Tensor gx = zeros(shape, g.dtype());
  make(gx).copy_(g.detach());
  if (any_requires_grad({&g})) record(op, gx, {g}, [make](const Tensor& gg) -> TensorList { return {make(gg)}; });
  return gx;
}

// The first defined gradient of a node with several outputs (one always is: the node runs only
// when a gradient reached it).
const Tensor& first_defined(const TensorList& grads) {
  for (const Tensor& g : grads)
    if (g.defined()) return g;
  throw GraphError("backward: no gradient reached any output");
}

}  // namespace

Tensor view(const Tensor& x, const Shape& requested) {
  const Shape shape = infer_shape(requested, x.numel(), x.shape(), "view");
  auto strides = view_strides(x.shape(), x.strides(), shape);
  if (!strides)
    throw ShapeError("view: a tensor of shape " + x.shape().str() + " with strides " + x.strides().str() +
                     " cannot be viewed as " + shape.str() + "; use reshape, which copies");
  return record_view("view", x, shape, *strides, x.offset(),
                     [in = x.shape()](const Tensor& g) -> TensorList { return {reshape(g, in)}; });
}

Tensor reshape(const Tensor& x, const Shape& requested) {
  const Shape shape = infer_shape(requested, x.numel(), x.shape(), "reshape");
  if (shape == x.shape()) return x;
  if (auto strides = view_strides(x.shape(), x.strides(), shape))
    return record_view("reshape", x, shape, *strides, x.offset(),
                       [in = x.shape()](const Tensor& g) -> TensorList { return {reshape(g, in)}; });
  return view(x.clone(), shape);
}

Tensor flatten(const Tensor& x, std::int64_t start_axis, std::int64_t end_axis) {
  if (x.dim() == 0) return reshape(x, {1});
  const int start = normalize_axis(start_axis, x.dim(), "flatten");
  const int end = normalize_axis(end_axis, x.dim(), "flatten");
  if (start > end)
    throw IndexError("flatten: start axis " + str(start_axis) + " comes after end axis " + str(end_axis));
  Shape shape;
  for (int d = 0; d < start; ++d) shape.push_back(x.shape()[d]);
  std::int64_t merged = 1;
  for (int d = start; d <= end; ++d) merged *= x.shape()[d];
  shape.push_back(merged);
  for (int d = end + 1; d < x.dim(); ++d) shape.push_back(x.shape()[d]);
  return reshape(x, shape);
}

Tensor transpose(const Tensor& x, std::int64_t axis0, std::int64_t axis1) {
  const int a = normalize_axis(axis0, x.dim(), "transpose");
  const int b = normalize_axis(axis1, x.dim(), "transpose");
  if (x.dim() == 0) return x;
  Shape shape = x.shape();
  Dims strides = x.strides();
  std::swap(shape[a], shape[b]);
  std::swap(strides[a], strides[b]);
  return record_view("transpose", x, shape, strides, x.offset(),
                     [a, b](const Tensor& g) -> TensorList { return {transpose(g, a, b)}; });
}

Tensor permute(const Tensor& x, const Dims& axes) {
  if (axes.size() != x.dim())
    throw ShapeError("permute: " + str(axes.size()) + " axes " + axes.str() + " for a tensor of rank " + str(x.dim()));
  Dims perm;
  Dims inverse = Dims::filled(x.dim(), -1);
  for (int i = 0; i < axes.size(); ++i) {
    const int a = normalize_axis(axes[i], x.dim(), "permute");
    if (inverse[a] != -1) throw IndexError("permute: axis " + str(a) + " appears twice in " + axes.str());
    inverse[a] = i;
    perm.push_back(a);
  }
  Shape shape;
  Dims strides;
  for (int i = 0; i < perm.size(); ++i) {
    shape.push_back(x.shape()[perm[i]]);
    strides.push_back(x.strides()[perm[i]]);
  }
  return record_view("permute", x, shape, strides, x.offset(),
                     [inverse](const Tensor& g) -> TensorList { return {permute(g, inverse)}; });
}

Tensor unsqueeze(const Tensor& x, std::int64_t axis) {
  const int a = normalize_axis(axis, x.dim() + 1, "unsqueeze");
  Shape shape = x.shape();
  Dims strides = x.strides();
  const std::int64_t stride = a < x.dim() ? x.shape()[a] * x.strides()[a] : 1;
  shape.insert(a, 1);
  strides.insert(a, stride);
  return record_view("unsqueeze", x, shape, strides, x.offset(),
                     [a](const Tensor& g) -> TensorList { return {squeeze(g, a)}; });
}

Tensor squeeze(const Tensor& x, std::int64_t axis) {
  const int a = normalize_axis(axis, x.dim(), "squeeze");
  if (x.dim() == 0) return x;
  if (x.shape()[a] != 1)
    throw ShapeError("squeeze: axis " + str(axis) + " of shape " + x.shape().str() + " has size " + str(x.shape()[a]) +
                     ", not 1");
  Shape shape = x.shape();
  Dims strides = x.strides();
  shape.erase(a);
  strides.erase(a);
  return record_view("squeeze", x, shape, strides, x.offset(),
                     [a](const Tensor& g) -> TensorList { return {unsqueeze(g, a)}; });
}

Tensor expand(const Tensor& x, const Shape& requested) {
  if (requested.size() < x.dim())
    throw ShapeError("expand: cannot expand shape " + x.shape().str() + " to fewer dimensions " + requested.str());
  const int lead = requested.size() - x.dim();
  Shape shape = requested;
  Dims strides = Dims::filled(requested.size(), 0);
  for (int d = 0; d < requested.size(); ++d) {
    if (d < lead) {
      if (requested[d] < 0)
        throw ShapeError("expand: -1 is not allowed for a new leading dimension in " + requested.str());
      continue;
    }
    const std::int64_t have = x.shape()[d - lead];
    if (requested[d] == -1 || requested[d] == have) {
      shape[d] = have;
      strides[d] = x.strides()[d - lead];
    } else if (have == 1 && requested[d] >= 0) {
      strides[d] = 0;
    } else {
      throw ShapeError("expand: cannot expand shape " + x.shape().str() + " to " + requested.str());
    }
  }
  if (shape == x.shape()) return x;
  return record_view("expand", x, shape, strides, x.offset(),
                     [in = x.shape()](const Tensor& g) -> TensorList { return {sum_to(g, in)}; });
}

Tensor broadcast_to(const Tensor& x, const Shape& shape) { return expand(x, shape); }

Tensor narrow(const Tensor& x, std::int64_t axis, std::int64_t start, std::int64_t length) {
  const int a = normalize_axis(axis, x.dim(), "narrow");
  if (x.dim() == 0) throw ShapeError("narrow: cannot narrow a 0-dimensional tensor");
  const std::int64_t n = x.shape()[a];
  if (start < 0) start += n;
  if (start < 0 || length < 0 || start + length > n)
    throw IndexError("narrow: start " + str(start) + " and length " + str(length) + " are out of range for axis " +
                     str(axis) + " of shape " + x.shape().str());
  Shape shape = x.shape();
  shape[a] = length;
  return record_view(
      "narrow", x, shape, x.strides(), x.offset() + start * x.strides()[a],
      [in = x.shape(), a, start, length](const Tensor& g) -> TensorList {
        return {scatter_into_zeros(
            g, in, [a, start, length](const Tensor& gx) { return narrow(gx, a, start, length); }, "narrow_backward")};
      });
}

Tensor slice(const Tensor& x, std::int64_t axis, std::int64_t start, std::int64_t end, std::int64_t step) {
  const int a = normalize_axis(axis, x.dim(), "slice");
  if (x.dim() == 0) throw ShapeError("slice: cannot slice a 0-dimensional tensor");
  if (step <= 0) throw ValueError("slice: step must be positive, got " + str(step));
  const std::int64_t n = x.shape()[a];
  // Python's clamping: negative bounds count from the end, then clip to [0, n].
  auto clip = [n](std::int64_t i) { return std::min(std::max(i < 0 ? i + n : i, std::int64_t{0}), n); };
  start = clip(start);
  end = std::max(clip(end), start);
  Shape shape = x.shape();
  shape[a] = (end - start + step - 1) / step;
  Dims strides = x.strides();
  strides[a] *= step;
  return record_view("slice", x, shape, strides, x.offset() + start * x.strides()[a],
                     [in = x.shape(), a, start, end, step](const Tensor& g) -> TensorList {
                       return {scatter_into_zeros(
                           g, in, [a, start, end, step](const Tensor& gx) { return slice(gx, a, start, end, step); },
                           "slice_backward")};
                     });
}

Tensor diagonal(const Tensor& x, std::int64_t offset, std::int64_t axis1, std::int64_t axis2) {
  const int a = normalize_axis(axis1, x.dim(), "diagonal");
  const int b = normalize_axis(axis2, x.dim(), "diagonal");
  if (a == b)
    throw ValueError("diagonal: axis1 and axis2 must differ, both are " + str(a) + " of shape " + x.shape().str());
  const std::int64_t rows = x.shape()[a], cols = x.shape()[b];
  // Entry i is x[.., i, .., i + offset, ..] (offset >= 0) or x[.., i - offset, .., i, ..].
  const std::int64_t length =
      std::max<std::int64_t>(0, offset >= 0 ? std::min(rows, cols - offset) : std::min(rows + offset, cols));
  const std::int64_t start = length == 0 ? 0 : (offset >= 0 ? offset * x.strides()[b] : -offset * x.strides()[a]);
  Shape shape;
  Dims strides;
  for (int i = 0; i < x.dim(); ++i) {
    if (i == a || i == b) continue;
    shape.push_back(x.shape()[i]);
    strides.push_back(x.strides()[i]);
  }
  shape.push_back(length);
  strides.push_back(x.strides()[a] + x.strides()[b]);
  return record_view(
      "diagonal", x, shape, strides, x.offset() + start, [in = x.shape(), offset, a, b](const Tensor& g) -> TensorList {
        return {scatter_into_zeros(
            g, in, [offset, a, b](const Tensor& gx) { return diagonal(gx, offset, a, b); }, "diagonal_backward")};
      });
}

Tensor select(const Tensor& x, std::int64_t axis, std::int64_t index) {
  const int a = normalize_axis(axis, x.dim(), "select");
  if (x.dim() == 0) throw ShapeError("select: cannot select from a 0-dimensional tensor");
  const std::int64_t n = x.shape()[a];
  if (index < -n || index >= n)
    throw IndexError("select: index " + str(index) + " is out of range for axis " + str(axis) + " of shape " +
                     x.shape().str());
  if (index < 0) index += n;
  Shape shape = x.shape();
  Dims strides = x.strides();
  shape.erase(a);
  strides.erase(a);
  return record_view("select", x, shape, strides, x.offset() + index * x.strides()[a],
                     [in = x.shape(), a, index](const Tensor& g) -> TensorList {
                       return {scatter_into_zeros(
                           g, in, [a, index](const Tensor& gx) { return select(gx, a, index); }, "select_backward")};
                     });
}

Tensor flip(const Tensor& x, const Dims& axes) {
  // A scalar takes axis 0 (or -1) as a tensor of rank 1 would, and has nothing to reverse.
  std::vector<bool> flipped(static_cast<std::size_t>(std::max(x.dim(), 1)), false);
  Tensor out = x;
  bool copied = false;
  for (const std::int64_t axis : axes) {
    const int a = normalize_axis(axis, x.dim(), "flip");
    if (flipped[a]) throw IndexError("flip: axis " + str(axis) + " appears twice in " + axes.str());
    flipped[a] = true;
    if (x.dim() == 0) continue;
    const std::int64_t n = x.size(a);
    if (n > 1) {
      out = index_select(out, a, arange(static_cast<double>(n - 1), -1.0, -1.0, kInt64));
      copied = true;
    }
  }
  return copied ? out : x.clone();  // a copy in every case, as torch's
}

namespace {

// out, or a copy of it when it still shares x's storage: roll and tile return a copy in every case,
// as torch's, also when there was nothing to move or repeat.
Tensor copy_unless_new(const Tensor& out, const Tensor& x) {
  return out.impl()->storage == x.impl()->storage ? out.clone() : out;
}

}  // namespace

Tensor roll(const Tensor& x, const Dims& shifts, const Dims& axes) {
  if (axes.size() == 0) {  // over the flattened tensor, then back to x's shape
    if (shifts.size() != 1) throw ValueError(message("roll: without axes, expected one shift, got ", shifts.str()));
    return reshape(roll(reshape(x, {-1}), shifts, {0}), x.shape());
  }
  if (shifts.size() != axes.size())
    throw ValueError(
        message("roll: ", shifts.size(), " shifts for ", axes.size(), " axes: ", shifts.str(), " and ", axes.str()));
  Tensor out = x;
  for (int i = 0; i < axes.size(); ++i) {
    const int a = normalize_axis(axes[i], x.dim(), "roll");
    const std::int64_t n = x.dim() == 0 ? 1 : x.size(a);
    if (n == 0) continue;
    const std::int64_t shift = ((shifts[i] % n) + n) % n;
    if (shift == 0 || x.dim() == 0) continue;
    // Entry j of the result is entry (j - shift) mod n of the input: the last `shift` first.
    const Tensor from = concat({arange(static_cast<double>(n - shift), static_cast<double>(n), 1.0, kInt64),
                                arange(0.0, static_cast<double>(n - shift), 1.0, kInt64)},
                               0);
    out = index_select(out, a, from);
  }
  return copy_unless_new(out, x);  // no shift left x itself
}

Tensor tile(const Tensor& x, const Dims& reps) {
  for (const std::int64_t r : reps)
    if (r < 0) throw ValueError(message("tile: repetitions must be non-negative, got ", reps.str()));
  // Both padded with leading 1s to the same rank; then x (s0, s1, ...) is viewed as (1, s0, 1, s1,
  // ...), expanded to (r0, s0, r1, s1, ...) and reshaped to (r0 s0, r1 s1, ...): one copy, and the
  // gradient sums the copies through expand's backward.
  const int rank = std::max(x.dim(), reps.size());
  Shape in = x.shape(), counts = reps;
  while (in.size() < rank) in.insert(0, 1);
  while (counts.size() < rank) counts.insert(0, 1);
  Shape interleaved, expanded, out;
  for (int i = 0; i < rank; ++i) {
    interleaved.push_back(1);
    interleaved.push_back(in[i]);
    expanded.push_back(counts[i]);
    expanded.push_back(in[i]);
    out.push_back(counts[i] * in[i]);
  }
  return copy_unless_new(reshape(expand(reshape(x, interleaved), expanded), out), x);  // reps all 1: a view
}

namespace {

// The mask of the entries of an (n, m) matrix with column - row <= diagonal (lower) or >= diagonal
// (upper).
Tensor triangle_mask(std::int64_t n, std::int64_t m, std::int64_t diagonal, bool lower) {
  Tensor mask = empty({n, m}, kBool);  // mask: (n, m)
  bool* p = mask.data_ptr<bool>();
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < m; ++j) p[i * m + j] = lower ? j - i <= diagonal : j - i >= diagonal;
  return mask;
}

Tensor triangle(const Tensor& x, std::int64_t diagonal, bool lower, const char* op) {
  if (x.dim() < 2)
    throw ShapeError(message(op, ": expected a tensor of at least 2 dimensions, got shape ", x.shape().str()));
  const Tensor keep = triangle_mask(x.size(-2), x.size(-1), diagonal, lower);
  return where(keep, x, scalar_tensor(0.0, x.dtype()));
}

}  // namespace

Tensor tril(const Tensor& x, std::int64_t diagonal) { return triangle(x, diagonal, true, "tril"); }

Tensor triu(const Tensor& x, std::int64_t diagonal) { return triangle(x, diagonal, false, "triu"); }

Tensor concat(const std::vector<Tensor>& tensors, std::int64_t axis) {
  if (tensors.empty()) throw ValueError("concat: expected at least one tensor");
  // Type promotion: the tensors meet in their result type (recorded to()s).
  const DType dtype = result_type(tensors);
  if (std::any_of(tensors.begin(), tensors.end(), [dtype](const Tensor& t) { return t.dtype() != dtype; })) {
    std::vector<Tensor> promoted;
    promoted.reserve(tensors.size());
    for (const Tensor& t : tensors) promoted.push_back(t.to(dtype));
    return concat(promoted, axis);
  }
  const Tensor& first = tensors.front();
  if (first.dim() == 0) throw ShapeError("concat: cannot concatenate 0-dimensional tensors");
  const int a = normalize_axis(axis, first.dim(), "concat");
  Shape shape = first.shape();
  shape[a] = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    bool fits = t.dim() == first.dim();
    for (int d = 0; fits && d < t.dim(); ++d) fits = d == a || t.shape()[d] == first.shape()[d];
    if (!fits)
      throw ShapeError("concat: tensor " + str(static_cast<std::int64_t>(i)) + " has shape " + t.shape().str() +
                       ", which does not match " + first.shape().str() + " outside axis " + str(a));
    shape[a] += t.shape()[a];
  }
  Tensor out = empty(shape, first.dtype());
  std::vector<std::int64_t> sizes;
  std::int64_t offset = 0;
  for (const Tensor& t : tensors) {
    dispatch_all(t.dtype(), [&](auto tag) {
      using T = decltype(tag);
      kernels::copy_strided(t.data_ptr<T>(), t.strides(), out.data_ptr<T>() + offset * out.strides()[a], out.strides(),
                            t.shape());
    });
    offset += t.shape()[a];
    sizes.push_back(t.shape()[a]);
  }
  if (any_requires_grad(tensors)) {
    std::vector<bool> needs;
    for (const Tensor& t : tensors) needs.push_back(t.requires_grad());
    record("concat", out, tensors, [a, sizes, needs](const Tensor& g) -> TensorList {
      TensorList grads;
      std::int64_t start = 0;
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        grads.push_back(needs[i] ? narrow(g, a, start, sizes[i]) : Tensor());
        start += sizes[i];
      }
      return grads;
    });
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, std::int64_t axis) {
  if (tensors.empty()) throw ValueError("stack: expected at least one tensor");
  const int a = normalize_axis(axis, tensors.front().dim() + 1, "stack");
  std::vector<Tensor> expanded;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].shape() != tensors.front().shape())
      throw ShapeError("stack: tensor " + str(static_cast<std::int64_t>(i)) + " has shape " + tensors[i].shape().str() +
                       ", tensor 0 has " + tensors.front().shape().str());
    expanded.push_back(unsqueeze(tensors[i], a));
  }
  return concat(expanded, a);
}

std::vector<Tensor> split(const Tensor& x, const std::vector<std::int64_t>& sizes, std::int64_t axis) {
  const int a = normalize_axis(axis, x.dim(), "split");
  const std::int64_t total = std::accumulate(sizes.begin(), sizes.end(), std::int64_t{0});
  for (std::int64_t s : sizes)
    if (s < 0) throw ValueError("split: negative piece size " + str(s));
  if (x.dim() == 0 || total != x.shape()[a])
    throw ShapeError("split: piece sizes add up to " + str(total) + " but axis " + str(axis) + " of shape " +
                     x.shape().str() + " has " + str(x.dim() ? x.shape()[a] : 0));
  std::vector<Tensor> pieces;
  std::int64_t start = 0;
  for (std::int64_t s : sizes) {
    Shape shape = x.shape();
    shape[a] = s;
    pieces.push_back(detail::make_view(x, shape, x.strides(), x.offset() + start * x.strides()[a]));
    start += s;
  }
  // One node for every piece: its backward runs once and joins the pieces' gradients.
  if (any_requires_grad({&x}))
    record_multi("split", pieces, {x}, [a, sizes, in = x.shape()](const TensorList& grads) -> TensorList {
      TensorList parts;
      for (std::size_t i = 0; i < grads.size(); ++i) {
        if (grads[i].defined()) {
          parts.push_back(grads[i]);
        } else {
          Shape shape = in;
          shape[a] = sizes[i];
          parts.push_back(zeros(shape, first_defined(grads).dtype()));
        }
      }
      return {concat(parts, a)};
    });
  return pieces;
}

std::vector<Tensor> unbind(const Tensor& x, std::int64_t axis) {
  const int a = normalize_axis(axis, x.dim(), "unbind");
  if (x.dim() == 0) throw ShapeError("unbind: cannot unbind a 0-dimensional tensor");
  Shape shape = x.shape();
  Dims strides = x.strides();
  shape.erase(a);
  strides.erase(a);
  std::vector<Tensor> slices;
  for (std::int64_t i = 0; i < x.shape()[a]; ++i)
    slices.push_back(detail::make_view(x, shape, strides, x.offset() + i * x.strides()[a]));
  if (any_requires_grad({&x}) && !slices.empty())
    record_multi("unbind", slices, {x}, [a, shape](const TensorList& grads) -> TensorList {
      const DType dtype = first_defined(grads).dtype();
      TensorList parts;
      for (const Tensor& g : grads) parts.push_back(g.defined() ? g : zeros(shape, dtype));
      return {stack(parts, a)};
    });
  return slices;
}

std::vector<Tensor> split(const Tensor& x, std::int64_t split_size, std::int64_t axis) {
  const int a = normalize_axis(axis, x.dim(), "split");
  if (split_size <= 0) throw ValueError("split: split_size must be positive, got " + str(split_size));
  if (x.dim() == 0) throw ShapeError("split: cannot split a 0-dimensional tensor");
  std::vector<std::int64_t> sizes;
  for (std::int64_t left = x.shape()[a]; left > 0; left -= split_size) sizes.push_back(std::min(left, split_size));
  if (sizes.empty()) sizes.push_back(0);
  return split(x, sizes, a);
}

std::vector<Tensor> chunk(const Tensor& x, std::int64_t chunks, std::int64_t axis) {
  if (chunks <= 0) throw ValueError("chunk: the number of chunks must be positive, got " + str(chunks));
  const int a = normalize_axis(axis, x.dim(), "chunk");
  if (x.dim() == 0) throw ShapeError("chunk: cannot chunk a 0-dimensional tensor");
  const std::int64_t n = x.shape()[a];
  return split(x, std::max<std::int64_t>((n + chunks - 1) / chunks, 1), a);
}

}  // namespace tapegrad
