#include "tapegrad/autograd/graph.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>

#include "tapegrad/autograd/block_pool.h"
#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/live_counts.h"
#include "tapegrad/autograd/ops.h"

namespace tapegrad {

namespace {

thread_local bool grad_enabled = true;
std::atomic<std::uint64_t> next_sequence{0};

// Deferred release. Destroying the last handle to a long chain would otherwise recurse once
// per node (tensor -> node -> saved tensor -> node ...) and overflow the stack. The first
// release on a thread drains a work list; releases that happen while it drains only append.
thread_local bool draining = false;
thread_local std::vector<std::shared_ptr<Node>>* pending = nullptr;

}  // namespace

namespace detail {

void release_node(std::shared_ptr<Node>&& node) {
  if (!node) return;
  if (node.use_count() > 1) {  // other owners remain: dropping ours frees nothing
    node.reset();
    return;
  }
  if (!pending) pending = new std::vector<std::shared_ptr<Node>>();  // lives as long as the thread
  pending->push_back(std::move(node));
  if (draining) return;
  draining = true;
  while (!pending->empty()) {
    std::shared_ptr<Node> next = std::move(pending->back());
    pending->pop_back();
    next.reset();  // may append more
  }
  draining = false;
}

}  // namespace detail

Node::Node() : sequence(next_sequence.fetch_add(1, std::memory_order_relaxed)) { detail::count_nodes(1); }

Node::~Node() {
  detail::count_nodes(-1);
  {
    BackwardFn closure = std::move(backward);  // saved tensors go first, through ~TensorImpl
  }
  for (Edge& edge : edges) detail::release_node(std::move(edge.node));
}

bool is_grad_enabled() { return grad_enabled; }
void set_grad_enabled(bool enabled) { grad_enabled = enabled; }

bool any_requires_grad(const std::vector<Tensor>& inputs) {
  if (!is_grad_enabled()) return false;
  return std::any_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return t.defined() && t.requires_grad(); });
}

void record(const char* name, const Tensor& output, const std::vector<Tensor>& inputs, BackwardFn backward) {
  if (!any_requires_grad(inputs)) return;
  if (output.grad_fn())
    throw ValueError(std::string(name) + ": cannot record the op on a tensor that already has a grad_fn (" +
                     output.grad_fn()->name + ")");
  auto node = std::allocate_shared<Node>(detail::BlockAllocator<Node>());
  node->name = name;
  node->edges.resize(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& in = inputs[i];
    if (!in.defined() || !in.requires_grad()) continue;
    Edge& edge = node->edges[i];
    if (in.grad_fn()) edge.node = in.grad_fn();
    else edge.leaf = in.impl_ptr();
    edge.shape = in.shape();
    edge.dtype = in.dtype();
  }
  node->backward = std::move(backward);
  node->output = output.impl_ptr();
  output.impl()->grad_fn = std::move(node);
}

namespace {

// True when nothing else can see t's buffer, so it may be reused or written in place.
bool exclusively_owned(const Tensor& t) {
  return t.impl_ptr().use_count() == 1 && t.impl()->storage.use_count() == 1 && t.is_contiguous() && !t.requires_grad();
}

// grad is taken by value: a gradient the caller moves in is exclusively owned and is kept without a copy.
void accumulate_into_leaf(TensorImpl& leaf, Tensor grad) {  // NOLINT(performance-unnecessary-value-param)
  if (!leaf.grad) {
    leaf.grad = exclusively_owned(grad) ? grad.impl_ptr() : grad.clone().impl_ptr();
  } else {
    Tensor(leaf.grad).add_(grad);
  }
}

void accumulate_into_node(Node& node, Tensor grad) {
  if (!node.grad_accum.defined()) node.grad_accum = std::move(grad);
  else if (exclusively_owned(node.grad_accum)) node.grad_accum.add_(grad);
  else node.grad_accum = node.grad_accum + grad;
}

struct LaterFirst {
  bool operator()(const std::shared_ptr<Node>& a, const std::shared_ptr<Node>& b) const {
    return a->sequence < b->sequence;
  }
};

}  // namespace

void run_backward(const Tensor& root, const Tensor& grad, bool retain_graph) {
  if (!root.requires_grad()) throw GraphError("backward: the tensor does not require grad and has no grad_fn");
  Tensor seed = grad;
  if (!seed.defined()) {
    if (root.numel() != 1)
      throw GraphError("backward: a gradient is implied only for a one-element output; got shape " +
                       root.shape().str() + ", so pass a gradient of that shape");
    seed = ones(root.shape(), root.dtype());
  } else if (seed.shape() != root.shape() || seed.dtype() != root.dtype()) {
    throw ShapeError("backward: gradient of shape " + seed.shape().str() + " (" + dtype_name(seed.dtype()) +
                     ") for a tensor of shape " + root.shape().str() + " (" + dtype_name(root.dtype()) + ")");
  }
  NoGradGuard no_grad;
  if (root.is_leaf()) {
    accumulate_into_leaf(*root.impl(), seed);
    return;
  }

  std::vector<std::shared_ptr<Node>> heap;  // max-heap on sequence: the tape in reverse
  // On an exception, leave no gradient parked in a node for the next backward to find.
  struct ClearOnExit {
    std::vector<std::shared_ptr<Node>>& heap;
    ~ClearOnExit() {
      for (auto& node : heap) {
        node->grad_accum = Tensor();
        node->queued = false;
      }
    }
  } clear_on_exit{heap};

  const std::shared_ptr<Node>& start = root.grad_fn();
  start->grad_accum = seed;
  start->queued = true;
  heap.push_back(start);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), LaterFirst());
    std::shared_ptr<Node> node = std::move(heap.back());
    heap.pop_back();
    Tensor grad_output = std::move(node->grad_accum);
    node->grad_accum = Tensor();
    node->queued = false;
    if (node->released)
      throw GraphError(std::string("backward: the graph through ") + node->name +
                       " has already been released by an earlier backward; pass retain_graph=true to that "
                       "backward to go through the graph again");
    if (auto out = node->output.lock(); out && out->retains_grad) accumulate_into_leaf(*out, grad_output);

    TensorList grads = node->backward(grad_output);
    // Dropped before the gradients are passed on: a gradient that is a view of grad_output
    // (transpose, reshape) then owns its buffer alone and is kept or updated in place
    // instead of copied.
    grad_output = Tensor();
    if (!retain_graph) {
      node->backward = nullptr;
      node->released = true;
    }
    if (grads.size() != node->edges.size())
      throw GraphError(std::string("backward: ") + node->name + " returned " + std::to_string(grads.size()) +
                       " gradients for " + std::to_string(node->edges.size()) + " inputs");
    for (std::size_t i = 0; i < grads.size(); ++i) {
      Edge& edge = node->edges[i];
      if (!edge.needed() || !grads[i].defined()) continue;
      if (grads[i].shape() != edge.shape || grads[i].dtype() != edge.dtype)
        throw GraphError(std::string("backward: ") + node->name + " returned a gradient of shape " +
                         grads[i].shape().str() + " (" + dtype_name(grads[i].dtype()) + ") for input " +
                         std::to_string(i) + " of shape " + edge.shape.str() + " (" + dtype_name(edge.dtype) + ")");
      if (edge.leaf) {
        accumulate_into_leaf(*edge.leaf, std::move(grads[i]));
      } else {
        accumulate_into_node(*edge.node, std::move(grads[i]));
        if (!edge.node->queued) {
          edge.node->queued = true;
          heap.push_back(edge.node);
          std::push_heap(heap.begin(), heap.end(), LaterFirst());
        }
      }
    }
  }
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
