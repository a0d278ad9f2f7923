// DistributedDataParallel's gradient reduction: the bucket layout, the hooks that start each
// bucket's all-reduce once its gradients are complete, and the end-of-backward wait.
#include "tapegrad/dist/ddp.h"

#include <algorithm>
#include <chrono>
#include <functional>

#include "tapegrad/autograd/graph.h"
#include "tapegrad/io/hash.h"

namespace tapegrad::dist {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// A hash (FNV-1a) of the parameters' names, shapes and dtypes: equal on every rank when the replicas are
// the same model.
std::int64_t layout_hash(const NamedTensors& parameters) {
  io::Fnv1a h;
  for (const auto& [name, tensor] : parameters) {
    h.add(name);
    for (std::int64_t d : tensor.shape()) h.add(static_cast<std::uint64_t>(d));
    h.add(static_cast<std::uint64_t>(tensor.dtype()));
  }
  return static_cast<std::int64_t>(h.value() >> 1);
}

// ValueError on every rank unless every rank's tensors have the same names, shapes and dtypes.
void check_same_layout(const NamedTensors& tensors, const ProcessGroup& group, const char* what) {
  const double hash = static_cast<double>(layout_hash(tensors) % (std::int64_t{1} << 52));  // exact in a double
  const double low = group.all_reduce(hash, ReduceOp::Min);
  const double high = group.all_reduce(hash, ReduceOp::Max);
  if (low != hash || high != hash)
    throw ValueError(message("DistributedDataParallel: rank ", group.rank(), "'s model differs from another rank's (",
                             what, ": names, shapes or dtypes); every rank must build the same model"));
}

}  // namespace

struct GradientReducer::State : std::enable_shared_from_this<GradientReducer::State> {
  struct Param {
    std::string name;
    Tensor tensor;
    int bucket = 0;
    std::int64_t offset = 0;  // in elements, into the bucket's buffer
    bool ready = false;       // its gradient for this backward is complete
  };
  struct Bucket {
    std::vector<int> params;  // indices into Param, in layout order
    Tensor buffer;            // (elements) of the bucket's dtype
    int pending = 0;          // parameters whose gradient is not complete yet
    Work work;
  };

  ProcessGroup group;
  DistributedDataParallelOptions options;
  std::vector<Param> params;  // reverse registration order
  std::vector<Bucket> buckets;
  std::vector<RemovableHandle> hooks;
  int next_launch = 0;
  int no_sync = 0;
  bool in_backward = false;
  std::string failed;  // why the reducer can no longer be used, or empty
  Clock::time_point first_launch, backward_end;
  bool launched_any = false;
  Timing timing;

  void check_usable() const {
    if (!failed.empty()) throw GraphError(message("DistributedDataParallel: rank ", group.rank(), ": ", failed));
  }

  // A parameter's gradient is complete for this backward (its post-accumulate-grad hook).
  void mark_ready(int index) {
    check_usable();
    if (no_sync > 0) return;
    if (!in_backward) begin_backward();
    Param& p = params[index];
    if (p.ready)
      throw GraphError(message("DistributedDataParallel: the gradient of ", p.name,
                               " was accumulated twice in one backward; each parameter's gradient may be reduced once "
                               "per backward"));
    p.ready = true;
    if (--buckets[p.bucket].pending == 0) launch_ready();
    // Gives MPI a chance to progress the reductions already started.
    for (int b = 0; b < next_launch; ++b) buckets[b].work.is_completed();
  }

  void begin_backward() {
    in_backward = true;
    next_launch = 0;
    launched_any = false;
    for (Param& p : params) p.ready = false;
    for (Bucket& b : buckets) b.pending = static_cast<int>(b.params.size());
    // Runs finish() at the end of this backward; if the backward throws first, the callback is
    // dropped unrun and the reducer stops (reductions may be in flight that the other ranks match).
    struct Watch {
      std::weak_ptr<State> state;
      bool ran = false;
      ~Watch() {
        if (ran) return;
        if (auto s = state.lock()) {
          s->in_backward = false;
          s->failed =
              "a backward threw after gradient reduction had started, so this replica may differ from the others";
        }
      }
    };
    auto watch = std::make_shared<Watch>();
    watch->state = weak_from_this();
    autograd::queue_callback([watch] {
      watch->ran = true;
      if (auto s = watch->state.lock()) s->finish();
    });
  }

