#pragma once
// Dims: a small inline vector of int64 used for shapes, strides and axis lists. Tensors have
// at most kMaxRank axes; keeping the dims inline spares a heap allocation per op, which
// matters when a training step runs a few dozen tiny ops.

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "tapegrad/autograd/error.h"

namespace tapegrad {

constexpr int kMaxRank = 8;

class Dims {
 public:
  Dims() = default;
  Dims(std::initializer_list<std::int64_t> dims) { assign(dims.begin(), dims.end()); }
  Dims(const std::vector<std::int64_t>& dims) { assign(dims.begin(), dims.end()); }  // NOLINT: implicit by design
  template <class It>
  Dims(It first, It last) {
    assign(first, last);
  }
  // n copies of value.
  static Dims filled(int n, std::int64_t value) {
    Dims d;
    for (int i = 0; i < n; ++i) d.push_back(value);
    return d;
  }

  int size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::int64_t& operator[](int i) { return data_[i]; }
  std::int64_t operator[](int i) const { return data_[i]; }
  std::int64_t back() const { return data_[size_ - 1]; }
  std::int64_t* begin() { return data_; }
  std::int64_t* end() { return data_ + size_; }
  const std::int64_t* begin() const { return data_; }
  const std::int64_t* end() const { return data_ + size_; }
  const std::int64_t* data() const { return data_; }

  void push_back(std::int64_t v) {
    if (size_ == kMaxRank) throw ShapeError(message("tapegrad supports at most ", kMaxRank, " dimensions"));
    data_[size_++] = v;
  }
  void insert(int pos, std::int64_t v) {
    push_back(0);
    for (int i = size_ - 1; i > pos; --i) data_[i] = data_[i - 1];
    data_[pos] = v;
  }
  void erase(int pos) {
    for (int i = pos; i + 1 < size_; ++i) data_[i] = data_[i + 1];
    --size_;
  }
  void pop_back() { --size_; }
  bool contains(std::int64_t v) const { return std::find(begin(), end(), v) != end(); }

  // Product of the entries (the element count of a shape); 1 for an empty shape. A product
  // beyond int64 (a shape read from a file, say) is a ShapeError, never an overflow.
  std::int64_t numel() const {
    std::int64_t n = 1;
    bool overflow = false;
    for (int i = 0; i < size_; ++i) overflow |= __builtin_mul_overflow(n, data_[i], &n);  // wraps, defined
    if (overflow) {
      if (contains(0)) return 0;
      throw ShapeError("shape " + str() + " has too many elements");
    }
    return n;
  }
  std::vector<std::int64_t> vec() const { return std::vector<std::int64_t>(begin(), end()); }

  friend bool operator==(const Dims& a, const Dims& b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }
  friend bool operator!=(const Dims& a, const Dims& b) { return !(a == b); }

  // "(2,3)"; a scalar shape prints as "()".
  std::string str() const {
    std::string s = "(";
    for (int i = 0; i < size_; ++i) {
      if (i) s += ",";
      s += std::to_string(data_[i]);
    }
    return s + ")";
  }

 private:
  template <class It>
  void assign(It first, It last) {
    for (; first != last; ++first) push_back(static_cast<std::int64_t>(*first));
  }
  std::int64_t data_[kMaxRank] = {};
  int size_ = 0;
};

using Shape = Dims;

// Row-major (C order) strides, in elements, of a shape. Extents of 0 count as 1, so a shape such
// as (0, 2^62, 2^62) has strides too large for int64 although it holds no element: ShapeError.
inline Dims contiguous_strides(const Shape& shape) {
  Dims strides = Dims::filled(shape.size(), 1);
  for (int i = shape.size() - 2; i >= 0; --i)
    if (__builtin_mul_overflow(strides[i + 1], std::max<std::int64_t>(shape[i + 1], 1), &strides[i]))
      throw ShapeError("shape " + shape.str() + ": its strides overflow int64");
  return strides;
}

// Maps a possibly negative axis into [0, rank); op names the caller in the error message.
inline int normalize_axis(std::int64_t axis, int rank, const char* op) {
  const int r = std::max(rank, 1);
  if (axis < -r || axis >= r)
    throw IndexError(message(op, ": axis ", axis, " is out of range for a tensor of rank ", rank));
  return static_cast<int>(axis < 0 ? axis + r : axis);
}

// NumPy broadcasting of two shapes.
inline Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const int n = std::max(a.size(), b.size());
  Shape out = Dims::filled(n, 1);
  for (int i = 0; i < n; ++i) {
    const std::int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const std::int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      throw ShapeError(message(op, ": shapes ", a.str(), " and ", b.str(), " cannot be broadcast together"));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace tapegrad
