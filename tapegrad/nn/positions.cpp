#include "tapegrad/nn/positions.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace tapegrad::nn {

namespace {

// Checks x: (..., T, dim) and that positions offset .. offset + T - 1 fit in max_len; returns T.
std::int64_t check_positions(const char* module, const Tensor& x, std::int64_t dim, std::int64_t max_len,
                             std::int64_t offset) {
  if (x.dim() < 2 || x.shape().back() != dim)
    throw ShapeError(message(module, ": expected input (..., T, ", dim, "), got shape ", x.shape().str()));
  if (!x.is_floating_point())
    throw TypeError(message(module, ": expected a floating-point input, got ", dtype_name(x.dtype())));
  const std::int64_t length = x.size(-2);
  if (offset < 0) throw ValueError(message(module, ": offset must be >= 0, got ", offset));
  if (offset > max_len - length) {  // offset + length > max_len, without overflowing for a huge offset
    const std::uint64_t last = static_cast<std::uint64_t>(offset) + static_cast<std::uint64_t>(length) - 1;
    throw ValueError(message(module, ": positions ", offset, "..", last, " (offset ", offset, ", length ", length,
                             ") exceed max_len ", max_len));
  }
  return length;
}

// The tables are computed in double: (max_len, dim) of them must fit in memory, and the product in an int64.
constexpr std::int64_t kMaxTableElements = std::int64_t{1} << 32;

void check_sizes(const char* module, std::int64_t max_len, std::int64_t dim) {
  if (max_len <= 0 || dim <= 0)
    throw ValueError(message(module, ": max_len and dim must be positive, got ", max_len, " and ", dim));
  if (max_len > kMaxTableElements / dim)
    throw ValueError(message(module, ": a table of max_len ", max_len, " x dim ", dim, " is too large (at most ",
                             kMaxTableElements, " elements)"));
}

// pos / base^(2i / dim) for column 2i and 2i + 1; computed in double whatever the table's dtype.
double angle(std::int64_t pos, std::int64_t pair, std::int64_t dim, double base) {
  return static_cast<double>(pos) * std::pow(base, -2.0 * static_cast<double>(pair) / static_cast<double>(dim));
}

}  // namespace

// ---------------------------------------------------------------- sinusoidal

SinusoidalPositionalEncodingImpl::SinusoidalPositionalEncodingImpl(const SinusoidalPositionalEncodingOptions& options)
    : options_(options) {
  const std::int64_t max_len = options.max_len(), dim = options.dim();
  const double base = options.base();
  check_sizes("SinusoidalPositionalEncoding", max_len, dim);
  if (!(base > 0.0)) {
    std::ostringstream message;
    message << "SinusoidalPositionalEncoding: base must be positive, got " << base;
    throw ValueError(message.str());
  }
  std::vector<double> values(static_cast<std::size_t>(max_len * dim));  // table: (max_len, dim)
  for (std::int64_t pos = 0; pos < max_len; ++pos)
    for (std::int64_t j = 0; j < dim; ++j) {
      const double a = angle(pos, j / 2, dim, base);
      values[static_cast<std::size_t>(pos * dim + j)] = j % 2 == 0 ? std::sin(a) : std::cos(a);
    }
  table64_ = from_vector(values, {max_len, dim});
  table_ = register_buffer("pe", table64_.to(kFloat32));
}

void SinusoidalPositionalEncodingImpl::converted_to(DType dtype) {
  NoGradGuard no_grad;
  table_.copy_(table64_.to(dtype));
}

Tensor SinusoidalPositionalEncodingImpl::forward(const Tensor& x, std::int64_t offset) {
  const std::int64_t length = check_positions("SinusoidalPositionalEncoding", x, dim(), max_len(), offset);
  Tensor rows = table().narrow(0, offset, length);  // rows: (T, D), broadcast over the leading axes
  if (rows.dtype() != x.dtype()) rows = rows.to(x.dtype());
  return x + rows;
}

namespace {

// rows: (B * T, dim) gathered from table at positions (B, T), checked against x (B, T, dim).
Tensor rows_at(const char* op, const Tensor& table, const Tensor& x, const Tensor& positions) {
  const std::int64_t range = table.shape()[0], dim = table.shape()[1];
  if (x.dim() != 3 || x.shape()[2] != dim || positions.dtype() != kInt64 || positions.dim() != 2 ||
      positions.shape()[0] != x.shape()[0] || positions.shape()[1] != x.shape()[1])
    throw ShapeError(message(op, ": expected x (B, T, ", dim, ") and Int64 positions (B, T), got x ", x.shape().str(),
                             " and ", dtype_name(positions.dtype()), " positions ", positions.shape().str()));
  const std::vector<std::int64_t> p = positions.to_vector<std::int64_t>();
  for (std::int64_t v : p)
    if (v < 0 || v >= range) throw IndexError(message(op, ": position ", v, " is outside [0, ", range, ")"));
  return index_select(table, 0, positions.reshape({-1})).reshape(x.shape());
}

}  // namespace

