#pragma once
// Convolutions and pools over one, two or three spatial axes, with PyTorch's names, layouts, options
// and initialisation: Conv1d / 2d / 3d, ConvTranspose1d / 2d / 3d, MaxPool1d / 2d / 3d, AvgPool1d /
// 2d / 3d, MaxUnpool1d / 2d / 3d, AdaptiveAvgPool1d / 2d / 3d and AdaptiveMaxPool1d / 2d / 3d, and
// their functional forms. Each is an unfold (im2col, autograd/ops.h) followed by one matmul (the
// convolutions) or a mean over the window (the average pools), a matmul followed by a fold (col2im,
// the transposed convolutions), a gather at each window's largest entry (window_argmax, the max
// and adaptive max pools) or a scatter back (unpooling), or products with averaging matrices (the
// adaptive average pools), so their gradients are those ops'.
//
//   nn::Conv2d conv{nn::ConvOptions(/*in_channels=*/3, /*out_channels=*/16, /*kernel_size=*/{3}).padding({1})};
//   nn::MaxPool2d pool{nn::MaxPoolOptions({2})};
//   Tensor y = pool(relu(conv(images)));   // images: (N, 3, 32, 32) -> y: (N, 16, 16, 16)
//   nn::Conv1d causal{nn::ConvOptions(64, 64, {3}).padding({2})};  // then narrow the last axis
//   nn::ConvTranspose2d up{nn::ConvTransposeOptions(16, 8, {2}).stride({2})};  // (N, 16, H, W) -> (N, 8, 2H, 2W)
//   nn::AdaptiveAvgPool2d head{nn::AdaptivePoolOptions({1})};                 // (N, C, H, W) -> (N, C, 1, 1)
//
// Layouts: 2-D inputs (N, C, H, W) or unbatched (C, H, W), weights (out, in / groups, kh, kw); 1-D
// inputs (N, C, L) or (C, L), weights (out, in / groups, k); 3-D inputs (N, C, D, H, W) or (C, D, H,
// W), weights (out, in / groups, kd, kh, kw); transposed convolutions' weights (in, out / groups,
// kernel...), as torch's. Every window option takes one value for all spatial axes or one per axis;
// a convolution's padding may also be kSame or kValid and be filled by reflection, replication or
// wrapping (ConvOptions::padding_mode).

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <utility>

#include "tapegrad/nn/functional.h"
#include "tapegrad/nn/module.h"

namespace tapegrad::nn {

using PadMode = functional::PadMode;  // F::pad's modes, a convolution's padding_mode

// torch's string paddings of a convolution, kSame and kValid.
struct SamePadding {
  explicit constexpr SamePadding() = default;
};
struct ValidPadding {
  explicit constexpr ValidPadding() = default;
};
inline constexpr SamePadding kSame{};
inline constexpr ValidPadding kValid{};

// A convolution's padding: explicit (one value for every spatial axis or one per axis, as the other
// window options), kValid (none, the same as {0}) or kSame (an output as large as the input; stride
// 1 only; each axis padded by dilation * (kernel - 1) in all, the odd one after, as torch's).
class ConvPadding {
 public:
  ConvPadding(const Dims& values) : values_(values) {}                          // NOLINT
  ConvPadding(std::initializer_list<std::int64_t> values) : values_(values) {}  // NOLINT
  ConvPadding(SamePadding /*same*/) : same_(true) {}                            // NOLINT
  ConvPadding(ValidPadding /*valid*/) : values_({0}) {}                         // NOLINT
  bool same() const { return same_; }
  const Dims& values() const { return values_; }  // the explicit values ({0} for kValid, none for kSame)

