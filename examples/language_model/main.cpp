// language_model: a byte-level transformer language model trained on the King James Bible (Debian's
// bible-kjv-text, decoded by examples/common/kjv.h), evaluated on whole books it never saw, and
// asked to continue a prompt.
//
//   data     the verses, one per line, as bytes (vocabulary 256), or (--tokenizer bpe) as the tokens
//            of a byte-level BPE learned from the training text (--bpe_vocab, 1024), or (--tokenizer
//            words) as lowercase words, those seen fewer than --word_min_count times in the training
//            text read as <unk>, each verse ended by <eos>; the books Ruth,
//            Proverbs, Joel, Mark and James (4.7% of the text) held out; training windows of 128
//            tokens at random offsets (data::TokenStream), a fresh draw every step
//   model    nn::LanguageModel: d_model 256, 8 heads, 4 pre-norm blocks, FFN 1024 with GELU, learned
//            positions (or sinusoidal / rotary), multi-head attention (or grouped-query, multi-query,
//            multi-head latent), final LayerNorm, Linear(256, vocabulary); with --pointer_window L
//            (words only) a pointer sentinel mixture over the last L positions on top
//            (nn::PointerSentinel, Merity et al. 2016), trained with the paper's loss
//   training AdamW (lr 1e-3, weight decay 0.01), gradient norm clipped at 1, warmup then cosine decay
//            over the fraction of the run done, for 10 minutes of training time (time_budget_s)
//   measures held-out loss in nats per byte and bits per byte (per character: the text is ASCII) over
//            every held-out window, a BPE model's token losses summed over the bytes they cover (a word
//            model: nats per word and perplexity, by the targets' training counts, and with the pointer
//            the share of each target's probability the pointer gave and the weight it took); training
//            tokens per second, KV-cache bytes per token (measured from the caches), and samples:
//            greedy, temperature, top-k and top-p continuations of the prompt, and the best of a beam
//            search to the end of the verse
//
// Files (run_dir, default runs/language_model/): config.json, metrics.jsonl (training loss per
// token), checkpoint/, loss.svg, summary.json, samples.txt, and tokenizer.json with --tokenizer bpe
// (vocab.json with --tokenizer words).
//
// Usage: language_model [--config FILE] [--key value ...]   (--help lists the keys)

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "examples/common/data_parallel.h"
#include "examples/common/run_dir.h"
#include "examples/language_model/corpus.h"
#include "examples/language_model/lm_config.h"
#include "tapegrad/data/bpe.h"
#include "tapegrad/data/token_stream.h"
#include "tapegrad/data/tokenizer.h"
#include "tapegrad/data/vocab.h"
#include "tapegrad/io/file.h"
#include "tapegrad/nn/nn.h"
#include "tapegrad/optim/optim.h"
#include "tapegrad/train/trainer.h"

using namespace tapegrad;
using examples::Config;
using examples::ConfigError;
using examples::LmConfig;

