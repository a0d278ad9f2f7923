#pragma once
// Module: the base of every layer. Parameters, buffers and child modules are registered by
// name into ordered lists, and hierarchical names come out of the tree:
// "decoder.layers.1.cross_attn.out_proj.weight".
//
// A module is written as XImpl deriving from Module, and TAPEGRAD_MODULE(X) declares the handle X
// users hold (holder.h): copying a handle shares the module, calling it runs forward.
//
//   class MlpImpl : public nn::Module {
//    public:
//     explicit MlpImpl(std::int64_t d)
//         : fc1_(register_module("fc1", nn::Linear(d, 4 * d))),
//           fc2_(register_module("fc2", nn::Linear(4 * d, d))) {}
//     Tensor forward(const Tensor& x) { return fc2_(fc1_(x).relu()); }
//    private:
//     nn::Linear fc1_, fc2_;
//   };
//   TAPEGRAD_MODULE(Mlp);
//
//   tapegrad::manual_seed(0);   // the default generator the Linear layers draw their weights from
//   Mlp mlp(16);
//   Tensor y = mlp(x);          // x: (B, 16) -> y: (B, 16)
//
// Training mode (train()/eval(), read by dropout) is separate from grad mode (NoGradGuard).
//
// Forward hooks (PyTorch's register_forward_pre_hook / register_forward_hook) run when a module is
// called through its handle (mlp(x)) or UnaryModule's operator(), which is how Sequential calls its
// children; net->forward(x) runs forward alone. Capturing a hidden activation:
//
//   nn::Sequential net(nn::Linear(16, 64), nn::ReLU(), nn::Linear(64, 16));
//   std::vector<Tensor> hidden;
//   RemovableHandle h = net->at(1)->register_forward_hook(
//       [&](nn::Module&, const TensorList& /*inputs*/, const Tensor& y) { hidden.push_back(y.detach()); });
//   net(x);      // hidden holds the ReLU's output
//   h.remove();  // later calls record nothing

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "tapegrad/autograd/autograd.h"
#include "tapegrad/autograd/hooks.h"
#include "tapegrad/nn/forward_hooks.h"
#include "tapegrad/nn/holder.h"
#include "tapegrad/nn/key_map.h"

namespace tapegrad::nn {

// Named generators in registration order (a module's random state, e.g. dropout masks).
using NamedGenerators = std::vector<std::pair<std::string, Generator*>>;

// The generator a module's options name (their .generator(&gen)), or the calling thread's default
// generator when they name none. Module constructors draw their initial values from it.
inline Generator& generator_or_default(Generator* gen) { return gen != nullptr ? *gen : default_generator(); }

// What a non-strict load_state_dict left out, as torch's _IncompatibleKeys.
struct IncompatibleKeys {
  std::vector<std::string> missing_keys;     // the module's entries the state does not have
  std::vector<std::string> unexpected_keys;  // the state's entries the module does not have
  bool empty() const { return missing_keys.empty() && unexpected_keys.empty(); }
};

struct LoadOptions {
  TAPEGRAD_ARG(bool, strict) = true;
  TAPEGRAD_ARG(KeyMap, key_map);  // from the state's names to the module's; empty: the same names
};

class Module;

// What Module::register_parameter returns: the parameter's handle (a Tensor). Assigned to a member of
// the module (`weight_ = register_parameter("weight", ...)`), it tells the module where that member
// is, and the module refuses a member that was later re-seated (see register_parameter).
class RegisteredParameter : public Tensor {
 public:
  using binds_slot = void;
  RegisteredParameter(const Tensor& value, Module& owner, std::size_t index)
      : Tensor(value), owner_(&owner), index_(index) {}
  void bind(const Tensor& slot) const;

