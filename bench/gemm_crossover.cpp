// tapegrad_gemm_crossover: times gemm's two paths, the plain loop (kernels::gemm_loop) and
// OpenBLAS (kernels::gemm_blas), on small float32 products, to place kLoopGemmMaxWork in
// autograd/kernels/blas.cpp. Not a test: it prints nanoseconds per call, medians of 15 runs.
//
//   tapegrad_gemm_crossover            # the table
//   OPENBLAS_NUM_THREADS=1 tapegrad_gemm_crossover

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "tapegrad/autograd/kernels/blas.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Case {
  const char* what;
  bool trans_a, trans_b;
  std::int64_t m, n, k;
};

// Median nanoseconds per call of fn over 15 runs, each long enough (~2 ms) to time reliably.
template <class F>
double median_ns(F fn) {
  std::int64_t reps = 1;
  for (;;) {
    const auto t0 = Clock::now();
    for (std::int64_t r = 0; r < reps; ++r) fn();
    if (Clock::now() - t0 > std::chrono::milliseconds(2)) break;
    reps *= 2;
  }
  std::vector<double> runs;
  for (int run = 0; run < 15; ++run) {
    const auto t0 = Clock::now();
    for (std::int64_t r = 0; r < reps; ++r) fn();
    runs.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / static_cast<double>(reps));
  }
  std::nth_element(runs.begin(), runs.begin() + 7, runs.end());
  return runs[7];
}

}  // namespace

int main() {
  using tapegrad::kernels::gemm_blas;
  using tapegrad::kernels::gemm_loop;
  const std::vector<Case> cases = {
      {"W1 x @ W^T (5,20)x(20,20)", false, true, 5, 20, 20},
      {"W1 q @ k^T (5,20)x(20,5)", false, true, 5, 5, 20},
      {"W1 att @ v (5,5)x(5,20)", false, false, 5, 20, 5},
      {"W1 dX = dY @ W (5,20)x(20,20)", false, false, 5, 20, 20},
      {"W1 dW = dY^T @ X (20,5)x(5,20)", true, false, 20, 20, 5},
      {"W1 head (1,20)x(20,2)", false, true, 1, 2, 20},
      {"W1 head dW (2,1)x(1,20)", true, false, 2, 20, 1},
      {"W1 head dX (1,2)x(2,20)", false, false, 1, 20, 2},
      {"dot (1,20)x(20,1)", false, false, 1, 1, 20},
      {"row (1,20)x(20,20) NN", false, false, 1, 20, 20},
      {"row (1,20)x(20,20) NT", false, true, 1, 20, 20},
      {"square 2 NN", false, false, 2, 2, 2},
      {"square 4 NN", false, false, 4, 4, 4},
      {"square 4 NT", false, true, 4, 4, 4},
      {"square 6 NN", false, false, 6, 6, 6},
      {"square 8 NN", false, false, 8, 8, 8},
      {"square 16 NN", false, false, 16, 16, 16},
      {"square 16 NT", false, true, 16, 16, 16},
      {"square 24 NN", false, false, 24, 24, 24},
      {"square 32 NN", false, false, 32, 32, 32},
      {"square 32 NT", false, true, 32, 32, 32},
      {"square 32 TN", true, false, 32, 32, 32},
      {"square 40 NN", false, false, 40, 40, 40},
      {"square 48 NN", false, false, 48, 48, 48},
      {"square 64 NN", false, false, 64, 64, 64},
      {"square 64 NT", false, true, 64, 64, 64},
      {"(32,64)x(64,64) NN", false, false, 32, 64, 64},
      {"(128,64)x(64,64) NN", false, false, 128, 64, 64},
  };
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::printf("OpenBLAS core %s, %d thread(s); ns per call, median of 15\n",
              tapegrad::kernels::blas_core_name().c_str(), tapegrad::kernels::blas_num_threads());
  std::printf("%-32s %10s %10s %10s %8s\n", "product", "m*n*k", "loop ns", "sgemm ns", "loop/blas");
  for (const Case& c : cases) {
    std::vector<float> a(c.m * c.k), b(c.k * c.n), out(c.m * c.n);
    for (float& v : a) v = dist(rng);
    for (float& v : b) v = dist(rng);
    const std::int64_t lda = c.trans_a ? c.m : c.k;
    const std::int64_t ldb = c.trans_b ? c.k : c.n;
    const double loop = median_ns([&] {
      gemm_loop(c.trans_a, c.trans_b, c.m, c.n, c.k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, out.data(), c.n);
    });
    const double blas = median_ns([&] {
      gemm_blas(c.trans_a, c.trans_b, c.m, c.n, c.k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, out.data(), c.n);
    });
    std::printf("%-32s %10lld %10.0f %10.0f %8.2f\n", c.what, static_cast<long long>(c.m * c.n * c.k), loop, blas,
                loop / blas);
  }
  return 0;
}
