#pragma once
// Indexing kernels: gather and scatter_add along one axis over strided operands (index_select,
// gather, scatter_add and the backward of index_select, gather and topk are made of these two),
// embedding's row copies and row adds, embedding_dot's and embedding_bag_sum's loops over table
// rows (with the count of distinct indices behind embedding_dot's sum_repeated), topk's selection
// along an axis, and one_hot. Each checks the indices it reads against the axis (IndexError naming
// op). The ops are in ops/index.cpp. Static, see rows.h (except distinct_ids, below).

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/kernels/rows.h"
#include "tapegrad/autograd/kernels/strided.h"
#include "tapegrad/autograd/parallel.h"
#include "tapegrad/autograd/tensor.h"

namespace tapegrad::kernels {

// Kept out of line so the bounds check in the kernels' inner loops stays a compare and a branch.
[[noreturn]] __attribute__((noinline)) static inline void throw_out_of_range(const char* op, std::int64_t value,
                                                                             int axis, std::int64_t size) {
  throw IndexError(message(op, ": index ", value, " is out of range for axis ", axis, " of size ", size));
}

// strides with the one of axis set to 0.
static inline Dims zero_axis(Dims strides, int axis) {
  strides[axis] = 0;
  return strides;
}

// out[p] = x[p with its axis coordinate replaced by index[p]], for every position p of index.
// index: any shape of x's rank with index.size(d) <= x.size(d) off the axis; out: index's shape,
// any strides; x: any strides.
template <class T>
static void gather(const Tensor& x, int axis, const Tensor& index, const Tensor& out, const char* op) {
  const T* px = x.data_ptr<T>();
  const std::int64_t* pi = index.data_ptr<std::int64_t>();
  T* po = out.data_ptr<T>();
  const std::int64_t size = x.shape()[axis];
  const std::int64_t axis_stride = x.strides()[axis];
  for_each_run<3>(index.shape(), {out.strides(), index.strides(), zero_axis(x.strides(), axis)},
                  [&](Offsets<3> off, std::int64_t n, Offsets<3> st) {
                    T* o = po + off[0];
                    const std::int64_t* ix = pi + off[1];
                    const T* xb = px + off[2];
                    if (st[1] == 0) {  // one index for the whole run: a strided row copy
                      const std::int64_t v = *ix;
                      if (v < 0 || v >= size) throw_out_of_range(op, v, axis, size);
                      const T* src = xb + v * axis_stride;
                      if (st[0] == 1 && st[2] == 1) std::copy(src, src + n, o);
                      else
                        for (std::int64_t i = 0; i < n; ++i) o[i * st[0]] = src[i * st[2]];
                      return;
                    }
                    for (std::int64_t i = 0; i < n; ++i) {
                      const std::int64_t v = ix[i * st[1]];
                      if (v < 0 || v >= size) throw_out_of_range(op, v, axis, size);
                      o[i * st[0]] = xb[i * st[2] + v * axis_stride];
                    }
                  });
}

// out[p with its axis coordinate replaced by index[p]] += src[p], for every position p of index,
// in order, so repeated indices accumulate. index.size(d) <= src.size(d) everywhere and
// <= out.size(d) off the axis; out and src: any strides, distinct buffers.
template <class T>
static void scatter_add(const Tensor& out, int axis, const Tensor& index, const Tensor& src, const char* op) {
  T* po = out.data_ptr<T>();
  const std::int64_t* pi = index.data_ptr<std::int64_t>();
  const T* ps = src.data_ptr<T>();
  const std::int64_t size = out.shape()[axis];
  const std::int64_t axis_stride = out.strides()[axis];
  for_each_run<3>(index.shape(), {zero_axis(out.strides(), axis), index.strides(), src.strides()},
                  [&](Offsets<3> off, std::int64_t n, Offsets<3> st) {
                    T* ob = po + off[0];
                    const std::int64_t* ix = pi + off[1];
                    const T* s = ps + off[2];
                    if (st[1] == 0) {  // one index for the whole run: a strided row add
                      const std::int64_t v = *ix;
                      if (v < 0 || v >= size) throw_out_of_range(op, v, axis, size);
                      T* dst = ob + v * axis_stride;
                      if (st[0] == 1 && st[2] == 1)
                        for (std::int64_t i = 0; i < n; ++i) dst[i] += s[i];
                      else
                        for (std::int64_t i = 0; i < n; ++i) dst[i * st[0]] += s[i * st[2]];
                      return;
                    }
                    for (std::int64_t i = 0; i < n; ++i) {
                      const std::int64_t v = ix[i * st[1]];
                      if (v < 0 || v >= size) throw_out_of_range(op, v, axis, size);
                      ob[i * st[0] + v * axis_stride] += s[i * st[2]];
                    }
                  });
}

// out[t] = w[ids[t]], rows of dim values: ids (n), w (num_embeddings, dim), out (n, dim).
template <class T>
static void embedding_forward(const T* w, const std::int64_t* ids, std::int64_t n, std::int64_t num_embeddings,
                              std::int64_t dim, T* out) {
  for (std::int64_t t = 0; t < n; ++t) {
    const std::int64_t id = ids[t];
    if (id < 0 || id >= num_embeddings)
      throw IndexError(message("embedding: index ", id, " is out of range for ", num_embeddings, " embeddings"));
    std::memcpy(out + t * dim, w + id * dim, static_cast<std::size_t>(dim) * sizeof(T));
  }
}

// gw[ids[t]] += g[t] for each t in order, skipping the padding row pad: ids (n), g (n, dim), gw
// (num_embeddings, dim).
template <class T>
static void embedding_backward(const T* g, const std::int64_t* ids, std::int64_t n, std::int64_t dim,
                               std::optional<std::int64_t> pad, T* gw) {
  for (std::int64_t t = 0; t < n; ++t) {
    if (pad && ids[t] == *pad) continue;  // the padding row is a constant, not a parameter
    T* row = gw + ids[t] * dim;
    const T* grow = g + t * dim;
    for (std::int64_t j = 0; j < dim; ++j) row[j] += grow[j];
  }
}

// IndexError naming op for an id outside [0, num_embeddings).
inline void check_embedding_ids(const std::int64_t* ids, std::int64_t n, std::int64_t num_embeddings, const char* op) {
  for (std::int64_t t = 0; t < n; ++t)
    if (ids[t] < 0 || ids[t] >= num_embeddings)
      throw IndexError(message(op, ": index ", ids[t], " is out of range for ", num_embeddings, " embeddings"));
}

// embedding_dot's loops; w (V, dim), ids (batch, per_row), q (batch, dim), out and g (batch,
// per_row). Rows of the batch are independent: in parallel over them, each in order. An id equal to
// pad (-1: none) is skipped: score 0, no gradient.
constexpr std::int64_t kEmbeddingDotGrain = 16;  // batch rows per chunk (16 x 6 dot products of 100)

// out[k] = row[k] . q for four rows at once: row_dot's sums (the same operations in the same
// order for each row), interleaved so that the four chains of multiply-adds overlap.
template <class T>
static void four_row_dots(const std::array<const T*, 4>& row, const T* q, std::int64_t dim, std::array<T, 4>& out) {
  Batch<T> a0(T(0)), a1(T(0)), a2(T(0)), a3(T(0));
  std::int64_t i = 0;
  for (; i + kLanes<T> <= dim; i += kLanes<T>) {
    const Batch<T> qv = Batch<T>::load_unaligned(q + i);
    a0 += Batch<T>::load_unaligned(row[0] + i) * qv;
    a1 += Batch<T>::load_unaligned(row[1] + i) * qv;
    a2 += Batch<T>::load_unaligned(row[2] + i) * qv;
    a3 += Batch<T>::load_unaligned(row[3] + i) * qv;
  }
  T t0 = xsimd::hadd(a0), t1 = xsimd::hadd(a1), t2 = xsimd::hadd(a2), t3 = xsimd::hadd(a3);
  for (; i < dim; ++i) {
    t0 += row[0][i] * q[i];
    t1 += row[1][i] * q[i];
    t2 += row[2][i] * q[i];
    t3 += row[3][i] * q[i];
  }
  out = {t0, t1, t2, t3};
}

// out[b][n] = w[ids[b][n]] . q[b], the rows off the padding four at a time.
template <class T>
static void embedding_dot_forward(const T* w, const std::int64_t* ids, const T* q, std::int64_t batch,
                                  std::int64_t per_row, std::int64_t dim, std::int64_t pad, T* out) {
  parallel_for(0, batch, kEmbeddingDotGrain, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t b = lo; b < hi; ++b) {
      const std::int64_t* id = ids + b * per_row;
      const T* qb = q + b * dim;
      T* ob = out + b * per_row;
      std::array<std::int64_t, 4> at{};  // positions waiting for a group of four
      std::array<const T*, 4> rows{};
      std::array<T, 4> dots{};
      std::size_t waiting = 0;
      for (std::int64_t n = 0; n < per_row; ++n) {
        // The table's rows are scattered (a word2vec table is larger than the caches): the row
        // four positions on is asked for now, within the example (the next example's first rows,
        // a path's root, are in cache already; asking for them measured slower).
        if (n + 4 < per_row && id[n + 4] != pad) prefetch_row(w + id[n + 4] * dim, dim);
        if (id[n] == pad) {
          ob[n] = T(0);
          continue;
        }
        at[waiting] = n;
        rows[waiting++] = w + id[n] * dim;
        if (waiting < 4) continue;
        four_row_dots<T>(rows, qb, dim, dots);
        for (std::size_t k = 0; k < 4; ++k) ob[at[k]] = dots[k];
        waiting = 0;
      }
      for (std::size_t k = 0; k < waiting; ++k) ob[at[k]] = row_dot(rows[k], qb, dim);
    }
  });
}