namespace {

using C = LmConfig;
// The text's token ids: its bytes (vocabulary 256), byte-level BPE learned from the training text
// (--tokenizer bpe, --bpe_vocab tokens, saved as tokenizer.json in the run directory), or words
// (--tokenizer words: data::Vocab of the training text's words, saved as vocab.json; <eos> ends a
// verse).
class LmTokenizer {
 public:
  LmTokenizer(const LmConfig& c, const std::string& train_text) {
    if (c.tokenizer == "bpe") bpe_ = data::BpeTokenizer::train(train_text, c.bpe_vocab);
    if (c.tokenizer == "words") {
      std::vector<std::vector<std::string>> verses;
      for (const std::string& line : lines(train_text)) verses.push_back(data::word_tokenize(line));
      words_ = data::Vocab::build(verses, data::VocabOptions{c.word_min_count, 0});
      for (const auto& verse : verses)
        for (const std::string& word : verse) ++counts_[words_->id(word)];
      counts_[data::Vocab::kEos] = static_cast<std::int64_t>(verses.size());  // one <eos> a verse
    }
  }
  const std::optional<data::BpeTokenizer>& bpe() const { return bpe_; }
  const std::optional<data::Vocab>& words() const { return words_; }
  std::int64_t vocab_size() const { return bpe_ ? bpe_->vocab_size() : words_ ? words_->size() : 256; }
  std::vector<std::int64_t> encode(const std::string& text) const {
    if (bpe_) return bpe_->encode(text);
    if (!words_) return examples::byte_tokens(text);
    // Each verse's words and its <eos>; a text without a final newline (a prompt) gets no <eos>.
    std::vector<std::int64_t> ids;
    const std::vector<std::string> verses = lines(text);
    for (std::size_t i = 0; i < verses.size(); ++i) {
      const bool ended = i + 1 < verses.size() || (!text.empty() && text.back() == '\n');
      const std::vector<std::int64_t> verse = words_->encode(data::word_tokenize(verses[i]), false, ended);
      ids.insert(ids.end(), verse.begin(), verse.end());
    }
    return ids;
  }
  std::string decode(const std::vector<std::int64_t>& ids) const {
    if (bpe_) return bpe_->decode(ids);
    if (!words_) return examples::bytes_text(ids);
    std::string text;
    for (const std::int64_t id : ids) {
      if (id == data::Vocab::kEos) {
        text += "\n";
        continue;
      }
      if (!text.empty() && text.back() != '\n') text += ' ';
      text += words_->token(id);
    }
    return text;
  }
  // The bytes of text token id stands for (byte and BPE tokens).
  std::int64_t bytes(std::int64_t id) const { return bpe_ ? static_cast<std::int64_t>(bpe_->token(id).size()) : 1; }
  // How often token id occurs in the training text (words; <unk> counts the words it stands for,
  // <eos> the verses).
  std::int64_t training_count(std::int64_t id) const {
    const auto it = counts_.find(id);
    return it == counts_.end() ? 0 : it->second;
  }
  // The id of the end of a verse ('\n' or <eos>), when it is one token.
  std::optional<std::int64_t> newline() const {
    if (words_) return data::Vocab::kEos;
    const std::vector<std::int64_t> ids = encode("\n");
    return ids.size() == 1 ? std::optional<std::int64_t>(ids[0]) : std::nullopt;
  }

 private:
  static std::vector<std::string> lines(const std::string& text) {
    std::vector<std::string> out;
    std::size_t start = 0;
    while (start < text.size()) {
      const std::size_t end = std::min(text.find('\n', start), text.size());
      out.push_back(text.substr(start, end - start));
      start = end + 1;
    }
    return out;
  }

