#pragma once
// The bfloat16 matrix product on AVX512_BF16's pair dot product (vdpbf16ps), for CPUs that have it.
//
//   C (m, n, float32) = alpha * op(A) (m, k) @ op(B) (k, n) + beta * C,   A and B bfloat16
//
// with gemm's layout conventions (blas.h). vdpbf16ps multiplies two bfloat16 pairs exactly and adds
// both products to a float32 lane, so each entry of C is the float32-accumulated sum of the exact
// products, as in the widening path (bfloat16 -> float32, then sgemm); the two differ only in the
// order of the float32 additions.
//
// The kernel is compiled for AVX512_BF16 with function attributes, whatever flags the library was
// built with, and must only be called when cpu_has_avx512_bf16() is true: kernels::gemm checks that
// at run time and takes the widening path otherwise.

#include <cstdint>

#include "tapegrad/autograd/bfloat16.h"

namespace tapegrad::kernels {

// Whether this CPU and the operating system support AVX512_BF16 (cpuid leaf 7 sub-leaf 1 and the
// AVX-512 state enabled in XCR0).
bool cpu_has_avx512_bf16();

// The bfloat16 kernels kernels::gemm chooses between.
enum class Bf16GemmKernel {
  kDotProduct,  // gemm_bf16_avx512
  kWidening,    // gemm_bf16_widening
};

// The kernel kernels::gemm uses for bfloat16 operands in this process, decided at its first call:
// the setting of TAPEGRAD_BF16_GEMM ("avx512" or "widen", to compare the two on one machine) when
// set, else kDotProduct exactly when cpu_has_avx512_bf16().
Bf16GemmKernel bf16_gemm_kernel();
// The decision itself, for a setting (nullptr when unset) and a CPU. ValueError naming the variable
// and the value for an unknown setting, or "avx512" on a CPU without the instructions.
Bf16GemmKernel bf16_gemm_kernel_from(const char* setting, bool cpu_has_dot_product);

// op(A) and op(B) widened to float32 (exactly, in parallel over the pool), then the float32 gemm:
// every CPU can run it.
void gemm_bf16_widening(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                        const BFloat16* a, std::int64_t lda, const BFloat16* b, std::int64_t ldb, float beta, float* c,
                        std::int64_t ldc);

// Packs B once per block of k, then splits the rows of C over the thread pool; each task packs its
// own block of A and runs a 14 x 32 register tile (28 accumulators) over it.
void gemm_bf16_avx512(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                      const BFloat16* a, std::int64_t lda, const BFloat16* b, std::int64_t ldb, float beta, float* c,
                      std::int64_t ldc);

// The two kernels of kernels::gemm_rounded (blas.h): C (bfloat16) = round(op(A) op(B) + bias).
// The widening one rounds a float32 product; the dot-product one adds the bias and rounds in the
// register tile of the last block of k, keeping float32 partial sums (in a buffer of its thread)
// only when k spans more than one block of 256.
void gemm_bf16_widening_rounded(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                                const BFloat16* a, std::int64_t lda, const BFloat16* b, std::int64_t ldb,
                                const float* bias, BFloat16* c, std::int64_t ldc);
void gemm_bf16_avx512_rounded(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                              const BFloat16* a, std::int64_t lda, const BFloat16* b, std::int64_t ldb,
                              const float* bias, BFloat16* c, std::int64_t ldc);

}  // namespace tapegrad::kernels
