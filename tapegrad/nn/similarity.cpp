// normalize and cosine_similarity, composed from autograd ops (norm, clamp, division, sum).

#include "tapegrad/nn/similarity.h"

#include <limits>
#include <string>
#include <vector>

#include "tapegrad/autograd/shape.h"

namespace tapegrad::nn {

Tensor normalize(const Tensor& x, double p, std::int64_t axis, double eps) {
  const Tensor denominator = clamp(norm(x, p, {axis}, /*keepdim=*/true), eps, std::nullopt);  // x's rank, 1 on axis
  return x / denominator;
}

Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, std::int64_t axis, double eps) {
  const Shape shape = broadcast_shapes(x1.shape(), x2.shape(), "cosine_similarity");
  const Tensor a = x1.shape() == shape ? x1 : expand(x1, shape);
  const Tensor b = x2.shape() == shape ? x2 : expand(x2, shape);
  return sum(normalize(a, 2.0, axis, eps) * normalize(b, 2.0, axis, eps), {axis});
}

Neighbors nearest_neighbors(const Tensor& table, const Tensor& queries, std::int64_t k, const Tensor& exclude) {
  if (table.dim() != 2 || (queries.dim() != 1 && queries.dim() != 2) || queries.shape().back() != table.shape()[1])
    throw ShapeError("nearest_neighbors: expected a table (V, D) and queries (Q, D) or (D), got " +
                     table.shape().str() + " and " + queries.shape().str());
  const std::int64_t rows = table.shape()[0];
  const bool single = queries.dim() == 1;
  const Tensor q = single ? unsqueeze(queries, 0) : queries;  // (Q, D)
  const std::int64_t count = q.shape()[0];
  const std::int64_t most = exclude.defined() ? rows - 1 : rows;
  if (k < 1 || k > most)
    throw ValueError(message("nearest_neighbors: k must be in [1, ", most, "] for a table of ", rows, " rows",
                             (exclude.defined() ? " less the excluded one" : ""), ", got ", k));
  Tensor sims = matmul(normalize(q, 2.0, 1), normalize(table, 2.0, 1).mT());  // (Q, V)
  if (exclude.defined()) {
    if (exclude.dtype() != kInt64 || exclude.numel() != count || exclude.dim() != (single ? 0 : 1))
      throw ShapeError("nearest_neighbors: exclude must be Int64 " + (single ? std::string("()") : Shape{count}.str()) +
                       ", got " + dtype_name(exclude.dtype()) + " " + exclude.shape().str());
    const std::vector<std::int64_t> rows_out = exclude.reshape({count}).to_vector<std::int64_t>();
    std::vector<bool> mask(static_cast<std::size_t>(count * rows), false);
    for (std::int64_t i = 0; i < count; ++i) {
      const std::int64_t r = rows_out[static_cast<std::size_t>(i)];
      if (r < -1 || r >= rows)
        throw ValueError(message("nearest_neighbors: excluded row ", r, " is outside [-1, ", rows, ")"));
      if (r >= 0) mask[static_cast<std::size_t>(i * rows + r)] = true;
    }
    sims = masked_fill(sims, from_vector(mask, {count, rows}), -std::numeric_limits<double>::infinity());
  }
  auto [values, indices] = topk(sims, k, 1);
  if (single) return {values.select(0, 0), indices.select(0, 0)};
  return {values, indices};
}

}  // namespace tapegrad::nn
