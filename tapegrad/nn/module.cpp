#include "tapegrad/nn/module.h"

#include <algorithm>
#include <cstdlib>
#include <typeinfo>
#include <unordered_map>
#include <unordered_set>

#if __has_include(<cxxabi.h>)
#include <cxxabi.h>
#endif

#include "tapegrad/autograd/storage.h"

namespace tapegrad::nn {

void Module::check_new_name(const std::string& name, const char* what) const {
  if (name.empty() || name.find('.') != std::string::npos)
    throw ValueError(std::string("Module::") + what + ": name \"" + name + "\" must be non-empty and contain no '.'");
  auto taken = [&](const auto& list) {
    return std::any_of(list.begin(), list.end(), [&](const auto& entry) { return entry.first == name; });
  };
  if (taken(parameters_) || taken(buffers_) || taken(generators_) || taken(children_))
    throw ValueError(std::string("Module::") + what + ": the name \"" + name + "\" is already registered");
}

Tensor Module::register_parameter(const std::string& name, const Tensor& value, bool requires_grad) {
  check_new_name(name, "register_parameter");
  if (!value.defined()) throw ValueError("Module::register_parameter: \"" + name + "\" is an undefined tensor");
  if (!value.is_leaf())
    throw GraphError("Module::register_parameter: \"" + name + "\" must be a leaf tensor (detach it first)");
  if (requires_grad) value.requires_grad_(true);
  parameters_.emplace_back(name, value);
  return value;
}

Tensor Module::register_buffer(const std::string& name, const Tensor& value) {
  check_new_name(name, "register_buffer");
  if (!value.defined()) throw ValueError("Module::register_buffer: \"" + name + "\" is an undefined tensor");
  buffers_.emplace_back(name, value.detach());
  return buffers_.back().second;
}

Generator& Module::register_generator(const std::string& name, Generator& gen) {
  check_new_name(name, "register_generator");
  generators_.emplace_back(name, &gen);
  return gen;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name, "register_module");
  if (!module) throw ValueError("Module::register_module: \"" + name + "\" is a null module");
  children_.emplace_back(name, std::move(module));
}

void Module::collect(const std::string& prefix, bool params, bool recurse, NamedTensors& out) const {
  for (const auto& [name, t] : params ? parameters_ : buffers_) out.emplace_back(prefix + name, t);
  if (!recurse) return;
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", params, true, out);
}

void Module::collect_generators(const std::string& prefix, bool recurse, NamedGenerators& out) const {
  for (const auto& [name, gen] : generators_) out.emplace_back(prefix + name, gen);
  if (!recurse) return;
  for (const auto& [name, child] : children_) child->collect_generators(prefix + name + ".", true, out);
}

NamedGenerators Module::named_generators(bool recurse) const {
  NamedGenerators all;
  collect_generators("", recurse, all);
  // A module shared by two parents would otherwise be restored twice under two names.
  std::unordered_set<const Generator*> seen;
  NamedGenerators out;
  for (auto& entry : all)
    if (seen.insert(entry.second).second) out.push_back(std::move(entry));
  return out;
}

namespace {

// Keeps the first occurrence of each tensor (a module shared by two parents, tied weights).
NamedTensors unique_tensors(NamedTensors all) {
  std::unordered_set<const TensorImpl*> seen;
  NamedTensors out;
  for (auto& entry : all)
    if (seen.insert(entry.second.impl()).second) out.push_back(std::move(entry));
  return out;
}

TensorList values(const NamedTensors& named) {
  TensorList out;
  for (const auto& entry : named) out.push_back(entry.second);
  return out;
}

}  // namespace

NamedTensors Module::named_parameters(bool recurse) const {
  NamedTensors all;
  collect("", true, recurse, all);
  return unique_tensors(std::move(all));
}
TensorList Module::parameters(bool recurse) const { return values(named_parameters(recurse)); }

NamedTensors Module::named_buffers(bool recurse) const {
  NamedTensors all;
  collect("", false, recurse, all);
  return unique_tensors(std::move(all));
}
TensorList Module::buffers(bool recurse) const { return values(named_buffers(recurse)); }

std::vector<std::pair<std::string, const Module*>> Module::named_modules() const {
  std::vector<std::pair<std::string, const Module*>> out;
  std::vector<std::pair<std::string, const Module*>> stack{{"", this}};
  while (!stack.empty()) {
    auto [name, module] = stack.back();
    stack.pop_back();
    out.emplace_back(name, module);
    for (auto it = module->children_.rbegin(); it != module->children_.rend(); ++it)
      stack.emplace_back(name.empty() ? it->first : name + "." + it->first, it->second.get());
  }
  return out;
}

