// Over 400 lines: one runner per fixture case, kept beside the fixture's loader.
// tapegrad against PyTorch 1.13, in float64: values and gradients of MultiHeadAttention (self,
// causal, key padding, cross, cross with kv_dim, grouped-query and multi-query heads, the last
// against the attention written with PyTorch's ops), scaled_dot_product_attention (scales, masks,
// causal alignments; also against PyTorch's ops), einsum, embedding_bag, mse_loss, the
// convolutions, pools, unfold and fold, batch_norm,
// TransformerEncoderLayer and TransformerDecoderLayer (pre- and post-norm, ReLU and GELU), LayerNorm, FeedForward and
// MixtureOfExperts (output and auxiliary losses), RNN/LSTM/GRU and their cells, and, against their
// formulas written with PyTorch's ops, RMSNorm, rotary and sinusoidal positions, multi-head latent
// attention, word2vec's losses, the information measures and the pointer sentinel, from the golden
// fixture tests/data/torch_reference.json written by tests/torch_reference/make_reference.py.
//
// Each case holds the module's configuration, its inputs, every parameter under tapegrad's
// state_dict name, PyTorch's outputs, a fixed cotangent per differentiable output, and the
// gradients of loss = sum_o sum(o * cotangent_o) with respect to every floating-point input and
// every parameter. Here the module is built, converted to float64, loaded with those parameters,
// run forward and backward, and every output and gradient must agree with PyTorch's to
// |tapegrad - torch| <= 1e-10 + 1e-10 * |torch|, element by element (a case may loosen its input
// gradients' relative bound with "grad_rel_tol" in its config; make_reference.py says why).

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iomanip>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tapegrad/nn/nn.h"
#include "tests/fixture_tensor.h"

using namespace tapegrad;
using json = nlohmann::json;
using tapegrad::testing::dtype_of;
using tapegrad::testing::shape_of;
using tapegrad::testing::tensor_from;

namespace {

constexpr double kAbsTol = 1e-10;
constexpr double kRelTol = 1e-10;

// The whole fixture, read once.
const json& fixture() {
  static const json data = tapegrad::testing::read_fixture("torch_reference.json", "make_reference.py");
  return data;
}

const json& fixture_case(const std::string& name) {
  const json& cases = fixture().at("cases");
  if (!cases.contains(name)) throw ValueError("torch_reference.json has no case \"" + name + "\"");
  return cases.at(name);
}

// ---------------------------------------------------------------- fixture tensors

// (i, j, ...) of a row-major flat index.
std::string multi_index(std::int64_t flat, const Shape& shape) {
  std::vector<std::int64_t> index(static_cast<std::size_t>(shape.size()));
  for (int axis = shape.size() - 1; axis >= 0; --axis) {
    index[static_cast<std::size_t>(axis)] = flat % shape[axis];
    flat /= shape[axis];
  }
  return Shape(index).str();
}

// ---------------------------------------------------------------- comparison

// One tensor compared with PyTorch's. message names the case, the tensor and the worst element.
struct Comparison {
  bool ok = true;
  std::string tensor;  // e.g. "param_grads[in_proj_weight]"
  std::string message;
};

// got against expected, element by element: |got - expected| <= kAbsTol + kRelTol * |expected|.
// An undefined got (no gradient reached it) counts as zeros, like PyTorch's None gradient.
Comparison compare(const std::string& case_name, const std::string& what, const Tensor& got, const json& expected,
                   double rel_tol = kRelTol) {
  Comparison result;
  result.tensor = what;
  std::ostringstream msg;
  msg << std::setprecision(17) << "case " << case_name << ", " << what;
  const Shape shape = shape_of(expected);
  if (got.defined() && got.shape() != shape) {
    result.ok = false;
    msg << ": tapegrad's shape " << got.shape().str() << " differs from PyTorch's " << shape.str();
    result.message = msg.str();
    return result;
  }
  const bool integral = dtype_of(expected) != "float64";
  const std::vector<double> want =
      integral ? tensor_from(expected).to_vector<double>() : expected.at("data").get<std::vector<double>>();
  const std::vector<double> have = got.defined() ? got.to_vector<double>() : std::vector<double>(want.size(), 0.0);
  // The worst element is the one furthest outside its tolerance (NaN counts as infinitely far).
  std::int64_t worst = -1, bad = 0;
  double worst_excess = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double diff = std::abs(have[i] - want[i]);
    const double allowed = integral ? 0.0 : kAbsTol + rel_tol * std::abs(want[i]);
    const double excess = std::isnan(diff) ? INFINITY : diff - allowed;
    if (!(diff <= allowed)) ++bad;
    if (worst < 0 || excess > worst_excess) {
      worst = static_cast<std::int64_t>(i);
      worst_excess = excess;
    }
  }
  result.ok = bad == 0;
  msg << " " << shape.str() << (got.defined() ? "" : " (tapegrad: undefined, compared as zeros)");
  if (worst >= 0) {
    const std::size_t w = static_cast<std::size_t>(worst);
    msg << ": " << bad << " of " << want.size() << " elements outside tolerance; worst element " << worst << " "
        << multi_index(worst, shape) << ": tapegrad " << have[w] << ", PyTorch " << want[w] << ", |diff| "
        << std::abs(have[w] - want[w]) << " (allowed " << (integral ? 0.0 : kAbsTol + rel_tol * std::abs(want[w]))
        << ")";
  }
  result.message = msg.str();
  return result;
}

// ---------------------------------------------------------------- building the modules

using TensorMap = std::map<std::string, Tensor>;

struct BuiltModule {
  std::shared_ptr<nn::Module> module;
  std::function<TensorMap(const TensorMap& inputs)> forward;  // inputs by fixture name -> outputs by name
};

// A list of integers of the config (a window option).
Dims dims_of(const json& config, const std::string& key) {
  return Dims(config.at(key).get<std::vector<std::int64_t>>());
}

Tensor optional_input(const TensorMap& inputs, const std::string& name) {
  auto it = inputs.find(name);
  return it == inputs.end() ? Tensor() : it->second;
}

nn::Activation activation_of(const std::string& name) {
  if (name == "relu") return nn::Activation::ReLU;
  if (name == "gelu") return nn::Activation::GELU;
  throw ValueError("torch_reference.json: unknown activation \"" + name + "\"");
}

nn::BagMode bag_mode_of(const std::string& name) {
  if (name == "sum") return nn::BagMode::Sum;
  if (name == "mean") return nn::BagMode::Mean;
  throw ValueError("torch_reference.json: unknown embedding_bag mode \"" + name + "\"");
}

nn::Reduction reduction_of(const std::string& name) {
  if (name == "none") return nn::Reduction::None;
  if (name == "mean") return nn::Reduction::Mean;
  if (name == "sum") return nn::Reduction::Sum;
  throw ValueError("torch_reference.json: unknown reduction \"" + name + "\"");
}

nn::TransformerLayerOptions layer_options(const json& config, Generator& gen) {
  return nn::TransformerLayerOptions(config.at("d_model").get<std::int64_t>(),
                                     config.at("num_heads").get<std::int64_t>())
      .dim_feedforward(config.at("ff_hidden").get<std::int64_t>())
      .activation(activation_of(config.at("activation").get<std::string>()))
      .norm_first(config.at("norm_first").get<bool>())
      .layer_norm_eps(config.at("eps").get<double>())
      .dropout(0.0)
      .generator(&gen);
}

