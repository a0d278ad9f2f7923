#pragma once
// The tape: every op whose inputs need gradients records a Node holding one Edge per input and
// a backward closure. Nodes are numbered in creation order; backward processes them
// highest-number-first, which is the tape played in reverse, so a node runs only after every
// op that consumed its output has passed its gradient back. No recursion anywhere: building,
// walking and freeing a 100,000-op chain use a bounded stack.

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tapegrad/autograd/tensor.h"

namespace tapegrad {

// Gradients an op's backward returns, one per input; an undefined Tensor means "none".
using TensorList = std::vector<Tensor>;
// Named tensors in a fixed order (state dicts, named parameters, optimiser state, file contents).
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using BackwardFn = std::function<TensorList(const Tensor& grad_output)>;

// Where an input's gradient goes: the node that produced the input, or, for a leaf that
// requires grad, the leaf itself. Both empty: the input needs no gradient.
struct Edge {
  std::shared_ptr<Node> node;
  std::shared_ptr<TensorImpl> leaf;
  Shape shape;  // the input's shape, to check what backward returns
  DType dtype = DType::Float32;
  bool needed() const { return node || leaf; }
};

struct Node {
  const char* name = "";  // the op, for error messages ("matmul")
  std::uint64_t sequence = 0;
  std::vector<Edge> edges;
  BackwardFn backward;  // cleared when the graph is released
  bool released = false;
  std::weak_ptr<TensorImpl> output;  // weak: the output owns the node, not the other way round

  // Engine scratch, valid during one backward.
  Tensor grad_accum;
  bool queued = false;

  Node();
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Whether input i needs a gradient (lets a closure skip work).
  bool needs_grad(std::size_t i) const { return i < edges.size() && edges[i].needed(); }
};

// --- grad mode ---
bool is_grad_enabled();
void set_grad_enabled(bool enabled);

// Disables recording for its lifetime: ops run, nothing is taped.
class NoGradGuard {
 public:
  NoGradGuard() : previous_(is_grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// Whether an op with these inputs must be recorded.
inline bool any_requires_grad(std::initializer_list<const Tensor*> inputs) {
  if (!is_grad_enabled()) return false;
  for (const Tensor* t : inputs)
    if (t->defined() && t->requires_grad()) return true;
  return false;
}
bool any_requires_grad(const std::vector<Tensor>& inputs);

// Records `output` as produced by op `name` from `inputs`, with `backward` mapping the output's
// gradient to one gradient per input. Does nothing when no input requires grad or grad mode
// is off. The closure must not capture `output` itself (that would be a reference cycle);
// capture output.detach() if backward needs the output's values. ValueError naming the op when
// `output` already has a grad_fn (its history is never replaced). User code defines ops with
// custom_op (custom_op.h), which wraps this.
void record(const char* name, const Tensor& output, const std::vector<Tensor>& inputs, BackwardFn backward);

// Walks the graph back from root (see Tensor::backward).
void run_backward(const Tensor& root, const Tensor& grad, bool retain_graph);

// Reduces a broadcast gradient back to `shape` by summing the broadcast axes.
Tensor sum_to(const Tensor& grad, const Shape& shape);

// Counts of live graph objects, for tests that check the graph is freed.
std::int64_t live_nodes();
std::int64_t live_tensor_impls();

namespace detail {
// Releases a node without recursion (see graph.cpp).
void release_node(std::shared_ptr<Node>&& node);
}  // namespace detail

}  // namespace tapegrad
