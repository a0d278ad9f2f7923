// gemm on OpenBLAS, with a plain loop for products too small to pay BLAS's fixed cost.
// The only translation unit that includes <cblas.h>.

#include "autograd/kernels/blas.h"

#include <cblas.h>

#include <climits>
#include <string>

#include "autograd/error.h"

namespace tapegrad::kernels {

namespace {

// Products of at most this many multiply-adds (m * n * k) take the loop: below it OpenBLAS's
// fixed cost per call (argument checks, dispatch, packing) outweighs the arithmetic. Measured
// with bench/gemm_crossover.cpp (2-core AMD EPYC, OpenBLAS 0.3.21, float32, ns per call,
// median of 15; loop / sgemm):
//   product                        m*n*k   Cooperlake 2 thr   Cooperlake 1 thr   Haswell 2 thr
//   (1,20) @ (20,1)                   20        16 / 71            29 / 81           26 / 149
//   (1,20) @ (20,2)^T  (W1 head)      40        22 / 92            47 / 157          40 / 141
//   (2,1)^T @ (1,20)   (W1 head dW)   40        32 / 72            44 / 112          39 / 126
//   (4,4) @ (4,4)                     64        53 / 44           104 / 77           93 / 128
//   (4,4) @ (4,4)^T                   64        77 / 87           164 / 146         140 / 130
//   (6,6) @ (6,6)                    216       138 / 48           358 / 111         235 / 177
//   (5,5) @ (5,20)     (W1 att @ v)  500       210 / 65           205 / 100         218 / 196
//   (5,20) @ (20,20)^T (W1 q, k, v) 2000      1118 / 349         1145 / 365        1124 / 420
// The loop wins up to 40 everywhere, the two split at 64, and sgemm wins from 216 on, so
// the spam toy's attention products run on BLAS and only its classifier head on the loop.
// (The machine was shared while measuring; the ratios repeated across runs, the absolute
// times moved by up to 2x.)
constexpr std::int64_t kLoopGemmMaxWork = 48;

blasint to_blas_int(std::int64_t v, const char* what) {
  if (v < 0 || v > INT_MAX)
    throw ValueError(std::string("gemm: ") + what + " = " + std::to_string(v) + " does not fit BLAS's 32-bit int");
  return static_cast<blasint>(v);
}

// The row stride BLAS gets for a stored (rows, row_len) matrix. BLAS requires ld >= max(1, row_len)
// even where ld is never used (a single stored row), so that case gets the smallest legal value.
blasint leading_dim(std::int64_t ld, std::int64_t rows, std::int64_t row_len, const char* what) {
  const std::int64_t least = row_len < 1 ? 1 : row_len;
  if (rows <= 1) return to_blas_int(least, what);
  if (ld < least)
    throw ValueError(std::string("gemm: ") + what + " = " + std::to_string(ld) + " is smaller than the row length " +
                     std::to_string(row_len));
  return to_blas_int(ld, what);
}

template <class T, class BlasFn>
void gemm_blas_impl(BlasFn blas_fn, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                    T alpha, const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c,
                    std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // C = beta * C; not every BLAS accepts k = 0
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
    return;
  }
  blas_fn(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
          to_blas_int(m, "m"), to_blas_int(n, "n"), to_blas_int(k, "k"), alpha, a,
          trans_a ? leading_dim(lda, k, m, "lda") : leading_dim(lda, m, k, "lda"), b,
          trans_b ? leading_dim(ldb, n, k, "ldb") : leading_dim(ldb, k, n, "ldb"), beta, c,
          leading_dim(ldc, m, n, "ldc"));
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
  for (std::int64_t i = 0; i < m; ++i) {
    T* c_row = c + i * ldc;  // c_row: (n)
    const T* a_row_i = a + i * a_row;
    if (!trans_b && n >= 8) {
      // Rows of B are contiguous and long enough to vectorise:
      // C[i, :] = beta C[i, :] + sum_p alpha A[i, p] B[p, :], vectorised over j.
      if (beta == T(0)) {
        for (std::int64_t j = 0; j < n; ++j) c_row[j] = T(0);
      } else if (beta != T(1)) {
        for (std::int64_t j = 0; j < n; ++j) c_row[j] *= beta;
      }
      for (std::int64_t p = 0; p < k; ++p) {
        const T scaled = alpha * a_row_i[p * a_col];
        const T* b_row_p = b + p * b_row;
        for (std::int64_t j = 0; j < n; ++j) c_row[j] += scaled * b_row_p[j];
      }
    } else {
      // One dot product per entry. Partial sums break the add chain; with both operands
      // contiguous (A plain, B stored transposed) the eight-way version also vectorises.
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

void gemm_blas(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
               const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
               std::int64_t ldc) {
  gemm_blas_impl<float>(cblas_sgemm, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm_blas(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, double alpha,
               const double* a, std::int64_t lda, const double* b, std::int64_t ldb, double beta, double* c,
               std::int64_t ldc) {
  gemm_blas_impl<double>(cblas_dgemm, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm_loop(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
               const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
               std::int64_t ldc) {
  gemm_loop_impl<float>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm_loop(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, double alpha,
               const double* a, std::int64_t lda, const double* b, std::int64_t ldb, double beta, double* c,
               std::int64_t ldc) {
  gemm_loop_impl<double>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
          std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  if (gemm_uses_loop(m, n, k)) gemm_loop(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else gemm_blas(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, double alpha, const double* a,
          std::int64_t lda, const double* b, std::int64_t ldb, double beta, double* c, std::int64_t ldc) {
  if (gemm_uses_loop(m, n, k)) gemm_loop(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else gemm_blas(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

int blas_num_threads() { return openblas_get_num_threads(); }

void set_blas_num_threads(int threads) {
  if (threads < 1) throw ValueError("set_blas_num_threads: threads must be at least 1, got " + std::to_string(threads));
  openblas_set_num_threads(threads);
}

std::string blas_core_name() {
  const char* name = openblas_get_corename();
  return name ? name : "unknown";
}

}  // namespace tapegrad::kernels
