// Weights between PyTorch and tapegrad: KeyMap (renames, ignored entries, transposed layouts), the report
// of a load_state_dict that finds several problems, nn::Transformer and an LSTM language model under
// torch's names, and the round trip with python3-torch (tests/torch_interop.py).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "tapegrad/autograd/autograd.h"
#include "tapegrad/io/io.h"
#include "tapegrad/nn/nn.h"
#include "tapegrad/optim/optim.h"
#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::max_abs_diff;
using tapegrad::testing::TempDir;

namespace {

std::vector<std::string> names_of(const NamedTensors& state) {
  std::vector<std::string> names;
  for (const auto& entry : state) names.push_back(entry.first);
  return names;
}

// The sizes tests/torch_interop.py builds its models with.
constexpr std::int64_t kDModel = 16, kHeads = 4, kFeedForward = 32, kEncoderLayers = 2, kDecoderLayers = 2;
constexpr std::int64_t kVocab = 11, kEmbed = 8, kHidden = 12, kLstmLayers = 2;
constexpr double kTolerance = 1e-5;

// torch.nn.Transformer(d_model=16, nhead=4, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=32,
// dropout=0.0, batch_first=True): post-norm, ReLU, eps 1e-5 are both libraries' defaults.
nn::Transformer make_transformer(Generator& gen) {
  return nn::Transformer(
      nn::TransformerOptions(nn::TransformerLayerOptions(kDModel, kHeads).dim_feedforward(kFeedForward).dropout(0.0))
          .num_encoder_layers(kEncoderLayers)
          .num_decoder_layers(kDecoderLayers)
          .generator(&gen));
}

Tensor run_transformer(nn::Transformer& model, const Tensor& src, const Tensor& tgt, const Tensor& padding) {
  const auto masks = nn::AttentionForwardOptions().key_padding_mask(padding);
  return model(src, tgt, masks, nn::AttentionForwardOptions(), masks);
}

// The LSTM language model of tests/torch_interop.py, with the same child names.
class LstmLanguageModelImpl : public nn::Module {
 public:
  explicit LstmLanguageModelImpl(Generator& gen)
      : embedding_(register_module("embedding", nn::Embedding(nn::EmbeddingOptions(kVocab, kEmbed).generator(&gen)))),
        lstm_(register_module(
            "lstm",
            nn::LSTM(nn::RecurrentOptions(kEmbed, kHidden).num_layers(kLstmLayers).batch_first(true).generator(&gen)))),
        head_(register_module("head", nn::Linear(nn::LinearOptions(kHidden, kVocab).generator(&gen)))) {}
  Tensor forward(const Tensor& tokens) { return head_(lstm_(embedding_(tokens)).output); }

 private:
  nn::Embedding embedding_;
  nn::LSTM lstm_;
  nn::Linear head_;
};
TAPEGRAD_MODULE(LstmLanguageModel);

// A few Adam steps, so the weights tapegrad hands back are its own, not PyTorch's initial ones.
void train_transformer(nn::Transformer& model, const Tensor& src, const Tensor& tgt, const Tensor& padding,
                       Generator& gen) {
  const Tensor target = randn(tgt.shape(), gen);
  optim::Adam adam(model->parameters(), optim::AdamOptions(1e-2));
  for (int step = 0; step < 5; ++step) {
    adam.zero_grad();
    nn::mse_loss(run_transformer(model, src, tgt, padding), target).backward();
    adam.step();
  }
}

void train_lm(LstmLanguageModel& model, const Tensor& tokens) {
  optim::Adam adam(model->parameters(), optim::AdamOptions(1e-2));
  const std::int64_t B = tokens.shape()[0], T = tokens.shape()[1];
  const Tensor inputs = tokens.narrow(1, 0, T - 1), targets = tokens.narrow(1, 1, T - 1).reshape({B * (T - 1)});
  for (int step = 0; step < 5; ++step) {
    adam.zero_grad();
    nn::cross_entropy(model(inputs).reshape({B * (T - 1), kVocab}), targets).backward();
    adam.step();
  }
}

}  // namespace

