// ProcessGroup over MPI: initialisation from the launcher's environment, the collectives as
// non-blocking MPI calls waited for with a deadline, and the end of the job.
#include "tapegrad/dist/process_group.h"

#define OMPI_SKIP_MPICXX 1  // the C API only: MPI's deprecated C++ bindings are not used
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>
#include <mutex>
#include <thread>

#include "tapegrad/autograd/graph.h"
#include "tapegrad/autograd/parallel.h"
#include "tapegrad/io/hash.h"

namespace tapegrad::dist {

namespace {

// The MPI datatype and operation for a dtype and a reduction (Mean reduces as Sum, then divides).
MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::Float32:
      return MPI_FLOAT;
    case DType::Float64:
      return MPI_DOUBLE;
    case DType::Int64:
      return MPI_INT64_T;
    case DType::Bool:
      return MPI_UINT8_T;  // one byte, 0 or 1: max is a logical or, min a logical and
    case DType::BFloat16:
      return MPI_UINT16_T;  // moved as bits: broadcast and all_gather only (mpi_op refuses reductions)
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpi_op(ReduceOp op, DType dtype, const char* name) {
  if (dtype == DType::BFloat16)
    throw TypeError(message(name, ": MPI has no bfloat16 arithmetic; reduce a float32 copy (t.to(kFloat32))"));
  if (op == ReduceOp::Mean && !is_floating(dtype))
    throw TypeError(message(name, ": ReduceOp::Mean needs a floating-point tensor, got ", dtype_name(dtype)));
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Mean:
      return dtype == DType::Bool ? MPI_MAX : MPI_SUM;
    case ReduceOp::Max:
      return MPI_MAX;
    case ReduceOp::Min:
      return MPI_MIN;
  }
  return MPI_OP_NULL;
}

void check_contiguous(const Tensor& tensor, const char* name) {
  if (!tensor.defined()) throw ValueError(message(name, ": the tensor is undefined"));
  if (!tensor.is_contiguous())
    throw ValueError(message(name, ": the tensor must be contiguous (it is written in place), got shape ",
                             tensor.shape().str(), " with strides not row-major; pass t.contiguous() and copy back"));
  if (tensor.numel() > std::numeric_limits<int>::max())
    throw ValueError(message(name, ": ", tensor.numel(), " elements is more than one MPI call takes (2^31 - 1)"));
}

void* bytes_of(const Tensor& tensor) {
  return static_cast<char*>(tensor.impl()->storage->data()) +
         tensor.offset() * static_cast<std::int64_t>(element_size(tensor.dtype()));
}

// After a collective wrote into the tensor: the engine sees an in-place write.
void mark_written(const Tensor& tensor) { tensor.impl()->storage->bump_version(); }

void divide_by(const Tensor& tensor, int size) {
  if (size == 1) return;
  if (tensor.dtype() == DType::Float32) {
    float* p = static_cast<float*>(bytes_of(tensor));
    const float scale = 1.0f / static_cast<float>(size);
    for (std::int64_t i = 0, n = tensor.numel(); i < n; ++i) p[i] *= scale;
  } else {
    double* p = static_cast<double*>(bytes_of(tensor));
    const double scale = 1.0 / size;
    for (std::int64_t i = 0, n = tensor.numel(); i < n; ++i) p[i] *= scale;
  }
}

void check_mpi(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw Error(message("dist: ", call, " failed: ", std::string(text, static_cast<std::size_t>(length))));
}

}  // namespace

const char* to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Mean:
      return "mean";
    case ReduceOp::Max:
      return "max";
    case ReduceOp::Min:
      return "min";
  }
  return "unknown";
}

bool launched_by_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"})
    if (std::getenv(name) != nullptr) return true;
  return false;
}

// ---------------------------------------------------------------- the group's state

struct ProcessGroup::Impl {
  MPI_Comm comm = MPI_COMM_NULL;  // MPI_COMM_NULL: a group of one without MPI
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  std::chrono::milliseconds timeout{};
  std::string broken;  // why the group can no longer be used (a timed-out collective), or empty
  // What pending collectives that timed out read or write (buffers, requests): MPI may still touch
  // them, so they are kept until the process ends (MPI_Abort at exit, the group being broken).
  std::vector<std::shared_ptr<void>> abandoned;

  void check_usable(const std::string& name) const {
    if (!broken.empty()) throw TimeoutError(message(name, ": rank ", rank, " cannot use the process group: ", broken));
  }

