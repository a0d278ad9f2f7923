// The moving average of a model's weights. See ema.h.

#include "tapegrad/train/ema.h"

#include <algorithm>
#include <map>
#include <string>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/graph.h"

namespace tapegrad::train {

namespace {

constexpr const char* kUpdates = "num_updates";

NamedTensors copies(const NamedTensors& state) {
  NamedTensors out;
  out.reserve(state.size());
  for (const auto& [name, t] : state) out.emplace_back(name, t.detach().clone());
  return out;
}

}  // namespace

ModelEma::ModelEma(nn::Module& model, EmaOptions options) : model_(model), options_(options) {
  if (!(options_.decay() >= 0.0 && options_.decay() <= 1.0))
    throw ValueError(message("ModelEma: decay must be in [0, 1], got ", options_.decay()));
  average_ = copies(model_.state_dict());
}

double ModelEma::next_decay() const {
  if (!options_.warmup()) return options_.decay();
  const double n = static_cast<double>(updates_);
  return std::min(options_.decay(), (1.0 + n) / (10.0 + n));
}

void ModelEma::update() {
  NoGradGuard no_grad;
  const NamedTensors current = model_.state_dict();
  if (current.size() != average_.size())
    throw ValueError(message("ModelEma::update: the model has ", current.size(),
                             " state_dict entries but the average was made with ", average_.size()));
  // Everything is checked before anything changes.
  for (std::size_t i = 0; i < current.size(); ++i) {
    const Tensor& value = current[i].second;
    const Tensor& average = average_[i].second;
    if (current[i].first != average_[i].first || value.shape() != average.shape() || value.dtype() != average.dtype())
      throw ValueError("ModelEma::update: the model's entry " + current[i].first + " " + value.shape().str() + " " +
                       dtype_name(value.dtype()) + " does not match the average's " + average_[i].first + " " +
                       average.shape().str() + " " + dtype_name(average.dtype()));
  }
  const double d = next_decay();
  for (std::size_t i = 0; i < current.size(); ++i) {
    const Tensor& value = current[i].second;
    const Tensor& average = average_[i].second;
    if (is_floating(value.dtype())) {
      average.mul_(d);
      average.add_(value.detach(), 1.0 - d);
    } else {
      average.copy_(value.detach());
    }
  }
  ++updates_;
}

NamedTensors ModelEma::averages() const { return copies(average_); }

NamedTensors ModelEma::state() const {
  NamedTensors out = averages();
  out.emplace_back(kUpdates, scalar_tensor(static_cast<double>(updates_), kInt64));
  return out;
}

void ModelEma::load_state(const NamedTensors& state) {
  std::map<std::string, Tensor> by_name;
  for (const auto& [name, t] : state) by_name.emplace(name, t);
  const auto updates = by_name.find(kUpdates);
  if (updates == by_name.end() || updates->second.numel() != 1 || updates->second.dtype() != kInt64 ||
      updates->second.item() < 0)
    throw ValueError("ModelEma::load_state: entry 'num_updates' is missing or not an Int64 scalar >= 0");
  for (const auto& [name, average] : average_) {
    const auto it = by_name.find(name);
    if (it == by_name.end()) throw ValueError("ModelEma::load_state: entry '" + name + "' is missing");
    if (it->second.shape() != average.shape())
      throw ShapeError("ModelEma::load_state: entry '" + name + "' has shape " + it->second.shape().str() +
                       " but the model's is " + average.shape().str());
    if (it->second.dtype() != average.dtype())
      throw TypeError("ModelEma::load_state: entry '" + name + "' has dtype " + dtype_name(it->second.dtype()) +
                      " but the model's is " + dtype_name(average.dtype()));
  }
  if (by_name.size() != average_.size() + 1) {
    for (const auto& [name, t] : state) {
      const bool known = name == kUpdates || std::any_of(average_.begin(), average_.end(),
                                                         [&](const auto& entry) { return entry.first == name; });
      if (!known) throw ValueError("ModelEma::load_state: unexpected entry '" + name + "'");
    }
  }
  NoGradGuard no_grad;
  for (const auto& [name, average] : average_) average.copy_(by_name.at(name));
  updates_ = static_cast<std::int64_t>(updates->second.item());
}

ModelEma::Applied ModelEma::apply() const {
  NamedTensors saved = copies(model_.state_dict());
  model_.load_state_dict(average_);
  return Applied(model_, std::move(saved));
}

ModelEma::Applied::Applied(Applied&& other) noexcept : model_(other.model_), saved_(std::move(other.saved_)) {
  other.model_ = nullptr;
}

ModelEma::Applied::~Applied() {
  if (model_ != nullptr) model_->load_state_dict(saved_);
}

}  // namespace tapegrad::train
