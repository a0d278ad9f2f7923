// nn::Module: registration, hierarchical names, modes, state dicts, dtype conversion; module handles
// (ModuleHolder), options, the default generator; Linear.

#include <doctest/doctest.h>

#include <cmath>
#include <thread>

#include "tapegrad/nn/nn.h"
#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::check_gradients;
using tapegrad::testing::check_values;
using tapegrad::testing::names;

namespace {

// Users' modules in the library's idiom: XImpl derives from Module, TAPEGRAD_MODULE(X) is the handle.
class BlockImpl : public nn::Module {
 public:
  BlockImpl()
      : proj(register_module("proj", nn::Linear(3, 2))),
        scale(register_parameter("scale", ones({2}))),
        steps(register_buffer("steps", zeros({1}))) {}
  Tensor forward(const Tensor& x) { return proj(x) * scale; }
  nn::Linear proj;
  Tensor scale;
  Tensor steps;
};
TAPEGRAD_MODULE(Block);

class NetImpl : public nn::Module {
 public:
  NetImpl()
      : first(register_module("first", Block())),
        head(register_module("head", nn::Linear(nn::LinearOptions(2, 1).bias(false)))) {}
  Tensor forward(const Tensor& x) { return head(first(x)); }
  Block first;
  nn::Linear head;
};
TAPEGRAD_MODULE(Net);

// A user's module that keeps its parameters in members, one initialised (w), one assigned (b), and
// one registered through a local variable of the constructor, which the module must forget.
class AffineImpl : public nn::Module {
 public:
  AffineImpl() : w(register_parameter("w", ones({3}))) {
    b = register_parameter("b", zeros({3}));
    Tensor scratch;
    scratch = register_parameter("extra", zeros({1}));
  }
  Tensor forward(const Tensor& x) { return x * w + b; }
  Tensor w;
  Tensor b;
};
TAPEGRAD_MODULE(Affine);

// A module that registers a parameter in its first forward, into a local variable.
class LazyImpl : public nn::Module {
 public:
  Tensor forward(const Tensor& x) {
    if (parameters(/*recurse=*/false).empty()) {
      Tensor w = register_parameter("w", full({x.size(-1)}, 2.0));
      return x * w;
    }
    return x * parameters(/*recurse=*/false)[0];
  }
};
TAPEGRAD_MODULE(Lazy);

}  // namespace

TEST_CASE("module: a parameter member re-seated by assignment is refused at its next use, never split silently") {
  for (const std::string name : {"w", "b"}) {
    CAPTURE(name);
    Affine m;
    Tensor& member = name == "w" ? m->w : m->b;
    const Tensor registered = member;
    member = full({3}, 5.0);  // what parameters() and an optimiser would not see
    const std::string message = "Affine: parameter \"" + name +
                                "\" was re-seated: its member now holds another tensor than the registered one, which "
                                "parameters(), state_dict() and the optimisers built from them would go on using. "
                                "Change the values in place (under NoGradGuard: copy_) or with load_state_dict";
    CHECK_THROWS_WITH_AS(m->parameters(), message.c_str(), ValueError);
    CHECK_THROWS_WITH_AS(m->state_dict(), message.c_str(), ValueError);
    CHECK_THROWS_WITH_AS(m(ones({3})), message.c_str(), ValueError);
    // Inside a parent, the parent's parameters() finds it too.
    nn::ModuleList parent;
    parent->push_back(m);
    CHECK_THROWS_AS(parent->named_parameters(), ValueError);
    member = registered;  // the registered tensor back: accepted again
    CHECK(m->parameters().size() == 3);
  }
  // Changing the values in place is the way: parameters() and the forward see them.
  Affine m;
  {
    NoGradGuard no_grad;
    m->w.copy_(full({3}, 2.0));
  }
  CHECK(m->parameters()[0].to_vector<float>() == std::vector<float>{2, 2, 2});
  CHECK(m(ones({3})).to_vector<float>() == std::vector<float>{2, 2, 2});
  // A parameter registered after construction into a local is not watched (its local is gone).
  Lazy lazy;
  CHECK(lazy(ones({3})).to_vector<float>() == std::vector<float>{2, 2, 2});
  CHECK(lazy(ones({3})).to_vector<float>() == std::vector<float>{2, 2, 2});
  CHECK(lazy->parameters().size() == 1);
  // A module made without a handle has no known extent: its members are not watched.
  auto unwatched = std::make_shared<AffineImpl>();
  unwatched->w = zeros({3});
  CHECK(unwatched->parameters().size() == 3);
}

