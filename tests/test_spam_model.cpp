// The spam classifier's model pieces (examples/spam/spam_model.h): the tokens the transformer reads,
// the linear model's features, their vocabulary and bags, and the classifier's logits as the sum of
// its two parts.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "examples/spam/spam_model.h"
#include "tests/testing.h"

using namespace tapegrad;
using namespace tapegrad::examples;
using namespace tapegrad::examples::spam;
using testing::parameter;

namespace {

// An email parsed as the corpus reader parses one.
Email parse(const std::string& raw) {
  Email email;
  parse_email(raw, email.subject, email.body, &email.headers);
  return email;
}

const std::string kRaw =
    "Return-Path: <deals@shop.example>\n"
    "Received: from relay.shop.example by mx.example.org\n"
    "From: Shop <deals@shop.example>\n"
    "Subject: Big deals\n"
    "X-Mailer: one two three four five six seven eight nine ten eleven\n"
    "X-Spam-Level: high\n"
    "X-Mailing-List: fun\n"
    "\n"
    "Deals deals today.\n";

// "name:word" for each word.
std::vector<std::string> prefixed(const std::string& name, const std::vector<std::string>& words) {
  std::vector<std::string> out;
  for (const std::string& word : words) out.push_back(name + ":" + word);
  return out;
}

std::vector<std::string> concat(const std::vector<std::vector<std::string>>& parts) {
  std::vector<std::string> out;
  for (const std::vector<std::string>& part : parts) out.insert(out.end(), part.begin(), part.end());
  return out;
}

// A transformer small enough for a test: d 8, 2 heads, one layer, FFN 16, 6 positions.
SpamTrainConfig small_config() {
  SpamTrainConfig config;
  config.d_model = 8;
  config.heads = 2;
  config.layers = 1;
  config.ff_hidden = 16;
  config.max_length = 6;
  return config;
}

std::vector<float> values(const Tensor& t) { return t.contiguous().to_vector<float>(); }

}  // namespace

TEST_CASE("spam model: the transformer's tokens read the kept headers, the linear model's the sender's side") {
  const Email email = parse(kRaw);
  const std::vector<std::string> return_path = prefixed("return-path", {"deals", "shop", "example"});
  const std::vector<std::string> from = prefixed("from", {"shop", "deals", "shop", "example"});
  const std::vector<std::string> mailer =  // at most kMaxHeaderWords words a header: "eleven" is left
      prefixed("x-mailer", {"one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"});
  const std::vector<std::string> text = {"big", "deals", "deals", "deals", "today"};

  // The kept headers (return-path, from, x-mailer), then the text.
  CHECK(email_tokens(email, /*headers=*/true) == concat({return_path, from, mailer, text}));
  CHECK(email_tokens(email, /*headers=*/false) == text);
  CHECK(email_tokens(email, /*headers=*/true, 4) == concat({return_path, {"from:shop"}}));

  // Every header but Subject (whose words come with the text) and the receiving side's (Received,
  // X-Spam-Level), in message order, then the text.
  CHECK(email_features(email) == concat({return_path, from, mailer, {"x-mailing-list:fun"}, text}));
  for (const char* name : {"received", "delivered-to", "delivery-date", "x-keywords", "x-spam-status",
                           "x-mailscanner-spamcheck", "x-uidl"})
    CHECK(is_receiving_side_header(name));
  for (const char* name : {"from", "return-path", "x-mailer", "list-id", "x-original-date", "date"})
    CHECK_FALSE(is_receiving_side_header(name));
}

TEST_CASE("spam model: the feature vocabulary counts emails, not occurrences, and feature_ids are distinct and known") {
  // "win" is in two emails, "free" three times in one, "cash" once; the third email is not counted.
  std::vector<Email> emails(3);
  emails[0].body = "win free free free";
  emails[1].body = "Win cash";
  emails[2].body = "cash free";
  const data::Vocab vocab = build_feature_vocab(emails, {0, 1}, 2);
  CHECK(vocab.tokens() == std::vector<std::string>{"<pad>", "<unk>", "<sos>", "<eos>", "win"});
  // Those of the most emails first, ties by feature.
  CHECK(build_feature_vocab(emails, {0, 1}, 1).tokens() ==
        std::vector<std::string>{"<pad>", "<unk>", "<sos>", "<eos>", "win", "cash", "free"});
  const data::Vocab all = build_feature_vocab(emails, {0, 1, 2}, 1);
  CHECK(all.tokens() == std::vector<std::string>{"<pad>", "<unk>", "<sos>", "<eos>", "cash", "free", "win"});

  const std::vector<std::int64_t> ids = feature_ids({"cash", "win", "unknown", "free", "win", "cash"}, all);
  std::vector<std::int64_t> expected = {all.id("cash"), all.id("free"), all.id("win")};
  std::sort(expected.begin(), expected.end());
  CHECK(ids == expected);
  CHECK(feature_ids({"unknown", "<unk>", "<pad>"}, all).empty());
}

