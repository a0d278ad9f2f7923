#pragma once
// Hook lists and the handles that remove hooks from them, shared by tensor hooks (graph.h) and
// module forward hooks (nn/module.h).
//
//   RemovableHandle handle = w.register_hook([](const Tensor& g) { return g * 0.5; });
//   ...
//   handle.remove();  // later backwards no longer see the hook; removing twice does nothing
//
// A handle does not own its hook: dropping the handle leaves the hook registered (as in PyTorch),
// and a handle outliving its list (the tensor or module is gone) removes nothing.

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

namespace tapegrad {

class RemovableHandle {
 public:
  RemovableHandle() = default;
  explicit RemovableHandle(std::function<void()> remove) : remove_(std::move(remove)) {}

  // Removes the hook; later calls do nothing.
  void remove() {
    if (!remove_) return;
    std::function<void()> remove = std::move(remove_);
    remove_ = nullptr;
    remove();
  }

 private:
  std::function<void()> remove_;
};

// Hooks of one kind in registration order, each with an id its handle names. Held through a
// shared_ptr so that a handle can check whether its list still exists.
template <class Fn>
class HookList {
 public:
  bool empty() const { return hooks_.empty(); }
  const std::vector<std::pair<std::uint64_t, Fn>>& hooks() const { return hooks_; }

  // Appends fn to the list that `self` owns and returns the handle that removes it.
  static RemovableHandle add(const std::shared_ptr<HookList>& self, Fn fn) {
    const std::uint64_t id = self->next_id_++;
    self->hooks_.emplace_back(id, std::move(fn));
    std::weak_ptr<HookList> weak = self;
    return RemovableHandle([weak, id] {
      if (auto list = weak.lock()) list->erase(id);
    });
  }

 private:
  void erase(std::uint64_t id) {
    for (auto it = hooks_.begin(); it != hooks_.end(); ++it)
      if (it->first == id) {
        hooks_.erase(it);
        return;
      }
  }

  std::vector<std::pair<std::uint64_t, Fn>> hooks_;
  std::uint64_t next_id_ = 0;
};

}  // namespace tapegrad
