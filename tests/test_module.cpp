// nn::Module: registration, hierarchical names, modes, state dicts, dtype conversion; Linear.

#include <doctest/doctest.h>

#include "tapegrad/nn/nn.h"
#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::check_gradients;
using tapegrad::testing::check_values;

namespace {

class Block : public nn::UnaryModule {
 public:
  explicit Block(Generator& gen)
      : proj(register_module("proj", std::make_shared<nn::Linear>(3, 2, gen))),
        scale(register_parameter("scale", ones({2}))),
        steps(register_buffer("steps", zeros({1}))) {}
  Tensor forward(const Tensor& x) override { return (*proj)(x) * scale; }
  std::shared_ptr<nn::Linear> proj;
  Tensor scale;
  Tensor steps;
};

class Net : public nn::UnaryModule {
 public:
  explicit Net(Generator& gen)
      : first(register_module("first", std::make_shared<Block>(gen))),
        head(register_module("head", std::make_shared<nn::Linear>(2, 1, gen, /*bias=*/false))) {}
  Tensor forward(const Tensor& x) override { return (*head)((*first)(x)); }
  std::shared_ptr<Block> first;
  std::shared_ptr<nn::Linear> head;
};

std::vector<std::string> names(const NamedTensors& named) {
  std::vector<std::string> out;
  for (const auto& entry : named) out.push_back(entry.first);
  return out;
}

}  // namespace

TEST_CASE("module: hierarchical names, own entries before children's, as in PyTorch") {
  Generator gen(0);
  Net net(gen);
  CHECK(names(net.named_parameters()) ==
        std::vector<std::string>{"first.scale", "first.proj.weight", "first.proj.bias", "head.weight"});
  CHECK(names(net.named_buffers()) == std::vector<std::string>{"first.steps"});
  CHECK(names(net.state_dict()) == std::vector<std::string>{"first.scale", "first.proj.weight", "first.proj.bias",
                                                             "head.weight", "first.steps"});
  CHECK(net.num_parameters() == 6 + 2 + 2 + 2);
  CHECK(net.parameters(/*recurse=*/false).empty());
  auto modules = net.named_modules();
  REQUIRE(modules.size() == 4);
  CHECK(modules[1].first == "first");
  CHECK(modules[2].first == "first.proj");
  CHECK(modules[3].first == "head");
  for (const Tensor& p : net.parameters()) CHECK(p.requires_grad());
  CHECK_FALSE(net.first->steps.requires_grad());
}

TEST_CASE("module: train and eval are separate from grad mode") {
  Generator gen(0);
  Net net(gen);
  CHECK(net.first->proj->is_training());
  net.eval();
  CHECK_FALSE(net.first->proj->is_training());
  CHECK(is_grad_enabled());
  Tensor y = net(ones({4, 3}));
  CHECK(y.requires_grad());  // eval does not switch gradients off
  net.train();
  CHECK(net.head->is_training());
}

TEST_CASE("module: zero_grad and a gradient through the tree") {
  Generator gen(0);
  Net net(gen);
  net(ones({4, 3})).sum().backward();
  for (const Tensor& p : net.parameters()) CHECK(p.grad().defined());
  net.zero_grad();
  for (const Tensor& p : net.parameters()) CHECK(p.grad().abs().sum().item() == 0.0);
}

TEST_CASE("module: state_dict round trip and strict checks") {
  Generator gen(0), other(1);
  Net a(gen), b(other);
  b.load_state_dict(a.state_dict());
  for (std::size_t i = 0; i < a.state_dict().size(); ++i)
    CHECK(a.state_dict()[i].second.to_vector<float>() == b.state_dict()[i].second.to_vector<float>());
  // The copy is by value: changing a afterwards leaves b alone.
  {
    NoGradGuard guard;
    a.head->weight().fill_(5.0);
  }
  CHECK(b.head->weight().at({0, 0}) != 5.0);

  NamedTensors state = a.state_dict();
  NamedTensors missing(state.begin() + 1, state.end());
  CHECK_THROWS_WITH_AS(b.load_state_dict(missing), "load_state_dict: missing entry \"first.scale\"", ValueError);
  b.load_state_dict(missing, /*strict=*/false);
  NamedTensors extra = state;
  extra.emplace_back("first.unknown", zeros({1}));
  CHECK_THROWS_WITH_AS(b.load_state_dict(extra), "load_state_dict: unexpected entry \"first.unknown\"", ValueError);
  NamedTensors wrong_shape = state;
  wrong_shape[3].second = zeros({2, 1});
  CHECK_THROWS_WITH_AS(b.load_state_dict(wrong_shape),
                       "load_state_dict: \"head.weight\" has shape (2,1) in the state but (1,2) in the module",
                       ShapeError);
  NamedTensors wrong_dtype = state;
  wrong_dtype[0].second = ones({2}, kFloat64);
  CHECK_THROWS_WITH_AS(b.load_state_dict(wrong_dtype),
                       "load_state_dict: \"first.scale\" is float64 in the state but float32 in the module", TypeError);
  NamedTensors twice = state;
  twice.push_back(state[0]);
  CHECK_THROWS_WITH_AS(b.load_state_dict(twice), "load_state_dict: the entry \"first.scale\" appears twice",
                       ValueError);
}