  std::optional<data::BpeTokenizer> bpe_;
  std::optional<data::Vocab> words_;
  std::unordered_map<std::int64_t, std::int64_t> counts_;
};

void validate(const LmConfig& c) {
  const auto positive = [](std::int64_t v, auto member) {
    if (v < 1) throw ConfigError(message(examples::flag(member), " must be positive, got ", v));
  };
  positive(c.context, &C::context);
  positive(c.batch_size, &C::batch_size);
  positive(c.d_model, &C::d_model);
  positive(c.heads, &C::heads);
  positive(c.layers, &C::layers);
  positive(c.ff_hidden, &C::ff_hidden);
  positive(c.steps, &C::steps);
  positive(c.eval_every, &C::eval_every);
  positive(c.eval_windows, &C::eval_windows);
  positive(c.log_every, &C::log_every);
  if (c.d_model % c.heads != 0)
    throw ConfigError(message("--d_model must be a multiple of --heads, got ", c.d_model, " and ", c.heads));
  if (c.attention == "gqa" && (c.kv_heads < 1 || c.heads % c.kv_heads != 0))
    throw ConfigError(message("--kv_heads must divide --heads for gqa, got ", c.kv_heads, " and ", c.heads));
  if (c.attention == "mla" && (c.kv_lora_rank < 1 || c.rope_head_dim < 2 || c.rope_head_dim % 2 != 0))
    throw ConfigError(message("mla needs --kv_lora_rank >= 1 and an even --rope_head_dim >= 2, got ", c.kv_lora_rank,
                              " and ", c.rope_head_dim));
  if (!(c.dropout >= 0.0 && c.dropout < 1.0))
    throw ConfigError(message("--dropout must be in [0, 1), got ", c.dropout));
  if (!(c.lr > 0.0) || !(c.weight_decay >= 0.0) || !(c.clip_grad_norm >= 0.0) || !(c.time_budget_s >= 0.0))
    throw ConfigError(
        message("--lr must be positive and --weight_decay, --clip_grad_norm, --time_budget_s non-negative, got ", c.lr,
                ", ", c.weight_decay, ", ", c.clip_grad_norm, ", ", c.time_budget_s));
  if (!(c.warmup_fraction >= 0.0 && c.warmup_fraction < 1.0) || !(c.min_lr_ratio >= 0.0 && c.min_lr_ratio <= 1.0))
    throw ConfigError(message("--warmup_fraction must be in [0, 1) and --min_lr_ratio in [0, 1], got ",
                              c.warmup_fraction, " and ", c.min_lr_ratio));
  if (c.patience < 0 || c.checkpoint_every < 0 || c.sample_tokens < 0 || c.top_k < 0 || c.stop_after < 0)
    throw ConfigError("--patience, --checkpoint_every, --sample_tokens, --top_k and --stop_after must be >= 0");
  if (!(c.temperature > 0.0) || !(c.top_p > 0.0 && c.top_p <= 1.0))
    throw ConfigError(
        message("--temperature must be positive and --top_p in (0, 1], got ", c.temperature, " and ", c.top_p));
  if (c.prompt.empty()) throw ConfigError("--prompt must not be empty");
  if (c.tokenizer == "bpe" && c.bpe_vocab < 257)
    throw ConfigError(message("--bpe_vocab must be above the 256 bytes, got ", c.bpe_vocab));
  if (c.word_min_count < 1 || c.pointer_window < 0)
    throw ConfigError(message("--word_min_count must be positive and --pointer_window >= 0, got ", c.word_min_count,
                              " and ", c.pointer_window));
  if (c.pointer_window > 0 && c.tokenizer != "words")
    throw ConfigError("--pointer_window copies words: it needs --tokenizer words, got --tokenizer " + c.tokenizer);
}

nn::PositionEncoding position_encoding(const std::string& name) {
  if (name == "sinusoidal") return nn::PositionEncoding::Sinusoidal;
  if (name == "rotary") return nn::PositionEncoding::Rotary;
  return nn::PositionEncoding::Learned;
}

// The model the options describe, with attention `attention` (mha, gqa, mqa, mla), over vocab tokens.
nn::LanguageModelOptions model_options(const LmConfig& c, const std::string& attention, std::int64_t vocab) {
  nn::TransformerLayerOptions layer = nn::TransformerLayerOptions(c.d_model, c.heads)
                                          .dim_feedforward(c.ff_hidden)
                                          .activation(nn::Activation::GELU)
                                          .dropout(c.dropout)
                                          .norm_first(true);
  if (attention == "gqa") layer.num_kv_heads(c.kv_heads);
  if (attention == "mqa") layer.num_kv_heads(1);
  if (attention == "mla") {
    const std::int64_t head_dim = c.d_model / c.heads;
    layer.latent_attention(nn::MultiHeadLatentAttentionOptions(c.d_model, c.heads)
                               .kv_lora_rank(c.kv_lora_rank)
                               .qk_nope_head_dim(head_dim)
                               .qk_rope_head_dim(c.rope_head_dim)
                               .v_head_dim(head_dim)
                               .max_len(c.context));
  }
  if (c.moe_experts > 0)
    layer.moe(nn::MoEOptions(c.d_model)
                  .num_experts(c.moe_experts)
                  .top_k(c.moe_top_k)
                  .hidden(c.ff_hidden)
                  .activation(nn::Activation::GELU)
                  .capacity_factor(c.moe_capacity_factor)
                  .noisy_gating(c.moe_noisy));
  return nn::LanguageModelOptions()
      .vocab_size(vocab)
      .max_len(c.context)
      .num_layers(c.layers)
      .positions(position_encoding(c.positions))
      .tie_embeddings(c.tie_embeddings)
      .layer(layer);
}

// The mixture-of-experts figures of a run: every block's assignments per expert and dropped
// assignments, summed over the training steps, and the last step's auxiliary losses.
class MoeTally {
 public:
  explicit MoeTally(std::int64_t experts) : experts_(experts) {}

