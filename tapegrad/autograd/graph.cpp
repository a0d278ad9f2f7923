#include "tapegrad/autograd/graph.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <deque>
#include <mutex>
#include <string>

#include "tapegrad/autograd/autocast.h"
#include "tapegrad/autograd/block_pool.h"
#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/live_counts.h"
#include "tapegrad/autograd/ops.h"
#include "tapegrad/autograd/sparse_rows.h"

namespace tapegrad {

namespace {

thread_local bool grad_enabled = true;
thread_local bool anomaly_enabled = false;
std::atomic<std::uint64_t> next_sequence{0};
std::atomic<std::uint64_t> next_walk{1};
// Set once any leaf has had a hook registered: from then on a backward first counts the edges
// into hooked leaves, so that their hooks run once, on the whole gradient.
std::atomic<bool> leaf_hooks_exist{false};

// The labels in scope (AnomalyLabel), joined with dots.
thread_local std::vector<std::string> anomaly_labels;

struct SavedHooks {
  autograd::PackHook pack;
  autograd::UnpackHook unpack;
};
thread_local std::vector<SavedHooks> saved_hooks;

// The node whose backward is running on this thread (SavedTensor::unpack names it and gives it
// back to the outputs it unpacks under create_graph).
thread_local const std::shared_ptr<Node>* running_node = nullptr;
// Tensors that SavedTensor::unpack made (through an unpack hook, or an output reconnected under
// create_graph) and handed out by reference: the running backward keeps them until its node's
// backward returns. A deque, so that adding one leaves the references to the others valid.
// unpacked_count mirrors its size, so that the engine's check after each node reads a plain
// integer rather than the deque (whose thread_local access goes through an initialisation check).
thread_local std::deque<Tensor> unpacked_tensors;
thread_local std::size_t unpacked_count = 0;

Tensor& keep_unpacked(Tensor t) {
  Tensor& kept = unpacked_tensors.emplace_back(std::move(t));
  unpacked_count = unpacked_tensors.size();
  return kept;
}

// Deferred release. Destroying the last handle to a long chain would otherwise recurse once
// per node (tensor -> node -> saved tensor -> node ...) and overflow the stack. The first
// release on a thread drains a work list; releases that happen while it drains only append.
// The list is a thread_local object freed with its thread; after that (later thread_local
// destructors releasing nodes) a release frees its node directly.
thread_local bool pending_gone = false;
struct PendingReleases {
  std::vector<std::shared_ptr<Node>> nodes;
  bool draining = false;
  PendingReleases() = default;
  PendingReleases(const PendingReleases&) = delete;
  PendingReleases& operator=(const PendingReleases&) = delete;
  ~PendingReleases() { pending_gone = true; }
};

}  // namespace

namespace detail {

void release_node(std::shared_ptr<Node>&& node) {
  if (!node) return;
  if (node.use_count() > 1 || pending_gone) {  // other owners remain, or the thread is exiting
    node.reset();
    return;
  }
  thread_local PendingReleases pending;
  pending.nodes.push_back(std::move(node));
  if (pending.draining) return;
  pending.draining = true;
  while (!pending.nodes.empty()) {
    std::shared_ptr<Node> next = std::move(pending.nodes.back());
    pending.nodes.pop_back();
    next.reset();  // may append more
  }
  pending.draining = false;
}

}  // namespace detail

Node::Node() : sequence(next_sequence.fetch_add(1, std::memory_order_relaxed)) { detail::count_nodes(1); }

Node::~Node() {
  detail::count_nodes(-1);
  {
    BackwardFn closure = std::move(backward);  // saved tensors go first, through ~TensorImpl
    MultiBackwardFn multi = std::move(backward_multi);
  }
  for (Edge& edge : edges) detail::release_node(std::move(edge.node));
}

bool is_grad_enabled() { return grad_enabled; }
void set_grad_enabled(bool enabled) { grad_enabled = enabled; }

bool any_requires_grad(const std::vector<Tensor>& inputs) {
  if (!is_grad_enabled()) return false;
  return std::any_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return t.defined() && t.requires_grad(); });
}

