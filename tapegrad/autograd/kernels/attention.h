#pragma once
// Fused scaled dot-product attention on row-strided buffers: the forward with an online softmax
// over key tiles, saving only the log-sum-exp of each query row, and the backward that recomputes
// the probabilities tile by tile (FlashAttention-2's arrangement, on the CPU). The op, its checks
// and its taped backward are in ops/attention.cpp. Static, see rows.h.
//
// Per attention matrix n (a batch entry and head), with s = scale * q k^T + bias, masked entries -inf:
//   forward:  m = max_j s_ij, l = sum_j exp(s_ij - m), o_i = sum_j exp(s_ij - m) v_j / l,
//             lse_i = m + log l         (m and l are running values, updated key tile by key tile)
//   backward: p_ij = exp(s_ij - lse_i), delta_i = sum_d do_id o_id,
//             dv_j = sum_i p_ij do_i,  dp_ij = do_i . v_j,  ds_ij = p_ij (dp_ij - delta_i),
//             dq_i = scale sum_j ds_ij k_j,  dk_j = scale sum_i ds_ij q_i
// A row whose keys are all masked has l = 0: its output is 0, its lse -inf, its p 0 (no NaN).
// The causal mask lets query i see key j when j <= i + offset; key tiles wholly above the
// diagonal are never visited, the one crossing it is masked entry by entry.
//
// Buffers: q (N, Tq, D), k (Nkv, Tk, D), v (Nkv, Tk, Dv), o (N, Tq, Dv), lse (N, Tq), do like o,
// dq like q, dk like k, dv like v. N = Nkv * group: attention matrix n reads keys and values
// n / group (grouped-query attention; group 1 otherwise). Each buffer but lse has its own layout
// (AttentionRows): a matrix's rows need not be back to back, so the heads of one projection,
// (B, T, H, Dh) seen as (B, H, T, Dh), are read and written in place. bias, when given, is read at bias +
// bias_offsets[n] + i * bias_q + j * bias_k (broadcast axes have stride 0).
//
// Storage S and arithmetic T: S = T (float32, float64), or S = BFloat16 with T = float, the mixed
// precision path: q, k, v, o and do are bfloat16, the products run on kernels::gemm's bfloat16
// kernel with float32 accumulation, the scores, softmax and log-sum-exp are float32, and the
// probabilities (and ds) are rounded to bfloat16 before they multiply v, do, k or q, as autocast
// rounds a softmax before the product that follows it. dq, dk, dv are float32 (T) either way.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include <xsimd/xsimd.hpp>

#include "tapegrad/autograd/bfloat16.h"
#include "tapegrad/autograd/kernels/blas.h"
#include "tapegrad/autograd/kernels/convert.h"
#include "tapegrad/autograd/kernels/rows.h"
#include "tapegrad/autograd/kernels/softmax.h"
#include "tapegrad/autograd/parallel.h"

