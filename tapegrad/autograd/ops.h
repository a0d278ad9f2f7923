#pragma once
// Every differentiable op of tapegrad, as free functions; the common ones are also Tensor
// methods. Binary elementwise ops broadcast their operands with NumPy's rules. Axis arguments
// may be negative.
//
// Dtypes: the ops of two or more tensors (arithmetic, maximum/minimum, comparisons, where,
// concat and stack) promote as PyTorch does: their operands meet in result_type(), by
// promote_types (dtype.h: bool < int64 < bfloat16, float32 < float64) over the tensors with axes,
// where a 0-dim tensor counts only when its category (bool, integer, floating) is higher: float32
// (3,) + float64 (3,) is float64, float32 (3,) + float64 () is float32, int64 (3,) + float64 () is
// float64. The conversions are recorded to()s, so each operand's gradient arrives in its own
// dtype. Arithmetic on int64 stays int64 (wrapping around on overflow) and on bool stays bool (+
// is or, * is and); subtraction with a bool tensor is a TypeError, whatever the other operand, and
// div divides integers in float32 (true division), as torch's. Products do not promote: matmul,
// linear and the fused ops throw TypeError on mixed dtypes ("matmul: dtype mismatch, float32 and
// float64"), as torch's do. A C++ number takes a floating tensor's dtype, as a Python scalar
// does in torch (float32 + 2.5 stays float32); with an int64 or bool tensor, a double gives
// float32 (int64 + 2.5) and an integer stays integral (int64 + 1, see the integer operands
// below), as torch's. Unary math takes int64 and Bool inputs as float32 where its results are not
// whole numbers (exp, log, sqrt, tanh, sigmoid, sin, ...), keeps int64 in neg, abs, sign, the
// roundings and relu, and wants floating point elsewhere (gelu, silu, softplus, reductions but
// sum and max/min), as torch's. Comparisons accept any dtypes and return Bool.
//
// Each op's backward lives right below its forward, in the file of its family (the loops over
// raw buffers are in kernels/):
//   ops/elementwise.cpp  arithmetic, maximum, minimum, comparisons, logical ops, where, copies
//   ops/unary.cpp        unary math and activations (exp, log, tanh, relu, gelu, silu, clamp ...)
//   ops/reduce.cpp       sum, prod, mean, max, min, var, std, norm, argmax, argmin, logsumexp, cumsum, cumprod,
//                        logcumsumexp
//   ops/softmax.cpp      softmax, log_softmax, causal_softmax
//   ops/matmul.cpp       matmul and linear on BLAS
//   ops/einsum.cpp       einsum, lowered to permutes, sums and matmul
//   ops/shape.cpp        reshape, transpose, permute, slicing, flip, roll, tile, tril/triu, concat, stack, split
//   ops/windows.cpp      unfold and fold (im2col and col2im)
//   ops/index.cpp        index_select, gather, scatter(_add), index_add/copy/fill, embedding, topk, sort,
//                        one_hot
//   ops/nn.cpp           layer_norm, logistic_loss, dropout
//   ops/attention.cpp    fused_attention
//   ops/random.cpp       multinomial
//   ops/recurrent.cpp    recurrent_layer (Elman, LSTM, GRU) and the one-step cells

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tapegrad/autograd/graph.h"
#include "tapegrad/autograd/tensor.h"

namespace tapegrad {

// ---------------------------------------------------------------- type promotion
// torch.result_type: the dtype the tensors of one op meet in (see Dtypes above). ValueError for no
// tensors.
DType result_type(const std::vector<Tensor>& tensors);
DType result_type(const Tensor& a, const Tensor& b);

// ---------------------------------------------------------------- elementwise arithmetic
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor rsub(double a, const Tensor& b);  // a - b
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);
Tensor rdiv(double a, const Tensor& b);  // a / b
Tensor neg(const Tensor& x);
Tensor maximum(const Tensor& a, const Tensor& b);  // gradient split evenly on ties
Tensor minimum(const Tensor& a, const Tensor& b);

// An integer C++ operand (x + 1, 2 * ids): an int64 or bool tensor stays integral (bool becomes
// int64, wrapping around as int64 arithmetic does), as torch's tensor + Python int; a floating
// tensor takes the number as a double. ids / 2 is true division, float32; floor_divide(ids, 2) and
// ids % 2 (below) stay int64.
namespace detail {
template <class I>
using if_integer = std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int>;
Tensor add_integer(const Tensor& a, std::int64_t b);
Tensor sub_integer(const Tensor& a, std::int64_t b);
Tensor rsub_integer(std::int64_t a, const Tensor& b);
Tensor mul_integer(const Tensor& a, std::int64_t b);
}  // namespace detail
template <class I, detail::if_integer<I> = 0>
Tensor add(const Tensor& a, I b) {
  return detail::add_integer(a, static_cast<std::int64_t>(b));
}
template <class I, detail::if_integer<I> = 0>
Tensor sub(const Tensor& a, I b) {
  return detail::sub_integer(a, static_cast<std::int64_t>(b));
}
template <class I, detail::if_integer<I> = 0>
Tensor rsub(I a, const Tensor& b) {
  return detail::rsub_integer(static_cast<std::int64_t>(a), b);
}
template <class I, detail::if_integer<I> = 0>
Tensor mul(const Tensor& a, I b) {
  return detail::mul_integer(a, static_cast<std::int64_t>(b));
}
template <class I, detail::if_integer<I> = 0>
Tensor operator+(const Tensor& a, I b) {
  return add(a, b);
}
template <class I, detail::if_integer<I> = 0>
Tensor operator-(const Tensor& a, I b) {
  return sub(a, b);
}
template <class I, detail::if_integer<I> = 0>
Tensor operator*(const Tensor& a, I b) {
  return mul(a, b);
}
template <class I, detail::if_integer<I> = 0>
Tensor operator+(I a, const Tensor& b) {
  return add(b, a);
}
template <class I, detail::if_integer<I> = 0>
Tensor operator-(I a, const Tensor& b) {
  return rsub(a, b);
}
template <class I, detail::if_integer<I> = 0>
Tensor operator*(I a, const Tensor& b) {
  return mul(b, a);
}