namespace {

std::string join_labels() {
  std::string out;
  for (const std::string& label : anomaly_labels) {
    if (!out.empty()) out += '.';
    out += label;
  }
  return out;
}

std::shared_ptr<Node> make_node(const char* name, const std::vector<Tensor>& inputs) {
  auto node = std::allocate_shared<Node>(detail::BlockAllocator<Node>());
  node->name = name;
  node->edges.resize(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& in = inputs[i];
    if (!in.defined() || !in.requires_grad()) continue;
    Edge& edge = node->edges[i];
    if (in.grad_fn()) {
      edge.node = in.grad_fn();
      edge.output_nr = in.impl()->output_nr;
    } else {
      edge.leaf = in.impl_ptr();
    }
    edge.shape = in.shape();
    edge.dtype = in.dtype();
  }
  if (anomaly_enabled) node->anomaly_context = join_labels();
  return node;
}

void check_unrecorded(const char* name, const Tensor& output) {
  if (!output.defined()) throw ValueError(message(name, ": cannot record the op on an undefined output"));
  if (output.grad_fn())
    throw ValueError(
        message(name, ": cannot record the op on a tensor that already has a grad_fn (", output.grad_fn()->name, ")"));
}

}  // namespace

void record(const char* name, const Tensor& output, const std::vector<Tensor>& inputs, BackwardFn backward) {
  if (!any_requires_grad(inputs)) return;
  check_unrecorded(name, output);
  std::shared_ptr<Node> node = make_node(name, inputs);
  node->backward = std::move(backward);
  node->output = output.impl_ptr();
  output.impl()->grad_fn = std::move(node);
  output.impl()->output_nr = 0;
}

void record_multi(const char* name, const TensorList& outputs, const std::vector<Tensor>& inputs,
                  MultiBackwardFn backward) {
  if (!any_requires_grad(inputs)) return;
  if (outputs.empty()) throw ValueError(message(name, ": cannot record an op with no outputs"));
  for (const Tensor& out : outputs) check_unrecorded(name, out);
  for (std::size_t i = 0; i < outputs.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (outputs[i].impl() == outputs[j].impl())
        throw ValueError(message(name, ": outputs ", j, " and ", i, " are the same tensor"));
  std::shared_ptr<Node> node = make_node(name, inputs);
  node->backward_multi = std::move(backward);
  node->num_outputs = static_cast<int>(outputs.size());
  node->output = outputs[0].impl_ptr();
  node->extra_accum.resize(outputs.size() - 1);
  for (std::size_t k = 1; k < outputs.size(); ++k) node->extra_outputs.emplace_back(outputs[k].impl_ptr());
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    outputs[k].impl()->grad_fn = node;
    outputs[k].impl()->output_nr = static_cast<int>(k);
  }
}

// ---------------------------------------------------------------- saved tensors

namespace {

struct HookedTensor {
  std::shared_ptr<void> packed;
  autograd::UnpackHook unpack;
};

std::string running_op() {
  return running_node != nullptr ? std::string("backward of ") + (*running_node)->name : std::string("backward");
}

}  // namespace

SavedTensor::SavedTensor(const Tensor& t, bool is_output) : is_output_(is_output) {
  if (!t.defined()) return;
  defined_ = true;
  version_ = t.impl()->storage->version();
  if (!saved_hooks.empty()) {
    // Copied: the hook may register further guards while it runs.
    const SavedHooks hooks = saved_hooks.back();
    storage_ = t.impl()->storage;
    auto hooked = std::make_shared<HookedTensor>();
    hooked->unpack = hooks.unpack;
    hooked->packed = hooks.pack(is_output ? t.detach() : t);
    hooked_ = std::move(hooked);
    return;
  }
  data_ = is_output ? t.detach() : t;
}

const Tensor& SavedTensor::unpack() const {
  if (!defined_) {
    static const Tensor undefined;  // initialised here, off the common path's way
    return undefined;
  }
  if (!hooked_) return checked(data_, data_.impl()->storage.get());  // the common case: no reference counting
  const auto& hooked = *static_cast<const HookedTensor*>(hooked_.get());
  if (running_node == nullptr)
    throw GraphError(
        "SavedTensor::unpack: a tensor packed by a saved-tensor hook is unpacked only on the thread running a "
        "backward");
  const Tensor& t = keep_unpacked(hooked.unpack(hooked.packed));
  if (!t.defined()) throw GraphError(running_op() + ": a saved-tensor unpack hook returned an undefined tensor");
  const std::shared_ptr<Storage> storage = storage_.lock();  // gone: nothing can have written to it
  return checked(t, storage.get());
}