// The tapegrad module a case describes, with the forward that maps its fixture inputs to outputs.
// Parameters are still the constructor's random ones (float32) here.
BuiltModule build(const std::string& kind, const json& config, Generator& gen) {
  BuiltModule built;
  if (kind == "MultiHeadAttention") {
    nn::MultiHeadAttention attn{nn::MultiHeadAttentionOptions(config.at("d_model").get<std::int64_t>(),
                                                              config.at("num_heads").get<std::int64_t>())
                                    .cross_attention(config.at("cross_attention").get<bool>())
                                    .kdim(config.at("kv_dim").get<std::int64_t>())
                                    .num_kv_heads(config.value("num_kv_heads", std::int64_t{0}))
                                    .generator(&gen)};
    const bool is_causal = config.at("is_causal").get<bool>();
    const bool need_weights = config.at("need_weights").get<bool>();
    built.module = attn.ptr();
    built.forward = [attn, is_causal, need_weights](const TensorMap& in) {
      const auto forward =
          nn::AttentionForwardOptions()
              .is_causal(is_causal)
              .need_weights(need_weights)
              .key_padding_mask(optional_input(in, "key_padding_mask"));  // Bool (B, Tk), true = padding
      // query: (B, Tq, d), key_value: (B, Tk, kv_dim) or undefined -> output (B, Tq, d), weights (B, H, Tq, Tk)
      nn::AttentionResult r = attn(in.at("query"), optional_input(in, "key_value"), forward);
      TensorMap out{{"output", r.output}};
      if (need_weights) out["weights"] = r.weights;
      return out;
    };
  } else if (kind == "scaled_dot_product_attention") {
    built.module = std::make_shared<nn::Module>();  // a function: no parameters
    nn::AttentionForwardOptions options;
    options.is_causal(config.at("is_causal").get<bool>())
        .causal_alignment(config.at("bottom_right").get<bool>() ? nn::CausalAlignment::BottomRight
                                                                : nn::CausalAlignment::TopLeft)
        .need_weights(config.at("need_weights").get<bool>());
    if (!config.at("scale").is_null()) options.scale(config.at("scale").get<double>());
    built.forward = [options](const TensorMap& in) {
      // q: (..., Tq, D), k: (..., Tk, D), v: (..., Tk, Dv), attn_mask: Bool (keep) or float (added), broadcast
      // to the scores -> output (..., Tq, Dv), weights (..., Tq, Tk)
      nn::AttentionForwardOptions o = options;
      o.attn_mask(optional_input(in, "attn_mask"));
      nn::AttentionResult r = nn::scaled_dot_product_attention(in.at("q"), in.at("k"), in.at("v"), o);
      TensorMap out{{"output", r.output}};
      if (o.need_weights()) out["weights"] = r.weights;
      return out;
    };
  } else if (kind == "einsum") {
    built.module = std::make_shared<nn::Module>();
    built.forward = [equation = config.at("equation").get<std::string>()](const TensorMap& in) {
      TensorList operands;  // x0, x1, ... (fewer than ten: the map's order is theirs)
      for (const auto& [name, t] : in) operands.push_back(t);
      return TensorMap{{"output", einsum(equation, operands)}};
    };
  } else if (kind == "embedding_bag") {
    built.module = std::make_shared<nn::Module>();
    const nn::BagMode mode = bag_mode_of(config.at("mode").get<std::string>());
    built.forward = [mode](const TensorMap& in) {
      // weight: (V, D), indices: Int64 (N), offsets: Int64 (B), per_sample_weights: (N) or undefined -> (B, D)
      return TensorMap{{"output", nn::embedding_bag(in.at("weight"), in.at("indices"), in.at("offsets"), mode,
                                                    optional_input(in, "per_sample_weights"))}};
    };
  } else if (kind == "mse_loss") {
    built.module = std::make_shared<nn::Module>();
    const nn::Reduction r = reduction_of(config.at("reduction").get<std::string>());
    built.forward = [r](const TensorMap& in) {
      return TensorMap{{"output", nn::mse_loss(in.at("input"), in.at("target"), r)}};
    };
  } else if (kind == "loss") {
    built.module = std::make_shared<nn::Module>();
    built.forward = [config](const TensorMap& in) {
      const std::string name = config.at("name").get<std::string>();
      const nn::Reduction r = reduction_of(config.at("reduction").get<std::string>());
      const Tensor& input = in.at("input");
      const Tensor& target = in.at("target");
      Tensor out;
      if (name == "hinge_embedding_loss") {
        out = nn::hinge_embedding_loss(input, target, config.at("margin").get<double>(), r);
      } else if (name == "multi_margin_loss") {  // input (N, C) or (C), target Int64 (N) or ()
        out = nn::multi_margin_loss(input, target,
                                    nn::MultiMarginLossOptions()
                                        .p(config.value<std::int64_t>("p", 1))
                                        .margin(config.value("margin", 1.0))
                                        .weight(optional_input(in, "weight"))
                                        .reduction(r));
      } else if (name == "multilabel_margin_loss") {  // target Int64 of the input's shape, rows ended by -1
        out = nn::multilabel_margin_loss(input, target, r);
      } else if (name == "multilabel_soft_margin_loss") {
        out = nn::multilabel_soft_margin_loss(input, target, r, optional_input(in, "weight"));
      } else if (name == "poisson_nll_loss") {
        out = nn::poisson_nll_loss(input, target,
                                   nn::PoissonNLLLossOptions()
                                       .log_input(config.at("log_input").get<bool>())
                                       .full(config.at("full").get<bool>())
                                       .eps(config.value("eps", 1e-8))
                                       .reduction(r));
      } else if (name == "gaussian_nll_loss") {  // var: the input's shape, or without / with 1 as its last axis
        out = nn::gaussian_nll_loss(
            input, target, in.at("var"),
            nn::GaussianNLLLossOptions().full(config.value("full", false)).eps(config.value("eps", 1e-6)).reduction(r));
      } else {
        throw ValueError("torch_reference.json: unknown loss \"" + name + "\"");
      }
      return TensorMap{{"output", out}};
    };
  } else if (kind == "ctc_loss") {
    built.module = std::make_shared<nn::Module>();
    const auto options = nn::CTCLossOptions()
                             .blank(config.at("blank").get<std::int64_t>())
                             .reduction(reduction_of(config.at("reduction").get<std::string>()))
                             .zero_infinity(config.at("zero_infinity").get<bool>());
    built.forward = [options](const TensorMap& in) {
      // logits: (T, N, C) or (T, C); targets: Int64 (N, S) padded or concatenated; lengths: Int64 (N) or ()
      const Tensor& logits = in.at("logits");
      return TensorMap{{"output", nn::ctc_loss(log_softmax(logits, logits.dim() - 1), in.at("targets"),
                                               in.at("input_lengths"), in.at("target_lengths"), options)}};
    };
  } else if (kind == "grid_sample") {
    built.module = std::make_shared<nn::Module>();
    built.forward = [config](const TensorMap& in) {
      namespace F = nn::functional;
      const std::string mode = config.at("mode").get<std::string>(),
                        padding = config.at("padding_mode").get<std::string>();
      const bool align = config.at("align_corners").get<bool>();
      const auto options = F::GridSampleOptions()
                               .mode(mode == "nearest" ? nn::GridSampleMode::Nearest : nn::GridSampleMode::Bilinear)
                               .padding_mode(padding == "border"       ? nn::GridSamplePadding::Border
                                             : padding == "reflection" ? nn::GridSamplePadding::Reflection
                                                                       : nn::GridSamplePadding::Zeros)
                               .align_corners(align);
      const Tensor& x = in.at("x");  // (N, C, H, W)
      if (!config.at("affine").get<bool>())
        return TensorMap{{"output", F::grid_sample(x, in.at("grid"), options)}};  // grid: (N, Ho, Wo, 2)
      const Dims out = dims_of(config, "out_hw");                                 // theta: (N, 2, 3)
      const Tensor grid = F::affine_grid(in.at("theta"), {x.size(0), x.size(1), out[0], out[1]}, align);
      return TensorMap{{"output", F::grid_sample(x, grid, options)}, {"grid", grid}};
    };
  } else if (kind == "conv") {
    built.module = std::make_shared<nn::Module>();
    built.forward = [config](const TensorMap& in) {
      // x: (N, C, [[D,] H,] W) or unbatched, weight: (out, C / groups, [[kd,] kh,] kw), bias: (out) or undefined
      const int dims = config.at("dims").get<int>();
      const auto conv = dims == 1   ? nn::functional::conv1d
                        : dims == 2 ? nn::functional::conv2d
                                    : nn::functional::conv3d;
      const json& padding = config.at("padding");  // a list, or torch's "same" / "valid"
      const nn::ConvPadding pad = !padding.is_string()                   ? nn::ConvPadding(dims_of(config, "padding"))
                                  : padding.get<std::string>() == "same" ? nn::ConvPadding(nn::kSame)
                                                                         : nn::ConvPadding(nn::kValid);
      return TensorMap{
          {"output", conv(in.at("x"), in.at("weight"), optional_input(in, "bias"), dims_of(config, "stride"), pad,
                          dims_of(config, "dilation"), config.at("groups").get<std::int64_t>())}};
    };
  } else if (kind == "pad") {
    built.module = std::make_shared<nn::Module>();
    built.forward = [config](const TensorMap& in) {
      const std::string mode = config.at("mode").get<std::string>();
      const nn::PadMode m = mode == "reflect"     ? nn::PadMode::Reflect
                            : mode == "replicate" ? nn::PadMode::Replicate
                                                  : nn::PadMode::Circular;
      return TensorMap{
          {"output", nn::functional::pad(in.at("x"), config.at("pads").get<std::vector<std::int64_t>>(), m)}};
    };
  } else if (kind == "conv_transpose") {
    built.module = std::make_shared<nn::Module>();
    built.forward = [config](const TensorMap& in) {
      // x: (N, in, [[D,] H,] W) or unbatched, weight: (in, out / groups, [[kd,] kh,] kw), bias: (out) or undefined
      const int dims = config.at("dims").get<int>();
      const auto conv = dims == 1   ? nn::functional::conv_transpose1d
                        : dims == 2 ? nn::functional::conv_transpose2d
                                    : nn::functional::conv_transpose3d;
      return TensorMap{
          {"output", conv(in.at("x"), in.at("weight"), optional_input(in, "bias"), dims_of(config, "stride"),
                          dims_of(config, "padding"), dims_of(config, "output_padding"),
                          config.at("groups").get<std::int64_t>(), dims_of(config, "dilation"))}};
    };
  } else if (kind == "adaptive_pool") {
    built.module = std::make_shared<nn::Module>();
    built.forward = [config](const TensorMap& in) {
      namespace F = nn::functional;
      const bool max = config.at("kind").get<std::string>() == "max";
      const int dims = config.at("dims").get<int>();
      const auto pool = max ? (dims == 1   ? F::adaptive_max_pool1d
                               : dims == 2 ? F::adaptive_max_pool2d
                                           : F::adaptive_max_pool3d)
                            : (dims == 1   ? F::adaptive_avg_pool1d
                               : dims == 2 ? F::adaptive_avg_pool2d
                                           : F::adaptive_avg_pool3d);
      return TensorMap{{"output", pool(in.at("x"), dims_of(config, "output_size"))}};
    };
  } else if (kind == "pool") {
    built.module = std::make_shared<nn::Module>();
    built.forward = [config](const TensorMap& in) {
      namespace F = nn::functional;
      const bool max = config.at("kind").get<std::string>() == "max";
      const int dims = config.at("dims").get<int>();
      const Tensor& x = in.at("x");
      const Dims kernel = dims_of(config, "kernel_size"), stride = dims_of(config, "stride"),
                 padding = dims_of(config, "padding");
      const bool ceil = config.at("ceil_mode").get<bool>();
      Tensor y;
      if (config.at("kind").get<std::string>() == "lp") {
        const double p = config.at("norm_type").get<double>();
        y = dims == 1   ? F::lp_pool1d(x, p, kernel, stride, ceil)
            : dims == 2 ? F::lp_pool2d(x, p, kernel, stride, ceil)
                        : F::lp_pool3d(x, p, kernel, stride, ceil);
      } else if (max) {
        const Dims dilation = dims_of(config, "dilation");
        const auto pool = dims == 1 ? F::max_pool1d : dims == 2 ? F::max_pool2d : F::max_pool3d;
        y = pool(x, kernel, stride, padding, dilation, ceil);
      } else {
        const bool count_pad = config.at("count_include_pad").get<bool>();
        y = dims == 1   ? F::avg_pool1d(x, kernel, stride, padding, count_pad, ceil)
            : dims == 2 ? F::avg_pool2d(x, kernel, stride, padding, count_pad, ceil)
                        : F::avg_pool3d(x, kernel, stride, padding, count_pad, ceil);
      }
      return TensorMap{{"output", y}};
    };
  } else if (kind == "unfold") {
    built.module = std::make_shared<nn::Module>();
    built.forward = [config](const TensorMap& in) {
      const Dims kernel = dims_of(config, "kernel_size"), dilation = dims_of(config, "dilation"),
                 padding = dims_of(config, "padding"), stride = dims_of(config, "stride");
      if (config.at("fold_to").is_null())
        return TensorMap{{"output", unfold(in.at("x"), kernel, dilation, padding, stride)}};
      return TensorMap{{"output", fold(in.at("x"), dims_of(config, "fold_to"), kernel, dilation, padding, stride)}};
    };
  } else if (kind == "batch_norm") {
    built.module = std::make_shared<nn::Module>();
    built.forward = [config](const TensorMap& in) {
      // x: (N, C, ...), weight and bias: (C) or undefined; running_mean and running_var: (C) constants, updated
      // in copies when training, which are outputs too.
      const Tensor running_mean = in.at("running_mean").clone(), running_var = in.at("running_var").clone();
      const Tensor y = nn::functional::batch_norm(in.at("x"), running_mean, running_var, optional_input(in, "weight"),
                                                  optional_input(in, "bias"), config.at("training").get<bool>(),
                                                  config.at("momentum").get<double>(), config.at("eps").get<double>());
      return TensorMap{{"output", y}, {"running_mean", running_mean}, {"running_var", running_var}};
    };
  } else if (kind == "activation") {
    built.module = std::make_shared<nn::Module>();
    built.forward = [config](const TensorMap& in) {
      namespace F = nn::functional;
      const std::string name = config.at("name").get<std::string>();
      const Tensor& x = in.at("x");
      Tensor y;
      if (name == "hardtanh")
        y = F::hardtanh(x, config.at("min_val").get<double>(), config.at("max_val").get<double>());
      else if (name == "relu6") y = F::relu6(x);
      else if (name == "hardsigmoid") y = F::hardsigmoid(x);
      else if (name == "hardswish") y = F::hardswish(x);
      else if (name == "logsigmoid") y = F::logsigmoid(x);
      else if (name == "softsign") y = F::softsign(x);
      else if (name == "glu") y = F::glu(x, config.at("dim").get<std::int64_t>());
      else if (name == "softshrink") y = F::softshrink(x, config.at("lambd").get<double>());
      else if (name == "hardshrink") y = F::hardshrink(x, config.at("lambd").get<double>());
      else if (name == "tanhshrink") y = F::tanhshrink(x);
      else if (name == "threshold")
        y = F::threshold(x, config.at("threshold").get<double>(), config.at("value").get<double>());
      else if (name == "softmin") y = F::softmin(x, config.at("dim").get<std::int64_t>());
      else y = F::prelu(x, in.at("weight"));
      return TensorMap{{"output", y}};
    };
  } else if (kind == "resample") {
    built.module = std::make_shared<nn::Module>();
    built.forward = [config](const TensorMap& in) {
      namespace F = nn::functional;
      const std::string what = config.at("kind").get<std::string>();
      const Tensor& x = in.at("x");
      if (what == "pixel_shuffle") return TensorMap{{"output", F::pixel_shuffle(x, config.at("factor").get<int>())}};
      if (what == "pixel_unshuffle")
        return TensorMap{{"output", F::pixel_unshuffle(x, config.at("factor").get<int>())}};
      const std::string mode = config.at("mode").get<std::string>();
      const auto options = F::InterpolateOptions()
                               .size(dims_of(config, "size"))
                               .scale_factor(config.at("scale_factor").get<std::vector<double>>())
                               .mode(mode == "nearest"    ? nn::InterpolateMode::Nearest
                                     : mode == "linear"   ? nn::InterpolateMode::Linear
                                     : mode == "bilinear" ? nn::InterpolateMode::Bilinear
                                                          : nn::InterpolateMode::Trilinear)
                               .align_corners(config.at("align_corners").get<bool>());
      return TensorMap{{"output", F::interpolate(x, options)}};
    };
  } else if (kind == "instance_norm") {
    built.module = std::make_shared<nn::Module>();
    built.forward = [config](const TensorMap& in) {
      // x: (N, C, ...), weight and bias: (C) or undefined; running_mean and running_var: (C) constants or
      // undefined, updated in copies when the instance statistics are used.
      const Tensor running_mean = optional_input(in, "running_mean"), running_var = optional_input(in, "running_var");
      const Tensor mean_copy = running_mean.defined() ? running_mean.clone() : Tensor();
      const Tensor var_copy = running_var.defined() ? running_var.clone() : Tensor();
      const Tensor y =
          nn::functional::instance_norm(in.at("x"), mean_copy, var_copy, optional_input(in, "weight"),
                                        optional_input(in, "bias"), config.at("use_input_stats").get<bool>(),
                                        config.at("momentum").get<double>(), config.at("eps").get<double>());
      TensorMap out{{"output", y}};
      if (mean_copy.defined()) {
        out.emplace("running_mean", mean_copy);
        out.emplace("running_var", var_copy);
      }
      return out;
    };
  } else if (kind == "group_norm") {
    built.module = std::make_shared<nn::Module>();
    built.forward = [config](const TensorMap& in) {
      // x: (N, C, ...), weight and bias: (C) or undefined
      return TensorMap{{"output", nn::functional::group_norm(in.at("x"), config.at("groups").get<std::int64_t>(),
                                                             optional_input(in, "weight"), optional_input(in, "bias"),
                                                             config.at("eps").get<double>())}};
    };
  } else if (kind == "TransformerEncoderLayer") {
    nn::TransformerEncoderLayer layer(layer_options(config, gen));
    built.module = layer.ptr();
    built.forward = [layer](const TensorMap& in) {
      // x: (B, T, d), key_padding_mask: Bool (B, T) or undefined -> (B, T, d)
      const auto self = nn::AttentionForwardOptions().key_padding_mask(optional_input(in, "key_padding_mask"));
      return TensorMap{{"output", layer(in.at("x"), self)}};
    };
  } else if (kind == "TransformerDecoderLayer") {
    nn::TransformerDecoderLayer layer(layer_options(config, gen));
    built.module = layer.ptr();
    built.forward = [layer](const TensorMap& in) {
      const auto cross =
          nn::AttentionForwardOptions().key_padding_mask(optional_input(in, "memory_key_padding_mask"));  // Bool (B, S)
      // x: (B, T, d) (causal self-attention), memory: (B, S, d) -> (B, T, d)
      return TensorMap{{"output", layer(in.at("x"), in.at("memory"), nn::AttentionForwardOptions(), cross).output}};
    };
  } else if (kind == "LayerNorm") {
    nn::LayerNorm norm{nn::LayerNormOptions(config.at("dim").get<std::int64_t>()).eps(config.at("eps").get<double>())};
    built.module = norm.ptr();
    built.forward = [norm](const TensorMap& in) { return TensorMap{{"output", norm(in.at("x"))}}; };
  } else if (kind == "FeedForward") {
    nn::FeedForward ff{
        nn::FeedForwardOptions(config.at("d_model").get<std::int64_t>(), config.at("hidden").get<std::int64_t>())
            .activation(activation_of(config.at("activation").get<std::string>()))
            .dropout(0.0)
            .generator(&gen)};
    built.module = ff.ptr();
    built.forward = [ff](const TensorMap& in) { return TensorMap{{"output", ff(in.at("x"))}}; };
  } else if (kind == "MixtureOfExperts") {
    const std::string weighting = config.at("weighting").get<std::string>();
    REQUIRE((weighting == "softmax_topk" || weighting == "softmax_then_topk"));
    const std::string activation = config.at("activation").get<std::string>();
    REQUIRE((activation == "relu" || activation == "gelu"));
    nn::MixtureOfExperts moe{nn::MoEOptions(config.at("dim").get<std::int64_t>())
                                 .num_experts(config.at("num_experts").get<std::int64_t>())
                                 .top_k(config.at("top_k").get<std::int64_t>())
                                 .hidden(config.at("hidden").get<std::int64_t>())
                                 .weighting(weighting == "softmax_topk" ? nn::RouterWeighting::SoftmaxTopK
                                                                        : nn::RouterWeighting::SoftmaxThenTopK)
                                 .activation(activation == "relu" ? nn::Activation::ReLU : nn::Activation::GELU)
                                 .router_bias(config.at("router_bias").get<bool>())
                                 .noisy_gating(config.value("noisy_gating", false))
                                 .noise_epsilon(config.value("noise_epsilon", 1e-2))
                                 .capacity_factor(config.value("capacity_factor", 0.0))
                                 .generator(&gen)};
    built.module = moe.ptr();
    const std::optional<std::uint64_t> noise_seed =
        config.contains("noise_seed") ? std::optional(config.at("noise_seed").get<std::uint64_t>()) : std::nullopt;
    built.forward = [moe, noise_seed](const TensorMap& in) {
      if (noise_seed) {
        // Noisy gating draws in training only; every call draws what PyTorch's side was given
        // (make_reference.py's TapegradGenerator), which the "noise" output checks.
        moe->train();
        moe->noise_generator().manual_seed(*noise_seed);
      }
      nn::MoEOutput r = moe(in.at("x"));  // x: (B, T, D) -> output (B, T, D), losses (), expert ids (N, k)
      TensorMap out{{"output", r.output},
                    {"load_balancing_loss", r.load_balancing_loss},
                    {"importance_loss", r.importance_loss},
                    {"router_z_loss", r.router_z_loss},
                    {"expert_indices", r.expert_indices}};
      if (noise_seed) {
        out.emplace("load_loss", r.load_loss);
        out.emplace("noise", ((r.router_logits - r.clean_logits) / r.noise_stddev).detach());  // z: (N, E)
      }
      return out;
    };
  } else if (kind == "Recurrent") {
    const std::string cell = config.at("cell").get<std::string>();
    const auto options =
        nn::RecurrentOptions(config.at("input_size").get<std::int64_t>(), config.at("hidden").get<std::int64_t>())
            .num_layers(config.at("num_layers").get<std::int64_t>())
            .bidirectional(config.at("bidirectional").get<bool>())
            .batch_first(config.at("batch_first").get<bool>())
            .nonlinearity(cell == "rnn_relu" ? nn::RnnNonlinearity::ReLU : nn::RnnNonlinearity::Tanh)
            .generator(&gen);
    std::shared_ptr<nn::RecurrentImpl> rnn;
    if (cell == "lstm") rnn = nn::LSTM(options).ptr();
    else if (cell == "gru") rnn = nn::GRU(options).ptr();
    else rnn = nn::RNN(options).ptr();
    built.module = rnn;
    built.forward = [rnn, cell](const TensorMap& in) {
      // x: (T, B, I) or (B, T, I), states (L D, B, H) or absent, lengths Int64 (B) or absent
      const nn::RecurrentOutput r =
          rnn->forward(in.at("x"), {optional_input(in, "h0"), optional_input(in, "c0")}, optional_input(in, "lengths"));
      TensorMap out{{"output", r.output}, {"h_n", r.state.h}};
      if (cell == "lstm") out["c_n"] = r.state.c;
      return out;
    };
  } else if (kind == "RecurrentCell") {
    const std::string cell = config.at("cell").get<std::string>();
    const auto options =
        nn::RecurrentCellOptions(config.at("input_size").get<std::int64_t>(), config.at("hidden").get<std::int64_t>())
            .nonlinearity(cell == "rnn_relu" ? nn::RnnNonlinearity::ReLU : nn::RnnNonlinearity::Tanh)
            .generator(&gen);
    std::shared_ptr<nn::RecurrentCellImpl> module;
    if (cell == "lstm") module = nn::LSTMCell(options).ptr();
    else if (cell == "gru") module = nn::GRUCell(options).ptr();
    else module = nn::RNNCell(options).ptr();
    built.module = module;
    built.forward = [module, cell](const TensorMap& in) {
      // x: (B, I), h, c: (B, H) -> h', c' (B, H)
      const nn::RecurrentState next = module->step(in.at("x"), {in.at("h"), optional_input(in, "c")});
      TensorMap out{{"h", next.h}};
      if (cell == "lstm") out["c"] = next.c;
      return out;
    };
  } else if (kind == "RMSNorm") {
    nn::RMSNorm norm{nn::RMSNormOptions(config.at("dim").get<std::int64_t>()).eps(config.at("eps").get<double>())};
    built.module = norm.ptr();
    built.forward = [norm](const TensorMap& in) { return TensorMap{{"output", norm(in.at("x"))}}; };
  } else if (kind == "RotaryEmbedding") {
    nn::RotaryEmbedding rope(config.at("head_dim").get<std::int64_t>(), config.at("max_len").get<std::int64_t>());
    built.module = rope.ptr();
    built.forward = [rope, offset = config.at("offset").get<std::int64_t>()](const TensorMap& in) {
      return TensorMap{{"output", rope(in.at("x"), offset)}};  // x: (..., T, Dh), positions offset ..
    };
  } else if (kind == "SinusoidalPositionalEncoding") {
    // The table is a buffer, not a parameter: the case's module is a function holding the encoding.
    nn::SinusoidalPositionalEncoding pe{
        nn::SinusoidalPositionalEncodingOptions(config.at("max_len").get<std::int64_t>(),
                                                config.at("dim").get<std::int64_t>())
            .base(config.at("base").get<double>())};
    pe->to(kFloat64);
    built.module = std::make_shared<nn::Module>();
    built.forward = [pe, offset = config.at("offset").get<std::int64_t>()](const TensorMap& in) {
      return TensorMap{{"output", pe(in.at("x"), offset)}};  // x: (B, T, dim)
    };
  } else if (kind == "MultiHeadLatentAttention") {
    nn::MultiHeadLatentAttention mla{nn::MultiHeadLatentAttentionOptions(config.at("d_model").get<std::int64_t>(),
                                                                         config.at("num_heads").get<std::int64_t>())
                                         .q_lora_rank(config.at("q_lora_rank").get<std::int64_t>())
                                         .kv_lora_rank(config.at("kv_lora_rank").get<std::int64_t>())
                                         .qk_nope_head_dim(config.at("qk_nope_head_dim").get<std::int64_t>())
                                         .qk_rope_head_dim(config.at("qk_rope_head_dim").get<std::int64_t>())
                                         .v_head_dim(config.at("v_head_dim").get<std::int64_t>())
                                         .max_len(config.at("max_len").get<std::int64_t>())
                                         .norm_eps(config.at("norm_eps").get<double>())
                                         .generator(&gen)};
    built.module = mla.ptr();
    built.forward = [mla, absorb = config.at("absorb").get<bool>(),
                     prefix = config.at("prefix").get<std::int64_t>()](const TensorMap& in) {
      const Tensor& x = in.at("x");  // (B, T, d_model) -> (B, T, d_model)
      if (prefix == 0) return TensorMap{{"output", mla(x, nullptr, absorb)}};
      // The first positions, then the rest after them through the latent cache (absorbed).
      nn::MLACache cache;
      const Tensor head = mla(x.narrow(1, 0, prefix), &cache);
      const Tensor tail = mla(x.narrow(1, prefix, x.size(1) - prefix), &cache);
      return TensorMap{{"output", concat({head, tail}, 1)}};
    };
  } else if (kind == "negative_sampling_loss") {
    built.module = std::make_shared<nn::Module>();
    built.forward = [r = reduction_of(config.at("reduction").get<std::string>())](const TensorMap& in) {
      // hidden: (B, D), positive: (B, D), negatives: (B, K, D)
      return TensorMap{
          {"output", nn::negative_sampling_loss(in.at("hidden"), in.at("positive"), in.at("negatives"), r)}};
    };
  } else if (kind == "hierarchical_softmax_loss") {
    built.module = std::make_shared<nn::Module>();
    built.forward = [r = reduction_of(config.at("reduction").get<std::string>())](const TensorMap& in) {
      // hidden: (B, D), nodes: (B, L, D), codes: (B, L) 0 or 1, mask: Bool (B, L)
      return TensorMap{
          {"output", nn::hierarchical_softmax_loss(in.at("hidden"), in.at("nodes"), in.at("codes"), in.at("mask"), r)}};
    };
  } else if (kind == "information") {
    built.module = std::make_shared<nn::Module>();
    const std::string measure = config.at("measure").get<std::string>();
    const std::int64_t axis = config.at("axis").get<std::int64_t>();
    const std::optional<double> base =
        config.at("log_base").is_null() ? std::nullopt : std::optional<double>(config.at("log_base").get<double>());
    if (measure != "entropy" && measure != "cross_entropy_between" && measure != "kl_divergence")
      throw ValueError("torch_reference.json: unknown information measure \"" + measure + "\"");
    built.forward = [measure, axis, base](const TensorMap& in) {
      // p, q: probability vectors along axis, which is reduced away
      if (measure == "entropy") return TensorMap{{"output", nn::entropy(in.at("p"), axis, base)}};
      if (measure == "cross_entropy_between")
        return TensorMap{{"output", nn::cross_entropy_between(in.at("p"), in.at("q"), axis, base)}};
      return TensorMap{{"output", nn::kl_divergence(in.at("p"), in.at("q"), axis, base)}};
    };
  } else if (kind == "PointerSentinel") {
    nn::PointerSentinel pointer{nn::PointerSentinelOptions(config.at("d_model").get<std::int64_t>())
                                    .window(config.at("window").get<std::int64_t>())
                                    .generator(&gen)};
    built.module = pointer.ptr();
    built.forward = [pointer](const TensorMap& in) {
      // hidden: (B, T, d), tokens and targets: Int64 (B, T), logits: (B, T, V)
      const nn::PointerSentinelOutput r = pointer(in.at("hidden"), in.at("tokens"), in.at("logits"), in.at("targets"));
      return TensorMap{
          {"log_probs", r.log_probs},
          {"pointer_log_mass", r.pointer_log_mass},
          {"gate", r.gate},
          {"pointer_probs", r.pointer_probs},
          {"log_distribution", pointer->log_distribution(in.at("hidden"), in.at("tokens"), in.at("logits"))}};
    };
  } else {
    throw ValueError("torch_reference.json: unknown module kind \"" + kind + "\"");
  }
  built.module->eval();  // no dropout anywhere (every rate is 0 as well)
  return built;
}

