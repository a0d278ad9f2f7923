#pragma once
// In-place writes on the tape. Tensor's in-place methods (add_, mul_, copy_, masked_fill_ ...)
// compute their result with the out-of-place ops and write it into the tensor's storage; under
// grad mode, when the tensor or an operand requires grad, the write is recorded as well:
//
//  - the tensor's history is replaced by the op's: its grad_fn becomes a node whose input is the
//    out-of-place result, which was computed from the tensor's previous history and the operands;
//  - a write through a view rewrites the history of the view's base (torch's CopySlices): the
//    base's new node takes the base's previous history, with the view's region zeroed in its
//    gradient, and the result, which gets that region of the gradient; the view becomes a view of
//    the base's new history;
//  - any other view of the same base is stale from then on: its grad_fn is made anew, as a view of
//    the base's new history, the next time it is asked for (Tensor::grad_fn, requires_grad).
//
// A leaf that requires grad, or a view of one, is refused (GraphError), as torch refuses it: its
// .grad would have nowhere to go. A tensor some of whose elements share memory (an expanded one)
// cannot be written in place under grad mode either. A tensor saved for a backward and written
// afterwards is caught when the backward unpacks it (SavedTensor's version check).
//
// Refreshing a stale view changes the view's autograd state on a read, so a stale view must not be
// read from two threads at once (a fresh one may).

#include <functional>
#include <vector>

#include "tapegrad/autograd/tensor.h"

namespace tapegrad::detail {

// The out-of-place computation of an in-place op: its result from the tensor's values before the
// write (`self`) and the other operands.
using InPlaceCompute = std::function<Tensor(const Tensor& self, const std::vector<Tensor>& operands)>;

// A ValueError naming op when t (`what`: "tensor", "view's base") has elements that share memory, as
// an expanded tensor does: every in-place write checks its target, recorded or not.
void check_no_overlap(const TensorImpl& t, const char* op, const char* what);

// torch's rules for an in-place op's result: it has target's shape (the operands broadcast to
// target, not target to them; a ShapeError) and a dtype that casts to target's (can_cast; a TypeError).
void check_in_place_result(const Tensor& target, const Tensor& result, const char* op);

// Whether writing into target with these operands must be recorded: grad mode is on and target
// or an operand requires grad.
bool records_in_place(const Tensor& target, const std::vector<Tensor>& operands);

// Computes the op, writes its result into target and records the write (see above). reads_self:
// the op's backward needs target's values from before the write (mul_, div_, clamp_), so they are
// copied first; otherwise the op reads target's storage directly. An operand that shares target's
// storage is copied first too. ShapeError when the result does not have target's shape, TypeError
// when its dtype does not cast to target's, GraphError for a leaf that requires grad (or a view of
// one) and for a target with overlapping elements, each naming `op`.
const Tensor& record_in_place(const Tensor& target, const char* op, const std::vector<Tensor>& operands,
                              bool reads_self, const InPlaceCompute& compute);

// Makes a stale view's grad_fn anew from its base's current history (see above).
void refresh_view(const Tensor& view);

// ops.h's index_put written into target in place (recorded as "index_put_" when it must be): the
// int64 tensors index target's leading axes. Tensor::index_put_ calls it on the view its other
// items make (indexing.cpp).
const Tensor& index_put_leading(const Tensor& target, const std::vector<Tensor>& indices, const Tensor& values,
                                bool accumulate);

}  // namespace tapegrad::detail
