#pragma once
// The options of the language-model experiment (examples/configs/language_model.json mirrors the
// defaults): every key once. The libtorch counterpart in bench/ reads the same options, so both sides
// of the comparison train on the same data, windows and schedule.

#include <cstdint>
#include <string>

#include "examples/common/kjv.h"
#include "tapegrad/train/progress.h"

namespace tapegrad::examples {

struct LmConfig {
  std::int64_t seed = 0;
  std::string data = kBibleDataPath;
  std::string heldout_books = "Ruth,Prv,Joel,Mark,Jas";
  std::string tokenizer = "bytes";
  std::int64_t bpe_vocab = 1024;
  std::int64_t word_min_count = 2;
  std::int64_t pointer_window = 0;
  std::int64_t context = 128;
  std::int64_t batch_size = 16;
  std::int64_t d_model = 256;
  std::int64_t heads = 8;
  std::int64_t layers = 4;
  std::int64_t ff_hidden = 1024;
  double dropout = 0.0;
  std::string positions = "learned";
  bool tie_embeddings = false;
  std::int64_t moe_experts = 0;
  std::int64_t moe_top_k = 2;
  double moe_capacity_factor = 0.0;
  bool moe_noisy = false;
  double moe_aux_weight = 0.01;
  std::string attention = "mha";
  std::int64_t kv_heads = 2;
  std::int64_t kv_lora_rank = 64;
  std::int64_t rope_head_dim = 16;
  double lr = 1e-3;
  double weight_decay = 0.01;
  double warmup_fraction = 0.02;
  double min_lr_ratio = 0.1;
  double clip_grad_norm = 1.0;
  double time_budget_s = 600.0;
  std::int64_t steps = 1000000;
  std::int64_t patience = 0;
  std::int64_t stop_after = 0;
  std::int64_t eval_every = 200;
  std::int64_t eval_windows = 128;
  std::int64_t log_every = 20;
  std::int64_t checkpoint_every = 200;
  std::string prompt = "And God said";
  std::int64_t sample_tokens = 300;
  double temperature = 0.8;
  std::int64_t top_k = 40;
  double top_p = 0.9;
  std::string run_dir = "runs/language_model";
  bool resume = false;
  std::string progress = "auto";
  std::string precision = "float32";

  template <class F>
  static void fields(F& f) {
    using C = LmConfig;
    f("seed", &C::seed, "seed of the initial weights and of the training windows");
    f("data", &C::data, "bible.data of Debian's bible-kjv-text");
    f("heldout_books", &C::heldout_books, "books held out for evaluation, comma-separated (the file's abbreviations)");
    f("tokenizer", &C::tokenizer,
      "bytes (vocabulary 256), bpe: byte-level BPE learned from the training text (data::BpeTokenizer), or words: "
      "lowercase words of the training text, the rarer ones <unk>, <eos> ending each verse",
      {"bytes", "bpe", "words"});
    f("bpe_vocab", &C::bpe_vocab, "bpe: vocabulary size (256 bytes plus the merges)");
    f("word_min_count", &C::word_min_count, "words: words seen fewer times in the training text read as <unk>");
    f("pointer_window", &C::pointer_window,
      "words: > 0 adds a pointer sentinel mixture (Merity et al. 2016) over this many last positions (0: none)");
    f("context", &C::context, "tokens per training window (bytes with --tokenizer bytes), and the model's max_len");
    f("batch_size", &C::batch_size, "windows per step");
    f("d_model", &C::d_model, "model width");
    f("heads", &C::heads, "attention heads");
    f("layers", &C::layers, "transformer blocks");
    f("ff_hidden", &C::ff_hidden, "hidden size of the feed-forward sublayers (GELU)");
    f("dropout", &C::dropout, "dropout probability");
    f("positions", &C::positions, "position encoding (mla always adds its own decoupled RoPE)",
      {"learned", "sinusoidal", "rotary"});
    f("tie_embeddings", &C::tie_embeddings, "the output projection is the token table transposed (W_U = W_E^T)");
    f("moe_experts", &C::moe_experts,
      "> 0: every block's feed-forward is a mixture of this many experts of ff_hidden each (0: dense)");
    f("moe_top_k", &C::moe_top_k, "experts per token");
    f("moe_capacity_factor", &C::moe_capacity_factor,
      "expert capacity: at most factor * tokens * top_k / experts assignments each, the rest dropped (0: none)");
    f("moe_noisy", &C::moe_noisy, "noisy top-k gating (Shazeer et al.) and its load loss");
    f("moe_aux_weight", &C::moe_aux_weight,
      "weight of the load-balancing loss (and of the load loss with moe_noisy) in the training loss");
    f("attention", &C::attention, "multi-head, grouped-query (kv_heads), multi-query or multi-head latent attention",
      {"mha", "gqa", "mqa", "mla"});
    f("kv_heads", &C::kv_heads, "key/value heads of gqa (divides heads)");
    f("kv_lora_rank", &C::kv_lora_rank, "mla: rank of the key/value latent");
    f("rope_head_dim", &C::rope_head_dim, "mla: dimension of the decoupled rotary key and query parts");
    f("lr", &C::lr, "AdamW peak learning rate");
    f("weight_decay", &C::weight_decay, "AdamW weight decay");
    f("warmup_fraction", &C::warmup_fraction, "fraction of training spent warming the learning rate up");
    f("min_lr_ratio", &C::min_lr_ratio, "the cosine decay ends at lr * min_lr_ratio");
    f("clip_grad_norm", &C::clip_grad_norm, "global gradient-norm clip (0: off)");
    f("time_budget_s", &C::time_budget_s, "training time budget in seconds (0: none; steps bounds the run)");
    f("steps", &C::steps, "most optimiser steps");
    f("patience", &C::patience, "stop after this many evaluations without a lower held-out loss (0: never)");
    f("stop_after", &C::stop_after,
      "stop at this step as an interruption would, without a summary; --resume true continues (0: never)");
    f("eval_every", &C::eval_every, "steps between held-out evaluations");
    f("eval_windows", &C::eval_windows, "held-out windows in a periodic evaluation (the final one reads them all)");
    f("log_every", &C::log_every, "steps between metrics.jsonl lines");
    f("checkpoint_every", &C::checkpoint_every, "steps between checkpoints (0: only at the end)");
    f("prompt", &C::prompt, "text the samples continue");
    f("sample_tokens", &C::sample_tokens, "tokens generated per sample");
    f("temperature", &C::temperature, "temperature of the sampled continuations");
    f("top_k", &C::top_k, "top-k sample: the k most likely tokens");
    f("top_p", &C::top_p, "top-p (nucleus) sample: the smallest set of tokens with this probability");
    f("run_dir", &C::run_dir, "where the run's files go");
    f("resume", &C::resume, "continue from the checkpoint in run_dir instead of starting afresh");
    f("progress", &C::progress, "progress display", train::progress_names());
    f("precision", &C::precision, "float32, or bf16: forward passes under bfloat16 autocast, weights float32",
      {"float32", "bf16"});
  }
};

}  // namespace tapegrad::examples