  // Waits for `request` with the group's deadline, letting MPI progress; on timeout the group is
  // broken, `keep` (what the collective reads and writes) is kept alive, and TimeoutError names the
  // collective. On a broken group, throws at once.
  void wait(MPI_Request& request, const std::string& name, std::shared_ptr<void> keep = nullptr) {
    check_usable(name);
    const auto start = std::chrono::steady_clock::now();
    int done = 0;
    for (std::uint64_t polls = 0;; ++polls) {
      check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done) return;
      if ((polls & 63) == 63 && std::chrono::steady_clock::now() - start > timeout) {
        if (keep) abandoned.push_back(std::move(keep));
        broken = message(name, " did not complete within ", timeout.count(), " ms");
        throw TimeoutError(message(name, ": rank ", rank, " of ", size, " waited ", timeout.count(),
                                   " ms and the collective did not complete (has another rank failed, or "
                                   "skipped or reordered a collective?); the process group is now unusable"));
      }
      std::this_thread::yield();
    }
  }
};

ProcessGroup::Impl& ProcessGroup::checked() const {
  if (!impl_) throw ValueError("ProcessGroup: the group is undefined (use dist::init())");
  return *impl_;
}

int ProcessGroup::rank() const { return checked().rank; }
int ProcessGroup::size() const { return checked().size; }
int ProcessGroup::local_rank() const { return checked().local_rank; }
int ProcessGroup::local_size() const { return checked().local_size; }
bool ProcessGroup::uses_mpi() const { return checked().comm != MPI_COMM_NULL; }
std::chrono::milliseconds ProcessGroup::timeout() const { return checked().timeout; }
void ProcessGroup::set_timeout(std::chrono::milliseconds timeout) const {
  if (timeout.count() <= 0)
    throw ValueError(message("ProcessGroup::set_timeout: must be > 0 ms, got ", timeout.count()));
  checked().timeout = timeout;
}

// ---------------------------------------------------------------- asynchronous work

struct Work::State {
  std::shared_ptr<ProcessGroup::Impl> group;
  MPI_Request request = MPI_REQUEST_NULL;
  Tensor tensor;        // kept alive while MPI writes into it
  bool divide = false;  // ReduceOp::Mean: divide by the group size once complete
  std::string name;     // for errors: "all_reduce_async(mean) of (3,4) float32"
  bool finished = false;

  void finish() {
    if (finished) return;
    finished = true;
    if (divide) divide_by(tensor, group->size);
    mark_written(tensor);
  }
};

Work::Work() = default;
Work::Work(std::unique_ptr<State> state) : state_(std::move(state)) {}
Work::Work(Work&&) noexcept = default;
namespace {

// Waits for an unwaited collective before its state goes; on a broken group (or a timeout now) the
// state is kept until exit instead, as MPI may still write into its tensor.
void settle(std::unique_ptr<Work::State>& state) noexcept;

}  // namespace

Work& Work::operator=(Work&& other) noexcept {
  if (this != &other) {
    settle(state_);
    state_ = std::move(other.state_);
  }
  return *this;
}
Work::~Work() { settle(state_); }

namespace {

void settle(std::unique_ptr<Work::State>& state) noexcept {
  if (!state || state->finished) return;
  ProcessGroup::Impl& group = *state->group;
  if (group.broken.empty() && state->request != MPI_REQUEST_NULL) {
    try {
      group.wait(state->request, state->name);
      state->finish();
      return;
    } catch (const std::exception&) {
      // Timed out now: kept below.
    }
  }
  if (state->request == MPI_REQUEST_NULL) {
    state->finish();
    return;
  }
  group.abandoned.push_back(std::shared_ptr<Work::State>(state.release()));
}

}  // namespace

