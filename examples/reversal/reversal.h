#pragma once
// What sequence_reversal is made of besides its training loop: the options (ReversalConfig, every key
// once), the tokens, the random strings and their tensors, and the two measures (greedy exact match,
// the per-position loss). main.cpp trains and reports; data.cpp holds the definitions.

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "examples/common/config.h"
#include "tapegrad/autograd/autograd.h"
#include "tapegrad/data/dataset.h"
#include "tapegrad/nn/nn.h"
#include "tapegrad/train/progress.h"

namespace tapegrad::examples::reversal {

constexpr std::int64_t kPad = 0, kSos = 1, kEos = 2, kFirstLetter = 3;
inline const std::vector<std::string> kTokenNames = {"<pad>", "<sos>", "<eos>", "a", "b", "c", "d", "e"};

// The options: every key once, the defaults as initialisers (examples/configs/sequence_reversal.json).
struct ReversalConfig {
  std::int64_t seed = 0;
  std::int64_t alphabet = 5;
  std::int64_t train_size = 500;
  std::int64_t heldout_size = 100;
  std::int64_t long_size = 100;
  std::int64_t train_length = 10;
  std::int64_t long_length = 15;
  std::string positions = "all";
  std::int64_t max_len = 32;
  std::int64_t d_model = 64;
  std::int64_t heads = 4;
  std::int64_t encoder_layers = 2;
  std::int64_t decoder_layers = 2;
  std::int64_t ff_hidden = 256;
  double dropout = 0.0;
  double lr = 1e-3;
  std::int64_t batch_size = 32;
  std::int64_t steps = 2000;
  std::int64_t eval_every = 100;
  std::int64_t log_every = 10;
  std::int64_t checkpoint_every = 500;
  std::int64_t heatmap_example = 0;
  std::string run_dir = "runs/sequence_reversal";
  bool resume = false;
  std::string progress = "auto";

  template <class F>
  static void fields(F& f) {
    using C = ReversalConfig;
    f("seed", &C::seed, "seed of the data and of the initial weights");
    f("alphabet", &C::alphabet, "number of letters (a, b, ...; at most 5)");
    f("train_size", &C::train_size, "training strings");
    f("heldout_size", &C::heldout_size, "held-out strings of the training length");
    f("long_size", &C::long_size, "strings of the longer test length");
    f("train_length", &C::train_length, "length of the training and held-out strings");
    f("long_length", &C::long_length, "length of the generalisation-test strings");
    f("positions", &C::positions, "position encoding(s) to train with", {"all", "learned", "sinusoidal", "rotary"});
    f("max_len", &C::max_len, "longest position the model knows (must exceed long_length + 1)");
    f("d_model", &C::d_model, "model width");
    f("heads", &C::heads, "attention heads");
    f("encoder_layers", &C::encoder_layers, "encoder layers");
    f("decoder_layers", &C::decoder_layers, "decoder layers");
    f("ff_hidden", &C::ff_hidden, "hidden size of the feed-forward sublayers (ReLU)");
    f("dropout", &C::dropout, "dropout probability");
    f("lr", &C::lr, "Adam learning rate (constant)");
    f("batch_size", &C::batch_size, "strings per step");
    f("steps", &C::steps, "optimiser steps per encoding");
    f("eval_every", &C::eval_every, "steps between held-out evaluations (0: only at the end)");
    f("log_every", &C::log_every, "steps between metrics.jsonl lines");
    f("checkpoint_every", &C::checkpoint_every,
      "steps between checkpoints, so a killed run can --resume true (0: only at the end)");
    f("heatmap_example", &C::heatmap_example, "index of the held-out string drawn in cross_attention_*.svg");
    f("run_dir", &C::run_dir, "where the run's files go");
    f("resume", &C::resume, "continue from the checkpoints in run_dir instead of starting afresh");
    f("progress", &C::progress, "progress display", train::progress_names());
  }
};

// ConfigError naming the key and the value for an option out of range.
void validate(const ReversalConfig& config);

struct Strings {
  std::vector<std::vector<std::int64_t>> rows;  // token ids of the letters
};

// `count` random strings of `length` letters not already in `seen` (which they are added to), so
// the held-out strings never occur in training.
Strings random_strings(std::int64_t count, std::int64_t length, std::int64_t alphabet, Generator& gen,
                       std::set<std::vector<std::int64_t>>& seen);

// Source, decoder input and target of a set of strings (all of one length).
struct Tensors {
  Tensor src;      // (N, L)
  Tensor tgt_in;   // (N, L + 1): <sos> + reversed
  Tensor tgt_out;  // (N, L + 1): reversed + <eos>
};

Tensors to_tensors(const Strings& strings);

// A DataLoader dataset: input = the string, target = <sos> + reversed + <eos> (one sequence, cut
// into decoder input and target per batch).
data::Dataset to_dataset(const Strings& strings);

struct Accuracy {
  double exact = 0;   // strings whose greedy decoding is the reversed string followed by <eos>
  double tokens = 0;  // target positions (letters and <eos>) decoded correctly
};

Accuracy greedy_accuracy(const nn::EncoderDecoder& model, const Tensors& set);

// Cross-entropy over every target position, <pad> ignored. logits (B, T, V), target (B, T).
Tensor sequence_loss(const Tensor& logits, const Tensor& target);

}  // namespace tapegrad::examples::reversal
