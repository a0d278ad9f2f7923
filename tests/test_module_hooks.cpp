// Module forward pre-hooks and forward hooks: replacing inputs and outputs, the order hooks run in
// (Sequential, a user's TAPEGRAD_MODULE), removal through handles, structured outputs, non-Tensor
// arguments, error messages.

#include <doctest/doctest.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tapegrad/nn/nn.h"
#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::check_values;

namespace {

// y = x * factor: outputs that are easy to predict.
class ScaleImpl : public nn::UnaryModule {
 public:
  explicit ScaleImpl(double factor) : factor_(factor) {}
  Tensor forward(const Tensor& x) override { return x * factor_; }

 private:
  double factor_;
};
TAPEGRAD_MODULE(Scale);

// A user's module calling its children through their handles: first doubles, second triples.
class PairImpl : public nn::Module {
 public:
  PairImpl() : first(register_module("first", Scale(2.0))), second(register_module("second", Scale(3.0))) {}
  Tensor forward(const Tensor& x) { return second(first(x)); }
  Scale first;
  Scale second;
};
TAPEGRAD_MODULE(Pair);

// Two Tensor arguments around a non-Tensor one: y = a * weight + b.
class AffineImpl : public nn::Module {
 public:
  Tensor forward(const Tensor& a, double weight, const Tensor& b) { return a * weight + b; }
};
TAPEGRAD_MODULE(Affine);

// A Linear layer with weight [[1, 2], [3, 4]] and bias [0.5, -0.5].
nn::Linear known_linear() {
  nn::Linear fc(2, 2);
  NoGradGuard guard;
  fc->weight().copy_(from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2}));
  fc->bias().copy_(from_vector(std::vector<float>{0.5f, -0.5f}, {2}));
  return fc;
}

std::optional<TensorList> doubled(const TensorList& tensors) {
  TensorList out;
  for (const Tensor& t : tensors) out.push_back(t * 2.0);
  return out;
}

}  // namespace

TEST_CASE("module hooks: a pre-hook replacing the input changes the output, the hook sees the module") {
  nn::Linear fc = known_linear();
  const Tensor x = from_vector(std::vector<float>{1, 1}, {1, 2});
  check_values(fc(x), {3.5, 6.5});
  const nn::Module* seen = nullptr;
  std::size_t seen_count = 0;
  fc->register_forward_pre_hook([&](nn::Module& module, const TensorList& in) {
    seen = &module;
    seen_count = in.size();
    return doubled(in);
  });
  check_values(fc(x), {6.5, 13.5});  // W (2, 2) + b
  CHECK(seen == fc.get());
  CHECK(seen_count == 1);
  // The caller's tensor is not changed; forward called directly skips the hook.
  check_values(x, {1, 1});
  check_values(fc->forward(x), {3.5, 6.5});
}

TEST_CASE("module hooks: a forward hook replacing the output, hooks returning nothing or std::nullopt change nothing") {
  nn::Linear fc = known_linear();
  const Tensor x = from_vector(std::vector<float>{1, 1}, {1, 2});
  int observed = 0;
  fc->register_forward_pre_hook([&](nn::Module&, const TensorList&) { ++observed; });
  fc->register_forward_pre_hook(
      [](nn::Module&, const TensorList&) -> std::optional<TensorList> { return std::nullopt; });
  fc->register_forward_hook([&](nn::Module&, const TensorList&, const Tensor&) { ++observed; });
  check_values(fc(x), {3.5, 6.5});
  CHECK(observed == 2);
  fc->register_forward_hook(
      [](nn::Module&, const TensorList&, const Tensor& y) -> std::optional<Tensor> { return y - 0.5; });
  check_values(fc(x), {3.0, 6.0});
  CHECK(observed == 4);
}

TEST_CASE("module hooks: each kind runs in registration order, each hook seeing the one before's replacement") {
  Scale scale(10.0);
  std::vector<std::string> log;
  const Tensor x = from_vector(std::vector<float>{1}, {1});
  auto value = [](const Tensor& t) { return std::to_string(static_cast<int>(t.item())); };
  // Registered forward hooks first: the pre-hooks still run before forward, the forward hooks after.
  scale->register_forward_hook([&](nn::Module&, const TensorList& in, const Tensor& y) -> std::optional<Tensor> {
    log.push_back("hook1 in=" + value(in[0]) + " y=" + value(y));
    return y + 1.0;
  });
  scale->register_forward_hook(
      [&](nn::Module&, const TensorList&, const Tensor& y) { log.push_back("hook2 y=" + value(y)); });
  scale->register_forward_pre_hook([&](nn::Module&, const TensorList& in) {
    log.push_back("pre1 x=" + value(in[0]));
    return std::optional<TensorList>({in[0] + 1.0});
  });
  scale->register_forward_pre_hook([&](nn::Module&, const TensorList& in) { log.push_back("pre2 x=" + value(in[0])); });
  check_values(scale(x), {21});
  CHECK(log == std::vector<std::string>{"pre1 x=1", "pre2 x=2", "hook1 in=2 y=20", "hook2 y=21"});
}

