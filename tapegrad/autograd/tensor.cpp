// Tensor's own members: shape and element access, the autograd state (requires_grad, grad,
// detach, backward), the in-place writes (kernels/strided.h's loops), printing, and the
// construction of tensors and views from storage (detail::make_tensor, make_view). The public
// creation functions (empty, zeros, arange, randn ...) are in tensor_factories.cpp.

#include "tapegrad/autograd/tensor.h"

#include <atomic>
#include <cmath>
#include <iomanip>
#include <limits>
#include <ostream>
#include <sstream>

#include "tapegrad/autograd/block_pool.h"
#include "tapegrad/autograd/graph.h"
#include "tapegrad/autograd/inplace.h"
#include "tapegrad/autograd/kernels/strided.h"
#include "tapegrad/autograd/live_counts.h"
#include "tapegrad/autograd/ops.h"
#include "tapegrad/autograd/sparse_rows.h"

namespace tapegrad {

TensorImpl::TensorImpl() { detail::count_impls(1); }

TensorImpl::~TensorImpl() {
  detail::count_impls(-1);
  if (grad_fn) detail::release_node(std::move(grad_fn));
}

void Tensor::throw_undefined() { throw Error("tensor: the tensor is undefined (default-constructed)"); }

std::int64_t Tensor::size(std::int64_t axis) const { return shape()[normalize_axis(axis, dim(), "size")]; }

bool Tensor::is_contiguous() const {
  const Shape& s = shape();
  std::int64_t expected = 1;
  for (int d = s.size() - 1; d >= 0; --d) {
    if (s[d] != 1 && strides()[d] != expected) return false;
    expected *= s[d];
  }
  return true;
}

template <class T>
T* Tensor::data_ptr() const {
  const TensorImpl& t = checked();
  if (t.dtype != dtype_of<T>())
    throw TypeError(message("data_ptr: the tensor is ", dtype_name(t.dtype), ", not ", dtype_name(dtype_of<T>())));
  return static_cast<T*>(t.storage->data()) + t.offset;
}
template float* Tensor::data_ptr<float>() const;
template double* Tensor::data_ptr<double>() const;
template std::int64_t* Tensor::data_ptr<std::int64_t>() const;
template bool* Tensor::data_ptr<bool>() const;

namespace {

// Element offset of a multi-index, checked against the shape.
std::int64_t element_offset(const Tensor& t, const Dims& index, const char* op) {
  if (index.size() != t.dim())
    throw IndexError(message(op, ": index ", index.str(), " has ", index.size(), " entries for a tensor of shape ",
                             t.shape().str()));
  std::int64_t offset = t.offset();
  for (int d = 0; d < index.size(); ++d) {
    std::int64_t i = index[d];
    if (i < -t.shape()[d] || i >= t.shape()[d])
      throw IndexError(message(op, ": index ", index.str(), " is out of range for shape ", t.shape().str()));
    if (i < 0) i += t.shape()[d];
    offset += i * t.strides()[d];
  }
  return offset;
}

double load(const TensorImpl& t, std::int64_t offset) {
  return dispatch_all(t.dtype, [&](auto tag) {
    using T = decltype(tag);
    return static_cast<double>(static_cast<const T*>(t.storage->data())[offset]);
  });
}

void store(const TensorImpl& t, std::int64_t offset, double value) {
  dispatch_all(t.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) static_cast<T*>(t.storage->data())[offset] = value != 0.0;
    else static_cast<T*>(t.storage->data())[offset] = static_cast<T>(value);
  });
}

}  // namespace

double Tensor::item() const {
  if (numel() != 1) throw ValueError("item: only a tensor with one element has an item, got shape " + shape().str());
  return load(checked(), offset());
}

double Tensor::at(const Dims& index) const { return load(checked(), element_offset(*this, index, "at")); }

