#pragma once
// Tensor: a cheap handle (one shared_ptr) to shared state, with value semantics like
// torch::Tensor. Copying a Tensor copies the handle; views (transpose, slice, reshape of a
// contiguous tensor ...) share the storage and differ in shape, strides and offset.
//
//   Generator gen(0);
//   Tensor w = randn({3, 2}, gen).requires_grad_();
//   Tensor loss = (x.matmul(w)).relu().sum();
//   loss.backward();
//   std::cout << w.grad();

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "tapegrad/autograd/dtype.h"
#include "tapegrad/autograd/generator.h"
#include "tapegrad/autograd/hooks.h"
#include "tapegrad/autograd/shape.h"
#include "tapegrad/autograd/storage.h"

namespace tapegrad {

struct Node;
struct LeafHooks;
class SparseRows;
namespace indexing {
class TensorIndex;
}

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Dims strides;             // in elements
  std::int64_t offset = 0;  // in elements, from the start of the storage
  DType dtype = DType::Float32;

  bool requires_grad = false;     // set by the user on leaves; true on every op output that needs grad
  bool retains_grad = false;      // a non-leaf whose gradient backward should keep
  std::shared_ptr<Node> grad_fn;  // the op that made this tensor (null for leaves)
  int output_nr = 0;              // which output of grad_fn this is
  std::shared_ptr<TensorImpl> grad;
  std::shared_ptr<SparseRows> sparse_grad;  // a leaf's row-sparse gradient (sparse_rows.h), instead of grad
  std::shared_ptr<LeafHooks> hooks;         // a leaf's hooks (graph.h), null until one is registered
  // A view's base: the tensor (never itself a view) whose storage the view shares; null for a tensor
  // that owns its storage. An in-place op through a view rewrites the base's history (inplace.h).
  std::shared_ptr<TensorImpl> view_base;
  std::uint64_t history = 0;       // bumped each time an in-place op rewrites this tensor's history
  std::uint64_t base_history = 0;  // a view's: the base's history when the view's grad_fn was made

  TensorImpl();
  TensorImpl(const TensorImpl&) = delete;
  TensorImpl& operator=(const TensorImpl&) = delete;
  // Hands grad_fn to the engine's deferred release, so freeing a 100,000-op chain does not recurse.
  ~TensorImpl();
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // Construction and assignment from a handle that wants to know where it is kept: a type with a
  // member type `binds_slot` and bind(const Tensor& slot) (nn::Module::register_parameter's result,
  // so that the module can refuse a later re-seat of the member it initialised or was assigned to).
  // Copy the handle, then bind.
  template <class Bound, class = typename std::decay_t<Bound>::binds_slot>
  Tensor(Bound&& value) : impl_(static_cast<const Tensor&>(value).impl_) {  // NOLINT(google-explicit-constructor)
    value.bind(*this);
  }
  template <class Bound, class = typename std::decay_t<Bound>::binds_slot>
  Tensor& operator=(Bound&& value) {
    impl_ = static_cast<const Tensor&>(value).impl_;
    value.bind(*this);
    return *this;
  }

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

  // --- metadata ---
  const Shape& shape() const { return checked().shape; }
  int dim() const { return shape().size(); }
  std::int64_t size(std::int64_t axis) const;
  std::int64_t numel() const { return shape().numel(); }
  const Dims& strides() const { return checked().strides; }
  std::int64_t offset() const { return checked().offset; }
  DType dtype() const { return checked().dtype; }
  bool is_contiguous() const;
  bool is_floating_point() const { return is_floating(dtype()); }

  // --- data access ---
  // Pointer to the first element (the offset applied); T must match the dtype.
  template <class T>
  T* data_ptr() const;
  // The value of a one-element tensor.
  double item() const;
  template <class T>
  T item() const {
    return static_cast<T>(item());
  }
  // One element, converted to double; negative indices count from the end.
  double at(const Dims& index) const;
  // Writes one element in place (never recorded on the tape).
  void set(const Dims& index, double value) const;
  // All elements in row-major order, converted to T.
  template <class T>
  std::vector<T> to_vector() const;