// ---------------------------------------------------------------- running a case

// Runs one case and compares everything PyTorch recorded: outputs, then the gradient of every
// floating-point input and every parameter. Structural problems (a missing output, a parameter
// the fixture does not know) fail with REQUIRE; numeric ones come back as Comparisons.
std::vector<Comparison> evaluate_case(const std::string& name, const json& c) {
  INFO("torch reference case " << name);
  Generator gen(0);
  BuiltModule built = build(c.at("module").get<std::string>(), c.at("config"), gen);
  nn::Module& module = *built.module;
  module.to(kFloat64);

  module.load_state_dict(tapegrad::testing::named_tensors_from(
      c.at("params")));  // strict: the fixture names exactly the module's parameters

  // Floating-point inputs are differentiated, but for those the case lists as constants.
  std::set<std::string> constants;
  for (const json& input : c.value("constant_inputs", json::array())) constants.insert(input.get<std::string>());
  auto differentiated = [&constants](const std::string& input, const Tensor& t) {
    return t.is_floating_point() && constants.count(input) == 0;
  };
  TensorMap inputs;
  for (const auto& [input, entry] : c.at("inputs").items()) {
    Tensor t = tensor_from(entry);
    if (differentiated(input, t)) t.requires_grad_();
    inputs[input] = t;
  }

  const TensorMap outputs = built.forward(inputs);
  std::vector<Comparison> results;
  for (const auto& item : c.at("outputs").items()) {
    const std::string& output = item.key();
    const json& entry = item.value();
    REQUIRE_MESSAGE(outputs.count(output) == 1, "case " << name << ": tapegrad gives no output \"" << output << "\"");
    results.push_back(compare(name, "outputs[" + output + "]", outputs.at(output), entry));
  }

  // loss = sum_o sum(o * cotangent_o)
  Tensor loss = zeros({}, kFloat64);
  for (const auto& item : c.at("cotangents").items()) {
    const std::string& output = item.key();
    const json& entry = item.value();
    REQUIRE_MESSAGE(outputs.count(output) == 1, "case " << name << ": tapegrad gives no output \"" << output << "\"");
    loss = loss + (outputs.at(output) * tensor_from(entry)).sum();
  }
  loss.backward();

  const json& input_grads = c.at("input_grads");
  for (const auto& named : inputs) {
    const std::string& input = named.first;
    const Tensor& t = named.second;
    if (!differentiated(input, t)) continue;
    REQUIRE_MESSAGE(input_grads.contains(input), "case " << name << ": no PyTorch gradient for input " << input);
    results.push_back(compare(name, "input_grads[" + input + "]", t.grad(), input_grads.at(input),
                              c.at("config").value("grad_rel_tol", kRelTol)));
  }
  REQUIRE(input_grads.size() ==
          static_cast<std::size_t>(std::count_if(inputs.begin(), inputs.end(),
                                                 [&](const auto& e) { return differentiated(e.first, e.second); })));

  const json& param_grads = c.at("param_grads");
  const NamedTensors params = module.named_parameters();
  REQUIRE(param_grads.size() == params.size());
  for (const auto& named : params) {
    const std::string& param = named.first;
    const Tensor& p = named.second;
    REQUIRE_MESSAGE(param_grads.contains(param), "case " << name << ": no PyTorch gradient for parameter " << param);
    results.push_back(compare(name, "param_grads[" + param + "]", p.grad(), param_grads.at(param)));
  }
  return results;
}