void Tensor::set(const Dims& index, double value) const {
  if (is_grad_enabled() && requires_grad())
    throw GraphError(
        "set: a tensor that requires grad cannot be written element by element while grad mode is on "
        "(use NoGradGuard, or an in-place op such as masked_fill_, which the tape records)");
  store(checked(), element_offset(*this, index, "set"), value);
  impl_->storage->bump_version();
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  Tensor c = contiguous();
  std::vector<T> out(static_cast<std::size_t>(c.numel()));
  dispatch_all(c.dtype(), [&](auto tag) {
    using S = decltype(tag);
    const S* p = c.data_ptr<S>();
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<T>(p[i]);
  });
  return out;
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<std::int64_t> Tensor::to_vector<std::int64_t>() const;
template std::vector<int> Tensor::to_vector<int>() const;

// ---------------------------------------------------------------- autograd
void Tensor::refresh_stale_view() const { detail::refresh_view(*this); }

const Tensor& Tensor::requires_grad_(bool on) const {
  TensorImpl& t = checked();
  if (t.grad_fn && !on)
    throw GraphError(message("requires_grad_: cannot turn off requires_grad of a non-leaf tensor (made by ",
                             t.grad_fn->name, "); use detach()"));
  if (on && !is_floating(t.dtype))
    throw TypeError(
        message("requires_grad_: only floating-point tensors can require gradients, got ", dtype_name(t.dtype)));
  t.requires_grad = on;
  return *this;
}

Tensor Tensor::grad() const {
  const TensorImpl& t = checked();
  if (t.sparse_grad)
    throw GraphError(message("grad: the gradient of this ", t.shape.str(), " tensor is row-sparse (",
                             t.sparse_grad->nnz(),
                             " rows from embeddings with sparse gradients); read it with sparse_grad(), or "
                             "sparse_grad().to_dense()"));
  return Tensor(t.grad);
}

void Tensor::set_grad(const Tensor& grad) const {
  TensorImpl& t = checked();
  if (grad.defined() && (grad.shape() != t.shape || grad.dtype() != t.dtype))
    throw ShapeError("set_grad: gradient of shape " + grad.shape().str() + " and dtype " + dtype_name(grad.dtype()) +
                     " for a tensor of shape " + t.shape.str() + " and dtype " + dtype_name(t.dtype));
  t.grad = grad.impl_ptr();
  t.sparse_grad.reset();
}

SparseRows Tensor::sparse_grad() const {
  const TensorImpl& t = checked();
  return t.sparse_grad ? *t.sparse_grad : SparseRows();
}

void Tensor::set_sparse_grad(const SparseRows& grad) const {
  TensorImpl& t = checked();
  if (!grad.defined()) {
    t.sparse_grad.reset();
    return;
  }
  if (grad.shape() != t.shape || grad.dtype() != t.dtype)
    throw ShapeError("set_sparse_grad: rows of a " + grad.shape().str() + " " + dtype_name(grad.dtype()) +
                     " table for a tensor of shape " + t.shape.str() + " and dtype " + dtype_name(t.dtype));
  t.sparse_grad = std::make_shared<SparseRows>(grad);
  t.grad.reset();
}

void Tensor::zero_grad(bool set_to_none) const {
  TensorImpl& t = checked();
  t.sparse_grad.reset();
  if (!t.grad) return;
  if (set_to_none) {
    t.grad.reset();
  } else {
    NoGradGuard guard;
    Tensor(t.grad).zero_();
  }
}

void Tensor::retain_grad() const {
  TensorImpl& t = checked();
  if (!requires_grad()) throw GraphError("retain_grad: the tensor does not require grad");
  if (grad_fn()) {  // leaves keep their gradient anyway
    t.retains_grad = true;
    t.grad_fn->retains_output_grads = true;
  }
}

Tensor Tensor::detach() const {
  const TensorImpl& t = checked();
  return detail::make_tensor(t.storage, t.shape, t.strides, t.offset, t.dtype);
}

void Tensor::backward(const Tensor& grad, std::optional<bool> retain_graph, bool create_graph) const {
  run_backward(*this, grad, retain_graph.value_or(create_graph), create_graph);
}

// ---------------------------------------------------------------- in-place writes
namespace {

void check_unrecorded_write(const Tensor& t, const char* op) { detail::check_no_overlap(*t.impl(), op, "tensor"); }

}  // namespace

const Tensor& Tensor::fill_(double value) const {
  if (detail::records_in_place(*this, {}))
    return detail::record_in_place(*this, "fill_", {}, false,
                                   [value](const Tensor& self, const TensorList&) { return full_like(self, value); });
  check_unrecorded_write(*this, "fill_");
  dispatch_all(dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T v = static_cast<T>(value);
    kernels::fill_strided(data_ptr<T>(), strides(), shape(), v);  // data_ptr: the view's first element
  });
  impl_->storage->bump_version();
  return *this;
}