// Floor division and remainders, with torch's rules (Python's): floor_divide(a, b) = floor(a / b)
// (a / b itself for a floating b == 0: inf or NaN); remainder(a, b) = a - b floor_divide(a, b), with
// b's sign (Python's %, and operator% here); fmod(a, b) = a - b trunc(a / b), with a's sign (C's
// fmod). Operands promote as the arithmetic ops; an int64 result stays int64, and an int64 divisor
// holding 0 is a ValueError (torch's ZeroDivisionError); INT64_MIN floor-divided by -1 wraps around to
// itself, where torch's crashes. Bool operands are a TypeError, as torch's. A double makes an int64
// tensor float32; an integer keeps it int64. floor_divide is not differentiable (its result never
// requires grad; torch has no derivative for it); remainder and fmod pass the gradient to a
// unchanged and to b times minus the floored or truncated quotient.
Tensor floor_divide(const Tensor& a, const Tensor& b);
Tensor remainder(const Tensor& a, const Tensor& b);
Tensor fmod(const Tensor& a, const Tensor& b);
Tensor floor_divide(const Tensor& a, double b);
Tensor remainder(const Tensor& a, double b);
Tensor fmod(const Tensor& a, double b);
namespace detail {
Tensor floor_divide_integer(const Tensor& a, std::int64_t b);
Tensor remainder_integer(const Tensor& a, std::int64_t b);
Tensor fmod_integer(const Tensor& a, std::int64_t b);
}  // namespace detail
template <class I, detail::if_integer<I> = 0>
Tensor floor_divide(const Tensor& a, I b) {
  return detail::floor_divide_integer(a, static_cast<std::int64_t>(b));
}
template <class I, detail::if_integer<I> = 0>
Tensor remainder(const Tensor& a, I b) {
  return detail::remainder_integer(a, static_cast<std::int64_t>(b));
}
template <class I, detail::if_integer<I> = 0>
Tensor fmod(const Tensor& a, I b) {
  return detail::fmod_integer(a, static_cast<std::int64_t>(b));
}
template <class I, detail::if_integer<I> = 0>
Tensor operator%(const Tensor& a, I b) {
  return remainder(a, b);
}
inline Tensor operator%(const Tensor& a, const Tensor& b) { return remainder(a, b); }
inline Tensor operator%(const Tensor& a, double b) { return remainder(a, b); }

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator+(const Tensor& a, double b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, double b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, double b) { return div(a, b); }
inline Tensor operator+(double a, const Tensor& b) { return add(b, a); }
inline Tensor operator-(double a, const Tensor& b) { return rsub(a, b); }
inline Tensor operator*(double a, const Tensor& b) { return mul(b, a); }
inline Tensor operator/(double a, const Tensor& b) { return rdiv(a, b); }
inline Tensor operator-(const Tensor& x) { return neg(x); }

// ---------------------------------------------------------------- elementwise math
// x^exponent. An int64 (or Bool) tensor to a C++ integer power stays int64, wrapping around as
// int64 arithmetic does (ValueError for a negative power), and to a double power is float32, as
// torch's.
Tensor pow(const Tensor& x, double exponent);
namespace detail {
Tensor pow_integer(const Tensor& x, std::int64_t exponent);
Tensor clamp_integer(const Tensor& x, std::int64_t min, std::int64_t max);
}  // namespace detail
template <class I, detail::if_integer<I> = 0>
Tensor pow(const Tensor& x, I exponent) {
  return detail::pow_integer(x, static_cast<std::int64_t>(exponent));
}
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
// exp(x) - 1 and log(1 + x), exact to the last digits also where |x| is small (exp(x) - 1 in float32
// gives 0 for x = 1e-8); bfloat16 computed in float32 as exp and log.
Tensor expm1(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor abs(const Tensor& x);  // gradient sign(x), 0 at 0
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor rsqrt(const Tensor& x);       // 1 / sqrt(x); gradient -rsqrt(x)^3 / 2
Tensor reciprocal(const Tensor& x);  // 1 / x; gradient -1 / x^2
// Piecewise constant, with torch's gradient 0 everywhere: sign (-1, 0 or 1; NaN gives 0), floor,
// ceil, round (halves to even, as torch.round) and trunc (towards 0). Floating-point tensors.
Tensor sign(const Tensor& x);
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor round(const Tensor& x);
Tensor trunc(const Tensor& x);
// Bool tensors marking NaN, +-infinity, and neither; any dtype (integers and Bool are finite).
Tensor isnan(const Tensor& x);
Tensor isinf(const Tensor& x);
Tensor isfinite(const Tensor& x);
// log(1 + exp(x)), computed as max(x, 0) + log1p(exp(-|x|)) (no overflow); gradient sigmoid(x).
Tensor softplus(const Tensor& x);
// The error function; gradient 2 / sqrt(pi) exp(-x^2). The standard normal CDF is
// 0.5 (1 + erf(x / sqrt(2))) (nn::normal_cdf).
Tensor erf(const Tensor& x);
Tensor relu(const Tensor& x);  // gradient 0 at 0
enum class GeluApproximation { None, Tanh };
// None: x * Phi(x) with the erf; Tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
Tensor gelu(const Tensor& x, GeluApproximation approximate = GeluApproximation::None);
Tensor silu(const Tensor& x);  // x * sigmoid(x)
// Limits x to [min, max]; either bound may be absent. Gradient 1 where min <= x <= max. An int64
// (or Bool) tensor clamped by C++ integers stays int64 (clamp(ids, 0, vocab - 1), clamp(ids, 0,
// std::nullopt), clamp_min(ids, 0)), and with double bounds is float32, as torch's. clamp_min and
// clamp_max are torch's one-sided forms.
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max);
template <class I, class J, detail::if_integer<I> = 0, detail::if_integer<J> = 0>
Tensor clamp(const Tensor& x, I min, J max) {
  return detail::clamp_integer(x, static_cast<std::int64_t>(min), static_cast<std::int64_t>(max));
}
template <class I, detail::if_integer<I> = 0>
Tensor clamp(const Tensor& x, I min, std::nullopt_t) {
  return detail::clamp_integer(x, static_cast<std::int64_t>(min), std::numeric_limits<std::int64_t>::max());
}
template <class I, detail::if_integer<I> = 0>
Tensor clamp(const Tensor& x, std::nullopt_t, I max) {
  return detail::clamp_integer(x, std::numeric_limits<std::int64_t>::min(), static_cast<std::int64_t>(max));
}
inline Tensor clamp_min(const Tensor& x, double min) { return clamp(x, min, std::nullopt); }
inline Tensor clamp_max(const Tensor& x, double max) { return clamp(x, std::nullopt, max); }
template <class I, detail::if_integer<I> = 0>
Tensor clamp_min(const Tensor& x, I min) {
  return clamp(x, min, std::nullopt);
}
template <class I, detail::if_integer<I> = 0>
Tensor clamp_max(const Tensor& x, I max) {
  return clamp(x, std::nullopt, max);
}

