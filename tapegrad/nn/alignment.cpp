#include "tapegrad/nn/alignment.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "tapegrad/nn/init.h"

namespace tapegrad::nn {

namespace {

const char* score_name(AlignmentScore score) {
  switch (score) {
    case AlignmentScore::Dot:
      return "dot";
    case AlignmentScore::General:
      return "general";
    case AlignmentScore::Concat:
      return "concat";
    case AlignmentScore::Additive:
      return "additive";
  }
  return "?";
}

}  // namespace

AlignmentAttentionImpl::AlignmentAttentionImpl(const AlignmentOptions& options) : options_(options) {
  const std::int64_t dq = options.query_dim(), dk = options.key_dim();
  if (dq <= 0 || dk <= 0 || options.attention_dim() < 0)
    throw ValueError(message("AlignmentAttention: query_dim and key_dim must be positive and attention_dim >= 0, got ",
                             dq, ", ", dk, " and ", options.attention_dim()));
  if (options.score() == AlignmentScore::Dot && dq != dk)
    throw ValueError(message("AlignmentAttention: the dot score needs query_dim == key_dim, got ", dq, " and ", dk,
                             " (use the general score to compare different sizes)"));
  const std::int64_t kernel = options.location_kernel();
  if (kernel < 0 || (kernel > 0 && kernel % 2 == 0))
    throw ValueError(message("AlignmentAttention: location_kernel must be 0 (none) or odd, got ", kernel));
  if (kernel > 0 && options.score() != AlignmentScore::Additive)
    throw ValueError(message("AlignmentAttention: location_kernel is for the additive score, this one is ",
                             score_name(options.score())));
  const std::int64_t a = options.attention_dim() > 0 ? options.attention_dim() : dq;
  options_.attention_dim(a);
  Generator& gen = generator_or_default(options.generator());
  options_.generator(nullptr);
  switch (options.score()) {
    case AlignmentScore::Dot:
      break;
    case AlignmentScore::General: {
      const double bound = 1.0 / std::sqrt(static_cast<double>(dk));
      weight_ = register_parameter("weight", uniform({dq, dk}, -bound, bound, gen));
      break;
    }
    case AlignmentScore::Concat:
      proj_ = register_module("proj", Linear(LinearOptions(dq + dk, a).bias(false).generator(&gen)));
      break;
    case AlignmentScore::Additive:
      query_proj_ = register_module("query_proj", Linear(LinearOptions(dq, a).generator(&gen)));
      key_proj_ = register_module("key_proj", Linear(LinearOptions(dk, a).bias(false).generator(&gen)));
      break;
  }
  if (options.score() == AlignmentScore::Concat || options.score() == AlignmentScore::Additive) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(a));
    v_ = register_parameter("v", uniform({a}, -bound, bound, gen));
  }
  if (kernel > 0) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(kernel));
    location_weight_ = register_parameter("location_weight", uniform({a, kernel}, -bound, bound, gen));
  }
}

Tensor AlignmentAttentionImpl::project_keys(const Tensor& keys) {
  if (options_.score() != AlignmentScore::Additive)
    throw ValueError(message("AlignmentAttention: project_keys is for the additive score, this one is ",
                             score_name(options_.score())));
  return key_proj_(keys);
}

AlignmentResult AlignmentAttentionImpl::forward(const Tensor& query, const Tensor& keys, const Tensor& padding,
                                                const Tensor& previous) {
  return attend(query, keys, Tensor(), padding, previous);
}

AlignmentResult AlignmentAttentionImpl::forward_projected(const Tensor& query, const Tensor& keys,
                                                          const Tensor& projected_keys, const Tensor& padding,
                                                          const Tensor& previous) {
  if (!projected_keys.defined()) throw ValueError("AlignmentAttention: forward_projected needs the projected keys");
  if (options_.score() != AlignmentScore::Additive)
    throw ValueError(message("AlignmentAttention: forward_projected is for the additive score, this one is ",
                             score_name(options_.score())));
  return attend(query, keys, projected_keys, padding, previous);
}

Tensor AlignmentAttentionImpl::location_term(const Tensor& previous) const {
  const std::int64_t batch = previous.shape()[0], source = previous.shape()[1];
  const std::int64_t radius = options_.location_kernel() / 2;
  std::vector<Tensor> shifted;  // shifted[r + o][b, j] = previous[b, j + o], zero outside the source
  for (std::int64_t o = -radius; o <= radius; ++o) {
    const std::int64_t n = std::abs(o);
    if (o == 0) shifted.push_back(previous);
    else if (n >= source) shifted.push_back(zeros({batch, source}, previous.dtype()));
    else if (o > 0)
      shifted.push_back(concat({narrow(previous, 1, o, source - o), zeros({batch, o}, previous.dtype())}, 1));
    else shifted.push_back(concat({zeros({batch, n}, previous.dtype()), narrow(previous, 1, 0, source - n)}, 1));
  }
  return matmul(stack(shifted, 2), location_weight_.mT());  // (B, S, K) (K, A)
}