TEST_CASE("key map: renames match whole path components and undo in reverse order") {
  const nn::KeyMap map = nn::KeyMap().rename("linear1", "ff.fc1").rename("encoder.block", "encoder.layers");
  CHECK(map.to_module_key("encoder.block.0.linear1.weight") == "encoder.layers.0.ff.fc1.weight");
  CHECK(map.to_module_key("encoder.block.0.linear10.weight") == "encoder.layers.0.linear10.weight");
  CHECK(map.to_module_key("my_encoder.block.x") == "my_encoder.block.x");
  CHECK(map.to_module_key("linear1") == "ff.fc1");
  CHECK(map.to_source_key("encoder.layers.0.ff.fc1.weight") == "encoder.block.0.linear1.weight");
  // Renames chain: the second sees the first's result, and to_source undoes the second first.
  const nn::KeyMap chain = nn::KeyMap().rename("a", "b").rename("b.c", "d");
  CHECK(chain.to_module_key("a.c.w") == "d.w");
  CHECK(chain.to_source_key("d.w") == "a.c.w");
  CHECK_THROWS_WITH_AS(nn::KeyMap().rename("a..b", "c"), "KeyMap::rename: \"a..b\" has an empty path component",
                       ValueError);
  CHECK_THROWS_AS(nn::KeyMap().rename("a", ".c"), ValueError);
}

TEST_CASE("key map: glob patterns, a function with and without an inverse") {
  CHECK(nn::glob_match("*.kernel", "dense.kernel"));
  CHECK(nn::glob_match("*.kernel", "a.b.kernel"));
  CHECK_FALSE(nn::glob_match("*.kernel", "dense.kernel.x"));
  CHECK(nn::glob_match("layers.*.w*", "layers.3.weight"));
  CHECK(nn::glob_match("*", ""));
  CHECK_FALSE(nn::glob_match("a*b", "acbc"));
  CHECK(nn::glob_match("a*b*c", "aXbYbZc"));
  const nn::KeyMap upper = nn::KeyMap().map([](const std::string& key) { return "model." + key; });
  CHECK(upper.to_module_key("w") == "model.w");
  CHECK_THROWS_WITH_AS(upper.to_source_key("model.w"), doctest::Contains("the map's function has no inverse"),
                       ValueError);
  const nn::KeyMap both = nn::KeyMap().map([](const std::string& key) { return "model." + key; },
                                           [](const std::string& key) { return key.substr(6); });
  CHECK(both.to_source_key("model.w") == "w");
  CHECK_THROWS_AS(nn::KeyMap().map(nullptr), ValueError);
}

TEST_CASE("key map: a foreign checkpoint with other names, a transposed kernel and extra entries loads") {
  // A Linear stored as another framework's dense layer: "dense.kernel" (in, out) and "dense.bias", plus
  // a counter the module does not have.
  Generator gen(3);
  nn::Sequential model(nn::Linear(nn::LinearOptions(3, 2).generator(&gen)));
  const Tensor kernel = randn({3, 2}, gen), bias = randn({2}, gen);
  const NamedTensors foreign = {{"dense.kernel", kernel}, {"dense.bias", bias}, {"dense.steps", zeros({1})}};
  const nn::KeyMap map = nn::KeyMap()
                             .rename("dense.kernel", "0.weight")
                             .rename("dense.bias", "0.bias")
                             .ignore("*.steps")
                             .transpose("0.weight");
  const nn::IncompatibleKeys result = model->load_state_dict(foreign, nn::LoadOptions().key_map(map));
  CHECK(result.empty());
  const NamedTensors state = model->state_dict();
  CHECK(state[0].second.to_vector<float>() == kernel.transpose(0, 1).contiguous().to_vector<float>());
  CHECK(state[1].second.to_vector<float>() == bias.to_vector<float>());
  // And back out under the foreign names and layout.
  const NamedTensors out = map.to_source(state);
  CHECK(names_of(out) == std::vector<std::string>{"dense.kernel", "dense.bias"});
  CHECK(out[0].second.shape() == Shape{3, 2});
  CHECK(out[0].second.to_vector<float>() == kernel.to_vector<float>());
  // A transposed entry must be 2-D.
  const NamedTensors wrong = {{"dense.kernel", zeros({6})}, {"dense.bias", bias}};
  CHECK_THROWS_WITH_AS(model->load_state_dict(wrong, nn::LoadOptions().key_map(map)),
                       "load_state_dict: \"dense.kernel\" (\"0.weight\" in the module) is to be transposed but has "
                       "shape (6); only 2-D entries can be",
                       ShapeError);
}

