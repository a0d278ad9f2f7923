#include "examples/common/naive_bayes.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tapegrad/autograd/error.h"

namespace tapegrad::examples {

MultinomialNaiveBayes::MultinomialNaiveBayes(double alpha) : alpha_(alpha) {
  if (!(alpha > 0) || !std::isfinite(alpha))
    throw ValueError(message("MultinomialNaiveBayes: alpha must be positive and finite, got ", alpha));
}

void MultinomialNaiveBayes::fit(const std::vector<std::vector<std::string>>& docs,
                                const std::vector<std::int64_t>& labels) {
  if (docs.size() != labels.size())
    throw ValueError(message("MultinomialNaiveBayes::fit: ", docs.size(), " documents but ", labels.size(), " labels"));
  if (docs.empty()) throw ValueError("MultinomialNaiveBayes::fit: no documents");
  std::int64_t classes = 0;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0)
      throw ValueError(message("MultinomialNaiveBayes::fit: label ", labels[i], " of document ", i, " is negative"));
    classes = std::max(classes, labels[i] + 1);
  }
  index_.clear();
  for (const auto& doc : docs)
    for (const std::string& token : doc) index_.emplace(token, index_.size());
  const std::size_t vocab = index_.size();
  std::vector<std::vector<double>> counts(static_cast<std::size_t>(classes), std::vector<double>(vocab, 0.0));
  std::vector<double> docs_per_class(static_cast<std::size_t>(classes), 0.0);
  for (std::size_t i = 0; i < docs.size(); ++i) {
    auto& row = counts[static_cast<std::size_t>(labels[i])];
    docs_per_class[static_cast<std::size_t>(labels[i])] += 1;
    for (const std::string& token : docs[i]) row[index_.at(token)] += 1;
  }
  log_prior_.assign(static_cast<std::size_t>(classes), 0.0);
  log_likelihood_.assign(static_cast<std::size_t>(classes), std::vector<double>(vocab, 0.0));
  for (std::size_t c = 0; c < counts.size(); ++c) {
    log_prior_[c] = docs_per_class[c] > 0 ? std::log(docs_per_class[c] / static_cast<double>(docs.size()))
                                          : -std::numeric_limits<double>::infinity();
    double total = 0;
    for (const double n : counts[c]) total += n;
    const double log_denominator = std::log(total + alpha_ * static_cast<double>(vocab));
    for (std::size_t w = 0; w < vocab; ++w) log_likelihood_[c][w] = std::log(counts[c][w] + alpha_) - log_denominator;
  }
}

std::vector<double> MultinomialNaiveBayes::scores(const std::vector<std::string>& doc) const {
  if (!fitted()) throw ValueError("MultinomialNaiveBayes: predict called before fit");
  std::vector<double> out = log_prior_;
  for (const std::string& token : doc) {
    const auto it = index_.find(token);
    if (it == index_.end()) continue;
    for (std::size_t c = 0; c < out.size(); ++c) out[c] += log_likelihood_[c][it->second];
  }
  return out;
}

std::vector<double> MultinomialNaiveBayes::predict_proba(const std::vector<std::string>& doc) const {
  std::vector<double> s = scores(doc);
  const double top = *std::max_element(s.begin(), s.end());
  double total = 0;
  for (double& v : s) total += (v = std::exp(v - top));
  for (double& v : s) v /= total;
  return s;
}

std::int64_t MultinomialNaiveBayes::predict(const std::vector<std::string>& doc) const {
  const std::vector<double> s = scores(doc);
  return static_cast<std::int64_t>(std::max_element(s.begin(), s.end()) - s.begin());
}

std::vector<std::int64_t> MultinomialNaiveBayes::predict(const std::vector<std::vector<std::string>>& docs) const {
  std::vector<std::int64_t> out;
  out.reserve(docs.size());
  for (const auto& doc : docs) out.push_back(predict(doc));
  return out;
}

double MultinomialNaiveBayes::log_likelihood(const std::string& token, std::int64_t label) const {
  if (!fitted()) throw ValueError("MultinomialNaiveBayes: log_likelihood called before fit");
  const auto it = index_.find(token);
  if (it == index_.end())
    throw ValueError("MultinomialNaiveBayes: token \"" + token + "\" was not in the training documents");
  if (label < 0 || label >= num_classes())
    throw ValueError(message("MultinomialNaiveBayes: label ", label, " outside [0, ", num_classes(), ")"));
  return log_likelihood_[static_cast<std::size_t>(label)][it->second];
}

}  // namespace tapegrad::examples