Tensor SinusoidalPositionalEncodingImpl::forward_at(const Tensor& x, const Tensor& positions) {
  Tensor rows = rows_at("SinusoidalPositionalEncoding", table(), x, positions);
  if (rows.dtype() != x.dtype()) rows = rows.to(x.dtype());
  return x + rows;
}

Tensor random_ordered_positions(std::int64_t rows, std::int64_t count, std::int64_t range, Generator& gen) {
  if (rows < 0 || count < 0 || count > range)
    throw ValueError(message("random_ordered_positions: need 0 <= count <= range and rows >= 0, got rows ", rows,
                             ", count ", count, ", range ", range));
  std::vector<std::int64_t> out;
  out.reserve(static_cast<std::size_t>(rows * count));
  std::vector<std::int64_t> pool(static_cast<std::size_t>(range));
  for (std::int64_t r = 0; r < rows; ++r) {
    // The first `count` entries of a partial Fisher-Yates shuffle, sorted.
    for (std::int64_t i = 0; i < range; ++i) pool[static_cast<std::size_t>(i)] = i;
    for (std::int64_t i = 0; i < count; ++i) {
      const std::int64_t j = i + static_cast<std::int64_t>(gen.randint(static_cast<std::uint64_t>(range - i)));
      std::swap(pool[static_cast<std::size_t>(i)], pool[static_cast<std::size_t>(j)]);
    }
    std::sort(pool.begin(), pool.begin() + count);
    out.insert(out.end(), pool.begin(), pool.begin() + count);
  }
  return from_vector(out, {rows, count});
}

// ---------------------------------------------------------------- learned

LearnedPositionEmbeddingImpl::LearnedPositionEmbeddingImpl(const LearnedPositionEmbeddingOptions& options)
    : max_len_(options.max_len()), dim_(options.dim()) {
  check_sizes("LearnedPositionEmbedding", max_len_, dim_);
  weight_ = register_parameter("weight", randn({max_len_, dim_}, generator_or_default(options.generator())));
}

Tensor LearnedPositionEmbeddingImpl::forward(const Tensor& x, std::int64_t offset) {
  const std::int64_t length = check_positions("LearnedPositionEmbedding", x, dim_, max_len_, offset);
  // weight rows: (T, D); narrow is a differentiable view, so only these rows get gradient.
  return x + weight_.narrow(0, offset, length);
}

Tensor LearnedPositionEmbeddingImpl::forward_at(const Tensor& x, const Tensor& positions) {
  return x + rows_at("LearnedPositionEmbedding", weight_, x, positions);
}

// ---------------------------------------------------------------- rotary

RotaryEmbeddingImpl::RotaryEmbeddingImpl(const RotaryEmbeddingOptions& options)
    : head_dim_(options.head_dim()), max_len_(options.max_len()), base_(options.base()) {
  const std::int64_t head_dim = head_dim_, max_len = max_len_;
  const double base = base_;
  check_sizes("RotaryEmbedding", max_len, head_dim);
  if (head_dim % 2 != 0)
    throw ValueError(message("RotaryEmbedding: head_dim must be even (pairs are rotated), got ", head_dim));
  if (!(base > 0.0)) {
    std::ostringstream message;
    message << "RotaryEmbedding: base must be positive, got " << base;
    throw ValueError(message.str());
  }
  const std::int64_t pairs = head_dim / 2;
  std::vector<double> cos_values(static_cast<std::size_t>(max_len * pairs));  // (max_len, Dh/2)
  std::vector<double> sin_values(cos_values.size());
  for (std::int64_t pos = 0; pos < max_len; ++pos)
    for (std::int64_t i = 0; i < pairs; ++i) {
      const double a = angle(pos, i, head_dim, base);
      cos_values[static_cast<std::size_t>(pos * pairs + i)] = std::cos(a);
      sin_values[static_cast<std::size_t>(pos * pairs + i)] = std::sin(a);
    }
  cos64_ = from_vector(cos_values, {max_len, pairs});
  sin64_ = from_vector(sin_values, {max_len, pairs});
  // Rounded once from the double angles, so float32 tables are as accurate as float32 allows.
  cos32_ = cos64_.to(kFloat32);
  sin32_ = sin64_.to(kFloat32);
}

Tensor RotaryEmbeddingImpl::forward(const Tensor& x, std::int64_t offset) const {
  const std::int64_t length = check_positions("RotaryEmbedding", x, head_dim_, max_len_, offset);
  const bool f64 = x.dtype() == kFloat64;
  const Tensor cos = (f64 ? cos64_ : cos32_).narrow(0, offset, length);  // cos, sin: (T, Dh/2)
  const Tensor sin = (f64 ? sin64_ : sin32_).narrow(0, offset, length);
  const Tensor even = x.slice(-1, 0, head_dim_, 2);  // even, odd: (..., T, Dh/2)
  const Tensor odd = x.slice(-1, 1, head_dim_, 2);
  const Tensor even_rotated = even * cos - odd * sin;
  const Tensor odd_rotated = even * sin + odd * cos;
  // stack: (..., T, Dh/2, 2); flattening the last two axes interleaves the pairs back.
  return stack({even_rotated, odd_rotated}, -1).reshape(x.shape());
}

}  // namespace tapegrad::nn
