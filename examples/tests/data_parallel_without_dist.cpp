// The examples' one-process DataParallel, the branch a build without MPI compiles (this program is
// built without TAPEGRAD_EXAMPLES_DIST even when tapegrad::dist exists): one process, the whole
// batch, nothing to replicate, the Trainer's default replicas, sums and row-sparse gradients left
// as they are; started as one of several mpirun processes, a clear error. Exits 1 with a message on the first failed
// check.

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

    // Sums and row-sparse gradients of one process stay as they are; dense gradients and leaves
    // of another dtype are refused all the same.
    const Tensor sums = tensor({1.5, -2.0}, kFloat64);
    parallel.all_reduce_sum(sums);
    require(sums.to_vector<double>() == std::vector<double>{1.5, -2.0}, "all_reduce_sum changed one process's sums");
    const Tensor table = zeros({5, 2}).requires_grad_();
    embedding(table, tensor({3, 1, 3}, kInt64), std::nullopt, /*sparse=*/true).sum().backward();
    parallel.gather_sparse_grads({table});
    require(table.sparse_grad().nnz() == 3, "gather_sparse_grads changed one process's rows");
    const auto refused = [&](const TensorList& leaves, const std::string& expected) {
      try {
        parallel.gather_sparse_grads(leaves);
      } catch (const ValueError& e) {
        require(std::string(e.what()) == expected, std::string("gather_sparse_grads said: ") + e.what());
        return;
      }
      require(false, "gather_sparse_grads accepted " + expected);
    };
    const Tensor dense = zeros({5, 2}).requires_grad_();
    dense.sum().backward();
    refused({table, dense}, "gather_sparse_grads: leaf 1 of 2 has a dense gradient; only row-sparse ones are gathered");
    refused({table, zeros({5, 2}, kFloat64)},
            "gather_sparse_grads: leaf 1 is (5,2) float64; the leaves must be tables of one dtype, like leaf 0's "
            "float32");
  } catch (const std::exception& e) {
    std::cerr << "data_parallel_without_dist: " << e.what() << "\n";
    return 1;
  }
  std::cout << "data_parallel_without_dist: one process, as without MPI\n";
  return 0;
}
