#pragma once
// Multinomial Naive Bayes over token counts with Laplace (additive) smoothing, in log space:
//   log P(c)     = log(n_docs(c) / n_docs)
//   log P(w | c) = log((count(w, c) + alpha) / (sum_w' count(w', c) + alpha |V|))
//   score(c | d) = log P(c) + sum_{w in d} count(w, d) log P(w | c)
// |V| is the vocabulary of the training documents; at prediction, tokens never seen in
// training are ignored (as scikit-learn's CountVectorizer + MultinomialNB do).
//
//   MultinomialNaiveBayes nb(/*alpha=*/1.0);
//   nb.fit(train_docs, train_labels);               // docs: vectors of tokens, labels in [0, C)
//   std::int64_t label = nb.predict(doc);
//   std::vector<double> p = nb.predict_proba(doc);  // softmax of the scores

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace tapegrad::examples {

class MultinomialNaiveBayes {
 public:
  // ValueError unless alpha > 0.
  explicit MultinomialNaiveBayes(double alpha = 1.0);

  // ValueError when docs and labels differ in length, are empty, or a label is negative. The
  // number of classes is max(label) + 1; a class without documents gets log-prior -inf.
  void fit(const std::vector<std::vector<std::string>>& docs, const std::vector<std::int64_t>& labels);
  bool fitted() const { return !log_prior_.empty(); }

  // Unnormalised log posterior per class. ValueError before fit.
  std::vector<double> scores(const std::vector<std::string>& doc) const;
  std::vector<double> predict_proba(const std::vector<std::string>& doc) const;
  std::int64_t predict(const std::vector<std::string>& doc) const;  // argmax, lowest label on ties
  std::vector<std::int64_t> predict(const std::vector<std::vector<std::string>>& docs) const;

  std::int64_t num_classes() const { return static_cast<std::int64_t>(log_prior_.size()); }
  std::int64_t vocabulary_size() const { return static_cast<std::int64_t>(index_.size()); }
  double alpha() const { return alpha_; }
  const std::vector<double>& log_prior() const { return log_prior_; }
  // log P(w | c) for a training token; ValueError for an unknown token.
  double log_likelihood(const std::string& token, std::int64_t label) const;

 private:
  double alpha_;
  std::unordered_map<std::string, std::size_t> index_;  // token -> column
  std::vector<double> log_prior_;                       // (C)
  std::vector<std::vector<double>> log_likelihood_;     // (C, |V|)
};

}  // namespace tapegrad::examples
