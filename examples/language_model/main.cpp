// language_model: a byte-level transformer language model trained on the King James Bible (Debian's
// bible-kjv-text, decoded by examples/common/kjv.h), evaluated on whole books it never saw, and
// asked to continue a prompt.
//
//   data     the verses, one per line, as bytes (vocabulary 256), or (--tokenizer bpe) as the tokens
//            of a byte-level BPE learned from the training text (--bpe_vocab, 1024); the books Ruth,
//            Proverbs, Joel, Mark and James (4.7% of the text) held out; training windows of 128
//            tokens at random offsets (data::TokenStream), a fresh draw every step
//   model    nn::LanguageModel: d_model 256, 8 heads, 4 pre-norm blocks, FFN 1024 with GELU, learned
//            positions (or sinusoidal / rotary), multi-head attention (or grouped-query, multi-query,
//            multi-head latent), final LayerNorm, Linear(256, 256)
//   training AdamW (lr 1e-3, weight decay 0.01), gradient norm clipped at 1, warmup then cosine decay
//            over the fraction of the run done, for 10 minutes of training time (time_budget_s)
//   measures held-out loss in nats per byte and bits per byte (per character: the text is ASCII) over
//            every held-out window, a BPE model's token losses summed over the bytes they cover; training
//            tokens per second, KV-cache bytes per token (measured from the caches), and samples:
//            greedy, temperature, top-k and top-p continuations of the prompt, and the best of a beam
//            search to the end of the verse
//
// Files (run_dir, default runs/language_model/): config.json, metrics.jsonl (training loss per
// token), checkpoint/, loss.svg, summary.json, samples.txt, and tokenizer.json with --tokenizer bpe.
//
// Usage: language_model [--config FILE] [--key value ...]   (--help lists the keys)

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "examples/common/data_parallel.h"
#include "examples/common/run_dir.h"
#include "examples/language_model/corpus.h"
#include "examples/language_model/lm_config.h"
#include "tapegrad/data/bpe.h"
#include "tapegrad/data/token_stream.h"
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
// The text's token ids: its bytes (vocabulary 256), or byte-level BPE learned from the training
// text (--tokenizer bpe, --bpe_vocab tokens, saved as tokenizer.json in the run directory).
class LmTokenizer {
 public:
  LmTokenizer(const LmConfig& c, const std::string& train_text) {
    if (c.tokenizer == "bpe") bpe_ = data::BpeTokenizer::train(train_text, c.bpe_vocab);
  }
  const std::optional<data::BpeTokenizer>& bpe() const { return bpe_; }
  std::int64_t vocab_size() const { return bpe_ ? bpe_->vocab_size() : 256; }
  std::vector<std::int64_t> encode(const std::string& text) const {
    return bpe_ ? bpe_->encode(text) : examples::byte_tokens(text);
  }
  std::string decode(const std::vector<std::int64_t>& ids) const {
    return bpe_ ? bpe_->decode(ids) : examples::bytes_text(ids);
  }
  // The bytes of text token id stands for.
  std::int64_t bytes(std::int64_t id) const { return bpe_ ? static_cast<std::int64_t>(bpe_->token(id).size()) : 1; }
  // The id of the end of a verse ('\n'), when it is one token.
  std::optional<std::int64_t> newline() const {
    const std::vector<std::int64_t> ids = encode("\n");
    return ids.size() == 1 ? std::optional<std::int64_t>(ids[0]) : std::nullopt;
  }

 private:
  std::optional<data::BpeTokenizer> bpe_;
};