  // Starts the reductions of the complete buckets that come next in index order.
  void launch_ready() {
    while (next_launch < static_cast<int>(buckets.size()) && buckets[next_launch].pending == 0) launch(next_launch++);
  }

  void launch(int index) {
    Bucket& bucket = buckets[index];
    if (group.size() == 1) return;  // the mean over one rank is the gradient itself
    NoGradGuard no_grad;
    for (int i : bucket.params) {
      const Param& p = params[i];
      Tensor slot = bucket.buffer.narrow(0, p.offset, p.tensor.numel());
      if (p.tensor.has_sparse_grad())
        throw TypeError(
            message("DistributedDataParallel: ", p.name,
                    " has a row-sparse gradient, which is not reduced; use a dense embedding (sparse=false) "
                    "under data parallelism"));
      const Tensor grad = p.tensor.grad();
      if (grad.defined()) slot.copy_(grad.reshape({p.tensor.numel()}));
      else slot.zero_();  // an unused parameter (find_unused_parameters): a zero gradient from this rank
    }
    if (!launched_any) {
      launched_any = true;
      first_launch = Clock::now();
    }
    bucket.work = group.all_reduce_async(bucket.buffer, ReduceOp::Mean);
  }

  // The end of a synchronised backward: the remaining buckets, the waits, the means into .grad.
  void finish() {
    in_backward = false;
    backward_end = Clock::now();
    std::vector<std::string> missing;
    for (Param& p : params) {
      if (p.ready) continue;
      if (options.find_unused_parameters) {
        p.ready = true;
        --buckets[p.bucket].pending;
      } else {
        missing.push_back(p.name);
      }
    }
    if (!missing.empty()) {
      std::string names;
      for (std::size_t i = 0; i < missing.size(); ++i) names += (i ? ", " : "") + missing[i];
      failed = message(missing.size(), " parameter(s) got no gradient in a backward: ", names,
                       ". Every rank must reduce every parameter: pass find_unused_parameters=true when some "
                       "parameters are unused in some steps, or stop them requiring grad");
      check_usable();
    }
    launch_ready();
    NoGradGuard no_grad;
    if (group.size() == 1) {
      // Nothing was reduced; an unused parameter (find_unused_parameters) gets the zero gradient it counted as.
      for (const Param& p : params)
        if (!p.tensor.has_sparse_grad() && !p.tensor.grad().defined()) p.tensor.set_grad(zeros_like(p.tensor));
      timing = Timing{};
      return;
    }
    std::int64_t bytes = 0;
    for (Bucket& bucket : buckets) {
      bucket.work.wait();
      bytes += bucket.buffer.numel() * static_cast<std::int64_t>(element_size(bucket.buffer.dtype()));
      for (int i : bucket.params) {
        const Param& p = params[i];
        Tensor mean = bucket.buffer.narrow(0, p.offset, p.tensor.numel()).view(p.tensor.shape());
        const Tensor grad = p.tensor.grad();
        if (grad.defined()) grad.copy_(mean);
        else p.tensor.set_grad(mean.clone());
      }
    }
    const Clock::time_point done = Clock::now();
    // Buckets first started here (after backward's own work) overlapped nothing.
    timing.overlapped_s = launched_any ? std::max(0.0, seconds_between(first_launch, backward_end)) : 0.0;
    timing.waited_s = seconds_between(backward_end, done);
    timing.bytes = bytes;
  }
};