  // Adds a step's blocks; returns the sum of their auxiliary losses (load balancing, plus the
  // noisy-gating load loss when there is one).
  Tensor add(const std::vector<const nn::MoEOutput*>& blocks) {
    if (kept_.empty()) kept_.assign(blocks.size(), std::vector<std::int64_t>(static_cast<std::size_t>(experts_), 0));
    dropped_.resize(blocks.size(), 0);
    Tensor aux;
    last_balance_ = last_load_ = 0.0;
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      const nn::MoEOutput& m = *blocks[i];
      for (std::size_t e = 0; e < kept_[i].size(); ++e) kept_[i][e] += m.tokens_per_expert[e];
      dropped_[i] += m.dropped_assignments;
      Tensor block = m.load_balancing_loss;
      last_balance_ += m.load_balancing_loss.item();
      if (m.load_loss.defined()) {
        block = block + m.load_loss;
        last_load_ += m.load_loss.item();
      }
      aux = aux.defined() ? aux + block : block;
    }
    return aux;
  }

  nlohmann::json summary() const {
    nlohmann::json blocks = nlohmann::json::array();
    for (std::size_t i = 0; i < kept_.size(); ++i) {
      std::int64_t kept = 0;
      for (const std::int64_t k : kept_[i]) kept += k;
      const double all = static_cast<double>(kept + dropped_[i]);
      std::vector<double> share;
      for (const std::int64_t k : kept_[i]) share.push_back(all > 0 ? static_cast<double>(k) / all : 0.0);
      blocks.push_back({{"assignment_share_per_expert", share},
                        {"dropped_assignments", dropped_[i]},
                        {"dropped_share", all > 0 ? static_cast<double>(dropped_[i]) / all : 0.0}});
    }
    return {{"experts", experts_},
            {"blocks", blocks},
            {"last_load_balancing_loss", last_balance_},
            {"last_load_loss", last_load_}};
  }

 private:
  std::int64_t experts_;
  std::vector<std::vector<std::int64_t>> kept_;  // per block, per expert
  std::vector<std::int64_t> dropped_;            // per block
  double last_balance_ = 0.0, last_load_ = 0.0;
};

// The word model with its pointer, one module for the Trainer (optimiser, checkpoints, replicas):
// children "lm" and "pointer".
class PointerLmImpl : public nn::Module {
 public:
  PointerLmImpl(const nn::LanguageModel& lm, const nn::PointerSentinel& pointer) {
    register_module("lm", lm);
    register_module("pointer", pointer);
  }
};
TAPEGRAD_MODULE(PointerLm);

// The held-out targets' nats by the model (with the pointer when there is one), summed, and for a
// word model by the targets' training counts: 1-10, 11-100, 101-1000, above, and <unk>.
struct Evaluation {
  struct Bucket {
    std::string name;
    std::int64_t targets = 0;
    double nats = 0.0;
    double pointer_share = 0.0;   // sum of the pointer's part of p(target): pointer probability / p
    double pointer_weight = 0.0;  // sum of 1 - g: the weight the pointer took from the vocabulary
  };
  double nats = 0.0;
  std::int64_t targets = 0, bytes = 0;
  std::vector<Bucket> buckets;

  double per_byte() const { return nats / static_cast<double>(std::max<std::int64_t>(bytes, 1)); }
  double per_token() const { return nats / static_cast<double>(std::max<std::int64_t>(targets, 1)); }
  nlohmann::json by_frequency(bool pointer) const {
    nlohmann::json out = nlohmann::json::array();
    for (const Bucket& b : buckets) {
      const double n = static_cast<double>(std::max<std::int64_t>(b.targets, 1));
      nlohmann::json row = {{"training_count", b.name}, {"targets", b.targets}, {"nats_per_word", b.nats / n}};
      if (pointer) {
        row["pointer_share_of_target_probability"] = b.pointer_share / n;
        row["pointer_weight"] = b.pointer_weight / n;
      }
      out.push_back(row);
    }
    return out;
  }
};

