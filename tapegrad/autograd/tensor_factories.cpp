// Creating tensors: empty (the one allocation path), full and its shorthands, arange, from
// vectors and initializer lists, and random tensors drawn from a Generator.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "tapegrad/autograd/block_pool.h"
#include "tapegrad/autograd/generator.h"
#include "tapegrad/autograd/tensor.h"

namespace tapegrad {

Tensor empty(const Shape& shape, DType dtype) {
  // The byte size and every stride must fit in 63 bits: check before multiplying. Extents of 0
  // count as 1 here, as in the strides, so (0, 2^62, 2^62) is refused although it is empty.
  const std::int64_t limit = std::numeric_limits<std::int64_t>::max() / 8;
  std::int64_t extent = 1;
  for (std::int64_t d : shape) {
    if (d < 0) throw ShapeError("empty: negative dimension in shape " + shape.str());
    const std::int64_t k = std::max<std::int64_t>(d, 1);
    if (extent > limit / k) throw ShapeError("empty: shape " + shape.str() + " has too many elements");
    extent *= k;
  }
  auto storage = std::allocate_shared<Storage>(detail::BlockAllocator<Storage>(),
                                               static_cast<std::size_t>(shape.numel()) * element_size(dtype));
  return detail::make_tensor(std::move(storage), shape, contiguous_strides(shape), 0, dtype);
}

Tensor full(const Shape& shape, double value, DType dtype) {
  Tensor t = empty(shape, dtype);
  t.fill_(value);
  return t;
}
Tensor zeros(const Shape& shape, DType dtype) { return full(shape, 0.0, dtype); }
Tensor ones(const Shape& shape, DType dtype) { return full(shape, 1.0, dtype); }
Tensor empty_like(const Tensor& t) { return empty(t.shape(), t.dtype()); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.dtype()); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), t.dtype()); }
Tensor full_like(const Tensor& t, double value) { return full(t.shape(), value, t.dtype()); }
Tensor scalar_tensor(double value, DType dtype) { return full({}, value, dtype); }

Tensor arange(double start, double end, double step, DType dtype) {
  if (step == 0.0 || !std::isfinite(step) || !std::isfinite(start) || !std::isfinite(end))
    throw ValueError(message("arange: start, end and step must be finite and step non-zero, got start ", start,
                             ", end ", end, ", step ", step));
  const double count = std::ceil((end - start) / step);
  if (count > 0x1p53)
    throw ValueError(
        message("arange: ", count, " elements are too many (start ", start, ", end ", end, ", step ", step, ")"));
  const std::int64_t n = count > 0 ? static_cast<std::int64_t>(count) : 0;
  Tensor t = empty({n}, dtype);
  dispatch_all(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data_ptr<T>();
    for (std::int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(start + static_cast<double>(i) * step);
  });
  return t;
}
Tensor arange(std::int64_t end, DType dtype) { return arange(0.0, static_cast<double>(end), 1.0, dtype); }

Tensor linspace(double start, double end, std::int64_t steps, DType dtype) {
  if (steps < 0) throw ValueError(message("linspace: steps must be non-negative, got ", steps));
  if (!std::isfinite(start) || !std::isfinite(end))
    throw ValueError(message("linspace: start and end must be finite, got ", start, " and ", end));
  Tensor t = empty({steps}, dtype);
  dispatch_numeric(dtype, "linspace", [&](auto tag) {
    using T = decltype(tag);
    // torch's kernel: the first half counts up from start and the second down from end, in the
    // dtype's own arithmetic (double for integers, then truncated), so that both ends are exact.
    using C = std::conditional_t<std::is_floating_point_v<T>, T, double>;
    const C a = static_cast<C>(start), b = static_cast<C>(end);
    const C step = steps > 1 ? (b - a) / static_cast<C>(steps - 1) : C(0);
    const std::int64_t half = steps / 2;
    T* p = t.data_ptr<T>();
    for (std::int64_t i = 0; i < steps; ++i)
      p[i] = static_cast<T>(i < half ? a + step * static_cast<C>(i) : b - step * static_cast<C>(steps - 1 - i));
  });
  return t;
}