const Tensor& Tensor::copy_(const Tensor& src) const {
  if (broadcast_shapes(src.shape(), shape(), "copy_") != shape())
    throw ShapeError("copy_: cannot copy a tensor of shape " + src.shape().str() + " into one of shape " +
                     shape().str());
  if (detail::records_in_place(*this, {src}))
    return detail::record_in_place(*this, "copy_", {src}, false, [](const Tensor& self, const TensorList& a) {
      return a[0].to(self.dtype()).expand(self.shape());  // copy_ converts whatever the dtypes
    });
  check_unrecorded_write(*this, "copy_");
  // A source sharing this storage is read whole before the write (a shifted view would otherwise
  // read entries already written); a source of another dtype is converted first anyway.
  const bool shares = src.impl()->storage == impl_->storage;
  Tensor s = src.dtype() != dtype() ? src.detach().to(dtype()) : shares ? src.detach().clone() : src;
  dispatch_all(dtype(), [&](auto tag) {
    using T = decltype(tag);
    kernels::copy_strided(s.data_ptr<T>(), kernels::broadcast_strides(s, shape()), data_ptr<T>(), strides(), shape());
  });
  impl_->storage->bump_version();
  return *this;
}

namespace {

// Writes float32 values (a contiguous tensor of target's shape) into the bfloat16 tensor target,
// rounded, and bumps target's version.
void store_bf16(const Tensor& target, const Tensor& values) {
  const Tensor rounded = values.to(kBFloat16);
  kernels::copy_strided(rounded.data_ptr<BFloat16>(), rounded.strides(), target.data_ptr<BFloat16>(), target.strides(),
                        target.shape());
  target.impl()->storage->bump_version();
}

// other * alpha, with other itself for alpha 1 (so an integral other stays integral).
Tensor scaled(const Tensor& other, double alpha) { return alpha == 1.0 ? other : other * alpha; }

// An in-place op computed out of place, compute(self, operands), and written in: recorded when it
// must be (inplace.h), else computed without recording, checked (check_in_place_result) and copied
// in. reads_self: the op's backward needs target's values from before the write.
const Tensor& compute_in_place(const Tensor& target, const char* op, const TensorList& operands, bool reads_self,
                               const detail::InPlaceCompute& compute) {
  if (detail::records_in_place(target, operands))
    return detail::record_in_place(target, op, operands, reads_self, compute);
  check_unrecorded_write(target, op);
  Tensor result;
  {
    NoGradGuard no_grad;
    result = compute(target, operands);
  }
  detail::check_in_place_result(target, result, op);
  return target.copy_(result);
}

// compute_in_place for an op of the tensor and one number.
template <class F>
const Tensor& with_number(const Tensor& target, const char* op, bool reads_self, F f) {
  return compute_in_place(target, op, {}, reads_self, [f](const Tensor& self, const TensorList&) { return f(self); });
}

}  // namespace

const Tensor& Tensor::add_(const Tensor& other, double alpha) const {
  // The kernel reads other while it writes: an other overlapping this tensor other than entry for
  // entry (a shifted view of the same storage) goes through the out-of-place result instead.
  const bool shifted = other.impl()->storage == impl_->storage &&
                       (other.offset() != offset() || other.strides() != strides() || other.shape() != shape());
  if (shifted || detail::records_in_place(*this, {other}) || other.dtype() != dtype() || !is_floating(dtype()))
    return compute_in_place(*this, "add_", {other}, false,
                            [alpha](const Tensor& self, const TensorList& a) { return self + scaled(a[0], alpha); });
  check_unrecorded_write(*this, "add_");
  if (const Shape result = broadcast_shapes(other.shape(), shape(), "add_"); result != shape())
    throw ShapeError(message("add_: the result's broadcast shape ", result.str(),
                             " does not match the shape of the tensor written in place, ", shape().str()));
  if (dtype() == kBFloat16) {  // computed in float32, rounded once
    NoGradGuard no_grad;
    store_bf16(*this, to(kFloat32) + other.to(kFloat32) * alpha);
    return *this;
  }
  dispatch_floating(dtype(), "add_", [&](auto tag) {
    using T = decltype(tag);
    const T a = static_cast<T>(alpha);
    T* dst = data_ptr<T>();
    const T* src = other.data_ptr<T>();
    if (other.shape() == shape() && is_contiguous() && other.is_contiguous())
      kernels::add_scaled(dst, src, a, numel());  // the common case: one flat loop
    else kernels::add_scaled_strided(dst, strides(), src, kernels::broadcast_strides(other, shape()), shape(), a);
  });
  impl_->storage->bump_version();
  return *this;
}