const Tensor& SavedTensor::checked(const Tensor& t, const Storage* storage) const {
  if (storage && storage->version() != version_)
    throw GraphError(message(running_op(),
                             ": one of the variables needed for gradient computation has been modified by an inplace "
                             "operation: a tensor of shape ",
                             t.shape().str(), " saved at version ", version_, " is now at version ", storage->version(),
                             " (an in-place write between the forward and the backward, such as an optimiser step, "
                             "fill_, copy_, add_ or mul_; write into a clone instead)"));
  if (is_output_ && grad_enabled && running_node != nullptr) {
    // create_graph: the output is connected to the node again, for the duration of this backward.
    Tensor& connected =
        keep_unpacked(detail::make_tensor(t.impl()->storage, t.shape(), t.strides(), t.offset(), t.dtype()));
    connected.impl()->grad_fn = *running_node;
    connected.impl()->output_nr = output_nr_;
    return connected;
  }
  return t;
}

// ---------------------------------------------------------------- the engine

namespace {

// True when nothing else can see t's buffer, so it may be reused or written in place.
bool exclusively_owned(const Tensor& t) {
  // A view's base shares the storage too; it counts as the view's own when nothing else holds it.
  const TensorImpl& impl = *t.impl();
  const long base_owns = impl.view_base && impl.view_base.use_count() == 1 && impl.view_base->storage == impl.storage;
  return t.impl_ptr().use_count() == 1 && impl.storage.use_count() == 1 + base_owns && t.is_contiguous() &&
         !t.requires_grad();
}

// Sets or adds to a .grad. grad is taken by value: a gradient the caller moves in is exclusively
// owned and is kept without a copy. Under create_graph a gradient that is taped is kept as it is,
// and sums are taped too.
void add_to_grad(TensorImpl& impl, Tensor grad) {  // NOLINT(performance-unnecessary-value-param)
  if (impl.sparse_grad) {                          // used densely too: the gradient becomes dense
    grad = grad + impl.sparse_grad->to_dense();
    impl.sparse_grad.reset();
  }
  if (!impl.grad) {
    impl.grad = exclusively_owned(grad) || grad.requires_grad() ? grad.impl_ptr() : grad.clone().impl_ptr();
  } else if (grad_enabled && (grad.requires_grad() || impl.grad->grad_fn || impl.grad->requires_grad)) {
    impl.grad = (Tensor(impl.grad) + grad).impl_ptr();
  } else {
    Tensor(impl.grad).add_(grad);
  }
}

void add_to_accum(Tensor& accum, Tensor grad) {
  if (!accum.defined()) accum = std::move(grad);
  else if (exclusively_owned(accum) && !grad.requires_grad()) accum.add_(grad);
  else accum = accum + grad;
}

struct LaterFirst {
  bool operator()(const std::shared_ptr<Node>& a, const std::shared_ptr<Node>& b) const {
    return a->sequence < b->sequence;
  }
};

Tensor run_tensor_hooks(const HookList<TensorHook>& hooks, Tensor grad, const char* where) {
  for (const auto& [id, hook] : hooks.hooks()) {
    Tensor replaced = hook(grad);
    if (!replaced.defined()) continue;
    if (replaced.shape() != grad.shape() || replaced.dtype() != grad.dtype())
      throw GraphError(message("backward: a hook on ", where, " returned a gradient of shape ", replaced.shape().str(),
                               " (", dtype_name(replaced.dtype()), ") for one of shape ", grad.shape().str(), " (",
                               dtype_name(grad.dtype()), ")"));
    grad = std::move(replaced);
  }
  return grad;
}

bool has_non_finite(const Tensor& t) {
  if (!t.defined() || !t.is_floating_point()) return false;
  const std::vector<double> values = t.to_vector<double>();
  return std::any_of(values.begin(), values.end(), [](double v) { return !std::isfinite(v); });
}

class GraphTask;
// The backward running on this thread (a hook or a backward may start another inside it).
thread_local GraphTask* running_task = nullptr;

// One backward: the roots, what to do with leaf gradients, and (for autograd::grad) which
// tensors' gradients to return.
class GraphTask {
 public:
  GraphTask(bool retain_graph, bool create_graph, const TensorList* inputs)
      : retain_graph_(retain_graph), create_graph_(create_graph), inputs_(inputs) {
    if (inputs_ != nullptr) results_.resize(inputs_->size());
  }

  void run(const TensorList& roots, const TensorList& seeds);
  TensorList take_results() { return std::move(results_); }
  void queue_callback(std::function<void()> fn) { callbacks_.push_back(std::move(fn)); }
  bool creates_graph() const { return create_graph_; }
  bool returns_gradients() const { return inputs_ != nullptr; }

