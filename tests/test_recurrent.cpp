// nn::RNN, nn::LSTM, nn::GRU and their cells: parameter names and shapes, states carried across
// calls, unbatched inputs, dropout between layers, float64 gradcheck through stacked and
// bidirectional modules, and the errors. (Values and gradients against PyTorch are in
// test_torch_reference.cpp.)

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "tapegrad/nn/nn.h"
#include "testing.h"

using namespace tapegrad;
using tapegrad::testing::check_gradients;
using tapegrad::testing::max_abs_diff;
using tapegrad::testing::message_of;

namespace {

std::shared_ptr<nn::RecurrentImpl> make(RecurrentMode mode, const nn::RecurrentOptions& options) {
  if (mode == RecurrentMode::Lstm) return nn::LSTM(options).ptr();
  if (mode == RecurrentMode::Gru) return nn::GRU(options).ptr();
  return nn::RNN(options).ptr();
}

}  // namespace

TEST_CASE("LSTM parameters carry PyTorch's names, shapes and order") {
  Generator gen(1);
  nn::LSTM lstm{nn::RecurrentOptions(3, 4).num_layers(2).bidirectional(true).generator(&gen)};
  std::vector<std::string> names;
  std::vector<Shape> shapes;
  for (const auto& [name, p] : lstm->named_parameters()) {
    names.push_back(name);
    shapes.push_back(p.shape());
  }
  const std::vector<std::string> expected = {
      "weight_ih_l0",         "weight_hh_l0",         "bias_ih_l0",         "bias_hh_l0",
      "weight_ih_l0_reverse", "weight_hh_l0_reverse", "bias_ih_l0_reverse", "bias_hh_l0_reverse",
      "weight_ih_l1",         "weight_hh_l1",         "bias_ih_l1",         "bias_hh_l1",
      "weight_ih_l1_reverse", "weight_hh_l1_reverse", "bias_ih_l1_reverse", "bias_hh_l1_reverse"};
  CHECK(names == expected);
  CHECK(shapes[0] == Shape{16, 3});
  CHECK(shapes[1] == Shape{16, 4});
  CHECK(shapes[2] == Shape{16});
  CHECK(shapes[8] == Shape{16, 8});  // layer 1 reads both directions of layer 0
  // Uniform in +-1/sqrt(H) = +-0.5, as torch.nn.LSTM.
  for (const Tensor& p : lstm->parameters()) CHECK(p.abs().max().item<double>() <= 0.5);
  nn::GRU gru{nn::RecurrentOptions(3, 4).bias(false)};
  CHECK(gru->named_parameters().size() == 2);
  CHECK(gru->named_parameters()[0].second.shape() == Shape{12, 3});
}

TEST_CASE("a sequence run in two chunks with the state carried equals one run") {
  Generator gen(2);
  for (RecurrentMode mode : {RecurrentMode::Lstm, RecurrentMode::Gru, RecurrentMode::RnnTanh}) {
    CAPTURE(static_cast<int>(mode));
    std::shared_ptr<nn::RecurrentImpl> rnn = make(mode, nn::RecurrentOptions(3, 5).num_layers(2).generator(&gen));
    const Tensor x = randn({7, 2, 3}, gen);
    const nn::RecurrentOutput whole = rnn->forward(x);
    const nn::RecurrentOutput first = rnn->forward(narrow(x, 0, 0, 4));
    const nn::RecurrentOutput second = rnn->forward(narrow(x, 0, 4, 3), first.state);
    CHECK(max_abs_diff(concat({first.output, second.output}, 0), whole.output) < 1e-6);
    CHECK(max_abs_diff(second.state.h, whole.state.h) < 1e-6);
    if (mode == RecurrentMode::Lstm) CHECK(max_abs_diff(second.state.c, whole.state.c) < 1e-6);
  }
}

TEST_CASE("unbatched inputs and batch_first equal the batched, time-major run") {
  Generator gen(3);
  nn::LSTM lstm{nn::RecurrentOptions(3, 4).bidirectional(true).generator(&gen)};
  const Tensor x = randn({6, 3}, gen);
  const Tensor h0 = randn({2, 4}, gen), c0 = randn({2, 4}, gen);
  const nn::RecurrentOutput alone = lstm(x, nn::RecurrentState{h0, c0});
  const nn::RecurrentOutput batched = lstm(unsqueeze(x, 1), nn::RecurrentState{unsqueeze(h0, 1), unsqueeze(c0, 1)});
  CHECK(alone.output.shape() == Shape{6, 8});
  CHECK(alone.state.h.shape() == Shape{2, 4});
  CHECK(max_abs_diff(alone.output, select(batched.output, 1, 0)) == 0.0);
  CHECK(max_abs_diff(alone.state.c, select(batched.state.c, 1, 0)) == 0.0);

  Generator same(3);
  nn::LSTM first{nn::RecurrentOptions(3, 4).bidirectional(true).batch_first(true).generator(&same)};
  const Tensor xb = randn({2, 6, 3}, gen);
  const nn::RecurrentOutput bf = first(xb);
  const nn::RecurrentOutput tm = lstm(xb.transpose(0, 1));
  CHECK(bf.output.shape() == Shape{2, 6, 8});
  CHECK(max_abs_diff(bf.output, tm.output.transpose(0, 1)) == 0.0);
  CHECK(max_abs_diff(bf.state.h, tm.state.h) == 0.0);
}

