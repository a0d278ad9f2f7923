// Tensor::index and Tensor::index_put_ over torch-style index lists: see indexing.h.
//
// Both first apply the items that make views (integers, slices, None, booleans, the Ellipsis's full
// slices), leaving the index tensors and the axes of that view they index. Advanced indexing then
// permutes those axes to the front, where ops.h's index and index_put take their tensors, and moves
// the broadcast index shape back to the first indexed axis when the indexed axes were adjacent.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "tapegrad/autograd/inplace.h"
#include "tapegrad/autograd/ops.h"

namespace tapegrad {

namespace {

using indexing::TensorIndex;
using Kind = TensorIndex::Kind;

// x after the items that make views, with the index tensors still to apply and the axes of `view`
// they index (ascending).
struct Partial {
  Tensor view;
  std::vector<Tensor> tensors;
  std::vector<int> axes;
};

// The axes of x an item takes: one for an integer, a slice or an int64 tensor, a bool tensor's rank,
// none for None, a boolean and the Ellipsis.
int axes_taken(const TensorIndex& item) {
  switch (item.kind()) {
    case Kind::Integer:
    case Kind::Slice:
      return 1;
    case Kind::Tensor:
      return item.tensor().defined() && item.tensor().dtype() == kBool ? item.tensor().dim() : 1;
    default:
      return 0;
  }
}

Partial apply_views(const Tensor& x, const std::vector<TensorIndex>& items, const char* op) {
  int taken = 0, ellipses = 0;
  for (std::size_t i = 0; i < items.size(); ++i) {
    taken += axes_taken(items[i]);
    if (items[i].kind() == Kind::Ellipsis && ++ellipses > 1)
      throw IndexError(message(op, ": a second Ellipsis at position ", i, " (an index list may hold one)"));
  }
  if (taken > x.dim())
    throw IndexError(message(op, ": the index list takes ", taken, " axes but the tensor of shape ", x.shape().str(),
                             " has ", x.dim()));
  Partial p{x, {}, {}};
  int axis = 0;  // the axis of p.view the next item takes
  // true / false, and a 0-dim bool tensor: a new axis of size 1 or 0.
  auto new_axis = [&p, &axis](bool keep) {
    p.view = p.view.unsqueeze(axis);
    if (!keep) p.view = p.view.narrow(axis, 0, 0);
    ++axis;
  };
  for (std::size_t i = 0; i < items.size(); ++i) {
    const TensorIndex& item = items[i];
    switch (item.kind()) {
      case Kind::Integer: {
        const std::int64_t n = p.view.shape()[axis], k = item.integer();
        if (k < -n || k >= n)
          throw IndexError(message(op, ": index ", k, " at position ", i, " is out of range for an axis of size ", n,
                                   " (shape ", x.shape().str(), ")"));
        p.view = p.view.select(axis, k);
        break;
      }
      case Kind::Slice: {
        const indexing::Slice& s = item.slice();
        const std::int64_t step = s.step().value_or(1);
        if (step <= 0)
          throw ValueError(message(op, ": the Slice at position ", i, " has step ", step, ", not positive"));
        p.view = p.view.slice(axis, s.start().value_or(0), s.stop().value_or(std::numeric_limits<std::int64_t>::max()),
                              step);
        ++axis;
        break;
      }
      case Kind::None:
        p.view = p.view.unsqueeze(axis++);
        break;
      case Kind::Boolean:
        new_axis(item.integer() != 0);
        break;
      case Kind::Ellipsis:
        axis += x.dim() - taken;
        break;
      case Kind::Tensor: {
        const Tensor& t = item.tensor();
        if (!t.defined()) throw ValueError(message(op, ": the tensor at position ", i, " is undefined"));
        if (t.dtype() == kInt64) {
          p.tensors.push_back(t);
          p.axes.push_back(axis++);
          break;
        }
        if (t.dtype() != kBool)
          throw TypeError(message(op, ": the tensor at position ", i, " is ", dtype_name(t.dtype()),
                                  "; index tensors must be int64 or bool"));
        if (t.dim() == 0) {
          new_axis(t.item() != 0.0);
          break;
        }
        const Shape covered(p.view.shape().begin() + axis, p.view.shape().begin() + axis + t.dim());
        if (t.shape() != covered)
          throw IndexError(message(op, ": the mask at position ", i, " has shape ", t.shape().str(),
                                   " but the axes it covers have shape ", covered.str()));
        const Tensor coordinates = nonzero(t);  // (n, rank)
        for (int d = 0; d < t.dim(); ++d) {
          p.tensors.push_back(coordinates.select(1, d));
          p.axes.push_back(axis++);
        }
        break;
      }
    }
  }
  return p;
}

// Where advanced indexing puts the index shape: at the first indexed axis when the indexed axes
// are adjacent, at the front otherwise.
int index_shape_position(const std::vector<int>& axes) {
  for (std::size_t k = 1; k < axes.size(); ++k)
    if (axes[k] != axes[k - 1] + 1) return 0;
  return axes.front();
}

// The view with the indexed axes first, the others after them in order (the view itself when they
// already are).
Tensor indexed_first(const Partial& p) {
  Dims order;
  for (int a : p.axes) order.push_back(a);
  for (int a = 0; a < p.view.dim(); ++a)
    if (std::find(p.axes.begin(), p.axes.end(), a) == p.axes.end()) order.push_back(a);
  for (int a = 0; a < order.size(); ++a)
    if (order[a] != a) return p.view.permute(order);
  return p.view;
}

// The permutation taking a result laid out (index shape of `batch` axes, the rest) to one with the
// index shape after the rest's first `position` axes, or back with `inverse`.
Dims move_batch(int rank, int batch, int position, bool inverse) {
  Dims order;
  if (!inverse) {
    for (int a = 0; a < position; ++a) order.push_back(batch + a);
    for (int a = 0; a < batch; ++a) order.push_back(a);
  } else {
    for (int a = 0; a < batch; ++a) order.push_back(position + a);
    for (int a = 0; a < position; ++a) order.push_back(a);
  }
  for (int a = batch + position; a < rank; ++a) order.push_back(a);
  return order;
}

}  // namespace

Tensor Tensor::index(const std::vector<TensorIndex>& indices) const {
  const Partial p = apply_views(*this, indices, "index");
  if (p.tensors.empty()) return p.view;
  const Tensor front = indexed_first(p);
  const Tensor out = tapegrad::index(front, p.tensors);  // (index shape, the other axes)
  const int position = index_shape_position(p.axes);
  if (position == 0) return out;
  const int batch = out.dim() - (p.view.dim() - static_cast<int>(p.axes.size()));
  return out.permute(move_batch(out.dim(), batch, position, false));
}

const Tensor& Tensor::index_put_(const std::vector<TensorIndex>& indices, const Tensor& values, bool accumulate) const {
  const Partial p = apply_views(*this, indices, "index_put_");
  if (p.tensors.empty()) {
    if (accumulate) p.view.add_(values);
    else p.view.copy_(values);
    return *this;
  }
  const Tensor front = indexed_first(p);
  const int position = index_shape_position(p.axes);
  Tensor v = values;
  if (position != 0) {
    // values broadcast to the result's shape (index shape in the middle), then laid out as
    // index_put takes them (index shape first).
    Shape index_shape = p.tensors.front().shape();
    for (const Tensor& t : p.tensors) index_shape = broadcast_shapes(index_shape, t.shape(), "index_put_");
    const Shape& rest = front.shape();  // the indexed axes first, then the rest
    const int indexed = static_cast<int>(p.axes.size());
    Shape result(rest.begin() + indexed, rest.begin() + indexed + position);
    for (const std::int64_t n : index_shape) result.push_back(n);
    for (int a = indexed + position; a < rest.size(); ++a) result.push_back(rest[a]);
    if (broadcast_shapes(values.shape(), result, "index_put_") != result)
      throw ShapeError(message("index_put_: values of shape ", values.shape().str(), " do not broadcast to ",
                               result.str(), ", the shape of the entries indexed"));
    v = values.expand(result).permute(move_batch(result.size(), index_shape.size(), position, true));
  }
  detail::index_put_leading(front, p.tensors, v, accumulate);
  return *this;
}

const Tensor& Tensor::index_put_(const std::vector<TensorIndex>& indices, double value) const {
  const Partial p = apply_views(*this, indices, "index_put_");
  if (p.tensors.empty()) {
    p.view.fill_(value);
    return *this;
  }
  const Tensor front = indexed_first(p);
  detail::index_put_leading(front, p.tensors, full({}, value, dtype()), false);
  return *this;
}

}  // namespace tapegrad