// out[0, dim) += (or with from_zero, =) the sum over the m terms of scale[n] rows[n][0, dim). Each
// stretch of out (four batches wide, then one, then the scalar tail) is summed in registers over the
// terms and stored once; every element adds its terms in order, from out's value or from 0.
template <class T>
static void add_scaled_rows(const T* const* rows, const T* scale, std::int64_t m, std::int64_t dim, bool from_zero,
                            T* out) {
  constexpr std::int64_t L = kLanes<T>;
  const auto start = [&](std::int64_t j) { return from_zero ? Batch<T>(T(0)) : Batch<T>::load_unaligned(out + j); };
  std::int64_t j = 0;
  for (; j + 4 * L <= dim; j += 4 * L) {
    Batch<T> a0 = start(j), a1 = start(j + L), a2 = start(j + 2 * L), a3 = start(j + 3 * L);
    for (std::int64_t n = 0; n < m; ++n) {
      const Batch<T> s(scale[n]);
      const T* row = rows[n] + j;
      a0 = xsimd::fma(s, Batch<T>::load_unaligned(row), a0);
      a1 = xsimd::fma(s, Batch<T>::load_unaligned(row + L), a1);
      a2 = xsimd::fma(s, Batch<T>::load_unaligned(row + 2 * L), a2);
      a3 = xsimd::fma(s, Batch<T>::load_unaligned(row + 3 * L), a3);
    }
    a0.store_unaligned(out + j);
    a1.store_unaligned(out + j + L);
    a2.store_unaligned(out + j + 2 * L);
    a3.store_unaligned(out + j + 3 * L);
  }
  for (; j + L <= dim; j += L) {
    Batch<T> a = start(j);
    for (std::int64_t n = 0; n < m; ++n) a = xsimd::fma(Batch<T>(scale[n]), Batch<T>::load_unaligned(rows[n] + j), a);
    a.store_unaligned(out + j);
  }
  // The scalar tail, four elements to a pass over the terms (named, so they stay in registers),
  // fused as the batches are at every optimisation level (GCC contracts a += s * x only from -O2).
  for (; j + 4 <= dim; j += 4) {
    T a0 = from_zero ? T(0) : out[j], a1 = from_zero ? T(0) : out[j + 1];
    T a2 = from_zero ? T(0) : out[j + 2], a3 = from_zero ? T(0) : out[j + 3];
    for (std::int64_t n = 0; n < m; ++n) {
      const T s = scale[n];
      const T* row = rows[n] + j;
      a0 = std::fma(s, row[0], a0);
      a1 = std::fma(s, row[1], a1);
      a2 = std::fma(s, row[2], a2);
      a3 = std::fma(s, row[3], a3);
    }
    out[j] = a0;
    out[j + 1] = a1;
    out[j + 2] = a2;
    out[j + 3] = a3;
  }
  for (; j < dim; ++j) {
    T a = from_zero ? T(0) : out[j];
    for (std::int64_t n = 0; n < m; ++n) a = std::fma(scale[n], rows[n][j], a);
    out[j] = a;
  }
}

