#pragma once
// Mixed precision: inside an autocast scope, matrix products run in bfloat16 and the ops that need
// float32's precision run in float32, while parameters stay float32 (the optimiser's master weights).
//
//   {
//     AutocastGuard autocast(kBFloat16);
//     Tensor loss = cross_entropy(model->forward(x), y);   // products in bfloat16, loss in float32
//   }
//   loss.backward();                                      // gradients reach the float32 leaves as float32
//
// The policy (docs/mixed_precision.md has the table):
// - products (matmul, linear, and the products inside attention modules, which are matmul and
//   linear) cast their float32 operands to bfloat16 and return bfloat16, accumulated in float32;
// - precision-sensitive ops (softmax, log_softmax, logsumexp, layer_norm, rms_norm, the losses, sum,
//   mean, exp, log) cast bfloat16 inputs to float32 and return float32;
// - every other op follows its inputs: bfloat16 in, bfloat16 out; a bfloat16 and a float32 operand
//   of one elementwise op meet in float32 (type promotion, ops.h), unless the float32 one is 0-dim.
// float64 is never touched: gradcheck runs as without autocast. The casts are ops on the tape (to),
// so their gradients are cast back: a float32 leaf gets a float32 gradient. Backward runs with
// autocast off, whatever scope it is called in: each backward formula runs in the dtypes its forward
// chose.
//
// The state is per thread; guards nest, and AutocastGuard(kBFloat16, false) turns autocast off
// inside an autocast region. Outside autocast, ops given bfloat16 tensors follow their inputs (a
// bfloat16 result), the precision-sensitive ones computing in float32 and rounding the result.

#include <initializer_list>

#include "tapegrad/autograd/dtype.h"

namespace tapegrad {

class Tensor;

// Whether autocast is on in this thread, and the dtype products run in (bfloat16).
bool autocast_enabled();
DType autocast_dtype();

// Sets this thread's autocast state for the guard's lifetime, then restores the previous one.
// dtype must be kBFloat16 (ValueError otherwise).
class AutocastGuard {
 public:
  explicit AutocastGuard(DType dtype, bool enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool previous_enabled_;
};

namespace detail {

// Whether t is defined and bfloat16.
bool is_bf16(const Tensor& t);

// For a product under autocast: true when autocast is on, every defined operand is float32 or
// bfloat16, and at least one is float32 (which autocast_lower then casts).
bool autocast_lowers(std::initializer_list<const Tensor*> operands);
// t cast to bfloat16 (a recorded to()) when it is float32; otherwise t itself (undefined included).
Tensor autocast_lower(const Tensor& t);

// For a precision-sensitive op given x: x widened to float32 (a recorded to()) when x is bfloat16,
// else x itself.
Tensor widen_bf16(const Tensor& x);
// The result of a precision-sensitive op that widened a bfloat16 input: float32 under autocast, else
// rounded back to bfloat16 (the op follows its input). Results of other inputs are returned as they are.
Tensor precision_result(const Tensor& result, DType input_dtype);

// Turns autocast off for the lifetime of the guard (the engine holds one while it runs a backward).
class AutocastOffGuard {
 public:
  AutocastOffGuard();
  ~AutocastOffGuard();
  AutocastOffGuard(const AutocastOffGuard&) = delete;
  AutocastOffGuard& operator=(const AutocastOffGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace detail

}  // namespace tapegrad
