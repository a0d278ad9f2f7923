#pragma once
// Binary classification metrics, positive class = 1:
//   accuracy  = (tp + tn) / n
//   precision = tp / (tp + fp)        (0 when nothing is predicted positive)
//   recall    = tp / (tp + fn)        (0 when there are no positives)
//   f1        = 2 p r / (p + r)       (0 when p + r = 0)
// The zero cases follow scikit-learn's zero_division=0.
//
//   BinaryMetrics m = binary_metrics(predicted, actual);   // vectors of 0/1 labels
//   m.f1(); m.to_json();   // {"accuracy":..,"precision":..,"recall":..,"f1":..,"confusion":[[tn,fp],[fn,tp]]}

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tapegrad/autograd/error.h"

namespace tapegrad::examples {

struct BinaryMetrics {
  std::int64_t tp = 0, fp = 0, tn = 0, fn = 0;

  std::int64_t total() const { return tp + fp + tn + fn; }
  double accuracy() const { return total() ? static_cast<double>(tp + tn) / total() : 0.0; }
  double precision() const { return tp + fp ? static_cast<double>(tp) / (tp + fp) : 0.0; }
  double recall() const { return tp + fn ? static_cast<double>(tp) / (tp + fn) : 0.0; }
  double f1() const {
    const double p = precision(), r = recall();
    return p + r > 0 ? 2 * p * r / (p + r) : 0.0;
  }
  // Rows are the actual class, columns the predicted one (scikit-learn's confusion_matrix layout):
  // [[tn, fp], [fn, tp]].
  std::vector<std::vector<std::int64_t>> confusion() const { return {{tn, fp}, {fn, tp}}; }

  nlohmann::json to_json() const {
    return {{"accuracy", accuracy()},   {"precision", precision()},
            {"recall", recall()},       {"f1", f1()},
            {"confusion", confusion()}, {"n", total()}};
  }
};

// ValueError when the lengths differ or a label is not 0 or 1.
inline BinaryMetrics binary_metrics(const std::vector<std::int64_t>& predicted,
                                    const std::vector<std::int64_t>& actual) {
  if (predicted.size() != actual.size())
    throw ValueError(message("binary_metrics: ", predicted.size(), " predictions for ", actual.size(), " labels"));
  BinaryMetrics m;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const std::int64_t p = predicted[i], a = actual[i];
    if ((p != 0 && p != 1) || (a != 0 && a != 1))
      throw ValueError(
          message("binary_metrics: labels must be 0 or 1, got predicted ", p, " and actual ", a, " at index ", i));
    if (a == 1) (p == 1 ? m.tp : m.fn) += 1;
    else (p == 1 ? m.fp : m.tn) += 1;
  }
  return m;
}

}  // namespace tapegrad::examples
