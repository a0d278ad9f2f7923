#pragma once
// What the spam classifier's train and predict modes share: the train configuration (which a run
// saves and predict reads back), the classifier (a transformer encoder, a linear model over the
// email's bag of features, or both), how an email becomes token ids and features, and batched
// prediction. The modes themselves are toy.cpp, train.cpp and predict.cpp; main.cpp picks one.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "examples/common/config.h"
#include "examples/spam/spam_corpus.h"
#include "tapegrad/autograd/autograd.h"
#include "tapegrad/data/data.h"
#include "tapegrad/nn/nn.h"
#include "tapegrad/train/progress.h"

namespace tapegrad::examples::spam {

// spam_classifier train: every key once, the defaults as initialisers (examples/configs/spam_classifier.json).
struct SpamTrainConfig {
  std::string data_dir;
  std::int64_t seed = 0;
  std::int64_t split_seed = 0;
  std::int64_t folds = 0;
  std::int64_t fold = 0;
  double train_fraction = 0.8;
  double validation_fraction = 0.1;
  std::int64_t vocab_size = 20000;
  std::int64_t min_freq = 2;
  std::int64_t max_length = 128;
  bool headers = true;
  std::string model = "wide_and_deep";
  double wide_lr = 0.1;
  std::string positions = "learned";
  std::int64_t d_model = 64;
  std::int64_t heads = 4;
  std::int64_t layers = 2;
  std::int64_t ff_hidden = 256;
  double dropout = 0.1;
  std::int64_t pretrain_epochs = 5;
  std::string pretrain_model = "skipgram";
  std::int64_t batch_size = 32;
  std::int64_t steps = 600;
  double lr = 2e-3;
  double weight_decay = 0.1;
  std::int64_t warmup_steps = 50;
  double min_lr_ratio = 0.05;
  double clip_grad_norm = 1.0;
  std::int64_t eval_every = 50;
  std::int64_t log_every = 10;
  std::int64_t eval_batch_size = 64;
  double nb_alpha = 1.0;
  std::string run_dir = "runs/spam_classifier";
  bool resume = false;
  std::int64_t stop_after = 0;
  std::int64_t checkpoint_every = 100;
  std::string progress = "auto";
  std::string precision = "float32";

