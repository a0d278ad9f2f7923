#include "tapegrad/nn/module.h"

#include <algorithm>
#include <cstdint>
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
    throw ValueError(message("Module::", what, ": name \"", name, "\" must be non-empty and contain no '.'"));
  auto taken = [&](const auto& list) {
    return std::any_of(list.begin(), list.end(), [&](const auto& entry) { return entry.first == name; });
  };
  if (taken(parameters_) || taken(buffers_) || taken(generators_) || taken(children_))
    throw ValueError(message("Module::", what, ": the name \"", name, "\" is already registered"));
}

RegisteredParameter Module::register_parameter(const std::string& name, const Tensor& value, bool requires_grad) {
  check_new_name(name, "register_parameter");
  if (!value.defined()) throw ValueError("Module::register_parameter: \"" + name + "\" is an undefined tensor");
  if (!value.is_leaf())
    throw GraphError("Module::register_parameter: \"" + name + "\" must be a leaf tensor (detach it first)");
  if (requires_grad) value.requires_grad_(true);
  parameters_.emplace_back(name, value);
  parameter_slots_.push_back(nullptr);
  return RegisteredParameter(value, *this, parameters_.size() - 1);
}

void RegisteredParameter::bind(const Tensor& slot) const { owner_->bind_parameter_slot(index_, &slot); }

bool Module::in_object(const Tensor* slot) const {
  // Compared as integers: a slot may lie in another object (a local variable, a vector's storage).
  const auto address = reinterpret_cast<std::uintptr_t>(slot), low = reinterpret_cast<std::uintptr_t>(object_begin_);
  return address >= low && address - low + sizeof(Tensor) <= object_size_;
}

void Module::bind_parameter_slot(std::size_t index, const Tensor* slot) {
  if (index >= parameter_slots_.size()) return;
  // Once the extent is known, a slot outside it (a parameter registered later, in forward, and
  // kept in a local) is not taken at all.
  if (watched() && !in_object(slot)) return;
  parameter_slots_[index] = slot;
}

void Module::set_object_extent(const void* begin, std::size_t size) {
  if (watched()) return;  // the first handle knew the type it built or wrapped; later ones may name a base
  object_begin_ = begin;
  object_size_ = size;
  for (const Tensor*& slot : parameter_slots_)
    if (slot != nullptr && !in_object(slot)) slot = nullptr;
}

void Module::check_parameter_slots() const {
  if (!watched()) return;
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    const Tensor* slot = parameter_slots_[i];
    if (slot == nullptr || slot->impl() == parameters_[i].second.impl()) continue;
    const std::string& name = parameters_[i].first;
    throw ValueError(this->name() + ": parameter \"" + name +
                     "\" was re-seated: its member now holds another tensor than the registered one, which "
                     "parameters(), state_dict() and the optimisers built from them would go on using. Change "
                     "the values in place (under NoGradGuard: copy_) or with load_state_dict");
  }
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

namespace {

// Where `name` is in a registration list, or an IndexError naming the module and the list's names.
template <class List>
auto registered(List& list, const std::string& name, const std::string& owner, const char* what) {
  const auto at = std::find_if(list.begin(), list.end(), [&](const auto& entry) { return entry.first == name; });
  if (at == list.end()) {
    std::string names;
    for (const auto& entry : list) names += (names.empty() ? "" : ", ") + entry.first;
    throw IndexError(
        message(owner, ": no ", what, " \"", name, "\" (registered: ", names.empty() ? "none" : names, ")"));
  }
  return at;
}

}  // namespace

void Module::unregister_module(const std::string& name) {
  children_.erase(registered(children_, name, this->name(), "module"));
}

void Module::unregister_parameter(const std::string& name) {
  const auto at = registered(parameters_, name, this->name(), "parameter");
  parameter_slots_.erase(parameter_slots_.begin() + (at - parameters_.begin()));
  parameters_.erase(at);
}

void Module::replace_module(const std::string& name, std::shared_ptr<Module> module) {
  if (!module) throw ValueError("Module::register_module: \"" + name + "\" is a null module");
  registered(children_, name, this->name(), "module")->second = std::move(module);
}

Tensor Module::replace_parameter(const std::string& name, const Tensor& value) {
  if (!value.defined()) throw ValueError("Module::register_parameter: \"" + name + "\" is an undefined tensor");
  if (!value.is_leaf())
    throw GraphError("Module::register_parameter: \"" + name + "\" must be a leaf tensor (detach it first)");
  const auto at = registered(parameters_, name, this->name(), "parameter");
  value.requires_grad_(true);
  at->second = value;
  parameter_slots_[static_cast<std::size_t>(at - parameters_.begin())] = nullptr;
  return value;
}