TEST_CASE("load_state_dict: every problem reported at once, nothing copied") {
  Generator gen(0);
  nn::Sequential model(nn::Linear(nn::LinearOptions(3, 2).generator(&gen)), nn::LayerNorm(2));
  const NamedTensors state = model->state_dict();  // 0.weight 0.bias 1.weight 1.bias
  const std::vector<float> before = state[0].second.to_vector<float>();
  NamedTensors bad = {
      {"0.weight", zeros({3, 2})}, {"0.bias", tensor({1, 2}, kInt64)}, {"1.weight", ones({2})}, {"extra", zeros({1})}};
  CHECK_THROWS_WITH_AS(model->load_state_dict(bad),
                       "load_state_dict: 4 problems:\n"
                       "  \"0.weight\" has shape (3,2) in the state but (2,3) in the module\n"
                       "  \"0.bias\" is int64 in the state but float32 in the module\n"
                       "  missing entry \"1.bias\"\n"
                       "  unexpected entry \"extra\"",
                       ValueError);
  CHECK(model->state_dict()[0].second.to_vector<float>() == before);
  CHECK(model->state_dict()[2].second.to_vector<float>() == std::vector<float>{1.0f, 1.0f});
  // Not strict: names that do not match are returned, shape and dtype problems still throw.
  CHECK_THROWS_WITH_AS(model->load_state_dict(bad, /*strict=*/false),
                       "load_state_dict: 2 problems:\n"
                       "  \"0.weight\" has shape (3,2) in the state but (2,3) in the module\n"
                       "  \"0.bias\" is int64 in the state but float32 in the module",
                       ValueError);
  const NamedTensors partial = {{"1.weight", full({2}, 3.0)}, {"extra", zeros({1})}, {"more", zeros({1})}};
  const nn::IncompatibleKeys result = model->load_state_dict(partial, /*strict=*/false);
  CHECK(result.missing_keys == std::vector<std::string>{"0.weight", "0.bias", "1.bias"});
  CHECK(result.unexpected_keys == std::vector<std::string>{"extra", "more"});
  CHECK(model->state_dict()[2].second.to_vector<float>() == std::vector<float>{3.0f, 3.0f});
  // Two names the map sends to one entry.
  const nn::KeyMap merge = nn::KeyMap().rename("a", "0").rename("b", "0");
  const NamedTensors two = {{"a.bias", zeros({2})}, {"b.bias", zeros({2})}};
  CHECK_THROWS_WITH_AS(model->load_state_dict(two, nn::LoadOptions().key_map(merge).strict(false)),
                       "load_state_dict: the entries \"a.bias\" and \"b.bias\" both map to \"0.bias\"", ValueError);
  // A missing entry under a map is named both ways.
  const nn::KeyMap renamed = nn::KeyMap().rename("dense", "0");
  const NamedTensors no_bias = {{"dense.weight", zeros({2, 3})}, {"1.weight", ones({2})}, {"1.bias", zeros({2})}};
  CHECK_THROWS_WITH_AS(model->load_state_dict(no_bias, nn::LoadOptions().key_map(renamed)),
                       "load_state_dict: missing entry \"0.bias\" (\"dense.bias\" in the state's names)", ValueError);
}

TEST_CASE("torch names: nn::Transformer's state dict under pytorch_key_map is torch.nn.Transformer's") {
  Generator gen(0);
  nn::Transformer model = make_transformer(gen);
  const NamedTensors torch_state = nn::pytorch_key_map().to_source(model->state_dict());
  const std::vector<std::string> names = names_of(torch_state);
  // torch.nn.Transformer at these sizes: 12 entries per encoder layer, 18 per decoder layer, two final norms.
  CHECK(names.size() == 2 * 12 + 2 + 2 * 18 + 2);
  for (const char* name :
       {"encoder.layers.0.self_attn.in_proj_weight", "encoder.layers.1.linear1.weight", "encoder.layers.1.linear2.bias",
        "encoder.norm.weight", "decoder.layers.0.self_attn.in_proj_bias",
        "decoder.layers.1.multihead_attn.in_proj_weight", "decoder.layers.1.multihead_attn.out_proj.bias",
        "decoder.layers.1.norm3.weight", "decoder.norm.bias"}) {
    CAPTURE(name);
    CHECK(std::find(names.begin(), names.end(), name) != names.end());
  }
  // Saved under torch's names and loaded back, the model computes the same outputs.
  Generator other_gen(1);
  nn::Transformer copy = make_transformer(other_gen);
  const Tensor src = randn({2, 5, kDModel}, gen), tgt = randn({2, 4, kDModel}, gen);
  const Tensor padding = zeros({2, 5}, kBool);
  CHECK(max_abs_diff(run_transformer(model, src, tgt, padding), run_transformer(copy, src, tgt, padding)) > 0.1);
  CHECK(copy->load_state_dict(torch_state, nn::LoadOptions().key_map(nn::pytorch_key_map())).empty());
  CHECK(max_abs_diff(run_transformer(model, src, tgt, padding), run_transformer(copy, src, tgt, padding)) == 0.0);
}