  template <class F>
  static void fields(F& f) {
    using C = SpamTrainConfig;
    f("data_dir", &C::data_dir, "corpus folder (empty: $TAPEGRAD_DATA/spam-assassin or data/corpora/spam-assassin)");
    f("seed", &C::seed, "seed of the batches, the initial weights and the word2vec pretraining");
    f("split_seed", &C::split_seed, "seed of the train/validation/test split");
    f("folds", &C::folds,
      "k-fold cross-validation: 0 validates on the split's validation emails; k >= 2 deals its training and "
      "validation emails into k stratified folds, drawn with --split_seed (the test emails stay), and validates "
      "on fold --fold");
    f("fold", &C::fold, "the validation fold of cross-validation, in [0, --folds); 0 without --folds");
    f("train_fraction", &C::train_fraction,
      "fraction of each class used for training (with --folds: with validation, the emails dealt into folds)");
    f("validation_fraction", &C::validation_fraction, "fraction of each class used for validation (the rest is test)");
    f("vocab_size", &C::vocab_size, "vocabulary size including the 4 special tokens");
    f("min_freq", &C::min_freq,
      "words seen fewer times in the training split are <unk>; the linear model keeps the features of at least "
      "this many training emails");
    f("max_length", &C::max_length,
      "tokens the transformer reads from the start of each email (headers, subject, body)");
    f("headers", &C::headers,
      "the transformer reads the sender, mailer, MIME and list headers as name:word tokens before the subject "
      "(the linear model reads its headers either way)");
    f("model", &C::model,
      "transformer: the encoder over the first max_length tokens; linear: logistic regression over the bag of "
      "the words of the email and its sender-side headers; wide_and_deep: the sum of both models' logits, trained "
      "together",
      {"transformer", "linear", "wide_and_deep"});
    f("wide_lr", &C::wide_lr, "peak Adam learning rate of the linear model (no weight decay)");
    f("positions", &C::positions, "position encoding", {"learned", "sinusoidal"});
    f("d_model", &C::d_model, "model width");
    f("heads", &C::heads, "attention heads");
    f("layers", &C::layers, "encoder layers");
    f("ff_hidden", &C::ff_hidden, "hidden size of the feed-forward sublayers (GELU)");
    f("dropout", &C::dropout, "dropout probability (embeddings, attention, sublayers)");
    f("pretrain_epochs", &C::pretrain_epochs,
      "epochs of word2vec (negative sampling) on the training emails whose vectors start the word embeddings (0: "
      "random embeddings)");
    f("pretrain_model", &C::pretrain_model, "word2vec model of the pretraining", {"cbow", "skipgram"});
    f("batch_size", &C::batch_size, "emails per step");
    f("steps", &C::steps, "optimiser steps");
    f("lr", &C::lr, "peak AdamW learning rate");
    f("weight_decay", &C::weight_decay, "AdamW decoupled weight decay (not on biases, norms, positions)");
    f("warmup_steps", &C::warmup_steps, "linear warm-up steps before the cosine decay");
    f("min_lr_ratio", &C::min_lr_ratio, "final learning rate as a fraction of the peak");
    f("clip_grad_norm", &C::clip_grad_norm, "global gradient-norm clip (0: off)");
    f("eval_every", &C::eval_every, "steps between validation runs (best model kept)");
    f("log_every", &C::log_every, "steps between metrics.jsonl lines");
    f("eval_batch_size", &C::eval_batch_size, "emails per forward pass when evaluating");
    f("nb_alpha", &C::nb_alpha, "Laplace smoothing of the Naive Bayes baseline");
    f("run_dir", &C::run_dir, "where the run's files go");
    f("resume", &C::resume, "continue the interrupted run in run_dir from its checkpoint (same config)");
    f("stop_after", &C::stop_after, "stop after this many steps, checkpointed, for a later --resume true (0: run all)");
    f("checkpoint_every", &C::checkpoint_every,
      "steps between checkpoints, so a killed run can --resume true (0: only at the end; a multiple of "
      "--eval_every)");
    f("progress", &C::progress, "progress display", train::progress_names());
    f("precision", &C::precision, "float32, or bf16: forward passes under bfloat16 autocast, weights float32",
      {"float32", "bf16"});
  }
};

// Options of the model, read from a train configuration (also the one a run saved).
struct SpamModelOptions {
  bool deep = true;                // the transformer encoder
  std::int64_t wide_features = 0;  // features of the linear model (0: none)
  std::int64_t vocab_size = 0;
  std::int64_t max_length = 256;
  bool learned_positions = true;
  nn::TransformerLayerOptions layer;
  std::int64_t layers = 2;
};

// vocab_size: the transformer's vocabulary; features: the linear model's. ValueError when the
// config's model has a linear part and features < 1.
SpamModelOptions model_options(const SpamTrainConfig& config, std::int64_t vocab_size, std::int64_t features);

// What the linear model reads for a batch of emails: the distinct known feature ids of every email
// one after another (Int64), where each email's start (Int64 offsets), and each id's weight,
// 1/sqrt(the email's distinct known features) (Float32), so an email's binary feature vector has
// unit length.
struct FeatureBags {
  Tensor ids, offsets, weights;
};

// The bags of `rows`, from each dataset row's feature ids (as feature_ids gives them). IndexError
// for a row outside `features`.
FeatureBags feature_bags(const std::vector<std::vector<std::int64_t>>& features, const std::vector<std::size_t>& rows);

// The classifier's logits, the sum of the parts the options ask for:
//  - deep: word embeddings + positions -> encoder -> masked mean pool -> Linear(d, 2);
//  - wide: logistic regression over the email's bag of features, a (features, 2) table whose rows
//    the bag sums (nn::EmbeddingBag, each row times its feature's weight) plus a bias.
// Children: "tok_emb", "pos", "emb_dropout", "encoder", "head" (deep), "wide" (wide); parameter
// "wide_bias" (wide).
class SpamClassifier : public nn::Module {
 public:
  // Weights and dropout seeds drawn from gen (not the default generator), so a run is reproducible from
  // its config's seed. The linear model starts at zero. ValueError for options that ask for neither part.
  SpamClassifier(const SpamModelOptions& o, Generator& gen) : d_model_(o.layer.d_model()) {
    if (!o.deep && o.wide_features <= 0)
      throw ValueError(message("SpamClassifier: neither the transformer nor the linear model (wide_features ",
                               o.wide_features, ")"));
    if (o.deep) {
      tok_emb_ = register_module(
          "tok_emb",
          nn::Embedding(nn::EmbeddingOptions(o.vocab_size, d_model_).padding_idx(data::Vocab::kPad).generator(&gen)));
      if (o.learned_positions) {
        learned_pos_ = register_module(
            "pos",
            nn::LearnedPositionEmbedding(nn::LearnedPositionEmbeddingOptions(o.max_length, d_model_).generator(&gen)));
      } else {
        sinusoidal_pos_ = register_module("pos", nn::SinusoidalPositionalEncoding(o.max_length, d_model_));
      }
      emb_dropout_ = register_module("emb_dropout", nn::Dropout(nn::DropoutOptions(o.layer.dropout()).generator(&gen)));
      encoder_ = register_module(
          "encoder", nn::TransformerEncoder(nn::TransformerLayerOptions(o.layer).generator(&gen), o.layers));
      head_ = register_module("head", nn::Linear(nn::LinearOptions(d_model_, 2).generator(&gen)));
    }
    if (o.wide_features > 0) {
      wide_ = register_module(
          "wide",
          nn::EmbeddingBag(
              nn::EmbeddingBagOptions(o.wide_features, 2).mode(nn::BagMode::Sum).init(nn::EmbeddingInit::Zeros)));
      wide_bias_ = register_parameter("wide_bias", zeros({2}));
    }
  }

