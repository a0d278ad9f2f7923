#pragma once
// Element types. Float32 is what training runs in; Float64 is what gradcheck runs in; BFloat16
// is the half-width float that mixed precision (autocast.h) multiplies matrices in; Int64 holds
// indices (class targets, token ids, topk indices); Bool holds masks.

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "tapegrad/autograd/bfloat16.h"
#include "tapegrad/autograd/error.h"

namespace tapegrad {

enum class DType : std::uint8_t { Float32, Float64, Int64, Bool, BFloat16 };

constexpr DType kFloat32 = DType::Float32;
constexpr DType kFloat64 = DType::Float64;
constexpr DType kInt64 = DType::Int64;
constexpr DType kBool = DType::Bool;
constexpr DType kBFloat16 = DType::BFloat16;

inline std::size_t element_size(DType dtype) {
  switch (dtype) {
    case DType::Float32:
      return 4;
    case DType::Float64:
      return 8;
    case DType::Int64:
      return 8;
    case DType::Bool:
      return 1;
    case DType::BFloat16:
      return 2;
  }
  return 0;
}

inline const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Float32:
      return "float32";
    case DType::Float64:
      return "float64";
    case DType::Int64:
      return "int64";
    case DType::Bool:
      return "bool";
    case DType::BFloat16:
      return "bfloat16";
  }
  return "unknown";
}

inline bool is_floating(DType dtype) {
  return dtype == DType::Float32 || dtype == DType::Float64 || dtype == DType::BFloat16;
}

// torch.promote_types: the smallest dtype that holds values of both, by category first (bool below
// int64 below the floating types), then by width among the floating types (bfloat16 and float32
// meet in float32, either and float64 in float64).
inline DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (is_floating(a) != is_floating(b)) return is_floating(a) ? a : b;
  if (!is_floating(a)) return DType::Int64;  // bool and int64
  if (a == DType::Float64 || b == DType::Float64) return DType::Float64;
  return DType::Float32;  // bfloat16 and float32
}

// torch.can_cast: whether an op's result of dtype `from` may be written into a tensor of dtype `to`
// (the rule of in-place ops): anything into a floating type, bool and int64 into int64, only bool into
// bool.
inline bool can_cast(DType from, DType to) {
  if (is_floating(to)) return true;
  if (to == DType::Int64) return !is_floating(from);
  return from == DType::Bool;
}

// The C++ type stored for each dtype (Bool is stored as one byte).
template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::Float32;
  else if constexpr (std::is_same_v<T, double>) return DType::Float64;
  else if constexpr (std::is_same_v<T, std::int64_t>) return DType::Int64;
  else if constexpr (std::is_same_v<T, bool>) return DType::Bool;
  else if constexpr (std::is_same_v<T, BFloat16>) return DType::BFloat16;
  else static_assert(sizeof(T) == 0, "tapegrad: no dtype for this C++ type");
}

// Calls f(T{}) with T float or double; other dtypes are a TypeError naming op (bfloat16 too:
// ops without a bfloat16 kernel say so, and how to convert).
template <class F>
decltype(auto) dispatch_floating(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::Float32:
      return f(float{});
    case DType::Float64:
      return f(double{});
    case DType::BFloat16:
      throw TypeError(message(op, ": no bfloat16 kernel; convert the input with to(kFloat32)"));
    default:
      throw TypeError(message(op, ": expected a floating-point tensor (float32 or float64), got ", dtype_name(dtype)));
  }
}

// Calls f(T{}) for the numeric dtypes (float32, float64, int64); Bool is a TypeError naming op.
template <class F>
decltype(auto) dispatch_numeric(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::Float32:
      return f(float{});
    case DType::Float64:
      return f(double{});
    case DType::Int64:
      return f(std::int64_t{});
    default:
      throw TypeError(message(op, ": expected a float32, float64 or int64 tensor, got ", dtype_name(dtype)));
  }
}

// Calls f(T{}) for float32, float64 and bfloat16: the ops whose kernels compute bfloat16 in
// float32 and round each result (elementwise arithmetic and activations) take this one.
template <class F>
decltype(auto) dispatch_floating_or_bf16(DType dtype, const char* op, F&& f) {
  if (dtype == DType::BFloat16) return f(BFloat16{});
  return dispatch_floating(dtype, op, std::forward<F>(f));
}

// Calls f(T{}) for any dtype (Bool is passed as bool, stored as one byte).
template <class F>
decltype(auto) dispatch_all(DType dtype, F&& f) {
  switch (dtype) {
    case DType::Float32:
      return f(float{});
    case DType::Float64:
      return f(double{});
    case DType::Int64:
      return f(std::int64_t{});
    case DType::Bool:
      return f(bool{});
    case DType::BFloat16:
      return f(BFloat16{});
  }
  return f(float{});
}

}  // namespace tapegrad
