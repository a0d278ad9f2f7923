#pragma once
// Containers of modules and parameters, as torch.nn's: ModuleList and ModuleDict hold child modules,
// ParameterList and ParameterDict hold parameters, each registered under its index ("0", "1", ...)
// or key, so state_dict names, parameters(), to(), train() and clone() reach what they hold.
//
//   nn::ModuleList layers;
//   for (int i = 0; i < 4; ++i) layers->push_back(nn::Linear(64, 64));
//   for (const auto& layer : *layers) x = layer->as<nn::LinearImpl>()->forward(x).relu();
//   Tensor y = layers->at<nn::LinearImpl>(3).forward(x);   // TypeError if entry 3 is another module
//
//   nn::ModuleDict heads;
//   heads->insert("policy", nn::Linear(64, 4));
//   heads->insert("value", nn::Linear(64, 1));                      // "value.weight" in state_dict()
//   Tensor v = heads->at<nn::LinearImpl>("value").forward(h);
//
//   nn::ParameterList scales;                   // parameters "0", "1", ...
//   scales->append(ones({64}));
//   nn::ParameterDict gains;
//   gains->insert("attention", ones({64}));     // parameter "attention"
//
// Positions shift as Python's: erasing or inserting renames the entries after it ("2" becomes "1"),
// so a state dict saved before such a change holds other names. An index out of range or a missing
// key is an IndexError naming the container's size or keys; keys follow register_module's rule
// (non-empty, no '.'). Every change checks its arguments first and leaves the container as it was
// when it throws. clone() copies the container and clones what it holds.

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "tapegrad/nn/module.h"

namespace tapegrad::nn {

namespace detail {

// A module handle (nn::Linear) or a shared_ptr to a module, as a shared_ptr<Module> (null for an
// empty handle).
template <class M>
std::shared_ptr<Module> module_pointer(const std::shared_ptr<M>& module) {
  return module;
}
template <class Holder, std::enable_if_t<is_module_holder_v<Holder>, int> = 0>
std::shared_ptr<Module> module_pointer(const Holder& module) {
  return module.is_empty() ? nullptr : module.ptr();
}

[[noreturn]] void throw_module_type_error(const Module& module, const std::type_info& wanted, const std::string& where);

// The module as T (an Impl type), or a TypeError naming where it was found, its type and T.
template <class T>
T& module_as(const std::shared_ptr<Module>& module, const std::string& where) {
  T* typed = module->as<T>();
  if (typed == nullptr) throw_module_type_error(*module, typeid(T), where);
  return *typed;
}

[[noreturn]] void throw_missing_key(const std::string& key, const std::vector<std::string>& keys, const char* op);

// What a container holds, in order, and the reading half of its interface.
template <class Entry>
class Entries {
 public:
  std::size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  auto begin() const { return entries_.begin(); }
  auto end() const { return entries_.end(); }

 protected:
  std::vector<Entry> entries_;
};

// Entries under keys, in insertion order.
template <class Value>
class KeyedEntries : public Entries<std::pair<std::string, Value>> {
 public:
  using Item = std::pair<std::string, Value>;
  bool contains(const std::string& key) const { return find(key) != this->entries_.end(); }
  std::vector<std::string> keys() const {
    std::vector<std::string> out;
    for (const Item& item : this->entries_) out.push_back(item.first);
    return out;
  }
  std::vector<Value> values() const {
    std::vector<Value> out;
    for (const Item& item : this->entries_) out.push_back(item.second);
    return out;
  }
  const std::vector<Item>& items() const { return this->entries_; }

 protected:
  // Removes the key's entry (an IndexError naming `op` when there is none) and returns its value;
  // `unregister(key)` drops the owning module's registration of it.
  template <class Unregister>
  Value remove(const std::string& key, const char* op, Unregister unregister) {
    const auto at = found(key, op);
    Value removed = at->second;
    unregister(key);
    this->entries_.erase(at);
    return removed;
  }
  template <class Unregister>
  void remove_all(Unregister unregister) {
    for (const Item& item : this->entries_) unregister(item.first);
    this->entries_.clear();
  }
  typename std::vector<Item>::iterator find(const std::string& key) {
    return std::find_if(this->entries_.begin(), this->entries_.end(),
                        [&](const Item& item) { return item.first == key; });
  }
  typename std::vector<Item>::const_iterator find(const std::string& key) const {
    return std::find_if(this->entries_.begin(), this->entries_.end(),
                        [&](const Item& item) { return item.first == key; });
  }
  // The key's entry, or an IndexError naming the operation and the keys there are.
  typename std::vector<Item>::iterator found(const std::string& key, const char* op) {
    const auto at = find(key);
    if (at == this->entries_.end()) throw_missing_key(key, keys(), op);
    return at;
  }
  typename std::vector<Item>::const_iterator found(const std::string& key, const char* op) const {
    const auto at = find(key);
    if (at == this->entries_.end()) throw_missing_key(key, keys(), op);
    return at;
  }
};

}  // namespace detail

// Child modules named by their positions. push_back / insert take a handle or a shared_ptr and
// return it; operator[] and ptr give the shared_ptr<Module>, at<T>(i) the module as its Impl type.
class ModuleListImpl : public Module, public detail::Entries<std::shared_ptr<Module>> {
 public:
  ModuleListImpl() = default;
  explicit ModuleListImpl(const std::vector<std::shared_ptr<Module>>& modules);