 private:
  Dims values_;
  bool same_ = false;
};

namespace functional {

// torch's F.conv2d, F.conv1d and F.conv3d: the cross-correlation of x with weight, plus bias (out_channels)
// when given; groups split the channels into that many independent convolutions; padding explicit,
// kSame or kValid (ConvPadding). ShapeError names the shapes that disagree, ValueError the options
// out of range.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), const Dims& stride = {1},
              const ConvPadding& padding = {0}, const Dims& dilation = {1}, std::int64_t groups = 1);
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), const Dims& stride = {1},
              const ConvPadding& padding = {0}, const Dims& dilation = {1}, std::int64_t groups = 1);
Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), const Dims& stride = {1},
              const ConvPadding& padding = {0}, const Dims& dilation = {1}, std::int64_t groups = 1);

// torch's F.conv_transpose2d, F.conv_transpose1d and F.conv_transpose3d (the same argument order): the adjoint of the
// convolution with the same weight and options, so the gradient of conv2d's input. x (N, in, H, W)
// or unbatched, weight (in, out / groups, kh, kw), bias (out) when given. The output's extent along
// an axis is (H - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1, where
// output_padding (0 by default) picks among the sizes a strided convolution maps to H and must be
// smaller than the stride or the dilation.
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), const Dims& stride = {1},
                        const Dims& padding = {0}, const Dims& output_padding = {0}, std::int64_t groups = 1,
                        const Dims& dilation = {1});
Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), const Dims& stride = {1},
                        const Dims& padding = {0}, const Dims& output_padding = {0}, std::int64_t groups = 1,
                        const Dims& dilation = {1});
Tensor conv_transpose3d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), const Dims& stride = {1},
                        const Dims& padding = {0}, const Dims& output_padding = {0}, std::int64_t groups = 1,
                        const Dims& dilation = {1});

// torch's F.max_pool2d, F.max_pool1d and F.max_pool3d: the largest value of each window (stride defaults to the
// kernel size; the padding, at most half the kernel, is never picked). The value and its gradient
// come from the window's first largest entry, or from its last NaN, as torch's CPU kernels. ceil_mode
// (torch's, last here) keeps a last window that runs past the end, provided it starts inside the
// input or its left padding.
Tensor max_pool2d(const Tensor& x, const Dims& kernel_size, const Dims& stride = {}, const Dims& padding = {0},
                  const Dims& dilation = {1}, bool ceil_mode = false);
Tensor max_pool1d(const Tensor& x, const Dims& kernel_size, const Dims& stride = {}, const Dims& padding = {0},
                  const Dims& dilation = {1}, bool ceil_mode = false);
Tensor max_pool3d(const Tensor& x, const Dims& kernel_size, const Dims& stride = {}, const Dims& padding = {0},
                  const Dims& dilation = {1}, bool ceil_mode = false);
// The pooled values and, as torch's max_pool2d(..., return_indices=True), where each came from: its
// offset row * W + column in its (H, W) plane of the input (a position along L for the 1-D form,
// (depth * H + row) * W + column in its volume for the 3-D form), Int64 of the output's shape;
// max_unpool1d / 2d / 3d take them.
std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, const Dims& kernel_size, const Dims& stride = {},
                                                  const Dims& padding = {0}, const Dims& dilation = {1},
                                                  bool ceil_mode = false);
std::pair<Tensor, Tensor> max_pool1d_with_indices(const Tensor& x, const Dims& kernel_size, const Dims& stride = {},
                                                  const Dims& padding = {0}, const Dims& dilation = {1},
                                                  bool ceil_mode = false);
std::pair<Tensor, Tensor> max_pool3d_with_indices(const Tensor& x, const Dims& kernel_size, const Dims& stride = {},
                                                  const Dims& padding = {0}, const Dims& dilation = {1},
                                                  bool ceil_mode = false);

// torch's F.max_unpool2d, F.max_unpool1d and F.max_unpool3d: zeros of output_size (by default (H - 1) * stride -
// 2 * padding + kernel_size along each axis; stride defaults to the kernel size) with every entry
// of x written at the offset its index gives in its plane, as a max pool's indices say; the
// gradient returns to x from those offsets. IndexError for an index outside the output plane (volume).
Tensor max_unpool2d(const Tensor& x, const Tensor& indices, const Dims& kernel_size, const Dims& stride = {},
                    const Dims& padding = {0}, const Dims& output_size = {});
