#pragma once
// Module handles and chainable options, the idiom of PyTorch's C++ API (TORCH_MODULE, TORCH_ARG).
//
// ModuleHolder<Impl> holds a std::shared_ptr<Impl>: copying a handle shares the module, and
// calling it runs impl->forward(...) with the module's forward hooks (module.h). TAPEGRAD_MODULE(Linear)
// declares the handle class Linear over LinearImpl, so users write values, never std::make_shared or
// (*ptr)(x):
//
//   nn::Linear fc(64, 10);                                   // LinearImpl(64, 10)
//   nn::Linear fc2{nn::LinearOptions(64, 10).bias(false)};   // LinearImpl(options)
//   Tensor y = fc(x);                                        // fc->forward(x), with fc's hooks
//   nn::Linear empty{nullptr};                               // no module yet (assign one later)
//
// TAPEGRAD_ARG(type, name) (tapegrad/autograd/arg.h, shared with optim's options) declares an
// option: a member name_, a chainable setter name(value) returning *this, and a getter name():
//
//   struct LinearOptions {
//     LinearOptions(std::int64_t in, std::int64_t out) : in_features_(in), out_features_(out) {}
//     TAPEGRAD_ARG(std::int64_t, in_features);
//     TAPEGRAD_ARG(bool, bias) = true;
//   };

#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#include "tapegrad/autograd/arg.h"
#include "tapegrad/autograd/error.h"
#include "tapegrad/nn/forward_hooks.h"

namespace tapegrad::nn {

template <class Impl>
class ModuleHolder;

namespace detail {

template <class Impl>
std::true_type holder_test(const ModuleHolder<Impl>*);
std::false_type holder_test(...);

}  // namespace detail

// True for ModuleHolder<Impl> and the classes TAPEGRAD_MODULE derives from it.
template <class T>
constexpr bool is_module_holder_v = decltype(detail::holder_test(std::declval<std::decay_t<T>*>()))::value;

namespace detail {

// A handle's constructor arguments as clone() keeps them: a module handle is cloned when the copy is built,
// a Tensor is kept as its shape and dtype only (the copy's values come from the original's state, and a
// large table is not held twice), anything else is copied.
template <class T, class = void>
struct SavedArgOf {
  using type = std::decay_t<T>;
};
template <class T>
struct SavedArgOf<T, std::enable_if_t<std::is_same_v<std::decay_t<T>, Tensor>>> {
  using type = std::pair<Shape, DType>;
};
template <class T>
using SavedArg = typename SavedArgOf<T>::type;

template <class T>
SavedArg<T> save_arg(const T& arg) {
  if constexpr (std::is_same_v<std::decay_t<T>, Tensor>) return {arg.shape(), arg.dtype()};
  else return arg;
}
// The argument to build the copy with: a saved copy by reference (a constructor may take it as T&).
inline Tensor restore_arg(std::pair<Shape, DType>& saved) { return zeros(saved.first, saved.second); }
template <class T>
decltype(auto) restore_arg(T& saved) {
  if constexpr (is_module_holder_v<T>) return saved.is_empty() ? T(saved) : T(saved.clone());
  else return (saved);
}

}  // namespace detail

template <class Impl>
class ModuleHolder {
 public:
  using ImplType = Impl;