// Runs the named cases and fails, per tensor, with the message naming case, tensor and worst element.
void check_cases(const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    const std::vector<Comparison> results = evaluate_case(name, fixture_case(name));
    CHECK(results.size() >= 2);  // at least an output and a gradient (functions have no parameters)
    for (const Comparison& r : results) CHECK_MESSAGE(r.ok, r.message);
  }
}

const std::vector<std::string> kAttentionCases = {"mha_self", "mha_self_causal", "mha_self_key_padding"};
const std::vector<std::string> kCrossAttentionCases = {"mha_cross", "mha_cross_kv_dim"};
const std::vector<std::string> kAttentionFunctionCases = {"sdpa_scale_bool_mask", "sdpa_5d_float_mask_broadcast",
                                                          "sdpa_causal_bottom_right", "sdpa_causal_top_left_scale"};
const std::vector<std::string> kEinsumCases = {"einsum_matmul",
                                               "einsum_attention_scores",
                                               "einsum_diagonal",
                                               "einsum_trace",
                                               "einsum_repeated_label",
                                               "einsum_outer",
                                               "einsum_size_1_broadcast",
                                               "einsum_ellipsis_batch",
                                               "einsum_ellipsis_trailing",
                                               "einsum_implicit_order",
                                               "einsum_three_operands"};