bool Work::is_completed() {
  if (!state_) return true;
  if (state_->finished) return true;
  if (state_->request != MPI_REQUEST_NULL) {
    int done = 0;
    check_mpi(MPI_Test(&state_->request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (!done) return false;
  }
  state_->finish();
  return true;
}

void Work::wait() {
  if (!state_ || state_->finished) return;
  if (state_->request != MPI_REQUEST_NULL) {
    try {
      state_->group->wait(state_->request, state_->name);
    } catch (const TimeoutError&) {
      // MPI may still write into the tensor: the state stays alive until exit.
      ProcessGroup::Impl& group = *state_->group;
      group.abandoned.push_back(std::shared_ptr<State>(state_.release()));
      throw;
    }
  }
  state_->finish();
}

// ---------------------------------------------------------------- collectives

namespace {

std::string describe(const char* name, const Tensor& tensor) {
  return message(name, " of ", tensor.shape().str(), " ", dtype_name(tensor.dtype()));
}

}  // namespace

Work ProcessGroup::all_reduce_async(const Tensor& tensor, ReduceOp op) const {
  Impl& group = checked();
  group.check_usable("all_reduce");
  check_contiguous(tensor, "all_reduce");
  auto state = std::make_unique<Work::State>();
  state->group = impl_;
  state->tensor = tensor;
  state->divide = op == ReduceOp::Mean;
  state->name = describe(op == ReduceOp::Mean ? "all_reduce(mean)" : "all_reduce", tensor);
  const MPI_Op reduce = mpi_op(op, tensor.dtype(), "all_reduce");
  if (group.comm != MPI_COMM_NULL && tensor.numel() > 0)
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, bytes_of(tensor), static_cast<int>(tensor.numel()), mpi_type(tensor.dtype()),
                             reduce, group.comm, &state->request),
              "MPI_Iallreduce");
  return Work(std::move(state));
}

void ProcessGroup::all_reduce(const Tensor& tensor, ReduceOp op) const { all_reduce_async(tensor, op).wait(); }

double ProcessGroup::all_reduce(double value, ReduceOp op) const {
  Tensor t = full({1}, value, kFloat64);
  all_reduce(t, op);
  return t.item();
}

Work ProcessGroup::broadcast_async(const Tensor& tensor, int root) const {
  Impl& group = checked();
  group.check_usable("broadcast");
  check_contiguous(tensor, "broadcast");
  if (root < 0 || root >= group.size)
    throw ValueError(message("broadcast: root ", root, " is not a rank of a group of ", group.size));
  auto state = std::make_unique<Work::State>();
  state->group = impl_;
  state->tensor = tensor;
  state->name = describe("broadcast", tensor);
  if (group.comm != MPI_COMM_NULL && tensor.numel() > 0)
    check_mpi(MPI_Ibcast(bytes_of(tensor), static_cast<int>(tensor.numel()), mpi_type(tensor.dtype()), root, group.comm,
                         &state->request),
              "MPI_Ibcast");
  return Work(std::move(state));
}

void ProcessGroup::broadcast(const Tensor& tensor, int root) const { broadcast_async(tensor, root).wait(); }

void ProcessGroup::barrier() const {
  Impl& group = checked();
  group.check_usable("barrier");
  if (group.comm == MPI_COMM_NULL) return;
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Ibarrier(group.comm, &request), "MPI_Ibarrier");
  group.wait(request, "barrier");
}

Tensor ProcessGroup::all_gather(const Tensor& tensor) const {
  Impl& group = checked();
  group.check_usable("all_gather");
  if (!tensor.defined()) throw ValueError("all_gather: the tensor is undefined");
  const Tensor local = tensor.detach().contiguous();
  check_contiguous(local, "all_gather");
  Shape shape = tensor.shape();
  shape.insert(0, group.size);
  Tensor out = empty(shape, tensor.dtype());
  const std::size_t bytes = static_cast<std::size_t>(local.numel()) * element_size(local.dtype());
  if (group.comm == MPI_COMM_NULL) {
    if (bytes > 0) std::memcpy(bytes_of(out), bytes_of(local), bytes);
    return out;
  }
  // Every rank's shape and dtype must match, or MPI would read past the buffers: a fixed-size record
  // of them (the same count on every rank, empty tensors included) is compared first. What MPI reads
  // and writes lives in one heap block, kept alive if a wait times out.
  struct Buffers {
    std::int64_t here[4], lowest[4], highest[4];
    Tensor local, out;
  };
  auto buffers = std::make_shared<Buffers>();
  io::Fnv1a shape_hash;
  for (std::int64_t d : tensor.shape()) shape_hash.add(static_cast<std::uint64_t>(d));
  const std::int64_t record[4] = {tensor.dim(), static_cast<std::int64_t>(tensor.dtype()), tensor.numel(),
                                  static_cast<std::int64_t>(shape_hash.value() >> 1)};
  std::copy(record, record + 4, buffers->here);
  buffers->local = local;
  buffers->out = out;
  MPI_Request low = MPI_REQUEST_NULL, high = MPI_REQUEST_NULL;
  check_mpi(MPI_Iallreduce(buffers->here, buffers->lowest, 4, MPI_INT64_T, MPI_MIN, group.comm, &low),
            "MPI_Iallreduce");
  group.wait(low, "all_gather (shape check)", buffers);
  check_mpi(MPI_Iallreduce(buffers->here, buffers->highest, 4, MPI_INT64_T, MPI_MAX, group.comm, &high),
            "MPI_Iallreduce");
  group.wait(high, "all_gather (shape check)", buffers);
  if (!std::equal(record, record + 4, buffers->lowest) || !std::equal(record, record + 4, buffers->highest))
    throw ShapeError(message("all_gather: the ranks' tensors differ in shape or dtype (rank ", group.rank, " has ",
                             tensor.shape().str(), " ", dtype_name(tensor.dtype()),
                             "; the ranks' element counts range from ", buffers->lowest[2], " to ", buffers->highest[2],
                             ")"));
  if (local.numel() > 0) {
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Iallgather(bytes_of(local), static_cast<int>(local.numel()), mpi_type(local.dtype()), bytes_of(out),
                             static_cast<int>(local.numel()), mpi_type(local.dtype()), group.comm, &request),
              "MPI_Iallgather");
    group.wait(request, describe("all_gather", tensor), buffers);
  }
  return out;
}