GradientReducer::GradientReducer(NamedTensors parameters, ProcessGroup group, DistributedDataParallelOptions options)
    : state_(std::make_shared<State>()) {
  State& s = *state_;
  if (!(options.bucket_cap_mb > 0) || !(options.first_bucket_cap_mb > 0))
    throw ValueError(message("DistributedDataParallel: bucket_cap_mb and first_bucket_cap_mb must be > 0, got ",
                             options.bucket_cap_mb, " and ", options.first_bucket_cap_mb));
  s.group = std::move(group);
  s.options = options;

  NamedTensors trained;
  for (auto& [name, tensor] : parameters)
    if (tensor.requires_grad()) trained.emplace_back(name, tensor);
  // Every replica must lay out the same buckets, or the ranks would reduce mismatched buffers.
  check_same_layout(trained, s.group, "parameters that require grad");

  // Reverse registration order, cut into buckets by size and dtype.
  const auto cap_bytes = [&](std::size_t bucket) {
    return static_cast<std::int64_t>((bucket == 0 ? options.first_bucket_cap_mb : options.bucket_cap_mb) * 1024 * 1024);
  };
  const auto bucket_dtype = [&s](const State::Bucket& b) { return s.params[b.params.front()].tensor.dtype(); };
  std::int64_t bucket_bytes = 0;
  for (auto it = trained.rbegin(); it != trained.rend(); ++it) {
    const Tensor& tensor = it->second;
    const std::int64_t bytes = tensor.numel() * static_cast<std::int64_t>(element_size(tensor.dtype()));
    const bool new_bucket = s.buckets.empty() || bucket_bytes >= cap_bytes(s.buckets.size() - 1) ||
                            bucket_dtype(s.buckets.back()) != tensor.dtype();
    if (new_bucket) {
      s.buckets.emplace_back();
      bucket_bytes = 0;
    }
    State::Param p;
    p.name = it->first;
    p.tensor = tensor;
    p.bucket = static_cast<int>(s.buckets.size()) - 1;
    p.offset = bucket_bytes / static_cast<std::int64_t>(element_size(tensor.dtype()));
    s.buckets.back().params.push_back(static_cast<int>(s.params.size()));
    s.params.push_back(std::move(p));
    bucket_bytes += bytes;
  }
  for (State::Bucket& bucket : s.buckets) {
    const State::Param& last = s.params[bucket.params.back()];
    bucket.buffer = zeros({last.offset + last.tensor.numel()}, last.tensor.dtype());
  }
  for (std::size_t i = 0; i < s.params.size(); ++i) {
    std::weak_ptr<State> weak = state_;
    const int index = static_cast<int>(i);
    s.hooks.push_back(s.params[i].tensor.register_post_accumulate_grad_hook([weak, index](const Tensor&) {
      if (auto state = weak.lock()) state->mark_ready(index);
    }));
  }
}

GradientReducer::~GradientReducer() {
  for (RemovableHandle& hook : state_->hooks) hook.remove();
}

std::vector<std::vector<std::string>> GradientReducer::buckets() const {
  std::vector<std::vector<std::string>> out;
  for (const State::Bucket& bucket : state_->buckets) {
    out.emplace_back();
    for (int i : bucket.params) out.back().push_back(state_->params[i].name);
  }
  return out;
}

void GradientReducer::enter_no_sync() { ++state_->no_sync; }
void GradientReducer::exit_no_sync() { --state_->no_sync; }
bool GradientReducer::syncing() const { return state_->no_sync == 0; }
GradientReducer::Timing GradientReducer::last_timing() const { return state_->timing; }

namespace {

void broadcast_all(const NamedTensors& tensors, const ProcessGroup& group) {
  if (group.size() == 1) return;
  NoGradGuard no_grad;
  std::vector<Work> works;
  for (const auto& [name, tensor] : tensors) {
    if (!tensor.is_contiguous())
      throw ValueError(message("DistributedDataParallel: ", name, " is not contiguous and cannot be broadcast"));
    works.push_back(group.broadcast_async(tensor, 0));
  }
  for (Work& work : works) work.wait();
}

}  // namespace

void sync_module_state(const nn::Module& module, const ProcessGroup& group) {
  NamedTensors tensors = module.named_parameters();
  for (auto& entry : module.named_buffers()) tensors.push_back(std::move(entry));
  check_same_layout(tensors, group, "parameters and buffers");
  broadcast_all(tensors, group);
}

void broadcast_buffers(const nn::Module& module, const ProcessGroup& group) {
  broadcast_all(module.named_buffers(), group);
}

}  // namespace tapegrad::dist
