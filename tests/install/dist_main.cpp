// A user's data-parallel program against the installed tapegrad::dist: run alone (a group of one)
// and under mpirun by tests/install/run_install_test.cmake. Exits non-zero unless the replicas'
// gradients are the mean of the ranks' own.
#include <tapegrad/dist/dist.h>
#include <tapegrad/nn/nn.h>

#include <cmath>
#include <iostream>

using namespace tapegrad;

int main() {
  dist::ProcessGroup world = dist::init();
  manual_seed(1);
  nn::Linear model(3, 1);
  dist::DistributedDataParallel ddp(model, world);
  // Rank r's input is r + 1 in every entry, so the mean gradient of the weight is (size + 1) / 2.
  const Tensor x = full({1, 3}, world.rank() + 1.0);
  ddp(x).sum().backward();
  const double expected = (world.size() + 1) / 2.0;
  for (double g : model->weight().grad().to_vector<double>())
    if (std::abs(g - expected) > 1e-6) {
      std::cerr << "dist_consumer: rank " << world.rank() << " gradient " << g << ", expected " << expected << "\n";
      return 1;
    }
  if (world.rank() == 0) std::cout << "dist_consumer: " << world.size() << " process(es), gradients averaged\n";
  return 0;
}
