// The spam classifier's shared pieces: model options from the train config, the linear model's
// feature bags, batched prediction, email tokens, features and ids. See spam_model.h.

#include "examples/spam/spam_model.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_map>
#include <utility>

namespace tapegrad::examples::spam {

SpamModelOptions model_options(const SpamTrainConfig& config, std::int64_t vocab_size, std::int64_t features) {
  if (config.model != "transformer" && features < 1)
    throw ValueError(
        message("model_options: --model ", config.model, " needs the linear model's features, got ", features));
  SpamModelOptions o;
  o.deep = config.model != "linear";
  o.wide_features = config.model == "transformer" ? 0 : features;
  o.vocab_size = vocab_size;
  o.max_length = config.max_length;
  o.learned_positions = config.positions == "learned";
  o.layers = config.layers;
  o.layer = nn::TransformerLayerOptions(config.d_model, config.heads)
                .dim_feedforward(config.ff_hidden)
                .activation(nn::Activation::GELU)
                .dropout(config.dropout)
                .norm_first(true);
  return o;
}

FeatureBags feature_bags(const std::vector<std::vector<std::int64_t>>& features, const std::vector<std::size_t>& rows) {
  std::vector<std::int64_t> ids, offsets;
  std::vector<float> weights;
  for (const std::size_t r : rows) {
    if (r >= features.size())
      throw IndexError(message("feature_bags: row ", r, " is outside the features of ", features.size(), " emails"));
    const std::vector<std::int64_t>& bag = features[r];
    offsets.push_back(static_cast<std::int64_t>(ids.size()));
    ids.insert(ids.end(), bag.begin(), bag.end());
    weights.insert(weights.end(), bag.size(), static_cast<float>(1.0 / std::sqrt(static_cast<double>(bag.size()))));
  }
  const auto n = static_cast<std::int64_t>(ids.size());
  return {from_vector(ids, {n}), from_vector(offsets, {static_cast<std::int64_t>(offsets.size())}),
          from_vector(weights, {n})};
}

// Runs the model over `rows` of the loader's dataset in eval mode, without gradients.
Prediction predict_rows(SpamClassifier& model, const data::DataLoader& loader,
                        const std::vector<std::vector<std::int64_t>>& features, const std::vector<std::size_t>& rows,
                        std::int64_t batch_size) {
  NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  Prediction out;
  double loss_sum = 0;
  std::int64_t labelled = 0;
  for (std::size_t start = 0; start < rows.size(); start += static_cast<std::size_t>(batch_size)) {
    const std::vector<std::size_t> chunk(
        rows.begin() + static_cast<std::ptrdiff_t>(start),
        rows.begin() +
            static_cast<std::ptrdiff_t>(std::min(rows.size(), start + static_cast<std::size_t>(batch_size))));
    const data::Batch batch = loader.collate(chunk);
    const FeatureBags bags = model.wide() ? feature_bags(features, batch.indices) : FeatureBags();
    const Tensor logits = model.forward(batch.input, batch.padding_mask, bags);  // (B, 2)
    const Tensor p = logits.softmax(-1);
    for (std::int64_t i = 0; i < batch.size(); ++i) {
      out.p_spam.push_back(p.at({i, 1}));
      out.labels.push_back(p.at({i, 1}) > 0.5 ? 1 : 0);
    }
    if (batch.labels.defined()) {
      nn::CrossEntropyOptions sum;
      sum.reduction = nn::Reduction::Sum;
      loss_sum += nn::cross_entropy(logits, batch.labels, sum).item();
      labelled += batch.size();
    }
  }
  out.loss = labelled ? loss_sum / static_cast<double>(labelled) : 0.0;
  model.train(was_training);
  return out;
}

std::vector<std::int64_t> labels_of(const data::Dataset& dataset, const std::vector<std::size_t>& rows) {
  std::vector<std::int64_t> out;
  for (const std::size_t r : rows) out.push_back(dataset[r].label);
  return out;
}

std::vector<std::string> email_tokens(const Email& email, bool headers, std::size_t max_words) {
  std::vector<std::string> tokens;
  if (headers) {
    for (const HeaderField& field : email.headers) {
      if (!is_kept_header(field.name)) continue;
      if (tokens.size() >= max_words) return tokens;
      for (const std::string& word :
           data::word_tokenize(field.value, std::min(kMaxHeaderWords, max_words - tokens.size())))
        tokens.push_back(field.name + ":" + word);
    }
  }
  std::vector<std::string> words = data::word_tokenize(email.text(), max_words - tokens.size());
  tokens.insert(tokens.end(), std::make_move_iterator(words.begin()), std::make_move_iterator(words.end()));
  return tokens;
}

bool is_receiving_side_header(std::string_view name) {
  static const char* const kNames[] = {"received",         "delivered-to",     "delivery-date", "status",
                                       "x-status",         "x-keywords",       "x-uid",         "x-uidl",
                                       "x-mozilla-status", "x-mozilla-status2"};
  for (const char* n : kNames)
    if (name == n) return true;
  return name.find("spam") != std::string_view::npos;
}

std::vector<std::string> email_features(const Email& email) {
  std::vector<std::string> features;
  for (const HeaderField& field : email.headers) {
    if (field.name == "subject" || is_receiving_side_header(field.name)) continue;
    for (const std::string& word : data::word_tokenize(field.value, kMaxHeaderWords))
      features.push_back(field.name + ":" + word);
  }
  std::vector<std::string> words = data::word_tokenize(email.text());
  features.insert(features.end(), std::make_move_iterator(words.begin()), std::make_move_iterator(words.end()));
  return features;
}

data::Vocab build_feature_vocab(const std::vector<Email>& emails, const std::vector<std::size_t>& rows,
                                std::int64_t min_emails) {
  // A feature's count is the number of emails that have it: each email's features counted once.
  std::unordered_map<std::string, std::int64_t> counts;
  for (const std::size_t r : rows) {
    std::vector<std::string> features = email_features(emails.at(r));
    std::sort(features.begin(), features.end());
    features.erase(std::unique(features.begin(), features.end()), features.end());
    for (std::string& feature : features) ++counts[std::move(feature)];
  }
  data::VocabOptions options;
  options.min_freq = min_emails;
  return data::Vocab::from_counts(counts, options);
}

std::vector<std::int64_t> feature_ids(const std::vector<std::string>& features, const data::Vocab& vocab) {
  std::vector<std::int64_t> ids;
  for (const std::string& feature : features) {
    const std::int64_t id = vocab.id(feature);  // kUnk when unknown
    if (id >= data::Vocab::kNumSpecials) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

std::vector<std::int64_t> encode_words(const std::vector<std::string>& words, const data::Vocab& vocab,
                                       std::int64_t max_length) {
  std::vector<std::int64_t> ids = vocab.encode(
      std::vector<std::string>(words.begin(), words.begin() + std::min<std::ptrdiff_t>(max_length, words.size())));
  if (ids.empty()) ids.push_back(data::Vocab::kUnk);
  return ids;
}

}  // namespace tapegrad::examples::spam
