// In-place writes on the tape (inplace.h): the rewrite of a tensor's history, of a view's base's
// history, and the three ops on a base's gradient that a view's region needs.

#include "tapegrad/autograd/inplace.h"

#include <utility>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/graph.h"

namespace tapegrad::detail {

namespace {

// Where a view lies in its base: the base's layout, and the view's shape, strides and offset within
// it (in elements, from the base's first element).
struct Region {
  Shape base_shape;
  Dims base_strides;
  Shape shape;
  Dims strides;
  std::int64_t offset = 0;
};

Region region_of(const TensorImpl& view, const TensorImpl& base) {
  return {base.shape, base.strides, view.shape, view.strides, view.offset - base.offset};
}

// g (of the base's shape) laid out as the base is: g itself when its strides are the base's, else a
// copy with the base's strides, over a zeroed buffer spanning the base's elements.
Tensor in_base_layout(const Tensor& g, const Region& r) {
  if (g.strides() == r.base_strides) return g;
  std::int64_t extent = 1;
  for (int d = 0; d < r.base_shape.size(); ++d) {
    if (r.base_shape[d] == 0) return g.contiguous();  // no elements, and contiguous is the base's layout then
    extent += (r.base_shape[d] - 1) * r.base_strides[d];
  }
  const Tensor buffer = zeros({extent}, g.dtype());
  Tensor laid = make_tensor(buffer.impl()->storage, r.base_shape, r.base_strides, 0, g.dtype());
  NoGradGuard no_grad;
  laid.copy_(g.detach());
  return laid;
}

// The region's elements of t, which has the base's layout.
Tensor region_view(const Tensor& t, const Region& r) { return make_view(t, r.shape, r.strides, t.offset() + r.offset); }

Tensor put_region(const Tensor& g, const Region& r);

// The region of g (a tensor of the base's shape): the forward of a view made anew.
Tensor take_region(const Tensor& g, const Region& r) {
  Tensor out = region_view(in_base_layout(g, r), r);
  record("as_strided", out, {g}, [r](const Tensor& gg) { return TensorList{put_region(gg, r)}; });
  return out;
}

// Zeros of the base's shape with g (of the view's shape) in the region: take_region's gradient.
Tensor put_region(const Tensor& g, const Region& r) {
  Tensor out = in_base_layout(zeros(r.base_shape, g.dtype()), r);
  {
    NoGradGuard no_grad;
    region_view(out, r).copy_(g.detach());
  }
  record("as_strided_backward", out, {g}, [r](const Tensor& gg) { return TensorList{take_region(gg, r)}; });
  return out;
}

// g (of the base's shape) with the region zeroed: the gradient of a base's values that a write
// through a view replaced. Its own gradient is the same projection.
Tensor clear_region(const Tensor& g, const Region& r) {
  Tensor out = in_base_layout(zeros(r.base_shape, g.dtype()), r);
  {
    NoGradGuard no_grad;
    out.copy_(g.detach());
    region_view(out, r).zero_();
  }
  record("copy_slices_backward", out, {g}, [r](const Tensor& gg) { return TensorList{clear_region(gg, r)}; });
  return out;
}

// A tensor over t's storage and layout with t's history (so an op computed from it is recorded as
// computed from t), but not t itself: the node it feeds does not become t's.
Tensor same_history(const Tensor& t) {
  Tensor alias = make_tensor(t.impl()->storage, t.shape(), t.strides(), t.offset(), t.dtype());
  alias.impl()->grad_fn = t.grad_fn();
  alias.impl()->output_nr = t.impl()->output_nr;
  alias.impl()->requires_grad = t.impl()->requires_grad;
  return alias;
}

// A tensor over t's storage and layout without history (the output the rewritten node is recorded on).
Tensor fresh_alias(const TensorImpl& t) { return make_tensor(t.storage, t.shape, t.strides, t.offset, t.dtype); }

// Gives `into` the node recorded on `fresh` as its history.
void adopt(const std::shared_ptr<TensorImpl>& into, const Tensor& fresh) {
  std::shared_ptr<Node> node = std::move(fresh.impl()->grad_fn);
  if (!node) return;
  node->output = into;
  if (into->retains_grad) node->retains_output_grads = true;
  std::shared_ptr<Node> previous = std::exchange(into->grad_fn, std::move(node));
  into->output_nr = 0;
  ++into->history;
  release_node(std::move(previous));
}

}  // namespace

void check_no_overlap(const TensorImpl& t, const char* op, const char* what) {
  for (int d = 0; d < t.shape.size(); ++d)
    if (t.shape[d] > 1 && t.strides[d] == 0)
      throw ValueError(message(op, ": the ", what, " written in place (shape ", t.shape.str(), ", strides ",
                               t.strides.str(),
                               ") has elements that share memory, as an expanded tensor does; clone() it first"));
}

void check_in_place_result(const Tensor& target, const Tensor& result, const char* op) {
  if (result.shape() != target.shape())
    throw ShapeError(message(op, ": the result's broadcast shape ", result.shape().str(),
                             " does not match the shape of the tensor written in place, ", target.shape().str()));
  if (!can_cast(result.dtype(), target.dtype()))
    throw TypeError(message(op, ": the result's dtype ", dtype_name(result.dtype()),
                            " cannot be written into a tensor of dtype ", dtype_name(target.dtype())));
}

bool records_in_place(const Tensor& target, const std::vector<Tensor>& operands) {
  if (!is_grad_enabled()) return false;
  if (target.requires_grad()) return true;
  for (const Tensor& o : operands)
    if (o.defined() && o.requires_grad()) return true;
  return false;
}

const Tensor& record_in_place(const Tensor& target, const char* op, const std::vector<Tensor>& operands,
                              bool reads_self, const InPlaceCompute& compute) {
  TensorImpl& t = *target.impl();
  if (target.is_leaf() && target.requires_grad())
    throw GraphError(message(op,
                             ": a leaf tensor that requires grad cannot be modified in place while grad mode is on "
                             "(use NoGradGuard, as optimisers do)"));
  const std::shared_ptr<TensorImpl> base = t.view_base;
  if (base && base->requires_grad && !base->grad_fn)
    throw GraphError(
        message(op, ": a view of a leaf tensor that requires grad (shape ", base->shape.str(),
                ") cannot be modified in place while grad mode is on (use NoGradGuard, as optimisers do)"));
  check_no_overlap(t, op, "tensor");
  if (base) check_no_overlap(*base, op, "view's base");

  // The result from the values before the write: operands sharing the written storage are copied.
  std::vector<Tensor> before = operands;
  for (Tensor& o : before)
    if (o.defined() && o.impl()->storage == t.storage) o = o.clone();
  const Tensor self = reads_self ? target.clone() : same_history(target);
  Tensor result = compute(self, before);
  check_in_place_result(target, result, op);
  if (result.dtype() != target.dtype()) result = result.to(target.dtype());
  {
    NoGradGuard no_grad;
    target.copy_(result.detach());  // bumps the storage's version: earlier saves of these values are stale
  }

  if (!base) {
    const Tensor fresh = fresh_alias(t);
    if (result.requires_grad()) record(op, fresh, {result}, [](const Tensor& g) { return TensorList{g}; });
    else record(op, fresh, {self}, [](const Tensor&) { return TensorList{Tensor()}; });  // overwritten: no gradient
    adopt(target.impl_ptr(), fresh);
    return target;
  }
  // Through a view: the base's history is rewritten, then the view is made anew from it.
  const Region r = region_of(t, *base);
  const Tensor fresh = fresh_alias(*base);
  record(op, fresh, {Tensor(base), result}, [r](const Tensor& g) {
    return TensorList{clear_region(g, r), take_region(g, r)};
  });
  adopt(base, fresh);
  refresh_view(target);
  return target;
}

void refresh_view(const Tensor& view) {
  TensorImpl& v = *view.impl();
  const std::shared_ptr<TensorImpl> base = v.view_base;
  v.base_history = base->history;
  std::shared_ptr<Node> previous = std::move(v.grad_fn);
  v.output_nr = 0;
  const Tensor base_tensor(base);
  if (base_tensor.requires_grad()) {
    GradModeGuard grad_mode(true);  // even under NoGradGuard: the view's values depend on the base's history
    const Region r = region_of(v, *base);
    record("as_strided", view, {base_tensor}, [r](const Tensor& g) { return TensorList{put_region(g, r)}; });
    if (v.retains_grad) v.grad_fn->retains_output_grads = true;
  }
  release_node(std::move(previous));
}

}  // namespace tapegrad::detail