TEST_CASE("module hooks: hooks on Sequential's children fire in order, inside the Sequential's own") {
  nn::Sequential seq(Scale(2.0), nn::ReLU(), Scale(3.0));
  std::vector<std::string> log;
  auto trace = [&](nn::Module& m, const std::string& tag) {
    m.register_forward_pre_hook(
        [&log, tag](nn::Module& module, const TensorList&) { log.push_back("pre " + tag + " " + module.name()); });
    return m.register_forward_hook([&log, tag](nn::Module& module, const TensorList&, const Tensor&) {
      log.push_back("post " + tag + " " + module.name());
    });
  };
  trace(*seq, "seq");
  for (std::size_t i = 0; i < seq->size(); ++i) trace(*seq->at(i), std::to_string(i));
  check_values(seq(from_vector(std::vector<float>{-1, 2}, {2})), {0, 12});
  CHECK(log == std::vector<std::string>{"pre seq Sequential", "pre 0 Scale", "post 0 Scale", "pre 1 ReLU",
                                        "post 1 ReLU", "pre 2 Scale", "post 2 Scale", "post seq Sequential"});
  // A child's replacement reaches the next child: Scale(2)'s output negated, so the ReLU zeroes it.
  seq->at(0)->register_forward_hook(
      [](nn::Module&, const TensorList&, const Tensor& y) -> std::optional<Tensor> { return -y; });
  check_values(seq(from_vector(std::vector<float>{-1, 2}, {2})), {6, 0});
}

TEST_CASE("module hooks: hooks on the children of a user's TAPEGRAD_MODULE fire in order") {
  Pair pair;
  std::vector<std::string> log;
  for (const auto& [child_name, child] : pair->named_children())
    child->register_forward_hook([&log, name = child_name](nn::Module&, const TensorList& in, const Tensor& y) {
      log.push_back(name + ": " + std::to_string(in[0].item()) + " -> " + std::to_string(y.item()));
    });
  pair->register_forward_pre_hook([&log](nn::Module& module, const TensorList&) { log.push_back(module.name()); });
  check_values(pair(from_vector(std::vector<float>{1}, {1})), {6});
  CHECK(log == std::vector<std::string>{"Pair", "first: 1.000000 -> 2.000000", "second: 2.000000 -> 6.000000"});
}

TEST_CASE("module hooks: remove() stops a hook, removing twice does nothing, the other hooks stay") {
  Scale scale(2.0);
  const Tensor x = from_vector(std::vector<float>{1}, {1});
  int a = 0, b = 0;
  RemovableHandle ha = scale->register_forward_hook([&](nn::Module&, const TensorList&, const Tensor&) { ++a; });
  RemovableHandle hb = scale->register_forward_pre_hook([&](nn::Module&, const TensorList&) { ++b; });
  RemovableHandle hc = scale->register_forward_pre_hook(
      [](nn::Module&, const TensorList& in) { return std::optional<TensorList>({in[0] * 5.0}); });
  check_values(scale(x), {10});
  CHECK(scale->has_forward_hooks());
  hc.remove();
  check_values(scale(x), {2});
  ha.remove();
  ha.remove();
  scale(x);
  CHECK(a == 2);
  CHECK(b == 3);
  CHECK(scale->has_forward_hooks());
  hb.remove();
  CHECK_FALSE(scale->has_forward_hooks());
  scale(x);
  CHECK(b == 3);
  // A handle dropped without remove() leaves its hook registered, as in PyTorch.
  {
    scale->register_forward_hook([&](nn::Module&, const TensorList&, const Tensor&) { ++a; });
  }
  scale(x);
  CHECK(a == 3);
  RemovableHandle empty;
  empty.remove();  // a default handle removes nothing
}

TEST_CASE("module hooks: a handle outliving its module is harmless") {
  RemovableHandle handle;
  {
    Scale scale(2.0);
    handle = scale->register_forward_hook([](nn::Module&, const TensorList&, const Tensor&) {});
  }
  handle.remove();
  handle.remove();
}

