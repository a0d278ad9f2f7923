#pragma once
// Thread counts of the libtorch programs (libtorch_bench, libtorch_lm). libtorch parallelises its own
// ops with OpenMP (torch::set_num_threads) while its matrix products run on OpenBLAS, which keeps a
// thread pool of its own; OpenBLAS's setters are found at run time, so the programs link against
// libtorch alone.
//
//   bench::set_libtorch_threads(2);   // both pools; run with OMP_WAIT_POLICY=PASSIVE (docs/bench.md)

#include <dlfcn.h>

#include <torch/torch.h>

namespace bench {

inline void set_openblas_threads(int threads) {
  using SetFn = void (*)(int);
  if (auto fn = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) fn(threads);
}

// OpenBLAS's thread count, -1 when OpenBLAS is not loaded.
inline int openblas_threads() {
  using GetFn = int (*)();
  auto fn = reinterpret_cast<GetFn>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  return fn ? fn() : -1;
}

inline void set_libtorch_threads(int threads) {
  torch::set_num_threads(threads);
  set_openblas_threads(threads);
}

}  // namespace bench
