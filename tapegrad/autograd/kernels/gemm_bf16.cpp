// The bfloat16 matrix product on vdpbf16ps (see gemm_bf16.h).
//
// Layout. vdpbf16ps takes two vectors of 16 bfloat16 pairs and adds, in each float32 lane j,
// a[2j] b[2j] + a[2j+1] b[2j+1]. Both packed operands therefore hold k in pairs: a packed A panel
// stores, for each pair p of k, the pairs (A[i][2p], A[i][2p+1]) of its kMR rows as 32-bit words,
// so one word broadcast to all lanes serves a whole row of the tile; a packed B panel stores, for
// each pair p, the pairs (B[2p][j], B[2p+1][j]) of its kNR columns, two vectors. An odd k gets a
// zero second half in its last pair, short edge tiles get zero rows and columns, and the store
// writes only the entries of C that exist.
//
// Blocking: k in blocks of kKC values, so that one B panel (kKC / 2 pairs x 32 columns x 4 bytes =
// 16 KiB) stays in L1 while the tile walks down a block of A (at most kMC rows, 86 KiB, in L2);
// columns in blocks of kNC, so that a packed B block stays within a few MiB.

#include "tapegrad/autograd/kernels/gemm_bf16.h"

#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "tapegrad/autograd/parallel.h"

namespace tapegrad::kernels {

namespace {

constexpr int kMR = 14;                  // rows of a register tile
constexpr int kNR = 32;                  // columns of a register tile: two vectors of 16 float32
constexpr std::int64_t kKC = 256;        // values of k per packed block (128 pairs)
constexpr std::int64_t kMC = 12 * kMR;   // most rows of A packed by one task
constexpr std::int64_t kNC = 128 * kNR;  // most columns of B packed at once

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

#define TAPEGRAD_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

std::uint32_t pair(BFloat16 even, BFloat16 odd) {
  return static_cast<std::uint32_t>(even.bits) | (static_cast<std::uint32_t>(odd.bits) << 16);
}

// The k values [0, kc) of `count` vectors as pair words: dst[p * width + v] holds vector v's values
// 2p and 2p + 1 (an odd kc's last pair with a zero second half). Packed A panels are these with
// width kMR (the vectors are A's rows), packed B panels with width kNR (B's columns). Words of dst
// for vectors past `count` are not written. Masked loads never touch memory past the operand, and
// masked stores write only the words of existing vectors, so edges need no scalar path.

// In place: r[i]'s word j becomes r[j]'s word i.
TAPEGRAD_AVX512_BF16 void transpose_words(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {  // within each 128-bit lane: words of rows i and i + 1 interleaved
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int g = 0; g < 16; g += 4) {  // lane l of r[g + c]: word 4l + c of rows g .. g + 3
    r[g] = _mm512_unpacklo_epi64(t[g], t[g + 2]);
    r[g + 1] = _mm512_unpackhi_epi64(t[g], t[g + 2]);
    r[g + 2] = _mm512_unpacklo_epi64(t[g + 1], t[g + 3]);
    r[g + 3] = _mm512_unpackhi_epi64(t[g + 1], t[g + 3]);
  }
  for (int c = 0; c < 4; ++c) {  // gather lane l of the four row groups into word 4l + c
    const __m512i low01 = _mm512_shuffle_i32x4(r[c], r[4 + c], 0x44),
                  high01 = _mm512_shuffle_i32x4(r[c], r[4 + c], 0xEE);
    const __m512i low23 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0x44);
    const __m512i high23 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0xEE);
    t[c] = _mm512_shuffle_i32x4(low01, low23, 0x88);
    t[4 + c] = _mm512_shuffle_i32x4(low01, low23, 0xDD);
    t[8 + c] = _mm512_shuffle_i32x4(high01, high23, 0x88);
    t[12 + c] = _mm512_shuffle_i32x4(high01, high23, 0xDD);
  }
  for (int i = 0; i < 16; ++i) r[i] = t[i];
}

__mmask16 first_lanes(std::int64_t count) {
  return count >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << std::max<std::int64_t>(count, 0)) - 1u);
}

