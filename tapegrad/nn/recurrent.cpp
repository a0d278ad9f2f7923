#include "tapegrad/nn/recurrent.h"

#include <cmath>
#include <string>
#include <utility>

#include "tapegrad/nn/init.h"

namespace tapegrad::nn {

namespace {

const char* module_name(RecurrentMode mode, bool cell) {
  switch (mode) {
    case RecurrentMode::Lstm:
      return cell ? "LSTMCell" : "LSTM";
    case RecurrentMode::Gru:
      return cell ? "GRUCell" : "GRU";
    default:
      return cell ? "RNNCell" : "RNN";
  }
}

void check_sizes(const char* op, std::int64_t input_size, std::int64_t hidden_size) {
  if (input_size <= 0 || hidden_size <= 0)
    throw ValueError(
        message(op, ": input_size and hidden_size must be positive, got ", input_size, " and ", hidden_size));
}

// A state given by the caller, checked against the shape it must have (batched: (n, B, H);
// unbatched: (n, H), returned as (n, 1, H)); zeros when undefined.
Tensor initial_state(const char* op, const char* what, const Tensor& given, bool batched, std::int64_t n,
                     std::int64_t batch, std::int64_t hidden, DType dtype) {
  if (!given.defined()) return zeros({n, batch, hidden}, dtype);
  const Shape expected = batched ? Shape{n, batch, hidden} : Shape{n, hidden};
  if (given.shape() != expected)
    throw ShapeError(
        message(op, ": initial state ", what, " must have shape ", expected.str(), ", got ", given.shape().str()));
  return batched ? given : unsqueeze(given, 1);
}

}  // namespace

RecurrentImpl::RecurrentImpl(RecurrentMode mode, const RecurrentOptions& options) : mode_(mode), options_(options) {
  const char* op = module_name(mode, false);
  check_sizes(op, options.input_size(), options.hidden_size());
  if (options.num_layers() < 1)
    throw ValueError(message(op, ": num_layers must be at least 1, got ", options.num_layers()));
  if (!(options.dropout() >= 0.0 && options.dropout() <= 1.0))
    throw ValueError(message(op, ": dropout must be in [0, 1], got ", options.dropout()));
  Generator& gen = generator_or_default(options.generator());
  options_.generator(nullptr);
  const std::int64_t H = options.hidden_size(), G = recurrent_gates(mode) * H;
  const double bound = 1.0 / std::sqrt(static_cast<double>(H));
  for (std::int64_t layer = 0; layer < options.num_layers(); ++layer) {
    const std::int64_t in = layer == 0 ? options.input_size() : directions() * H;
    for (std::int64_t d = 0; d < directions(); ++d) {
      const std::string suffix = "_l" + std::to_string(layer) + (d == 1 ? "_reverse" : "");
      std::vector<Tensor> w(4);
      w[0] = register_parameter("weight_ih" + suffix, uniform({G, in}, -bound, bound, gen));
      w[1] = register_parameter("weight_hh" + suffix, uniform({G, H}, -bound, bound, gen));
      if (options.bias()) {
        w[2] = register_parameter("bias_ih" + suffix, uniform({G}, -bound, bound, gen));
        w[3] = register_parameter("bias_hh" + suffix, uniform({G}, -bound, bound, gen));
      }
      weights_.push_back(std::move(w));
    }
  }
  dropout_gen_.manual_seed(gen.next_u64());
  register_generator("dropout_generator", dropout_gen_);
}

const char* RecurrentImpl::name_for_errors() const { return module_name(mode_, false); }

std::vector<Tensor> RecurrentImpl::layer_parameters(std::int64_t layer, bool reverse) const {
  if (layer < 0 || layer >= options_.num_layers() || (reverse && !options_.bidirectional()))
    throw IndexError(message(name_for_errors(), ": no layer ", layer, (reverse ? " in reverse" : ""), " (num_layers ",
                             options_.num_layers(), (options_.bidirectional() ? ", bidirectional)" : ")")));
  return weights_[static_cast<std::size_t>(layer * directions() + (reverse ? 1 : 0))];
}

RecurrentOutput RecurrentImpl::forward(const Tensor& input, const RecurrentState& state, const Tensor& lengths) {
  const char* op = name_for_errors();
  const bool lstm = mode_ == RecurrentMode::Lstm;
  if (input.dim() != 2 && input.dim() != 3)
    throw ShapeError(message(op,
                             ": expected input (T, B, input_size), (B, T, input_size) with batch_first, "
                             "or unbatched (T, input_size), got shape ",
                             input.shape().str()));
  const bool batched = input.dim() == 3;
  const Tensor x = batched ? (options_.batch_first() ? input.transpose(0, 1) : input) : unsqueeze(input, 1);
  if (x.shape()[2] != options_.input_size())
    throw ShapeError(message(op, ": expected input with last dimension ", options_.input_size(), ", got shape ",
                             input.shape().str()));
  if (!lstm && state.c.defined()) throw ValueError(message(op, ": a cell state c is for the LSTM only"));
  const std::int64_t B = x.shape()[1], H = options_.hidden_size(), D = directions();
  const std::int64_t n = options_.num_layers() * D;
  const Tensor h0 = initial_state(op, "h", state.h, batched, n, B, H, x.dtype());
  const Tensor c0 = lstm ? initial_state(op, "c", state.c, batched, n, B, H, x.dtype()) : Tensor();
  TensorList hs, cs;
  Tensor layer_in = x;
  for (std::int64_t layer = 0; layer < options_.num_layers(); ++layer) {
    TensorList outs;
    for (std::int64_t d = 0; d < D; ++d) {
      const std::vector<Tensor>& w = weights_[static_cast<std::size_t>(layer * D + d)];
      const std::int64_t k = layer * D + d;
      const Tensor xg = linear(layer_in, w[0], w[2]);  // the input's part of every step in one product
      const TensorList r =
          recurrent_layer(mode_, xg, select(h0, 0, k), lstm ? select(c0, 0, k) : Tensor(), w[1], w[3], lengths, d == 1);
      outs.push_back(r[0]);
      hs.push_back(r[1]);
      if (lstm) cs.push_back(r[2]);
    }
    layer_in = D == 2 ? concat(outs, 2) : outs[0];
    if (layer + 1 < options_.num_layers() && options_.dropout() > 0.0 && is_training())
      layer_in = dropout(layer_in, options_.dropout(), true, dropout_gen_);
  }
  RecurrentOutput result;
  result.state.h = stack(hs, 0);
  if (lstm) result.state.c = stack(cs, 0);
  if (!batched) {
    result.output = select(layer_in, 1, 0);
    result.state.h = select(result.state.h, 1, 0);
    if (lstm) result.state.c = select(result.state.c, 1, 0);
  } else {
    result.output = options_.batch_first() ? layer_in.transpose(0, 1) : layer_in;
  }
  return result;
}

// ---------------------------------------------------------------- cells

RecurrentCellImpl::RecurrentCellImpl(RecurrentMode mode, const RecurrentCellOptions& options)
    : mode_(mode), options_(options) {
  check_sizes(module_name(mode, true), options.input_size(), options.hidden_size());
  Generator& gen = generator_or_default(options.generator());
  options_.generator(nullptr);
  const std::int64_t H = options.hidden_size(), G = recurrent_gates(mode) * H;
  const double bound = 1.0 / std::sqrt(static_cast<double>(H));
  weight_ih_ = register_parameter("weight_ih", uniform({G, options.input_size()}, -bound, bound, gen));
  weight_hh_ = register_parameter("weight_hh", uniform({G, H}, -bound, bound, gen));
  if (options.bias()) {
    bias_ih_ = register_parameter("bias_ih", uniform({G}, -bound, bound, gen));
    bias_hh_ = register_parameter("bias_hh", uniform({G}, -bound, bound, gen));
  }
}

RecurrentState RecurrentCellImpl::step(const Tensor& input, const RecurrentState& state) const {
  const char* op = module_name(mode_, true);
  if (input.dim() != 1 && input.dim() != 2)
    throw ShapeError(message(op, ": expected input (B, input_size) or (input_size), got shape ", input.shape().str()));
  const bool batched = input.dim() == 2;
  const Tensor x = batched ? input : unsqueeze(input, 0);
  const std::int64_t B = x.shape()[0], H = options_.hidden_size();
  auto initial = [&](const Tensor& given, const char* what) {
    if (!given.defined()) return zeros({B, H}, x.dtype());
    const Shape expected = batched ? Shape{B, H} : Shape{H};
    if (given.shape() != expected)
      throw ShapeError(
          message(op, ": state ", what, " must have shape ", expected.str(), ", got ", given.shape().str()));
    return batched ? given : unsqueeze(given, 0);
  };
  const Tensor h = initial(state.h, "h");
  RecurrentState next;
  switch (mode_) {
    case RecurrentMode::RnnTanh:
      next.h = rnn_tanh_cell(x, h, weight_ih_, weight_hh_, bias_ih_, bias_hh_);
      break;
    case RecurrentMode::RnnRelu:
      next.h = rnn_relu_cell(x, h, weight_ih_, weight_hh_, bias_ih_, bias_hh_);
      break;
    case RecurrentMode::Lstm: {
      auto [h1, c1] = lstm_cell(x, h, initial(state.c, "c"), weight_ih_, weight_hh_, bias_ih_, bias_hh_);
      next.h = h1;
      next.c = c1;
      break;
    }
    case RecurrentMode::Gru:
      next.h = gru_cell(x, h, weight_ih_, weight_hh_, bias_ih_, bias_hh_);
      break;
  }
  if (!batched) {
    next.h = select(next.h, 0, 0);
    if (next.c.defined()) next.c = select(next.c, 0, 0);
  }
  return next;
}

}  // namespace tapegrad::nn