// ---------------------------------------------------------------- comparisons and selection
// Comparisons return Bool tensors and are not differentiable.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);
Tensor logical_not(const Tensor& x);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
// condition ? a : b elementwise, all three broadcast; condition is Bool.
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& condition, const Tensor& a, double b);
// x with `value` wherever mask (Bool, broadcast to x's shape) is true.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

// ---------------------------------------------------------------- reductions
// An empty axis list reduces over every axis. keepdim keeps reduced axes with size 1.
// sum of int64 is int64 and of Bool counts in int64 ((pred == labels).sum()), as torch's; mean
// wants floating point, as torch's.
Tensor sum(const Tensor& x, const Dims& axes = {}, bool keepdim = false);
// The product over axes (all of them by default; torch.prod takes one axis or all), 1 over an
// empty axis. Dtypes as cumprod's. The gradient of each entry is the incoming one times the
// product of the other entries reduced with it, exact where they hold zeros (no division by x).
Tensor prod(const Tensor& x, const Dims& axes = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const Dims& axes = {}, bool keepdim = false);
// Largest (smallest) value; the gradient is shared evenly among tied maxima (minima).
Tensor max(const Tensor& x, const Dims& axes = {}, bool keepdim = false);
Tensor min(const Tensor& x, const Dims& axes = {}, bool keepdim = false);
// sum((x - mean)^2) / (N - correction); correction 1 is the unbiased estimate (PyTorch's default).
Tensor var(const Tensor& x, const Dims& axes = {}, std::int64_t correction = 1, bool keepdim = false);
// sqrt(var(x, axes, correction)); where the variance is 0 the gradient is 0 (torch's), not infinite.
// Call it as x.std(...) or tapegrad::std(...): under `using namespace tapegrad` a bare std(...) is
// ambiguous with namespace std.
Tensor std(const Tensor& x, const Dims& axes = {}, std::int64_t correction = 1, bool keepdim = false);
// The p-norm over axes: (sum |x|^p)^(1/p), max |x| for p = infinity (p > 0). Gradient
// sign(x) |x|^(p-1) / norm^(p-1), 0 where the norm is 0; for p = infinity shared evenly among the
// entries at the maximum (PyTorch's linalg.vector_norm).
Tensor norm(const Tensor& x, double p = 2.0, const Dims& axes = {}, bool keepdim = false);
// Index (Int64) of the first largest (smallest) value along axis.
Tensor argmax(const Tensor& x, std::int64_t axis, bool keepdim = false);
Tensor argmin(const Tensor& x, std::int64_t axis, bool keepdim = false);
// log(sum(exp(x))) over axes, computed stably (the max is subtracted first).
Tensor logsumexp(const Tensor& x, const Dims& axes, bool keepdim = false);
// Running sums along axis, x's shape: out[..., k, ...] = x[..., 0, ...] + ... + x[..., k, ...]. float32
// carries the sum in double and rounds each position, as torch's CPU kernel; int64 stays int64, Bool
// counts in int64, bfloat16 follows the float32 policy of sum. Gradient: the running sum of the
// incoming gradient from the end of the axis.
Tensor cumsum(const Tensor& x, std::int64_t axis);
// Running products along axis, x's shape, as torch.cumprod: float32 carries the product in double,
// int64 stays int64 (wrapping around), Bool gives int64, bfloat16 follows the float32 policy.
// Gradient exact where x has zeros (no division by x).
Tensor cumprod(const Tensor& x, std::int64_t axis);
// log(cumsum(exp(x))) along axis, x's shape, as torch.logcumsumexp: each position adds the next entry
// to the running value as log(exp(a) + exp(b)) = max + log1p(exp(min - max)), so no entry overflows or
// vanishes (-1000 then 0 gives -1000 then 0); float32 carries in double, bfloat16 follows the float32
// policy. Floating point only. Gradient: entry j receives sum over k >= j of g[k] exp(x[j] - out[k]),
// computed as torch does in log space from taped ops (so it has its own gradient); like torch's it is
// NaN at an entry of -inf whose running value is still -inf.
Tensor logcumsumexp(const Tensor& x, std::int64_t axis);
// exp(x) / sum(exp(x)) along axis, stable; a row of -inf gives NaN as in PyTorch.
Tensor softmax(const Tensor& x, std::int64_t axis);
// x - logsumexp(x) along axis, stable.
Tensor log_softmax(const Tensor& x, std::int64_t axis);
// Softmax over the last axis of causal attention scores x: (..., Tq, Tk): entry (i, j) with
// j > i + offset gets weight exactly 0 (offset = Tk - Tq when Tq new queries follow cached
// keys). Equals softmax(masked_fill(x, j > i + offset, -inf), -1) in one fused pass.
Tensor causal_softmax(const Tensor& x, std::int64_t offset = 0);