// Adjacent: vector v's values are adjacent in memory, starting at src + v * ld. Sixteen vectors by
// sixteen pairs at a time are loaded as words (little-endian: the word at an even element holds it
// in its low half, as pair() puts it) and transposed.
TAPEGRAD_AVX512_BF16 void pack_pairs_adjacent(const BFloat16* src, std::int64_t ld, std::int64_t count, std::int64_t kc,
                                              std::int64_t width, std::uint32_t* dst) {
  const std::int64_t full_pairs = kc / 2;
  for (std::int64_t v0 = 0; v0 < count; v0 += 16) {
    const std::int64_t vectors = std::min<std::int64_t>(16, count - v0);
    const __mmask16 store = first_lanes(vectors);
    for (std::int64_t p0 = 0; p0 < full_pairs; p0 += 16) {
      const std::int64_t chunk = std::min<std::int64_t>(16, full_pairs - p0);
      const __mmask16 load = first_lanes(chunk);
      __m512i r[16];
      for (int i = 0; i < 16; ++i) {
        r[i] = i < vectors ? _mm512_maskz_loadu_epi32(load, src + (v0 + i) * ld + 2 * p0) : _mm512_setzero_si512();
      }
      transpose_words(r);
      for (std::int64_t p = 0; p < chunk; ++p) _mm512_mask_storeu_epi32(dst + (p0 + p) * width + v0, store, r[p]);
    }
    if (kc % 2 != 0) {
      for (std::int64_t v = v0; v < v0 + vectors; ++v)
        dst[full_pairs * width + v] = pair(src[v * ld + kc - 1], BFloat16());
    }
  }
}

