// The examples' DataParallel when one process fails, run under `mpirun -np 2` by
// tests/dist/run_failure.cmake: rank 1 throws, its exception leaves the scope of its DataParallel
// (as an example's run() is left for main's handler), and the DataParallel ends the whole job while
// rank 0 waits at a barrier that rank 1 never reaches. Without that, rank 0 would wait for its
// collective's timeout (60 s) and the job would hang until then.

#include <iostream>
#include <stdexcept>

#include "examples/common/data_parallel.h"

using namespace tapegrad;

namespace {

int run() {
  examples::DataParallel parallel = examples::DataParallel::from_environment();
  if (parallel.size() != 2) {
    std::cerr << "data_parallel_failure: run under mpirun -np 2\n";
    return 2;
  }
  parallel.barrier();
  if (parallel.rank() == 1) throw std::runtime_error("rank 1 fails on purpose");
  parallel.barrier();  // rank 1 never comes
  std::cout << "rank 0 passed the barrier, which it must not\n";
  return 0;
}

}  // namespace

int main() {
  try {
    return run();
  } catch (const std::exception& e) {
    std::cerr << "data_parallel_failure: " << e.what() << "\n";
    return 1;
  }
}