void validate(const LmConfig& c) {
  const auto positive = [](std::int64_t v, auto member) {
    if (v < 1) throw ConfigError(examples::flag(member) + " must be positive, got " + std::to_string(v));
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
    throw ConfigError("--d_model must be a multiple of --heads, got " + std::to_string(c.d_model) + " and " +
                      std::to_string(c.heads));
  if (c.attention == "gqa" && (c.kv_heads < 1 || c.heads % c.kv_heads != 0))
    throw ConfigError("--kv_heads must divide --heads for gqa, got " + std::to_string(c.kv_heads) + " and " +
                      std::to_string(c.heads));
  if (c.attention == "mla" && (c.kv_lora_rank < 1 || c.rope_head_dim < 2 || c.rope_head_dim % 2 != 0))
    throw ConfigError("mla needs --kv_lora_rank >= 1 and an even --rope_head_dim >= 2, got " +
                      std::to_string(c.kv_lora_rank) + " and " + std::to_string(c.rope_head_dim));
  if (!(c.dropout >= 0.0 && c.dropout < 1.0))
    throw ConfigError("--dropout must be in [0, 1), got " + format_number(c.dropout));
  if (!(c.lr > 0.0) || !(c.weight_decay >= 0.0) || !(c.clip_grad_norm >= 0.0) || !(c.time_budget_s >= 0.0))
    throw ConfigError("--lr must be positive and --weight_decay, --clip_grad_norm, --time_budget_s non-negative, got " +
                      format_number(c.lr) + ", " + format_number(c.weight_decay) + ", " +
                      format_number(c.clip_grad_norm) + ", " + format_number(c.time_budget_s));
  if (!(c.warmup_fraction >= 0.0 && c.warmup_fraction < 1.0) || !(c.min_lr_ratio >= 0.0 && c.min_lr_ratio <= 1.0))
    throw ConfigError("--warmup_fraction must be in [0, 1) and --min_lr_ratio in [0, 1], got " +
                      format_number(c.warmup_fraction) + " and " + format_number(c.min_lr_ratio));
  if (c.patience < 0 || c.checkpoint_every < 0 || c.sample_tokens < 0 || c.top_k < 0 || c.stop_after < 0)
    throw ConfigError("--patience, --checkpoint_every, --sample_tokens, --top_k and --stop_after must be >= 0");
  if (!(c.temperature > 0.0) || !(c.top_p > 0.0 && c.top_p <= 1.0))
    throw ConfigError("--temperature must be positive and --top_p in (0, 1], got " + format_number(c.temperature) +
                      " and " + format_number(c.top_p));
  if (c.prompt.empty()) throw ConfigError("--prompt must not be empty");
  if (c.tokenizer == "bpe" && c.bpe_vocab < 257)
    throw ConfigError("--bpe_vocab must be above the 256 bytes, got " + std::to_string(c.bpe_vocab));
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

// Cross-entropy per byte of text (nats) over the batches: the nats of every predicted token over
// the bytes those tokens stand for, so that byte and BPE models compare.
double heldout_loss(nn::LanguageModel& model, const std::vector<data::TokenBatch>& batches,
                    const LmTokenizer& tokenizer) {
  double total = 0.0;
  std::int64_t bytes = 0;
  for (const data::TokenBatch& b : batches) {
    const Tensor logits = model(b.input).reshape({-1, tokenizer.vocab_size()});
    total += nn::cross_entropy(logits, b.target.reshape({-1})).item() * static_cast<double>(b.tokens());
    for (const std::int64_t id : b.target.contiguous().to_vector<std::int64_t>()) bytes += tokenizer.bytes(id);
  }
  return total / static_cast<double>(bytes);
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

std::string continuation(nn::LanguageModel& model, const LmConfig& c, const LmTokenizer& tokenizer, double temperature,
                         std::int64_t top_k, double top_p, std::uint64_t seed) {
  const std::vector<std::int64_t> prompt = tokenizer.encode(c.prompt);
  nn::GenerationOptions g;
  g.max_new_tokens = c.sample_tokens;
  g.temperature = temperature;
  g.top_k = top_k;
  g.top_p = top_p;
  g.sliding_window = true;
  Generator gen(seed);
  const Tensor out = model->generate(from_vector(prompt, {1, static_cast<std::int64_t>(prompt.size())}), g, gen);
  return shown_text(out.to_vector<std::int64_t>(), tokenizer);
}

// Beam search (4 beams, GNMT length penalty alpha 1) until the end of the verse ('\n', when it is a
// token of its own), within the context.
std::string beam_continuation(nn::LanguageModel& model, const LmConfig& c, const LmTokenizer& tokenizer) {
  const std::vector<std::int64_t> prompt = tokenizer.encode(c.prompt);
  const auto prompt_len = static_cast<std::int64_t>(prompt.size());
  if (prompt_len >= c.context) return c.prompt;
  nn::BeamSearchOptions o;
  o.beam_size = 4;
  o.max_new_tokens = std::min(c.sample_tokens, c.context - prompt_len);
  if (o.max_new_tokens < 1) return c.prompt;
  o.eos_token = tokenizer.newline().value_or(-1);
  o.length_penalty = 1.0;
  nn::LanguageModelDecoder decoder(model);
  const std::vector<nn::Hypothesis> best = nn::beam_search(decoder, from_vector(prompt, {1, prompt_len}), o)[0];
  model->train();
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
  parallel.replicate(*model);
  optim::AdamW optimizer(model->parameters(), optim::AdamWOptions(c.lr).weight_decay(c.weight_decay));

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
  train::Trainer trainer(model, optimizer, o);
  trainer.set_schedule(optim::warmup_cosine(c.warmup_fraction, c.min_lr_ratio));

  // With experts: their auxiliary losses join the loss, and their loads and drops are summed over
  // the training steps for the summary.
  MoeTally moe_tally(c.moe_experts);
  const auto step_fn = [&](std::int64_t step) {
    const data::TokenBatch b = train_stream.batch_at(step);  // the global batch; this process takes its rows
    const Tensor logits = model(parallel.share(b.input)).reshape({-1, vocab});
    Tensor loss = nn::cross_entropy(logits, parallel.share(b.target).reshape({-1}));
    const std::vector<const nn::MoEOutput*> experts = model->last_moe();
    if (!experts.empty()) loss = loss + moe_tally.add(experts) * c.moe_aux_weight;
    return train::StepOutput{loss, b.size(), b.tokens()};
  };
  const auto eval_fn = [&](std::int64_t) {
    const double loss = heldout_loss(model, eval_batches, tokenizer);
    return std::map<std::string, double>{{"val_loss", loss}, {"val_bpc", loss / std::log(2.0)}};
  };
  if (parallel.is_main())
    std::cerr << "language_model: " << model->num_parameters() << " parameters, " << c.attention << " attention, "
              << c.positions << " positions, " << parallel.size() << " process(es)\n";
  if (c.stop_after > 0)
    trainer.set_stop_callback([&](const train::StepInfo& info) { return info.step == c.stop_after; });
  const train::TrainResult trained = trainer.fit(step_fn, eval_fn);
  if (!parallel.is_main()) return 0;  // rank 0 measures, samples and writes the summary
  if (trained.stop_reason == train::StopReason::Callback) {
    std::cerr << "language_model: stopped at step " << trained.steps << " (--stop_after); --resume true continues\n";
    return 0;
  }

  // The final measure reads every held-out window.
  double final_loss = 0.0;
  {
    NoGradGuard no_grad;
    std::optional<AutocastGuard> autocast;  // measured in the precision it trained in, as eval_fn was
    if (o.precision == train::Precision::BFloat16) autocast.emplace(kBFloat16);
    model->eval();
    final_loss = heldout_loss(model, heldout_stream.eval_batches(), tokenizer);
    model->train();
  }
  double last_logged_loss = trained.final_loss;
  for (const nlohmann::json& line : examples::read_jsonl(run.file("metrics.jsonl")))
    if (line.contains("loss")) last_logged_loss = line.at("loss").get<double>();

  // Cache sizes depend on the shapes only, so the table's entry for this attention is this model's.
  const nlohmann::json kv_table = kv_cache_table(c, vocab);
  const double kv_bytes = kv_table.at(c.attention).get<double>();

  const std::uint64_t seed = static_cast<std::uint64_t>(c.seed);
  const std::map<std::string, std::string> samples = {
      {"greedy", continuation(model, c, tokenizer, 0.0, 0, 1.0, seed)},
      {"temperature", continuation(model, c, tokenizer, c.temperature, 0, 1.0, seed + 1)},
      {"top_k", continuation(model, c, tokenizer, c.temperature, c.top_k, 1.0, seed + 2)},
      {"top_p", continuation(model, c, tokenizer, c.temperature, 0, c.top_p, seed + 3)},
      {"beam", beam_continuation(model, c, tokenizer)},
  };
  std::string samples_text;
  for (const auto& [name, text] : samples) samples_text += "== " + name + "\n" + text + "\n\n";
  io::write_file_atomic(run.file("samples.txt"), samples_text);
  std::cout << samples_text;

  const double tokens = static_cast<double>(trained.steps * c.batch_size * c.context);
  nlohmann::json summary;
  summary["heldout_loss"] = final_loss;
  summary["heldout_bpc"] = final_loss / std::log(2.0);  // the corpus is ASCII: bits per byte and per character
  summary["heldout_bits_per_byte"] = final_loss / std::log(2.0);
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
  summary["parameters"] = model->num_parameters();
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
  run.write_loss_plot(tokenizer.bpe() ? "BPE language model, King James Bible"
                                      : "byte-level language model, King James Bible");
  std::cerr << "language_model: held-out loss " << format_significant(final_loss, 4) << " nats/byte ("
            << format_significant(final_loss / std::log(2.0), 4) << " bits/char) after " << trained.steps << " steps, "
            << format_significant(summary["tokens_per_s"].get<double>(), 4) << " tokens/s; files in " << run.path()
            << "\n";
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