Tensor max_unpool1d(const Tensor& x, const Tensor& indices, const Dims& kernel_size, const Dims& stride = {},
                    const Dims& padding = {0}, const Dims& output_size = {});
Tensor max_unpool3d(const Tensor& x, const Tensor& indices, const Dims& kernel_size, const Dims& stride = {},
                    const Dims& padding = {0}, const Dims& output_size = {});

// torch's F.avg_pool2d, F.avg_pool1d and F.avg_pool3d: the mean of each window, the zero padding counted in the
// divisor unless count_include_pad is false; with ceil_mode (after count_include_pad here, before it
// in torch's argument list) the part of a last window past the padding is never counted. A
// divisor_override (2-D and 3-D only, as torch's) divides every window's sum instead; ValueError for 0.
Tensor avg_pool2d(const Tensor& x, const Dims& kernel_size, const Dims& stride = {}, const Dims& padding = {0},
                  bool count_include_pad = true, bool ceil_mode = false,
                  std::optional<std::int64_t> divisor_override = std::nullopt);
Tensor avg_pool1d(const Tensor& x, const Dims& kernel_size, const Dims& stride = {}, const Dims& padding = {0},
                  bool count_include_pad = true, bool ceil_mode = false);
Tensor avg_pool3d(const Tensor& x, const Dims& kernel_size, const Dims& stride = {}, const Dims& padding = {0},
                  bool count_include_pad = true, bool ceil_mode = false,
                  std::optional<std::int64_t> divisor_override = std::nullopt);

// torch's F.lp_pool1d / 2d / 3d, power-average pooling with p = norm_type: (sum over each window of
// x^p)^(1 / p), computed as torch does, as an average pool of x^p (no padding) times the window's size,
// so p = 1 is a sum pool and a large p nears a max pool. A window whose sum of x^p is negative gives
// NaN for p other than 1 (its root; p = 1 returns the sum), and the gradient at a zero sum is NaN
// for p > 1, as torch's. ValueError for
// a norm_type that is not positive and finite.
Tensor lp_pool1d(const Tensor& x, double norm_type, const Dims& kernel_size, const Dims& stride = {},
                 bool ceil_mode = false);
Tensor lp_pool2d(const Tensor& x, double norm_type, const Dims& kernel_size, const Dims& stride = {},
                 bool ceil_mode = false);
Tensor lp_pool3d(const Tensor& x, double norm_type, const Dims& kernel_size, const Dims& stride = {},
                 bool ceil_mode = false);

// torch's F.adaptive_avg_pool1d / 2d / 3d and F.adaptive_max_pool1d / 2d / 3d: output_size windows
// (one value for every axis or one per axis) covering the input, window i of an axis of size n spanning
// [floor(i * n / out), ceil((i + 1) * n / out)), so they overlap when out does not divide n. The max
// takes its value and gradient from the window's first largest entry in row-major order or its last
// NaN, as torch's; the _with_indices forms also return where each came from, as max_pool2d's.
Tensor adaptive_avg_pool2d(const Tensor& x, const Dims& output_size);
Tensor adaptive_avg_pool1d(const Tensor& x, const Dims& output_size);
Tensor adaptive_max_pool2d(const Tensor& x, const Dims& output_size);
Tensor adaptive_max_pool1d(const Tensor& x, const Dims& output_size);
std::pair<Tensor, Tensor> adaptive_max_pool2d_with_indices(const Tensor& x, const Dims& output_size);
std::pair<Tensor, Tensor> adaptive_max_pool1d_with_indices(const Tensor& x, const Dims& output_size);
Tensor adaptive_avg_pool3d(const Tensor& x, const Dims& output_size);
Tensor adaptive_max_pool3d(const Tensor& x, const Dims& output_size);
std::pair<Tensor, Tensor> adaptive_max_pool3d_with_indices(const Tensor& x, const Dims& output_size);