namespace tapegrad::kernels {

// Query and key rows per tile: a tile's scores (64 x 64) and its probabilities stay in L1/L2
// next to the q, k and v rows they come from (head dims up to 128).
constexpr std::int64_t kAttentionTile = 64;

struct AttentionShape {
  std::int64_t n = 0;      // attention matrices (batch x heads)
  std::int64_t group = 1;  // query heads per key/value head
  std::int64_t tq = 0, tk = 0, d = 0, dv = 0;
  bool causal = false;
  std::int64_t offset = 0;  // causal: query i sees keys j <= i + offset
};

template <class T>
struct AttentionBias {
  const T* data = nullptr;                  // null: no bias
  const std::int64_t* offsets = nullptr;    // per attention matrix
  std::int64_t stride_q = 0, stride_k = 0;  // between query rows, between keys
};

// Where the rows of each attention matrix of a buffer lie: row i of matrix n starts at element
// offsets[n] + i * ld, its values adjacent.
struct AttentionRows {
  const std::int64_t* offsets = nullptr;
  std::int64_t ld = 0;
  std::int64_t start(std::int64_t n) const { return offsets[n]; }
};

struct AttentionLayouts {
  AttentionRows q, k, v, o, dout, dq, dk, dv;
};

// The keys query rows [r0, r1) may see: [0, key_end).
static inline std::int64_t attention_key_end(const AttentionShape& s, std::int64_t r1) {
  if (!s.causal) return s.tk;
  return std::clamp<std::int64_t>(r1 + s.offset, 0, s.tk);  // the last row, r1 - 1, sees j <= r1 - 1 + offset
}

// s (rows, kb) = scale * q_tile k_tile^T + bias, causally masked: the scores of query rows
// [r0, r0 + rows) against keys [kj, kj + kb) (row strides ldq, ldk), row stride kAttentionTile.
template <class T, class S>
static void attention_scores(const AttentionShape& sh, const AttentionBias<T>& bias, std::int64_t n, const S* q_tile,
                             std::int64_t ldq, const S* k_tile, std::int64_t ldk, std::int64_t r0, std::int64_t rows,
                             std::int64_t kj, std::int64_t kb, T scale, T* s) {
  gemm(false, true, rows, kb, sh.d, scale, q_tile, ldq, k_tile, ldk, T(0), s, kAttentionTile);
  if (bias.data) {
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* b = bias.data + bias.offsets[n] + (r0 + r) * bias.stride_q + kj * bias.stride_k;
      T* sr = s + r * kAttentionTile;
      if (bias.stride_k == 1) {
        for (std::int64_t j = 0; j < kb; ++j) sr[j] += b[j];
      } else {
        for (std::int64_t j = 0; j < kb; ++j) sr[j] += b[j * bias.stride_k];
      }
    }
  }
  if (sh.causal && kj + kb - 1 > r0 + sh.offset) {  // the tile crosses the diagonal
    constexpr T kMinusInf = -std::numeric_limits<T>::infinity();
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t first_hidden = std::max<std::int64_t>(r0 + r + sh.offset + 1 - kj, 0);
      T* sr = s + r * kAttentionTile;
      for (std::int64_t j = first_hidden; j < kb; ++j) sr[j] = kMinusInf;
    }
  }
}

// The (rows, kb) tile x (row stride kAttentionTile) as S for a product with S operands: x itself
// when S = T, else rounded into `rounded` (same layout).
template <class S, class T>
static const S* tile_as(const T* x, std::int64_t rows, std::int64_t kb, S* rounded) {
  if constexpr (std::is_same_v<S, T>) {
    return x;
  } else {
    for (std::int64_t r = 0; r < rows; ++r)
      round_to_bfloat16_serial(x + r * kAttentionTile, rounded + r * kAttentionTile, kb);
    return rounded;
  }
}

// sum_c a[c] b[c] over n values of storage S, in T.
template <class T, class S>
static T storage_dot(const S* a, const S* b, std::int64_t n) {
  if constexpr (std::is_same_v<S, T>) {
    return row_dot(a, b, n);
  } else {
    T sum = T(0);
    for (std::int64_t c = 0; c < n; ++c) sum += static_cast<T>(a[c]) * static_cast<T>(b[c]);
    return sum;
  }
}