 private:
  Module* owner_;
  std::size_t index_;
};

class Module {
 public:
  virtual ~Module() = default;
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // --- the tree ---
  NamedTensors named_parameters(bool recurse = true) const;
  TensorList parameters(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  TensorList buffers(bool recurse = true) const;
  // The generators registered here and (recurse) in descendants, own before children's, with dotted
  // names ("encoder.layers.0.self_attn.dropout_generator"); a generator reached twice is listed once.
  // A trainer checkpoints these so that a resumed run draws the same dropout masks.
  NamedGenerators named_generators(bool recurse = true) const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const { return children_; }
  // This module ("") and every descendant, depth first, with dotted names.
  std::vector<std::pair<std::string, const Module*>> named_modules() const;
  // Number of parameter elements (each shared parameter counted once).
  std::int64_t num_parameters() const;

  // --- modes ---
  // Sets training mode here and in every descendant (dropout reads it; gradients do not).
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Zeroes (or drops) the gradient of every parameter.
  void zero_grad(bool set_to_none = false);

  // Converts every parameter and buffer to dtype in place: handles held elsewhere see the change,
  // then calls converted_to(dtype) on this module and every descendant. Used to run a model in
  // float64 for gradcheck.
  void to(DType dtype);

  // --- forward hooks ---
  // Hooks run around forward when the module is called through its handle or UnaryModule's
  // operator() (forward_hooks.h), pre-hooks first, each kind in registration order; a direct
  // forward() call skips them. Each registration returns a handle whose remove() unregisters the
  // hook: removing twice does nothing, and a handle outliving the module does nothing. Hooks are not
  // state: state_dict, load_state_dict and parameters() ignore them. Each kind's list is copied when
  // it starts running (as in PyTorch): a hook that registers or removes a hook of its own kind
  // changes the next call, while a forward hook a pre-hook registers runs after this call's forward.
  // ValueError for an empty std::function or null function pointer.

  // fn(Module& module, const TensorList& tensor_args) runs before forward. tensor_args are the
  // call's arguments of type Tensor, in order; other arguments (options, offsets, cache pointers)
  // pass through unseen. fn returns void, or std::optional<TensorList>: a list of the same length
  // replaces the Tensor arguments for the next pre-hook, forward and the forward hooks (another
  // length is a ValueError naming the module and both counts); std::nullopt keeps them.
  //   fc->register_forward_pre_hook(
  //       [](nn::Module&, const TensorList& in) { return std::optional<TensorList>({in[0] * 2.0}); });
  template <class Fn>
  RemovableHandle register_forward_pre_hook(Fn fn);

  // fn(Module& module, const TensorList& tensor_args, const Output& output) runs after forward, with
  // the Tensor arguments forward received. fn returns void, or std::optional<Output>: a value replaces
  // the output for the next hook and the caller. Output is Tensor unless named, for a forward that
  // returns a struct:
  //   attn->register_forward_hook<nn::AttentionResult>(
  //       [&](nn::Module&, const TensorList&, const nn::AttentionResult& r) { maps.push_back(r.weights); });
  // A call whose forward returns another type than Output throws a TypeError naming the module and
  // both types (the type forward returns is known only at the call, so the check happens there).
  template <class Output = Tensor, class Fn>
  RemovableHandle register_forward_hook(Fn fn);

  // A forward hook that observes the output of any type and cannot replace it, for tools that walk
  // every module of a model whatever its forward returns (nn::summarize): fn(Module& module, const
  // TensorList& tensor_args, const void* output, const std::type_info& output_type), `output` pointing
  // at an object of type output_type. It runs in order with the typed forward hooks.
  using ObservingForwardHook = std::function<void(Module& module, const TensorList& tensor_args, const void* output,
                                                  const std::type_info& output_type)>;
  RemovableHandle register_forward_hook_any(ObservingForwardHook fn);

  // True when a forward pre-hook or forward hook is registered.
  bool has_forward_hooks() const noexcept {
    return (forward_pre_hooks_ && !forward_pre_hooks_->empty()) || (forward_hooks_ && !forward_hooks_->empty());
  }

  // --- copies ---
  // A deep copy: a new module built as this one was (its handle's constructor arguments, kept by the
  // handle; module arguments are cloned in turn), then given copies of this module's parameters, buffers,
  // dtype, requires_grad flags, generator states and training modes. Nothing is shared with this module;
  // hooks are not copied. Building the copy draws its initial values as construction does: the default
  // generator is put back afterwards, a generator named in the options is drawn from. TypeError when the
  // module was not made through a handle (std::make_shared), or by a constructor with an argument that
  // cannot be copied. A handle's clone() returns the copy as its own type:
  //   nn::Linear twin = fc.clone();
  std::shared_ptr<Module> clone() const;

  // This module as T (an Impl type: as<LinearImpl>()), or nullptr when it is another type.
  template <class T>
  T* as() {
    return dynamic_cast<T*>(this);
  }
  template <class T>
  const T* as() const {
    return dynamic_cast<const T*>(this);
  }

  // The module's type for messages: its class name without namespaces and without a trailing "Impl"
  // ("Linear", "MultiHeadAttention", "Mlp" for a user's MlpImpl). Override to name it otherwise.
  virtual std::string name() const;

  // --- state ---
  // Parameters then buffers, by hierarchical name.
  NamedTensors state_dict() const;
  // Copies values in. Strict: every name must match both ways; otherwise the names that do not are
  // returned (missing_keys, unexpected_keys) and the rest is loaded. Shapes must match always; a
  // floating-point entry is converted to the module's floating dtype (float32, float64, bfloat16; the
  // module keeps its dtype), other dtype mismatches are refused. Every problem is found before anything
  // is copied, and on any error nothing is: one exception names every problem and entry, a ShapeError when
  // all are shapes, a TypeError when all are dtypes, else a ValueError.
  IncompatibleKeys load_state_dict(const NamedTensors& state, bool strict = true);
  // The same with a KeyMap from the state's names and layouts to the module's (key_map.h): messages and
  // unexpected_keys give the state's names, missing_keys the module's.
  IncompatibleKeys load_state_dict(const NamedTensors& state, const LoadOptions& options);

 protected:
  // The module clone() fills with this one's state: by default one built as this one was (the
  // handle's constructor arguments). Containers override it to copy what they hold.
  virtual std::shared_ptr<Module> copy_structure() const;

  // For containers: a child or parameter removed, or given another module or tensor under its name
  // and position. IndexError when the name is not registered.
  void unregister_module(const std::string& name);
  void unregister_parameter(const std::string& name);
  void replace_module(const std::string& name, std::shared_ptr<Module> module);
  Tensor replace_parameter(const std::string& name, const Tensor& value);

  // Called by to(dtype) once every parameter and buffer has the new dtype: a module whose state is
  // derived from values it keeps elsewhere (a table computed in double) refills it here.
  virtual void converted_to(DType /*dtype*/) {}

  // Registers a parameter (made a leaf that requires grad) and returns its handle. Assigned to a
  // member (`weight_ = register_parameter("weight", ...)`), the handle lets the module watch that
  // member: assigning it another tensor later (`mlp->weight_ = zeros(...)`) would leave
  // parameters(), state_dict() and the optimisers built from them with the old one, so the module's
  // next forward through its handle, parameters(), named_parameters() or state_dict() throws a
  // ValueError naming the module and the parameter instead. Change a parameter's values in place
  // (under NoGradGuard: weight_.copy_(value)) or with load_state_dict. Members of the Impl object
  // of modules built or wrapped by a handle (nn::Linear, TAPEGRAD_MODULE's) are watched; handles
  // kept elsewhere (a std::vector of parameters) and modules never given a handle are not.
  RegisteredParameter register_parameter(const std::string& name, const Tensor& value, bool requires_grad = true);
  // Registers a tensor that is state but not trained (e.g. a fixed position table).
  Tensor register_buffer(const std::string& name, const Tensor& value);
  // Registers a generator the module draws from (not owned: it is normally a member of the module, so
  // it lives exactly as long as the registration).
  Generator& register_generator(const std::string& name, Generator& gen);
  // Registers a child module and returns what it was given: a handle (nn::Linear) or a shared_ptr.
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }
  template <class Holder, std::enable_if_t<is_module_holder_v<Holder>, int> = 0>
  Holder register_module(const std::string& name, Holder module) {
    add_child(name, module.is_empty() ? nullptr : module.ptr());
    return module;
  }