TEST_CASE("spam model: feature_bags gives each email its ids, offset and unit-length weights") {
  const std::vector<std::vector<std::int64_t>> features = {{4, 7}, {}, {5, 6, 8, 9}};
  const FeatureBags bags = feature_bags(features, {2, 1, 0});
  CHECK(bags.ids.dtype() == kInt64);
  CHECK(bags.weights.dtype() == kFloat32);
  CHECK(bags.ids.to_vector<std::int64_t>() == std::vector<std::int64_t>{5, 6, 8, 9, 4, 7});
  CHECK(bags.offsets.to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 4, 4});
  CHECK(values(bags.weights) == std::vector<float>{0.5f, 0.5f, 0.5f, 0.5f, static_cast<float>(1 / std::sqrt(2.0)),
                                                   static_cast<float>(1 / std::sqrt(2.0))});
  CHECK_THROWS_WITH_AS(feature_bags(features, {0, 3}), "feature_bags: row 3 is outside the features of 3 emails",
                       IndexError);
}

TEST_CASE("spam model: the classifier's logits are the transformer's plus the linear model's") {
  SpamTrainConfig config = small_config();
  const std::int64_t vocab_size = 12, features = 10;

  config.model = "transformer";
  Generator g1(5);
  SpamClassifier deep(model_options(config, vocab_size, features), g1);
  config.model = "wide_and_deep";
  Generator g2(5);
  SpamClassifier both(model_options(config, vocab_size, features), g2);
  config.model = "linear";
  Generator g3(5);
  SpamClassifier linear(model_options(config, vocab_size, features), g3);
  CHECK(deep.deep());
  CHECK_FALSE(deep.wide());
  CHECK(both.deep());
  CHECK(both.wide());
  CHECK_FALSE(linear.deep());
  CHECK(linear.wide());
  CHECK(linear.num_parameters() == features * 2 + 2);
  CHECK(both.num_parameters() == deep.num_parameters() + linear.num_parameters());

  // The linear model starts at zero; give it known weights.
  Tensor table = arange(0, features * 2, 1, kFloat32).reshape({features, 2}) * 0.1;
  Tensor bias = from_vector(std::vector<float>{0.25f, -0.5f}, {2});
  for (SpamClassifier* m : {&both, &linear}) {
    NoGradGuard no_grad;
    const Tensor weight = parameter(*m, "wide.weight"), wide_bias = parameter(*m, "wide_bias");
    REQUIRE(weight.defined());
    REQUIRE(wide_bias.defined());
    weight.copy_(table);
    wide_bias.copy_(bias);
    m->eval();
  }
  deep.eval();

  const std::vector<std::vector<std::int64_t>> rows = {{4, 9}, {5, 6, 7, 8}};
  const FeatureBags bags = feature_bags(rows, {0, 1});
  const Tensor tokens = from_vector(std::vector<std::int64_t>{4, 5, 6, 0, 7, 8, 9, 10}, {2, 4});
  const Tensor padding = from_vector(std::vector<bool>{false, false, false, true, false, false, false, false}, {2, 4});

  // By hand: email 0 = (row 4 + row 9) / sqrt(2) + bias, email 1 = (rows 5..8) / 2 + bias; row r = (0.2 r, 0.2 r +
  // 0.1).
  const double s2 = 1 / std::sqrt(2.0);
  const std::vector<float> expected = {
      static_cast<float>((0.8 + 1.8) * s2 + 0.25), static_cast<float>((0.9 + 1.9) * s2 - 0.5),
      static_cast<float>((1.0 + 1.2 + 1.4 + 1.6) / 2 + 0.25), static_cast<float>((1.1 + 1.3 + 1.5 + 1.7) / 2 - 0.5)};
  const std::vector<float> linear_logits = values(linear.forward(tokens, padding, bags));
  REQUIRE(linear_logits.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i)
    CHECK(linear_logits[i] == doctest::Approx(expected[i]).epsilon(1e-6));

  const std::vector<float> deep_logits = values(deep.forward(tokens, padding, FeatureBags()));
  const std::vector<float> both_logits = values(both.forward(tokens, padding, bags));
  for (std::size_t i = 0; i < expected.size(); ++i)
    CHECK(both_logits[i] == doctest::Approx(deep_logits[i] + linear_logits[i]).epsilon(1e-6));
}