void Module::collect(const std::string& prefix, bool params, bool recurse, NamedTensors& out) const {
  if (params) check_parameter_slots();
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

IncompatibleKeys Module::load_state_dict(const NamedTensors& state, bool strict) {
  return load_state_dict(state, LoadOptions().strict(strict));
}

IncompatibleKeys Module::load_state_dict(const NamedTensors& state, const LoadOptions& options) {
  const KeyMap& map = options.key_map();
  // The state's entries under the module's names, each with the name the caller knows it by.
  struct Entry {
    std::string source_name;
    Tensor value;
  };
  std::unordered_map<std::string, Entry> given;
  std::vector<std::string> given_order;
  for (const auto& [name, t] : state) {
    if (map.ignores(name)) continue;
    const std::string key = map.to_module_key(name);
    auto [it, inserted] = given.emplace(key, Entry{name, t});
    if (inserted) {
      given_order.push_back(key);
    } else if (it->second.source_name == name) {
      throw ValueError("load_state_dict: the entry \"" + name + "\" appears twice");
    } else {
      throw ValueError("load_state_dict: the entries \"" + it->second.source_name + "\" and \"" + name +
                       "\" both map to \"" + key + "\"");
    }
  }
  // How an entry is named in messages: its own name, and the module's when the map changed it.
  const auto described = [](const std::string& key, const Entry& entry) {
    return "\"" + entry.source_name + "\"" + (entry.source_name == key ? "" : " (\"" + key + "\" in the module)");
  };

  // A missing entry is named by the module; with a map that renames it, by the state's naming too.
  const auto source_name_of_missing = [&map](const std::string& key) -> std::string {
    std::string source_key;
    try {
      source_key = map.to_source_key(key);
    } catch (const ValueError&) {
      return "";  // the map's function has no inverse
    }
    return source_key == key ? "" : " (\"" + source_key + "\" in the state's names)";
  };

  // Every problem first, then the copy: a failed load changes nothing.
  struct Problem {
    enum Kind { Shape, Type, Name } kind;
    std::string message;
  };
  std::vector<Problem> problems;
  IncompatibleKeys result;
  const NamedTensors own = state_dict();
  std::unordered_map<std::string, const Tensor*> targets;
  std::vector<std::pair<Tensor, Tensor>> copies;  // (target, source value)
  for (const auto& [name, target] : own) {
    targets.emplace(name, &target);
    auto it = given.find(name);
    if (it == given.end()) {
      result.missing_keys.push_back(name);
      continue;
    }
    Tensor source = it->second.value;
    if (map.transposes(name)) {
      if (source.dim() != 2) {
        problems.push_back({Problem::Shape, described(name, it->second) + " is to be transposed but has shape " +
                                                source.shape().str() + "; only 2-D entries can be"});
        continue;
      }
      source = source.transpose(0, 1);
    }
    if (source.shape() != target.shape()) {
      problems.push_back({Problem::Shape, described(name, it->second) + " has shape " + source.shape().str() +
                                              (map.transposes(name) ? " (transposed)" : "") + " in the state but " +
                                              target.shape().str() + " in the module"});
      continue;
    }
    // Floating dtypes convert on copy (float64 state into a float32 module and back, as torch's copy_); other
    // mismatches (an integer or bool entry against a floating one, or the reverse) are refused.
    if (source.dtype() != target.dtype() && !(source.is_floating_point() && target.is_floating_point())) {
      problems.push_back({Problem::Type, described(name, it->second) + " is " + dtype_name(source.dtype()) +
                                             " in the state but " + dtype_name(target.dtype()) + " in the module"});
      continue;
    }
    copies.emplace_back(target, source);
  }
  for (const std::string& key : given_order)
    if (targets.find(key) == targets.end()) result.unexpected_keys.push_back(given.at(key).source_name);
  if (options.strict()) {
    for (const std::string& name : result.missing_keys)
      problems.push_back({Problem::Name, "missing entry \"" + name + "\"" + source_name_of_missing(name)});
    for (const std::string& name : result.unexpected_keys)
      problems.push_back({Problem::Name, "unexpected entry \"" + name + "\""});
  }
  if (!problems.empty()) {
    std::string message = "load_state_dict: ";
    if (problems.size() == 1) {
      message += problems.front().message;
    } else {
      message += std::to_string(problems.size()) + " problems:";
      for (const Problem& problem : problems) message += "\n  " + problem.message;
    }
    // The kind's own type when every problem is of one kind, else ValueError.
    const auto same_kind = [&](Problem::Kind kind) {
      return std::all_of(problems.begin(), problems.end(), [kind](const Problem& p) { return p.kind == kind; });
    };
    if (same_kind(Problem::Shape)) throw ShapeError(message);
    if (same_kind(Problem::Type)) throw TypeError(message);
    throw ValueError(message);
  }
  NoGradGuard guard;
  for (auto& [target, source] : copies) target.copy_(source);
  return result;
}

// ---------------------------------------------------------------- clone

std::shared_ptr<Module> Module::copy_structure() const {
  if (!factory_)
    throw TypeError(name() +
                    ": clone() needs a module made through its handle (nn::Linear(...), a TAPEGRAD_MODULE "
                    "handle) with copyable constructor arguments; this one was made otherwise");
  // Building the copy draws initial values; the default generator is left as it was.
  Generator& gen = default_generator();
  const std::string state = gen.state();
  std::shared_ptr<Module> copy;
  try {
    copy = factory_();
  } catch (...) {
    gen.set_state(state);
    throw;
  }
  gen.set_state(state);
  return copy;
}

std::shared_ptr<Module> Module::clone() const {
  std::shared_ptr<Module> copy = copy_structure();
  copy->factory_ = factory_;
  // The dtype first (load_state_dict keeps the module's), then the values, flags and modes.
  const NamedTensors own = state_dict();
  const auto floating =
      std::find_if(own.begin(), own.end(), [](const auto& e) { return e.second.is_floating_point(); });
  if (floating != own.end()) copy->to(floating->second.dtype());
  copy->load_state_dict(own);
  const NamedTensors params = named_parameters(), copy_params = copy->named_parameters();
  for (std::size_t i = 0; i < params.size() && i < copy_params.size(); ++i)
    copy_params[i].second.requires_grad_(params[i].second.requires_grad());
  const auto modules = named_modules(), copy_modules = copy->named_modules();
  if (modules.size() != copy_modules.size())
    throw ValueError(message(name(), ": clone() built a module with ", copy_modules.size(), " submodules, not ",
                             modules.size(), ": its constructor depends on more than its arguments"));
  for (std::size_t i = 0; i < modules.size(); ++i)
    const_cast<Module*>(copy_modules[i].second)->training_ = modules[i].second->training_;
  const NamedGenerators gens = named_generators(), copy_gens = copy->named_generators();
  for (std::size_t i = 0; i < gens.size() && i < copy_gens.size(); ++i)
    copy_gens[i].second->set_state(gens[i].second->state());
  return copy;
}

// ---------------------------------------------------------------- module paths in errors

namespace {

struct ForwardStack {
  std::vector<const Module*> modules;  // outermost first
  std::string annotated;               // the message of the last error given a path, passed on as it is
};

ForwardStack& forward_stack() {
  static thread_local ForwardStack stack;
  return stack;
}

}  // namespace

detail::ForwardScope::ForwardScope(const Module& module) {
  module.check_parameter_slots();
  forward_stack().modules.push_back(&module);
}

detail::ForwardScope::~ForwardScope() {
  ForwardStack& stack = forward_stack();
  stack.modules.pop_back();
  if (stack.modules.empty()) stack.annotated.clear();
}

bool detail::ForwardScope::path_below(const Module& parent, const Module* module, std::string& path) {
  for (const auto& [name, child] : parent.children_) {
    if (!child) continue;
    std::string below;
    if (child.get() == module || path_below(*child, module, below)) {
      path = below.empty() ? name : name + "." + below;
      return true;
    }
  }
  return false;
}

void detail::ForwardScope::rethrow(const Error& error) const {
  ForwardStack& stack = forward_stack();
  const std::size_t depth = stack.modules.size() - 1;  // this call's place on the stack
  if (depth == 0 || stack.annotated == error.what()) throw;
  // The path from the outermost module: each module's name below its caller (through containers the
  // caller did not call, as a ModuleList's "layers.1"), or its type in brackets when it is not there.
  std::string path;
  for (std::size_t i = 1; i <= depth; ++i) {
    const Module* child = stack.modules[i];
    std::string name;
    if (!path_below(*stack.modules[i - 1], child, name)) name = "<" + child->name() + ">";
    if (!path.empty()) path += '.';
    path += name;
  }
  std::string message = path + ": " + error.what();
  // A copy of the same type; a type of the user's own (derived from one of these) passes unchanged.
  const std::type_info& type = typeid(error);
  const auto annotate = [&](auto copy) {
    stack.annotated = copy.what();
    throw copy;
  };
  if (type == typeid(ShapeError)) annotate(ShapeError(message));
  if (type == typeid(IndexError)) annotate(IndexError(message));
  if (type == typeid(ValueError)) annotate(ValueError(message));
  if (type == typeid(TypeError)) annotate(TypeError(message));
  if (type == typeid(GraphError)) annotate(GraphError(message));
  if (type == typeid(IoError)) annotate(IoError(message));
  if (type == typeid(Error)) annotate(Error(message));
  throw;
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
      throw ValueError(message(name(), ": a forward pre-hook returned ", replacement->size(),
                               " tensors for a call with ", n, " Tensor argument", (n == 1 ? "" : "s")));
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