 private:
  void prepare(const std::vector<std::shared_ptr<Node>>& starts);
  void to_leaf(const std::shared_ptr<TensorImpl>& leaf, Tensor grad);
  void finish_leaf(const std::shared_ptr<TensorImpl>& leaf, Tensor grad);
  void capture_leaf(const TensorImpl* leaf, const Tensor& grad);
  void capture_node(const Node& node, int output_nr, const Tensor& grad);
  void check_anomaly(const Node& node, const TensorList& grads) const;

  bool retain_graph_;
  bool create_graph_;
  const TensorList* inputs_;  // autograd::grad's inputs; null for a backward into .grad
  TensorList results_;
  std::uint64_t walk_ = 0;  // nonzero when prepare() walked the graph
  // Hooked leaves: edges still to deliver, and the gradient summed so far.
  struct PendingLeaf {
    std::shared_ptr<TensorImpl> leaf;
    int remaining = 0;
    Tensor grad;
  };
  std::vector<PendingLeaf> hooked_;
  std::vector<std::function<void()>> callbacks_;  // autograd::queue_callback, run at the end of run()
};

// Walks the graph once before a backward that needs it: for autograd::grad, marks the nodes
// whose backward leads to an input (the others are skipped); when leaves have hooks, counts the
// edges into each hooked leaf so its hooks run once, when its gradient is complete.
void GraphTask::prepare(const std::vector<std::shared_ptr<Node>>& starts) {
  const bool hooks = leaf_hooks_exist.load(std::memory_order_relaxed) && inputs_ == nullptr;
  if (!hooks && inputs_ == nullptr) return;
  walk_ = next_walk.fetch_add(1);
  struct Frame {
    Node* node;
    std::size_t next_edge;
  };
  std::vector<Frame> stack;
  auto is_input_node = [&](const Node* node) {
    for (const Tensor& in : *inputs_)
      if (in.defined() && in.grad_fn().get() == node) return true;
    return false;
  };
  auto is_input_leaf = [&](const TensorImpl* leaf) {
    for (const Tensor& in : *inputs_)
      if (in.impl() == leaf) return true;
    return false;
  };
  auto enter = [&](Node* node) {
    node->visit = walk_;
    node->needed = inputs_ == nullptr || is_input_node(node);
    stack.push_back({node, 0});
  };
  for (const auto& start : starts)
    if (start->visit != walk_) enter(start.get());
  while (!stack.empty()) {
    Frame& frame = stack.back();
    Node* node = frame.node;
    if (frame.next_edge == node->edges.size()) {
      stack.pop_back();
      if (!stack.empty() && node->needed) stack.back().node->needed = true;
      continue;
    }
    Edge& edge = node->edges[frame.next_edge++];
    if (edge.leaf) {
      if (inputs_ != nullptr) {
        if (is_input_leaf(edge.leaf.get())) node->needed = true;
      } else if (edge.leaf->hooks) {
        auto it =
            std::find_if(hooked_.begin(), hooked_.end(), [&](const PendingLeaf& p) { return p.leaf == edge.leaf; });
        if (it == hooked_.end()) hooked_.push_back({edge.leaf, 1, Tensor()});
        else ++it->remaining;
      }
    } else if (edge.node) {
      if (edge.node->visit != walk_) enter(edge.node.get());  // its needed flag reaches us when it is popped
      else if (edge.node->needed) node->needed = true;
    }
  }
}

void GraphTask::capture_leaf(const TensorImpl* leaf, const Tensor& grad) {
  for (std::size_t i = 0; i < inputs_->size(); ++i)
    if ((*inputs_)[i].impl() == leaf && !(*inputs_)[i].grad_fn()) add_to_accum(results_[i], grad);
}

void GraphTask::capture_node(const Node& node, int output_nr, const Tensor& grad) {
  for (std::size_t i = 0; i < inputs_->size(); ++i) {
    const Tensor& in = (*inputs_)[i];
    if (in.defined() && in.grad_fn().get() == &node && in.impl()->output_nr == output_nr) results_[i] = grad;
  }
}

void GraphTask::finish_leaf(const std::shared_ptr<TensorImpl>& leaf, Tensor grad) {
  if (leaf->hooks) grad = run_tensor_hooks(*leaf->hooks->tensor_hooks, std::move(grad), "a leaf");
  add_to_grad(*leaf, std::move(grad));
  if (leaf->hooks && !leaf->hooks->post_accumulate->empty()) {
    const auto hooks = leaf->hooks->post_accumulate->hooks();  // a copy: a hook may remove itself
    const Tensor handle(leaf);
    for (const auto& entry : hooks) entry.second(handle);
  }
}

void GraphTask::to_leaf(const std::shared_ptr<TensorImpl>& leaf, Tensor grad) {
  if (inputs_ != nullptr) {
    capture_leaf(leaf.get(), grad);
    return;
  }
  if (walk_ != 0 && leaf->hooks) {
    auto it = std::find_if(hooked_.begin(), hooked_.end(), [&](const PendingLeaf& p) { return p.leaf == leaf; });
    if (it != hooked_.end()) {
      if (grad.defined()) add_to_accum(it->grad, std::move(grad));
      if (--it->remaining == 0 && it->grad.defined()) {
        Tensor total = std::move(it->grad);
        it->grad = Tensor();
        finish_leaf(leaf, std::move(total));
      }
      return;
    }
  }
  if (grad.defined()) finish_leaf(leaf, std::move(grad));
}

void GraphTask::check_anomaly(const Node& node, const TensorList& grads) const {
  for (std::size_t i = 0; i < grads.size(); ++i) {
    if (!has_non_finite(grads[i])) continue;
    std::string message = std::string("anomaly: the backward of ") + node.name +
                          " returned a gradient with NaN or infinite values for its input " + std::to_string(i) +
                          " (shape " + grads[i].shape().str() + "); the tensor was made by the forward op " + node.name;
    if (!node.anomaly_context.empty()) message += " under '" + node.anomaly_context + "'";
    throw GraphError(message);
  }
}

void GraphTask::run(const TensorList& roots, const TensorList& seeds) {
  // Each backward formula runs in the dtypes its forward chose, whatever autocast scope backward is called in.
  detail::AutocastOffGuard no_autocast;
  GraphTask* outer_task = running_task;
  running_task = this;
  struct RestoreTask {
    GraphTask* outer;
    ~RestoreTask() { running_task = outer; }
  } restore_task{outer_task};
  std::vector<std::shared_ptr<Node>> heap;  // max-heap on sequence: the tape in reverse
  // On an exception, leave no gradient parked in a node for the next backward to find.
  struct ClearOnExit {
    std::vector<std::shared_ptr<Node>>& heap;
    ~ClearOnExit() {
      for (auto& node : heap) {
        node->grad_accum = Tensor();
        for (Tensor& g : node->extra_accum) g = Tensor();
        node->queued = false;
      }
    }
  } clear_on_exit{heap};

  std::vector<std::shared_ptr<Node>> starts;
  for (const Tensor& root : roots)
    if (root.grad_fn()) starts.push_back(root.grad_fn());
  prepare(starts);

  for (std::size_t r = 0; r < roots.size(); ++r) {
    const Tensor& root = roots[r];
    if (root.is_leaf()) {
      to_leaf(root.impl_ptr(), seeds[r]);
      continue;
    }
    const std::shared_ptr<Node>& node = root.grad_fn();
    if (walk_ != 0 && !node->needed) continue;
    add_to_accum(node->accum(root.impl()->output_nr), seeds[r]);
    if (!node->queued) {
      node->queued = true;
      heap.push_back(node);
      std::push_heap(heap.begin(), heap.end(), LaterFirst());
    }
  }

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), LaterFirst());
    std::shared_ptr<Node> node = std::move(heap.back());
    heap.pop_back();
    node->queued = false;
    if (node->released)
      throw GraphError(message("backward: the graph through ", node->name,
                               " has already been released by an earlier backward; pass retain_graph=true to that "
                               "backward to go through the graph again"));
    // The gradient of each output, through its hooks; kept for retain_grad and autograd::grad.
    auto arrived = [&](int k, Tensor g) {
      if (!g.defined()) return g;
      if (static_cast<std::size_t>(k) < node->output_hooks.size() && node->output_hooks[k])
        g = run_tensor_hooks(*node->output_hooks[k], std::move(g), node->name);
      if (node->retains_output_grads)
        if (auto out = node->output_impl(k); out && out->retains_grad) add_to_grad(*out, g);
      if (inputs_ != nullptr) capture_node(*node, k, g);
      return g;
    };
    TensorList grads;
    {
      // Restores the outer node and frees the tensors this node's backward unpacked.
      struct Restore {
        const std::shared_ptr<Node>* outer = running_node;
        std::size_t unpacked = unpacked_count;
        ~Restore() {
          running_node = outer;
          if (unpacked_count != unpacked) {
            unpacked_tensors.resize(unpacked);
            unpacked_count = unpacked;
          }
        }
      } restore;
      running_node = &node;
      if (node->backward_multi) {
        TensorList grad_outputs(static_cast<std::size_t>(node->num_outputs));
        grad_outputs[0] = arrived(0, std::move(node->grad_accum));
        node->grad_accum = Tensor();
        for (int k = 1; k < node->num_outputs; ++k) {
          grad_outputs[k] = arrived(k, std::move(node->extra_accum[k - 1]));
          node->extra_accum[k - 1] = Tensor();
        }
        grads = node->backward_multi(grad_outputs);
      } else {
        Tensor grad_output = arrived(0, std::move(node->grad_accum));
        node->grad_accum = Tensor();
        grads = node->backward(grad_output);
        // Dropped before the gradients are passed on: a gradient that is a view of grad_output
        // (transpose, reshape) then owns its buffer alone and is kept or updated in place
        // instead of copied.
      }
    }
    if (!retain_graph_) {
      node->backward = nullptr;
      node->backward_multi = nullptr;
      node->released = true;
    }
    if (grads.size() != node->edges.size())
      throw GraphError(message("backward: ", node->name, " returned ", grads.size(), " gradients for ",
                               node->edges.size(), " inputs"));
    if (anomaly_enabled) check_anomaly(*node, grads);
    for (std::size_t i = 0; i < grads.size(); ++i) {
      Edge& edge = node->edges[i];
      if (!edge.needed()) continue;
      if (grads[i].defined() && (grads[i].shape() != edge.shape || grads[i].dtype() != edge.dtype))
        throw GraphError(message("backward: ", node->name, " returned a gradient of shape ", grads[i].shape().str(),
                                 " (", dtype_name(grads[i].dtype()), ") for input ", i, " of shape ", edge.shape.str(),
                                 " (", dtype_name(edge.dtype), ")"));
      if (edge.leaf) {
        to_leaf(edge.leaf, std::move(grads[i]));
      } else if (grads[i].defined()) {
        if (walk_ != 0 && edge.node->visit == walk_ && !edge.node->needed) continue;
        add_to_accum(edge.node->accum(edge.output_nr), std::move(grads[i]));
        if (!edge.node->queued) {
          edge.node->queued = true;
          heap.push_back(edge.node);
          std::push_heap(heap.begin(), heap.end(), LaterFirst());
        }
      }
    }
  }
  // Hooked leaves some of whose edges carried no gradient (their ops were not reached).
  for (PendingLeaf& pending : hooked_)
    if (pending.remaining > 0 && pending.grad.defined()) finish_leaf(pending.leaf, std::move(pending.grad));
  // By index: a callback may queue another.
  for (std::size_t i = 0; i < callbacks_.size(); ++i) {
    std::function<void()> callback = std::move(callbacks_[i]);
    callback();
  }
  callbacks_.clear();
}