// torch's F.fractional_max_pool2d / 3d (Graham 2014): the largest entry of each of output_size windows of
// kernel_size entries (one value for every axis or one per axis), placed pseudo-randomly along each axis as
// fractional_window_argmax (ops.h) says; output_size is given, or else output_ratio (each in (0, 1); the
// size floor(input size * ratio)). random_samples (N, C, 2 or 3; (C, 2 or 3) for an unbatched input) of
// x's dtype in [0, 1) place the windows, one per plane and axis; undefined, they are drawn from the
// global generator, so a seeded run repeats. The _with_indices forms also return where each value came
// from, as max_pool2d's. ValueError for neither or both of output_size and output_ratio, a ratio outside
// (0, 1), windows that do not fit, or samples of another shape.
Tensor fractional_max_pool2d(const Tensor& x, const Dims& kernel_size, const Dims& output_size,
                             const std::vector<double>& output_ratio = {}, const Tensor& random_samples = Tensor());
Tensor fractional_max_pool3d(const Tensor& x, const Dims& kernel_size, const Dims& output_size,
                             const std::vector<double>& output_ratio = {}, const Tensor& random_samples = Tensor());
std::pair<Tensor, Tensor> fractional_max_pool2d_with_indices(const Tensor& x, const Dims& kernel_size,
                                                             const Dims& output_size,
                                                             const std::vector<double>& output_ratio = {},
                                                             const Tensor& random_samples = Tensor());
std::pair<Tensor, Tensor> fractional_max_pool3d_with_indices(const Tensor& x, const Dims& kernel_size,
                                                             const Dims& output_size,
                                                             const std::vector<double>& output_ratio = {},
                                                             const Tensor& random_samples = Tensor());

}  // namespace functional

struct ConvOptions {
  ConvOptions(std::int64_t in_channels, std::int64_t out_channels, const Dims& kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  TAPEGRAD_ARG(std::int64_t, in_channels);
  TAPEGRAD_ARG(std::int64_t, out_channels);
  TAPEGRAD_ARG(Dims, kernel_size);
  TAPEGRAD_ARG(Dims, stride) = {1};
  TAPEGRAD_ARG(ConvPadding, padding) = {0};
  // torch's padding_mode: how the padding is filled, zeros (Constant) or copies of the input
  // (Reflect, Replicate, Circular: F::pad's modes, applied before a convolution without padding).
  TAPEGRAD_ARG(PadMode, padding_mode) = PadMode::Constant;
  TAPEGRAD_ARG(Dims, dilation) = {1};
  TAPEGRAD_ARG(std::int64_t, groups) = 1;
  TAPEGRAD_ARG(bool, bias) = true;
  // Draws the initial weights from *generator instead of the default generator (not owned; used
  // only while the module is constructed).
  TAPEGRAD_ARG(Generator*, generator) = nullptr;
};

// Conv1d, Conv2d and Conv3d: weight (out, in / groups, kernel...) and bias (out), both uniform in
// +-1/sqrt(fan_in), fan_in = in / groups * the kernel's size, as torch's (kaiming_uniform_ with
// a = sqrt(5)).
class ConvImpl : public UnaryModule {
 public:
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }  // undefined when built without bias
  const ConvOptions& options() const { return options_; }

 protected:
  ConvImpl(const ConvOptions& options, int spatial_axes, const char* name);
  // x padded in options().padding_mode() by options().padding() (a mode other than zeros).
  Tensor padded_input(const Tensor& x, int spatial_axes) const;
  ConvOptions options_;
  Tensor weight_;
  Tensor bias_;
};

class Conv1dImpl : public ConvImpl {
 public:
  explicit Conv1dImpl(const ConvOptions& options) : ConvImpl(options, 1, "Conv1d") {}
  Tensor forward(const Tensor& x) override;
};
TAPEGRAD_MODULE(Conv1d);