  bool deep() const { return static_cast<bool>(encoder_); }
  bool wide() const { return static_cast<bool>(wide_); }
  const Tensor& token_embedding() const { return tok_emb_->weight(); }  // (vocab, d_model); deep only

  // tokens: Int64 (B, T), padding_mask: Bool (B, T), true = padding; bags: the B emails' features
  // (read by the linear model only) -> logits (B, 2). ValueError when the linear model gets no bags
  // or another number of bags than the transformer's B emails.
  Tensor forward(const Tensor& tokens, const Tensor& padding_mask, const FeatureBags& bags) {
    if (wide() && !bags.offsets.defined())
      throw ValueError("SpamClassifier::forward: the linear model needs the emails' feature bags");
    if (wide() && tokens.defined() && bags.offsets.numel() != tokens.size(0))
      throw ValueError(
          message("SpamClassifier::forward: ", bags.offsets.numel(), " feature bags for ", tokens.size(0), " emails"));
    Tensor logits;
    if (deep()) {
      const Tensor e = tok_emb_(tokens);                                                           // (B, T, d)
      const Tensor x = emb_dropout_(learned_pos_ ? learned_pos_(e) : sinusoidal_pos_(e));          // (B, T, d)
      const Tensor h = encoder_(x, nn::AttentionForwardOptions().key_padding_mask(padding_mask));  // (B, T, d)
      const Tensor keep = logical_not(padding_mask).to(h.dtype()).unsqueeze(-1);                   // (B, T, 1)
      const Tensor count = clamp(keep.sum({1}), 1.0, std::nullopt);                                // (B, 1)
      logits = head_((h * keep).sum({1}) / count);                                                 // (B, 2)
    }
    if (wide()) {
      // feature_bags' weights are float32; they follow the table's dtype (float64 in gradcheck).
      const Tensor weights = bags.weights.defined() ? bags.weights.to(wide_->weight().dtype()) : Tensor();
      const Tensor linear = wide_(bags.ids, bags.offsets, weights) + wide_bias_;  // (B, 2)
      logits = logits.defined() ? logits + linear : linear;
    }
    return logits;
  }

