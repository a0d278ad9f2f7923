// DataParallel over tapegrad::dist when the build has it (TAPEGRAD_EXAMPLES_DIST), one process otherwise.
#include "examples/common/data_parallel.h"

#include <cstdlib>
#include <iostream>
#include <string>

#include "tapegrad/autograd/error.h"
#if TAPEGRAD_EXAMPLES_DIST
#include "tapegrad/dist/dist.h"
#endif

namespace tapegrad::examples {

DataParallel DataParallel::from_environment() {
  DataParallel parallel;
#if TAPEGRAD_EXAMPLES_DIST
  const auto group = std::make_shared<dist::ProcessGroup>(dist::init());
  parallel.rank_ = group->rank();
  parallel.size_ = group->size();
  parallel.replicas_ = dist::replicas(*group);
  parallel.group_ = group;
#else
  if (std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr && std::atoi(std::getenv("OMPI_COMM_WORLD_SIZE")) > 1)
    throw ValueError("started by mpirun, but this build has no tapegrad::dist (install libopenmpi-dev and rebuild)");
#endif
  return parallel;
}

DataParallel::~DataParallel() {
  if (size_ == 1 || std::uncaught_exceptions() <= uncaught_) return;
#if TAPEGRAD_EXAMPLES_DIST
  std::cerr << "rank " << rank_ << " of " << size_ << " failed; ending the job\n";
  static_cast<const dist::ProcessGroup*>(group_.get())->abort(1);
#endif
}

void DataParallel::replicate(const nn::Module& model) {
#if TAPEGRAD_EXAMPLES_DIST
  const auto& group = *static_cast<const dist::ProcessGroup*>(group_.get());
  if (group.size() == 1) return;
  dist::sync_module_state(model, group);
  reducer_ =
      std::make_shared<dist::GradientReducer>(model.named_parameters(), group, dist::DistributedDataParallelOptions());
#else
  (void)model;
#endif
}

Tensor DataParallel::share(const Tensor& global) const {
  if (size_ == 1) return global;
  const std::int64_t rows = global.size(0);
  if (rows % size_ != 0)
    throw ValueError("data parallelism: a global batch of " + std::to_string(rows) + " rows does not divide among " +
                     std::to_string(size_) + " processes");
  const std::int64_t share = rows / size_;
  return global.narrow(0, rank_ * share, share);
}

void DataParallel::barrier() const {
  if (replicas_.barrier) replicas_.barrier();
}

}  // namespace tapegrad::examples