// Strided: value k of vector v is at src + k * ld + v, so a pair's halves come from neighbouring
// stored rows: 32 values of each are interleaved by one two-source permutation per 16 words.
TAPEGRAD_AVX512_BF16 void pack_pairs_strided(const BFloat16* src, std::int64_t ld, std::int64_t count, std::int64_t kc,
                                             std::int64_t width, std::uint32_t* dst) {
  // Word j of the low half: even value j, odd value j (indices 32 and up name the second source).
  alignas(64) static constexpr std::uint16_t kLow[32] = {0, 32, 1, 33, 2,  34, 3,  35, 4,  36, 5,  37, 6,  38, 7,  39,
                                                         8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
  alignas(64) static constexpr std::uint16_t kHigh[32] = {16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21,
                                                          53, 22, 54, 23, 55, 24, 56, 25, 57, 26, 58,
                                                          27, 59, 28, 60, 29, 61, 30, 62, 31, 63};
  const __m512i low_index = _mm512_load_si512(kLow), high_index = _mm512_load_si512(kHigh);
  const std::int64_t pairs = ceil_div(kc, 2);
  for (std::int64_t v0 = 0; v0 < count; v0 += 32) {
    const std::int64_t values = std::min<std::int64_t>(32, count - v0);
    const __mmask32 load = values >= 32 ? ~__mmask32(0) : __mmask32((1u << values) - 1u);
    const __mmask16 store_low = first_lanes(values), store_high = first_lanes(values - 16);
    for (std::int64_t p = 0; p < pairs; ++p) {
      const BFloat16* even = src + 2 * p * ld + v0;
      const __m512i e = _mm512_maskz_loadu_epi16(load, even);
      const __m512i o = 2 * p + 1 < kc ? _mm512_maskz_loadu_epi16(load, even + ld) : _mm512_setzero_si512();
      std::uint32_t* out = dst + p * width + v0;
      _mm512_mask_storeu_epi32(out, store_low, _mm512_permutex2var_epi16(e, low_index, o));
      if (store_high != 0) _mm512_mask_storeu_epi32(out + 16, store_high, _mm512_permutex2var_epi16(e, high_index, o));
    }
  }
}

// op(A)'s rows [i0, i0 + rows) and k values [k0, k0 + kc) into panels of kMR rows: panel r holds
// pairs words at [r * pairs * kMR + p * kMR + i]; the rows past the end of a short panel are zero.
void pack_a(bool trans_a, const BFloat16* a, std::int64_t lda, std::int64_t i0, std::int64_t rows, std::int64_t k0,
            std::int64_t kc, std::uint32_t* dst) {
  const std::int64_t pairs = ceil_div(kc, 2);
  for (std::int64_t r0 = 0; r0 < rows; r0 += kMR, dst += pairs * kMR) {
    const std::int64_t tile_rows = std::min<std::int64_t>(kMR, rows - r0);
    if (tile_rows < kMR) std::fill(dst, dst + pairs * kMR, 0u);
    if (!trans_a) {
      pack_pairs_adjacent(a + (i0 + r0) * lda + k0, lda, tile_rows, kc, kMR, dst);  // A stored (m, k)
    } else {
      pack_pairs_strided(a + k0 * lda + i0 + r0, lda, tile_rows, kc, kMR, dst);  // A stored (k, m)
    }
  }
}

// op(B)'s k values [k0, k0 + kc) and columns [j0, j0 + cols) into panels of kNR columns: panel q
// holds words at [q * pairs * kNR + p * kNR + j]; the columns past the end of a short panel are zero.
void pack_b(bool trans_b, const BFloat16* b, std::int64_t ldb, std::int64_t k0, std::int64_t kc, std::int64_t j0,
            std::int64_t cols, std::int64_t first_panel, std::int64_t end_panel, std::uint32_t* dst) {
  const std::int64_t pairs = ceil_div(kc, 2);
  for (std::int64_t q = first_panel; q < end_panel; ++q) {
    std::uint32_t* panel = dst + q * pairs * kNR;
    const std::int64_t c0 = q * kNR;
    const std::int64_t panel_cols = std::min<std::int64_t>(kNR, cols - c0);
    if (panel_cols < kNR) std::fill(panel, panel + pairs * kNR, 0u);
    if (!trans_b) {
      pack_pairs_strided(b + k0 * ldb + j0 + c0, ldb, panel_cols, kc, kNR, panel);  // B stored (k, n)
    } else {
      pack_pairs_adjacent(b + (j0 + c0) * ldb + k0, ldb, panel_cols, kc, kNR, panel);  // B stored (n, k)
    }
  }
}

// Where a register tile's result goes: C = alpha * tile + beta * C (+ bias), or the same rounded
// to bfloat16 and stored in R instead of C. The pointers are at the tile's origin.
struct TileOut {
  float* c;  // read when read_c; written unless r is set
  std::int64_t ldc;
  BFloat16* r;  // when set: the result rounded to bfloat16 here, C not written
  std::int64_t ldr;
  const float* bias;  // when set: added to every row (the tile's columns of it)
  float alpha, beta;
  bool read_c;  // C holds a partial sum (or, in the first block of k, the caller's C)
};

// 16 float32 lanes rounded to bfloat16 with BFloat16's rule: add 0x7FFF plus the kept half's lowest
// bit, keep the upper half; a NaN becomes 0x7FC0.
TAPEGRAD_AVX512_BF16 __m256i round_lanes(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lowest_kept = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i rounded =
      _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lowest_kept), 16);
  rounded = _mm512_mask_mov_epi32(rounded, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_set1_epi32(0x7FC0));
  return _mm512_cvtepi32_epi16(rounded);
}

// One kMR x kNR tile from a packed A panel and a packed B panel over `pairs` pairs of k, writing
// only the first `rows` rows and `cols` columns (see TileOut).
TAPEGRAD_AVX512_BF16 void tile(std::int64_t pairs, const std::uint32_t* ap, const std::uint32_t* bp, int rows, int cols,
                               const TileOut& out) {
  __m512 acc[kMR][2];
#pragma GCC unroll 14
  for (int i = 0; i < kMR; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (std::int64_t p = 0; p < pairs; ++p, ap += kMR, bp += kNR) {
    const __m512bh b0 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(bp));
    const __m512bh b1 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(bp + 16));
#pragma GCC unroll 14
    for (int i = 0; i < kMR; ++i) {
      const __m512bh ai = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(ap[i])));
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, b1);
    }
  }
  const __mmask16 mask0 = cols >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << cols) - 1u);
  const __mmask16 mask1 = cols >= 32   ? __mmask16(0xFFFF)
                          : cols <= 16 ? __mmask16(0)
                                       : __mmask16((1u << (cols - 16)) - 1u);
  const __m512 valpha = _mm512_set1_ps(out.alpha), vbeta = _mm512_set1_ps(out.beta);
  const __m512 bias0 = out.bias != nullptr ? _mm512_maskz_loadu_ps(mask0, out.bias) : _mm512_setzero_ps();
  const __m512 bias1 = out.bias != nullptr ? _mm512_maskz_loadu_ps(mask1, out.bias + 16) : _mm512_setzero_ps();