const std::vector<std::string> kFunctionCases = {"embedding_bag_sum",  "embedding_bag_sum_weighted",
                                                 "embedding_bag_mean", "mse_loss_none",
                                                 "mse_loss_mean",      "mse_loss_sum",
                                                 "hardtanh_bounds",    "relu6",
                                                 "hardsigmoid",        "hardswish",
                                                 "logsigmoid",         "softsign",
                                                 "glu_axis_1",         "prelu_per_channel",
                                                 "prelu_shared",       "softshrink",
                                                 "hardshrink",         "tanhshrink",
                                                 "threshold",          "softmin"};
const std::vector<std::string> kLossCases = {"hinge_embedding_loss",
                                             "multi_margin_loss_weighted",
                                             "multi_margin_loss_squared_none",
                                             "multi_margin_loss_unbatched",
                                             "multilabel_margin_loss",
                                             "multilabel_margin_loss_unbatched",
                                             "multilabel_soft_margin_loss_weighted",
                                             "multilabel_soft_margin_loss_none",
                                             "poisson_nll_loss_log_input",
                                             "poisson_nll_loss_rate_full",
                                             "gaussian_nll_loss",
                                             "gaussian_nll_loss_row_variance",
                                             "gaussian_nll_loss_column_full",
                                             "ctc_loss_padded_mean",
                                             "ctc_loss_concatenated_blank_sum",
                                             "ctc_loss_zero_infinity_none",
                                             "ctc_loss_unbatched"};