// o = softmax(s) v per attention matrix, lse = the rows' log-sum-exp; parallel over (matrix,
// query tile).
template <class T, class S = T>
static void attention_forward(const AttentionShape& sh, const AttentionLayouts& lay, const AttentionBias<T>& bias,
                              T scale, const S* q, const S* k, const S* v, S* o, T* lse) {
  constexpr std::int64_t kTile = kAttentionTile;
  constexpr T kMinusInf = -std::numeric_limits<T>::infinity();
  const std::int64_t q_tiles = (sh.tq + kTile - 1) / kTile;
  const std::int64_t items = sh.n * q_tiles;
  // A grain of one tile: even a single tile holds 64 x 64 x D multiply-adds per key tile.
  parallel_for(0, items, 1, [&](std::int64_t first, std::int64_t last) {
    std::vector<T> s(kTile * kTile), acc(kTile * sh.dv), m(kTile), l(kTile);
    std::vector<S> p_rounded(std::is_same_v<S, T> ? 0 : kTile * kTile);
    for (std::int64_t item = first; item < last; ++item) {
      const std::int64_t n = item / q_tiles, r0 = (item % q_tiles) * kTile;
      const std::int64_t rows = std::min(kTile, sh.tq - r0);
      const S* q_tile = q + lay.q.start(n) + r0 * lay.q.ld;  // (rows, D)
      const S* k_n = k + lay.k.start(n / sh.group);          // (Tk, D)
      const S* v_n = v + lay.v.start(n / sh.group);          // (Tk, Dv)
      std::fill(m.begin(), m.end(), kMinusInf);
      std::fill(l.begin(), l.end(), T(0));
      std::fill(acc.begin(), acc.end(), T(0));
      const std::int64_t key_end = attention_key_end(sh, r0 + rows);
      for (std::int64_t kj = 0; kj < key_end; kj += kTile) {
        const std::int64_t kb = std::min(kTile, key_end - kj);
        attention_scores(sh, bias, n, q_tile, lay.q.ld, k_n + kj * lay.k.ld, lay.k.ld, r0, rows, kj, kb, scale,
                         s.data());
        for (std::int64_t r = 0; r < rows; ++r) {
          T* sr = s.data() + r * kTile;  // becomes p's row
          const T m_new = std::max(m[r], row_max(sr, kb));
          if (m_new == kMinusInf) {  // every key so far masked: nothing to add
            std::fill(sr, sr + kb, T(0));
            continue;
          }
          const T alpha = std::exp(m[r] - m_new);  // 0 while m was -inf
          l[r] = l[r] * alpha + exp_shifted_sum(sr, m_new, sr, kb);
          m[r] = m_new;
          if (alpha != T(1)) {
            T* ar = acc.data() + r * sh.dv;
            for (std::int64_t c = 0; c < sh.dv; ++c) ar[c] *= alpha;
          }
        }
        // acc (rows, Dv) += p (rows, kb) @ v_tile (kb, Dv)
        gemm(false, false, rows, sh.dv, kb, T(1), tile_as(s.data(), rows, kb, p_rounded.data()), kTile,
             v_n + kj * lay.v.ld, lay.v.ld, T(1), acc.data(), sh.dv);
      }
      for (std::int64_t r = 0; r < rows; ++r) {
        S* orow = o + lay.o.start(n) + (r0 + r) * lay.o.ld;
        const T* ar = acc.data() + r * sh.dv;
        if (l[r] == T(0)) {  // a fully masked row
          std::fill(orow, orow + sh.dv, S(T(0)));
          lse[n * sh.tq + r0 + r] = kMinusInf;
          continue;
        }
        const T inv = T(1) / l[r];
        for (std::int64_t c = 0; c < sh.dv; ++c) orow[c] = S(ar[c] * inv);
        lse[n * sh.tq + r0 + r] = m[r] + std::log(l[r]);
      }
    }
  });
}