class Conv2dImpl : public ConvImpl {
 public:
  explicit Conv2dImpl(const ConvOptions& options) : ConvImpl(options, 2, "Conv2d") {}
  Tensor forward(const Tensor& x) override;
};
TAPEGRAD_MODULE(Conv2d);

class Conv3dImpl : public ConvImpl {
 public:
  explicit Conv3dImpl(const ConvOptions& options) : ConvImpl(options, 3, "Conv3d") {}
  Tensor forward(const Tensor& x) override;
};
TAPEGRAD_MODULE(Conv3d);

struct ConvTransposeOptions {
  ConvTransposeOptions(std::int64_t in_channels, std::int64_t out_channels, const Dims& kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  TAPEGRAD_ARG(std::int64_t, in_channels);
  TAPEGRAD_ARG(std::int64_t, out_channels);
  TAPEGRAD_ARG(Dims, kernel_size);
  TAPEGRAD_ARG(Dims, stride) = {1};
  TAPEGRAD_ARG(Dims, padding) = {0};
  TAPEGRAD_ARG(Dims, output_padding) = {0};
  TAPEGRAD_ARG(Dims, dilation) = {1};
  TAPEGRAD_ARG(std::int64_t, groups) = 1;
  TAPEGRAD_ARG(bool, bias) = true;
  TAPEGRAD_ARG(Generator*, generator) = nullptr;  // as ConvOptions'
};

// ConvTranspose1d, 2d and 3d: weight (in, out / groups, kernel...) and bias (out), both uniform in
// +-1/sqrt(fan_in) with torch's fan_in of that weight, out / groups * the kernel's size.
// forward(x, output_size), as torch's, asks for one of the output sizes a strided convolution maps
// to x's (the spatial extents, or N and C before them): the output_padding that gives it is worked
// out per call, and a size outside [smallest, smallest + stride - 1] is a ValueError naming the
// range.
class ConvTransposeImpl : public UnaryModule {
 public:
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }  // undefined when built without bias
  const ConvTransposeOptions& options() const { return options_; }
  Tensor forward(const Tensor& x) override { return forward(x, {}); }
  Tensor forward(const Tensor& x, const Dims& output_size);

 protected:
  ConvTransposeImpl(const ConvTransposeOptions& options, int spatial_axes, const char* name);
  ConvTransposeOptions options_;
  Tensor weight_;
  Tensor bias_;

 private:
  int spatial_axes_;
  const char* name_;
};

class ConvTranspose1dImpl : public ConvTransposeImpl {
 public:
  explicit ConvTranspose1dImpl(const ConvTransposeOptions& options)
      : ConvTransposeImpl(options, 1, "ConvTranspose1d") {}
};
TAPEGRAD_MODULE(ConvTranspose1d);

class ConvTranspose2dImpl : public ConvTransposeImpl {
 public:
  explicit ConvTranspose2dImpl(const ConvTransposeOptions& options)
      : ConvTransposeImpl(options, 2, "ConvTranspose2d") {}
};
TAPEGRAD_MODULE(ConvTranspose2d);

class ConvTranspose3dImpl : public ConvTransposeImpl {
 public:
  explicit ConvTranspose3dImpl(const ConvTransposeOptions& options)
      : ConvTransposeImpl(options, 3, "ConvTranspose3d") {}
};
TAPEGRAD_MODULE(ConvTranspose3d);

struct MaxPoolOptions {
  MaxPoolOptions(const Dims& kernel_size) : kernel_size_(kernel_size) {}  // NOLINT(google-explicit-constructor)
  TAPEGRAD_ARG(Dims, kernel_size);
  TAPEGRAD_ARG(Dims, stride) = {};  // empty: the kernel size
  TAPEGRAD_ARG(Dims, padding) = {0};
  TAPEGRAD_ARG(Dims, dilation) = {1};
  TAPEGRAD_ARG(bool, ceil_mode) = false;
};