const std::vector<std::string> kWindowCases = {"lp_pool1d_ceil_mode",
                                               "lp_pool2d",
                                               "lp_pool3d",
                                               "grid_sample_bilinear_zeros",
                                               "grid_sample_bilinear_border_align_corners",
                                               "grid_sample_bilinear_reflection",
                                               "grid_sample_bilinear_reflection_align_corners",
                                               "grid_sample_nearest_zeros",
                                               "grid_sample_affine_grid",
                                               "grid_sample_affine_grid_align_corners",
                                               "conv2d_stride_padding_dilation",
                                               "conv2d_groups_unbatched_no_bias",
                                               "conv1d_stride_padding_dilation_groups",
                                               "max_pool2d_padding_dilation",
                                               "max_pool1d_default_stride",
                                               "avg_pool2d_count_include_pad_false",
                                               "avg_pool1d_unbatched",
                                               "unfold",
                                               "fold",
                                               "conv2d_padding_same_odd_total_dilation",
                                               "conv1d_padding_same_groups",
                                               "conv2d_padding_valid",
                                               "pad_reflect",
                                               "pad_replicate",
                                               "pad_circular",
                                               "pad_reflect_1d",
                                               "pad_reflect_3d",
                                               "pad_replicate_3d",
                                               "interpolate_nearest_size",
                                               "interpolate_nearest_scale_1d",
                                               "interpolate_bilinear_size",
                                               "interpolate_bilinear_align_corners",
                                               "interpolate_bilinear_scale",
                                               "interpolate_linear_scale",
                                               "interpolate_trilinear_size",
                                               "interpolate_trilinear_align_corners_scale",
                                               "interpolate_nearest_3d",
                                               "pixel_shuffle",
                                               "pixel_unshuffle_unbatched",
                                               "conv_transpose2d_stride_padding_output_padding_groups_dilation",
                                               "conv_transpose2d_unbatched_no_bias",
                                               "conv_transpose2d_output_padding_past_the_image",
                                               "conv_transpose1d_stride_padding_output_padding_groups",
                                               "max_pool2d_ceil_mode",
                                               "max_pool1d_ceil_mode_dilation",
                                               "avg_pool2d_ceil_mode",
                                               "avg_pool2d_ceil_mode_count_include_pad_false",
                                               "adaptive_avg_pool2d_overlapping",
                                               "adaptive_avg_pool2d_global",
                                               "adaptive_avg_pool1d_unbatched",
                                               "adaptive_max_pool2d_overlapping",
                                               "adaptive_max_pool1d",
                                               "conv3d_stride_padding_dilation",
                                               "conv3d_groups_unbatched_same_no_bias",
                                               "conv_transpose3d_stride_padding_output_padding_groups_dilation",
                                               "max_pool3d_padding_dilation_ceil_mode",
                                               "avg_pool3d_ceil_mode_count_include_pad_false",
                                               "avg_pool3d_unbatched",
                                               "adaptive_avg_pool3d_overlapping",
                                               "adaptive_max_pool3d_overlapping"};