// out[0, dim) = sum over n in [0, count) of s * row[0, dim), where term(n) gives {row, s} (a null
// row skipped); every element adds its terms in the order of n, from 0. The terms are read once, a
// chunk at a time, into arrays for add_scaled_rows.
template <class T, class Term>
static void sum_scaled_rows(std::int64_t count, std::int64_t dim, const Term& term, T* out) {
  constexpr std::int64_t kChunk = 64;
  const T* rows[kChunk];
  T scale[kChunk];
  std::int64_t n = 0;
  bool from_zero = true;
  do {
    std::int64_t m = 0;
    for (; n < count && m < kChunk; ++n) {
      const auto [row, s] = term(n);
      if (row == nullptr) continue;
      rows[m] = row;
      scale[m++] = s;
    }
    add_scaled_rows<T>(rows, scale, m, dim, from_zero, out);
    from_zero = false;
  } while (n < count);
}

// gq[b] = sum_n g[b][n] w[ids[b][n]].
template <class T>
static void embedding_dot_queries_backward(const T* w, const std::int64_t* ids, const T* g, std::int64_t batch,
                                           std::int64_t per_row, std::int64_t dim, std::int64_t pad, T* gq) {
  parallel_for(0, batch, kEmbeddingDotGrain, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t b = lo; b < hi; ++b) {
      const std::int64_t* id = ids + b * per_row;
      const T* gb = g + b * per_row;
      sum_scaled_rows<T>(
          per_row, dim,
          [&](std::int64_t n) { return std::pair<const T*, T>(id[n] == pad ? nullptr : w + id[n] * dim, gb[n]); },
          gq + b * dim);
    }
  });
}