TEST_CASE("stacked bidirectional GRU and LSTM with lengths pass float64 gradcheck and gradgradcheck") {
  Generator gen(4);
  const Tensor lengths = from_vector(std::vector<std::int64_t>{3, 1}, {2});
  for (bool lstm : {false, true}) {
    CAPTURE(lstm);
    const auto options = nn::RecurrentOptions(2, 2).num_layers(2).bidirectional(true).generator(&gen);
    std::shared_ptr<nn::RecurrentImpl> rnn = make(lstm ? RecurrentMode::Lstm : RecurrentMode::Gru, options);
    rnn->to(kFloat64);
    auto f = [rnn, lengths](const TensorList& in) {
      const nn::RecurrentOutput r = rnn->forward(in[0], {}, lengths);
      TensorList parts{r.output.reshape({-1}), r.state.h.reshape({-1})};
      if (r.state.c.defined()) parts.push_back(r.state.c.reshape({-1}));
      return concat(parts, 0);
    };
    check_gradients(f, {randn({3, 2, 2}, gen, kFloat64)}, rnn->named_parameters());
  }
}

TEST_CASE("dropout between layers acts in training only, never after the last layer") {
  Generator gen(5);
  nn::LSTM lstm{nn::RecurrentOptions(4, 6).num_layers(2).dropout(0.5).generator(&gen)};
  const Tensor x = randn({5, 3, 4}, gen);
  lstm->eval();
  const Tensor a = lstm(x).output, b = lstm(x).output;
  CHECK(max_abs_diff(a, b) == 0.0);
  lstm->train();
  const Tensor c = lstm(x).output, d = lstm(x).output;
  CHECK(max_abs_diff(c, a) > 1e-3);  // layer 1 saw a dropped-out layer 0
  CHECK(max_abs_diff(c, d) > 1e-3);  // fresh masks per call
  // One layer: the dropout option has nothing to act on.
  nn::GRU one{nn::RecurrentOptions(4, 6).dropout(0.5).generator(&gen)};
  const Tensor e = one(x).output;
  one->eval();
  CHECK(max_abs_diff(e, one(x).output) == 0.0);
}

TEST_CASE("the cells equal one step of the layer with the same weights") {
  Generator gen(6);
  nn::GRUCell cell{nn::RecurrentCellOptions(3, 4).generator(&gen)};
  Generator same(6);
  nn::GRU gru{nn::RecurrentOptions(3, 4).generator(&same)};
  const Tensor x = randn({2, 3}, gen), h = randn({2, 4}, gen);
  const nn::RecurrentOutput layer = gru(unsqueeze(x, 0), nn::RecurrentState{unsqueeze(h, 0), Tensor()});
  CHECK(max_abs_diff(cell(x, h), select(layer.state.h, 0, 0)) == 0.0);
  CHECK(max_abs_diff(cell(select(x, 0, 0), select(h, 0, 0)), select(select(layer.state.h, 0, 0), 0, 0)) <
        1e-6);  // B = 1 may take another gemm path
  nn::LSTMCell lstm_cell{nn::RecurrentCellOptions(3, 4).generator(&gen)};
  const nn::RecurrentState zero_start = lstm_cell(x);
  const nn::RecurrentState explicit_zero = lstm_cell(x, nn::RecurrentState{zeros({2, 4}), zeros({2, 4})});
  CHECK(max_abs_diff(zero_start.h, explicit_zero.h) == 0.0);
  CHECK(max_abs_diff(zero_start.c, explicit_zero.c) == 0.0);
}

TEST_CASE("recurrent modules reject bad options and inputs with messages naming the module") {
  CHECK(message_of([] { nn::LSTM(0, 4); }) == "LSTM: input_size and hidden_size must be positive, got 0 and 4");
  CHECK(message_of([] { nn::GRU(nn::RecurrentOptions(2, 3).num_layers(0)); }) ==
        "GRU: num_layers must be at least 1, got 0");
  CHECK(message_of([] {
          nn::RNN(nn::RecurrentOptions(2, 3).dropout(1.5));
        }).rfind("RNN: dropout must be in [0, 1]", 0) == 0);
  nn::LSTM lstm(3, 4);
  CHECK(message_of([&] { lstm(zeros({5, 2, 2})); }) == "LSTM: expected input with last dimension 3, got shape (5,2,2)");
  CHECK(message_of([&] { lstm(zeros({5})); }) ==
        "LSTM: expected input (T, B, input_size), (B, T, input_size) with batch_first, or unbatched (T, input_size), "
        "got shape (5)");
  CHECK(message_of([&] {
          lstm(zeros({5, 2, 3}), nn::RecurrentState{zeros({1, 3, 4}), Tensor()});
        }) == "LSTM: initial state h must have shape (1,2,4), got (1,3,4)");
  nn::GRU gru(3, 4);
  CHECK(message_of([&] {
          gru(zeros({5, 2, 3}), nn::RecurrentState{Tensor(), zeros({1, 2, 4})});
        }) == "GRU: a cell state c is for the LSTM only");
  CHECK(message_of([&] { lstm->layer_parameters(0, true); }) == "LSTM: no layer 0 in reverse (num_layers 1)");
  nn::LSTMCell cell(3, 4);
  CHECK(message_of([&] {
          cell(zeros({2, 3}), nn::RecurrentState{zeros({2, 5}), Tensor()});
        }) == "LSTMCell: state h must have shape (2,4), got (2,5)");
}
