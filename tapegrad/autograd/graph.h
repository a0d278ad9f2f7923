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
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tapegrad/autograd/hooks.h"
#include "tapegrad/autograd/tensor.h"

namespace tapegrad {

// Gradients an op's backward returns, one per input; an undefined Tensor means "none".
using TensorList = std::vector<Tensor>;
// Named tensors in a fixed order (state dicts, named parameters, optimiser state, file contents).
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using BackwardFn = std::function<TensorList(const Tensor& grad_output)>;
// The backward of an op with several outputs: one gradient per output in (undefined for an output
// no gradient reached), one per input out.
using MultiBackwardFn = std::function<TensorList(const TensorList& grad_outputs)>;
// A tensor hook: sees the gradient computed for a tensor and may return a replacement (an
// undefined Tensor keeps it).
using TensorHook = std::function<Tensor(const Tensor& grad)>;
// Runs on a leaf after its .grad has been updated by a backward.
using PostAccumulateGradHook = std::function<void(const Tensor& leaf)>;

// Where an input's gradient goes: output `output_nr` of the node that produced the input, or,
// for a leaf that requires grad, the leaf itself. Both empty: the input needs no gradient.
struct Edge {
  std::shared_ptr<Node> node;
  std::shared_ptr<TensorImpl> leaf;
  Shape shape;  // the input's shape, to check what backward returns
  DType dtype = DType::Float32;
  int output_nr = 0;
  bool needed() const { return node || leaf; }
};

struct Node {
  const char* name = "";  // the op, for error messages ("matmul")
  std::uint64_t sequence = 0;
  std::vector<Edge> edges;
  BackwardFn backward;             // one output; cleared when the graph is released
  MultiBackwardFn backward_multi;  // several outputs (split, topk ...), instead of backward
  int num_outputs = 1;
  bool released = false;
  // Weak: an output owns its node, not the other way round.
  std::weak_ptr<TensorImpl> output;                      // output 0
  std::vector<std::weak_ptr<TensorImpl>> extra_outputs;  // outputs 1 .. num_outputs-1
  // Hooks registered on a non-leaf output (Tensor::register_hook), per output; kept here so
  // they run even when the tensor itself is gone, as long as the graph through it is alive.
  std::vector<std::shared_ptr<HookList<TensorHook>>> output_hooks;
  // Where the node was made, when anomaly mode was on: the labels in scope (AnomalyLabel).
  std::string anomaly_context;

  // Engine scratch, valid during one backward: the gradient summed so far for each output.
  Tensor grad_accum;
  std::vector<Tensor> extra_accum;  // outputs 1 .. num_outputs-1
  bool queued = false;
  std::uint64_t visit = 0;  // the last graph walk that visited the node (see graph.cpp)
  bool needed = true;       // whether that walk needs the node's backward
  // Whether an output was marked with retain_grad (so the engine looks at the outputs only then).
  bool retains_output_grads = false;

  Node();
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Whether input i needs a gradient (lets a closure skip work).
  bool needs_grad(std::size_t i) const { return i < edges.size() && edges[i].needed(); }
  Tensor& accum(int output_nr) { return output_nr == 0 ? grad_accum : extra_accum[output_nr - 1]; }
  std::shared_ptr<TensorImpl> output_impl(int output_nr) const {
    return (output_nr == 0 ? output : extra_outputs[output_nr - 1]).lock();
  }
};

// The hooks of a leaf (Tensor::register_hook, Tensor::register_post_accumulate_grad_hook).
struct LeafHooks {
  std::shared_ptr<HookList<TensorHook>> tensor_hooks = std::make_shared<HookList<TensorHook>>();
  std::shared_ptr<HookList<PostAccumulateGradHook>> post_accumulate =
      std::make_shared<HookList<PostAccumulateGradHook>>();
};

// A tensor an op keeps for its backward. Saving records the storage's version; unpacking checks
// it, so a backward never computes with values written in place after the forward (GraphError
// naming the op). Inputs are kept with their history, so a backward taped with create_graph
// connects through them; an op's own output is kept detached (keeping it would be a reference
// cycle through the node) and gets the node back as its grad_fn when unpacked under grad mode.
// While a SavedTensorHooksGuard is active, saving calls its pack hook and unpacking its unpack hook.
class SavedTensor {
 public:
  SavedTensor() = default;
  explicit SavedTensor(const Tensor& t, bool is_output = false);
  // An op's output (see above).
  static SavedTensor output(const Tensor& t, int output_nr = 0) {
    SavedTensor saved(t, true);
    saved.output_nr_ = output_nr;
    return saved;
  }

  bool defined() const { return defined_; }
  // The saved tensor, checked against in-place writes. Inside a backward, names the running op
  // in the error. Usually a reference to the tensor kept here, valid while this SavedTensor
  // lives; when an unpack hook or create_graph makes a new tensor, that tensor is kept by the
  // running backward until its node's backward returns. A tensor packed by a hook is unpacked on
  // the thread running the backward (a GraphError on any other thread, or outside a backward).
  const Tensor& unpack() const;

 private:
  // t after the version check against storage (null: not checked), reconnected to the running
  // node when it is an output unpacked under create_graph.
  const Tensor& checked(const Tensor& t, const Storage* storage) const;