// rows[k] = g[b][n] q[b] for the k-th of the flat positions `at` (b per_row + n): the weight's
// gradient as rows, one per index that is not padding.
template <class T>
static void embedding_dot_rows(const T* q, const T* g, const std::int64_t* at, std::int64_t count, std::int64_t per_row,
                               std::int64_t dim, T* rows) {
  parallel_for(0, count, kEmbeddingDotGrain * 4, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t k = lo; k < hi; ++k) {
      const T scale = g[at[k]];
      const T* qb = q + (at[k] / per_row) * dim;
      T* out = rows + k * dim;
      for (std::int64_t j = 0; j < dim; ++j) out[j] = scale * qb[j];
    }
  });
}

// The ids at positions `at` without repeats, in the order of first appearance (distinct), and the
// positions grouped by their id's place among them (its slot). An open-addressing table of at least
// twice the positions, kept per thread and emptied by a generation stamp rather than a fill: no
// table of the vocabulary's size, and no clearing cost per call. Inline rather than static, so that
// a thread has one table whichever translation unit calls it; a table more than four times (and
// 65,536 slots) larger than a call needs is given back.
struct DistinctIds {
  std::vector<std::int64_t> distinct;
  // The positions grouped by their id's place in distinct (its slot), each group in the positions'
  // order: slot s's are members[start[s], start[s + 1]).
  std::vector<std::int64_t> start, members;
};

// The ids at positions at[0, count) (at null: the positions 0, 1, ... themselves).
inline DistinctIds distinct_ids(const std::int64_t* ids, const std::int64_t* at, std::int64_t count) {
  struct Table {
    std::vector<std::int64_t> keys, places;
    std::vector<std::uint32_t> stamps;
    std::uint32_t generation = 0;
  };
  thread_local Table table;
  const auto n = static_cast<std::size_t>(count);
  std::size_t capacity = 16;
  while (capacity < 2 * n) capacity *= 2;
  const bool oversized = table.keys.size() > 4 * capacity && table.keys.size() > (std::size_t{1} << 16);
  if (table.keys.size() < capacity || oversized || ++table.generation == 0) {
    const std::size_t size = oversized ? capacity : std::max(capacity, table.keys.size());
    table.keys.assign(size, 0);
    table.places.assign(size, 0);
    table.stamps.assign(size, 0);
    table.generation = 1;
  }
  const std::uint32_t now = table.generation;
  const std::size_t mask = capacity - 1;
  DistinctIds out;
  std::vector<std::int64_t> slot(n);  // each position's
  out.start.push_back(0);             // counts first, then their running sums
  for (std::size_t k = 0; k < n; ++k) {
    const std::int64_t id = ids[at == nullptr ? static_cast<std::int64_t>(k) : at[k]];
    std::size_t h = static_cast<std::size_t>((static_cast<std::uint64_t>(id) * 0x9E3779B97F4A7C15ull) >> 32) & mask;
    while (table.stamps[h] == now && table.keys[h] != id) h = (h + 1) & mask;
    if (table.stamps[h] != now) {
      table.stamps[h] = now;
      table.keys[h] = id;
      table.places[h] = static_cast<std::int64_t>(out.distinct.size());
      out.distinct.push_back(id);
      out.start.push_back(0);
    }
    slot[k] = table.places[h];
    ++out.start[static_cast<std::size_t>(slot[k]) + 1];
  }
  std::partial_sum(out.start.begin(), out.start.end(), out.start.begin());
  out.members.resize(n);
  std::vector<std::int64_t> next(out.start.begin(), out.start.end() - 1);
  for (std::size_t k = 0; k < n; ++k)
    out.members[static_cast<std::size_t>(next[static_cast<std::size_t>(slot[k])]++)] = static_cast<std::int64_t>(k);
  return out;
}