const std::vector<std::string> kBatchNormCases = {"batch_norm_2d_training",
                                                  "batch_norm_1d_training_momentum_no_affine",
                                                  "batch_norm_2d_eval",
                                                  "batch_norm_1d_training_2d_input",
                                                  "group_norm_2d",
                                                  "group_norm_1d_no_affine_eps",
                                                  "group_norm_one_group",
                                                  "group_norm_instance",
                                                  "instance_norm_2d_running",
                                                  "instance_norm_1d_plain",
                                                  "instance_norm_2d_eval",
                                                  "batch_norm_3d_training",
                                                  "instance_norm_3d_running"};
const std::vector<std::string> kGroupedQueryCases = {"mha_grouped_query", "mha_grouped_query_causal_padding",
                                                     "mha_multi_query_causal"};
const std::vector<std::string> kEncoderCases = {"encoder_layer_post_norm_relu", "encoder_layer_post_norm_gelu",
                                                "encoder_layer_pre_norm_relu", "encoder_layer_pre_norm_gelu_padding"};
const std::vector<std::string> kDecoderCases = {"decoder_layer_post_norm_relu",
                                                "decoder_layer_pre_norm_gelu_memory_padding"};
const std::vector<std::string> kLayerCases = {"layer_norm", "feed_forward_relu", "feed_forward_gelu"};
const std::vector<std::string> kMoECases = {"moe_softmax_topk_relu", "moe_softmax_then_topk_gelu", "moe_noisy_gating",
                                            "moe_noisy_gating_capacity"};
const std::vector<std::string> kRecurrentCases = {"rnn_tanh_2_layers",
                                                  "rnn_relu_bidirectional_lengths",
                                                  "lstm_2_layers_bidirectional",
                                                  "lstm_batch_first_lengths_no_state",
                                                  "lstm_bidirectional_lengths",
                                                  "gru_2_layers",
                                                  "gru_bidirectional_batch_first_lengths"};
const std::vector<std::string> kCellCases = {"rnn_tanh_cell", "rnn_relu_cell", "lstm_cell", "gru_cell"};
const std::vector<std::string> kPositionAndNormCases = {"rms_norm", "rotary_4d", "rotary_offset",
                                                        "sinusoidal_even_offset", "sinusoidal_odd_dim"};
const std::vector<std::string> kLatentAttentionCases = {"latent_attention_q_lora", "latent_attention_q_proj_absorbed",
                                                        "latent_attention_cached"};
const std::vector<std::string> kWord2vecLossCases = {"negative_sampling_loss_mean", "negative_sampling_loss_none",
                                                     "hierarchical_softmax_loss_mean", "hierarchical_softmax_loss_sum"};
const std::vector<std::string> kInformationCases = {"entropy_bits", "cross_entropy_between_axis_1",
                                                    "kl_divergence_axis_0"};
const std::vector<std::string> kPointerSentinelCases = {"pointer_sentinel"};

}  // namespace

TEST_CASE("torch reference: the fixture is float64 from PyTorch 1.13 and every case in it is checked here") {
  const json& data = fixture();
  CHECK(data.at("dtype").get<std::string>() == "float64");
  CHECK(data.at("torch_version").get<std::string>().rfind("1.13", 0) == 0);
  std::set<std::string> checked;
  for (const auto* group : {&kAttentionCases,       &kCrossAttentionCases,
                            &kGroupedQueryCases,    &kAttentionFunctionCases,
                            &kEinsumCases,          &kFunctionCases,
                            &kEncoderCases,         &kDecoderCases,
                            &kLayerCases,           &kMoECases,
                            &kRecurrentCases,       &kCellCases,
                            &kPositionAndNormCases, &kLatentAttentionCases,
                            &kWord2vecLossCases,    &kInformationCases,
                            &kPointerSentinelCases, &kWindowCases,
                            &kBatchNormCases,       &kLossCases})
    checked.insert(group->begin(), group->end());
  std::set<std::string> in_file;
  for (const auto& [name, c] : data.at("cases").items()) in_file.insert(name);
  CHECK(in_file == checked);
}

TEST_CASE(
    "torch reference: MultiHeadAttention self-attention, causal and key padding, matches torch.nn.MultiheadAttention") {
  check_cases(kAttentionCases);
}

TEST_CASE(
    "torch reference: MultiHeadAttention cross-attention (Tq != Tk, kv_dim) matches torch.nn.MultiheadAttention") {
  check_cases(kCrossAttentionCases);
}

