#pragma once
// The call path of a module: runs its forward pre-hooks, forward and forward hooks (PyTorch's
// Module.__call__). A handle's call (fc(x), holder.h) and UnaryModule::operator() (module.h) go
// through detail::ForwardCall::call; calling forward directly (fc->forward(x)) skips the hooks,
// as calling .forward() does in PyTorch. Module::register_forward_pre_hook and
// register_forward_hook (module.h) say what the hooks receive and may return.
//
// A module without hooks costs one check of its two (empty or absent) hook lists per call. With
// hooks, the call collects its Tensor arguments (each argument whose type is Tensor, in order;
// other arguments pass through unseen) into a TensorList, lets the pre-hooks replace them, and
// calls forward with the list's tensors in their places.

#include <array>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/graph.h"

namespace tapegrad::nn {

class Module;

namespace detail {

// The hooks as a module stores them. A pre-hook returns the replacement tensors or nothing; a
// forward hook gets the output behind `output` with its type, checks the type and may overwrite it.
using StoredPreHook = std::function<std::optional<TensorList>(Module& module, const TensorList& tensor_args)>;
using StoredForwardHook =
    std::function<void(Module& module, const TensorList& tensor_args, void* output, const std::type_info& output_type)>;

// The type's name as written in the source ("tapegrad::nn::LinearImpl") where the compiler's ABI can
// demangle it, else the compiler's own name for it.
std::string readable_type_name(const std::type_info& type);

// Throws the TypeError of a forward hook registered for `expected` called on an output of type `got`.
[[noreturn]] void throw_forward_hook_type_error(const Module& module, const std::type_info& expected,
                                                const std::type_info& got);

template <class T>
struct is_std_function : std::false_type {};
template <class R, class... A>
struct is_std_function<std::function<R(A...)>> : std::true_type {};

// True for a null function pointer or an empty std::function, which cannot be called.
template <class Fn>
bool is_null_callable([[maybe_unused]] const Fn& fn) {
  if constexpr (std::is_pointer_v<Fn> || is_std_function<Fn>::value) return !fn;
  else return false;
}

template <class T>
inline constexpr bool is_tensor_arg_v = std::is_same_v<std::decay_t<T>, Tensor>;

// For each argument, the number of Tensor arguments before it: a Tensor argument's index in the
// TensorList the hooks see.
template <class... Args>
constexpr std::array<std::size_t, sizeof...(Args)> tensor_slots() {
  constexpr bool is_tensor[] = {false, is_tensor_arg_v<Args>...};  // a leading false: never empty
  std::array<std::size_t, sizeof...(Args)> slots{};
  std::size_t n = 0;
  for (std::size_t k = 0; k < sizeof...(Args); ++k) {
    slots[k] = n;
    if (is_tensor[k + 1]) ++n;
  }
  return slots;
}

// The modules being run on this thread, outermost first, for the module path in error messages. A scope
// lives for one handle call (ForwardCall::call). An exception of tapegrad's (Error) raised inside a module
// that an outer module called reaches the outermost caller with the path of the innermost module from the
// outermost one before its message, and its type unchanged:
//   "decoder.layers.1.cross_attn: matmul: cannot multiply (2,5,64) by (2,7,32)"
// An error raised in the outermost module itself keeps its message.
class ForwardScope {
 public:
  explicit ForwardScope(const Module& module);
  ~ForwardScope();
  ForwardScope(const ForwardScope&) = delete;
  ForwardScope& operator=(const ForwardScope&) = delete;
  // Called from the handler of `error`: rethrows it, or a copy of its type with the module path added.
  [[noreturn]] void rethrow(const Error& error) const;

 private:
  // Sets path to module's name below parent ("layers.1"); false when it is not a descendant.
  static bool path_below(const Module& parent, const Module* module, std::string& path);
};

// Module, named through M so that its members are looked up where ForwardCall is instantiated (by
// then module.h has defined Module), not here.
template <class M>
struct DependentModule {
  using type = Module;
};
template <class M>
using ModuleOf = typename DependentModule<M>::type;

// Module befriends this struct: it runs the module's hook lists.
struct ForwardCall {
  // module.forward(args...), with module's hooks around it when it has any.
  template <class M, class... Args>
  static auto call(M& module, Args&&... args) -> decltype(module.forward(std::forward<Args>(args)...)) {
    if constexpr (std::is_base_of_v<Module, M>) {
      const ForwardScope scope(module);
      try {
        // In anomaly mode the ops of this call are labelled with the module's name (nested calls
        // nest: "TransformerEncoderLayer.MultiHeadAttention.Linear").
        std::optional<autograd::AnomalyLabel> label;
        if (autograd::is_anomaly_enabled()) label.emplace(module.name());
        if (module.has_forward_hooks())
          return call_hooked(module, std::index_sequence_for<Args...>{}, std::forward<Args>(args)...);
        return module.forward(std::forward<Args>(args)...);
      } catch (const Error& error) {
        scope.rethrow(error);
      }
    } else {
      return module.forward(std::forward<Args>(args)...);
    }
  }

 private:
  template <class M, std::size_t... K, class... Args>
  static auto call_hooked(M& module, std::index_sequence<K...> /*indices*/, Args&&... args)
      -> decltype(module.forward(std::forward<Args>(args)...)) {
    using Returned = decltype(module.forward(std::forward<Args>(args)...));
    static_assert(std::is_object_v<Returned>, "a module's forward must return its output by value");
    using Output = std::remove_cv_t<Returned>;
    ModuleOf<M>& base = module;
    TensorList tensors;
    tensors.reserve(sizeof...(Args));
    (add_if_tensor(tensors, args), ...);
    base.run_forward_pre_hooks(tensors);
    constexpr auto slots = tensor_slots<Args...>();
    Output output = module.forward(pick<slots[K]>(tensors, std::forward<Args>(args))...);
    base.run_forward_hooks(tensors, &output, typeid(Output));
    return output;
  }

  template <class Arg>
  static void add_if_tensor([[maybe_unused]] TensorList& tensors, [[maybe_unused]] const Arg& arg) {
    if constexpr (is_tensor_arg_v<Arg>) tensors.push_back(arg);
  }

  // The argument forward receives: the hooks' tensor for a Tensor argument, else the argument itself.
  template <std::size_t Slot, class Arg>
  static decltype(auto) pick([[maybe_unused]] const TensorList& tensors, [[maybe_unused]] Arg&& arg) {
    if constexpr (is_tensor_arg_v<Arg>) return tensors[Slot];
    else return std::forward<Arg>(arg);
  }
};

}  // namespace detail
}  // namespace tapegrad::nn
