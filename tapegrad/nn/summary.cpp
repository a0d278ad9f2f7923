// The model summary. See summary.h.

#include "tapegrad/nn/summary.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <utility>

#include "tapegrad/autograd/error.h"

namespace tapegrad::nn {

namespace {

std::string thousands(std::int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (n < 0 ? "-" : "") + out;
}

std::string describe_output(const void* output, const std::type_info& type) {
  if (type == typeid(Tensor)) {
    const Tensor& t = *static_cast<const Tensor*>(output);
    return t.defined() ? t.shape().str() : "undefined";
  }
  if (type == typeid(TensorList)) {
    std::string out;
    for (const Tensor& t : *static_cast<const TensorList*>(output))
      out += (out.empty() ? "" : ", ") + (t.defined() ? t.shape().str() : std::string("undefined"));
    return out.empty() ? "[]" : out;
  }
  std::string name = detail::readable_type_name(type);
  const std::size_t scope = name.rfind("::", name.find('<'));
  if (scope != std::string::npos) name.erase(0, scope + 2);
  return name;
}

std::string pad(const std::string& s, std::size_t width) {
  return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' ');
}

}  // namespace

ModelSummary summarize(Module& model, const std::function<void()>& forward) {
  if (!forward) throw ValueError("summarize: the forward function is empty");
  ModelSummary summary;
  // A module shared by two parents is listed once per path; it is hooked once, under its first path.
  std::map<const Module*, std::string> paths;
  std::vector<const Module*> modules;
  for (const auto& [path, module] : model.named_modules())
    if (paths.emplace(module, path).second) modules.push_back(module);
  for (const auto& [name, p] : model.named_parameters()) {
    summary.total_parameters += p.numel();
    if (p.requires_grad()) summary.trainable_parameters += p.numel();
    summary.parameter_bytes += p.numel() * static_cast<std::int64_t>(element_size(p.dtype()));
  }
  for (const auto& [name, b] : model.named_buffers())
    summary.buffer_bytes += b.numel() * static_cast<std::int64_t>(element_size(b.dtype()));

  // A row is opened when a call begins (pre-hook) and gets its output when the call ends; calls nest,
  // so the open rows form a stack.
  std::vector<std::size_t> open;
  std::vector<RemovableHandle> handles;
  for (const Module* module_ptr : modules) {
    Module& module = const_cast<Module&>(*module_ptr);
    handles.push_back(module.register_forward_pre_hook([&summary, &open, &paths](Module& m, const TensorList&) {
      SummaryRow row;
      row.path = paths.at(&m);
      row.type = m.name();
      row.depth =
          row.path.empty() ? 0 : 1 + static_cast<std::int64_t>(std::count(row.path.begin(), row.path.end(), '.'));
      for (const Tensor& p : m.parameters()) {
        row.parameters += p.numel();
        if (p.requires_grad()) row.trainable += p.numel();
      }
      open.push_back(summary.rows.size());
      summary.rows.push_back(std::move(row));
    }));
    handles.push_back(module.register_forward_hook_any(
        [&summary, &open](Module&, const TensorList&, const void* output, const std::type_info& type) {
          if (open.empty()) return;
          summary.rows[open.back()].output = describe_output(output, type);
          open.pop_back();
        }));
  }
  struct Remove {
    std::vector<RemovableHandle>& handles;
    ~Remove() {
      for (RemovableHandle& h : handles) h.remove();
    }
  } remove{handles};
  NoGradGuard no_grad;
  forward();
  return summary;
}

std::string ModelSummary::table() const {
  std::size_t name_width = std::string("Layer (type)").size();
  std::vector<std::string> names;
  for (const SummaryRow& row : rows) {
    std::string name =
        std::string(static_cast<std::size_t>(2 * row.depth), ' ') +
        (row.path.empty()
             ? ""
             : row.path.substr(row.path.rfind('.') == std::string::npos ? 0 : row.path.rfind('.') + 1) + " ") +
        "(" + row.type + ")";
    name_width = std::max(name_width, name.size());
    names.push_back(std::move(name));
  }
  std::size_t output_width = std::string("Output shape").size();
  for (const SummaryRow& row : rows) output_width = std::max(output_width, row.output.size());
  const std::size_t count_width = std::max<std::size_t>(12, thousands(total_parameters).size() + 1);
  std::ostringstream out;
  const std::string header = pad("Layer (type)", name_width + 2) + pad("Output shape", output_width + 2) +
                             pad("Param #", count_width) + "Trainable";
  out << header << "\n" << std::string(header.size() + 3, '-') << "\n";
  for (std::size_t i = 0; i < rows.size(); ++i)
    out << pad(names[i], name_width + 2) << pad(rows[i].output, output_width + 2)
        << pad(thousands(rows[i].parameters), count_width) << thousands(rows[i].trainable) << "\n";
  out << std::string(header.size() + 3, '-') << "\n";
  out << "Total parameters: " << thousands(total_parameters) << "\n";
  out << "Trainable parameters: " << thousands(trainable_parameters) << "\n";
  out << "Non-trainable parameters: " << thousands(total_parameters - trainable_parameters) << "\n";
  out << "Parameter memory: " << thousands(parameter_bytes) << " bytes; buffers: " << thousands(buffer_bytes)
      << " bytes\n";
  return out.str();
}

}  // namespace tapegrad::nn