// With TAPEGRAD_TORCH_DIR set (CTest sets it after tests/torch_interop.py has exported PyTorch's models there),
// loads PyTorch's weights, checks tapegrad reproduces PyTorch's outputs, trains a few steps and writes the
// weights under PyTorch's names with tapegrad's outputs for the script's check. Without it the same runs on
// models tapegrad initialises, and the files go to a temporary directory.
TEST_CASE("torch interop: load PyTorch's models then train and write them back for PyTorch") {
  TempDir temp;
  const char* env = std::getenv("TAPEGRAD_TORCH_DIR");
  const bool with_torch = env != nullptr;
  const std::string dir = with_torch ? std::string(env) : temp.str();
  const nn::LoadOptions from_torch = nn::LoadOptions().key_map(nn::pytorch_key_map());
  Generator gen(7);

  nn::Transformer transformer = make_transformer(gen);
  Tensor src = randn({2, 5, kDModel}, gen), tgt = randn({2, 4, kDModel}, gen);
  Tensor padding = zeros({2, 5}, kBool);
  LstmLanguageModel lm(gen);
  Tensor tokens = randint(0, kVocab, {3, 7}, gen);
  if (with_torch) {
    const NamedTensors torch_transformer = io::load_safetensors(dir + "/torch_transformer.safetensors").tensors;
    CHECK(transformer->load_state_dict(torch_transformer, from_torch).empty());
    const io::SafetensorsFile io = io::load_safetensors(dir + "/torch_transformer_io.safetensors");
    const auto get = [](const io::SafetensorsFile& file, const std::string& name) {
      for (const auto& [key, value] : file.tensors)
        if (key == name) return value;
      FAIL("no entry " << name);
      return Tensor();
    };
    src = get(io, "src");
    tgt = get(io, "tgt");
    padding = get(io, "src_key_padding_mask");
    const double transformer_difference =
        max_abs_diff(run_transformer(transformer, src, tgt, padding), get(io, "output"));
    MESSAGE("nn.Transformer: tapegrad's output differs from PyTorch's by " << transformer_difference);
    CHECK(transformer_difference <= kTolerance);

    CHECK(lm->load_state_dict(io::load_safetensors(dir + "/torch_lstm.safetensors").tensors, from_torch).empty());
    const io::SafetensorsFile lm_io = io::load_safetensors(dir + "/torch_lstm_io.safetensors");
    tokens = get(lm_io, "tokens");
    const double lm_difference = max_abs_diff(lm(tokens), get(lm_io, "logits"));
    MESSAGE("LSTM language model: tapegrad's logits differ from PyTorch's by " << lm_difference);
    CHECK(lm_difference <= kTolerance);
  }
  padding = padding.clone();
  {
    NoGradGuard guard;
    padding.narrow(0, 1, 1).narrow(1, 3, 2).fill_(1.0);  // as the script pads: row 1 from position 3
  }
  train_transformer(transformer, src, tgt, padding, gen);
  train_lm(lm, tokens);

  NoGradGuard guard;
  io::save_safetensors(dir + "/tapegrad_transformer.safetensors",
                       nn::pytorch_key_map().to_source(transformer->state_dict()));
  io::save_safetensors(dir + "/tapegrad_transformer_io.safetensors",
                       {{"src", src},
                        {"tgt", tgt},
                        {"src_key_padding_mask", padding},
                        {"output", run_transformer(transformer, src, tgt, padding)}});
  io::save_safetensors(dir + "/tapegrad_lstm.safetensors", nn::pytorch_key_map().to_source(lm->state_dict()));
  io::save_safetensors(dir + "/tapegrad_lstm_io.safetensors", {{"tokens", tokens}, {"logits", lm(tokens)}});
  // What the script reads back is what was written.
  nn::Transformer reloaded = make_transformer(gen);
  reloaded->load_state_dict(io::load_safetensors(dir + "/tapegrad_transformer.safetensors").tensors, from_torch);
  CHECK(max_abs_diff(run_transformer(reloaded, src, tgt, padding), run_transformer(transformer, src, tgt, padding)) ==
        0.0);
}
