#pragma once
// What sequence_reversal is made of besides its training loop: the options (ReversalConfig, every key
// once), the tokens, the random strings and their tensors, the models behind one interface, and the
// measures (exact match and token accuracy of greedy or beam decoding, the per-position loss).
// main.cpp trains and reports; data.cpp and models.cpp hold the definitions.

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "examples/common/config.h"
#include "examples/common/svg.h"
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
  std::int64_t seeds = 3;
  std::int64_t alphabet = 5;
  std::int64_t train_size = 2000;
  std::int64_t heldout_size = 100;
  std::int64_t eval_size = 100;
  std::int64_t min_train_length = 1;
  std::int64_t train_length = 10;
  std::string eval_lengths = "5,10,12,15,20,30";
  std::string models = "all";
  std::int64_t max_len = 32;
  std::int64_t position_range = 256;
  std::int64_t d_model = 64;
  std::int64_t heads = 4;
  std::int64_t encoder_layers = 2;
  std::int64_t decoder_layers = 2;
  std::int64_t ff_hidden = 256;
  std::int64_t hidden = 64;
  std::int64_t location_kernel = 3;
  double dropout = 0.0;
  double lr = 1e-3;
  std::int64_t batch_size = 32;
  std::int64_t steps = 2000;
  std::int64_t beam_size = 4;
  std::int64_t eval_every = 100;
  std::int64_t log_every = 10;
  std::int64_t checkpoint_every = 500;
  std::string run_dir = "runs/sequence_reversal";
  bool resume = false;
  std::string progress = "auto";
  std::string precision = "float32";

  template <class F>
  static void fields(F& f) {
    using C = ReversalConfig;
    f("seed", &C::seed, "seed of the data and of the first run's initial weights");
    f("seeds", &C::seeds, "runs per model, with initial weights from seed, seed + 1, ...");
    f("alphabet", &C::alphabet, "number of letters (a, b, ...; at most 5)");
    f("train_size", &C::train_size, "training strings");
    f("heldout_size", &C::heldout_size, "held-out strings of length train_length");
    f("eval_size", &C::eval_size, "test strings per evaluation length");
    f("min_train_length", &C::min_train_length, "shortest training string (lengths are uniform up to train_length)");
    f("train_length", &C::train_length, "longest training string, and the held-out strings' length");
    f("eval_lengths", &C::eval_lengths, "comma-separated lengths of the test strings (exact match by length)");
    f("models", &C::models, "model(s) to train",
      {"all", "learned", "sinusoidal", "rotary", "randomized", "seq2seq", "pointer", "pointer_location"});
    f("max_len", &C::max_len, "longest sequence a transformer takes (at least the longest string + 2)");
    f("position_range", &C::position_range,
      "the randomized transformer's positions: ordered random subsets of [0, position_range)");
    f("d_model", &C::d_model, "transformer width");
    f("heads", &C::heads, "attention heads");
    f("encoder_layers", &C::encoder_layers, "transformer encoder layers");
    f("decoder_layers", &C::decoder_layers, "transformer decoder layers");
    f("ff_hidden", &C::ff_hidden, "hidden size of the transformer's feed-forward sublayers (ReLU)");
    f("hidden", &C::hidden, "hidden size of the recurrent models (LSTM)");
    f("location_kernel", &C::location_kernel,
      "width of pointer_location's location-aware attention (odd): how far it sees its last pointer");
    f("dropout", &C::dropout, "dropout probability");
    f("lr", &C::lr, "Adam learning rate (constant)");
    f("batch_size", &C::batch_size, "strings per step");
    f("steps", &C::steps, "optimiser steps per run");
    f("beam_size", &C::beam_size, "beams of the beam-search decoder (the other decoder is greedy)");
    f("eval_every", &C::eval_every, "steps between held-out evaluations (0: only at the end)");
    f("log_every", &C::log_every, "steps between metrics.jsonl lines");
    f("checkpoint_every", &C::checkpoint_every,
      "steps between checkpoints, so a killed run can --resume true (0: only at the end)");
    f("run_dir", &C::run_dir, "where the run's files go");
    f("resume", &C::resume, "continue from the checkpoints in run_dir instead of starting afresh");
    f("progress", &C::progress, "progress display", train::progress_names());
    f("precision", &C::precision, "float32, or bf16: forward passes under bfloat16 autocast, weights float32",
      {"float32", "bf16"});
  }
};

// The models --models all trains, in order.
inline const std::vector<std::string> kAllModels = {"learned", "sinusoidal", "rotary",          "randomized",
                                                    "seq2seq", "pointer",    "pointer_location"};

// The lengths of --eval_lengths, in the order given; ConfigError for anything but positive integers.
std::vector<std::int64_t> parse_lengths(const std::string& text);

// ConfigError naming the key and the value for an option out of range.
void validate(const ReversalConfig& config);

struct Strings {
  std::vector<std::vector<std::int64_t>> rows;  // token ids of the letters
};

// `count` random strings, each of a length uniform in [min_length, max_length], not already in
// `seen` (which they are added to), so the test strings never occur in training.
Strings random_strings(std::int64_t count, std::int64_t min_length, std::int64_t max_length, std::int64_t alphabet,
                       Generator& gen, std::set<std::vector<std::int64_t>>& seen);

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

// One of the models behind what training and evaluation need.
struct ReversalModel {
  std::string name;
  std::shared_ptr<nn::Module> module;
  // The loss of a padded batch (input: the strings; target: <sos> + reversed + <eos>).
  std::function<Tensor(const data::Batch& batch)> loss;
  // A decoder over sources (N, L), and the prompt token every row starts from.
  std::function<std::unique_ptr<nn::Decoder>(const Tensor& src)> decoder;
  std::int64_t prompt = kSos;
  bool pointer = false;  // emits source positions (no <eos>: it stops after L)
  // Attention pictures for one string: the decoder's attention over the source.
  std::function<std::vector<examples::HeatMap>(const Tensor& src, const Tensor& tgt_in)> attention;
};

// Builds model `name` with initial weights from `seed`. Transformers: pre-norm EncoderDecoder with
// learned, sinusoidal or rotary positions, or randomized ones (sinusoidal encodings of an ordered
// random subset of [0, position_range), drawn anew for every sequence); seq2seq: RecurrentSeq2Seq (LSTM, general
// attention); pointer: PointerNetwork (LSTM, fed encoder states); pointer_location: the same with
// location-aware attention.
ReversalModel build_model(const ReversalConfig& config, const std::string& name, std::uint64_t seed);

struct Accuracy {
  double exact = 0;   // strings decoded as the reversed string (followed by <eos>)
  double tokens = 0;  // target positions decoded correctly
};

// Decodes every string of the set with beam search (beam 1: greedy) and compares.
Accuracy decode_accuracy(const ReversalModel& model, const Tensors& set, std::int64_t beam);

// Cross-entropy over every target position, <pad> ignored. logits (B, T, V), target (B, T).
Tensor sequence_loss(const Tensor& logits, const Tensor& target);

}  // namespace tapegrad::examples::reversal