  Tensor data_;                   // empty when packed by a hook
  std::shared_ptr<void> hooked_;  // the hook state (see graph.cpp), when a pack hook took it
  std::weak_ptr<Storage> storage_;
  std::uint64_t version_ = 0;
  int output_nr_ = 0;
  bool is_output_ = false;
  bool defined_ = false;
};

// --- grad mode ---
bool is_grad_enabled();
void set_grad_enabled(bool enabled);

// Sets grad mode for its lifetime (torch's AutoGradMode), restoring the previous mode after.
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled) : previous_(is_grad_enabled()) { set_grad_enabled(enabled); }
  ~GradModeGuard() { set_grad_enabled(previous_); }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool previous_;
};

// Disables recording for its lifetime: ops run, nothing is taped.
class NoGradGuard : public GradModeGuard {
 public:
  NoGradGuard() : GradModeGuard(false) {}
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
// is off. The closure must not capture `output` itself (that would be a reference cycle); it
// keeps what its backward needs as SavedTensors (SavedTensor::output(out) for the output).
// ValueError naming the op when `output` already has a grad_fn (its history is never replaced).
// A backward runs under grad mode when the backward was asked to create_graph: a closure then
// computes with differentiable ops, so that its gradient is itself taped. User code defines ops
// with custom_op (custom_op.h), which wraps this.
void record(const char* name, const Tensor& output, const std::vector<Tensor>& inputs, BackwardFn backward);
// The same for an op with several outputs: the backward runs once, with every output's gradient.
void record_multi(const char* name, const TensorList& outputs, const std::vector<Tensor>& inputs,
                  MultiBackwardFn backward);

// Walks the graph back from root (see Tensor::backward).
void run_backward(const Tensor& root, const Tensor& grad, bool retain_graph, bool create_graph = false);

namespace autograd {

// The gradients of `outputs` with respect to `inputs`, returned instead of accumulated into
// .grad (no leaf's .grad changes). grad_outputs holds one gradient per output; an undefined entry
// is allowed for a one-element output (1 is used). With create_graph the returned gradients are
// taped, so they can be differentiated again (retain_graph then defaults to true). An input the
// outputs do not depend on is a GraphError unless allow_unused, when its entry is undefined.
struct GradOptions {
  bool create_graph = false;
  std::optional<bool> retain_graph;  // default: create_graph
  bool allow_unused = false;
};
TensorList grad(const TensorList& outputs, const TensorList& inputs, const TensorList& grad_outputs = {},
                const GradOptions& options = {});

// Queues fn to run once the backward now running on this thread has been through its whole graph
// (every leaf gradient accumulated and its hooks run), before that backward returns; callbacks run in
// the order they were queued, and one may queue another. Called from a hook, it is how a
// data-parallel wrapper waits for its last gradient all-reduce. Outside a backward, a GraphError. A
// backward that throws drops its queued callbacks.
void queue_callback(std::function<void()> fn);

// Anomaly mode: while a guard lives on this thread, ops record where they were made, and a
// backward that produces a NaN or an infinity stops with a GraphError naming the op whose
// backward produced it, the forward op that made the tensor, and the AnomalyLabels in scope.
class DetectAnomalyGuard {
 public:
  DetectAnomalyGuard();
  ~DetectAnomalyGuard();
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool previous_;
};
bool is_anomaly_enabled();

// Names the ops recorded during its lifetime in anomaly reports ("encoder.layers.0"); labels nest
// with dots. Costs nothing when anomaly mode is off.
class AnomalyLabel {
 public:
  explicit AnomalyLabel(const std::string& label);
  ~AnomalyLabel();
  AnomalyLabel(const AnomalyLabel&) = delete;
  AnomalyLabel& operator=(const AnomalyLabel&) = delete;

 private:
  bool pushed_;
};

// Saved-tensor hooks: while a guard lives on this thread, every tensor an op saves for backward
// goes through pack, and comes back through unpack when backward needs it. pack may keep the
// tensor elsewhere (another device, a file, nothing at all to recompute later); unpack must
// return a tensor of the same shape, dtype and values. Guards nest; the innermost applies.
using PackHook = std::function<std::shared_ptr<void>(const Tensor& saved)>;
using UnpackHook = std::function<Tensor(const std::shared_ptr<void>& packed)>;
class SavedTensorHooksGuard {
 public:
  SavedTensorHooksGuard(PackHook pack, UnpackHook unpack);
  ~SavedTensorHooksGuard();
  SavedTensorHooksGuard(const SavedTensorHooksGuard&) = delete;
  SavedTensorHooksGuard& operator=(const SavedTensorHooksGuard&) = delete;
};

}  // namespace autograd

// Reduces a broadcast gradient back to `shape` by summing the broadcast axes.
Tensor sum_to(const Tensor& grad, const Shape& shape);

// Counts of live graph objects, for tests that check the graph is freed.
std::int64_t live_nodes();
std::int64_t live_tensor_impls();

namespace detail {
// Releases a node without recursion (see graph.cpp).
void release_node(std::shared_ptr<Node>&& node);
// Called by an op's backward instead of returning a dense gradient for `leaf`: adds `rows` to
// the leaf's row-sparse gradient (Tensor::sparse_grad), or into its dense gradient when it has
// one, then runs its post-accumulate-grad hooks. A GraphError naming `op` outside a backward, in
// a backward that creates a graph, in autograd::grad (whose results are dense), or when the leaf
// has gradient hooks (register_hook), which take dense gradients.
void accumulate_sparse_grad(const std::shared_ptr<TensorImpl>& leaf, const SparseRows& rows, const char* op);
}  // namespace detail

}  // namespace tapegrad