const Tensor& Tensor::mul_(double factor) const {
  if (detail::records_in_place(*this, {}) || !is_floating(dtype()))
    return with_number(*this, "mul_", false, [factor](const Tensor& self) { return self * factor; });
  check_unrecorded_write(*this, "mul_");
  if (dtype() == kBFloat16) {  // computed in float32, rounded once
    NoGradGuard no_grad;
    store_bf16(*this, to(kFloat32) * factor);
    return *this;
  }
  dispatch_floating(dtype(), "mul_", [&](auto tag) {
    using T = decltype(tag);
    const T f = static_cast<T>(factor);
    kernels::scale_strided(data_ptr<T>(), strides(), shape(), f);
  });
  impl_->storage->bump_version();
  return *this;
}

const Tensor& Tensor::add_(double value) const {
  return with_number(*this, "add_", false, [value](const Tensor& self) { return self + value; });
}
const Tensor& Tensor::add_integer_(std::int64_t value) const {
  return with_number(*this, "add_", false, [value](const Tensor& self) { return self + value; });
}
const Tensor& Tensor::sub_integer_(std::int64_t value) const {
  return with_number(*this, "sub_", false, [value](const Tensor& self) { return self - value; });
}
const Tensor& Tensor::mul_integer_(std::int64_t factor) const {
  return with_number(*this, "mul_", false, [factor](const Tensor& self) { return self * factor; });
}
const Tensor& Tensor::sub_(const Tensor& other, double alpha) const {
  return compute_in_place(*this, "sub_", {other}, false,
                          [alpha](const Tensor& self, const TensorList& a) { return self - scaled(a[0], alpha); });
}
const Tensor& Tensor::sub_(double value) const {
  return with_number(*this, "sub_", false, [value](const Tensor& self) { return self - value; });
}
const Tensor& Tensor::mul_(const Tensor& other) const {
  return compute_in_place(*this, "mul_", {other}, true,
                          [](const Tensor& self, const TensorList& a) { return self * a[0]; });
}
const Tensor& Tensor::div_(const Tensor& other) const {
  return compute_in_place(*this, "div_", {other}, true,
                          [](const Tensor& self, const TensorList& a) { return self / a[0]; });
}
const Tensor& Tensor::div_(double divisor) const {
  return with_number(*this, "div_", false, [divisor](const Tensor& self) { return self / divisor; });
}
const Tensor& Tensor::addcmul_(const Tensor& a, const Tensor& b, double value) const {
  return compute_in_place(*this, "addcmul_", {a, b}, false, [value](const Tensor& self, const TensorList& o) {
    return self + scaled(o[0] * o[1], value);
  });
}
const Tensor& Tensor::addcdiv_(const Tensor& a, const Tensor& b, double value) const {
  return compute_in_place(*this, "addcdiv_", {a, b}, false, [value](const Tensor& self, const TensorList& o) {
    return self + scaled(o[0] / o[1], value);
  });
}
const Tensor& Tensor::clamp_(std::optional<double> min, std::optional<double> max) const {
  return with_number(*this, "clamp_", true, [min, max](const Tensor& self) { return tapegrad::clamp(self, min, max); });
}
const Tensor& Tensor::masked_fill_(const Tensor& mask, double value) const {
  return compute_in_place(*this, "masked_fill_", {mask}, false, [value](const Tensor& self, const TensorList& a) {
    return tapegrad::masked_fill(self, a[0], value);
  });
}

