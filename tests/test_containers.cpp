// ModuleList, ModuleDict, ParameterList and ParameterDict (nn/containers.h): registration under
// positions and keys (state_dict names), indexing, iteration and typed access, the renaming that
// insert and pop do, replacement in place, clone, the errors, and gradients through what they hold.

#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "tapegrad/nn/nn.h"
#include "tapegrad/optim/optim.h"
#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::max_abs_diff;
using tapegrad::testing::names;

TEST_CASE("containers: ModuleList indexes, iterates, inserts and pops with torch's names") {
  manual_seed(0);
  nn::ModuleList list;
  const nn::Linear first = list->push_back(nn::Linear(3, 4));
  list->push_back(nn::ReLU());
  list->push_back(std::make_shared<nn::LinearImpl>(4, 2));
  REQUIRE(list->size() == 3);
  CHECK(names(list->state_dict()) == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
  CHECK(list[0].get() == first.get());  // the same module, not a copy
  CHECK((*list)[1]->name() == "ReLU");
  CHECK(list->ptr(2)->as<nn::LinearImpl>() != nullptr);
  CHECK(list->ptr(1)->as<nn::LinearImpl>() == nullptr);

  // Iteration and typed access: the list as a network.
  const Tensor x = randn({5, 3});
  Tensor y = x;
  for (const auto& module : *list) {
    if (auto* linear = module->as<nn::LinearImpl>()) y = linear->forward(y);
    else y = module->as<nn::ReLUImpl>()->forward(y);
  }
  const Tensor expected = list->at<nn::LinearImpl>(2).forward(relu(first(x)));
  CHECK(max_abs_diff(y, expected) == 0.0);
  CHECK_THROWS_WITH_AS(list->at<nn::LinearImpl>(1),
                       "ModuleList::at(1): the module is a ReLU, not a tapegrad::nn::LinearImpl", TypeError);
  CHECK_THROWS_WITH_AS(list->ptr(3), "ModuleList::operator[]: index 3 is out of range for a list of 3 modules",
                       IndexError);

  // insert renames the entries after it; pop takes one out and renames back.
  const nn::Linear inserted = list->insert(1, nn::Linear(4, 4));
  CHECK(list->size() == 4);
  CHECK(names(list->state_dict()) ==
        std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias", "3.weight", "3.bias"});
  CHECK(list[1].get() == inserted.get());
  CHECK(list[2]->name() == "ReLU");
  const std::shared_ptr<nn::Module> popped = list->pop(1);
  CHECK(popped.get() == inserted.get());
  CHECK(names(list->state_dict()) == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
  list->insert(3, nn::Identity());  // at the end
  CHECK(list[3]->name() == "Identity");
  list->erase(3);
  CHECK_THROWS_WITH_AS(list->insert(5, nn::ReLU()),
                       "ModuleList::insert: index 5 is out of range for a list of 3 modules", IndexError);
  CHECK_THROWS_WITH_AS(list->push_back(nn::Linear(nullptr)),
                       "ModuleList::push_back: the module is null (an empty handle)", ValueError);
  CHECK(list->size() == 3);

  // set replaces an entry under its name and position.
  list->set(1, nn::Linear(4, 4).ptr());
  CHECK(names(list->state_dict()) ==
        std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias", "2.weight", "2.bias"});
  // extend appends another list's modules (the same modules), itself too.
  nn::ModuleList more;
  more->push_back(nn::Tanh());
  list->extend(*more);
  CHECK(list[3].get() == more[0].get());
  list->extend(*list);
  CHECK(list->size() == 8);
  CHECK(list[4].get() == list[0].get());
  CHECK(list->num_parameters() == (3 * 4 + 4) + (4 * 4 + 4) + (4 * 2 + 2));  // shared modules counted once
}

TEST_CASE("containers: a ModuleList's clone copies the modules it holds, and to() and eval() reach them") {
  manual_seed(1);
  nn::ModuleList list;
  list->push_back(nn::Linear(2, 3));
  list->push_back(nn::Dropout(0.5));
  nn::ModuleList twin = list.clone();
  REQUIRE(twin->size() == 2);
  CHECK(twin[0].get() != list[0].get());
  CHECK(max_abs_diff(twin->at<nn::LinearImpl>(0).weight(), list->at<nn::LinearImpl>(0).weight()) == 0.0);
  {
    NoGradGuard no_grad;
    list->at<nn::LinearImpl>(0).weight().fill_(7.0);
  }
  CHECK(twin->at<nn::LinearImpl>(0).weight().to_vector<float>()[0] != 7.0f);  // not shared
  list->eval();
  CHECK(!list[1]->is_training());
  list->to(kFloat64);
  CHECK(list->at<nn::LinearImpl>(0).weight().dtype() == kFloat64);
  CHECK(twin->at<nn::LinearImpl>(0).weight().dtype() == kFloat32);
}

TEST_CASE("containers: ModuleDict keeps insertion order, replaces in place and names its modules by key") {
  manual_seed(2);
  nn::ModuleDict heads;
  heads->insert("policy", nn::Linear(4, 3));
  const nn::Linear value = heads->insert("value", nn::Linear(4, 1));
  CHECK(heads->keys() == std::vector<std::string>{"policy", "value"});
  CHECK(names(heads->state_dict()) ==
        std::vector<std::string>{"policy.weight", "policy.bias", "value.weight", "value.bias"});
  CHECK(heads["value"].get() == value.get());
  CHECK(heads->contains("policy"));
  CHECK(!heads->contains("critic"));
  const Tensor h = randn({2, 4});
  CHECK(heads->at<nn::LinearImpl>("value").forward(h).shape() == Shape{2, 1});

  // insert on an existing key replaces the module and keeps its place.
  heads->insert("policy", nn::Linear(4, 5));
  CHECK(heads->keys() == std::vector<std::string>{"policy", "value"});
  CHECK(heads->at<nn::LinearImpl>("policy").weight().shape() == Shape{5, 4});
  CHECK(heads->state_dict()[0].second.shape() == Shape{5, 4});

  CHECK_THROWS_WITH_AS(heads->ptr("critic"),
                       "ModuleDict::operator[]: no key \"critic\" (the keys: \"policy\", \"value\")", IndexError);
  CHECK_THROWS_WITH_AS(heads->at<nn::ReLUImpl>("value"),
                       "ModuleDict::at(\"value\"): the module is a Linear, not a tapegrad::nn::ReLUImpl", TypeError);
  // update checks every item first: one bad key and nothing is added.
  CHECK_THROWS_WITH_AS(heads->update({{"critic", nn::Linear(4, 1).ptr()}, {"a.b", nn::ReLU().ptr()}}),
                       "ModuleDict::update: key \"a.b\" must be non-empty and contain no '.'", ValueError);
  CHECK(heads->size() == 2);
  heads->update({{"critic", nn::Linear(4, 1).ptr()}, {"value", nn::Linear(4, 2).ptr()}});
  CHECK(heads->keys() == std::vector<std::string>{"policy", "value", "critic"});

  nn::ModuleDict twin = heads.clone();
  CHECK(twin->keys() == heads->keys());
  CHECK(twin["critic"].get() != heads["critic"].get());
  CHECK(max_abs_diff(twin->at<nn::LinearImpl>("critic").weight(), heads->at<nn::LinearImpl>("critic").weight()) == 0.0);

  const std::shared_ptr<nn::Module> popped = heads->pop("policy");
  CHECK(popped->as<nn::LinearImpl>()->weight().shape() == Shape{5, 4});
  CHECK(heads->keys() == std::vector<std::string>{"value", "critic"});
  CHECK_THROWS_WITH_AS(heads->pop("policy"), "ModuleDict::pop: no key \"policy\" (the keys: \"value\", \"critic\")",
                       IndexError);
  heads->clear();
  CHECK(heads->empty());
  CHECK(heads->state_dict().empty());
  heads->insert("policy", nn::ReLU());  // a key freed by pop or clear can be used again
  CHECK(heads->size() == 1);
}

TEST_CASE("containers: ParameterList and ParameterDict register parameters that train, load and clone") {
  nn::ParameterList scales;
  const Tensor a = scales->append(full({3}, 2.0));
  scales->append(full({3}, 3.0));
  CHECK(a.requires_grad());
  CHECK(names(scales->named_parameters()) == std::vector<std::string>{"0", "1"});
  CHECK(scales[1].to_vector<float>() == std::vector<float>{3, 3, 3});
  CHECK_THROWS_WITH_AS(scales[2], "ParameterList::operator[]: index 2 is out of range for a list of 2 parameters",
                       IndexError);
  const Tensor not_leaf = a * 2.0;
  CHECK_THROWS_WITH_AS(scales->extend({ones({3}), not_leaf}),
                       "ParameterList::extend: a parameter must be a leaf tensor (detach it first)", GraphError);
  CHECK(scales->size() == 2);  // nothing added

  nn::ParameterDict gains;
  gains->insert("attention", full({3}, 0.5));
  gains->insert("ffn", full({3}, 0.25));
  CHECK(gains->keys() == std::vector<std::string>{"attention", "ffn"});

  // Gradients reach them, and an optimiser over parameters() updates them.
  Tensor loss = sum(scales[0] * scales[1] * gains["attention"]);
  loss.backward();
  CHECK(scales[0].grad().to_vector<float>() == std::vector<float>{1.5f, 1.5f, 1.5f});
  CHECK(gains["attention"].grad().to_vector<float>() == std::vector<float>{6, 6, 6});
  CHECK(!gains["ffn"].grad().defined());
  optim::SGD sgd(gains->parameters(), optim::SGDOptions(0.1));
  sgd.step();
  CHECK(max_abs_diff(gains["attention"], full({3}, 0.5 - 0.1 * 6.0)) < 1e-6);

  // Replacing a key keeps its place; load_state_dict and clone see the entries.
  gains->insert("attention", ones({3}));
  CHECK(gains->keys() == std::vector<std::string>{"attention", "ffn"});
  CHECK(gains->parameters()[0].to_vector<float>() == std::vector<float>{1, 1, 1});
  nn::ParameterDict twin = gains.clone();
  CHECK(twin->keys() == gains->keys());
  {
    NoGradGuard no_grad;
    gains["ffn"].fill_(9.0);
  }
  CHECK(twin["ffn"].to_vector<float>() == std::vector<float>{0.25f, 0.25f, 0.25f});
  twin->load_state_dict(gains->state_dict());
  CHECK(twin["ffn"].to_vector<float>() == std::vector<float>{9, 9, 9});
  nn::ParameterList scales_twin = scales.clone();
  CHECK(scales_twin[1].to_vector<float>() == std::vector<float>{3, 3, 3});
  CHECK(scales_twin[1].requires_grad());

  const Tensor popped = gains->pop("attention");
  CHECK(names(gains->named_parameters()) == std::vector<std::string>{"ffn"});
  CHECK(popped.to_vector<float>() == std::vector<float>{1, 1, 1});
  CHECK_THROWS_WITH_AS(gains["attention"], "ParameterDict::operator[]: no key \"attention\" (the keys: \"ffn\")",
                       IndexError);
  CHECK_THROWS_WITH_AS(gains->insert("", ones({1})),
                       "ParameterDict::insert: key \"\" must be non-empty and contain no '.'", ValueError);
  gains->clear();
  CHECK(gains->parameters().empty());
}

TEST_CASE("containers: a user's module holds a ModuleDict and a ParameterList, with nested names") {
  struct HeadsImpl : nn::Module {
    HeadsImpl() {
      heads = register_module("heads", nn::ModuleDict());
      heads->insert("a", nn::Linear(2, 2));
      bias = register_module("bias", nn::ParameterList());
      bias->append(zeros({2}));
    }
    nn::ModuleDict heads;
    nn::ParameterList bias;
  };
  const auto m = std::make_shared<HeadsImpl>();
  CHECK(names(m->state_dict()) == std::vector<std::string>{"heads.a.weight", "heads.a.bias", "bias.0"});
}

TEST_CASE("containers: refused changes name the container, the value and the reason, and change nothing") {
  nn::ModuleList list;
  list->push_back(nn::ReLU());
  CHECK_THROWS_WITH_AS(list->set(1, nn::Tanh().ptr()),
                       "ModuleList::set: index 1 is out of range for a list of 1 modules", IndexError);
  CHECK_THROWS_WITH_AS(list->set(0, nullptr), "ModuleList::set: the module is null (an empty handle)", ValueError);
  CHECK(list[0]->name() == "ReLU");
  CHECK_THROWS_WITH_AS(nn::ModuleList(std::vector<std::shared_ptr<nn::Module>>{nn::ReLU().ptr(), nullptr}),
                       "ModuleList: the module is null (an empty handle)", ValueError);

  nn::ModuleDict dict;
  CHECK_THROWS_WITH_AS(dict->insert("head", nn::Linear(nullptr)),
                       "ModuleDict::insert: the module is null (an empty handle)", ValueError);
  CHECK(dict->empty());

  nn::ParameterList list_of_parameters;
  CHECK_THROWS_WITH_AS(list_of_parameters->extend({ones({2}), Tensor()}), "ParameterList::extend: an undefined tensor",
                       ValueError);
  CHECK(list_of_parameters->empty());

  nn::ParameterDict gains;
  gains->insert("kept", ones({2}));
  const Tensor not_leaf = ones({2}).requires_grad_(true) * 2.0;
  CHECK_THROWS_WITH_AS(gains->update({{"a", ones({1})}, {"b.c", ones({1})}}),
                       "ParameterDict::update: key \"b.c\" must be non-empty and contain no '.'", ValueError);
  CHECK_THROWS_WITH_AS(gains->update({{"a", ones({1})}, {"b", Tensor()}}),
                       "ParameterDict::update: \"b\" is an undefined tensor", ValueError);
  CHECK_THROWS_WITH_AS(gains->update({{"a", ones({1})}, {"b", not_leaf}}),
                       "ParameterDict::update: \"b\" must be a leaf tensor (detach it first)", GraphError);
  CHECK(gains->keys() == std::vector<std::string>{"kept"});  // "a" was not added by any of them
}

TEST_CASE("containers: a module unregistering a name it does not have gets an IndexError naming it and its names") {
  struct ShrinkingImpl : nn::Module {
    ShrinkingImpl() {
      register_module("layer", nn::Linear(2, 2));
      register_parameter("scale", ones({2}));
    }
    void drop_module(const std::string& name) { unregister_module(name); }
    void drop_parameter(const std::string& name) { unregister_parameter(name); }
  };
  ShrinkingImpl m;
  CHECK_THROWS_WITH_AS(m.drop_module("head"), "Shrinking: no module \"head\" (registered: layer)", IndexError);
  CHECK_THROWS_WITH_AS(m.drop_parameter("bias"), "Shrinking: no parameter \"bias\" (registered: scale)", IndexError);
  m.drop_parameter("scale");
  CHECK_THROWS_WITH_AS(m.drop_parameter("scale"), "Shrinking: no parameter \"scale\" (registered: none)", IndexError);
  CHECK(names(m.state_dict()) == std::vector<std::string>{"layer.weight", "layer.bias"});
}