TEST_CASE("module: hierarchical names, own entries before children's, as in PyTorch") {
  manual_seed(0);
  Net net;
  CHECK(names(net->named_parameters()) ==
        std::vector<std::string>{"first.scale", "first.proj.weight", "first.proj.bias", "head.weight"});
  CHECK(names(net->named_buffers()) == std::vector<std::string>{"first.steps"});
  CHECK(names(net->state_dict()) ==
        std::vector<std::string>{"first.scale", "first.proj.weight", "first.proj.bias", "head.weight", "first.steps"});
  CHECK(net->num_parameters() == 6 + 2 + 2 + 2);
  CHECK(net->parameters(/*recurse=*/false).empty());
  auto modules = net->named_modules();
  REQUIRE(modules.size() == 4);
  CHECK(modules[1].first == "first");
  CHECK(modules[2].first == "first.proj");
  CHECK(modules[3].first == "head");
  for (const Tensor& p : net->parameters()) CHECK(p.requires_grad());
  CHECK_FALSE(net->first->steps.requires_grad());
}

TEST_CASE("module: name() is the class name without namespaces or the Impl suffix") {
  manual_seed(0);
  Net net;
  CHECK(net->name() == "Net");  // a user's NetImpl in an anonymous namespace
  CHECK(net->first->name() == "Block");
  CHECK(net->head->name() == "Linear");
  CHECK(nn::Sequential()->name() == "Sequential");
  CHECK(nn::ModuleList()->name() == "ModuleList");
  CHECK(nn::MultiHeadAttention(4, 2)->name() == "MultiHeadAttention");
}

TEST_CASE("module: train and eval are separate from grad mode") {
  manual_seed(0);
  Net net;
  CHECK(net->first->proj->is_training());
  net->eval();
  CHECK_FALSE(net->first->proj->is_training());
  CHECK(is_grad_enabled());
  Tensor y = net(ones({4, 3}));
  CHECK(y.requires_grad());  // eval does not switch gradients off
  net->train();
  CHECK(net->head->is_training());
}

TEST_CASE("module: zero_grad and a gradient through the tree") {
  manual_seed(0);
  Net net;
  net(ones({4, 3})).sum().backward();
  for (const Tensor& p : net->parameters()) CHECK(p.grad().defined());
  net->zero_grad();
  for (const Tensor& p : net->parameters()) CHECK(p.grad().abs().sum().item() == 0.0);
}

TEST_CASE("module: state_dict round trip and strict checks") {
  manual_seed(0);
  Net a;
  manual_seed(1);
  Net b;
  b->load_state_dict(a->state_dict());
  for (std::size_t i = 0; i < a->state_dict().size(); ++i)
    CHECK(a->state_dict()[i].second.to_vector<float>() == b->state_dict()[i].second.to_vector<float>());
  // The copy is by value: changing a afterwards leaves b alone.
  {
    NoGradGuard guard;
    a->head->weight().fill_(5.0);
  }
  CHECK(b->head->weight().at({0, 0}) != 5.0);

  NamedTensors state = a->state_dict();
  NamedTensors missing(state.begin() + 1, state.end());
  CHECK_THROWS_WITH_AS(b->load_state_dict(missing), "load_state_dict: missing entry \"first.scale\"", ValueError);
  b->load_state_dict(missing, /*strict=*/false);
  NamedTensors extra = state;
  extra.emplace_back("first.unknown", zeros({1}));
  CHECK_THROWS_WITH_AS(b->load_state_dict(extra), "load_state_dict: unexpected entry \"first.unknown\"", ValueError);
  NamedTensors wrong_shape = state;
  wrong_shape[3].second = zeros({2, 1});
  CHECK_THROWS_WITH_AS(b->load_state_dict(wrong_shape),
                       "load_state_dict: \"head.weight\" has shape (2,1) in the state but (1,2) in the module",
                       ShapeError);
  // Floating dtypes convert (next test); an integer entry for a floating parameter is refused.
  NamedTensors wrong_dtype = state;
  wrong_dtype[0].second = from_vector(std::vector<std::int64_t>{1, 2}, {2});
  CHECK_THROWS_WITH_AS(b->load_state_dict(wrong_dtype),
                       "load_state_dict: \"first.scale\" is int64 in the state but float32 in the module", TypeError);
  NamedTensors twice = state;
  twice.push_back(state[0]);
  CHECK_THROWS_WITH_AS(b->load_state_dict(twice), "load_state_dict: the entry \"first.scale\" appears twice",
                       ValueError);
}