struct AvgPoolOptions {
  AvgPoolOptions(const Dims& kernel_size) : kernel_size_(kernel_size) {}  // NOLINT(google-explicit-constructor)
  TAPEGRAD_ARG(Dims, kernel_size);
  TAPEGRAD_ARG(Dims, stride) = {};  // empty: the kernel size
  TAPEGRAD_ARG(Dims, padding) = {0};
  TAPEGRAD_ARG(bool, count_include_pad) = true;
  TAPEGRAD_ARG(bool, ceil_mode) = false;
  // AvgPool2d and AvgPool3d only (torch's AvgPool1d has none): every window's sum divided by this
  // instead.
  TAPEGRAD_ARG(std::optional<std::int64_t>, divisor_override) = std::nullopt;
};

class MaxPool1dImpl : public UnaryModule {
 public:
  explicit MaxPool1dImpl(const MaxPoolOptions& options) : options_(options) {}
  Tensor forward(const Tensor& x) override;
  std::pair<Tensor, Tensor> forward_with_indices(const Tensor& x);
  const MaxPoolOptions& options() const { return options_; }

 private:
  MaxPoolOptions options_;
};
TAPEGRAD_MODULE(MaxPool1d);

class MaxPool2dImpl : public UnaryModule {
 public:
  explicit MaxPool2dImpl(const MaxPoolOptions& options) : options_(options) {}
  Tensor forward(const Tensor& x) override;
  // The output and its indices, as torch's forward_with_indices (for MaxUnpool2d).
  std::pair<Tensor, Tensor> forward_with_indices(const Tensor& x);
  const MaxPoolOptions& options() const { return options_; }

 private:
  MaxPoolOptions options_;
};
TAPEGRAD_MODULE(MaxPool2d);

class MaxPool3dImpl : public UnaryModule {
 public:
  explicit MaxPool3dImpl(const MaxPoolOptions& options) : options_(options) {}
  Tensor forward(const Tensor& x) override;
  std::pair<Tensor, Tensor> forward_with_indices(const Tensor& x);  // as MaxPool2d's
  const MaxPoolOptions& options() const { return options_; }

 private:
  MaxPoolOptions options_;
};
TAPEGRAD_MODULE(MaxPool3d);

struct MaxUnpoolOptions {
  MaxUnpoolOptions(const Dims& kernel_size) : kernel_size_(kernel_size) {}  // NOLINT(google-explicit-constructor)
  TAPEGRAD_ARG(Dims, kernel_size);
  TAPEGRAD_ARG(Dims, stride) = {};  // empty: the kernel size
  TAPEGRAD_ARG(Dims, padding) = {0};
};

// MaxUnpool1d / 2d / 3d: F::max_unpool1d / 2d / 3d with the options of the pool whose indices they
// take; forward(x, indices) or forward(x, indices, output_size) (torch's forward with output_size).
//   auto [y, where] = pool->forward_with_indices(x);
//   Tensor back = unpool(y, where, {x.size(2), x.size(3)});
class MaxUnpool1dImpl : public Module {
 public:
  explicit MaxUnpool1dImpl(const MaxUnpoolOptions& options) : options_(options) {}
  Tensor forward(const Tensor& x, const Tensor& indices, const Dims& output_size = {});
  const MaxUnpoolOptions& options() const { return options_; }

 private:
  MaxUnpoolOptions options_;
};
TAPEGRAD_MODULE(MaxUnpool1d);

class MaxUnpool2dImpl : public Module {
 public:
  explicit MaxUnpool2dImpl(const MaxUnpoolOptions& options) : options_(options) {}
  Tensor forward(const Tensor& x, const Tensor& indices, const Dims& output_size = {});
  const MaxUnpoolOptions& options() const { return options_; }

 private:
  MaxUnpoolOptions options_;
};
TAPEGRAD_MODULE(MaxUnpool2d);