// The gradient each root starts from: 1 for a one-element root with none given.
TensorList make_seeds(const TensorList& roots, const TensorList& grads, const char* op) {
  if (!grads.empty() && grads.size() != roots.size())
    throw ValueError(message(op, ": ", grads.size(), " gradients for ", roots.size(), " outputs"));
  TensorList seeds(roots.size());
  for (std::size_t r = 0; r < roots.size(); ++r) {
    const Tensor& root = roots[r];
    if (!root.defined()) throw ValueError(message(op, ": output ", r, " is undefined"));
    if (!root.requires_grad()) throw GraphError(message(op, ": the tensor does not require grad and has no grad_fn"));
    Tensor seed = grads.empty() ? Tensor() : grads[r];
    if (!seed.defined()) {
      if (root.numel() != 1)
        throw GraphError(message(op, ": a gradient is implied only for a one-element output; got shape ",
                                 root.shape().str(), ", so pass a gradient of that shape"));
      seed = ones(root.shape(), root.dtype());
    } else if (seed.shape() != root.shape() || seed.dtype() != root.dtype()) {
      throw ShapeError(message(op, ": gradient of shape ", seed.shape().str(), " (", dtype_name(seed.dtype()),
                               ") for a tensor of shape ", root.shape().str(), " (", dtype_name(root.dtype()), ")"));
    }
    seeds[r] = seed;
  }
  return seeds;
}

