#pragma once
// Similarity functions with torch.nn.functional's semantics, composed from autograd ops, and a
// gradcheck over a module's named parameters. nn::functional (functional.h) exports both functions
// under torch's F:: names too.
//
//   Tensor unit = nn::normalize(embeddings, 2.0, -1);             // rows of length 1
//   Tensor sim = nn::cosine_similarity(queries, keys, -1);         // (N, D), (N, D) -> (N)
//   auto [sims, rows] = nn::nearest_neighbors(emb->weight(), emb->weight().select(0, w), 10, scalar_tensor(w, kInt64));

#include <cstdint>

#include "tapegrad/autograd/gradcheck.h"
#include "tapegrad/autograd/ops.h"
#include "tapegrad/nn/module.h"

namespace tapegrad::nn {

// F.normalize: x / max(norm(x, p, axis), eps), the norm taken along `axis` and broadcast back (PyTorch 1.13:
// input / input.norm(p, dim, keepdim=True).clamp_min(eps)). A zero vector stays zero; where the norm is below eps
// the gradient treats the denominator as the constant eps.
Tensor normalize(const Tensor& x, double p = 2.0, std::int64_t axis = 1, double eps = 1e-12);

// F.cosine_similarity in PyTorch 1.13: x1 and x2 broadcast together, then along `axis`
//   sum((x1 / max(|x1|, eps)) * (x2 / max(|x2|, eps)))
// (each vector scaled by its own clamped 2-norm). The axis is reduced away. Where a norm is below eps the
// gradient treats it as the constant eps (PyTorch 1.13 instead passes the gradient through its clamp, so its
// gradient differs there; the values agree).
Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, std::int64_t axis = 1, double eps = 1e-8);

// The k rows of an embedding table most cosine-similar to each query, best first (gensim's
// most_similar; word2vec's distance tool): table (V, D), queries (Q, D) or (D) -> similarities
// (Q, k) or (k), and their rows, Int64 of the same shape. exclude (Int64 (Q) or a scalar for a
// single query; -1 for none) leaves a row out of a query's answer, as the query word itself.
// ShapeError for mismatched shapes, ValueError for k outside [1, V - 1 when excluding, else V]
// or an excluded row outside [-1, V).
struct Neighbors {
  Tensor similarities;
  Tensor indices;
};
Neighbors nearest_neighbors(const Tensor& table, const Tensor& queries, std::int64_t k,
                            const Tensor& exclude = Tensor());

// gradcheck with the module's named parameters (convert the module with to(kFloat64) first); mismatches are
// reported by parameter name ("parameter 'fc1.weight' ...").
inline GradcheckResult gradcheck(const GradcheckFunction& f, const TensorList& inputs, const Module& module,
                                 const GradcheckOptions& options = {}) {
  return tapegrad::gradcheck(f, inputs, module.named_parameters(), options);
}
// The same for second derivatives (gradcheck.h's gradgradcheck).
inline GradcheckResult gradgradcheck(const GradcheckFunction& f, const TensorList& inputs, const Module& module,
                                     const GradcheckOptions& options = {}) {
  return tapegrad::gradgradcheck(f, inputs, module.named_parameters(), options);
}

}  // namespace tapegrad::nn