// Unrecorded, index_add_, index_copy_ and index_fill_ write row by row (detail::write_rows): their
// cost follows the index, not this tensor.
const Tensor& Tensor::index_add_(std::int64_t axis, const Tensor& index, const Tensor& src, double alpha) const {
  if (!detail::records_in_place(*this, {index, src}) && src.impl()->storage != impl_->storage) {
    detail::write_rows(*this, axis, index, src, alpha, detail::RowWrite::Add, "index_add_");
    return *this;
  }
  return compute_in_place(*this, "index_add_", {index, src}, false,
                          [axis, alpha](const Tensor& self, const TensorList& a) {
                            return tapegrad::index_add(self, axis, a[0], a[1], alpha);
                          });
}
const Tensor& Tensor::index_copy_(std::int64_t axis, const Tensor& index, const Tensor& src) const {
  if (!detail::records_in_place(*this, {index, src}) && src.impl()->storage != impl_->storage) {
    detail::write_rows(*this, axis, index, src, 0.0, detail::RowWrite::Copy, "index_copy_");
    return *this;
  }
  return compute_in_place(*this, "index_copy_", {index, src}, false, [axis](const Tensor& self, const TensorList& a) {
    return tapegrad::index_copy(self, axis, a[0], a[1]);
  });
}
const Tensor& Tensor::index_fill_(std::int64_t axis, const Tensor& index, double value) const {
  if (!detail::records_in_place(*this, {index})) {
    detail::write_rows(*this, axis, index, Tensor(), value, detail::RowWrite::Fill, "index_fill_");
    return *this;
  }
  return compute_in_place(*this, "index_fill_", {index}, false, [axis, value](const Tensor& self, const TensorList& a) {
    return tapegrad::index_fill(self, axis, a[0], value);
  });
}
const Tensor& Tensor::scatter_(std::int64_t axis, const Tensor& index, const Tensor& src) const {
  return compute_in_place(*this, "scatter_", {index, src}, false, [axis](const Tensor& self, const TensorList& a) {
    return tapegrad::scatter(self, axis, a[0], a[1]);
  });
}
const Tensor& Tensor::scatter_(std::int64_t axis, const Tensor& index, double value) const {
  return compute_in_place(*this, "scatter_", {index}, false, [axis, value](const Tensor& self, const TensorList& a) {
    return tapegrad::scatter(self, axis, a[0], value);
  });
}
const Tensor& Tensor::scatter_add_(std::int64_t axis, const Tensor& index, const Tensor& src) const {
  return compute_in_place(*this, "scatter_add_", {index, src}, false, [axis](const Tensor& self, const TensorList& a) {
    return tapegrad::scatter_add(self, axis, a[0], a[1]);
  });
}

const Tensor& detail::index_put_leading(const Tensor& target, const TensorList& indices, const Tensor& values,
                                        bool accumulate) {
  TensorList operands = indices;
  operands.push_back(values);
  return compute_in_place(target, "index_put_", operands, false, [accumulate](const Tensor& self, const TensorList& a) {
    return tapegrad::index_put(self, TensorList(a.begin(), a.end() - 1), a.back(), accumulate);
  });
}

// Elementwise math in place. reads_self: the op's backward reads its input or output (a copy of
// the old values is kept when recorded); neg and the roundings read neither.
namespace {
template <Tensor (*Op)(const Tensor&)>
const Tensor& unary_in_place(const Tensor& target, const char* op, bool reads_self) {
  return with_number(target, op, reads_self, [](const Tensor& self) { return Op(self); });
}
}  // namespace

const Tensor& Tensor::relu_() const { return unary_in_place<tapegrad::relu>(*this, "relu_", true); }
const Tensor& Tensor::sigmoid_() const { return unary_in_place<tapegrad::sigmoid>(*this, "sigmoid_", true); }
const Tensor& Tensor::tanh_() const { return unary_in_place<tapegrad::tanh>(*this, "tanh_", true); }
const Tensor& Tensor::exp_() const { return unary_in_place<tapegrad::exp>(*this, "exp_", true); }
const Tensor& Tensor::log_() const { return unary_in_place<tapegrad::log>(*this, "log_", true); }
const Tensor& Tensor::sqrt_() const { return unary_in_place<tapegrad::sqrt>(*this, "sqrt_", true); }
const Tensor& Tensor::abs_() const { return unary_in_place<tapegrad::abs>(*this, "abs_", true); }
const Tensor& Tensor::neg_() const { return unary_in_place<tapegrad::neg>(*this, "neg_", false); }
const Tensor& Tensor::reciprocal_() const { return unary_in_place<tapegrad::reciprocal>(*this, "reciprocal_", true); }
const Tensor& Tensor::sin_() const { return unary_in_place<tapegrad::sin>(*this, "sin_", true); }
const Tensor& Tensor::cos_() const { return unary_in_place<tapegrad::cos>(*this, "cos_", true); }
const Tensor& Tensor::floor_() const { return unary_in_place<tapegrad::floor>(*this, "floor_", false); }
const Tensor& Tensor::ceil_() const { return unary_in_place<tapegrad::ceil>(*this, "ceil_", false); }
const Tensor& Tensor::round_() const { return unary_in_place<tapegrad::round>(*this, "round_", false); }
const Tensor& Tensor::trunc_() const { return unary_in_place<tapegrad::trunc>(*this, "trunc_", false); }
const Tensor& Tensor::pow_(double exponent) const {
  return with_number(*this, "pow_", true, [exponent](const Tensor& self) { return tapegrad::pow(self, exponent); });
}