Tensor eye(std::int64_t n, std::optional<std::int64_t> m, DType dtype) {
  const std::int64_t cols = m.value_or(n);
  if (n < 0 || cols < 0) throw ValueError(message("eye: sizes must be non-negative, got ", n, " and ", cols));
  Tensor t = zeros({n, cols}, dtype);
  dispatch_all(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data_ptr<T>();
    for (std::int64_t i = 0; i < std::min(n, cols); ++i) p[i * cols + i] = static_cast<T>(1);
  });
  return t;
}

namespace {

template <class T, class V>
Tensor from_values(const V& data, const Shape& shape) {
  if (static_cast<std::int64_t>(data.size()) != shape.numel())
    throw ShapeError(message("from_vector: ", data.size(), " values cannot fill shape ", shape.str(), " (",
                             shape.numel(), " elements)"));
  Tensor t = empty(shape, dtype_of<T>());
  T* p = t.data_ptr<T>();
  std::size_t i = 0;
  for (auto v : data) p[i++] = static_cast<T>(v);
  return t;
}

}  // namespace

Tensor from_vector(const std::vector<float>& data, const Shape& shape) { return from_values<float>(data, shape); }
Tensor from_vector(const std::vector<double>& data, const Shape& shape) { return from_values<double>(data, shape); }
Tensor from_vector(const std::vector<std::int64_t>& data, const Shape& shape) {
  return from_values<std::int64_t>(data, shape);
}
Tensor from_vector(const std::vector<bool>& data, const Shape& shape) { return from_values<bool>(data, shape); }

Tensor tensor(std::initializer_list<Number> values, DType dtype) {
  std::vector<double> flat;
  for (const Number& v : values) flat.push_back(v.value);
  return from_values<double>(flat, {static_cast<std::int64_t>(values.size())}).to(dtype);
}

Tensor tensor(std::initializer_list<std::initializer_list<double>> rows, DType dtype) {
  std::vector<double> flat;
  const std::int64_t cols = rows.size() ? static_cast<std::int64_t>(rows.begin()->size()) : 0;
  for (const auto& row : rows) {
    if (static_cast<std::int64_t>(row.size()) != cols)
      throw ShapeError(message("tensor: rows have different lengths (", cols, " and ", row.size(), ")"));
    flat.insert(flat.end(), row.begin(), row.end());
  }
  return from_values<double>(flat, {static_cast<std::int64_t>(rows.size()), cols}).to(dtype);
}

namespace {

template <class Draw>
Tensor random_tensor(const Shape& shape, DType dtype, const char* op, Draw&& draw) {
  Tensor t = empty(shape, dtype);
  dispatch_floating(dtype, op, [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data_ptr<T>();
    for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<T>(draw());
  });
  return t;
}

}  // namespace

Tensor rand(const Shape& shape, Generator& gen, DType dtype) {
  return random_tensor(shape, dtype, "rand", [&] { return gen.uniform(); });
}
Tensor randn(const Shape& shape, Generator& gen, DType dtype) {
  return random_tensor(shape, dtype, "randn", [&] { return gen.normal(); });
}
Tensor uniform(const Shape& shape, double low, double high, Generator& gen, DType dtype) {
  if (!(low <= high)) throw ValueError(message("uniform: low must not exceed high, got low ", low, ", high ", high));
  return random_tensor(shape, dtype, "uniform", [&] { return gen.uniform(low, high); });
}
Tensor normal(const Shape& shape, double mean, double std, Generator& gen, DType dtype) {
  if (!(std >= 0.0)) throw ValueError(message("normal: std must be non-negative, got ", std));
  return random_tensor(shape, dtype, "normal", [&] { return mean + std * gen.normal(); });
}
Tensor randint(std::int64_t low, std::int64_t high, const Shape& shape, Generator& gen, DType dtype) {
  if (high <= low) throw ValueError(message("randint: high must exceed low, got low ", low, ", high ", high));
  Tensor t = empty(shape, dtype);
  dispatch_all(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data_ptr<T>();
    for (std::int64_t i = 0; i < t.numel(); ++i)
      p[i] = static_cast<T>(low + static_cast<std::int64_t>(gen.randint(static_cast<std::uint64_t>(high - low))));
  });
  return t;
}

}  // namespace tapegrad