// dq, dk, dv from do, with the forward's o and lse; parallel over key/value heads (each owns its
// dk, dv and its group's dq, so nothing is shared between threads). dq, dk, dv are overwritten.
template <class T, class S = T>
static void attention_backward(const AttentionShape& sh, const AttentionLayouts& lay, const AttentionBias<T>& bias,
                               T scale, const S* q, const S* k, const S* v, const S* o, const T* lse, const S* dout,
                               T* dq, T* dk, T* dv) {
  constexpr std::int64_t kTile = kAttentionTile;
  constexpr T kMinusInf = -std::numeric_limits<T>::infinity();
  const std::int64_t n_kv = sh.n / sh.group;
  parallel_for(0, n_kv, 1, [&](std::int64_t first, std::int64_t last) {
    std::vector<T> p(kTile * kTile), dp(kTile * kTile), delta(sh.tq);
    std::vector<S> p_rounded(std::is_same_v<S, T> ? 0 : kTile * kTile);
    std::vector<S> ds_rounded(std::is_same_v<S, T> ? 0 : kTile * kTile);
    for (std::int64_t g = first; g < last; ++g) {
      const S* k_g = k + lay.k.start(g);  // (Tk, D)
      const S* v_g = v + lay.v.start(g);
      T* dk_g = dk + lay.dk.start(g);
      T* dv_g = dv + lay.dv.start(g);
      for (std::int64_t j = 0; j < sh.tk; ++j) {
        std::fill(dk_g + j * lay.dk.ld, dk_g + j * lay.dk.ld + sh.d, T(0));
        std::fill(dv_g + j * lay.dv.ld, dv_g + j * lay.dv.ld + sh.dv, T(0));
      }
      for (std::int64_t n = g * sh.group; n < (g + 1) * sh.group; ++n) {
        const S* q_n = q + lay.q.start(n);  // (Tq, D)
        const S* do_n = dout + lay.dout.start(n);
        const S* o_n = o + lay.o.start(n);
        const T* lse_n = lse + n * sh.tq;
        T* dq_n = dq + lay.dq.start(n);
        for (std::int64_t i = 0; i < sh.tq; ++i) {
          std::fill(dq_n + i * lay.dq.ld, dq_n + i * lay.dq.ld + sh.d, T(0));
          delta[i] = storage_dot<T>(do_n + i * lay.dout.ld, o_n + i * lay.o.ld, sh.dv);
        }
        for (std::int64_t kj = 0; kj < sh.tk; kj += kTile) {
          const std::int64_t kb = std::min(kTile, sh.tk - kj);
          // Causal: the first query row that sees key kj is kj - offset.
          const std::int64_t first_row = sh.causal ? std::clamp<std::int64_t>(kj - sh.offset, 0, sh.tq) : 0;
          for (std::int64_t r0 = first_row / kTile * kTile; r0 < sh.tq; r0 += kTile) {
            const std::int64_t rows = std::min(kTile, sh.tq - r0);
            attention_scores(sh, bias, n, q_n + r0 * lay.q.ld, lay.q.ld, k_g + kj * lay.k.ld, lay.k.ld, r0, rows, kj,
                             kb, scale, p.data());
            for (std::int64_t r = 0; r < rows; ++r) {
              T* pr = p.data() + r * kTile;
              const T shift = lse_n[r0 + r];
              if (shift == kMinusInf) std::fill(pr, pr + kb, T(0));  // a fully masked row
              else exp_shifted_sum(pr, shift, pr, kb);
            }
            const S* do_tile = do_n + r0 * lay.dout.ld;  // (rows, Dv)
            // dv_tile (kb, Dv) += p^T (kb, rows) @ do_tile (rows, Dv)
            gemm(true, false, kb, sh.dv, rows, T(1), tile_as(p.data(), rows, kb, p_rounded.data()), kTile, do_tile,
                 lay.dout.ld, T(1), dv_g + kj * lay.dv.ld, lay.dv.ld);
            // dp (rows, kb) = do_tile (rows, Dv) @ v_tile^T (Dv, kb)
            gemm(false, true, rows, kb, sh.dv, T(1), do_tile, lay.dout.ld, v_g + kj * lay.v.ld, lay.v.ld, T(0),
                 dp.data(), kTile);
            for (std::int64_t r = 0; r < rows; ++r) {  // ds = p (dp - delta), in dp
              const T* pr = p.data() + r * kTile;
              T* dsr = dp.data() + r * kTile;
              const T dl = delta[r0 + r];
              for (std::int64_t j = 0; j < kb; ++j) dsr[j] = pr[j] * (dsr[j] - dl);
            }
            const S* ds = tile_as(dp.data(), rows, kb, ds_rounded.data());
            // dq_tile (rows, D) += scale ds (rows, kb) @ k_tile (kb, D)
            gemm(false, false, rows, sh.d, kb, scale, ds, kTile, k_g + kj * lay.k.ld, lay.k.ld, T(1),
                 dq_n + r0 * lay.dq.ld, lay.dq.ld);
            // dk_tile (kb, D) += scale ds^T (kb, rows) @ q_tile (rows, D)
            gemm(true, false, kb, sh.d, rows, scale, ds, kTile, q_n + r0 * lay.q.ld, lay.q.ld, T(1),
                 dk_g + kj * lay.dk.ld, lay.dk.ld);
          }
        }
      }
    }
  });
}

}  // namespace tapegrad::kernels