// Grad mode during a backward: on exactly when the backward is taped.
class GradModeFor {
 public:
  explicit GradModeFor(bool create_graph) : previous_(grad_enabled) { grad_enabled = create_graph; }
  ~GradModeFor() { grad_enabled = previous_; }
  GradModeFor(const GradModeFor&) = delete;
  GradModeFor& operator=(const GradModeFor&) = delete;

 private:
  bool previous_;
};

}  // namespace

void run_backward(const Tensor& root, const Tensor& grad, bool retain_graph, bool create_graph) {
  TensorList seeds = make_seeds({root}, {grad}, "backward");
  GradModeFor mode(create_graph);
  GraphTask task(retain_graph, create_graph, nullptr);
  task.run({root}, seeds);
}

namespace autograd {

TensorList grad(const TensorList& outputs, const TensorList& inputs, const TensorList& grad_outputs,
                const GradOptions& options) {
  if (outputs.empty()) throw ValueError("grad: no outputs given");
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) throw ValueError(message("grad: input ", i, " is undefined"));
    if (!inputs[i].requires_grad())
      throw GraphError(message("grad: input ", i, " (shape ", inputs[i].shape().str(), ") does not require grad"));
  }
  TensorList seeds = make_seeds(outputs, grad_outputs, "grad");
  TensorList results;
  {
    GradModeFor mode(options.create_graph);
    GraphTask task(options.retain_graph.value_or(options.create_graph), options.create_graph, &inputs);
    task.run(outputs, seeds);
    results = task.take_results();
  }
  for (std::size_t i = 0; i < results.size(); ++i)
    if (!results[i].defined() && !options.allow_unused)
      throw GraphError(
          message("grad: input ", i, " (shape ", inputs[i].shape().str(),
                  ") was not used to compute the outputs; pass allow_unused to get an undefined gradient"));
  return results;
}

