// Checkpoint averaging. See average.h.

#include "tapegrad/train/average.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <utility>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/ops.h"
#include "tapegrad/io/safetensors.h"

namespace tapegrad::train {

namespace fs = std::filesystem;

namespace {

constexpr const char* kPrefix = "model-";
constexpr const char* kSuffix = ".safetensors";

// The step of a kept model file's name, or -1 when the name is not one.
std::int64_t kept_step(const std::string& name) {
  const std::string prefix = kPrefix, suffix = kSuffix;
  if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return -1;
  const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.empty() || digits.size() > 18 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return -1;
  return std::stoll(digits);
}

}  // namespace

std::int64_t kept_checkpoint_step(const std::string& path) { return kept_step(fs::path(path).filename().string()); }

std::vector<std::string> kept_checkpoints(const std::string& run_dir, std::int64_t last) {
  const fs::path dir = fs::path(run_dir) / "checkpoints";
  std::error_code ec;
  std::vector<std::pair<std::int64_t, std::string>> found;
  if (!fs::is_directory(dir, ec)) return {};
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (const std::int64_t step = kept_step(entry.path().filename().string()); step >= 0 && entry.is_regular_file())
      found.emplace_back(step, entry.path().string());
  if (ec) throw IoError("kept_checkpoints: cannot list " + dir.string() + ": " + ec.message());
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  const std::size_t skip =
      last > 0 && found.size() > static_cast<std::size_t>(last) ? found.size() - static_cast<std::size_t>(last) : 0;
  for (std::size_t i = skip; i < found.size(); ++i) out.push_back(found[i].second);
  return out;
}

NamedTensors average_checkpoints(const std::vector<std::string>& files, const std::string& out_path) {
  if (files.empty()) throw ValueError("average_checkpoints: no files to average");
  const io::SafetensorsFile first = io::load_safetensors(files[0]);
  // Running float64 sums in the first file's order.
  NamedTensors sums;
  std::map<std::string, std::size_t> index;
  for (const auto& [name, t] : first.tensors) {
    index.emplace(name, sums.size());
    sums.emplace_back(name, is_floating(t.dtype()) ? t.to(kFloat64) : t);
  }
  for (std::size_t f = 1; f < files.size(); ++f) {
    const io::SafetensorsFile next = io::load_safetensors(files[f]);
    const std::string where = "average_checkpoints: " + files[f] + ": entry '";
    if (next.tensors.size() != first.tensors.size()) {
      for (const auto& [name, t] : next.tensors)
        if (index.count(name) == 0) throw ValueError(where + name + "' is not in " + files[0]);
    }
    std::map<std::string, const Tensor*> by_name;
    for (const auto& [name, t] : next.tensors) by_name.emplace(name, &t);
    for (const auto& [name, t] : first.tensors) {
      const auto it = by_name.find(name);
      if (it == by_name.end()) throw ValueError(where + name + "' is missing (it is in " + files[0] + ")");
      const Tensor& other = *it->second;
      if (other.shape() != t.shape())
        throw ShapeError(where + name + "' has shape " + other.shape().str() + " but " + t.shape().str() + " in " +
                         files[0]);
      if (other.dtype() != t.dtype())
        throw TypeError(where + name + "' has dtype " + dtype_name(other.dtype()) + " but " + dtype_name(t.dtype()) +
                        " in " + files[0]);
      Tensor& sum = sums[index.at(name)].second;
      if (is_floating(t.dtype())) {
        sum = sum + other.to(kFloat64);
      } else if (other.to(kInt64).to_vector<std::int64_t>() != t.to(kInt64).to_vector<std::int64_t>()) {
        throw ValueError(where + name + "' (" + dtype_name(t.dtype()) + ", not averaged) differs from " + files[0]);
      }
    }
  }
  NamedTensors averaged;
  const double n = static_cast<double>(files.size());
  for (std::size_t i = 0; i < sums.size(); ++i) {
    const Tensor& original = first.tensors[i].second;
    averaged.emplace_back(sums[i].first,
                          is_floating(original.dtype()) ? (sums[i].second / n).to(original.dtype()) : sums[i].second);
  }
  if (!out_path.empty()) {
    std::string from;
    for (const std::string& f : files) from += (from.empty() ? "" : ",") + f;
    io::save_safetensors(out_path, averaged, {{"averaged_from", from}});
  }
  return averaged;
}

}  // namespace tapegrad::train