// fn(s) for every slot s of d. Outside a parallel region and from 32,768 values (positions times
// width) the slots are cut among the threads into runs of about equal positions; each slot is one
// thread's whole, so what fn computes never depends on the thread count.
template <class F>
static void for_each_slot(const DistinctIds& d, std::int64_t dim, const F& fn) {
  const auto slots = static_cast<std::int64_t>(d.distinct.size());
  const auto count = static_cast<std::int64_t>(d.members.size());
  const std::int64_t parts = count * dim >= (1 << 15) && !in_parallel_region() ? num_threads() : 1;
  if (parts == 1) {
    for (std::int64_t s = 0; s < slots; ++s) fn(s);
    return;
  }
  // Part p's slots begin at the first whose positions begin at or after p count / parts.
  const auto first = [&](std::int64_t p) {
    return static_cast<std::int64_t>(std::lower_bound(d.start.begin(), d.start.end() - 1, p * count / parts) -
                                     d.start.begin());
  };
  parallel_for(0, parts, 1, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t p = lo; p < hi; ++p)
      for (std::int64_t s = first(p), end = first(p + 1); s < end; ++s) fn(s);
  });
}

// rows[s] = the sum over slot s's positions k, in order, of g[at[k]] q[b of at[k]]: the weight's
// gradient rows of the distinct ids, each added in the order the dense gradient's row is (so equal
// to it bit for bit). q (batch, dim), g (batch, per_row), at (positions), rows (distinct, dim).
template <class T>
static void embedding_dot_summed_rows(const T* q, const T* g, const std::int64_t* at, const DistinctIds& d,
                                      std::int64_t per_row, std::int64_t dim, T* rows) {
  for_each_slot(d, dim, [&](std::int64_t s) {
    const std::int64_t* member = d.members.data() + d.start[static_cast<std::size_t>(s)];
    sum_scaled_rows<T>(
        d.start[static_cast<std::size_t>(s) + 1] - d.start[static_cast<std::size_t>(s)], dim,
        [&](std::int64_t i) {
          const std::int64_t k = at[member[i]];
          return std::pair<const T*, T>(q + (k / per_row) * dim, g[k]);
        },
        rows + s * dim);
  });
}

// rows[s] = the sum over slot s's positions i, in order, of scale[i] g[bag_of[i]] (scale null: 1):
// embedding_bag_sum's gradient rows of the distinct indices. g (bags, dim), bag_of and scale (n),
// rows (distinct, dim). Without scales each term is the row of g itself (1 x row is exact), so
// every sum is the dense gradient's bit for bit.
template <class T>
static void embedding_bag_sum_summed_rows(const T* g, const std::int64_t* bag_of, const T* scale, const DistinctIds& d,
                                          std::int64_t dim, T* rows) {
  for_each_slot(d, dim, [&](std::int64_t s) {
    const std::int64_t* member = d.members.data() + d.start[static_cast<std::size_t>(s)];
    sum_scaled_rows<T>(
        d.start[static_cast<std::size_t>(s) + 1] - d.start[static_cast<std::size_t>(s)], dim,
        [&](std::int64_t i) {
          const std::int64_t k = member[i];
          return std::pair<const T*, T>(g + bag_of[k] * dim, scale == nullptr ? T(1) : scale[k]);
        },
        rows + s * dim);
  });
}

// embedding_bag_sum's loops; w (V, dim), ids and scale (n; scale null: 1), bag b's indices
// [starts[b], ends[b]), out and g (bags, dim). The forward runs over the bags in parallel, each
// bag's rows added in order.
template <class T>
static void embedding_bag_sum_forward(const T* w, const std::int64_t* ids, const T* scale, const std::int64_t* starts,
                                      const std::int64_t* ends, std::int64_t bags, std::int64_t dim, T* out) {
  parallel_for(0, bags, kEmbeddingDotGrain, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t b = lo; b < hi; ++b) {
      const std::int64_t first = starts[b];
      sum_scaled_rows<T>(
          ends[b] - first, dim,
          [&](std::int64_t n) {
            return std::pair<const T*, T>(w + ids[first + n] * dim, scale != nullptr ? scale[first + n] : T(1));
          },
          out + b * dim);
    }
  });
}