  template <class M>
  M push_back(M module) {
    append_module(detail::module_pointer(module));
    return module;
  }
  template <class M>
  M insert(std::size_t index, M module) {
    insert_module(index, detail::module_pointer(module));
    return module;
  }
  // Appends every module of another list, in order (the same modules, not copies).
  void extend(const ModuleListImpl& other);
  // Replaces entry i (Python's list[i] = module); the new module takes the old one's name.
  void set(std::size_t index, std::shared_ptr<Module> module);
  // Removes entry i and returns it; the entries after it move down one place.
  std::shared_ptr<Module> pop(std::size_t index);
  void erase(std::size_t index) { pop(index); }

  const std::shared_ptr<Module>& operator[](std::size_t index) const { return ptr(index); }
  const std::shared_ptr<Module>& ptr(std::size_t index) const;
  template <class T>
  T& at(std::size_t index) const {
    return detail::module_as<T>(ptr(index), "ModuleList::at(" + std::to_string(index) + ")");
  }

 protected:
  std::shared_ptr<Module> copy_structure() const override;

 private:
  void append_module(std::shared_ptr<Module> module);
  void insert_module(std::size_t index, std::shared_ptr<Module> module);
  // Replaces the entries from `index` on with `tail`, registered under their new positions.
  void replace_from(std::size_t index, std::vector<std::shared_ptr<Module>> tail);
  void check_index(std::size_t index, const char* what, std::size_t limit) const;
};
TAPEGRAD_MODULE(ModuleList);

// Child modules by key, in insertion order. insert on an existing key replaces its module in place
// (Python's dict[key] = module).
class ModuleDictImpl : public Module, public detail::KeyedEntries<std::shared_ptr<Module>> {
 public:
  ModuleDictImpl() = default;
  explicit ModuleDictImpl(const std::vector<Item>& items) { update(items); }

  template <class M>
  M insert(const std::string& key, M module) {
    insert_module(key, detail::module_pointer(module));
    return module;
  }
  // insert for each item, in order; nothing changes when one of them is refused.
  void update(const std::vector<Item>& items);
  // Removes the key's module and returns it.
  std::shared_ptr<Module> pop(const std::string& key);
  void clear();

  const std::shared_ptr<Module>& operator[](const std::string& key) const { return ptr(key); }
  const std::shared_ptr<Module>& ptr(const std::string& key) const;
  template <class T>
  T& at(const std::string& key) const {
    return detail::module_as<T>(ptr(key), "ModuleDict::at(\"" + key + "\")");
  }

 protected:
  std::shared_ptr<Module> copy_structure() const override;

 private:
  void insert_module(const std::string& key, std::shared_ptr<Module> module);
};
TAPEGRAD_MODULE(ModuleDict);

// Parameters named by their positions. append registers the tensor (a leaf: detach it first) as a
// parameter that requires grad and returns it.
class ParameterListImpl : public Module, public detail::Entries<Tensor> {
 public:
  ParameterListImpl() = default;
  explicit ParameterListImpl(const std::vector<Tensor>& parameters);

  Tensor append(const Tensor& parameter);
  void extend(const std::vector<Tensor>& parameters);

  const Tensor& operator[](std::size_t index) const;

 protected:
  std::shared_ptr<Module> copy_structure() const override;
};
TAPEGRAD_MODULE(ParameterList);

// Parameters by key, in insertion order. insert on an existing key replaces its parameter in place.
class ParameterDictImpl : public Module, public detail::KeyedEntries<Tensor> {
 public:
  ParameterDictImpl() = default;
  explicit ParameterDictImpl(const std::vector<Item>& items) { update(items); }

  Tensor insert(const std::string& key, const Tensor& parameter);
  void update(const std::vector<Item>& items);
  Tensor pop(const std::string& key);
  void clear();

  const Tensor& operator[](const std::string& key) const;

 protected:
  std::shared_ptr<Module> copy_structure() const override;
};
TAPEGRAD_MODULE(ParameterDict);

}  // namespace tapegrad::nn