Evaluation evaluate(nn::LanguageModel& model, const nn::PointerSentinel& pointer,
                    const std::vector<data::TokenBatch>& batches, const LmTokenizer& tokenizer) {
  Evaluation e;
  if (tokenizer.words())
    for (const char* name : {"1-10", "11-100", "101-1000", ">1000", "<unk>"}) e.buckets.push_back({name});
  const auto bucket_of = [&](std::int64_t id) -> Evaluation::Bucket& {
    if (id == data::Vocab::kUnk) return e.buckets[4];
    const std::int64_t count = tokenizer.training_count(id);
    return e.buckets[count <= 10 ? 0 : count <= 100 ? 1 : count <= 1000 ? 2 : 3];
  };
  for (const data::TokenBatch& b : batches) {
    Tensor nats, gate, pointer_probs;  // (B * T) each
    if (pointer) {
      const Tensor hidden = model->hidden(b.input);
      const nn::PointerSentinelOutput out = pointer(hidden, b.input, model->logits(hidden), b.target);
      nats = (-out.log_probs).reshape({-1});
      gate = out.gate.reshape({-1});
      pointer_probs = out.pointer_probs.reshape({-1});
    } else {
      const Tensor logits = model(b.input).reshape({-1, tokenizer.vocab_size()});
      nats = nn::cross_entropy(logits, b.target.reshape({-1}), {nn::Reduction::None});
    }
    const std::vector<double> n = nats.to_vector<double>();
    const std::vector<std::int64_t> targets = b.target.contiguous().to_vector<std::int64_t>();
    const std::vector<double> g = gate.defined() ? gate.to_vector<double>() : std::vector<double>();
    const std::vector<double> copied =
        pointer_probs.defined() ? pointer_probs.to_vector<double>() : std::vector<double>();
    for (std::size_t i = 0; i < targets.size(); ++i) {
      e.nats += n[i];
      e.bytes += tokenizer.bytes(targets[i]);
      if (e.buckets.empty()) continue;
      Evaluation::Bucket& bucket = bucket_of(targets[i]);
      ++bucket.targets;
      bucket.nats += n[i];
      if (g.empty()) continue;
      const double p = std::exp(-n[i]);
      if (p > 0.0) bucket.pointer_share += copied[i] / p;
      bucket.pointer_weight += 1.0 - g[i];
    }
    e.targets += static_cast<std::int64_t>(targets.size());
  }
  return e;
}

// The held-out loss the run reports and early-stops on: nats per byte of text (byte and BPE models,
// which then compare), nats per word for a word model.
double heldout_loss(const Evaluation& e, const LmTokenizer& tokenizer) {
  return tokenizer.words() ? e.per_token() : e.per_byte();
}

// KV-cache bytes per token and layer of each attention kind at these sizes, measured from the cache
// of a (randomly initialised) model after one forward over a full window.
nlohmann::json kv_cache_table(const LmConfig& c, std::int64_t vocab) {
  nlohmann::json table = nlohmann::json::object();
  NoGradGuard no_grad;
  for (const char* attention : {"mha", "gqa", "mqa", "mla"}) {
    Generator gen(0);
    nn::LanguageModel model(model_options(c, attention, vocab).generator(&gen));
    model->eval();
    nn::LanguageModelCache cache;
    model->forward(zeros({1, c.context}, kInt64), &cache);
    table[attention] = cache.bytes_per_token_per_layer();
  }
  return table;
}

// Generated tokens as text. The corpus is ASCII, but a model may emit any byte: those show as '?', so
// that summary.json stays valid UTF-8.
std::string shown_text(const std::vector<std::int64_t>& ids, const LmTokenizer& tokenizer) {
  std::string text = tokenizer.decode(ids);
  for (char& ch : text)
    if (ch != '\n' && (ch < ' ' || ch > '~')) ch = '?';
  return text;
}

// With a pointer, every token is drawn from the mixture (nn::PointerSentinelDecoder, which slides
// over the last context tokens itself).
std::string continuation(nn::LanguageModel& model, const nn::PointerSentinel& pointer, const LmConfig& c,
                         const LmTokenizer& tokenizer, double temperature, std::int64_t top_k, double top_p,
                         std::uint64_t seed) {
  const std::vector<std::int64_t> prompt = tokenizer.encode(c.prompt);
  const Tensor start = from_vector(prompt, {1, static_cast<std::int64_t>(prompt.size())});
  nn::GenerationOptions g;
  g.max_new_tokens = c.sample_tokens;
  g.temperature = temperature;
  g.top_k = top_k;
  g.top_p = top_p;
  Generator gen(seed);
  Tensor out;
  if (pointer) {
    nn::PointerSentinelDecoder decoder(model, pointer);
    out = nn::generate(decoder, start, g, gen);
    model->train();
    pointer->train();
  } else {
    g.sliding_window = true;
    out = model->generate(start, g, gen);
  }
  return shown_text(out.to_vector<std::int64_t>(), tokenizer);
}