TEST_CASE("module: load_state_dict converts float64 state into a float32 module and back, as torch's copy_") {
  manual_seed(0);
  Net a;
  manual_seed(1);
  Net b;
  a->to(kFloat64);
  {
    NoGradGuard guard;
    a->first->scale.copy_(from_vector(std::vector<double>{0.1, 1.0 + 1e-12}, {2}));
  }
  b->load_state_dict(a->state_dict());
  // b keeps its dtype; each value is the float64 one rounded to float32.
  CHECK(b->first->scale.dtype() == kFloat32);
  CHECK(b->first->scale.to_vector<float>() == std::vector<float>{0.1f, 1.0f});
  const NamedTensors from = a->state_dict(), to = b->state_dict();
  for (std::size_t i = 0; i < from.size(); ++i) {
    CAPTURE(from[i].first);
    CHECK(to[i].second.dtype() == kFloat32);
    CHECK(to[i].second.to_vector<float>() == from[i].second.to(kFloat32).to_vector<float>());
  }
  // float32 into float64: exact.
  Net c;
  c->to(kFloat64);
  c->load_state_dict(b->state_dict());
  CHECK(c->first->scale.dtype() == kFloat64);
  CHECK(c->first->scale.to_vector<double>() == std::vector<double>{static_cast<double>(0.1f), 1.0});
  // A refused entry anywhere leaves every parameter unchanged.
  NamedTensors mixed = a->state_dict();
  mixed.back().second = from_vector(std::vector<std::int64_t>{1}, {1});  // first.steps
  const std::vector<float> before = b->first->scale.to_vector<float>();
  CHECK_THROWS_AS(b->load_state_dict(mixed), TypeError);
  CHECK(b->first->scale.to_vector<float>() == before);
}

TEST_CASE("module: named_generators lists each module's generators with hierarchical names, own first") {
  struct Noisy : nn::Module {
    Generator own{5};
    nn::Dropout drop{nullptr};
    nn::TransformerEncoderLayer layer{nullptr};
    Noisy() {
      register_generator("noise", own);
      drop = register_module("drop", nn::Dropout(0.1));
      layer = register_module("layer", nn::TransformerEncoderLayer(testing::layer_options(8, 2, 16, /*dropout=*/0.1)));
      register_module("again", drop);  // a shared module: its generator is listed once
    }
    void twice() { register_generator("noise", own); }
  };
  manual_seed(0);
  Noisy noisy;
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
  manual_seed(0);
  Generator& gen = default_generator();  // the modules and the input draw from it
  nn::Linear linear(3, 2);
  const double bound = 1.0 / std::sqrt(3.0);
  CHECK(linear->weight().abs().max().item() <= bound);
  {
    NoGradGuard guard;
    linear->weight().copy_(tensor({{1, 2, 3}, {-1, 0, 1}}));
    linear->bias().copy_(tensor({0.5, -0.5}));
  }
  check_values(linear(tensor({{1, 1, 1}})), {6.5, -0.5});
  CHECK(linear(zeros({4, 5, 3})).shape() == Shape{4, 5, 2});
  CHECK_THROWS_WITH_AS(linear(zeros({4, 2})), "Linear: expected input with last dimension 3, got shape (4,2)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(nn::Linear(0, 2), "Linear: in_features and out_features must be positive, got 0 and 2",
                       ValueError);

  Net net;
  net->to(kFloat64);
  for (const auto& entry : net->state_dict()) CHECK(entry.second.dtype() == kFloat64);
  CHECK(net->first->proj->weight().dtype() == kFloat64);  // members see the conversion
  // Gradients with respect to the input and every parameter of the tree.
  Tensor x = randn({4, 3}, gen, kFloat64);
  check_gradients([&](const TensorList& in) { return net(in[0]); }, {x}, {}, net->parameters());
  // The same through nn::gradcheck: one report per named parameter, in named_parameters() order.
  const GradcheckResult named = nn::gradcheck([&](const TensorList& in) { return net(in[0]); }, {x}, *net);
  CHECK_MESSAGE(named.passed, named.message());
  REQUIRE(named.inputs.size() == 5);
  CHECK(named.inputs[1].name == "first.scale");
  CHECK(named.inputs[4].name == "head.weight");
  CHECK(named.message().find("parameter 'first.proj.weight' (2,3): ok") != std::string::npos);
  // Second derivatives by name: the parameters' reports, then the upstream gradient's.
  const GradcheckResult second = nn::gradgradcheck([&](const TensorList& in) { return net(in[0]); }, {x}, *net);
  CHECK_MESSAGE(second.passed, second.message());
  REQUIRE(second.inputs.size() == 6);
  CHECK(second.inputs[1].name == "grad_output");
  CHECK(second.inputs[5].name == "head.weight");
}