  // --- autograd ---
  bool requires_grad() const { return checked().requires_grad || grad_fn() != nullptr; }
  // Marks a floating-point leaf as needing its gradient; returns *this for chaining.
  const Tensor& requires_grad_(bool on = true) const;
  bool is_leaf() const { return grad_fn() == nullptr; }
  // The accumulated gradient (undefined until a backward reaches this tensor). A GraphError when
  // the gradient is row-sparse (has_sparse_grad): read that one with sparse_grad().
  Tensor grad() const;
  // Replaces the gradient (dropping a row-sparse one).
  void set_grad(const Tensor& grad) const;
  // A table used only through embeddings with sparse gradients (nn::EmbeddingOptions::sparse)
  // accumulates a row-sparse gradient instead of a dense one: the rows each backward touched,
  // appended (sparse_rows.h). Used densely as well in the same backward, it gets a dense one.
  bool has_sparse_grad() const { return checked().sparse_grad != nullptr; }
  SparseRows sparse_grad() const;  // undefined SparseRows when there is none
  // Replaces the row-sparse gradient (dropping a dense one); ShapeError unless it is this
  // tensor's shape and dtype.
  void set_sparse_grad(const SparseRows& grad) const;
  // Zeroes the gradient in place, keeping its buffer; set_to_none drops it instead. A row-sparse
  // gradient is always dropped (no rows is its zero).
  void zero_grad(bool set_to_none = false) const;
  // Asks backward to keep the gradient of this non-leaf tensor (after its hooks ran).
  void retain_grad() const;
  bool retains_grad() const { return checked().retains_grad; }
  // A hook on the gradient computed for this tensor: fn(grad) may return a replacement (an
  // undefined Tensor keeps grad). On a leaf it sees the sum of the gradient one backward
  // computes for the leaf, before that is added to .grad; on a non-leaf, the gradient before it
  // flows on into the op that made the tensor. Hooks run in registration order.
  RemovableHandle register_hook(std::function<Tensor(const Tensor&)> fn) const;
  // A hook on a leaf that requires grad, run after a backward has updated its .grad (what a
  // data-parallel wrapper starts its gradient all-reduce from).
  RemovableHandle register_post_accumulate_grad_hook(std::function<void(const Tensor&)> fn) const;
  // The op that made this tensor (null for a leaf). A view whose base an in-place op has rewritten
  // since gets its history anew here, as a view of the base's new history.
  const std::shared_ptr<Node>& grad_fn() const {
    const TensorImpl& t = checked();
    if (t.view_base && t.view_base->history != t.base_history) refresh_stale_view();
    return t.grad_fn;
  }
  // A tensor sharing this one's storage, cut from the graph.
  Tensor detach() const;
  // Backpropagates from this tensor. A scalar needs no gradient (1 is used); any other shape
  // needs `grad` of its own shape. The graph is released afterwards unless retain_graph. With
  // create_graph the backward itself is taped, so the .grads it leaves can be differentiated
  // again (higher-order gradients); retain_graph then defaults to true. Such a .grad refers to a
  // graph that may have saved the leaf itself, a reference cycle: drop it (zero_grad(true)) when
  // done, or use autograd::grad, which leaves .grad alone.
  void backward(const Tensor& grad = Tensor(), std::optional<bool> retain_graph = std::nullopt,
                bool create_graph = false) const;

  // --- copies and conversions (recorded on the tape) ---
  Tensor contiguous() const;
  Tensor clone() const;
  Tensor to(DType dtype) const;