// Beam search (4 beams, GNMT length penalty alpha 1) until the end of the verse ('\n' when it is a
// token of its own, <eos> for words), within the context.
std::string beam_continuation(nn::LanguageModel& model, const nn::PointerSentinel& pointer, const LmConfig& c,
                              const LmTokenizer& tokenizer) {
  const std::vector<std::int64_t> prompt = tokenizer.encode(c.prompt);
  const auto prompt_len = static_cast<std::int64_t>(prompt.size());
  if (prompt_len >= c.context) return c.prompt;
  nn::BeamSearchOptions o;
  o.beam_size = 4;
  o.max_new_tokens = std::min(c.sample_tokens, c.context - prompt_len);
  if (o.max_new_tokens < 1) return c.prompt;
  o.eos_token = tokenizer.newline().value_or(-1);
  o.length_penalty = 1.0;
  std::unique_ptr<nn::Decoder> decoder;
  if (pointer) decoder = std::make_unique<nn::PointerSentinelDecoder>(model, pointer);
  else decoder = std::make_unique<nn::LanguageModelDecoder>(model);
  const std::vector<nn::Hypothesis> best = nn::beam_search(*decoder, from_vector(prompt, {1, prompt_len}), o)[0];
  model->train();
  if (pointer) pointer->train();
  std::vector<std::int64_t> ids = prompt;
  ids.insert(ids.end(), best[0].tokens.begin(), best[0].tokens.end());
  return shown_text(ids, tokenizer);
}

