#pragma once
// TAPEGRAD_ARG(type, name): one option of an options struct, as a private member `name_` with a chainable setter
// `name(value)` returning the struct and a getter `name()`. Defaults go after the macro:
//
//   struct AdamOptions {
//     explicit AdamOptions(double lr = 1e-3) : lr_(lr) {}
//     TAPEGRAD_ARG(double, lr);
//     TAPEGRAD_ARG(double, eps) = 1e-8;
//   };
//   auto o = AdamOptions(3e-4).eps(1e-6);  // o.lr() == 3e-4
//
// It lives in autograd, the lowest layer, so nn's options (nn/holder.h) and optim's share one macro. The macro
// leaves the struct in private access; write it last or reopen `public:` after it.

#include <type_traits>
#include <utility>

// std::add_const_t<T>& rather than const T&, so the macro argument is never spliced next to a const.
#define TAPEGRAD_ARG(T, name)                                          \
 public:                                                               \
  auto name(std::add_const_t<T>& new_##name)->decltype(*this) {        \
    this->name##_ = new_##name;                                        \
    return *this;                                                      \
  }                                                                    \
  auto name(T&& new_##name)->decltype(*this) {                         \
    this->name##_ = std::move(new_##name);                             \
    return *this;                                                      \
  }                                                                    \
  std::add_const_t<T>& name() const noexcept { return this->name##_; } \
  T& name() noexcept { return this->name##_; }                         \
                                                                       \
 private:                                                              \
  T name##_ /* NOLINT */