#pragma GCC unroll 14
  for (int i = 0; i < kMR; ++i) {
    if (i >= rows) break;
    __m512 v0 = _mm512_mul_ps(acc[i][0], valpha);
    __m512 v1 = _mm512_mul_ps(acc[i][1], valpha);
    if (out.read_c) {
      const float* row = out.c + i * out.ldc;
      v0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask0, row), vbeta, v0);
      v1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask1, row + 16), vbeta, v1);
    }
    if (out.bias != nullptr) {
      v0 = _mm512_add_ps(v0, bias0);
      v1 = _mm512_add_ps(v1, bias1);
    }
    if (out.r != nullptr) {
      BFloat16* row = out.r + i * out.ldr;
      _mm256_mask_storeu_epi16(row, mask0, round_lanes(v0));
      _mm256_mask_storeu_epi16(row + 16, mask1, round_lanes(v1));
    } else {
      float* row = out.c + i * out.ldc;
      _mm512_mask_storeu_ps(row, mask0, v0);
      _mm512_mask_storeu_ps(row + 16, mask1, v1);
    }
  }
}

std::vector<std::uint32_t>& packed_a_buffer() {
  thread_local std::vector<std::uint32_t> buffer;
  return buffer;
}

std::vector<std::uint32_t>& packed_b_buffer() {
  thread_local std::vector<std::uint32_t> buffer;
  return buffer;
}

// The float32 partial sums of a rounded product whose k spans several blocks, kept between calls
// up to kKeptPartialSums floats (16 MiB).
constexpr std::size_t kKeptPartialSums = std::size_t{4} << 20;
std::vector<float>& partial_sums_buffer() {
  thread_local std::vector<float> buffer;
  return buffer;
}