AlignmentResult AlignmentAttentionImpl::attend(const Tensor& query, const Tensor& keys, const Tensor& projected_keys,
                                               const Tensor& padding, const Tensor& previous) {
  const std::int64_t dq = options_.query_dim(), dk = options_.key_dim();
  if (keys.dim() != 3 || keys.shape()[2] != dk)
    throw ShapeError(message("AlignmentAttention: expected keys (B, S, ", dk, "), got shape ", keys.shape().str()));
  const std::int64_t batch = keys.shape()[0], source = keys.shape()[1];
  if (source == 0 && batch > 0)  // as a row of padding only: a softmax over nothing
    throw ValueError(
        message("AlignmentAttention: keys ", keys.shape().str(), " have no source positions; nothing to attend to"));
  if ((query.dim() != 2 && query.dim() != 3) || query.shape()[0] != batch || query.shape().back() != dq)
    throw ShapeError(message("AlignmentAttention: expected a query (", batch, ", ", dq, ") or (", batch, ", T, ", dq,
                             ") for keys of shape ", keys.shape().str(), ", got shape ", query.shape().str()));
  if (padding.defined()) {
    if (padding.dtype() != kBool || padding.shape() != Shape{batch, source})
      throw ShapeError("AlignmentAttention: padding must be Bool " + Shape{batch, source}.str() + ", got " +
                       dtype_name(padding.dtype()) + " " + padding.shape().str());
    const std::vector<std::int64_t> pad = padding.to(kInt64).to_vector<std::int64_t>();
    for (std::int64_t b = 0; b < batch; ++b) {
      bool any = false;
      for (std::int64_t s = 0; s < source && !any; ++s) any = pad[static_cast<std::size_t>(b * source + s)] == 0;
      if (!any)
        throw ValueError(
            message("AlignmentAttention: every source position of row ", b, " is padding; nothing to attend to"));
    }
  }
  if (previous.defined() && !location_weight_.defined())
    throw ValueError("AlignmentAttention: the previous alignment is for location-aware attention (location_kernel)");
  if (previous.defined() && previous.shape() != Shape{batch, source})
    throw ShapeError("AlignmentAttention: the previous alignment must have shape " + Shape{batch, source}.str() +
                     ", got " + previous.shape().str());
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const Tensor q = query.dim() == 2 ? unsqueeze(query, 1) : query;  // (B, T, dq)
  Tensor scores, weights;                                           // (B, T, S)
  switch (options_.score()) {
    case AlignmentScore::Dot:
      scores = matmul(q, keys.mT());
      break;
    case AlignmentScore::General:
      scores = matmul(matmul(q, weight_), keys.mT());
      break;
    case AlignmentScore::Concat: {
      // W [h; z] = W_h h + W_z z, for every (query, key) pair without materialising the concatenation.
      const Tensor& w = proj_->weight();
      const Tensor e =
          tanh(unsqueeze(linear(q, narrow(w, 1, 0, dq)), 2) + unsqueeze(linear(keys, narrow(w, 1, dq, dk)), 1));
      scores = matmul(e, v_);
      break;
    }
    case AlignmentScore::Additive: {
      const Tensor pk = projected_keys.defined() ? projected_keys : key_proj_(keys);
      if (pk.shape() != Shape{batch, source, options_.attention_dim()})
        throw ShapeError("AlignmentAttention: projected keys must have shape " +
                         Shape{batch, source, options_.attention_dim()}.str() + ", got " + pk.shape().str());
      const Tensor qp = query_proj_(q);  // (B, T, A)
      if (!location_weight_.defined()) {
        scores = matmul(tanh(unsqueeze(qp, 2) + unsqueeze(pk, 1)), v_);
        break;
      }
      // Step by step: each step's alignment is the next one's location input.
      if (q.shape()[1] == 0)
        throw ShapeError("AlignmentAttention: a location-aware query needs at least one step, got shape " +
                         query.shape().str());
      Tensor prev = previous.defined() ? previous : zeros({batch, source}, keys.dtype());
      std::vector<Tensor> step_scores, step_weights;
      for (std::int64_t t = 0; t < q.shape()[1]; ++t) {
        Tensor s = matmul(tanh(unsqueeze(qp.select(1, t), 1) + pk + location_term(prev)), v_);  // (B, S)
        if (padding.defined()) s = masked_fill(s, padding, -kInf);
        prev = softmax(s, -1);
        step_scores.push_back(s);
        step_weights.push_back(prev);
      }
      scores = stack(step_scores, 1);
      weights = stack(step_weights, 1);
      break;
    }
  }
  if (!weights.defined()) {
    if (padding.defined()) scores = masked_fill(scores, unsqueeze(padding, 1), -kInf);
    weights = softmax(scores, -1);
  }
  AlignmentResult r;
  r.weights = weights;
  r.context = matmul(r.weights, keys);
  r.scores = scores;
  if (query.dim() == 2) {
    r.weights = select(r.weights, 1, 0);
    r.context = select(r.context, 1, 0);
    r.scores = select(r.scores, 1, 0);
  }
  return r;
}

}  // namespace tapegrad::nn