TEST_CASE("module: named_generators lists each module's generators with hierarchical names, own first") {
  struct Noisy : nn::Module {
    Generator own{5};
    std::shared_ptr<nn::Dropout> drop;
    std::shared_ptr<nn::TransformerEncoderLayer> layer;
    Noisy(Generator& gen) {
      register_generator("noise", own);
      drop = register_module("drop", std::make_shared<nn::Dropout>(0.1, 3));
      layer = register_module("layer", std::make_shared<nn::TransformerEncoderLayer>(
                                           testing::layer_options(8, 2, 16, /*dropout=*/0.1), gen));
      register_module("again", drop);  // a shared module: its generator is listed once
    }
    void twice() { register_generator("noise", own); }
  };
  Generator gen(0);
  Noisy noisy(gen);
  const nn::NamedGenerators all = noisy.named_generators();
  std::vector<std::string> got;
  for (const auto& entry : all) got.push_back(entry.first);
  CHECK(got == std::vector<std::string>{"noise", "drop.generator", "layer.self_attn.dropout_generator",
                                        "layer.ff.dropout.generator", "layer.dropout1.generator",
                                        "layer.dropout2.generator"});
  REQUIRE(all.size() == got.size());
  CHECK(all[0].second == &noisy.own);
  CHECK(all[1].second == &noisy.drop->generator());
  CHECK(noisy.named_generators(/*recurse=*/false).size() == 1);
  // The handles are the modules' live generators: drawing from one is what dropout does.
  const std::string before = noisy.drop->generator().state();
  all[1].second->next_u64();
  CHECK(noisy.drop->generator().state() != before);
  CHECK_THROWS_WITH_AS(noisy.twice(), "Module::register_generator: the name \"noise\" is already registered",
                       ValueError);
}

TEST_CASE("module: registration errors") {
  struct Bad : nn::Module {
    void twice() {
      register_parameter("w", zeros({1}));
      register_buffer("w", zeros({1}));
    }
    void dotted() { register_parameter("a.b", zeros({1})); }
    void non_leaf() { register_parameter("x", ones({1}).requires_grad_() * 2.0); }
  };
  Bad bad;
  CHECK_THROWS_WITH_AS(bad.twice(), "Module::register_buffer: the name \"w\" is already registered", ValueError);
  CHECK_THROWS_WITH_AS(bad.dotted(), "Module::register_parameter: name \"a.b\" must be non-empty and contain no '.'",
                       ValueError);
  CHECK_THROWS_WITH_AS(bad.non_leaf(), "Module::register_parameter: \"x\" must be a leaf tensor (detach it first)",
                       GraphError);
}

TEST_CASE("module: Linear forward, errors, and float64 gradcheck through to()") {
  Generator gen(0);
  nn::Linear linear(3, 2, gen);
  const double bound = 1.0 / std::sqrt(3.0);
  CHECK(linear.weight().abs().max().item() <= bound);
  {
    NoGradGuard guard;
    linear.weight().copy_(tensor({{1, 2, 3}, {-1, 0, 1}}));
    linear.bias().copy_(tensor({0.5, -0.5}));
  }
  check_values(linear(tensor({{1, 1, 1}})), {6.5, -0.5});
  CHECK(linear(zeros({4, 5, 3})).shape() == Shape{4, 5, 2});
  CHECK_THROWS_WITH_AS(linear(zeros({4, 2})), "Linear: expected input with last dimension 3, got shape (4,2)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(nn::Linear(0, 2, gen), "Linear: in_features and out_features must be positive, got 0 and 2",
                       ValueError);

  Net net(gen);
  net.to(kFloat64);
  for (const auto& entry : net.state_dict()) CHECK(entry.second.dtype() == kFloat64);
  CHECK(net.first->proj->weight().dtype() == kFloat64);  // members see the conversion
  // Gradients with respect to the input and every parameter of the tree.
  Tensor x = randn({4, 3}, gen, kFloat64);
  check_gradients([&](const TensorList& in) { return net(in[0]); }, {x}, {}, net.parameters());
}
