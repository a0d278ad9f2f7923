// Grids, products and bins (ops.h): meshgrid, cartesian_prod, kron, diag_embed and cdist composed
// from differentiable ops; tril/triu_indices, searchsorted, bucketize and histc on data.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "tapegrad/autograd/autocast.h"
#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/graph.h"
#include "tapegrad/autograd/ops.h"

namespace tapegrad {

std::vector<Tensor> meshgrid(const std::vector<Tensor>& tensors, MeshIndexing indexing) {
  if (tensors.empty()) throw ValueError("meshgrid: expected at least one tensor");
  for (std::size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].dim() != 1)
      throw ShapeError(message("meshgrid: tensor ", i, " must be 1-D, got ", tensors[i].shape().str()));
  const bool xy = indexing == MeshIndexing::XY && tensors.size() >= 2;
  // With XY the first two tensors trade places, and their grids the first two axes back.
  std::vector<Tensor> order = tensors;
  if (xy) std::swap(order[0], order[1]);
  Shape full;
  for (const Tensor& t : order) full.push_back(t.size(0));
  std::vector<Tensor> grids;
  for (std::size_t i = 0; i < order.size(); ++i) {
    Shape along = Shape::filled(static_cast<int>(order.size()), 1);
    along[static_cast<int>(i)] = order[i].size(0);
    grids.push_back(expand(order[i].reshape(along), full));
  }
  if (xy) std::swap(grids[0], grids[1]);
  return grids;
}

Tensor cartesian_prod(const std::vector<Tensor>& tensors) {
  if (tensors.empty()) throw ValueError("cartesian_prod: expected at least one tensor");
  if (tensors.size() == 1) {
    if (tensors[0].dim() != 1)
      throw ShapeError(message("cartesian_prod: tensor 0 must be 1-D, got ", tensors[0].shape().str()));
    return tensors[0];
  }
  std::vector<Tensor> columns;
  for (const Tensor& grid : meshgrid(tensors)) columns.push_back(grid.reshape({grid.numel()}));
  return stack(columns, 1);
}

Tensor kron(const Tensor& a, const Tensor& b) {
  const int rank = std::max(a.dim(), b.dim());
  if (2 * rank > kMaxRank)
    throw ShapeError(message("kron: inputs of at most ", kMaxRank / 2, " axes (its product takes twice as many), got ",
                             a.shape().str(), " and ", b.shape().str()));
  // a as (a0, 1, a1, 1, ...), b as (1, b0, 1, b1, ...): their product (a0, b0, a1, b1, ...) merged in pairs.
  Shape a_shape, b_shape, out;
  for (int i = 0; i < rank; ++i) {
    const std::int64_t ai = i < rank - a.dim() ? 1 : a.size(i - (rank - a.dim()));
    const std::int64_t bi = i < rank - b.dim() ? 1 : b.size(i - (rank - b.dim()));
    a_shape.push_back(ai);
    a_shape.push_back(1);
    b_shape.push_back(1);
    b_shape.push_back(bi);
    out.push_back(ai * bi);
  }
  return (a.reshape(a_shape) * b.reshape(b_shape)).reshape(out);
}

