// checkpoint: a forward whose saved tensors are packed as bare positions and rebuilt by running
// the function again on the first unpack.

#include "tapegrad/autograd/checkpoint.h"

#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "tapegrad/autograd/error.h"

namespace tapegrad::autograd {

namespace {

// What one checkpointed call keeps: enough to run fn again, and, once it has, the tensors the
// rerun saved, in the order the forward saved them.
struct Segment {
  CheckpointFunction fn;
  TensorList inputs;
  std::vector<Generator*> generators;
  std::vector<Generator> generator_states;  // at the start of the forward, in `generators` order
  std::size_t saved_count = 0;              // tensors the forward saved
  bool rebuilt = false;
  TensorList rebuilt_tensors;

  void rebuild() {
    if (is_grad_enabled())
      throw GraphError(
          "checkpoint: the gradient of a checkpointed segment cannot be differentiated again (create_graph); "
          "the tensors rebuilt for its backward carry no history");
    // The rerun starts from the inputs' values, cut from the graph but needing gradients as the
    // originals did, so that every op makes the same decision to record and save.
    TensorList detached;
    detached.reserve(inputs.size());
    for (const Tensor& in : inputs) {
      if (!in.defined()) {
        detached.emplace_back();
        continue;
      }
      Tensor d = in.detach();
      if (in.requires_grad()) d.requires_grad_(true);
      detached.push_back(d);
    }
    std::vector<Generator> now;
    now.reserve(generators.size());
    for (std::size_t i = 0; i < generators.size(); ++i) {
      now.push_back(*generators[i]);
      *generators[i] = generator_states[i];
    }
    struct Restore {
      std::vector<Generator*>& generators;
      std::vector<Generator>& now;
      ~Restore() {
        for (std::size_t i = 0; i < generators.size(); ++i) *generators[i] = now[i];
      }
    } restore{generators, now};
    TensorList captured;
    {
      const bool previous = is_grad_enabled();
      set_grad_enabled(true);
      struct RestoreMode {
        bool previous;
        ~RestoreMode() { set_grad_enabled(previous); }
      } restore_mode{previous};
      SavedTensorHooksGuard capture(
          [&captured](const Tensor& t) {
            captured.push_back(t.detach());  // the values; the rerun's graph is not kept
            return std::shared_ptr<void>();
          },
          [](const std::shared_ptr<void>&) -> Tensor {
            throw GraphError("checkpoint: a tensor saved during the rerun was unpacked");
          });
      fn(detached);  // the rerun's own graph is dropped with its output
    }
    if (captured.size() != saved_count)
      throw GraphError(message("checkpoint: the rerun of the function saved ", captured.size(),
                               " tensors for backward, the forward ", saved_count,
                               "; the function must run the same ops on the same values both times"));
    rebuilt_tensors = std::move(captured);
    rebuilt = true;
  }
};

}  // namespace

Tensor checkpoint(const CheckpointFunction& fn, const TensorList& inputs, const std::vector<Generator*>& generators) {
  if (!fn) throw ValueError("checkpoint: the function is empty");
  for (std::size_t i = 0; i < generators.size(); ++i)
    if (generators[i] == nullptr) throw ValueError(message("checkpoint: generator ", i, " is null"));
  if (!is_grad_enabled()) return fn(inputs);  // nothing is saved
  auto segment = std::make_shared<Segment>();
  segment->fn = fn;
  segment->inputs = inputs;
  segment->generators = generators;
  segment->generators.insert(segment->generators.begin(), &default_generator());
  for (Generator* g : segment->generators) segment->generator_states.push_back(*g);

  // Each saved tensor becomes its position; the segment lives as long as any of them.
  struct Position {
    std::shared_ptr<Segment> segment;
    std::size_t index;
  };
  std::weak_ptr<Segment> weak = segment;
  SavedTensorHooksGuard drop(
      [weak](const Tensor&) -> std::shared_ptr<void> {
        std::shared_ptr<Segment> s = weak.lock();
        return std::make_shared<Position>(Position{s, s->saved_count++});
      },
      [](const std::shared_ptr<void>& packed) -> Tensor {
        const auto& position = *static_cast<const Position*>(packed.get());
        Segment& s = *position.segment;
        if (!s.rebuilt) s.rebuild();
        return s.rebuilt_tensors[position.index];
      });
  return fn(inputs);
}

}  // namespace tapegrad::autograd