class MaxUnpool3dImpl : public Module {
 public:
  explicit MaxUnpool3dImpl(const MaxUnpoolOptions& options) : options_(options) {}
  Tensor forward(const Tensor& x, const Tensor& indices, const Dims& output_size = {});
  const MaxUnpoolOptions& options() const { return options_; }

 private:
  MaxUnpoolOptions options_;
};
TAPEGRAD_MODULE(MaxUnpool3d);

class AvgPool1dImpl : public UnaryModule {
 public:
  // ValueError for a divisor_override, which torch's AvgPool1d does not take.
  explicit AvgPool1dImpl(const AvgPoolOptions& options);
  Tensor forward(const Tensor& x) override;
  const AvgPoolOptions& options() const { return options_; }

 private:
  AvgPoolOptions options_;
};
TAPEGRAD_MODULE(AvgPool1d);

class AvgPool2dImpl : public UnaryModule {
 public:
  explicit AvgPool2dImpl(const AvgPoolOptions& options) : options_(options) {}
  Tensor forward(const Tensor& x) override;
  const AvgPoolOptions& options() const { return options_; }

 private:
  AvgPoolOptions options_;
};
TAPEGRAD_MODULE(AvgPool2d);

class AvgPool3dImpl : public UnaryModule {
 public:
  explicit AvgPool3dImpl(const AvgPoolOptions& options) : options_(options) {}
  Tensor forward(const Tensor& x) override;
  const AvgPoolOptions& options() const { return options_; }

 private:
  AvgPoolOptions options_;
};
TAPEGRAD_MODULE(AvgPool3d);

struct LPPoolOptions {
  LPPoolOptions(double norm_type, const Dims& kernel_size) : norm_type_(norm_type), kernel_size_(kernel_size) {}
  TAPEGRAD_ARG(double, norm_type);
  TAPEGRAD_ARG(Dims, kernel_size);
  TAPEGRAD_ARG(Dims, stride) = {};  // empty: the kernel size
  TAPEGRAD_ARG(bool, ceil_mode) = false;
};

// The power-average pools: each runs the functional form of its name with its options.
class LPPool1dImpl : public UnaryModule {
 public:
  explicit LPPool1dImpl(const LPPoolOptions& options) : options_(options) {}
  Tensor forward(const Tensor& x) override;
  const LPPoolOptions& options() const { return options_; }

 private:
  LPPoolOptions options_;
};
TAPEGRAD_MODULE(LPPool1d);

class LPPool2dImpl : public UnaryModule {
 public:
  explicit LPPool2dImpl(const LPPoolOptions& options) : options_(options) {}
  Tensor forward(const Tensor& x) override;
  const LPPoolOptions& options() const { return options_; }

 private:
  LPPoolOptions options_;
};
TAPEGRAD_MODULE(LPPool2d);

class LPPool3dImpl : public UnaryModule {
 public:
  explicit LPPool3dImpl(const LPPoolOptions& options) : options_(options) {}
  Tensor forward(const Tensor& x) override;
  const LPPoolOptions& options() const { return options_; }

 private:
  LPPoolOptions options_;
};
TAPEGRAD_MODULE(LPPool3d);

// The adaptive pools' option: the output's size, one value (both axes for the 2-D forms) or one per axis.
struct AdaptivePoolOptions {
  AdaptivePoolOptions(const Dims& output_size) : output_size_(output_size) {}  // NOLINT(google-explicit-constructor)
  TAPEGRAD_ARG(Dims, output_size);
};

// The adaptive pools: each runs the functional form of its name with the options' output size.
class AdaptivePoolImpl : public UnaryModule {
 public:
  const AdaptivePoolOptions& options() const { return options_; }

 protected:
  explicit AdaptivePoolImpl(const AdaptivePoolOptions& options) : options_(options) {}
  AdaptivePoolOptions options_;
};