  // --- in-place writes ---
  // As torch's: the other operands broadcast to this tensor's shape (not the other way: ShapeError),
  // the result is computed as the out-of-place op computes it (type promotion included) and must
  // cast to this tensor's dtype (torch.can_cast: no floating result into int64 or bool, nothing
  // but bool into bool; TypeError otherwise). add_ and mul_ of floating tensors of one dtype run
  // in place; the others compute the result apart and copy it in.
  // Under grad mode, a write into a tensor that requires grad, or of operands that do, is recorded
  // on the tape (inplace.h): the tensor's history becomes the op's, and through a view the base's
  // history is rewritten too, so gradients flow as if the op had been out of place. A leaf that
  // requires grad, or a view of one, may be written only under NoGradGuard (as an optimiser does):
  // a GraphError otherwise.
  const Tensor& fill_(double value) const;
  const Tensor& zero_() const { return fill_(0.0); }
  const Tensor& copy_(const Tensor& src) const;                       // src broadcast to this shape
  const Tensor& add_(const Tensor& other, double alpha = 1.0) const;  // this += alpha * other
  const Tensor& add_(double value) const;
  const Tensor& sub_(const Tensor& other, double alpha = 1.0) const;  // this -= alpha * other
  const Tensor& sub_(double value) const;
  const Tensor& mul_(const Tensor& other) const;
  const Tensor& mul_(double factor) const;
  // A C++ integer keeps an int64 tensor int64 (ids.add_(1), counts.mul_(2)), as the out-of-place ops.
  template <class I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
  const Tensor& add_(I value) const {
    return add_integer_(static_cast<std::int64_t>(value));
  }
  template <class I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
  const Tensor& sub_(I value) const {
    return sub_integer_(static_cast<std::int64_t>(value));
  }
  template <class I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
  const Tensor& mul_(I factor) const {
    return mul_integer_(static_cast<std::int64_t>(factor));
  }
  const Tensor& div_(const Tensor& other) const;
  const Tensor& div_(double divisor) const;
  const Tensor& addcmul_(const Tensor& a, const Tensor& b, double value = 1.0) const;  // this += value * a * b
  const Tensor& addcdiv_(const Tensor& a, const Tensor& b, double value = 1.0) const;  // this += value * a / b
  const Tensor& clamp_(std::optional<double> min, std::optional<double> max) const;
  const Tensor& masked_fill_(const Tensor& mask, double value) const;
  // Writes at indices (ops.h's index_add, index_copy, index_fill, scatter, scatter_add) in place.
  const Tensor& index_add_(std::int64_t axis, const Tensor& index, const Tensor& src, double alpha = 1.0) const;
  const Tensor& index_copy_(std::int64_t axis, const Tensor& index, const Tensor& src) const;
  const Tensor& index_fill_(std::int64_t axis, const Tensor& index, double value) const;
  const Tensor& scatter_(std::int64_t axis, const Tensor& index, const Tensor& src) const;
  const Tensor& scatter_(std::int64_t axis, const Tensor& index, double value) const;
  const Tensor& scatter_add_(std::int64_t axis, const Tensor& index, const Tensor& src) const;
  // torch's x.index_put_({...}, values, accumulate): x[...] = values, or x[...] += values with
  // accumulate (repeated tensor indices adding up); the items are index()'s (indexing.h).
  const Tensor& index_put_(const std::vector<indexing::TensorIndex>& indices, const Tensor& values,
                           bool accumulate = false) const;
  const Tensor& index_put_(const std::vector<indexing::TensorIndex>& indices, double value) const;
  // Elementwise math in place, torch's relu_, sigmoid_ ...: the out-of-place op's result written in
  // (so exp_ of an int64 tensor is a TypeError: its float32 result does not cast back).
  const Tensor& relu_() const;
  const Tensor& sigmoid_() const;
  const Tensor& tanh_() const;
  const Tensor& exp_() const;
  const Tensor& log_() const;
  const Tensor& sqrt_() const;
  const Tensor& abs_() const;
  const Tensor& neg_() const;
  const Tensor& reciprocal_() const;
  const Tensor& sin_() const;
  const Tensor& cos_() const;
  const Tensor& pow_(double exponent) const;
  const Tensor& floor_() const;
  const Tensor& ceil_() const;
  const Tensor& round_() const;
  const Tensor& trunc_() const;

  // --- printing ---
  std::string str() const;

  // --- ops as methods (defined in ops.h) ---
  Tensor reshape(const Shape& shape) const;
  Tensor view(const Shape& shape) const;
  Tensor flatten(std::int64_t start_axis = 0, std::int64_t end_axis = -1) const;
  Tensor transpose(std::int64_t axis0, std::int64_t axis1) const;
  Tensor permute(const Dims& axes) const;
  Tensor mT() const;  // transpose of the last two axes
  Tensor unsqueeze(std::int64_t axis) const;
  Tensor squeeze(std::int64_t axis) const;
  Tensor expand(const Shape& shape) const;
  Tensor narrow(std::int64_t axis, std::int64_t start, std::int64_t length) const;
  Tensor slice(std::int64_t axis, std::int64_t start, std::int64_t end, std::int64_t step = 1) const;
  Tensor select(std::int64_t axis, std::int64_t index) const;
  // torch's x.index({...}), Python's x[...]: integers, Slice, None, Ellipsis, int64 and bool tensors
  // (indexing.h). A view of this tensor unless a tensor is among the items.
  Tensor index(const std::vector<indexing::TensorIndex>& indices) const;
  Tensor sum(const Dims& axes = {}, bool keepdim = false) const;
  Tensor prod(const Dims& axes = {}, bool keepdim = false) const;
  Tensor mean(const Dims& axes = {}, bool keepdim = false) const;
  Tensor max(const Dims& axes = {}, bool keepdim = false) const;
  Tensor min(const Dims& axes = {}, bool keepdim = false) const;
  Tensor var(const Dims& axes = {}, std::int64_t correction = 1, bool keepdim = false) const;
  Tensor std(const Dims& axes = {}, std::int64_t correction = 1, bool keepdim = false) const;
  Tensor argmax(std::int64_t axis, bool keepdim = false) const;
  Tensor cumsum(std::int64_t axis) const;
  Tensor cumprod(std::int64_t axis) const;
  Tensor logcumsumexp(std::int64_t axis) const;
  // torch's Tensor.repeat: the tensor tiled reps[i] times along axis i; reps may have more entries
  // than axes (new leading axes), not fewer. tile() takes fewer.
  Tensor repeat(const Dims& reps) const;
  Tensor matmul(const Tensor& other) const;
  Tensor pow(double exponent) const;
  Tensor exp() const;
  Tensor log() const;
  Tensor expm1() const;
  Tensor log1p() const;
  Tensor sqrt() const;
  Tensor abs() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  Tensor softmax(std::int64_t axis) const;
  Tensor log_softmax(std::int64_t axis) const;
  Tensor masked_fill(const Tensor& mask, double value) const;