  // Default-constructs the module when Impl has a default constructor (as nn::Sequential does);
  // otherwise a handle must be given arguments or nullptr.
  template <class I = Impl, std::enable_if_t<std::is_default_constructible_v<I>, int> = 0>
  ModuleHolder() : impl_(std::make_shared<I>()) {
    impl_->factory_ = [] { return std::make_shared<I>(); };
    impl_->set_object_extent(impl_.get(), sizeof(I));
  }
  // An empty handle, to be assigned later (e.g. a member set in the owner's constructor body).
  ModuleHolder(std::nullptr_t) {}  // NOLINT(google-explicit-constructor)
  // Wraps a module that already exists (shares it); from now on its parameter members are watched
  // (Module::register_parameter) unless an earlier handle already set that up.
  ModuleHolder(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {  // NOLINT(google-explicit-constructor)
    if (impl_) impl_->set_object_extent(impl_.get(), sizeof(Impl));
  }
  // Constructs Impl from the arguments: nn::Linear(64, 10) is std::make_shared<LinearImpl>(64, 10).
  // A single argument that is already a handle of this Impl, nullptr or a shared_ptr picks the
  // constructors above (a copy shares); handles of other modules are arguments (nn::Sequential(fc)).
  // The arguments are forwarded, so a braced default ({}) has to be spelled out (e.g.
  // nn::AttentionForwardOptions()), in a call through the handle as well.
  template <class Head, class... Tail,
            std::enable_if_t<!(sizeof...(Tail) == 0 && (std::is_base_of_v<ModuleHolder<Impl>, std::decay_t<Head>> ||
                                                        std::is_same_v<std::decay_t<Head>, std::nullptr_t> ||
                                                        std::is_convertible_v<Head, std::shared_ptr<Impl>>)),
                             int> = 0>
  explicit ModuleHolder(Head&& head, Tail&&... tail) {
    // How to build another like it, for clone(): copies of the arguments, taken before they are forwarded.
    std::function<std::shared_ptr<Impl>()> factory;
    if constexpr (std::is_copy_constructible_v<detail::SavedArg<Head>> &&
                  (std::is_copy_constructible_v<detail::SavedArg<Tail>> && ...)) {
      factory = [saved = std::make_tuple(detail::save_arg(head), detail::save_arg(tail)...)]() mutable {
        return std::apply([](auto&... args) { return std::make_shared<Impl>(detail::restore_arg(args)...); }, saved);
      };
    }
    impl_ = std::make_shared<Impl>(std::forward<Head>(head), std::forward<Tail>(tail)...);
    if (factory) impl_->factory_ = std::move(factory);
    impl_->set_object_extent(impl_.get(), sizeof(Impl));
  }

  // A deep copy of the module (Module::clone), as a handle of the same type: nn::Linear twin = fc.clone();
  std::shared_ptr<Impl> clone() const { return std::static_pointer_cast<Impl>(checked()->clone()); }

  // Calls the module's forward with the arguments, with the module's forward pre-hooks and forward
  // hooks around it (forward_hooks.h; a module without hooks pays one check of two empty lists).
  // fc->forward(x) calls forward alone, without the hooks. Like operator->, it is const: a const
  // handle is a handle that cannot be re-seated, not a const module.
  template <class... Args>
  decltype(auto) operator()(Args&&... args) const {
    return detail::ForwardCall::call(*checked(), std::forward<Args>(args)...);
  }

  // The module's operator[] (a container's entries: list[0], dict["key"]).
  template <class Arg>
  decltype(auto) operator[](Arg&& arg) const {
    return (*checked())[std::forward<Arg>(arg)];
  }

  Impl* operator->() const { return checked(); }
  Impl& operator*() const { return *checked(); }
  Impl* get() const { return checked(); }
  const std::shared_ptr<Impl>& ptr() const {
    checked();
    return impl_;
  }
  bool is_empty() const noexcept { return impl_ == nullptr; }
  explicit operator bool() const noexcept { return impl_ != nullptr; }

 private:
  Impl* checked() const {
    if (!impl_) throw ValueError("ModuleHolder: the module handle is empty (nullptr); assign a module first");
    return impl_.get();
  }

  std::shared_ptr<Impl> impl_;
};

}  // namespace tapegrad::nn

// Declares the handle class Name over NameImpl (which must be declared before).
#define TAPEGRAD_MODULE(Name)                                     \
  class Name : public ::tapegrad::nn::ModuleHolder<Name##Impl> {  \
   public:                                                        \
    using ::tapegrad::nn::ModuleHolder<Name##Impl>::ModuleHolder; \
  }