TEST_CASE("spam model: wide and deep passes float64 gradcheck in every parameter") {
  SpamTrainConfig config = small_config();
  config.model = "wide_and_deep";
  Generator gen(9);
  SpamClassifier model(model_options(config, 12, 10), gen);
  model.to(kFloat64);
  model.eval();  // no dropout: the function must be the same at every evaluation
  {
    // Nonzero rows for the linear model (it starts at zero), so its gradient meets a real softmax.
    NoGradGuard no_grad;
    parameter(model, "wide.weight").copy_(randn({10, 2}, gen, kFloat64) * 0.5);
  }
  const Tensor tokens = from_vector(std::vector<std::int64_t>{4, 5, 6, 0, 7, 4, 9, 10}, {2, 4});
  const Tensor padding = from_vector(std::vector<bool>{false, false, false, true, false, false, false, false}, {2, 4});
  const FeatureBags bags = feature_bags({{2, 7}, {3, 4, 7, 9}}, {0, 1});
  auto f = [&](const TensorList&) { return model.forward(tokens, padding, bags); };
  const GradcheckResult r = gradcheck(f, {}, model.named_parameters());
  CHECK_MESSAGE(r.passed, r.message());
  CHECK(r.inputs.size() == model.named_parameters().size());
}

TEST_CASE("spam model: the linear model's gradient reaches the rows of the email's features only") {
  SpamTrainConfig config;
  config.model = "linear";
  Generator gen(1);
  SpamClassifier model(model_options(config, 8, 6), gen);
  const FeatureBags bags = feature_bags({{4, 5}}, {0});
  const Tensor logits = model.forward(Tensor(), Tensor(), bags);
  nn::cross_entropy(logits, from_vector(std::vector<std::int64_t>{1}, {1})).backward();
  const Tensor grad = parameter(model, "wide.weight").grad();
  REQUIRE(grad.defined());
  const std::vector<float> g = values(grad);
  // Zero logits: softmax (0.5, 0.5), so d loss / d logits = (0.5, -0.5); rows 4 and 5 take it times 1/sqrt(2).
  const float w = static_cast<float>(0.5 / std::sqrt(2.0));
  const std::vector<float> expected = {0, 0, 0, 0, 0, 0, 0, 0, w, -w, w, -w};
  REQUIRE(g.size() == expected.size());
  for (std::size_t i = 0; i < g.size(); ++i) CHECK(g[i] == doctest::Approx(expected[i]).epsilon(1e-6));
  const Tensor bias = parameter(model, "wide_bias");
  REQUIRE(bias.defined());
  CHECK(values(bias.grad()) == std::vector<float>{0.5f, -0.5f});
}

TEST_CASE("spam model: the classifier refuses options without a part and bags that do not fit the batch") {
  SpamTrainConfig config = small_config();
  config.model = "linear";
  Generator gen(3);
  CHECK_THROWS_WITH_AS(model_options(config, 12, 0),
                       "model_options: --model linear needs the linear model's features, got 0", ValueError);
  SpamModelOptions neither = model_options(config, 12, 10);
  neither.wide_features = 0;
  CHECK_THROWS_WITH_AS(SpamClassifier(neither, gen),
                       "SpamClassifier: neither the transformer nor the linear model (wide_features 0)", ValueError);
  config.model = "wide_and_deep";
  SpamClassifier model(model_options(config, 12, 10), gen);
  const Tensor tokens = zeros({2, 3}, kInt64);
  const Tensor padding = zeros({2, 3}, kBool);
  CHECK_THROWS_WITH_AS(model.forward(tokens, padding, FeatureBags()),
                       "SpamClassifier::forward: the linear model needs the emails' feature bags", ValueError);
  CHECK_THROWS_WITH_AS(model.forward(tokens, padding, feature_bags({{4, 5}}, {0})),
                       "SpamClassifier::forward: 1 feature bags for 2 emails", ValueError);
  CHECK(model.forward(tokens, padding, feature_bags({{4, 5}, {}}, {0, 1})).shape() == Shape{2, 2});
}
