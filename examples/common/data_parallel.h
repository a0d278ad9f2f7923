#pragma once
// Data parallelism for the experiments: started under mpirun (and with tapegrad::dist built) a
// program trains on every process, each on its share of the global batch, with the gradients
// averaged in every backward; started alone, the same calls describe one process and do nothing.
//
//   examples::DataParallel parallel = examples::DataParallel::from_environment();
//   parallel.replicate(*model);                     // rank 0's weights, gradient averaging
//   options.replicas = parallel.replicas();          // the Trainer: rank 0 writes, every rank stops together
//   Tensor rows = parallel.share(batch.input);       // this rank's rows of the global batch
//   if (parallel.is_main()) write_summary(...);
//
// Programs that step row-sparse tables themselves (word2vec, GloVe) exchange their gradients'
// rows instead (gather_sparse_grads) and sum their statistics (all_reduce_sum).

#include <exception>
#include <memory>

#include "tapegrad/autograd/tensor.h"
#include "tapegrad/nn/module.h"
#include "tapegrad/train/trainer.h"

namespace tapegrad::examples {

class DataParallel {
 public:
  DataParallel() = default;
  DataParallel(const DataParallel&) = default;
  DataParallel& operator=(const DataParallel&) = default;
  // Left by an exception on one of several processes, ends the whole job (the others would wait for
  // this one in their next collective).
  ~DataParallel();

  // The job's processes under an MPI launcher when tapegrad::dist is built; one process otherwise
  // (and a clear error when launched by mpirun without tapegrad::dist).
  static DataParallel from_environment();

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool is_main() const { return rank_ == 0; }
  // What the Trainer needs (train::Replicas); the default (one process) without dist.
  train::Replicas replicas() const { return replicas_; }
  // Gives every rank rank 0's weights and averages the gradients of `model` over the ranks in every
  // backward from now on. Nothing for one process.
  void replicate(const nn::Module& model);
  // Rows [rank * n / size, (rank + 1) * n / size) of a global batch's first axis; ValueError unless the
  // rows divide evenly.
  Tensor share(const Tensor& global) const;
  // Every rank waits for the others.
  void barrier() const;
  // `t` summed element-wise over the ranks, in place on every rank. Nothing for one process.
  void all_reduce_sum(const Tensor& t) const;
  // Row-sparse gradients over the ranks: each leaf's gradient becomes the rows every rank holds of
  // it, in rank order (a rank without one adds none; duplicates stay, so they add up when applied).
  // A model whose ranks split a batch in order then steps exactly as one process on the whole batch.
  // The leaves are 2-D tables of one dtype; ValueError naming the leaf's position for another shape
  // or dtype, or a dense gradient (for one process too, which otherwise keeps its rows as they are).
  void gather_sparse_grads(const TensorList& leaves) const;

 private:
  int uncaught_ = std::uncaught_exceptions();
  int rank_ = 0;
  int size_ = 1;
  train::Replicas replicas_;
  std::shared_ptr<void> group_;    // dist::ProcessGroup when built with dist
  std::shared_ptr<void> reducer_;  // dist::GradientReducer, once replicate() ran
};

}  // namespace tapegrad::examples
