#pragma once
// Indexing as in torch's C++ API (torch::indexing): Python's x[...] written as x.index({...}) and
// x[...] = v as x.index_put_({...}, v).
//
//   using namespace tapegrad::indexing;
//   x.index({Slice(), 0})                   // x[:, 0]          a view
//   x.index({Slice(1, None, 2), None})      // x[1::2, None]    a view with a new axis of size 1
//   x.index({Ellipsis, -1})                 // x[..., -1]       a view
//   x.index({rows, Slice(), cols})          // x[rows, :, cols] a copy (advanced indexing)
//   x.index({mask})                         // x[mask]          a copy: the entries where mask is true
//   x.index_put_({Slice(), 0}, 1.0);        // x[:, 0] = 1
//   x.index_put_({rows}, values, true);     // x[rows] += values, repeated rows adding up
//
// The items, in order, each take axes of x from the left: an integer selects one entry and removes
// its axis; a Slice(start, stop, step) keeps a strided range (Python's bounds: None the default,
// negative counting from the end, clamped to the axis; step positive); None (and true) inserts a new
// axis of size 1 (false: of size 0) and takes none; Ellipsis stands for as many full slices as the
// other items leave (at most one); an int64 tensor indexes its axis with its entries; a bool tensor
// stands for the int64 tensors of its nonzero() coordinates over as many axes as it has. Axes left
// over are taken whole.
//
// Without tensors the result is a view of x (select, slice, unsqueeze), so writing into it writes x.
// With them it is advanced indexing (ops.h's index), applied after the other items: the index
// tensors broadcast together, and their shape takes the place of the axes they index when those axes
// are adjacent, the front of the result otherwise (numpy's and torch's rule; integers count as
// selected before, as in torch, so x[rows, 0, cols] keeps rows and cols adjacent). index_put_ writes
// the same entries (values broadcast to the result's shape), recorded on the tape like every
// in-place op (inplace.h). Gradients come from the ops the items become.
//
// Errors name `index` or `index_put_` and the position of the offending item: IndexError for an
// integer out of range, too many items for x's rank, a second Ellipsis, or a mask whose shape is
// not that of the axes it covers; ValueError for a step that is not positive; TypeError for an
// index tensor that is neither int64 nor bool.

#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>

#include "tapegrad/autograd/tensor.h"

namespace tapegrad::indexing {

// Python's None in an index: a new axis of size 1, or a default bound of a Slice.
inline constexpr std::nullopt_t None = std::nullopt;

struct EllipsisIndexType {
  explicit constexpr EllipsisIndexType() = default;
};
// Python's ...: as many full slices as the other items leave.
inline constexpr EllipsisIndexType Ellipsis{};

// Python's start:stop:step. Unset bounds are the axis's ends, an unset step is 1.
class Slice {
 public:
  Slice(std::optional<std::int64_t> start = std::nullopt, std::optional<std::int64_t> stop = std::nullopt,
        std::optional<std::int64_t> step = std::nullopt)
      : start_(start), stop_(stop), step_(step) {}
  std::optional<std::int64_t> start() const { return start_; }
  std::optional<std::int64_t> stop() const { return stop_; }
  std::optional<std::int64_t> step() const { return step_; }

 private:
  std::optional<std::int64_t> start_, stop_, step_;
};

// One item of an index list.
class TensorIndex {
 public:
  enum class Kind { Integer, Slice, None, Ellipsis, Boolean, Tensor };

  TensorIndex(std::nullopt_t) : kind_(Kind::None) {}                  // NOLINT(google-explicit-constructor)
  TensorIndex(EllipsisIndexType) : kind_(Kind::Ellipsis) {}           // NOLINT(google-explicit-constructor)
  TensorIndex(bool value) : kind_(Kind::Boolean), integer_(value) {}  // NOLINT(google-explicit-constructor)
  template <class I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
  TensorIndex(I value) : kind_(Kind::Integer), integer_(static_cast<std::int64_t>(value)) {}  // NOLINT
  TensorIndex(Slice slice) : kind_(Kind::Slice), slice_(std::move(slice)) {}  // NOLINT(google-explicit-constructor)
  TensorIndex(Tensor tensor) : kind_(Kind::Tensor), tensor_(std::move(tensor)) {}  // NOLINT

  Kind kind() const { return kind_; }
  std::int64_t integer() const { return integer_; }  // the Integer's value; 0 or 1 for a Boolean
  const Slice& slice() const { return slice_; }
  const Tensor& tensor() const { return tensor_; }

 private:
  Kind kind_;
  std::int64_t integer_ = 0;
  Slice slice_;
  Tensor tensor_;
};

}  // namespace tapegrad::indexing
