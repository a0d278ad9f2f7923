// The examples' one-process DataParallel, the branch a build without MPI compiles (this program is
// built without TAPEGRAD_EXAMPLES_DIST even when tapegrad::dist exists): one process, the whole
// batch, nothing to replicate, the Trainer's default replicas; started as one of several mpirun
// processes, a clear error. Exits 1 with a message on the first failed check.

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "examples/common/data_parallel.h"
#include "tapegrad/nn/nn.h"

using namespace tapegrad;

namespace {

void require(bool ok, const std::string& what) {
  if (ok) return;
  std::cerr << "data_parallel_without_dist: " << what << "\n";
  std::exit(1);
}

}  // namespace

int main() {
  try {
    examples::DataParallel parallel = examples::DataParallel::from_environment();
    require(parallel.rank() == 0 && parallel.size() == 1 && parallel.is_main(), "expected rank 0 of 1");
    const Tensor batch = arange(0.0, 12.0).reshape({6, 2});
    const Tensor mine = parallel.share(batch);
    require(mine.shape() == batch.shape() && mine.to_vector<float>() == batch.to_vector<float>(),
            "one process should take the whole batch");
    nn::Linear model(3, 2);
    const std::vector<float> before = model->weight().to_vector<float>();
    parallel.replicate(*model);
    require(model->weight().to_vector<float>() == before, "replicate changed the weights of the only process");
    const train::Replicas replicas = parallel.replicas();
    require(replicas.world_size == 1 && replicas.rank == 0 && !replicas.mean && !replicas.barrier,
            "expected the Trainer's one-process replicas");
    parallel.barrier();
  } catch (const std::exception& e) {
    std::cerr << "data_parallel_without_dist: " << e.what() << "\n";
    return 1;
  }
  std::cout << "data_parallel_without_dist: one process, as without MPI\n";
  return 0;
}