TEST_CASE("module hooks: a list is copied when it starts running, as in PyTorch") {
  Scale scale(2.0);
  const Tensor x = from_vector(std::vector<float>{1}, {1});
  int once = 0, after = 0, from_pre = 0, from_hook = 0;
  auto handle = std::make_shared<RemovableHandle>();
  // A one-shot pre-hook: it removes itself and registers a forward hook.
  *handle = scale->register_forward_pre_hook([&, handle](nn::Module& module, const TensorList&) {
    ++once;
    handle->remove();
    module.register_forward_hook([&](nn::Module&, const TensorList&, const Tensor&) { ++from_pre; });
  });
  scale->register_forward_pre_hook([&](nn::Module&, const TensorList&) { ++after; });
  // A forward hook registering another forward hook on the first call.
  bool registered = false;
  scale->register_forward_hook([&](nn::Module& module, const TensorList&, const Tensor&) {
    if (registered) return;
    registered = true;
    module.register_forward_hook([&](nn::Module&, const TensorList&, const Tensor&) { ++from_hook; });
  });
  scale(x);
  CHECK(once == 1);
  CHECK(after == 1);      // removing a pre-hook while the pre-hooks run does not skip the next one
  CHECK(from_pre == 1);   // the forward hooks' list is copied after forward, so it holds the new hook
  CHECK(from_hook == 0);  // registered while the forward hooks run: from the next call on
  scale(x);
  CHECK(once == 1);
  CHECK(after == 2);
  CHECK(from_pre == 2);
  CHECK(from_hook == 1);
}

TEST_CASE("module hooks: capturing activations for feature extraction") {
  manual_seed(0);
  nn::Sequential net(nn::Linear(3, 4), nn::ReLU(), nn::Linear(4, 2));
  Generator gen(1);
  const Tensor x = randn({5, 3}, gen);
  std::vector<Tensor> hidden;
  RemovableHandle handle = net->at(1)->register_forward_hook(
      [&](nn::Module&, const TensorList&, const Tensor& y) { hidden.push_back(y.detach()); });
  const Tensor y = net(x);
  REQUIRE(hidden.size() == 1);
  const auto& first = *std::dynamic_pointer_cast<nn::LinearImpl>(net->at(0));
  const Tensor expected = relu(matmul(x, first.weight().transpose(0, 1)) + first.bias());
  CHECK(hidden[0].shape() == Shape{5, 4});
  CHECK(testing::max_abs_diff(hidden[0], expected) < 1e-6);
  CHECK(testing::max_abs_diff(y, (*net->at(2))(hidden[0])) < 1e-6);
  handle.remove();
  net(x);
  CHECK(hidden.size() == 1);
}

TEST_CASE("module hooks: gradients flow through a replaced input and a replaced output") {
  Scale scale(3.0);
  scale->register_forward_pre_hook(
      [](nn::Module&, const TensorList& in) { return std::optional<TensorList>({in[0] * in[0]}); });
  scale->register_forward_hook(
      [](nn::Module&, const TensorList&, const Tensor& y) -> std::optional<Tensor> { return y * 2.0; });
  Tensor x = from_vector(std::vector<float>{1, 2}, {2}).requires_grad_();
  Tensor y = scale(x);  // 6 x^2
  check_values(y, {6, 24});
  y.sum().backward();
  check_values(x.grad(), {12, 24});  // 12 x
}

TEST_CASE("module hooks: non-Tensor arguments pass through unseen, the Tensor arguments keep their places") {
  Affine affine;
  const Tensor a = from_vector(std::vector<float>{1, 2}, {2});
  const Tensor b = from_vector(std::vector<float>{10, 20}, {2});
  std::size_t count = 0;
  affine->register_forward_pre_hook([&](nn::Module&, const TensorList& in) {
    count = in.size();
    return std::optional<TensorList>({in[0], in[1] * -1.0});  // negate b
  });
  TensorList seen_by_hook;
  affine->register_forward_hook([&](nn::Module&, const TensorList& in, const Tensor&) { seen_by_hook = in; });
  check_values(affine(a, 3.0, b), {-7, -14});
  CHECK(count == 2);
  REQUIRE(seen_by_hook.size() == 2);
  check_values(seen_by_hook[1], {-10, -20});  // the forward hook sees the arguments forward got

  // A module's non-Tensor argument (the rotary position offset) still reaches forward.
  nn::RotaryEmbedding rotary(4, 16);
  Generator gen(1);
  const Tensor x = randn({1, 3, 4}, gen);
  const Tensor plain = rotary(x, 5);
  rotary->register_forward_pre_hook([&](nn::Module&, const TensorList& in) { count = in.size(); });
  count = 0;
  CHECK(testing::max_abs_diff(rotary(x, 5), plain) == 0.0);
  CHECK(count == 1);
}

