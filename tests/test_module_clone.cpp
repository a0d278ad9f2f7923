// Module::clone and ModuleHolder::clone: deep copies built as the original was, with its values, dtype,
// flags, generator states and modes, sharing nothing.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "tapegrad/autograd/autograd.h"
#include "tapegrad/nn/nn.h"
#include "tests/testing.h"

using namespace tapegrad;

namespace {

std::vector<float> flat(const NamedTensors& state) {
  std::vector<float> out;
  for (const auto& [name, t] : state)
    for (const float v : t.to(kFloat32).to_vector<float>()) out.push_back(v);
  return out;
}

const void* address(const Tensor& t) {
  if (t.dtype() == kFloat32) return t.data_ptr<float>();
  if (t.dtype() == kFloat64) return t.data_ptr<double>();
  return t.data_ptr<std::int64_t>();
}

bool shares_storage(const nn::Module& a, const nn::Module& b) {
  const NamedTensors x = a.state_dict(), y = b.state_dict();
  for (const auto& [n1, t1] : x)
    for (const auto& [n2, t2] : y)
      if (address(t1) == address(t2)) return true;
  return false;
}

class BlockImpl : public nn::Module {
 public:
  BlockImpl(std::int64_t d, Generator& gen)
      : fc_(register_module("fc", nn::Linear(nn::LinearOptions(d, d).generator(&gen)))),
        drop_(register_module("drop", nn::Dropout(nn::DropoutOptions(0.5).generator(&gen)))) {
    scale_ = register_parameter("scale", ones({d}));
    steps_ = register_buffer("steps", zeros({1}, kInt64));
  }
  Tensor forward(const Tensor& x) { return drop_(fc_(x)) * scale_; }

 private:
  nn::Linear fc_;
  nn::Dropout drop_;
  Tensor scale_, steps_;
};
TAPEGRAD_MODULE(Block);

}  // namespace

TEST_CASE("module clone: a Linear's copy has equal values and nothing shared") {
  manual_seed(3);
  nn::Linear fc(4, 3);
  const std::string generator_before = default_generator().state();
  nn::Linear twin = fc.clone();
  CHECK(default_generator().state() == generator_before);  // the copy's construction drew nothing for good
  CHECK(flat(twin->state_dict()) == flat(fc->state_dict()));
  CHECK_FALSE(shares_storage(*twin, *fc));
  {
    NoGradGuard guard;
    twin->weight().fill_(7.0);
  }
  CHECK(fc->weight().max().item() < 7.0);
  const Tensor x = randn({2, 4});
  fc(x).sum().backward();
  CHECK(fc->weight().grad().defined());
  CHECK_FALSE(twin->weight().grad().defined());
}

TEST_CASE("module clone: module arguments are cloned in turn, a stack keeps its structure and mode") {
  manual_seed(0);
  nn::Sequential net(nn::Linear(4, 8), nn::GELU(), nn::Linear(8, 2));
  net->eval();
  nn::Sequential twin = net.clone();
  CHECK_FALSE(shares_storage(*twin, *net));
  CHECK_FALSE(twin->is_training());
  const Tensor x = randn({3, 4});
  CHECK((twin(x) - net(x)).abs().max().item() == 0.0);

  Generator gen(1);
  nn::TransformerEncoder encoder(testing::layer_options(16, 4, 32, /*dropout=*/0.1).generator(&gen), 2);
  encoder->eval();
  nn::TransformerEncoder copy = encoder.clone();
  const Tensor h = randn({2, 5, 16});
  CHECK((copy(h) - encoder(h)).abs().max().item() == 0.0);
  CHECK(copy->named_parameters().size() == encoder->named_parameters().size());
  CHECK_FALSE(shares_storage(*copy, *encoder));
}

TEST_CASE("module clone: a user module keeps its buffers, frozen flags, dtype and dropout stream") {
  Generator gen(5);
  Block block(6, gen);
  block->named_parameters()[0].second.requires_grad_(false);  // fc.weight frozen
  {
    NoGradGuard guard;
    block->named_buffers()[0].second.fill_(42.0);
  }
  Block twin = block.clone();
  CHECK_FALSE(twin->named_parameters()[0].second.requires_grad());
  CHECK(twin->named_parameters()[1].second.requires_grad());
  CHECK(twin->named_buffers()[0].second.to_vector<std::int64_t>() == std::vector<std::int64_t>{42});
  // Training mode with dropout: the copy's generator is where the original's is, so both draw the same mask.
  const Tensor x = randn({4, 6});
  CHECK((twin(x) - block(x)).abs().max().item() == 0.0);
  // float64 modules give float64 copies.
  block->to(kFloat64);
  Block wide = block.clone();
  CHECK(wide->named_parameters()[1].second.dtype() == kFloat64);
  CHECK(flat(wide->state_dict()) == flat(block->state_dict()));
}

TEST_CASE("module clone: a module not made through a handle is refused with a TypeError") {
  auto raw = std::make_shared<nn::LinearImpl>(nn::LinearOptions(2, 2));
  CHECK_THROWS_WITH_AS(raw->clone(), doctest::Contains("Linear: clone() needs a module made through its handle"),
                       TypeError);
  // Its children, made through handles, can still be cloned.
  nn::Sequential net(nn::Linear(2, 2));
  CHECK_NOTHROW(net->at(0)->clone());
}
