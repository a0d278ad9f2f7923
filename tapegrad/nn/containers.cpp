#include "tapegrad/nn/containers.h"

#include <algorithm>

#include "tapegrad/nn/forward_hooks.h"

namespace tapegrad::nn {

namespace detail {

void throw_module_type_error(const Module& module, const std::type_info& wanted, const std::string& where) {
  throw TypeError(message(where, ": the module is a ", module.name(), ", not a ", readable_type_name(wanted)));
}

void throw_missing_key(const std::string& key, const std::vector<std::string>& keys, const char* op) {
  std::string listed;
  for (const std::string& k : keys) listed += (listed.empty() ? "\"" : ", \"") + k + "\"";
  throw IndexError(message(op, ": no key \"", key, "\" (the keys: ", listed.empty() ? "none" : listed, ")"));
}

}  // namespace detail

namespace {

// A key a container can register: non-empty and without '.', as register_module's names.
void check_key(const std::string& key, const char* op) {
  if (key.empty() || key.find('.') != std::string::npos)
    throw ValueError(message(op, ": key \"", key, "\" must be non-empty and contain no '.'"));
}

void check_module(const std::shared_ptr<Module>& module, const char* op) {
  if (!module) throw ValueError(message(op, ": the module is null (an empty handle)"));
}

}  // namespace

// ---------------------------------------------------------------- ModuleList

ModuleListImpl::ModuleListImpl(const std::vector<std::shared_ptr<Module>>& modules) {
  for (const auto& module : modules) check_module(module, "ModuleList");
  for (const auto& module : modules) append_module(module);
}

void ModuleListImpl::check_index(std::size_t index, const char* what, std::size_t limit) const {
  if (index >= limit)
    throw IndexError(
        message("ModuleList::", what, ": index ", index, " is out of range for a list of ", size(), " modules"));
}

void ModuleListImpl::append_module(std::shared_ptr<Module> module) {
  check_module(module, "ModuleList::push_back");
  register_module(std::to_string(entries_.size()), module);
  entries_.push_back(std::move(module));
}

void ModuleListImpl::replace_from(std::size_t index, std::vector<std::shared_ptr<Module>> tail) {
  for (std::size_t i = index; i < entries_.size(); ++i) unregister_module(std::to_string(i));
  entries_.resize(index);
  for (auto& module : tail) append_module(std::move(module));
}

void ModuleListImpl::insert_module(std::size_t index, std::shared_ptr<Module> module) {
  check_module(module, "ModuleList::insert");
  check_index(index, "insert", size() + 1);
  std::vector<std::shared_ptr<Module>> tail{std::move(module)};
  tail.insert(tail.end(), entries_.begin() + static_cast<std::ptrdiff_t>(index), entries_.end());
  replace_from(index, std::move(tail));
}

void ModuleListImpl::extend(const ModuleListImpl& other) {
  const std::vector<std::shared_ptr<Module>> added = other.entries_;  // other may be this list
  for (const auto& module : added) append_module(module);
}

void ModuleListImpl::set(std::size_t index, std::shared_ptr<Module> module) {
  check_module(module, "ModuleList::set");
  check_index(index, "set", size());
  replace_module(std::to_string(index), module);
  entries_[index] = std::move(module);
}

std::shared_ptr<Module> ModuleListImpl::pop(std::size_t index) {
  check_index(index, "pop", size());
  std::shared_ptr<Module> removed = entries_[index];
  replace_from(index, {entries_.begin() + static_cast<std::ptrdiff_t>(index) + 1, entries_.end()});
  return removed;
}

const std::shared_ptr<Module>& ModuleListImpl::ptr(std::size_t index) const {
  check_index(index, "operator[]", size());
  return entries_[index];
}

std::shared_ptr<Module> ModuleListImpl::copy_structure() const {
  auto copy = std::make_shared<ModuleListImpl>();
  for (const auto& module : entries_) copy->append_module(module->clone());
  return copy;
}

// ---------------------------------------------------------------- ModuleDict

void ModuleDictImpl::insert_module(const std::string& key, std::shared_ptr<Module> module) {
  check_key(key, "ModuleDict::insert");
  check_module(module, "ModuleDict::insert");
  const auto at = find(key);
  if (at != entries_.end()) {
    replace_module(key, module);
    at->second = std::move(module);
    return;
  }
  register_module(key, module);
  entries_.emplace_back(key, std::move(module));
}

void ModuleDictImpl::update(const std::vector<Item>& items) {
  for (const auto& [key, module] : items) {
    check_key(key, "ModuleDict::update");
    check_module(module, "ModuleDict::update");
  }
  for (const auto& [key, module] : items) insert_module(key, module);
}

std::shared_ptr<Module> ModuleDictImpl::pop(const std::string& key) {
  return remove(key, "ModuleDict::pop", [this](const std::string& name) { unregister_module(name); });
}

void ModuleDictImpl::clear() {
  remove_all([this](const std::string& name) { unregister_module(name); });
}

const std::shared_ptr<Module>& ModuleDictImpl::ptr(const std::string& key) const {
  return found(key, "ModuleDict::operator[]")->second;
}

std::shared_ptr<Module> ModuleDictImpl::copy_structure() const {
  auto copy = std::make_shared<ModuleDictImpl>();
  for (const auto& [key, module] : entries_) copy->insert_module(key, module->clone());
  return copy;
}

// ---------------------------------------------------------------- ParameterList

ParameterListImpl::ParameterListImpl(const std::vector<Tensor>& parameters) { extend(parameters); }

Tensor ParameterListImpl::append(const Tensor& parameter) {
  Tensor registered = register_parameter(std::to_string(entries_.size()), parameter);
  entries_.push_back(registered);
  return registered;
}

void ParameterListImpl::extend(const std::vector<Tensor>& parameters) {
  for (const Tensor& p : parameters) {
    if (!p.defined()) throw ValueError("ParameterList::extend: an undefined tensor");
    if (!p.is_leaf()) throw GraphError("ParameterList::extend: a parameter must be a leaf tensor (detach it first)");
  }
  for (const Tensor& p : parameters) append(p);
}

const Tensor& ParameterListImpl::operator[](std::size_t index) const {
  if (index >= entries_.size())
    throw IndexError(message("ParameterList::operator[]: index ", index, " is out of range for a list of ",
                             entries_.size(), " parameters"));
  return entries_[index];
}

std::shared_ptr<Module> ParameterListImpl::copy_structure() const {
  auto copy = std::make_shared<ParameterListImpl>();
  for (const Tensor& p : entries_) copy->append(p.detach().clone());
  return copy;
}

// ---------------------------------------------------------------- ParameterDict

Tensor ParameterDictImpl::insert(const std::string& key, const Tensor& parameter) {
  check_key(key, "ParameterDict::insert");
  const auto at = find(key);
  if (at != entries_.end()) return at->second = replace_parameter(key, parameter);
  Tensor registered = register_parameter(key, parameter);
  entries_.emplace_back(key, registered);
  return registered;
}

void ParameterDictImpl::update(const std::vector<Item>& items) {
  for (const auto& [key, p] : items) {
    check_key(key, "ParameterDict::update");
    if (!p.defined()) throw ValueError(message("ParameterDict::update: \"", key, "\" is an undefined tensor"));
    if (!p.is_leaf())
      throw GraphError(message("ParameterDict::update: \"", key, "\" must be a leaf tensor (detach it first)"));
  }
  for (const auto& [key, p] : items) insert(key, p);
}

Tensor ParameterDictImpl::pop(const std::string& key) {
  return remove(key, "ParameterDict::pop", [this](const std::string& name) { unregister_parameter(name); });
}

void ParameterDictImpl::clear() {
  remove_all([this](const std::string& name) { unregister_parameter(name); });
}

const Tensor& ParameterDictImpl::operator[](const std::string& key) const {
  return found(key, "ParameterDict::operator[]")->second;
}

std::shared_ptr<Module> ParameterDictImpl::copy_structure() const {
  auto copy = std::make_shared<ParameterDictImpl>();
  for (const auto& [key, p] : entries_) copy->insert(key, p.detach().clone());
  return copy;
}

}  // namespace tapegrad::nn