Tensor diag_embed(const Tensor& x, std::int64_t offset) {
  if (x.dim() < 1) throw ShapeError("diag_embed: expected a tensor of at least one axis, got a scalar");
  constexpr std::int64_t kLargestOffset = std::int64_t{1} << 31;  // beyond it the square's size overflows
  if (offset < -kLargestOffset || offset > kLargestOffset)
    throw ValueError(message("diag_embed: offset ", offset, " is outside [-2^31, 2^31]"));
  const std::int64_t n = x.size(-1);
  const std::int64_t m = n + std::abs(offset);
  // Entry i goes to the flat position row * m + column of its (row, column) on the diagonal.
  std::vector<std::int64_t> positions(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    positions[static_cast<std::size_t>(i)] = offset >= 0 ? i * m + i + offset : (i - offset) * m + i;
  Shape flat = x.shape();
  flat[flat.size() - 1] = m * m;
  Shape square = x.shape();
  square[square.size() - 1] = m;
  square.push_back(m);
  Shape index_shape = Shape::filled(x.dim(), 1);
  index_shape[x.dim() - 1] = n;
  const Tensor index = expand(from_vector(positions, index_shape), x.shape());
  return scatter(zeros(flat, x.dtype()), -1, index, x).reshape(square);
}

namespace {

// The p = 2 distances between the rows of a (..., P, M) and b (..., R, M), of one floating dtype and one
// batch shape, in product form. The gradient, the incoming one times (a_i - b_j) / d_ij summed (0 where
// d_ij = 0), is built from taped ops, so it has a second derivative away from zero distances.
Tensor euclidean_by_product(const Tensor& a, const Tensor& b) {
  Tensor out;
  {
    NoGradGuard no_grad;
    const Tensor bt = transpose(b, -2, -1);
    out = sqrt(clamp_min(sum(a * a, {-1}, true) + sum(bt * bt, {-2}, true) - 2.0 * matmul(a, bt), 0.0));
  }
  if (any_requires_grad({&a, &b}))
    record("cdist", out, {a, b},
           [sa = SavedTensor(a), sb = SavedTensor(b), sd = SavedTensor::output(out)](const Tensor& g) -> TensorList {
             const Tensor &a = sa.unpack(), &b = sb.unpack(), &d = sd.unpack();
             const Tensor apart = ne(d, 0.0);
             // g / d where d > 0; the divisor is 1 elsewhere so that no branch of the where holds 0 / 0.
             const Tensor ratio = where(apart, g / where(apart, d, 1.0), 0.0);  // (..., P, R)
             const Tensor ratio_t = transpose(ratio, -2, -1);
             return {a * sum(ratio, {-1}, true) - matmul(ratio, b), b * sum(ratio_t, {-1}, true) - matmul(ratio_t, a)};
           });
  return out;
}

}  // namespace

Tensor cdist(const Tensor& x1, const Tensor& x2, double p, CdistMode mode) {
  const char* op = "cdist";
  if (!(p >= 0.0)) throw ValueError(message(op, ": p must be non-negative, got ", p));
  if (x1.dim() < 2 || x2.dim() < 2 || x1.size(-1) != x2.size(-1))
    throw ShapeError(message(op, ": expected x1 (..., P, M) and x2 (..., R, M) with the same M, got ", x1.shape().str(),
                             " and ", x2.shape().str()));
  if (!x1.is_floating_point() || !x2.is_floating_point())
    throw TypeError(message(op, ": expected floating-point tensors, got ", dtype_name(x1.dtype()), " and ",
                            dtype_name(x2.dtype())));
  if (promote_types(x1.dtype(), x2.dtype()) == kBFloat16)  // float32 policy (autocast.h), as torch's autocast
    return detail::precision_result(cdist(x1.to(kFloat32), x2.to(kFloat32), p, mode), kBFloat16);
  const std::int64_t rows1 = x1.size(-2), rows2 = x2.size(-2);
  if (p == 0.0) {
    // The count of differing coordinates: constant between jumps, so its gradient is 0 (as torch's).
    const Tensor differ = ne(x1.detach().unsqueeze(-2) - x2.detach().unsqueeze(-3), 0.0);
    const Tensor count = sum(differ.to(promote_types(x1.dtype(), x2.dtype())), {-1});
    if (any_requires_grad({&x1, &x2}))
      record(op, count, {x1, x2},
             [shape1 = x1.shape(), shape2 = x2.shape(), dtype1 = x1.dtype(), dtype2 = x2.dtype()](const Tensor&) {
               return TensorList{zeros(shape1, dtype1), zeros(shape2, dtype2)};
             });
    return count;
  }
  const bool product = p == 2.0 && (mode == CdistMode::MmForEuclid ||
                                    (mode == CdistMode::MmForEuclidIfNecessary && (rows1 > 25 || rows2 > 25)));
  // (..., P, 1, M) - (..., 1, R, M) -> (..., P, R, M), normed over M.
  if (!product) return norm(x1.unsqueeze(-2) - x2.unsqueeze(-3), p, {-1});
  const DType dtype = promote_types(x1.dtype(), x2.dtype());
  const Shape& s1 = x1.shape();
  const Shape& s2 = x2.shape();
  const Shape batch = broadcast_shapes(Shape(s1.begin(), s1.end() - 2), Shape(s2.begin(), s2.end() - 2), op);
  Shape shape1 = batch, shape2 = batch;
  shape1.push_back(rows1);
  shape1.push_back(x1.size(-1));
  shape2.push_back(rows2);
  shape2.push_back(x2.size(-1));
  detail::AutocastOffGuard autocast_off;  // the squares cancel: the product stays in the inputs' precision
  return euclidean_by_product(expand(x1.to(dtype), shape1), expand(x2.to(dtype), shape2));
}

namespace {

Tensor triangle_indices(std::int64_t rows, std::int64_t cols, std::int64_t offset, bool lower, const char* op) {
  if (rows < 0 || cols < 0) throw ValueError(message(op, ": rows and cols must be >= 0, got ", rows, " and ", cols));
  std::vector<std::int64_t> r, c;
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j)
      if (lower ? j - i <= offset : j - i >= offset) {
        r.push_back(i);
        c.push_back(j);
      }
  const auto k = static_cast<std::int64_t>(r.size());
  r.insert(r.end(), c.begin(), c.end());
  return from_vector(r, {2, k});
}

}  // namespace