// ---------------------------------------------------------------- matrix products
// NumPy/PyTorch matmul: 1-D operands are promoted (and the added axis removed), the last two
// axes multiply, batch axes broadcast. Runs on BLAS gemm; transposed views are passed to gemm
// as transpose flags, never copied.
Tensor matmul(const Tensor& a, const Tensor& b);
// torch.nn.functional.linear: x (..., in) @ weight (out, in)^T + bias (out), the bias optional.
// One gemm whose output starts as the bias rows (BLAS adds the product to it), so it equals
// matmul(x, weight.mT()) + bias bit for bit without a separate pass over the output. Backward:
// dx = g @ weight, dweight = g^T x over all rows (in weight's layout), dbias = g summed over rows.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
// Einstein summation, as numpy.einsum and torch.einsum read the equation: "ij,jk->ik" (explicit
// output), "ij,jk" (implicit: the labels seen once, in alphabetical order), a label repeated in
// one operand takes its diagonal ("ii->i", "ii->" the trace), labels absent from the output are
// summed, "..." stands for the same leading or middle axes of every operand (broadcast like
// elementwise ops, and first in an implicit output). Labels are letters; spaces are ignored. A
// label's sizes must agree across operands or be 1 (broadcast). Operands are contracted left to
// right, each pair as one batched matmul after permuting and reshaping (labels only one side
// needs summed first), so a product never runs as an element loop; the backward is that of
// those ops, so einsum differentiates to any order. ValueError naming the equation for a
// malformed one, ShapeError for an operand whose rank or sizes do not fit it, TypeError for
// mixed dtypes.
Tensor einsum(const std::string& equation, const TensorList& operands);

// ---------------------------------------------------------------- shape
// A tensor with the same elements in a new shape; one entry may be -1 (inferred). A view when
// the strides allow it, a copy otherwise.
Tensor reshape(const Tensor& x, const Shape& shape);
// Like reshape but must be a view (throws when the strides do not allow it).
Tensor view(const Tensor& x, const Shape& shape);
Tensor flatten(const Tensor& x, std::int64_t start_axis = 0, std::int64_t end_axis = -1);
Tensor transpose(const Tensor& x, std::int64_t axis0, std::int64_t axis1);
Tensor permute(const Tensor& x, const Dims& axes);
Tensor unsqueeze(const Tensor& x, std::int64_t axis);
// Removes axis, which must have size 1.
Tensor squeeze(const Tensor& x, std::int64_t axis);
// Broadcasts x to shape as a view (stride 0 on expanded axes); -1 keeps a size.
Tensor expand(const Tensor& x, const Shape& shape);
Tensor broadcast_to(const Tensor& x, const Shape& shape);
// length elements of axis starting at start (a view).
Tensor narrow(const Tensor& x, std::int64_t axis, std::int64_t start, std::int64_t length);
// Python-style slice [start:end:step] of axis (a view); start/end are clamped like Python's.
Tensor slice(const Tensor& x, std::int64_t axis, std::int64_t start, std::int64_t end, std::int64_t step = 1);
// The sub-tensor at index of axis, with that axis removed (a view).
Tensor select(const Tensor& x, std::int64_t axis, std::int64_t index);
// torch.diagonal: the entries x[.., i, .., i + offset, ..] of axes axis1 and axis2 (offset < 0:
// below the main diagonal), a view with those two axes removed and the diagonal appended last.
// ValueError when the two axes are the same.
Tensor diagonal(const Tensor& x, std::int64_t offset = 0, std::int64_t axis1 = 0, std::int64_t axis2 = 1);
// torch.flip: x with the order of each of `axes` reversed (a copy: an index_select per axis, so the
// gradient is the incoming one flipped back). IndexError for an axis out of range or given twice.
Tensor flip(const Tensor& x, const Dims& axes);
// torch.roll: x with each of `axes` rotated by its shift (entry j moves to j + shift, wrapping
// round); without axes, one shift rotates the flattened tensor and x's shape is kept. A copy.
// ValueError when shifts and axes differ in count.
Tensor roll(const Tensor& x, const Dims& shifts, const Dims& axes = {});
// torch.tile: x repeated reps[i] times along axis i, reps and x's shape padded with leading 1s to
// the same length ((2, 3) tiled by (2,) is (2, 6); by (2, 1, 1), (2, 2, 3)). A copy; the gradient
// sums the copies. Tensor::repeat is torch's Tensor.repeat (at least as many reps as axes).
Tensor tile(const Tensor& x, const Dims& reps);
// torch.tril / torch.triu on the last two axes: the entries with column - row <= diagonal (tril) or
// >= diagonal (triu) kept, the others 0; diagonal 0 is the main diagonal, > 0 above it. Gradient
// the incoming one masked the same way. ShapeError for fewer than two axes.
Tensor tril(const Tensor& x, std::int64_t diagonal = 0);
Tensor triu(const Tensor& x, std::int64_t diagonal = 0);
// Joins tensors along an existing axis / a new axis.
Tensor concat(const std::vector<Tensor>& tensors, std::int64_t axis);
Tensor stack(const std::vector<Tensor>& tensors, std::int64_t axis);
// Views of consecutive pieces of size split_size (the last may be smaller) / of the given sizes.
std::vector<Tensor> split(const Tensor& x, std::int64_t split_size, std::int64_t axis);
std::vector<Tensor> split(const Tensor& x, const std::vector<std::int64_t>& sizes, std::int64_t axis);
std::vector<Tensor> chunk(const Tensor& x, std::int64_t chunks, std::int64_t axis);
// The slices of x along axis, each with that axis removed (views; one node for all of them).
std::vector<Tensor> unbind(const Tensor& x, std::int64_t axis = 0);

