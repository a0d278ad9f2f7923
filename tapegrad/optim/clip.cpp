#include "tapegrad/optim/clip.h"

#include <algorithm>
#include <cmath>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/format.h"
#include "tapegrad/autograd/sparse_rows.h"
#include "tapegrad/autograd/storage.h"

namespace tapegrad::optim {

namespace {

// Grads are expected contiguous (accumulated by the engine); a strided grad is replaced by a contiguous copy so the
// raw loops below can see one buffer. A row-sparse gradient is coalesced first (its duplicate rows summed, as the
// dense gradient would have them), and its rows are the buffer.
Tensor contiguous_grad(const Tensor& p) {
  if (p.has_sparse_grad()) {
    const SparseRows rows = p.sparse_grad().coalesce();
    p.set_sparse_grad(rows);
    return rows.values();
  }
  Tensor g = p.grad();
  if (g.defined() && !g.is_contiguous()) {
    g = g.contiguous();
    p.set_grad(g);
  }
  return g;
}

}  // namespace

double clip_grad_norm(const TensorList& params, double max_norm, double norm_type) {
  if (!(max_norm >= 0.0)) throw ValueError(message("clip_grad_norm: invalid max_norm ", max_norm));
  if (!(norm_type > 0.0)) throw ValueError(message("clip_grad_norm: invalid norm_type ", norm_type));
  NoGradGuard no_grad;
  const bool inf_norm = std::isinf(norm_type);
  TensorList grads;
  for (const Tensor& p : params) {
    Tensor g = contiguous_grad(p);
    if (g.defined()) grads.push_back(g);
  }
  // Accumulate in double whatever the dtype so float32 sums over many elements stay accurate.
  double acc = 0.0;
  for (const Tensor& g : grads) {
    dispatch_floating(g.dtype(), "clip_grad_norm", [&](auto tag) {
      using T = decltype(tag);
      const T* data = g.data_ptr<T>();  // g: (n,)
      for (std::int64_t k = 0, n = g.numel(); k < n; ++k) {
        const double a = std::abs(static_cast<double>(data[k]));
        if (inf_norm) acc = std::max(acc, a);
        else if (norm_type == 2.0) acc += a * a;
        else acc += std::pow(a, norm_type);
      }
    });
  }
  const double total = inf_norm ? acc : (norm_type == 2.0 ? std::sqrt(acc) : std::pow(acc, 1.0 / norm_type));
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1.0) {
    for (const Tensor& g : grads) {
      dispatch_floating(g.dtype(), "clip_grad_norm", [&](auto tag) {
        using T = decltype(tag);
        T* data = g.data_ptr<T>();  // g: (n,)
        const T c = static_cast<T>(coef);
        for (std::int64_t k = 0, n = g.numel(); k < n; ++k) data[k] *= c;
      });
      g.impl()->storage->bump_version();
    }
  }
  return total;
}

void clip_grad_value(const TensorList& params, double clip) {
  if (!(clip >= 0.0)) throw ValueError(message("clip_grad_value: invalid clip value ", clip));
  NoGradGuard no_grad;
  for (const Tensor& p : params) {
    Tensor g = contiguous_grad(p);
    if (!g.defined()) continue;
    dispatch_floating(g.dtype(), "clip_grad_value", [&](auto tag) {
      using T = decltype(tag);
      T* data = g.data_ptr<T>();  // g: (n,)
      const T hi = static_cast<T>(clip);
      for (std::int64_t k = 0, n = g.numel(); k < n; ++k) data[k] = std::clamp(data[k], -hi, hi);
    });
    g.impl()->storage->bump_version();
  }
}

}  // namespace tapegrad::optim