TEST_CASE("module: a handle shares its module, empty handles, register_module returns what it was given") {
  manual_seed(0);
  nn::Linear a(3, 2);
  const nn::Linear b = a;  // NOLINT(performance-unnecessary-copy-initialization): the copy is the test
  CHECK(b.get() == a.get());
  CHECK(b.ptr() == a.ptr());
  CHECK(&*b == a.get());
  {
    NoGradGuard guard;
    a->weight().fill_(1.0);
  }
  CHECK(b->weight().sum().item() == 6.0);
  check_values(b(ones({1, 3})), a(ones({1, 3})).to_vector<double>());

  nn::Linear empty{nullptr};
  CHECK(empty.is_empty());
  CHECK_FALSE(static_cast<bool>(empty));
  CHECK(static_cast<bool>(a));
  CHECK_THROWS_WITH_AS(empty(ones({1, 3})), "ModuleHolder: the module handle is empty (nullptr); assign a module first",
                       ValueError);
  CHECK_THROWS_AS(empty->weight(), ValueError);
  empty = a;
  CHECK(empty.get() == a.get());
  // A handle from an existing shared_ptr shares it too.
  auto impl = std::make_shared<nn::LinearImpl>(2, 2);
  nn::Linear wrapped(impl);
  CHECK(wrapped.get() == impl.get());

  struct Owner : nn::Module {
    nn::Linear kept{nullptr};
    std::shared_ptr<nn::LinearImpl> raw;
    explicit Owner(const nn::Linear& fc) {
      kept = register_module("fc", fc);
      raw = register_module("raw", std::make_shared<nn::LinearImpl>(1, 1));
    }
    void null_child() { register_module("none", nn::Linear(nullptr)); }
  };
  Owner owner(a);
  CHECK(owner.kept.get() == a.get());
  REQUIRE(owner.named_children().size() == 2);
  CHECK(owner.named_children()[0].second.get() == a.get());
  CHECK(owner.named_children()[1].second.get() == owner.raw.get());
  CHECK_THROWS_WITH_AS(owner.null_child(), "Module::register_module: \"none\" is a null module", ValueError);
}

TEST_CASE("module: options are chainable setters over PyTorch's defaults") {
  const nn::LinearOptions linear = nn::LinearOptions(4, 5).bias(false);
  CHECK(linear.in_features() == 4);
  CHECK(linear.out_features() == 5);
  CHECK_FALSE(linear.bias());
  CHECK(nn::LinearOptions(1, 1).bias());
  CHECK(nn::LayerNormOptions(8).eps() == 1e-5);
  CHECK(nn::LayerNormOptions(8).elementwise_affine());
  CHECK(nn::DropoutOptions().p() == 0.5);
  CHECK(nn::MultiHeadAttentionOptions(8, 2).dropout() == 0.0);
  CHECK(nn::MultiHeadAttentionOptions(8, 2).bias());
  const nn::TransformerLayerOptions layer(16, 4);  // torch.nn.TransformerEncoderLayer(16, 4)'s defaults
  CHECK(layer.dim_feedforward() == 2048);
  CHECK(layer.dropout() == 0.1);
  CHECK(layer.activation() == nn::Activation::ReLU);
  CHECK_FALSE(layer.norm_first());
  CHECK(layer.layer_norm_eps() == 1e-5);
  nn::Linear no_bias{nn::LinearOptions(4, 5).bias(false)};
  CHECK_FALSE(no_bias->bias().defined());
  CHECK(no_bias->named_parameters().size() == 1);
}

TEST_CASE("module: manual_seed makes the same model twice, an explicit generator is used instead of the default") {
  manual_seed(42);
  Net first;
  manual_seed(42);
  Net second;
  for (std::size_t i = 0; i < first->state_dict().size(); ++i)
    CHECK(first->state_dict()[i].second.to_vector<float>() == second->state_dict()[i].second.to_vector<float>());
  Net third;  // the default generator moved on
  CHECK(third->head->weight().to_vector<float>() != first->head->weight().to_vector<float>());

  // An explicit generator: the weights are its draws and the default generator is not touched.
  manual_seed(42);
  const std::string before = default_generator().state();
  Generator gen(7), same(7);
  nn::Linear explicit_a{nn::LinearOptions(3, 2).generator(&gen)};
  CHECK(default_generator().state() == before);
  const double bound = 1.0 / std::sqrt(3.0);
  CHECK(explicit_a->weight().to_vector<float>() == uniform({2, 3}, -bound, bound, same).to_vector<float>());
  nn::Linear from_default(3, 2);
  CHECK(default_generator().state() != before);
  Generator again(42);
  CHECK(from_default->weight().to_vector<float>() == uniform({2, 3}, -bound, bound, again).to_vector<float>());

  // Each thread has its own default generator (thread_local): seeding it here leaves other threads' alone.
  manual_seed(3);
  std::string other_thread;
  std::thread([&] { other_thread = default_generator().state(); }).join();
  CHECK(other_thread == Generator(0).state());
  CHECK(default_generator().initial_seed() == 3);
}