int run(const Config& options) {
  const LmConfig c = examples::read_config<LmConfig>(options);
  validate(c);

  // Under mpirun every process trains on its share of each global batch; rank 0 writes the files.
  examples::DataParallel parallel = examples::DataParallel::from_environment();
  examples::RunDir run(c.run_dir);
  if (c.resume) {
    run.check_same_config(
        options, {examples::key_of(&C::resume), examples::key_of(&C::checkpoint_every), examples::key_of(&C::progress),
                  examples::key_of(&C::prompt), examples::key_of(&C::sample_tokens), examples::key_of(&C::temperature),
                  examples::key_of(&C::top_k), examples::key_of(&C::top_p), examples::key_of(&C::stop_after)});
  } else if (parallel.is_main()) {
    run.clear_previous_run();
  }
  if (parallel.is_main()) run.write_config(options);

  const examples::Bible bible = examples::load_bible(c.data);
  const examples::LmCorpus corpus = examples::kjv_corpus(bible, examples::split_books(c.heldout_books));
  const LmTokenizer tokenizer(c, corpus.train_text);
  if (tokenizer.bpe() && parallel.is_main()) tokenizer.bpe()->save(run.file("tokenizer.json"));
  if (tokenizer.words() && parallel.is_main()) tokenizer.words()->save(run.file("vocab.json"));
  const std::int64_t vocab = tokenizer.vocab_size();
  const auto stream_options = data::TokenStreamOptions().batch_size(c.batch_size).context(c.context);
  const std::vector<std::int64_t> train_ids = tokenizer.encode(corpus.train_text);
  const data::TokenStream train_stream(
      train_ids, data::TokenStreamOptions(stream_options).seed(static_cast<std::uint64_t>(c.seed)));
  const data::TokenStream heldout_stream(tokenizer.encode(corpus.heldout_text), stream_options);
  const std::vector<data::TokenBatch> eval_batches = heldout_stream.eval_batches(c.eval_windows);
  if (parallel.is_main())
    std::cerr << "language_model: " << corpus.train_text.size() << " training bytes (" << corpus.train_verses
              << " verses), " << corpus.heldout_text.size() << " held-out bytes (" << corpus.heldout_verses
              << " verses of " << c.heldout_books << ")\n";

  Generator init(static_cast<std::uint64_t>(c.seed));
  nn::LanguageModel model(model_options(c, c.attention, vocab).generator(&init));
  // With a pointer, the Trainer steps, checkpoints and replicates both halves as one module.
  nn::PointerSentinel pointer{nullptr};
  PointerLm with_pointer{nullptr};
  if (c.pointer_window > 0) {
    pointer = nn::PointerSentinel(nn::PointerSentinelOptions(c.d_model).window(c.pointer_window).generator(&init));
    with_pointer = PointerLm(model, pointer);
  }
  nn::Module& trained_module = pointer ? static_cast<nn::Module&>(*with_pointer) : *model;
  parallel.replicate(trained_module);
  optim::AdamW optimizer(trained_module.parameters(), optim::AdamWOptions(c.lr).weight_decay(c.weight_decay));

  train::TrainerOptions o;
  o.max_steps = c.steps;
  o.steps_per_epoch = train_stream.batches_per_epoch();
  o.time_budget_s = c.time_budget_s;
  o.log_every = c.log_every;
  o.eval_every = c.eval_every;
  o.checkpoint_every = c.checkpoint_every;
  o.clip_grad_norm = c.clip_grad_norm;
  o.run_dir = run.path();
  o.resume = c.resume;
  o.progress = train::parse_progress(c.progress);
  o.precision = train::parse_precision(c.precision);
  o.replicas = parallel.replicas();
  if (c.patience > 0) o.early_stopping = train::EarlyStopping{"val_loss", c.patience, 0.0, false};
  train::Trainer trainer(trained_module, optimizer, o);
  trainer.set_schedule(optim::warmup_cosine(c.warmup_fraction, c.min_lr_ratio));

  // With experts: their auxiliary losses join the loss, and their loads and drops are summed over
  // the training steps for the summary.
  MoeTally moe_tally(c.moe_experts);
  const auto step_fn = [&](std::int64_t step) {
    const data::TokenBatch b = train_stream.batch_at(step);  // the global batch; this process takes its rows
    const Tensor input = parallel.share(b.input), target = parallel.share(b.target);
    Tensor loss;
    if (pointer) {  // the paper's loss: -log p(y) - log(g + the pointer's weight on y)
      const Tensor hidden = model->hidden(input);
      loss = nn::pointer_sentinel_loss(pointer(hidden, input, model->logits(hidden), target));
    } else {
      loss = nn::cross_entropy(model(input).reshape({-1, vocab}), target.reshape({-1}));
    }
    const std::vector<const nn::MoEOutput*> experts = model->last_moe();
    if (!experts.empty()) loss = loss + moe_tally.add(experts) * c.moe_aux_weight;
    return train::StepOutput{loss, b.size(), b.tokens()};
  };
  const auto eval_fn = [&](std::int64_t) {
    const double loss = heldout_loss(evaluate(model, pointer, eval_batches, tokenizer), tokenizer);
    if (tokenizer.words()) return std::map<std::string, double>{{"val_loss", loss}, {"val_perplexity", std::exp(loss)}};
    return std::map<std::string, double>{{"val_loss", loss}, {"val_bpc", loss / std::log(2.0)}};
  };
  if (parallel.is_main())
    std::cerr << "language_model: " << trained_module.num_parameters() << " parameters, " << c.attention
              << " attention, " << c.positions << " positions" << (pointer ? ", a pointer sentinel" : "") << ", "
              << parallel.size() << " process(es)\n";
  if (c.stop_after > 0)
    trainer.set_stop_callback([&](const train::StepInfo& info) { return info.step == c.stop_after; });
  const train::TrainResult trained = trainer.fit(step_fn, eval_fn);
  if (!parallel.is_main()) return 0;  // rank 0 measures, samples and writes the summary
  if (trained.stop_reason == train::StopReason::Callback) {
    std::cerr << "language_model: stopped at step " << trained.steps << " (--stop_after); --resume true continues\n";
    return 0;
  }

  // The final measure reads every held-out window.
  Evaluation final_eval;
  {
    NoGradGuard no_grad;
    std::optional<AutocastGuard> autocast;  // measured in the precision it trained in, as eval_fn was
    if (o.precision == train::Precision::BFloat16) autocast.emplace(kBFloat16);
    trained_module.eval();
    final_eval = evaluate(model, pointer, heldout_stream.eval_batches(), tokenizer);
    trained_module.train();
  }
  const double final_loss = heldout_loss(final_eval, tokenizer);
  double last_logged_loss = trained.final_loss;
  for (const nlohmann::json& line : examples::read_jsonl(run.file("metrics.jsonl")))
    if (line.contains("loss")) last_logged_loss = line.at("loss").get<double>();

  // Cache sizes depend on the shapes only, so the table's entry for this attention is this model's.
  const nlohmann::json kv_table = kv_cache_table(c, vocab);
  const double kv_bytes = kv_table.at(c.attention).get<double>();

  const std::uint64_t seed = static_cast<std::uint64_t>(c.seed);
  const std::map<std::string, std::string> samples = {
      {"greedy", continuation(model, pointer, c, tokenizer, 0.0, 0, 1.0, seed)},
      {"temperature", continuation(model, pointer, c, tokenizer, c.temperature, 0, 1.0, seed + 1)},
      {"top_k", continuation(model, pointer, c, tokenizer, c.temperature, c.top_k, 1.0, seed + 2)},
      {"top_p", continuation(model, pointer, c, tokenizer, c.temperature, 0, c.top_p, seed + 3)},
      {"beam", beam_continuation(model, pointer, c, tokenizer)},
  };
  std::string samples_text;
  for (const auto& [name, text] : samples) samples_text += "== " + name + "\n" + text + "\n\n";
  io::write_file_atomic(run.file("samples.txt"), samples_text);
  std::cout << samples_text;

  const double tokens = static_cast<double>(trained.steps * c.batch_size * c.context);
  nlohmann::json summary;
  summary["heldout_loss"] = final_loss;
  if (tokenizer.words()) {  // nats per word; <unk> is a word of its own, so bytes do not compare
    summary["heldout_loss_unit"] = "nats per word";
    summary["heldout_perplexity"] = std::exp(final_loss);
    summary["heldout_by_training_count"] = final_eval.by_frequency(static_cast<bool>(pointer));
    summary["word_min_count"] = c.word_min_count;
    summary["pointer_window"] = c.pointer_window;
  } else {
    summary["heldout_loss_unit"] = "nats per byte";
    summary["heldout_bpc"] = final_loss / std::log(2.0);  // the corpus is ASCII: bits per byte and per character
    summary["heldout_bits_per_byte"] = final_loss / std::log(2.0);
  }
  summary["tokenizer"] = c.tokenizer;
  summary["vocab_size"] = vocab;
  summary["train_tokens_per_byte"] =
      static_cast<double>(train_ids.size()) / static_cast<double>(std::max<std::size_t>(corpus.train_text.size(), 1));
  summary["heldout_windows"] = heldout_stream.eval_windows();
  summary["train_loss"] = last_logged_loss;
  summary["steps"] = trained.steps;
  summary["stop_reason"] = train::to_string(trained.stop_reason);
  summary["train_seconds"] = trained.total_seconds;
  summary["tokens_per_s"] = trained.total_seconds > 0 ? tokens / trained.total_seconds : 0.0;
  summary["epochs"] = tokens / static_cast<double>(train_stream.size());
  summary["parameters"] = trained_module.num_parameters();
  summary["attention"] = c.attention;
  summary["positions"] = c.positions;
  summary["tie_embeddings"] = c.tie_embeddings;
  if (c.moe_experts > 0) summary["moe"] = moe_tally.summary();
  summary["precision"] = c.precision;
  summary["kv_cache_bytes_per_token_per_layer"] = kv_bytes;
  summary["kv_cache_bytes_per_token"] = kv_bytes * static_cast<double>(c.layers);
  summary["kv_cache_bytes_per_token_per_layer_by_attention"] = kv_table;
  summary["samples"] = samples;
  run.write_summary(summary);
  run.write_loss_plot(tokenizer.bpe()      ? "BPE language model, King James Bible"
                      : !tokenizer.words() ? "byte-level language model, King James Bible"
                      : pointer            ? "word-level language model with a pointer sentinel, King James Bible"
                                           : "word-level language model, King James Bible");
  const std::string measure = tokenizer.words()
                                  ? " nats/word (perplexity " + format_significant(std::exp(final_loss), 4) + ")"
                                  : " nats/byte (" + format_significant(final_loss / std::log(2.0), 4) + " bits/char)";
  std::cerr << "language_model: held-out loss " << format_significant(final_loss, 4) << measure << " after "
            << trained.steps << " steps, " << format_significant(summary["tokens_per_s"].get<double>(), 4)
            << " tokens/s; files in " << run.path() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Config config = examples::make_config<LmConfig>(
      "language_model", "a byte-level transformer language model trained on the King James Bible, held-out books");
  if (const int status = examples::parse_command_line(config, argc, argv, 1, nullptr); status >= 0) return status;
  try {
    return run(config);
  } catch (const ConfigError& e) {
    std::cerr << e.what() << "\n";
    return examples::kConfigErrorExit;
  } catch (const std::exception& e) {
    std::cerr << "language_model: " << e.what() << "\n";
    return 1;
  }
}