// ---------------------------------------------------------------- sliding windows
// torch's F.unfold (im2col): every kernel_size window of an (N, C, H, W) image batch, zero-padded by
// `padding` on each side, taken every `stride` pixels with taps `dilation` apart, as a column of
// (N, C * kh * kw, windows); rows ordered (channel, kernel row, kernel column), windows row-major.
// Each option takes one value (both axes) or two (height, width). A (C, H, W) input gives (C * kh *
// kw, windows); an (N, C, D, H, W) batch of volumes gives (N, C * kd * kh * kw, windows), each option
// then one value or three (depth, height, width) (torch's unfold has no 3-D form; its conv3d
// computes the same columns). ShapeError when no window fits, ValueError for a kernel, dilation or
// stride below 1 or a negative padding. fold is its adjoint, as torch's F.fold: the columns added back
// into images of output_size (three extents: volumes), overlapping windows summed; each is the
// other's gradient. The convolutions and pools (nn/conv.h) are unfold and a matmul or a reduction.
Tensor unfold(const Tensor& x, const Dims& kernel_size, const Dims& dilation = {1}, const Dims& padding = {0},
              const Dims& stride = {1});
Tensor fold(const Tensor& x, const Dims& output_size, const Dims& kernel_size, const Dims& dilation = {1},
            const Dims& padding = {0}, const Dims& stride = {1});
// The indices of max pooling (torch's max_pool2d_with_indices): for every window of unfold's
// geometry over an (N, C, H, W) or (C, H, W) input, the offset row * W + column, within its (H, W)
// plane, of the window's first largest entry in row-major order or of its last NaN (as torch's CPU
// kernel), the taps in the padding skipped; `overhang` rows and columns past the padded end
// (ceil_mode's) add windows that run past it. Int64 of shape (N, C, oh, ow) or (C, oh, ow); no
// gradient (a gather with it is the pool). An (N, C, D, H, W) input gives the offsets (depth * H +
// row) * W + column within each volume, (N, C, od, oh, ow). ValueError when a window holds no pixel
// of the input.
Tensor window_argmax(const Tensor& x, const Dims& kernel_size, const Dims& dilation = {1}, const Dims& padding = {0},
                     const Dims& stride = {1}, const Dims& overhang = {0});
// The same for adaptive max pooling: output_size (one value for every axis, or one per axis) windows
// over each axis of n entries, window i spanning [floor(i * n / out), ceil((i + 1) * n / out)). ValueError for
// an output size below 1, ShapeError for an empty spatial axis.
Tensor adaptive_window_argmax(const Tensor& x, const Dims& output_size);
// The same for fractional max pooling (Graham 2014, torch's fractional_max_pool2d/3d): windows of
// kernel_size entries, output_size of them along each axis, placed pseudo-randomly by the plane's
// samples (N, C, axes) in [0, 1), sample a for spatial axis a (height then width, or depth, height,
// width) except that, as torch's, a 2-D input reads sample 0 for the width and 1 for the height.
// Along an axis of n entries, window i < out - 1 starts at floor((i + u) alpha) - floor(u alpha),
// alpha = (n - k) / (out - 1) computed in x's dtype, and the last at n - k. ValueError when k + out - 1
// exceeds n along an axis, for sizes below 1, or samples of another shape or dtype or outside [0, 1).
Tensor fractional_window_argmax(const Tensor& x, const Dims& kernel_size, const Dims& output_size,
                                const Tensor& samples);