 private:
  friend struct detail::ForwardCall;
  template <class Impl>
  friend class ModuleHolder;
  friend class detail::ForwardScope;

  // Runs the pre-hooks on the call's Tensor arguments, replacing them where a hook returns tensors.
  void run_forward_pre_hooks(TensorList& tensor_args);
  // Runs the forward hooks on the output (of type output_type), replacing it where a hook returns one.
  void run_forward_hooks(const TensorList& tensor_args, void* output, const std::type_info& output_type);

  friend class RegisteredParameter;
  void notify_converted(DType dtype);
  // Where parameter `index` is kept, from RegisteredParameter::bind.
  void bind_parameter_slot(std::size_t index, const Tensor* slot);
  // Called by a handle that builds or wraps the module, with the extent of its Impl object: slots
  // outside it (a handle kept in a local variable or a vector's storage) are forgotten without being
  // read, later binds outside it are ignored, and the rest are watched from now on.
  void set_object_extent(const void* begin, std::size_t size);
  bool in_object(const Tensor* slot) const;
  bool watched() const { return object_begin_ != nullptr; }  // set_object_extent has run
  // ValueError when a watched member holds another tensor than its registered parameter.
  void check_parameter_slots() const;
  void check_new_name(const std::string& name, const char* what) const;
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void collect(const std::string& prefix, bool params, bool recurse, NamedTensors& out) const;
  void collect_generators(const std::string& prefix, bool recurse, NamedGenerators& out) const;