 private:
  std::int64_t d_model_;
  nn::Embedding tok_emb_{nullptr};
  nn::LearnedPositionEmbedding learned_pos_{nullptr};  // one of the two positions is set
  nn::SinusoidalPositionalEncoding sinusoidal_pos_{nullptr};
  nn::Dropout emb_dropout_{nullptr};
  nn::TransformerEncoder encoder_{nullptr};
  nn::Linear head_{nullptr};
  nn::EmbeddingBag wide_{nullptr};
  Tensor wide_bias_;
};

struct Prediction {
  std::vector<std::int64_t> labels;
  std::vector<double> p_spam;
  double loss = 0;  // mean cross-entropy when the rows have labels
};

// Runs the model over `rows` of the loader's dataset in eval mode, without gradients; `features`
// holds every dataset row's feature ids (empty when the model has no linear part).
Prediction predict_rows(SpamClassifier& model, const data::DataLoader& loader,
                        const std::vector<std::vector<std::int64_t>>& features, const std::vector<std::size_t>& rows,
                        std::int64_t batch_size);

std::vector<std::int64_t> labels_of(const data::Dataset& dataset, const std::vector<std::size_t>& rows);

// The words of an email the transformer reads, the first max_words of: with `headers`, each kept
// header's (kept_header_names()) first kMaxHeaderWords words prefixed by its name ("from:example", "x-mailer:outlook"),
// then the words of its subject and cleaned body.
constexpr std::size_t kMaxHeaderWords = 10;
std::vector<std::string> email_tokens(const Email& email, bool headers, std::size_t max_words = SIZE_MAX);

// Headers written on the receiving side, which tell how a message reached the mailbox it was
// collected from rather than what was sent: the delivering servers' (Received, Delivered-To,
// Delivery-Date), the mail programs' bookkeeping (Status, X-Status, X-Keywords, X-UID, X-UIDL,
// X-Mozilla-Status, X-Mozilla-Status2) and spam filters' verdicts (any name containing "spam").
// In the SpamAssassin corpus ham and spam reached different mailboxes, so these would teach a
// classifier the collection instead of the mail. name in lower case.
bool is_receiving_side_header(std::string_view name);

// What the linear model reads of an email: the first kMaxHeaderWords words of every top-level
// header but Subject (whose words come with the text) and the receiving side's
// (is_receiving_side_header), prefixed by its name, then every word of its subject and cleaned body.
std::vector<std::string> email_features(const Email& email);

// The features' vocabulary: the email_features of at least min_emails of the emails at `rows` (the
// training split), those of the most emails first, ties by feature.
data::Vocab build_feature_vocab(const std::vector<Email>& emails, const std::vector<std::size_t>& rows,
                                std::int64_t min_emails);

// The distinct ids of the features the vocabulary holds, ascending (unknown ones, and the spellings of
// the vocabulary's special tokens, are left out).
std::vector<std::int64_t> feature_ids(const std::vector<std::string>& features, const data::Vocab& vocab);

// The ids the model reads: the first max_length words, <unk> alone for an empty email (it still has one position).
std::vector<std::int64_t> encode_words(const std::vector<std::string>& words, const data::Vocab& vocab,
                                       std::int64_t max_length);

// The three modes: each makes its Config (all its options, with their defaults) and runs with it;
// `files` are the positional arguments (predict's email files, empty for the others).
Config toy_config();
int run_toy(const Config& config);
Config train_config();
int run_train(const Config& config);
Config predict_config();
int run_predict(const Config& config, const std::vector<std::string>& files);

}  // namespace tapegrad::examples::spam