// ---------------------------------------------------------------- indexing
// torch.nonzero: the coordinates of x's nonzero entries (NaN counts as nonzero), Int64 (n, rank),
// in row-major order. Not differentiable (a bool mask's Tensor::index goes through it).
Tensor nonzero(const Tensor& x);
// The entries of x at `index` (Int64, 1-D) along axis.
Tensor index_select(const Tensor& x, std::int64_t axis, const Tensor& index);
// out[i][j][k] = x[index[i][j][k]][j][k] (axis 0), etc.; index has x's rank.
Tensor gather(const Tensor& x, std::int64_t axis, const Tensor& index);
// x with src added at `index` along axis (the adjoint of gather).
Tensor scatter_add(const Tensor& x, std::int64_t axis, const Tensor& index, const Tensor& src);
// torch.scatter: x with out[index[i][j]][j] = src[i][j] (axis 0), etc.; index as scatter_add's;
// or the number value written there. An entry that index names twice gets the last of its src
// values in row-major order (as torch's CPU kernels; the others get no gradient).
Tensor scatter(const Tensor& x, std::int64_t axis, const Tensor& index, const Tensor& src);
Tensor scatter(const Tensor& x, std::int64_t axis, const Tensor& index, double value);
// torch.index_add / index_copy / index_fill along axis, index 1-D int64 in [0, x.size(axis)) and src
// of x's shape but for index.numel() entries along the axis: out[.., index[i], ..] is x's plus
// alpha * src[.., i, ..] (repeated indices add up), src[.., i, ..] (repeated: the last, as scatter),
// or value. IndexError for an index out of range, ShapeError for src's shape, TypeError for its dtype.
Tensor index_add(const Tensor& x, std::int64_t axis, const Tensor& index, const Tensor& src, double alpha = 1.0);
Tensor index_copy(const Tensor& x, std::int64_t axis, const Tensor& index, const Tensor& src);
Tensor index_fill(const Tensor& x, std::int64_t axis, const Tensor& index, double value);
namespace detail {
// Tensor::index_add_ (value: alpha), index_copy_ and index_fill_ (value) when not recorded: the
// checks of the out-of-place ops (naming op), then row by row into target, so the cost follows the
// index, not target (a few rows of a large table).
enum class RowWrite { Add, Copy, Fill };
void write_rows(const Tensor& target, std::int64_t axis, const Tensor& index, const Tensor& src, double value,
                RowWrite mode, const char* op);
}  // namespace detail
// Advanced indexing, torch's x[i0, i1, ...] with int64 index tensors for x's first axes: the
// indices broadcast together (negative entries count from the end) and pick x's entries, giving
// (broadcast shape) + x's remaining axes. index_put is the write x[i0, i1, ...] = values (values
// broadcast to that shape), or += with accumulate, where repeated indices add up (without
// accumulate the last write wins, as scatter's). IndexError for an index out of
// range, ShapeError for too many indices or values that do not broadcast, TypeError for dtypes.
Tensor index(const Tensor& x, const std::vector<Tensor>& indices);
Tensor index_put(const Tensor& x, const std::vector<Tensor>& indices, const Tensor& values, bool accumulate = false);
// Rows of weight (V, D) picked by indices (Int64, any shape): (..., D). Backward scatter-adds
// into weight's gradient; rows at padding_idx (if given) receive no gradient. With sparse, weight
// must be a leaf, and backward appends the rows used to its row-sparse gradient
// (Tensor::sparse_grad) instead of building a dense (V, D) one; without padding among the indices
// those rows are the incoming gradient itself, not a copy (as PyTorch's are), so a gradient a
// caller keeps (a backward seed, a hook's result) is not to be written in place before the step.
Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<std::int64_t> padding_idx = std::nullopt,
                 bool sparse = false);
// The rows of weight (V, D) at indices (Int64 (B, N)) dotted with queries (B, D): out (B, N),
// out[b][n] = weight[indices[b][n]] . queries[b]. Equal to (embedding(weight, indices) *
// unsqueeze(queries, 1)).sum({2}) without the (B, N, D) rows in between: the scores of sampled
// output words (negative sampling) or of Huffman path nodes (hierarchical softmax). sparse as in
// embedding. An index equal to padding_idx (when given; within [0, V)) scores 0 and sends no
// gradient anywhere, and the kernels do not read its row: the padding of paths of different
// lengths costs nothing (the taped backward of create_graph reads it and multiplies it by 0).
// With sparse, the row-sparse gradient has a row per position that is not padding; with
// sum_repeated too, a row per distinct index (in the order of first appearance), the sum of its
// positions' rows, added in the dense gradient's order. Worth it when indices repeat much within a
// call, as the nodes near a Huffman tree's root do (on every path): the optimiser then updates each
// row once per call. Counting the distinct indices costs a hash probe per position, a loss where
// most are distinct. Without sparse, sum_repeated changes nothing (a dense gradient sums anyway).
Tensor embedding_dot(const Tensor& weight, const Tensor& indices, const Tensor& queries, bool sparse = false,
                     std::optional<std::int64_t> padding_idx = std::nullopt, bool sum_repeated = false);
// The rows of weight (V, D) at indices (Int64 (N)) summed per bag, each times its scale: out (B, D),
// out[b] = sum over i in bag b of scale[i] * weight[indices[i]], bag b holding the indices
// [bag_starts[b], bag_starts[b + 1]) (the last to N), scale (N) of weight's dtype or undefined (1).
// Equal to scatter-adding embedding(weight, indices) * unsqueeze(scale, 1) into the bags without
// the (N, D) rows in between; nn::embedding_bag's sums and means. Gradients reach weight (row-sparse
// with sparse, as in embedding) and scale. ValueError unless the starts begin at 0 and never
// decrease or pass N, or for indices without a bag; IndexError for an index outside weight;
// ShapeError or TypeError for a scale of another shape or dtype.
// sum_repeated as in embedding_dot: with sparse, a row per distinct index (an index in many bags, as
// a context word is in CBOW's), the sum of its rows (equal to the dense gradient's row bit for bit
// without scales, to rounding with them).
Tensor embedding_bag_sum(const Tensor& weight, const Tensor& indices, const std::vector<std::int64_t>& bag_starts,
                         const Tensor& scale = Tensor(), bool sparse = false, bool sum_repeated = false);