TEST_CASE(
    "torch reference: MultiHeadAttention with grouped and multi-query key/value heads matches the same attention "
    "written with PyTorch's ops") {
  check_cases(kGroupedQueryCases);
}

TEST_CASE(
    "torch reference: scaled_dot_product_attention (scale, Bool and float masks with the mask's gradient, 5-D "
    "broadcast, causal top-left and bottom-right) matches the same attention written with PyTorch's ops") {
  check_cases(kAttentionFunctionCases);
}

TEST_CASE(
    "torch reference: einsum (products, diagonals and traces, repeated labels, size-1 broadcast, ellipses, implicit "
    "output, three operands) matches torch.einsum") {
  check_cases(kEinsumCases);
}

TEST_CASE(
    "torch reference: embedding_bag (sum, weighted sum, mean, with a repeated index and an empty bag), mse_loss "
    "(every reduction) and the activations hardtanh, relu6, hardsigmoid, hardswish, logsigmoid, softsign, glu and "
    "prelu match torch.nn.functional's") {
  check_cases(kFunctionCases);
}

TEST_CASE(
    "torch reference: conv1d, conv2d and conv3d (stride, padding and same and valid, dilation, groups, unbatched, no "
    "bias), "
    "F.pad's "
    "reflect, replicate and circular modes, interpolate (nearest, linear, bilinear, align_corners), pixel_shuffle and "
    "pixel_unshuffle, the transposed convolutions "
    "(output_padding too), max, average and power-average pools (padding, dilation, count_include_pad, ceil_mode), "
    "grid_sample (bilinear and nearest, the three padding modes, align_corners) with affine_grid, the adaptive "
    "pools, and unfold and fold match torch.nn.functional's") {
  check_cases(kWindowCases);
}

TEST_CASE(
    "torch reference: batch_norm (training with the running statistics' update, momentum, no affine, 2-D input, "
    "eval) and group_norm (groups of several channels, one group, one channel a group, no affine) match F.batch_norm "
    "and F.group_norm") {
  check_cases(kBatchNormCases);
}

TEST_CASE(
    "torch reference: hinge_embedding_loss, multi_margin_loss (p 1 and 2, class weights, unbatched), "
    "multilabel_margin_loss (rows ended by -1, a row of every class, an empty row), multilabel_soft_margin_loss, "
    "poisson_nll_loss (log input, rates with Stirling's term) and gaussian_nll_loss (per element, per row, a "
    "variance below eps) and ctc_loss (padded and concatenated targets, another blank, zero_infinity, unbatched) "
    "match torch.nn.functional's") {
  check_cases(kLossCases);
}

TEST_CASE("torch reference: TransformerEncoderLayer pre- and post-norm, ReLU and GELU, matches PyTorch's") {
  check_cases(kEncoderCases);
}

TEST_CASE("torch reference: TransformerDecoderLayer (causal self-attention, cross-attention) matches PyTorch's") {
  check_cases(kDecoderCases);
}

TEST_CASE("torch reference: LayerNorm with affine parameters and FeedForward with ReLU and GELU match PyTorch") {
  check_cases(kLayerCases);
}

TEST_CASE(
    "torch reference: MixtureOfExperts output, routing and auxiliary losses (noisy gating, a binding capacity) match "
    "the PyTorch definition") {
  check_cases(kMoECases);
}

TEST_CASE("torch reference: RNN, LSTM and GRU (stacked, bidirectional, batch_first, packed lengths) match PyTorch's") {
  check_cases(kRecurrentCases);
}

TEST_CASE("torch reference: RNNCell, LSTMCell and GRUCell match PyTorch's") { check_cases(kCellCases); }

TEST_CASE(
    "torch reference: RMSNorm, RotaryEmbedding and SinusoidalPositionalEncoding (offsets, an odd dim) match their "
    "formulas written with PyTorch's ops") {
  check_cases(kPositionAndNormCases);
}

TEST_CASE(
    "torch reference: MultiHeadLatentAttention naive, absorbed and through its latent cache matches the naive "
    "attention written with PyTorch's ops") {
  check_cases(kLatentAttentionCases);
}

TEST_CASE(
    "torch reference: negative_sampling_loss and hierarchical_softmax_loss (masked paths) match F.logsigmoid "
    "written out") {
  check_cases(kWord2vecLossCases);
}

TEST_CASE("torch reference: entropy, cross_entropy_between and kl_divergence (axes, log base 2) match PyTorch's ops") {
  check_cases(kInformationCases);
}

TEST_CASE(
    "torch reference: PointerSentinel's log-space mixture, gate and log_distribution match the mixture in "
    "probability space written with PyTorch's ops") {
  check_cases(kPointerSentinelCases);
}

TEST_CASE("torch reference: a wrong parameter, value or gradient is reported with the case, tensor and worst element") {
  const json& original = fixture_case("mha_self");
  auto failures = [](const std::vector<Comparison>& results) {
    std::vector<Comparison> bad;
    for (const Comparison& r : results)
      if (!r.ok) bad.push_back(r);
    return bad;
  };
  auto find = [](const std::vector<Comparison>& results, const std::string& tensor) {
    auto it = std::find_if(results.begin(), results.end(), [&](const Comparison& r) { return r.tensor == tensor; });
    REQUIRE(it != results.end());
    return *it;
  };
  REQUIRE(failures(evaluate_case("mha_self", original)).empty());

  SUBCASE("a PyTorch gradient off by 1e-8 in one element fails that gradient alone") {
    json c = original;
    json& data = c["param_grads"]["out_proj.bias"]["data"];
    data[3] = data[3].get<double>() + 1e-8;
    const std::vector<Comparison> bad = failures(evaluate_case("mha_self", c));
    REQUIRE(bad.size() == 1);
    CHECK(bad[0].tensor == "param_grads[out_proj.bias]");
    CHECK(bad[0].message.find("case mha_self, param_grads[out_proj.bias] (8): 1 of 8 elements outside tolerance; "
                              "worst element 3 (3)") == 0);
  }
  SUBCASE("a parameter off by 1e-7 changes the output and the gradients") {
    json c = original;
    json& data = c["params"]["in_proj_weight"]["data"];
    data[5] = data[5].get<double>() + 1e-7;  // row 0 (queries of head 0), column 5
    const std::vector<Comparison> results = evaluate_case("mha_self", c);
    CHECK_FALSE(find(results, "outputs[output]").ok);
    CHECK_FALSE(find(results, "outputs[weights]").ok);
    CHECK_FALSE(find(results, "input_grads[query]").ok);
    CHECK_FALSE(find(results, "param_grads[in_proj_weight]").ok);
  }
  SUBCASE("a wrong input gradient and a missing gradient are reported") {
    const json& expected = original.at("input_grads").at("query");
    Tensor wrong = tensor_from(expected);
    wrong.set({1, 4, 7}, wrong.at({1, 4, 7}) * (1.0 + 1e-6));
    const Comparison off = compare("mha_self", "input_grads[query]", wrong, expected);
    CHECK_FALSE(off.ok);
    CHECK(off.message.find("worst element 79 (1,4,7)") != std::string::npos);
    const Comparison missing =
        compare("mha_self", "param_grads[out_proj.weight]", Tensor(), original.at("param_grads").at("out_proj.weight"));
    CHECK_FALSE(missing.ok);
    CHECK(missing.message.find("undefined") != std::string::npos);
    CHECK(compare("mha_self", "input_grads[query]", tensor_from(expected), expected).ok);
  }
}