TEST_CASE("module hooks: a forward returning a struct takes hooks registered for that type") {
  manual_seed(0);
  nn::MultiHeadAttention attn(4, 2);
  Generator gen(1);
  const Tensor x = randn({1, 3, 4}, gen);
  const auto options = nn::AttentionForwardOptions().need_weights(true);
  std::vector<Tensor> maps;
  TensorList inputs;
  RemovableHandle handle = attn->register_forward_hook<nn::AttentionResult>(
      [&](nn::Module&, const TensorList& in, const nn::AttentionResult& r) {
        inputs = in;
        maps.push_back(r.weights);
      });
  const nn::AttentionResult result = attn(x, Tensor(), options);
  REQUIRE(maps.size() == 1);
  CHECK(maps[0].shape() == Shape{1, 2, 3, 3});
  CHECK(testing::max_abs_diff(maps[0], result.weights) == 0.0);
  REQUIRE(inputs.size() == 2);  // the query and the (undefined) key_value, not the options
  CHECK_FALSE(inputs[1].defined());

  attn->register_forward_hook<nn::AttentionResult>(
      [](nn::Module&, const TensorList&, const nn::AttentionResult& r) -> std::optional<nn::AttentionResult> {
        return nn::AttentionResult{r.output * 0.0, r.weights};
      });
  CHECK(attn(x, Tensor(), options).output.abs().sum().item() == 0.0);
  CHECK(maps.size() == 2);
  handle.remove();
}

TEST_CASE("module hooks: hooks are not state") {
  manual_seed(0);
  nn::Linear a(3, 2), b(3, 2);
  const auto params_before = a->named_parameters();
  int calls = 0;
  a->register_forward_pre_hook([&](nn::Module&, const TensorList&) { ++calls; });
  a->register_forward_hook([&](nn::Module&, const TensorList&, const Tensor&) { ++calls; });
  CHECK(testing::names(a->named_parameters()) == testing::names(params_before));
  CHECK(a->parameters().size() == 2);
  CHECK(testing::names(a->state_dict()) == std::vector<std::string>{"weight", "bias"});
  // Loading state copies values, not hooks: b has none, a keeps its own.
  b->load_state_dict(a->state_dict());
  CHECK_FALSE(b->has_forward_hooks());
  a->load_state_dict(b->state_dict());
  a(ones({1, 3}));
  CHECK(calls == 2);
}

TEST_CASE("module hooks: errors name the module and the counts or types") {
  nn::Linear fc = known_linear();
  const Tensor x = ones({1, 2});
  RemovableHandle wrong_count = fc->register_forward_pre_hook([](nn::Module&, const TensorList& in) {
    return std::optional<TensorList>({in[0], in[0]});
  });
  CHECK_THROWS_WITH_AS(fc(x), "Linear: a forward pre-hook returned 2 tensors for a call with 1 Tensor argument",
                       ValueError);
  wrong_count.remove();
  Affine affine;
  affine->register_forward_pre_hook(
      [](nn::Module&, const TensorList&) { return std::optional<TensorList>(TensorList{}); });
  CHECK_THROWS_WITH_AS(affine(x, 1.0, x),
                       "Affine: a forward pre-hook returned 0 tensors for a call with 2 Tensor arguments", ValueError);
  check_values(fc(x), {3.5, 6.5});

  manual_seed(0);
  nn::MultiHeadAttention attn(4, 2);
  attn->register_forward_hook([](nn::Module&, const TensorList&, const Tensor&) {});
  CHECK_THROWS_WITH_AS(attn(ones({1, 3, 4})),
                       "MultiHeadAttention: a forward hook registered for output type tapegrad::Tensor was called with "
                       "the output of a forward returning tapegrad::nn::AttentionResult (name the type: "
                       "register_forward_hook<tapegrad::nn::AttentionResult>)",
                       TypeError);

  std::function<void(nn::Module&, const TensorList&)> empty_pre;
  CHECK_THROWS_WITH_AS(fc->register_forward_pre_hook(empty_pre), "Linear: register_forward_pre_hook: the hook is empty",
                       ValueError);
  std::optional<Tensor> (*null_hook)(nn::Module&, const TensorList&, const Tensor&) = nullptr;
  CHECK_THROWS_WITH_AS(fc->register_forward_hook(null_hook), "Linear: register_forward_hook: the hook is empty",
                       ValueError);
}

TEST_CASE("module hooks: hooks on attention's rotary embedding fire, once for q and once for k") {
  manual_seed(0);
  nn::MultiHeadAttention attn(nn::MultiHeadAttentionOptions(4, 2).rotary_max_len(8));
  Generator gen(1);
  const Tensor x = randn({1, 3, 4}, gen);
  const Tensor plain = attn(x).output;
  std::shared_ptr<nn::Module> rotary;
  for (const auto& [child_name, child] : attn->named_children())
    if (child_name == "rotary") rotary = child;
  REQUIRE(rotary);
  std::vector<Shape> shapes;
  rotary->register_forward_hook(
      [&](nn::Module&, const TensorList& in, const Tensor&) { shapes.push_back(in[0].shape()); });
  CHECK(testing::max_abs_diff(attn(x).output, plain) == 0.0);
  CHECK(shapes == std::vector<Shape>{Shape{1, 2, 3, 2}, Shape{1, 2, 3, 2}});  // q, k: (B, H, T, Dh)
}