  NamedTensors parameters_;
  std::vector<const Tensor*> parameter_slots_;  // the member each parameter was assigned to, or null
  const void* object_begin_ = nullptr;          // the Impl object's extent, from set_object_extent
  std::size_t object_size_ = 0;
  NamedTensors buffers_;
  NamedGenerators generators_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
  // Builds a module as this one was built (set by the handle that made it; empty otherwise).
  std::function<std::shared_ptr<Module>()> factory_;
  // Created at the first registration; a handle holds a weak_ptr to its list.
  std::shared_ptr<HookList<detail::StoredPreHook>> forward_pre_hooks_;
  std::shared_ptr<HookList<detail::StoredForwardHook>> forward_hooks_;
};

template <class Fn>
RemovableHandle Module::register_forward_pre_hook(Fn fn) {
  static_assert(std::is_invocable_v<Fn&, Module&, const TensorList&>,
                "a forward pre-hook is called as fn(Module&, const TensorList& tensor_args)");
  using Result = std::invoke_result_t<Fn&, Module&, const TensorList&>;
  static_assert(std::is_void_v<Result> || std::is_convertible_v<Result, std::optional<TensorList>>,
                "a forward pre-hook returns void or std::optional<TensorList>");
  if (detail::is_null_callable(fn)) throw ValueError(name() + ": register_forward_pre_hook: the hook is empty");
  if (!forward_pre_hooks_) forward_pre_hooks_ = std::make_shared<HookList<detail::StoredPreHook>>();
  return HookList<detail::StoredPreHook>::add(
      forward_pre_hooks_,
      [fn = std::move(fn)](Module& module, const TensorList& tensor_args) mutable -> std::optional<TensorList> {
        if constexpr (std::is_void_v<Result>) {
          fn(module, tensor_args);
          return std::nullopt;
        } else {
          return fn(module, tensor_args);
        }
      });
}

template <class Output, class Fn>
RemovableHandle Module::register_forward_hook(Fn fn) {
  static_assert(std::is_same_v<Output, std::decay_t<Output>>, "name the output type without const or &");
  static_assert(std::is_invocable_v<Fn&, Module&, const TensorList&, const Output&>,
                "a forward hook is called as fn(Module&, const TensorList& tensor_args, const Output& output)");
  using Result = std::invoke_result_t<Fn&, Module&, const TensorList&, const Output&>;
  static_assert(std::is_void_v<Result> || std::is_convertible_v<Result, std::optional<Output>>,
                "a forward hook returns void or std::optional<Output>");
  if (detail::is_null_callable(fn)) throw ValueError(name() + ": register_forward_hook: the hook is empty");
  if (!forward_hooks_) forward_hooks_ = std::make_shared<HookList<detail::StoredForwardHook>>();
  return HookList<detail::StoredForwardHook>::add(
      forward_hooks_, [fn = std::move(fn)](Module& module, const TensorList& tensor_args, void* output,
                                           const std::type_info& output_type) mutable {
        if (output_type != typeid(Output)) detail::throw_forward_hook_type_error(module, typeid(Output), output_type);
        Output& out = *static_cast<Output*>(output);
        if constexpr (std::is_void_v<Result>) {
          fn(module, tensor_args, std::as_const(out));
        } else {
          std::optional<Output> replacement = fn(module, tensor_args, std::as_const(out));
          if (replacement) out = std::move(*replacement);
        }
      });
}

// A module whose forward maps one tensor to one tensor; Sequential composes these. operator() runs
// forward with the module's hooks, as a handle's call does.
class UnaryModule : public Module {
 public:
  virtual Tensor forward(const Tensor& x) = 0;
  Tensor operator()(const Tensor& x) { return detail::ForwardCall::call(*this, x); }
};

}  // namespace tapegrad::nn