// C = alpha op(A) op(B) + beta C (+ bias), stored in C (float32) or, when r is set, rounded into R
// (bfloat16); with r set, C is only the partial sums between blocks of k (unused when k fits one).
void gemm_dot_product(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                      const BFloat16* a, std::int64_t lda, const BFloat16* b, std::int64_t ldb, float beta, float* c,
                      std::int64_t ldc, const float* bias, BFloat16* r, std::int64_t ldr) {
  const std::int64_t threads = in_parallel_region() ? 1 : num_threads();
  // Row blocks of about kMC rows, as many as a multiple of the thread count where the rows allow, so
  // that the pool's equal cut gives every thread the same work: block b holds the register tiles
  // [b * tiles / row_blocks, (b + 1) * tiles / row_blocks), so blocks differ by at most one tile.
  const std::int64_t tiles = ceil_div(m, kMR);
  const std::int64_t row_blocks = std::min(ceil_div(ceil_div(m, kMC), threads) * threads, tiles);
  const std::int64_t block_rows = ceil_div(tiles, row_blocks) * kMR;  // the most rows of a block
  auto block_start = [&](std::int64_t block) { return std::min(m, block * tiles / row_blocks * kMR); };

  std::vector<std::uint32_t>& packed_b = packed_b_buffer();
  for (std::int64_t j0 = 0; j0 < n; j0 += kNC) {
    const std::int64_t cols = std::min(kNC, n - j0);
    const std::int64_t panels = ceil_div(cols, kNR);
    // Too few row blocks to occupy the pool: the panels are split among the tasks too.
    const std::int64_t groups = row_blocks >= threads ? 1 : std::min(panels, ceil_div(threads, row_blocks));
    const std::int64_t panels_per_group = ceil_div(panels, groups);
    for (std::int64_t k0 = 0; k0 < k; k0 += kKC) {
      const std::int64_t kc = std::min(kKC, k - k0);
      const std::int64_t pairs = ceil_div(kc, 2);
      const bool last = k0 + kc == k;
      packed_b.resize(static_cast<std::size_t>(panels * pairs * kNR));
      std::uint32_t* pb = packed_b.data();
      parallel_for(0, panels, 4,
                   [&](std::int64_t lo, std::int64_t hi) { pack_b(trans_b, b, ldb, k0, kc, j0, cols, lo, hi, pb); });
      parallel_for(0, row_blocks * groups, 1, [&](std::int64_t lo, std::int64_t hi) {
        std::vector<std::uint32_t>& packed_a = packed_a_buffer();
        packed_a.resize(static_cast<std::size_t>(block_rows * pairs));
        std::int64_t packed_block = -1;
        for (std::int64_t task = lo; task < hi; ++task) {
          const std::int64_t block = task / groups, group = task % groups;
          const std::int64_t i0 = block_start(block), rows = block_start(block + 1) - i0;
          if (block != packed_block) {
            pack_a(trans_a, a, lda, i0, rows, k0, kc, packed_a.data());
            packed_block = block;
          }
          const std::int64_t first = group * panels_per_group, last_panel = std::min(panels, first + panels_per_group);
          for (std::int64_t q = first; q < last_panel; ++q) {
            const std::int64_t j = j0 + q * kNR;
            const int tile_cols = static_cast<int>(std::min<std::int64_t>(kNR, cols - q * kNR));
            for (std::int64_t r0 = 0; r0 < rows; r0 += kMR) {
              const std::int64_t i = i0 + r0;
              TileOut out{c != nullptr ? c + i * ldc + j : nullptr,
                          ldc,
                          last && r != nullptr ? r + i * ldr + j : nullptr,
                          ldr,
                          last && bias != nullptr ? bias + j : nullptr,
                          alpha,
                          k0 > 0 ? 1.0f : beta,
                          k0 > 0 || beta != 0.0f};
              tile(pairs, packed_a.data() + r0 * pairs, pb + q * pairs * kNR,
                   static_cast<int>(std::min<std::int64_t>(kMR, rows - r0)), tile_cols, out);
            }
          }
        }
      });
    }
  }
}

}  // namespace

bool cpu_has_avx512_bf16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_max(0, nullptr) < 7) return false;
  __cpuid(1, eax, ebx, ecx, edx);
  const bool osxsave = (ecx >> 27) & 1u;
  if (!osxsave) return false;
  // XCR0 must enable the SSE, AVX and the three AVX-512 state components (bits 1, 2, 5, 6, 7).
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & 0xE6u) != 0xE6u) return false;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  const bool avx512f = (ebx >> 16) & 1u, avx512bw = (ebx >> 30) & 1u, avx512vl = (ebx >> 31) & 1u;
  __cpuid_count(7, 1, eax, ebx, ecx, edx);
  const bool avx512_bf16 = (eax >> 5) & 1u;
  return avx512f && avx512bw && avx512vl && avx512_bf16;
}

void gemm_bf16_avx512(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                      const BFloat16* a, std::int64_t lda, const BFloat16* b, std::int64_t ldb, float beta, float* c,
                      std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  gemm_dot_product(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, nullptr, nullptr, 0);
}

void gemm_bf16_avx512_rounded(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                              const BFloat16* a, std::int64_t lda, const BFloat16* b, std::int64_t ldb,
                              const float* bias, BFloat16* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) c[i * ldc + j] = BFloat16(bias != nullptr ? bias[j] : 0.0f);
    return;
  }
  float* partial_sums = nullptr;
  std::vector<float>& buffer = partial_sums_buffer();
  if (k > kKC) {
    buffer.resize(static_cast<std::size_t>(m * n));
    partial_sums = buffer.data();
  }
  gemm_dot_product(trans_a, trans_b, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, partial_sums, n, bias, c, ldc);
  // Kept for the next product of a transformer's sizes; a larger one (an output head over a large
  // vocabulary) gives its memory back.
  if (buffer.capacity() > kKeptPartialSums) std::vector<float>().swap(buffer);
}

#undef TAPEGRAD_AVX512_BF16

}  // namespace tapegrad::kernels