 private:
  const Tensor& add_integer_(std::int64_t value) const;
  const Tensor& sub_integer_(std::int64_t value) const;
  const Tensor& mul_integer_(std::int64_t factor) const;
  TensorImpl& checked() const {
    if (!impl_) throw_undefined();
    return *impl_;
  }
  [[noreturn]] static void throw_undefined();
  void refresh_stale_view() const;  // inplace.h
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& out, const Tensor& t);

// --- creation ---
// A new contiguous tensor of the given shape; its contents are uninitialised.
Tensor empty(const Shape& shape, DType dtype = kFloat32);
Tensor zeros(const Shape& shape, DType dtype = kFloat32);
Tensor ones(const Shape& shape, DType dtype = kFloat32);
Tensor full(const Shape& shape, double value, DType dtype = kFloat32);
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);
// A 0-dimensional tensor.
Tensor scalar_tensor(double value, DType dtype = kFloat32);
// [start, end) in steps of step; the element count is ceil((end - start) / step).
Tensor arange(double start, double end, double step = 1.0, DType dtype = kFloat32);
Tensor arange(std::int64_t end, DType dtype = kInt64);
// steps values from start to end inclusive, evenly spaced, as torch.linspace (the first half
// counted from start, the second from end; integer dtypes truncate). ValueError for steps < 0.
Tensor linspace(double start, double end, std::int64_t steps, DType dtype = kFloat32);
// The (n, m) identity: ones on the main diagonal (m defaults to n).
Tensor eye(std::int64_t n, std::optional<std::int64_t> m = std::nullopt, DType dtype = kFloat32);
// From row-major data; data.size() must equal the element count of shape.
Tensor from_vector(const std::vector<float>& data, const Shape& shape);
Tensor from_vector(const std::vector<double>& data, const Shape& shape);
Tensor from_vector(const std::vector<std::int64_t>& data, const Shape& shape);
Tensor from_vector(const std::vector<bool>& data, const Shape& shape);
// One entry of a 1-D literal. Converting to it is a user-defined conversion, which keeps
// tensor({{0}, {1}}) (a (2, 1) literal) from being ambiguous with a 1-D literal.
struct Number {
  template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>
  Number(T v) : value(static_cast<double>(v)) {}  // NOLINT: implicit by design
  double value;
};
// Literals: tensor({1, 2, 3}) and tensor({{1, 2}, {3, 4}}), float32 unless dtype says otherwise.
Tensor tensor(std::initializer_list<Number> values, DType dtype = kFloat32);
Tensor tensor(std::initializer_list<std::initializer_list<double>> rows, DType dtype = kFloat32);
// Random tensors, drawn from gen.
Tensor rand(const Shape& shape, Generator& gen, DType dtype = kFloat32);   // uniform [0, 1)
Tensor randn(const Shape& shape, Generator& gen, DType dtype = kFloat32);  // standard normal
Tensor uniform(const Shape& shape, double low, double high, Generator& gen, DType dtype = kFloat32);
Tensor normal(const Shape& shape, double mean, double std, Generator& gen, DType dtype = kFloat32);
// Integers uniform in [low, high).
Tensor randint(std::int64_t low, std::int64_t high, const Shape& shape, Generator& gen, DType dtype = kInt64);
// The same, drawn from the calling thread's default generator (manual_seed(n) seeds it), as torch's.
inline Tensor rand(const Shape& shape, DType dtype = kFloat32) { return rand(shape, default_generator(), dtype); }
inline Tensor randn(const Shape& shape, DType dtype = kFloat32) { return randn(shape, default_generator(), dtype); }
inline Tensor uniform(const Shape& shape, double low, double high, DType dtype = kFloat32) {
  return uniform(shape, low, high, default_generator(), dtype);
}
inline Tensor normal(const Shape& shape, double mean, double std, DType dtype = kFloat32) {
  return normal(shape, mean, std, default_generator(), dtype);
}
inline Tensor randint(std::int64_t low, std::int64_t high, const Shape& shape, DType dtype = kInt64) {
  return randint(low, high, shape, default_generator(), dtype);
}

// --- internal helpers shared by ops ---
namespace detail {
// A tensor of the given dtype over an existing storage.
Tensor make_tensor(std::shared_ptr<Storage> storage, const Shape& shape, const Dims& strides, std::int64_t offset,
                   DType dtype);
// A view of t (shared storage, no graph edge of its own; its view_base is t's base, or t).
Tensor make_view(const Tensor& t, const Shape& shape, const Dims& strides, std::int64_t offset);
}  // namespace detail

}  // namespace tapegrad

#include "tapegrad/autograd/indexing.h"  // after Tensor: its TensorIndex holds one