// ---------------------------------------------------------------- printing
namespace {

void print_elements(std::ostream& out, const Tensor& t, int axis, Dims& index, int indent, bool floating,
                    int precision) {
  const std::int64_t n = t.shape()[axis];
  constexpr std::int64_t kEdge = 3;  // entries shown at each end of a long axis
  const bool summarise = t.numel() > 1000 && n > 2 * kEdge;
  out << '[';
  for (std::int64_t i = 0; i < n; ++i) {
    if (summarise && i == kEdge) {
      out << (axis + 1 == t.dim() ? "..., " : "...,\n" + std::string(indent + 1, ' '));
      i = n - kEdge;
    }
    index[axis] = i;
    if (axis + 1 == t.dim()) {
      const double v = t.at(index);
      if (t.dtype() == kBool) out << (v != 0.0 ? "true" : "false");
      else if (floating) out << std::fixed << std::setprecision(precision) << v;
      else out << static_cast<std::int64_t>(v);
    } else {
      print_elements(out, t, axis + 1, index, indent + 1, floating, precision);
    }
    if (i + 1 < n) out << (axis + 1 == t.dim() ? ", " : ",\n" + std::string(indent + 1, ' '));
  }
  out << ']';
}

}  // namespace

std::string Tensor::str() const {
  std::ostringstream out;
  if (!defined()) return "tensor(undefined)";
  const bool floating = is_floating_point();
  out << "tensor(";
  if (dim() == 0) {
    const double v = item();
    if (floating) out << std::fixed << std::setprecision(4) << v;
    else if (dtype() == kBool) out << (v != 0.0 ? "true" : "false");
    else out << static_cast<std::int64_t>(v);
  } else {
    Dims index = Dims::filled(dim(), 0);
    print_elements(out, *this, 0, index, 7, floating, 4);
  }
  if (dim() > 0 && numel() == 0) out << ", size=" << shape().str();
  if (dtype() != kFloat32 && dtype() != kInt64 && dtype() != kBool) out << ", dtype=" << dtype_name(dtype());
  if (dtype() == kInt64) out << ", dtype=int64";
  if (grad_fn()) out << ", grad_fn=<" << grad_fn()->name << ">";
  else if (requires_grad()) out << ", requires_grad=true";
  out << ')';
  return out.str();
}

std::ostream& operator<<(std::ostream& out, const Tensor& t) { return out << t.str(); }

// ---------------------------------------------------------------- construction from storage
namespace detail {

Tensor make_tensor(std::shared_ptr<Storage> storage, const Shape& shape, const Dims& strides, std::int64_t offset,
                   DType dtype) {
  auto impl = std::allocate_shared<TensorImpl>(BlockAllocator<TensorImpl>());
  impl->storage = std::move(storage);
  impl->shape = shape;
  impl->strides = strides;
  impl->offset = offset;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor make_view(const Tensor& t, const Shape& shape, const Dims& strides, std::int64_t offset) {
  Tensor view = make_tensor(t.impl()->storage, shape, strides, offset, t.dtype());
  const std::shared_ptr<TensorImpl>& base = t.impl()->view_base ? t.impl()->view_base : t.impl_ptr();
  view.impl()->view_base = base;
  view.impl()->base_history = base->history;
  return view;
}

}  // namespace detail

}  // namespace tapegrad