// The k largest (or smallest) entries along axis, and their indices (Int64): ties go to the lower
// index, NaN counts as larger than every number (as torch's). float32, float64, int64, and
// bfloat16 compared in float32. Gradient flows through the values to the selected entries.
std::pair<Tensor, Tensor> topk(const Tensor& x, std::int64_t k, std::int64_t axis = -1, bool largest = true,
                               bool sorted = true);
// torch.sort with stable=True: every entry along axis in ascending (descending) order, and where
// each came from; equal entries keep their order, NaN sorts as the largest. argsort: the indices.
std::pair<Tensor, Tensor> sort(const Tensor& x, std::int64_t axis = -1, bool descending = false);
Tensor argsort(const Tensor& x, std::int64_t axis = -1, bool descending = false);
// indices (Int64, any shape) -> (..., num_classes) with 1 at each index.
Tensor one_hot(const Tensor& indices, std::int64_t num_classes, DType dtype = kInt64);

// ---------------------------------------------------------------- sampling
// Draws category indices (Int64) from probs (C) -> (num_samples) or (N, C) -> (N, num_samples), row by row, as
// torch.multinomial: rows need not be normalised (weights proportional to the probabilities). Without replacement
// each category is drawn at most once per row (successive draws renormalise over the rest). The same generator
// state gives the same draws. ShapeError for other ranks; ValueError for num_samples <= 0, a negative, infinite or
// NaN entry, a row summing to 0, or (without replacement) fewer non-zero categories than num_samples.
Tensor multinomial(const Tensor& probs, std::int64_t num_samples, bool replacement, Generator& gen);

// ---------------------------------------------------------------- neural-network functions
// Normalises over the trailing axes given by normalized_shape: (x - mean) / sqrt(var + eps),
// var biased, then * weight + bias (either may be undefined). Forward and backward fused.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
// Binary cross-entropy on logits x with targets y of x's shape, elementwise (nn's
// binary_cross_entropy_with_logits reduces it), forward and backward each one pass:
//   loss = weight ((1 - y) x + (1 + (pos_weight - 1) y) softplus(-x))
// pos_weight and weight (nn's order) broadcast to x's shape (undefined: 1); all four of x's dtype,
// except that bfloat16 is computed in float32 (the result bfloat16 when x is). Every input gets its
// gradient; a taped backward (create_graph) computes the same formulas with ops.
Tensor logistic_loss(const Tensor& logits, const Tensor& targets, const Tensor& pos_weight = Tensor(),
                     const Tensor& weight = Tensor());
// Zeroes each element with probability p and scales the rest by 1 / (1 - p) when training;
// the identity otherwise.
Tensor dropout(const Tensor& x, double p, bool training, Generator& gen);

// k or v (..., Hkv, Tk, C) with each head repeated group times: (..., Hkv * group, Tk, C), head h
// of the result being head h / group of x (grouped-query attention without the fused kernel).
Tensor repeat_heads(const Tensor& x, std::int64_t group);

// The masks fused_attention applies to the scores (L..., Tq, Tk).
struct FusedAttentionMask {
  bool causal = false;             // query i sees key j only when j <= i + causal_offset
  std::int64_t causal_offset = 0;  // Tk - Tq when the queries are the last Tq positions
  Tensor bias;  // q's dtype, broadcast to the scores and added to them; -inf = masked. Receives no gradient.
};
// Fused scaled dot-product attention ("flash attention" with an online softmax; nn's
// scaled_dot_product_attention calls it when no weights are asked for):
//   out = softmax(scale * q @ k^T + masks) @ v          q: (L..., Tq, D), k: (Lkv..., Tk, D),
//                                                       v: (Lkv..., Tk, Dv) -> (L..., Tq, Dv)
// Lkv equals L, except that the last leading axis (the heads) of q may be a multiple of k's and
// v's: query head h then reads key/value head h / (H / Hkv) (grouped- and multi-query attention).
// The scores are never materialised: key tiles stream through a running max and sum, only each
// row's log-sum-exp is kept for the backward, which recomputes the probabilities tile by tile.
// A row whose keys are all masked gives a zero output row and no gradient, never NaN. A taped
// backward (create_graph) computes the same formulas with ops. Throws ShapeError / TypeError /
// ValueError naming the shapes.
Tensor fused_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                       const FusedAttentionMask& mask = {});

// ---------------------------------------------------------------- recurrent layers
// The cell of a recurrent layer: Elman with tanh or ReLU, LSTM, GRU (PyTorch's formulas and gate
// order, see kernels/recurrent.h).
enum class RecurrentMode { RnnTanh, RnnRelu, Lstm, Gru };
// Gate blocks per hidden unit: 1 (Elman), 4 (LSTM: i, f, g, o), 3 (GRU: r, z, n).
int recurrent_gates(RecurrentMode mode);
// "rnn_tanh", "rnn_relu", "lstm", "gru" (the ops' names in messages: "lstm_layer: ...").
const char* recurrent_mode_name(RecurrentMode mode);