// Row i of the table's gradient, scale[i] g[bag_of[i]]: rows (n, dim).
template <class T>
static void embedding_bag_sum_rows(const T* g, const std::int64_t* bag_of, const T* scale, std::int64_t n,
                                   std::int64_t dim, T* rows) {
  parallel_for(0, n, kEmbeddingDotGrain * 4, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; ++i) {
      const T s = scale != nullptr ? scale[i] : T(1);
      const T* src = g + bag_of[i] * dim;
      T* out = rows + i * dim;
      for (std::int64_t j = 0; j < dim; ++j) out[j] = s * src[j];
    }
  });
}

// The scales' gradient, g[bag_of[i]] . w[ids[i]]: out (n).
template <class T>
static void embedding_bag_sum_scale_backward(const T* g, const std::int64_t* bag_of, const T* w,
                                             const std::int64_t* ids, std::int64_t n, std::int64_t dim, T* out) {
  parallel_for(0, n, kEmbeddingDotGrain * 4, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; ++i) {
      const T* a = g + bag_of[i] * dim;
      const T* b = w + ids[i] * dim;
      T total = 0;
      for (std::int64_t j = 0; j < dim; ++j) total += a[j] * b[j];
      out[i] = total;
    }
  });
}

// gw[ids[b][n]] += g[b][n] q[b], in order (rows may repeat).
template <class T>
static void embedding_dot_weight_backward(const T* q, const std::int64_t* ids, const T* g, std::int64_t batch,
                                          std::int64_t per_row, std::int64_t dim, std::int64_t pad, T* gw) {
  for (std::int64_t b = 0; b < batch; ++b) {
    const T* qb = q + b * dim;
    for (std::int64_t n = 0; n < per_row; ++n) {
      if (ids[b * per_row + n] == pad) continue;
      const T scale = g[b * per_row + n];
      // add_scaled_rows, as the summed rows of sum_repeated are made: the same roundings.
      add_scaled_rows<T>(&qb, &scale, 1, dim, /*from_zero=*/false, gw + ids[b * per_row + n] * dim);
    }
  }
}

// The k largest (or smallest) values of each line of x (outer, size, inner) along its middle
// axis, sorted, with their indices: values, indices (outer, k, inner). Ties go to the lower
// index; NaN counts as larger than every number.
template <class T>
static void topk(const T* x, std::int64_t outer, std::int64_t size, std::int64_t inner, std::int64_t k, bool largest,
                 T* values, std::int64_t* indices) {
  // x: (outer, size, inner) contiguous; values, indices: (outer, k, inner)
  std::vector<std::int64_t> order(static_cast<std::size_t>(size));
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t in = 0; in < inner; ++in) {
      const T* line = x + o * size * inner + in;  // element j at line[j * inner]
      // A strict weak order: NaN above every number, then by value, then lower index first.
      auto before = [&](std::int64_t a, std::int64_t b) {
        const T va = line[a * inner];
        const T vb = line[b * inner];
        const bool nan_a = std::isnan(va);
        const bool nan_b = std::isnan(vb);
        if (nan_a != nan_b) return largest ? nan_a : nan_b;
        if (!nan_a && va != vb) return largest ? va > vb : va < vb;
        return a < b;
      };
      std::iota(order.begin(), order.end(), std::int64_t{0});
      std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
      T* vout = values + o * k * inner + in;
      std::int64_t* iout = indices + o * k * inner + in;
      for (std::int64_t j = 0; j < k; ++j) {
        vout[j * inner] = line[order[j] * inner];
        iout[j * inner] = order[j];
      }
    }
  }
}

// out[t, ids[t]] = 1 in a zeroed out (n, num_classes).
template <class T>
static void one_hot(const std::int64_t* ids, std::int64_t n, std::int64_t num_classes, T* out) {
  for (std::int64_t t = 0; t < n; ++t) {
    if (ids[t] < 0 || ids[t] >= num_classes)
      throw IndexError(message("one_hot: index ", ids[t], " is out of range for ", num_classes, " classes"));
    out[t * num_classes + ids[t]] = T(1);
  }
}

}  // namespace tapegrad::kernels