class AdaptiveAvgPool1dImpl : public AdaptivePoolImpl {
 public:
  explicit AdaptiveAvgPool1dImpl(const AdaptivePoolOptions& options) : AdaptivePoolImpl(options) {}
  Tensor forward(const Tensor& x) override;
};
TAPEGRAD_MODULE(AdaptiveAvgPool1d);

class AdaptiveAvgPool2dImpl : public AdaptivePoolImpl {
 public:
  explicit AdaptiveAvgPool2dImpl(const AdaptivePoolOptions& options) : AdaptivePoolImpl(options) {}
  Tensor forward(const Tensor& x) override;
};
TAPEGRAD_MODULE(AdaptiveAvgPool2d);

class AdaptiveAvgPool3dImpl : public AdaptivePoolImpl {
 public:
  explicit AdaptiveAvgPool3dImpl(const AdaptivePoolOptions& options) : AdaptivePoolImpl(options) {}
  Tensor forward(const Tensor& x) override;
};
TAPEGRAD_MODULE(AdaptiveAvgPool3d);

// The adaptive max pools also return where each value came from, as torch's return_indices.
class AdaptiveMaxPool1dImpl : public AdaptivePoolImpl {
 public:
  explicit AdaptiveMaxPool1dImpl(const AdaptivePoolOptions& options) : AdaptivePoolImpl(options) {}
  Tensor forward(const Tensor& x) override;
  std::pair<Tensor, Tensor> forward_with_indices(const Tensor& x);
};
TAPEGRAD_MODULE(AdaptiveMaxPool1d);

class AdaptiveMaxPool2dImpl : public AdaptivePoolImpl {
 public:
  explicit AdaptiveMaxPool2dImpl(const AdaptivePoolOptions& options) : AdaptivePoolImpl(options) {}
  Tensor forward(const Tensor& x) override;
  std::pair<Tensor, Tensor> forward_with_indices(const Tensor& x);
};
TAPEGRAD_MODULE(AdaptiveMaxPool2d);

class AdaptiveMaxPool3dImpl : public AdaptivePoolImpl {
 public:
  explicit AdaptiveMaxPool3dImpl(const AdaptivePoolOptions& options) : AdaptivePoolImpl(options) {}
  Tensor forward(const Tensor& x) override;
  std::pair<Tensor, Tensor> forward_with_indices(const Tensor& x);
};
TAPEGRAD_MODULE(AdaptiveMaxPool3d);

// FractionalMaxPool2d / 3d's options: the window, and the output's size or its ratio to the input's.
struct FractionalMaxPoolOptions {
  FractionalMaxPoolOptions(const Dims& kernel_size)
      : kernel_size_(kernel_size) {}  // NOLINT(google-explicit-constructor)
  TAPEGRAD_ARG(Dims, kernel_size);
  TAPEGRAD_ARG(Dims, output_size) = {};
  TAPEGRAD_ARG(std::vector<double>, output_ratio) = {};
};

// torch's nn.FractionalMaxPool2d / 3d: each forward draws its samples from the global generator.
class FractionalMaxPool2dImpl : public UnaryModule {
 public:
  explicit FractionalMaxPool2dImpl(const FractionalMaxPoolOptions& options) : options_(options) {}
  Tensor forward(const Tensor& x) override;
  std::pair<Tensor, Tensor> forward_with_indices(const Tensor& x);
  const FractionalMaxPoolOptions& options() const { return options_; }

 private:
  FractionalMaxPoolOptions options_;
};
TAPEGRAD_MODULE(FractionalMaxPool2d);

class FractionalMaxPool3dImpl : public UnaryModule {
 public:
  explicit FractionalMaxPool3dImpl(const FractionalMaxPoolOptions& options) : options_(options) {}
  Tensor forward(const Tensor& x) override;
  std::pair<Tensor, Tensor> forward_with_indices(const Tensor& x);
  const FractionalMaxPoolOptions& options() const { return options_; }

 private:
  FractionalMaxPoolOptions options_;
};
TAPEGRAD_MODULE(FractionalMaxPool3d);

}  // namespace tapegrad::nn
