// What happens when a rank fails, run under `mpirun -np 2` by tests/dist/run_failure.cmake:
//   throw    rank 1 dies of an uncaught exception while rank 0 waits in an all_reduce: the job
//            must end (non-zero) well before rank 0's 60 s timeout.
//   timeout  rank 1 sleeps without joining an all_reduce: rank 0's all_reduce throws TimeoutError
//            after 1.5 s (its pending buffer kept alive, no second wait), the group refuses the next
//            collective at once, and the job ends (MPI_Abort at exit) instead of waiting for rank 1's
//            30 s.
#include <chrono>
#include <iostream>
#include <stdexcept>
#include <string>
#include <thread>

#include "tapegrad/dist/dist.h"

using namespace tapegrad;

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  dist::InitOptions options;
  options.timeout = mode == "timeout" ? std::chrono::milliseconds(1500) : std::chrono::milliseconds(60000);
  const dist::ProcessGroup group = dist::init(options);
  if (group.size() != 2) {
    std::cerr << "dist_failures: run under mpirun -np 2\n";
    return 2;
  }
  group.barrier();
  if (mode == "throw") {
    if (group.rank() == 1) throw std::runtime_error("rank 1 fails on purpose");
    Tensor t = ones({4});
    group.all_reduce(t);  // never completes: rank 1 is gone
    std::cout << "rank 0: the all_reduce completed, which it must not\n";
    return 0;
  }
  if (mode == "timeout") {
    if (group.rank() == 1) {
      std::this_thread::sleep_for(std::chrono::seconds(30));
      return 0;
    }
    try {
      Tensor t = ones({4});
      group.all_reduce(t);
    } catch (const dist::TimeoutError& e) {
      std::cout << "rank 0 caught: " << e.what() << std::endl;
      try {
        group.barrier();
      } catch (const dist::TimeoutError& again) {
        std::cout << "rank 0 then: " << again.what() << std::endl;
      }
      return 3;
    }
    std::cout << "rank 0: the all_reduce completed, which it must not\n";
    return 0;
  }
  std::cerr << "dist_failures: mode must be throw or timeout, got '" << mode << "'\n";
  return 2;
}
