#pragma once
// Resampling signals, images and volumes, with PyTorch's names and semantics: interpolate (nearest,
// nearest-exact, linear, bilinear, bicubic, trilinear, area) and its module Upsample, and PixelShuffle /
// PixelUnshuffle, which move channels into space and back.
//
//   namespace F = nn::functional;
//   F::interpolate(x, F::InterpolateOptions().scale_factor({2}).mode(nn::InterpolateMode::Bilinear));
//   nn::Upsample up{nn::UpsampleOptions().size({64, 64})};       // nearest, (N, C, H, W) -> (N, C, 64, 64)
//   nn::PixelShuffle shuffle{2};                                 // (N, 4C, H, W) -> (N, C, 2H, 2W)
//
// Each output entry reads one input entry (nearest) or two along each axis (linear, bilinear: the
// two neighbours of its source position, weighted by distance; trilinear likewise; bicubic four, with
// Keys's cubic convolution weights), gathered with index_select, so the gradient returns to the entries read;
// area averages the window adaptive average pooling gives it.

#include <cstdint>
#include <vector>

#include "tapegrad/nn/module.h"

namespace tapegrad::nn {

// torch's interpolation modes: Nearest, NearestExact ('nearest-exact') and Area (3-D, 4-D or 5-D input),
// Linear (3-D, (N, C, L)), Bilinear and Bicubic (4-D, (N, C, H, W)) and Trilinear (5-D, (N, C, D, H, W)).
// NearestExact reads the entry under each output entry's centre, min(floor((dst + 0.5) * scale), in - 1),
// where Nearest reads floor(dst * scale) (torch's legacy rule, which shifts the picture by half an
// entry); Area is adaptive average pooling to the output size (adaptive_avg_pool1d/2d/3d). Bicubic reads the 4 x 4
// entries around each source position (the edge entry repeated past the border) with the weights of Keys's cubic
// convolution at a = -0.75, as torch's; its source positions are not clamped at 0, and its output may overshoot the
// input's range.
enum class InterpolateMode { Nearest, NearestExact, Linear, Bilinear, Bicubic, Trilinear, Area };

namespace functional {

struct InterpolateOptions {
  // The output's spatial size, one value for every spatial axis or one per axis; or else
  TAPEGRAD_ARG(Dims, size) = {};
  // a factor per spatial axis (or one for all), the size being floor(input size * factor). One of
  // the two must be given.
  TAPEGRAD_ARG(std::vector<double>, scale_factor) = {};
  TAPEGRAD_ARG(InterpolateMode, mode) = InterpolateMode::Nearest;
  // The linear modes and bicubic: true maps the corner entries of input and output onto each other (source
  // position dst * (in - 1) / (out - 1)); false (torch's default) maps pixel centres, (dst + 0.5) *
  // in / out - 0.5 (or / factor when a scale_factor is given), clamped at 0. The other modes refuse true.
  TAPEGRAD_ARG(bool, align_corners) = false;
};

// torch's F.interpolate over the axes after (N, C): nearest reads entry min(floor(dst * scale), in - 1)
// with scale in / out (1 / factor for a scale_factor), computed in float32 as torch's kernels do
// (nearest-exact likewise at dst + 0.5).
// ValueError for a missing or doubled size, a mode that does not fit the input's rank, a size or
// factor that is not positive; ShapeError for an input that is not 3-D, 4-D or 5-D.
Tensor interpolate(const Tensor& x, const InterpolateOptions& options);

// torch's F.pixel_shuffle: (*, C * r * r, H, W) -> (*, C, H * r, W * r), each r x r block of the output
// read from r * r consecutive channels; pixel_unshuffle is its inverse. ValueError for r < 1 or
// channels (or sides) that r does not divide.
Tensor pixel_shuffle(const Tensor& x, std::int64_t upscale_factor);
Tensor pixel_unshuffle(const Tensor& x, std::int64_t downscale_factor);

}  // namespace functional

using UpsampleOptions = functional::InterpolateOptions;

// Upsample: interpolate with its options.
class UpsampleImpl : public UnaryModule {
 public:
  explicit UpsampleImpl(const UpsampleOptions& options) : options_(options) {}
  Tensor forward(const Tensor& x) override { return functional::interpolate(x, options_); }
  const UpsampleOptions& options() const { return options_; }

 private:
  UpsampleOptions options_;
};
TAPEGRAD_MODULE(Upsample);

class PixelShuffleImpl : public UnaryModule {
 public:
  explicit PixelShuffleImpl(std::int64_t upscale_factor) : factor_(upscale_factor) {}
  Tensor forward(const Tensor& x) override { return functional::pixel_shuffle(x, factor_); }
  std::int64_t upscale_factor() const { return factor_; }

 private:
  std::int64_t factor_;
};
TAPEGRAD_MODULE(PixelShuffle);

class PixelUnshuffleImpl : public UnaryModule {
 public:
  explicit PixelUnshuffleImpl(std::int64_t downscale_factor) : factor_(downscale_factor) {}
  Tensor forward(const Tensor& x) override { return functional::pixel_unshuffle(x, factor_); }
  std::int64_t downscale_factor() const { return factor_; }

 private:
  std::int64_t factor_;
};
TAPEGRAD_MODULE(PixelUnshuffle);

}  // namespace tapegrad::nn