void queue_callback(std::function<void()> fn) {
  if (running_task == nullptr)
    throw GraphError("queue_callback: no backward is running on this thread (call it from a hook during backward)");
  if (!fn) throw ValueError("queue_callback: the callback is empty");
  running_task->queue_callback(std::move(fn));
}

DetectAnomalyGuard::DetectAnomalyGuard() : previous_(anomaly_enabled) { anomaly_enabled = true; }
DetectAnomalyGuard::~DetectAnomalyGuard() { anomaly_enabled = previous_; }
bool is_anomaly_enabled() { return anomaly_enabled; }

AnomalyLabel::AnomalyLabel(const std::string& label) : pushed_(anomaly_enabled) {
  if (pushed_) anomaly_labels.push_back(label);
}
AnomalyLabel::~AnomalyLabel() {
  if (pushed_) anomaly_labels.pop_back();
}

SavedTensorHooksGuard::SavedTensorHooksGuard(PackHook pack, UnpackHook unpack) {
  if (!pack || !unpack) throw ValueError("SavedTensorHooksGuard: both a pack and an unpack hook are needed");
  saved_hooks.push_back({std::move(pack), std::move(unpack)});
}
SavedTensorHooksGuard::~SavedTensorHooksGuard() { saved_hooks.pop_back(); }

}  // namespace autograd

// ---------------------------------------------------------------- hooks on tensors

RemovableHandle Tensor::register_hook(std::function<Tensor(const Tensor&)> fn) const {
  TensorImpl& t = checked();
  if (!requires_grad())
    throw GraphError("register_hook: the tensor does not require grad, so no gradient will reach the hook");
  if (!fn) throw ValueError("register_hook: the hook is empty");
  if (t.grad_fn) {
    Node& node = *t.grad_fn;
    if (node.output_hooks.size() <= static_cast<std::size_t>(t.output_nr))
      node.output_hooks.resize(static_cast<std::size_t>(t.output_nr) + 1);
    auto& list = node.output_hooks[t.output_nr];
    if (!list) list = std::make_shared<HookList<TensorHook>>();
    return HookList<TensorHook>::add(list, std::move(fn));
  }
  if (!t.hooks) t.hooks = std::make_shared<LeafHooks>();
  leaf_hooks_exist.store(true, std::memory_order_relaxed);
  return HookList<TensorHook>::add(t.hooks->tensor_hooks, std::move(fn));
}

RemovableHandle Tensor::register_post_accumulate_grad_hook(std::function<void(const Tensor&)> fn) const {
  TensorImpl& t = checked();
  if (t.grad_fn)
    throw GraphError(
        message("register_post_accumulate_grad_hook: only a leaf accumulates a gradient; this "
                "tensor was made by ",
                t.grad_fn->name));
  if (!t.requires_grad) throw GraphError("register_post_accumulate_grad_hook: the leaf does not require grad");
  if (!fn) throw ValueError("register_post_accumulate_grad_hook: the hook is empty");
  if (!t.hooks) t.hooks = std::make_shared<LeafHooks>();
  leaf_hooks_exist.store(true, std::memory_order_relaxed);
  return HookList<PostAccumulateGradHook>::add(t.hooks->post_accumulate, std::move(fn));
}

