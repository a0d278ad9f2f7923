// Autocast's thread-local state and the casts ops use to apply its policy. See autocast.h.

#include "tapegrad/autograd/autocast.h"

#include <string>

#include "tapegrad/autograd/tensor.h"

namespace tapegrad {

namespace {

thread_local bool autocast_on = false;

}  // namespace

bool autocast_enabled() { return autocast_on; }

DType autocast_dtype() { return kBFloat16; }

AutocastGuard::AutocastGuard(DType dtype, bool enabled) : previous_enabled_(autocast_on) {
  if (dtype != kBFloat16)
    throw ValueError(message("AutocastGuard: only bfloat16 autocast exists, got ", dtype_name(dtype)));
  autocast_on = enabled;
}

AutocastGuard::~AutocastGuard() { autocast_on = previous_enabled_; }

namespace detail {

bool autocast_lowers(std::initializer_list<const Tensor*> operands) {
  if (!autocast_on) return false;
  bool any_float32 = false;
  for (const Tensor* t : operands) {
    if (!t->defined()) continue;
    if (t->dtype() == kFloat32) any_float32 = true;
    else if (t->dtype() != kBFloat16) return false;
  }
  return any_float32;
}

Tensor autocast_lower(const Tensor& t) { return t.defined() && t.dtype() == kFloat32 ? t.to(kBFloat16) : t; }

bool is_bf16(const Tensor& t) { return t.defined() && t.dtype() == kBFloat16; }

Tensor widen_bf16(const Tensor& x) { return is_bf16(x) ? x.to(kFloat32) : x; }

Tensor precision_result(const Tensor& result, DType input_dtype) {
  if (input_dtype != kBFloat16 || autocast_on || result.dtype() != kFloat32) return result;
  return result.to(kBFloat16);
}

AutocastOffGuard::AutocastOffGuard() : previous_(autocast_on) { autocast_on = false; }

AutocastOffGuard::~AutocastOffGuard() { autocast_on = previous_; }

}  // namespace detail

}  // namespace tapegrad
