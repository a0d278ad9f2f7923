// gemm on OpenBLAS, with a plain loop for products too small to pay BLAS's fixed cost.
// The only translation unit that includes <cblas.h>.

#include "tapegrad/autograd/kernels/blas.h"

#include "tapegrad/autograd/kernels/convert.h"
#include "tapegrad/autograd/kernels/gemm_bf16.h"

#include <cblas.h>

#include <cpuid.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/parallel.h"

namespace tapegrad::kernels {

namespace {

// Products of at most this many multiply-adds (m * n * k) take the loop: below it OpenBLAS's
// fixed cost per call (argument checks, dispatch, packing, ~110-200 ns) outweighs the
// arithmetic. Measured with bench/gemm_crossover.cpp and a min-of-200 timer (2-core AMD EPYC,
// OpenBLAS 0.3.21 Haswell kernels, 2 threads, float32, ns per call; loop / sgemm):
//   (5,5) @ (5,20)      (W1 att @ v)      500      26 / 111
//   (5,20) @ (20,5)^T   (W1 q @ k^T)      500     115 / 148
//   (5,20) @ (20,20)    (W1 dX)          2000      82 / 198
//   (20,5)^T @ (5,20)   (W1 dW)          2000      75 / 173
//   (5,20) @ (20,20)^T  (W1 q, k, v)     2000     226 / 228   (repacking B^T costs half)
//   16^3 NN / NT                         4096     124 / 204,  210 / 233
//   24^3 NN                             13824     410 / 437
//   32^3 NN / NT                        32768     927 / 881, 1186 / 1002
// The register-blocked loop wins below about 24^3 and loses from 32^3 on. (The machine was
// shared while measuring: absolute times moved by up to 2x, the ratios much less.)
constexpr std::int64_t kLoopGemmMaxWork = 16384;

// Products of at least this many multiply-adds are split over the thread pool (about 6 us of
// single-threaded sgemm here; the split costs about 1 us), in blocks of this many rows or
// columns of C so that every piece keeps whole vector-register tiles.
constexpr std::int64_t kSplitGemmMinWork = std::int64_t{1} << 20;
constexpr std::int64_t kSplitAlign = 16;

blasint to_blas_int(std::int64_t v, const char* what) {
  if (v < 0 || v > INT_MAX) throw ValueError(message("gemm: ", what, " = ", v, " does not fit BLAS's 32-bit int"));
  return static_cast<blasint>(v);
}

// The row stride BLAS gets for a stored (rows, row_len) matrix. BLAS requires ld >= max(1, row_len)
// even where ld is never used (a single stored row), so that case gets the smallest legal value.
blasint leading_dim(std::int64_t ld, std::int64_t rows, std::int64_t row_len, const char* what) {
  const std::int64_t least = row_len < 1 ? 1 : row_len;
  if (rows <= 1) return to_blas_int(least, what);
  if (ld < least) throw ValueError(message("gemm: ", what, " = ", ld, " is smaller than the row length ", row_len));
  return to_blas_int(ld, what);
}

template <class T, class BlasFn>
void gemm_blas_impl(BlasFn blas_fn, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha,
                    const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  num_threads();  // builds the pool on first use, which keeps OpenBLAS single-threaded
  if (k == 0) {   // C = beta * C; not every BLAS accepts k = 0
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
    return;
  }
  blas_fn(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, to_blas_int(m, "m"),
          to_blas_int(n, "n"), to_blas_int(k, "k"), alpha, a,
          trans_a ? leading_dim(lda, k, m, "lda") : leading_dim(lda, m, k, "lda"), b,
          trans_b ? leading_dim(ldb, n, k, "ldb") : leading_dim(ldb, k, n, "ldb"), beta, c,
          leading_dim(ldc, m, n, "ldc"));
}

// Largest k n of a transposed B that gemm_loop repacks on the stack (16 KiB of float32).
constexpr std::int64_t kLoopPackMax = 4096;

// W consecutive values of T as one GCC/Clang vector (the compiler maps it onto whatever vector
// registers the target has): explicit, because GCC did not vectorise the plain-array form.
template <class T, int W>
struct VecOf;
template <>
struct VecOf<float, 8> {
  typedef float type __attribute__((vector_size(32)));
};
template <>
struct VecOf<float, 4> {
  typedef float type __attribute__((vector_size(16)));
};
template <>
struct VecOf<double, 8> {
  typedef double type __attribute__((vector_size(64)));
};
template <>
struct VecOf<double, 4> {
  typedef double type __attribute__((vector_size(32)));
};

// C[i0 .. i0+R, j0 .. j0+W) = alpha op(A) op(B) + beta C for B stored row-major (k, n) with row
// stride ldb. The R accumulators of W values stay in vector registers for the whole k loop (R
// independent FMA chains), instead of C's row going through memory on every step of k (a
// store-to-load dependency that made the plain row loop latency-bound).
template <int R, int W, class T>
inline void gemm_block(std::int64_t k, T alpha, const T* __restrict a, std::int64_t a_row, std::int64_t a_col,
                       const T* __restrict b, std::int64_t ldb, T beta, T* __restrict c, std::int64_t ldc) {
  // a: op(A)'s rows i0.., c: C's element (i0, j0), b: B's element (0, j0)
  if constexpr (W == 1) {
    T acc[R] = {};
    for (std::int64_t p = 0; p < k; ++p)
      for (int r = 0; r < R; ++r) acc[r] += a[r * a_row + p * a_col] * b[p * ldb];
    for (int r = 0; r < R; ++r) c[r * ldc] = alpha * acc[r] + (beta == T(0) ? T(0) : beta * c[r * ldc]);
  } else {
    using V = typename VecOf<T, W>::type;
    V acc[R] = {};
    for (std::int64_t p = 0; p < k; ++p) {
      V bv;
      std::memcpy(&bv, b + p * ldb, sizeof bv);
      for (int r = 0; r < R; ++r) acc[r] += a[r * a_row + p * a_col] * bv;
    }
    for (int r = 0; r < R; ++r) {
      V out = alpha * acc[r];
      if (beta != T(0)) {
        V old;
        std::memcpy(&old, c + r * ldc, sizeof old);
        out += beta * old;
      }
      std::memcpy(c + r * ldc, &out, sizeof out);
    }
  }
}

// Rows i0 .. i0+R of C, in column blocks of 8, 4 and 1.
template <int R, class T>
void gemm_rows(std::int64_t n, std::int64_t k, T alpha, const T* a, std::int64_t a_row, std::int64_t a_col, const T* b,
               std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  std::int64_t j = 0;
  for (; j + 8 <= n; j += 8) gemm_block<R, 8>(k, alpha, a, a_row, a_col, b + j, ldb, beta, c + j, ldc);
  for (; j + 4 <= n; j += 4) gemm_block<R, 4>(k, alpha, a, a_row, a_col, b + j, ldb, beta, c + j, ldc);
  for (; j < n; ++j) gemm_block<R, 1>(k, alpha, a, a_row, a_col, b + j, ldb, beta, c + j, ldc);
}

template <class T>
void gemm_loop_impl(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha,
                    const T* __restrict a, std::int64_t lda, const T* __restrict b, std::int64_t ldb, T beta,
                    T* __restrict c, std::int64_t ldc) {
  // Element strides of op(A) (m, k) and op(B) (k, n).
  const std::int64_t a_row = trans_a ? 1 : lda;
  const std::int64_t a_col = trans_a ? lda : 1;
  const std::int64_t b_row = trans_b ? 1 : ldb;
  const std::int64_t b_col = trans_b ? ldb : 1;
  // Rows of op(B) long enough to vectorise (n >= 4): register-blocked, four rows of C at a time. A
  // transposed B is first copied into row-major (k, n) order: k n copies buy contiguous rows.
  if (n >= 4 && (!trans_b || k * n <= kLoopPackMax)) {
    T packed[kLoopPackMax];
    const T* bb = b;
    std::int64_t ldbb = ldb;
    if (trans_b) {
      for (std::int64_t j = 0; j < n; ++j)  // reads B's stored rows in order
        for (std::int64_t p = 0; p < k; ++p) packed[p * n + j] = b[j * ldb + p];
      bb = packed;
      ldbb = n;
    }
    std::int64_t i = 0;
    for (; i + 4 <= m; i += 4) gemm_rows<4>(n, k, alpha, a + i * a_row, a_row, a_col, bb, ldbb, beta, c + i * ldc, ldc);
    switch (m - i) {
      case 3:
        gemm_rows<3>(n, k, alpha, a + i * a_row, a_row, a_col, bb, ldbb, beta, c + i * ldc, ldc);
        break;
      case 2:
        gemm_rows<2>(n, k, alpha, a + i * a_row, a_row, a_col, bb, ldbb, beta, c + i * ldc, ldc);
        break;
      case 1:
        gemm_rows<1>(n, k, alpha, a + i * a_row, a_row, a_col, bb, ldbb, beta, c + i * ldc, ldc);
        break;
      default:
        break;
    }
    return;
  }
  // Short rows of op(B) (n < 4) or a transposed B too large to repack: one dot product per
  // entry of C.
  for (std::int64_t i = 0; i < m; ++i) {
    T* c_row = c + i * ldc;  // c_row: (n)
    const T* a_row_i = a + i * a_row;
    // Partial sums break the add chain; with both operands contiguous (A plain, B stored
    // transposed) the eight-way version also vectorises.
    {
      for (std::int64_t j = 0; j < n; ++j) {
        const T* b_col_j = b + j * b_col;
        T total = 0;
        if (!trans_a && trans_b) {
          T partial[8] = {};
          std::int64_t p = 0;
          for (; p + 8 <= k; p += 8)
            for (int lane = 0; lane < 8; ++lane) partial[lane] += a_row_i[p + lane] * b_col_j[p + lane];
          for (; p < k; ++p) total += a_row_i[p] * b_col_j[p];
          for (int lane = 0; lane < 8; ++lane) total += partial[lane];
        } else {
          T partial[4] = {};
          std::int64_t p = 0;
          for (; p + 4 <= k; p += 4)
            for (int lane = 0; lane < 4; ++lane)
              partial[lane] += a_row_i[(p + lane) * a_col] * b_col_j[(p + lane) * b_row];
          for (; p < k; ++p) total += a_row_i[p * a_col] * b_col_j[p * b_row];
          total += (partial[0] + partial[1]) + (partial[2] + partial[3]);
        }
        c_row[j] = alpha * total + (beta == T(0) ? T(0) : beta * c_row[j]);
      }
    }
  }
}

}  // namespace

bool gemm_uses_loop(std::int64_t m, std::int64_t n, std::int64_t k) { return m * n * k <= kLoopGemmMaxWork; }

void gemm_blas(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
               std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  gemm_blas_impl<float>(cblas_sgemm, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm_blas(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, double alpha,
               const double* a, std::int64_t lda, const double* b, std::int64_t ldb, double beta, double* c,
               std::int64_t ldc) {
  gemm_blas_impl<double>(cblas_dgemm, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm_loop(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
               std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  gemm_loop_impl<float>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm_loop(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, double alpha,
               const double* a, std::int64_t lda, const double* b, std::int64_t ldb, double beta, double* c,
               std::int64_t ldc) {
  gemm_loop_impl<double>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

namespace {

// The loop below the crossover; above it BLAS, split over the pool into blocks of C's rows (or of
// its columns when C is wider than tall). Every element of C is computed by one piece with the
// whole k loop, so the split changes which thread computes an element, not how.
template <class T>
void gemm_impl(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
               std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  if (gemm_uses_loop(m, n, k)) {
    gemm_loop(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  if (m * n * k < kSplitGemmMinWork || in_parallel_region() || num_threads() == 1) {
    gemm_blas(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  const bool by_rows = m >= n;
  const std::int64_t extent = by_rows ? m : n;
  const std::int64_t blocks = (extent + kSplitAlign - 1) / kSplitAlign;
  parallel_for(0, blocks, 1, [&](std::int64_t lo, std::int64_t hi) {
    const std::int64_t first = lo * kSplitAlign;
    const std::int64_t count = std::min(extent, hi * kSplitAlign) - first;
    if (by_rows) {
      // rows [first, first + count) of op(A) and of C
      const T* a_part = trans_a ? a + first : a + first * lda;
      gemm_blas(trans_a, trans_b, count, n, k, alpha, a_part, lda, b, ldb, beta, c + first * ldc, ldc);
    } else {
      // columns [first, first + count) of op(B) and of C
      const T* b_part = trans_b ? b + first * ldb : b + first;
      gemm_blas(trans_a, trans_b, m, count, k, alpha, a, lda, b_part, ldb, beta, c + first, ldc);
    }
  });
}

}  // namespace

void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
          std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  gemm_impl<float>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, double alpha, const double* a,
          std::int64_t lda, const double* b, std::int64_t ldb, double beta, double* c, std::int64_t ldc) {
  gemm_impl<double>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

namespace {

// size floats, not zeroed (every caller writes each one before it is read): zeroing was a
// memset of every widened operand and product.
std::unique_ptr<float[]> float_buffer(std::int64_t size) {
  return std::unique_ptr<float[]>(new float[static_cast<std::size_t>(size)]);
}

// The stored (rows, cols) matrix with row stride ld, widened into a dense float32 (rows, cols).
std::unique_ptr<float[]> widen(const BFloat16* src, std::int64_t rows, std::int64_t cols, std::int64_t ld) {
  std::unique_ptr<float[]> out = float_buffer(rows * cols);
  if (rows * cols == 0) return out;
  float* dst = out.get();
  parallel_for(0, rows, std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(cols, 1)),
               [&](std::int64_t lo, std::int64_t hi) {
                 for (std::int64_t r = lo; r < hi; ++r) widen_bfloat16_serial(src + r * ld, dst + r * cols, cols);
               });
  return out;
}

}  // namespace

void gemm_bf16_widening(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                        const BFloat16* a, std::int64_t lda, const BFloat16* b, std::int64_t ldb, float beta, float* c,
                        std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  // A is stored (m, k), or (k, m) when transposed; B (k, n), or (n, k).
  const std::int64_t a_rows = trans_a ? k : m, a_cols = trans_a ? m : k;
  const std::int64_t b_rows = trans_b ? n : k, b_cols = trans_b ? k : n;
  const std::unique_ptr<float[]> wide_a = widen(a, a_rows, a_cols, lda);
  const std::unique_ptr<float[]> wide_b = widen(b, b_rows, b_cols, ldb);
  gemm(trans_a, trans_b, m, n, k, alpha, wide_a.get(), std::max<std::int64_t>(a_cols, 1), wide_b.get(),
       std::max<std::int64_t>(b_cols, 1), beta, c, ldc);
}

void gemm_bf16_widening_rounded(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                                const BFloat16* a, std::int64_t lda, const BFloat16* b, std::int64_t ldb,
                                const float* bias, BFloat16* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  // Filled below with the bias (then gemm adds, beta 1), or written by gemm with beta 0 without being read.
  const std::unique_ptr<float[]> wide = float_buffer(m * n);
  if (bias != nullptr)
    for (std::int64_t i = 0; i < m; ++i) std::copy(bias, bias + n, wide.get() + i * n);
  gemm_bf16_widening(trans_a, trans_b, m, n, k, 1.0f, a, lda, b, ldb, bias != nullptr ? 1.0f : 0.0f, wide.get(), n);
  parallel_for(0, m, std::max<std::int64_t>(1, 16384 / n), [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; ++i) round_to_bfloat16_serial(wide.get() + i * n, c + i * ldc, n);
  });
}

Bf16GemmKernel bf16_gemm_kernel_from(const char* setting, bool cpu_has_dot_product) {
  if (setting == nullptr || *setting == '\0')
    return cpu_has_dot_product ? Bf16GemmKernel::kDotProduct : Bf16GemmKernel::kWidening;
  const std::string value(setting);
  if (value == "widen") return Bf16GemmKernel::kWidening;
  if (value == "avx512") {
    if (!cpu_has_dot_product)
      throw ValueError("TAPEGRAD_BF16_GEMM = 'avx512', but this CPU has no AVX512_BF16 instructions");
    return Bf16GemmKernel::kDotProduct;
  }
  throw ValueError("TAPEGRAD_BF16_GEMM = '" + value + "': expected 'avx512' or 'widen'");
}

Bf16GemmKernel bf16_gemm_kernel() {
  static const Bf16GemmKernel kernel = bf16_gemm_kernel_from(std::getenv("TAPEGRAD_BF16_GEMM"), cpu_has_avx512_bf16());
  return kernel;
}

void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const BFloat16* a,
          std::int64_t lda, const BFloat16* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  if (bf16_gemm_kernel() == Bf16GemmKernel::kDotProduct) {
    gemm_bf16_avx512(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else {
    gemm_bf16_widening(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
}

void gemm_rounded(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, const BFloat16* a,
                  std::int64_t lda, const BFloat16* b, std::int64_t ldb, const float* bias, BFloat16* c,
                  std::int64_t ldc) {
  if (bf16_gemm_kernel() == Bf16GemmKernel::kDotProduct) {
    gemm_bf16_avx512_rounded(trans_a, trans_b, m, n, k, a, lda, b, ldb, bias, c, ldc);
  } else {
    gemm_bf16_widening_rounded(trans_a, trans_b, m, n, k, a, lda, b, ldb, bias, c, ldc);
  }
}

bool cpu_has_bf16_instructions() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_max(0, nullptr) < 7) return false;
  __cpuid_count(7, 1, eax, ebx, ecx, edx);
  const bool avx512_bf16 = (eax >> 5) & 1u;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  const bool amx_bf16 = (edx >> 22) & 1u;
  return avx512_bf16 || amx_bf16;
}

int blas_num_threads() { return openblas_get_num_threads(); }

void set_blas_num_threads(int threads) {
  if (threads < 1) throw ValueError(message("set_blas_num_threads: threads must be at least 1, got ", threads));
  openblas_set_num_threads(threads);
}

std::string blas_core_name() {
  const char* name = openblas_get_corename();
  return name ? name : "unknown";
}

}  // namespace tapegrad::kernels
