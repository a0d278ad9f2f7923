#pragma once
// General matrix products on raw row-major buffers, and the BLAS thread controls.
//
//   C (m, n) = alpha * op(A) (m, k) @ op(B) (k, n) + beta * C
//
// op(A) = A when trans_a is false: A is stored (m, k) with row stride lda >= max(1, k);
// op(A) = A^T when trans_a is true:  A is stored (k, m) with row stride lda >= max(1, m);
// likewise B with (k, n) / (n, k) and ldb, and C is stored (m, n) with ldc >= max(1, n).
// A transposed view is therefore passed as a flag and a leading dimension, never copied.
// When beta is 0, C is written without being read (it may hold garbage or NaN).
//
// This header does not include <cblas.h>: blas.cpp is the only translation unit that does, so
// OpenBLAS's declarations and macros reach no other file of the library nor its users.

#include <cstdint>
#include <string>

#include "tapegrad/autograd/bfloat16.h"

namespace tapegrad::kernels {

// Picks gemm_loop for small products and BLAS otherwise (see kLoopGemmMaxWork in blas.cpp for
// the measured crossover). Products of at least 2^20 multiply-adds, called outside the thread
// pool with more than one thread, are split over the pool (autograd/parallel.h) in blocks of
// C's rows or columns, each block one single-threaded BLAS call.
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
          std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc);
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, double alpha, const double* a,
          std::int64_t lda, const double* b, std::int64_t ldb, double beta, double* c, std::int64_t ldc);

// bfloat16 operands, float32 accumulation and result: C (float32) = alpha op(A) op(B) + beta C, the
// exact products of the bfloat16 values summed in float32. The kernel is picked once, at run time,
// by bf16_gemm_kernel() (gemm_bf16.h): vdpbf16ps on CPUs with AVX512_BF16, otherwise the widening
// path (both operands widened to float32, then the float32 gemm above). The two agree to float32
// rounding (they add the same products in different orders).
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const BFloat16* a,
          std::int64_t lda, const BFloat16* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc);

// bfloat16 operands and result: C (bfloat16) = round(op(A) op(B) + bias), the float32 sum of the
// exact products as above, plus bias[j] in column j when bias is not null, rounded once to nearest
// even. On the dot-product kernel the bias and the rounding happen in the register tile as it
// finishes, so no float32 copy of C is written when k fits one of its blocks (256).
void gemm_rounded(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, const BFloat16* a,
                  std::int64_t lda, const BFloat16* b, std::int64_t ldb, const float* bias, BFloat16* c,
                  std::int64_t ldc);

// Whether this CPU has bfloat16 dot-product instructions (AVX512_BF16 or AMX-BF16), read from cpuid
// at run time.
bool cpu_has_bf16_instructions();

// Always cblas_sgemm / cblas_dgemm. Throws ValueError when a size does not fit BLAS's int.
void gemm_blas(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
               std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc);
void gemm_blas(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, double alpha,
               const double* a, std::int64_t lda, const double* b, std::int64_t ldb, double beta, double* c,
               std::int64_t ldc);

// Always the loop gemm uses below the crossover: four rows of C at a time held in vector
// registers over the whole k loop (a transposed B is first repacked on the stack when k n <=
// 4096); one dot product per entry of C when n < 4 or the repack would not fit.
void gemm_loop(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
               std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc);
void gemm_loop(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, double alpha,
               const double* a, std::int64_t lda, const double* b, std::int64_t ldb, double beta, double* c,
               std::int64_t ldc);

// Whether gemm takes the loop for an (m, k) @ (k, n) product.
bool gemm_uses_loop(std::int64_t m, std::int64_t n, std::int64_t k);

// OpenBLAS's own worker threads. tapegrad's pool sets them to 1 when it starts: its products
// are split over the pool instead (see parallel.h), and more would oversubscribe the cores.
int blas_num_threads();
void set_blas_num_threads(int threads);
// The kernel family OpenBLAS picked for this CPU ("Haswell", "Cooperlake" ...), which
// OPENBLAS_CORETYPE overrides.
std::string blas_core_name();

}  // namespace tapegrad::kernels