std::int64_t Module::num_parameters() const {
  std::int64_t n = 0;
  for (const Tensor& p : parameters()) n += p.numel();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::zero_grad(bool set_to_none) {
  for (const Tensor& p : parameters()) p.zero_grad(set_to_none);
}

void Module::to(DType dtype) {
  NoGradGuard guard;
  auto convert = [dtype](const Tensor& t) {
    if (t.dtype() == dtype || !t.is_floating_point()) return;
    Tensor converted = t.to(dtype).contiguous();
    TensorImpl& impl = *t.impl();
    converted.impl()->storage->continue_version_from(*impl.storage);
    impl.storage = converted.impl()->storage;
    impl.shape = converted.shape();
    impl.strides = converted.strides();
    impl.offset = converted.offset();
    impl.dtype = dtype;
    impl.grad.reset();
  };
  for (const Tensor& p : parameters()) convert(p);
  for (const Tensor& b : buffers()) convert(b);
  notify_converted(dtype);
}

void Module::notify_converted(DType dtype) {
  converted_to(dtype);
  for (const auto& child : children_)
    if (child.second) child.second->notify_converted(dtype);
}

NamedTensors Module::state_dict() const {
  NamedTensors state = named_parameters();
  for (auto& entry : named_buffers()) state.push_back(std::move(entry));
  return state;
}

void Module::load_state_dict(const NamedTensors& state, bool strict) {
  std::unordered_map<std::string, const Tensor*> given;
  for (const auto& [name, t] : state) {
    if (!given.emplace(name, &t).second) throw ValueError("load_state_dict: the entry \"" + name + "\" appears twice");
  }
  const NamedTensors own = state_dict();
  std::vector<std::string> missing;
  for (const auto& [name, target] : own) {
    auto it = given.find(name);
    if (it == given.end()) {
      missing.push_back(name);
      continue;
    }
    const Tensor& source = *it->second;
    if (source.shape() != target.shape())
      throw ShapeError("load_state_dict: \"" + name + "\" has shape " + source.shape().str() + " in the state but " +
                       target.shape().str() + " in the module");
    // Floating dtypes convert on copy (float64 state into a float32 module and back, as torch's copy_); other
    // mismatches (an integer or bool entry against a floating one, or the reverse) are refused.
    if (source.dtype() != target.dtype() && !(source.is_floating_point() && target.is_floating_point()))
      throw TypeError("load_state_dict: \"" + name + "\" is " + dtype_name(source.dtype()) + " in the state but " +
                      dtype_name(target.dtype()) + " in the module");
  }
  if (strict) {
    if (!missing.empty()) throw ValueError("load_state_dict: missing entry \"" + missing.front() + "\"");
    for (const auto& entry_in : state) {
      const std::string& name = entry_in.first;
      const bool known = std::any_of(own.begin(), own.end(), [&](const auto& entry) { return entry.first == name; });
      if (!known) throw ValueError("load_state_dict: unexpected entry \"" + name + "\"");
    }
  }
  // Everything checked: now copy, so a failed load changes nothing.
  NoGradGuard guard;
  for (const auto& [name, target] : own) {
    auto it = given.find(name);
    if (it != given.end()) target.copy_(*it->second);
  }
}

// ---------------------------------------------------------------- type names

std::string detail::readable_type_name(const std::type_info& type) {
#if __has_include(<cxxabi.h>)
  int status = 0;
  char* demangled = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  if (status == 0 && demangled != nullptr) {
    std::string out(demangled);
    std::free(demangled);
    return out;
  }
#endif
  return type.name();
}

std::string Module::name() const {
  std::string type = detail::readable_type_name(typeid(*this));
  // Drop the namespaces (the last "::" before any template arguments), then the "Impl" suffix.
  const std::size_t scope = type.rfind("::", type.find('<'));
  if (scope != std::string::npos) type.erase(0, scope + 2);
  const std::string suffix = "Impl";
  if (type.size() > suffix.size() && type.compare(type.size() - suffix.size(), suffix.size(), suffix) == 0)
    type.erase(type.size() - suffix.size());
  return type;
}

// ---------------------------------------------------------------- forward hooks

void Module::run_forward_pre_hooks(TensorList& tensor_args) {
  if (!forward_pre_hooks_ || forward_pre_hooks_->empty()) return;
  // A copy: a hook may remove itself or register another while the list is being run.
  const auto hooks = forward_pre_hooks_->hooks();
  for (const auto& entry : hooks) {
    std::optional<TensorList> replacement = entry.second(*this, tensor_args);
    if (!replacement) continue;
    if (replacement->size() != tensor_args.size()) {
      const std::size_t n = tensor_args.size();
      throw ValueError(name() + ": a forward pre-hook returned " + std::to_string(replacement->size()) +
                       " tensors for a call with " + std::to_string(n) + " Tensor argument" + (n == 1 ? "" : "s"));
    }
    tensor_args = std::move(*replacement);
  }
}

RemovableHandle Module::register_forward_hook_any(ObservingForwardHook fn) {
  if (!fn) throw ValueError(name() + ": register_forward_hook_any: the hook is empty");
  if (!forward_hooks_) forward_hooks_ = std::make_shared<HookList<detail::StoredForwardHook>>();
  return HookList<detail::StoredForwardHook>::add(
      forward_hooks_,
      [fn = std::move(fn)](Module& module, const TensorList& tensor_args, void* output,
                           const std::type_info& output_type) { fn(module, tensor_args, output, output_type); });
}

void Module::run_forward_hooks(const TensorList& tensor_args, void* output, const std::type_info& output_type) {
  if (!forward_hooks_ || forward_hooks_->empty()) return;
  const auto hooks = forward_hooks_->hooks();  // a copy, as in run_forward_pre_hooks
  for (const auto& entry : hooks) entry.second(*this, tensor_args, output, output_type);
}

namespace detail {

void throw_forward_hook_type_error(const Module& module, const std::type_info& expected, const std::type_info& got) {
  throw TypeError(module.name() + ": a forward hook registered for output type " + readable_type_name(expected) +
                  " was called with the output of a forward returning " + readable_type_name(got) +
                  " (name the type: register_forward_hook<" + readable_type_name(got) + ">)");
}

}  // namespace detail

}  // namespace tapegrad::nn
