// Errors raised inside a module's forward name the module's path from the outermost module called:
// "blocks.1: linear: ...", with the exception's type unchanged.
#include <doctest/doctest.h>

#include <string>

#include "tapegrad/autograd/autograd.h"
#include "tapegrad/nn/nn.h"
#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::message_of;

namespace {

// blocks: Linear(4, 4) then Linear(3, 2), which cannot take the first one's output; `loose` is held but
// not registered.
class TwoBlocksImpl : public nn::Module {
 public:
  TwoBlocksImpl()
      : blocks_(register_module("blocks", nn::Sequential(nn::Linear(4, 4), nn::Linear(3, 2)))),
        loose_(nn::Linear(3, 2)) {}
  Tensor forward(const Tensor& x) { return blocks_(x); }
  Tensor through_loose(const Tensor& x) { return loose_(x); }
  Tensor own_error(const Tensor& x) {
    if (x.dim() != 2) throw ValueError("TwoBlocks: expected (B, 4), got " + x.shape().str());
    return x;
  }

 private:
  nn::Sequential blocks_;
  nn::Linear loose_;
};
TAPEGRAD_MODULE(TwoBlocks);

}  // namespace

TEST_CASE("module errors: the path of the failing module comes before the op's message") {
  manual_seed(0);
  TwoBlocks model;
  const Tensor x = randn({2, 4});
  // The message the failing Linear gives when called on its own.
  nn::Linear alone(3, 2);
  const std::string plain = message_of([&] { alone(randn({2, 4})); });
  REQUIRE(plain != "no error");
  CHECK_THROWS_WITH_AS(model(x), ("blocks.1: " + plain).c_str(), ShapeError);
  // A second call gives the same message (nothing is left over from the first).
  CHECK(message_of([&] { model(x); }) == "blocks.1: " + plain);
  // Called on its own the module's own message is unchanged.
  nn::Sequential blocks(nn::Linear(4, 4), nn::Linear(3, 2));
  CHECK(message_of([&] { blocks(x); }) == "1: " + plain);
  CHECK(message_of([&] { std::dynamic_pointer_cast<nn::LinearImpl>(blocks->at(1))->forward(x); }) == plain);
}

TEST_CASE("module errors: a stack's layer and sublayer are named as in the state dict") {
  Generator gen(0);
  nn::Transformer model(nn::TransformerOptions(nn::TransformerLayerOptions(16, 4).dim_feedforward(32).dropout(0.0))
                            .num_encoder_layers(1)
                            .num_decoder_layers(2)
                            .generator(&gen));
  const Tensor src = randn({2, 5, 16}, gen), tgt = randn({2, 3, 16}, gen);
  // A memory padding mask one position too long fails in the first decoder layer's cross-attention.
  const auto memory = nn::AttentionForwardOptions().key_padding_mask(zeros({2, 6}, kBool));
  const std::string message =
      message_of([&] { model(src, tgt, nn::AttentionForwardOptions(), nn::AttentionForwardOptions(), memory); });
  CAPTURE(message);
  CHECK(message.rfind("decoder.layers.0.cross_attn: ", 0) == 0);
  CHECK(message.find("(2,6)") != std::string::npos);
}

TEST_CASE("module errors: unregistered modules are named by type and errors of the outer module are unchanged") {
  manual_seed(0);
  TwoBlocks model;
  nn::Linear wrapper_probe(3, 2);
  const std::string plain = message_of([&] { wrapper_probe(randn({2, 4})); });
  // through_loose is not forward, so call it inside another module's forward through a handle.
  struct OuterImpl : nn::Module {
    explicit OuterImpl(TwoBlocks inner) : inner_(register_module("inner", inner)) {}
    Tensor forward(const Tensor& x) { return inner_->through_loose(x); }
    TwoBlocks inner_;
  };
  auto outer = std::make_shared<OuterImpl>(model);
  const std::string message = message_of([&] { nn::detail::ForwardCall::call(*outer, randn({2, 4})); });
  // through_loose runs inside Outer's call, not a call of "inner": the loose Linear is Outer's callee.
  CHECK(message == "<Linear>: " + plain);
  // An error raised by the outermost module itself keeps its message.
  CHECK_THROWS_WITH_AS(model->own_error(randn({4})), "TwoBlocks: expected (B, 4), got (4)", ValueError);
}

TEST_CASE("module errors: an error caught inside a forward leaves the next one its own path") {
  manual_seed(0);
  struct CatchingImpl : nn::Module {
    CatchingImpl()
        : first_(register_module("first", nn::Linear(3, 2))), second_(register_module("second", nn::Linear(5, 2))) {}
    Tensor forward(const Tensor& x) {
      try {
        first_(x);
      } catch (const ShapeError&) {
        // handled: go on with the other layer
      }
      return second_(x);
    }
    nn::Linear first_, second_;
  };
  auto model = std::make_shared<CatchingImpl>();
  const std::string message = message_of([&] { nn::detail::ForwardCall::call(*model, randn({2, 4})); });
  CHECK(message.rfind("second: ", 0) == 0);
  CHECK(message.find("first") == std::string::npos);
}