Tensor sum_to(const Tensor& grad, const Shape& shape) {
  if (grad.shape() == shape) return grad;
  const int lead = grad.dim() - shape.size();
  if (lead < 0)
    throw ShapeError("sum_to: cannot reduce a gradient of shape " + grad.shape().str() + " to shape " + shape.str());
  Dims axes;
  for (int d = 0; d < grad.dim(); ++d) {
    if (d < lead) {
      axes.push_back(d);
    } else if (shape[d - lead] == 1 && grad.shape()[d] != 1) {
      axes.push_back(d);
    } else if (shape[d - lead] != grad.shape()[d]) {
      throw ShapeError("sum_to: cannot reduce a gradient of shape " + grad.shape().str() + " to shape " + shape.str());
    }
  }
  return reshape(sum(grad, axes, /*keepdim=*/true), shape);
}

std::int64_t live_nodes() { return detail::total_live_nodes(); }
std::int64_t live_tensor_impls() { return detail::total_live_impls(); }

void detail::accumulate_sparse_grad(const std::shared_ptr<TensorImpl>& leaf, const SparseRows& rows, const char* op) {
  const std::string name(op);
  if (running_task == nullptr)
    throw GraphError(name + ": a row-sparse gradient can be accumulated only from inside a backward");
  if (running_task->creates_graph())
    throw GraphError(name +
                     ": sparse gradients cannot be differentiated again; build the embedding with dense "
                     "gradients to backward with create_graph");
  if (running_task->returns_gradients())
    throw GraphError(name +
                     ": autograd::grad returns dense gradients; build the embedding with dense gradients "
                     "to ask for its weight's gradient there");
  if (leaf->hooks && !leaf->hooks->tensor_hooks->empty())
    throw GraphError(name + ": the " + leaf->shape.str() +
                     " weight has gradient hooks (register_hook), which take dense gradients; use a "
                     "post-accumulate-grad hook, or dense gradients");
  if (leaf->grad) {
    add_to_grad(*leaf, rows.to_dense());
  } else if (leaf->sparse_grad) {
    leaf->sparse_grad = std::make_shared<SparseRows>(leaf->sparse_grad->append(rows));
  } else {
    leaf->sparse_grad = std::make_shared<SparseRows>(rows);
  }
  if (leaf->hooks && !leaf->hooks->post_accumulate->empty()) {
    const auto hooks = leaf->hooks->post_accumulate->hooks();  // a copy: a hook may remove itself
    const Tensor handle(leaf);
    for (const auto& entry : hooks) entry.second(handle);
  }
}

namespace detail {

namespace {

struct CountRegistry {
  std::mutex mutex;
  std::vector<LiveCounts*> live;
  LiveCounts retired;  // exited threads, and counts made while a thread tears down
};

CountRegistry& registry() {
  static CountRegistry* instance = new CountRegistry();  // never destroyed, like the objects it counts
  return *instance;
}

thread_local bool counts_gone = false;  // plain flag, readable after the counts below are destroyed

struct ThreadCounts {
  LiveCounts counts;
  ThreadCounts() {
    std::lock_guard<std::mutex> lock(registry().mutex);
    registry().live.push_back(&counts);
  }
  ~ThreadCounts() {
    CountRegistry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.live.erase(std::find(r.live.begin(), r.live.end(), &counts));
    r.retired.impls.fetch_add(counts.impls.load());
    r.retired.nodes.fetch_add(counts.nodes.load());
    counts_gone = true;
  }
};

void bump(std::atomic<std::int64_t> LiveCounts::*which, std::int64_t by) {
  if (LiveCounts* c = thread_live_counts()) {
    std::atomic<std::int64_t>& counter = c->*which;
    counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
  } else {
    (registry().retired.*which).fetch_add(by);
  }
}

std::int64_t total(std::atomic<std::int64_t> LiveCounts::*which) {
  thread_live_counts();
  CountRegistry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::int64_t sum = (r.retired.*which).load();
  for (const LiveCounts* c : r.live) sum += (c->*which).load(std::memory_order_relaxed);
  return sum;
}

}  // namespace

LiveCounts* thread_live_counts() {
  if (counts_gone) return nullptr;
  thread_local ThreadCounts counts;
  return &counts.counts;
}
void count_impls(std::int64_t by) { bump(&LiveCounts::impls, by); }
void count_nodes(std::int64_t by) { bump(&LiveCounts::nodes, by); }
std::int64_t total_live_impls() { return total(&LiveCounts::impls); }
std::int64_t total_live_nodes() { return total(&LiveCounts::nodes); }

}  // namespace detail

}  // namespace tapegrad