// ---------------------------------------------------------------- grids, products and bins (ops/grids.cpp)
// torch.meshgrid: 1-D tensors of sizes n1, n2, ... each expanded to (n1, n2, ...) (views; gradients sum
// back); XY indexing swaps the first two axes, (n2, n1, ...), as numpy's. ShapeError for a tensor
// that is not 1-D, ValueError for none.
enum class MeshIndexing { IJ, XY };
std::vector<Tensor> meshgrid(const std::vector<Tensor>& tensors, MeshIndexing indexing = MeshIndexing::IJ);
// torch.cartesian_prod: every combination of the 1-D tensors' entries as the rows of (n1 n2 ..., k),
// the last tensor's entry varying fastest; one tensor is returned as it is.
Tensor cartesian_prod(const std::vector<Tensor>& tensors);
// torch.kron: the Kronecker product, the shorter shape padded with leading 1s: out[i * B + j] =
// a[i] b[j] along every axis (B the axis's size in b).
Tensor kron(const Tensor& a, const Tensor& b);
// torch.diag_embed over the last two axes: x (..., n) -> (..., m, m), m = n + |offset|, with x[..., i]
// at [i, i + offset] (offset >= 0) or [i - offset, i], zeros elsewhere.
Tensor diag_embed(const Tensor& x, std::int64_t offset = 0);
// How cdist computes p = 2 distances, as torch's compute_mode: in product form (below) when P > 25 or
// R > 25 (torch's default, use_mm_for_euclid_dist_if_necessary), always, or never.
enum class CdistMode { MmForEuclidIfNecessary, MmForEuclid, DonotMmForEuclid };
// torch.cdist: the p-norm distances between the rows of x1 (..., P, M) and x2 (..., R, M) -> (..., P, R),
// batch axes broadcast; p = 0 counts the coordinates that differ (its gradient is 0), p = infinity takes
// the largest difference. The gradient at a zero distance is 0 (torch's product form clamps the squared
// distance at 1e-30 instead, so its gradient there is finite but not 0). The product form computes
// sqrt(max(|a|^2 + |b|^2 - 2 a.b, 0)) with one matmul, in float32 or float64 (autocast does not lower it),
// and never holds the (..., P, R, M) differences the other form makes; near rows lose digits to
// cancellation there, as in torch. ValueError for p < 0 or NaN.
Tensor cdist(const Tensor& x1, const Tensor& x2, double p = 2.0, CdistMode mode = CdistMode::MmForEuclidIfNecessary);
// torch.tril_indices / triu_indices: the (row, column) pairs, as Int64 (2, k) in row-major order, of
// the entries of a rows x cols matrix on or below (above) the diagonal `offset` (> 0: above the main).
Tensor tril_indices(std::int64_t rows, std::int64_t cols, std::int64_t offset = 0);
Tensor triu_indices(std::int64_t rows, std::int64_t cols, std::int64_t offset = 0);
// torch.searchsorted: for each value, the index where it would be inserted into `sorted` (ascending
// along the last axis) to keep it sorted: the first i with sorted[i] >= v, or > v when right. sorted
// 1-D serves values of any shape; otherwise its leading axes equal the values'. Int64, the values'
// shape; comparisons are IEEE's, as torch's binary search (a NaN value lands at the end), on values
// read as double (int64 entries beyond 2^53 compare rounded). bucketize(input, boundaries,
// right) is searchsorted(boundaries, input, right): boundaries[i - 1] < x <= boundaries[i] (right: boundaries[i - 1] <=
// x < boundaries[i]).
Tensor searchsorted(const Tensor& sorted, const Tensor& values, bool right = false);
Tensor bucketize(const Tensor& input, const Tensor& boundaries, bool right = false);
// torch.histc: counts of x's entries in `bins` equal bins over [min, max] (x == max in the last), in
// x's dtype; entries outside (and NaN) are not counted. min == max takes the data's range (widened by
// 1 each side when the data are constant). Not differentiable: the result never requires grad.
// ValueError for bins < 1, a min or max that is not finite, or min > max.
Tensor histc(const Tensor& x, std::int64_t bins = 100, double min = 0.0, double max = 0.0);

// One recurrent layer, one direction, over a whole sequence as one op with its own backward.
//   input_gates (T, B, G H): the input's part of the pre-activations, x W_ih^T + b_ih, for all
//                            steps at once (the caller's one product over the sequence)
//   h0, c0 (B, H):           initial states; c0 for the LSTM only (undefined otherwise)
//   w_hh (G H, H), b_hh (G H) or undefined
//   lengths:                 Int64 (B) in [0, T], or undefined for T: item b runs its first
//                            lengths[b] steps (reverse: those steps from the last back); at the
//                            other steps its state passes through unchanged and its output is 0,
//                            so padding never reaches a state or a gradient.
// Returns {output (T, B, H), h_n (B, H), c_n (B, H) for the LSTM}. A step is one gemm with W_hh
// and one pass of the fused gate kernel; backward is one gemm and the gate kernel's backward per
// step, then one gemm over all steps for W_hh's gradient. A taped backward (create_graph) computes
// the same formulas with ops. Throws ShapeError / TypeError / ValueError naming the op and values.
TensorList recurrent_layer(RecurrentMode mode, const Tensor& input_gates, const Tensor& h0, const Tensor& c0,
                           const Tensor& w_hh, const Tensor& b_hh, const Tensor& lengths = Tensor(),
                           bool reverse = false);

// PyTorch's one-step cells (torch.rnn_tanh_cell ...): x (B, I), states (B, H), w_ih (G H, I),
// w_hh (G H, H), biases (G H) or undefined. The gate math is recurrent_layer's fused kernel.
Tensor rnn_tanh_cell(const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh,
                     const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor());
Tensor rnn_relu_cell(const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh,
                     const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor());
// Returns {h', c'}.
std::pair<Tensor, Tensor> lstm_cell(const Tensor& x, const Tensor& h, const Tensor& c, const Tensor& w_ih,
                                    const Tensor& w_hh, const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor());
Tensor gru_cell(const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih = Tensor(),
                const Tensor& b_hh = Tensor());

}  // namespace tapegrad
