#pragma once
// Recurrent layers: RNN (tanh or ReLU), LSTM and GRU as multi-layer, optionally bidirectional
// modules, and their one-step cells, with PyTorch's options, formulas, gate order, parameter
// names and layouts, so state dicts map one to one:
//   weight_ih_l{k}[_reverse] (G H, in), weight_hh_l{k}[_reverse] (G H, H),
//   bias_ih_l{k}[_reverse], bias_hh_l{k}[_reverse] (G H)        G = 1 (RNN), 4 (LSTM), 3 (GRU)
// all initialised uniform in +-1/sqrt(H). Each layer and direction runs as one fused op
// (recurrent_layer in autograd/ops.h): the input's product for all steps at once, then per step
// one gemm with W_hh and the fused gate kernel.
//
//   nn::LSTM lstm{nn::RecurrentOptions(32, 64).num_layers(2).bidirectional(true).dropout(0.1)};
//   nn::RecurrentOutput r = lstm(x);               // x: (T, B, 32) -> r.output: (T, B, 128)
//   r.state.h, r.state.c;                          // (4, B, 64): layer 0 forward, layer 0 reverse, ...
//   r = lstm(x, r.state);                          // carry the state into the next chunk
//   r = lstm(x, nn::RecurrentState(), lengths);    // lengths: Int64 (B), padded batch
//
// With lengths (PyTorch's pack_padded_sequence, in any order), item b's sequence is its first
// lengths[b] steps: outputs past it are 0, its final state is the state after its last step (the
// reverse direction starts there), and the padding reaches neither a state nor a gradient.
// batch_first takes and gives (B, T, ...) instead. An unbatched input (T, in) with states (L D, H)
// is run as a batch of one, as in PyTorch.

#include <cstdint>
#include <string>
#include <vector>

#include "tapegrad/autograd/ops.h"
#include "tapegrad/nn/module.h"

namespace tapegrad::nn {

enum class RnnNonlinearity { Tanh, ReLU };

struct RecurrentOptions {
  RecurrentOptions(std::int64_t input_size, std::int64_t hidden_size)
      : input_size_(input_size), hidden_size_(hidden_size) {}
  TAPEGRAD_ARG(std::int64_t, input_size);
  TAPEGRAD_ARG(std::int64_t, hidden_size);
  TAPEGRAD_ARG(std::int64_t, num_layers) = 1;
  TAPEGRAD_ARG(bool, bias) = true;
  TAPEGRAD_ARG(bool, batch_first) = false;
  // Dropout on the outputs of every layer but the last, in training mode.
  TAPEGRAD_ARG(double, dropout) = 0.0;
  TAPEGRAD_ARG(bool, bidirectional) = false;
  TAPEGRAD_ARG(RnnNonlinearity, nonlinearity) = RnnNonlinearity::Tanh;  // nn::RNN only
  // The initial weights' source and the dropout generator's seed (default generator if null).
  TAPEGRAD_ARG(Generator*, generator) = nullptr;
};

// h: (num_layers * directions, B, H); c likewise for the LSTM (undefined otherwise). Undefined
// states start at zero.
struct RecurrentState {
  Tensor h;
  Tensor c;
};

struct RecurrentOutput {
  Tensor output;         // (T, B, directions * H), or (B, T, ...) with batch_first
  RecurrentState state;  // the final states
};

// The multi-layer module; RNN, LSTM and GRU below fix its cell.
class RecurrentImpl : public Module {
 public:
  RecurrentImpl(RecurrentMode mode, const RecurrentOptions& options);
  RecurrentOutput forward(const Tensor& input, const RecurrentState& state = RecurrentState(),
                          const Tensor& lengths = Tensor());

  const RecurrentOptions& options() const { return options_; }
  RecurrentMode mode() const { return mode_; }
  std::int64_t directions() const { return options_.bidirectional() ? 2 : 1; }
  // The parameters of one layer and direction: {w_ih, w_hh, b_ih, b_hh} (biases undefined without bias).
  std::vector<Tensor> layer_parameters(std::int64_t layer, bool reverse) const;

 private:
  const char* name_for_errors() const;