Tensor tril_indices(std::int64_t rows, std::int64_t cols, std::int64_t offset) {
  return triangle_indices(rows, cols, offset, true, "tril_indices");
}

Tensor triu_indices(std::int64_t rows, std::int64_t cols, std::int64_t offset) {
  return triangle_indices(rows, cols, offset, false, "triu_indices");
}

Tensor searchsorted(const Tensor& sorted, const Tensor& values, bool right) {
  const char* op = "searchsorted";
  if (sorted.dim() < 1) throw ShapeError(message(op, ": sorted must have at least one axis, got a scalar"));
  if (sorted.dtype() == kBool || values.dtype() == kBool)
    throw TypeError(message(op, ": expected numeric tensors, got ", dtype_name(sorted.dtype()), " and ",
                            dtype_name(values.dtype())));
  const bool shared = sorted.dim() == 1;
  if (!shared) {
    bool fits = values.dim() == sorted.dim();
    for (int i = 0; fits && i < sorted.dim() - 1; ++i) fits = values.size(i) == sorted.size(i);
    if (!fits)
      throw ShapeError(message(op, ": sorted ", sorted.shape().str(), " and values ", values.shape().str(),
                               " must have the same leading axes (or sorted 1-D)"));
  }
  const std::int64_t n = sorted.size(-1);
  const std::vector<double> boundaries = sorted.contiguous().to_vector<double>();
  const std::vector<double> queries = values.contiguous().to_vector<double>();
  const std::int64_t per_row = shared || values.dim() == 0 ? 0 : values.size(-1);
  // A binary search for the first entry >= v (> v when right), with IEEE comparisons as torch's: a
  // NaN value compares false against everything and lands at the end.
  std::vector<std::int64_t> out(queries.size());
  for (std::size_t q = 0; q < queries.size(); ++q) {
    const std::size_t row = shared ? 0 : q / static_cast<std::size_t>(per_row);
    const double* first = boundaries.data() + row * static_cast<std::size_t>(n);
    const double v = queries[q];
    std::int64_t low = 0, high = n;
    while (low < high) {
      const std::int64_t mid = low + (high - low) / 2;
      const double at = first[mid];
      if (right ? !(at > v) : !(at >= v)) low = mid + 1;
      else high = mid;
    }
    out[q] = low;
  }
  return from_vector(out, values.shape());
}

Tensor bucketize(const Tensor& input, const Tensor& boundaries, bool right) {
  if (boundaries.dim() != 1)
    throw ShapeError(message("bucketize: boundaries must be 1-D, got ", boundaries.shape().str()));
  return searchsorted(boundaries, input, right);
}

Tensor histc(const Tensor& x, std::int64_t bins, double min, double max) {
  if (bins < 1) throw ValueError(message("histc: bins must be at least 1, got ", bins));
  if (!std::isfinite(min) || !std::isfinite(max))
    throw ValueError(message("histc: min and max must be finite, got ", min, " and ", max));
  if (min > max) throw ValueError(message("histc: min ", min, " is above max ", max));
  if (!x.is_floating_point())
    throw TypeError(message("histc: expected a floating-point tensor, got ", dtype_name(x.dtype())));
  const std::vector<double> values = x.contiguous().to_vector<double>();
  if (min == max) {
    double low = std::numeric_limits<double>::infinity(), high = -low;
    for (const double v : values)
      if (std::isfinite(v)) {
        low = std::min(low, v);
        high = std::max(high, v);
      }
    if (low > high) low = high = 0.0;  // no finite entry
    min = low;
    max = high;
    if (min == max) {
      min -= 1.0;
      max += 1.0;
    }
  }
  std::vector<double> counts(static_cast<std::size_t>(bins), 0.0);
  for (const double v : values) {
    if (!(v >= min && v <= max)) continue;  // outside, or NaN
    auto bin = static_cast<std::int64_t>((v - min) * static_cast<double>(bins) / (max - min));
    counts[static_cast<std::size_t>(std::min(bin, bins - 1))] += 1.0;
  }
  return from_vector(counts, {bins}).to(x.dtype());
}

}  // namespace tapegrad
