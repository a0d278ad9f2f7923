#pragma once
// ProcessGroup: the processes of a data-parallel job and the collectives between them, over MPI.
//
//   dist::ProcessGroup world = dist::init();     // under `mpirun -np 4`: rank 0..3 of 4
//   world.broadcast(t, 0);                        // every rank gets rank 0's values, in place
//   world.all_reduce(grad, dist::ReduceOp::Mean); // in place, the element-wise mean over ranks
//   Tensor all = world.all_gather(x);             // (size, *x.shape): rank r's x at all[r]
//   double loss = world.all_reduce(local_loss, dist::ReduceOp::Mean);
//
// A program started without a launcher (no mpirun) runs as a group of one, without MPI: every
// collective is then a copy. Under mpirun, init() initialises MPI once per process, and MPI is
// finalised at exit.
//
// Every collective takes part with the same arguments on every rank, in the same order (MPI's
// rule). Waiting is bounded: a collective that has not completed within the group's timeout
// throws TimeoutError naming the collective and the rank, and the group is then broken (later
// collectives throw at once, and the process calls MPI_Abort at exit instead of MPI_Finalize, so
// the launcher ends the job). A rank that dies (an uncaught exception aborts it) ends the job too:
// mpirun stops the others. A rank that catches an error the others cannot see should call abort().
//
// Threads: by default init() gives each process's pool (parallel.h) its share of the machine's
// CPUs: the CPUs this process may run on divided by the ranks on its node, unless
// TAPEGRAD_NUM_THREADS is set. Collectives are made from one thread at a time.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/tensor.h"

namespace tapegrad::dist {

// A collective that did not complete within the group's timeout, or a group broken by one.
class TimeoutError : public Error {
 public:
  using Error::Error;
};

// Sum, Mean (floating dtypes only), Max and Min, element-wise over the ranks. On bool tensors Sum
// and Max are a logical or, Min a logical and.
enum class ReduceOp { Sum, Mean, Max, Min };
const char* to_string(ReduceOp op);

struct InitOptions {
  std::chrono::milliseconds timeout = std::chrono::minutes(30);  // for each collective's wait
  bool set_threads = true;  // give the pool its share of the node's CPUs (see above)
};

// A collective started with one of the *_async calls. wait() returns once it has completed on this
// rank (its results are in place), or throws TimeoutError; a Work that goes away unwaited is waited
// for in its destructor (errors there end the job).
class Work {
 public:
  Work();
  ~Work();
  Work(Work&&) noexcept;
  Work& operator=(Work&&) noexcept;
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  bool defined() const { return state_ != nullptr; }
  // Whether the collective has completed (lets MPI make progress on it).
  bool is_completed();
  void wait();

  struct State;
  explicit Work(std::unique_ptr<State> state);

 private:
  std::unique_ptr<State> state_;
};

class ProcessGroup {
 public:
  ProcessGroup() = default;

  bool defined() const { return impl_ != nullptr; }
  int rank() const;
  int size() const;
  int local_rank() const;  // this process's index among the group's processes on its node
  int local_size() const;  // the group's processes on this node
  bool uses_mpi() const;   // false for a group of one started without a launcher
  std::chrono::milliseconds timeout() const;
  void set_timeout(std::chrono::milliseconds timeout) const;

  // Every rank waits until all have arrived.
  void barrier() const;
  // root's values into `tensor` on every rank (same shape and dtype everywhere).
  void broadcast(const Tensor& tensor, int root = 0) const;
  // `tensor` reduced element-wise over the ranks, in place on every rank.
  void all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::Sum) const;
  double all_reduce(double value, ReduceOp op = ReduceOp::Sum) const;
  // A new (size, *tensor.shape) tensor with rank r's tensor at index r.
  Tensor all_gather(const Tensor& tensor) const;
  // Ends the whole job now with exit_code (MPI_Abort; std::exit for a group without MPI). For a rank
  // that caught an error the others cannot know of: returning normally would finalise MPI, which waits
  // for ranks that are themselves waiting in their next collective.
  [[noreturn]] void abort(int exit_code = 1) const;
  // all_reduce started without waiting; `tensor` must stay alive and untouched until wait().
  Work all_reduce_async(const Tensor& tensor, ReduceOp op = ReduceOp::Sum) const;
  Work broadcast_async(const Tensor& tensor, int root = 0) const;

  struct Impl;
  explicit ProcessGroup(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

 private:
  Impl& checked() const;
  std::shared_ptr<Impl> impl_;
};

// The group of every process of the job (MPI_COMM_WORLD under a launcher; a group of one
// otherwise). Later calls return the same group (their options are ignored).
ProcessGroup init(const InitOptions& options = {});
// Whether this process was started by an MPI launcher (mpirun, mpiexec, srun with PMIx).
bool launched_by_mpi();

}  // namespace tapegrad::dist