  RecurrentMode mode_;
  RecurrentOptions options_;
  std::vector<std::vector<Tensor>> weights_;  // per layer and direction: w_ih, w_hh, b_ih, b_hh
  Generator dropout_gen_;
};

class RNNImpl : public RecurrentImpl {
 public:
  RNNImpl(std::int64_t input_size, std::int64_t hidden_size) : RNNImpl(RecurrentOptions(input_size, hidden_size)) {}
  explicit RNNImpl(const RecurrentOptions& options)
      : RecurrentImpl(options.nonlinearity() == RnnNonlinearity::Tanh ? RecurrentMode::RnnTanh : RecurrentMode::RnnRelu,
                      options) {}
};
TAPEGRAD_MODULE(RNN);

class LSTMImpl : public RecurrentImpl {
 public:
  LSTMImpl(std::int64_t input_size, std::int64_t hidden_size) : LSTMImpl(RecurrentOptions(input_size, hidden_size)) {}
  explicit LSTMImpl(const RecurrentOptions& options) : RecurrentImpl(RecurrentMode::Lstm, options) {}
};
TAPEGRAD_MODULE(LSTM);

class GRUImpl : public RecurrentImpl {
 public:
  GRUImpl(std::int64_t input_size, std::int64_t hidden_size) : GRUImpl(RecurrentOptions(input_size, hidden_size)) {}
  explicit GRUImpl(const RecurrentOptions& options) : RecurrentImpl(RecurrentMode::Gru, options) {}
};
TAPEGRAD_MODULE(GRU);

// ---------------------------------------------------------------- cells
// One step, PyTorch's RNNCell / LSTMCell / GRUCell: parameters weight_ih (G H, in), weight_hh
// (G H, H), bias_ih, bias_hh (G H). Input (B, in) or unbatched (in); an undefined state is zero.

struct RecurrentCellOptions {
  RecurrentCellOptions(std::int64_t input_size, std::int64_t hidden_size)
      : input_size_(input_size), hidden_size_(hidden_size) {}
  TAPEGRAD_ARG(std::int64_t, input_size);
  TAPEGRAD_ARG(std::int64_t, hidden_size);
  TAPEGRAD_ARG(bool, bias) = true;
  TAPEGRAD_ARG(RnnNonlinearity, nonlinearity) = RnnNonlinearity::Tanh;  // nn::RNNCell only
  TAPEGRAD_ARG(Generator*, generator) = nullptr;                        // initial weights
};

class RecurrentCellImpl : public Module {
 public:
  RecurrentCellImpl(RecurrentMode mode, const RecurrentCellOptions& options);
  // One step from state (h, c): the LSTM uses both, the others h only. Returns the new state.
  RecurrentState step(const Tensor& input, const RecurrentState& state) const;

  const RecurrentCellOptions& options() const { return options_; }
  const Tensor& weight_ih() const { return weight_ih_; }
  const Tensor& weight_hh() const { return weight_hh_; }
  const Tensor& bias_ih() const { return bias_ih_; }
  const Tensor& bias_hh() const { return bias_hh_; }

 private:
  RecurrentMode mode_;
  RecurrentCellOptions options_;
  Tensor weight_ih_, weight_hh_, bias_ih_, bias_hh_;
};

class RNNCellImpl : public RecurrentCellImpl {
 public:
  RNNCellImpl(std::int64_t input_size, std::int64_t hidden_size)
      : RNNCellImpl(RecurrentCellOptions(input_size, hidden_size)) {}
  explicit RNNCellImpl(const RecurrentCellOptions& options)
      : RecurrentCellImpl(
            options.nonlinearity() == RnnNonlinearity::Tanh ? RecurrentMode::RnnTanh : RecurrentMode::RnnRelu,
            options) {}
  Tensor forward(const Tensor& input, const Tensor& h = Tensor()) { return step(input, {h, Tensor()}).h; }
};
TAPEGRAD_MODULE(RNNCell);

class LSTMCellImpl : public RecurrentCellImpl {
 public:
  LSTMCellImpl(std::int64_t input_size, std::int64_t hidden_size)
      : LSTMCellImpl(RecurrentCellOptions(input_size, hidden_size)) {}
  explicit LSTMCellImpl(const RecurrentCellOptions& options) : RecurrentCellImpl(RecurrentMode::Lstm, options) {}
  // Returns {h', c'}.
  RecurrentState forward(const Tensor& input, const RecurrentState& state = RecurrentState()) {
    return step(input, state);
  }
};
TAPEGRAD_MODULE(LSTMCell);

class GRUCellImpl : public RecurrentCellImpl {
 public:
  GRUCellImpl(std::int64_t input_size, std::int64_t hidden_size)
      : GRUCellImpl(RecurrentCellOptions(input_size, hidden_size)) {}
  explicit GRUCellImpl(const RecurrentCellOptions& options) : RecurrentCellImpl(RecurrentMode::Gru, options) {}
  Tensor forward(const Tensor& input, const Tensor& h = Tensor()) { return step(input, {h, Tensor()}).h; }
};
TAPEGRAD_MODULE(GRUCell);

}  // namespace tapegrad::nn