void ProcessGroup::abort(int exit_code) const {
  Impl& group = checked();
  std::cout.flush();
  std::cerr.flush();
  if (group.comm != MPI_COMM_NULL) MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::exit(exit_code);
}

// ---------------------------------------------------------------- the world group

namespace {

std::mutex world_mutex;
std::shared_ptr<ProcessGroup::Impl>& world_slot() {
  static auto* world = new std::shared_ptr<ProcessGroup::Impl>();  // lives until exit (finalize_at_exit)
  return *world;
}

// At exit: MPI_Finalize for a healthy group; MPI_Abort for a broken one, whose peers may be waiting
// on a collective that will never complete (Finalize would wait for them).
void finalize_at_exit() {
  const std::shared_ptr<ProcessGroup::Impl>& world = world_slot();
  if (!world || world->comm == MPI_COMM_NULL) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (!world->broken.empty()) MPI_Abort(MPI_COMM_WORLD, 1);
  MPI_Finalize();
}

// This process's share of its node's CPUs: what the launcher bound it to, or, unbound, the node's CPUs
// divided by the group's processes on the node.
int cpu_share(int local_size) {
  const int hardware = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  cpu_set_t set;
  CPU_ZERO(&set);
  const int allowed = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : hardware;
  if (allowed < hardware) return std::max(1, allowed);
  return std::max(1, hardware / local_size);
}

}  // namespace

ProcessGroup init(const InitOptions& options) {
  std::lock_guard<std::mutex> lock(world_mutex);
  std::shared_ptr<ProcessGroup::Impl>& world = world_slot();
  if (world) return ProcessGroup(world);
  if (options.timeout.count() <= 0)
    throw ValueError(message("dist::init: timeout must be > 0 ms, got ", options.timeout.count()));
  auto impl = std::make_shared<ProcessGroup::Impl>();
  impl->timeout = options.timeout;
  if (launched_by_mpi()) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
      if (provided < MPI_THREAD_SERIALIZED)
        throw Error(message("dist::init: this MPI provides thread level ", provided,
                            ", below MPI_THREAD_SERIALIZED (the pool's threads call into a process that uses MPI)"));
      std::atexit(finalize_at_exit);
    }
    // Errors come back as codes (check_mpi turns them into exceptions) instead of aborting inside MPI.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    impl->comm = MPI_COMM_WORLD;
    MPI_Comm_rank(impl->comm, &impl->rank);
    MPI_Comm_size(impl->comm, &impl->size);
    MPI_Comm node = MPI_COMM_NULL;
    check_mpi(MPI_Comm_split_type(impl->comm, MPI_COMM_TYPE_SHARED, impl->rank, MPI_INFO_NULL, &node),
              "MPI_Comm_split_type");
    MPI_Comm_rank(node, &impl->local_rank);
    MPI_Comm_size(node, &impl->local_size);
    MPI_Comm_free(&node);
  }
  if (options.set_threads && std::getenv("TAPEGRAD_NUM_THREADS") == nullptr)
    set_num_threads(cpu_share(impl->local_size));
  world = impl;
  return ProcessGroup(world);
}

}  // namespace tapegrad::dist
