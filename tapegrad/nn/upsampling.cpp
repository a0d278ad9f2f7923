#include "tapegrad/nn/upsampling.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "tapegrad/nn/conv.h"
#include "tapegrad/nn/layout.h"

namespace tapegrad::nn::functional {

namespace {

const char* mode_name(InterpolateMode mode) {
  switch (mode) {
    case InterpolateMode::Nearest:
      return "nearest";
    case InterpolateMode::Linear:
      return "linear";
    case InterpolateMode::Bilinear:
      return "bilinear";
    case InterpolateMode::Bicubic:
      return "bicubic";
    case InterpolateMode::Trilinear:
      return "trilinear";
    case InterpolateMode::NearestExact:
      return "nearest-exact";
    case InterpolateMode::Area:
      return "area";
  }
  return "unknown";
}

// The scale factor given for axis a, 0 when the output size was given instead.
double axis_factor(const std::vector<double>& factor, int a) {
  return factor.empty() ? 0.0 : factor[factor.size() == 1 ? 0 : static_cast<std::size_t>(a)];
}

// Where each output entry of an axis resampled from `in` to `out` entries reads, in input coordinates, for the
// linear modes and bicubic (torch's source index before the linear modes clamp it at 0): align_corners maps the
// end entries onto each other; otherwise entry centres map with the scale in / out, or 1 / factor when a scale
// factor was given.
std::vector<double> source_positions(std::int64_t in, std::int64_t out, double factor, bool align_corners) {
  const double scale = align_corners  ? (out > 1 ? static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0.0)
                       : factor > 0.0 ? 1.0 / factor
                                      : static_cast<double>(in) / static_cast<double>(out);
  std::vector<double> source(static_cast<std::size_t>(out));
  for (std::int64_t i = 0; i < out; ++i)
    source[static_cast<std::size_t>(i)] =
        align_corners ? static_cast<double>(i) * scale : (static_cast<double>(i) + 0.5) * scale - 0.5;
  return source;
}

// What one output axis reads: for output entry i, input entries low[i] and high[i] with the weight
// of high (1 - it for low); nearest reads one entry (high == low, weight 0).
struct AxisReads {
  std::vector<std::int64_t> low, high;
  std::vector<double> weight;
};

AxisReads axis_reads(std::int64_t in, std::int64_t out, const std::vector<double>& factor, int a,
                     const InterpolateOptions& o) {
  AxisReads r;
  const double f = axis_factor(factor, a);
  if (o.mode() == InterpolateMode::Nearest || o.mode() == InterpolateMode::NearestExact) {
    // torch's nearest_idx: the scale and product in float32, the floor of it, at most in - 1; nearest-exact
    // takes the product at the entry's centre (in double, then rounded to float32, as torch's floorf does).
    const float scale = f > 0.0 ? static_cast<float>(1.0 / f) : static_cast<float>(in) / static_cast<float>(out);
    const bool exact = o.mode() == InterpolateMode::NearestExact;
    for (std::int64_t i = 0; i < out; ++i) {
      const float position = exact ? static_cast<float>((static_cast<double>(i) + 0.5) * static_cast<double>(scale))
                                   : static_cast<float>(i) * scale;
      const auto j = out == in && !exact ? i : std::min(static_cast<std::int64_t>(std::floor(position)), in - 1);
      r.low.push_back(j);
      r.high.push_back(j);
      r.weight.push_back(0.0);
    }
    return r;
  }
  for (const double position : source_positions(in, out, f, o.align_corners())) {
    const double source = std::max(0.0, position);
    const auto low = std::min(static_cast<std::int64_t>(source), in - 1);
    r.low.push_back(low);
    r.high.push_back(low < in - 1 ? low + 1 : low);
    r.weight.push_back(source - static_cast<double>(low));
  }
  return r;
}

// x resampled along `axis` as `reads` says.
Tensor resample_axis(const Tensor& x, int axis, const AxisReads& reads) {
  const auto out = static_cast<std::int64_t>(reads.low.size());
  const Tensor low = index_select(x, axis, from_vector(reads.low, {out}));
  if (reads.high == reads.low) return low;
  const Tensor high = index_select(x, axis, from_vector(reads.high, {out}));
  Shape shape = Shape::filled(x.dim(), 1);
  shape[axis] = out;
  const Tensor w = from_vector(reads.weight, shape).to(x.dtype());
  return low * (1.0 - w) + high * w;
}

// Bicubic along one axis: output entry i reads input entries floor(s) - 1 .. floor(s) + 2 (clamped to
// the axis) of its source position s, weighted by Keys's cubic convolution kernel (a = -0.75) at their
// distances from s.
Tensor resample_axis_cubic(const Tensor& x, int axis, std::int64_t in, std::int64_t out,
                           const std::vector<double>& factor, int a, bool align_corners) {
  constexpr double A = -0.75;
  auto near = [](double d) { return ((A + 2.0) * d - (A + 3.0)) * d * d + 1.0; };       // |d| <= 1
  auto far = [](double d) { return ((A * d - 5.0 * A) * d + 8.0 * A) * d - 4.0 * A; };  // 1 < |d| < 2
  const std::vector<double> sources = source_positions(in, out, axis_factor(factor, a), align_corners);
  std::vector<std::vector<std::int64_t>> taps(4, std::vector<std::int64_t>(static_cast<std::size_t>(out)));
  std::vector<std::vector<double>> weights(4, std::vector<double>(static_cast<std::size_t>(out)));
  for (std::int64_t i = 0; i < out; ++i) {
    const double source = sources[static_cast<std::size_t>(i)];
    const double base = std::floor(source), t = source - base;
    const double w[4] = {far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)};
    for (std::size_t k = 0; k < 4; ++k) {
      const auto j = static_cast<std::int64_t>(base) - 1 + static_cast<std::int64_t>(k);
      taps[k][static_cast<std::size_t>(i)] = std::clamp<std::int64_t>(j, 0, in - 1);
      weights[k][static_cast<std::size_t>(i)] = w[k];
    }
  }
  Shape shape = Shape::filled(x.dim(), 1);
  shape[axis] = out;
  Tensor y;
  for (std::size_t k = 0; k < 4; ++k) {
    const Tensor term =
        index_select(x, axis, from_vector(taps[k], {out})) * from_vector(weights[k], shape).to(x.dtype());
    y = y.defined() ? y + term : term;
  }
  return y;
}

}  // namespace

Tensor interpolate(const Tensor& x, const InterpolateOptions& o) {
  const char* op = "interpolate";
  if (x.dim() < 3 || x.dim() > 5)
    throw ShapeError(
        message(op, ": expected an input of shape (N, C, L), (N, C, H, W) or (N, C, D, H, W), got ", x.shape().str()));
  const int axes = x.dim() - 2;
  const InterpolateMode mode = o.mode();
  // The linear modes and bicubic each fit one rank: linear 3-D, bilinear and bicubic 4-D, trilinear 5-D; the
  // nearest modes and area fit all three.
  const int wanted = mode == InterpolateMode::Linear                                         ? 1
                     : mode == InterpolateMode::Bilinear || mode == InterpolateMode::Bicubic ? 2
                     : mode == InterpolateMode::Trilinear                                    ? 3
                                                                                             : axes;
  if (axes != wanted)
    throw ValueError(
        message(op, ": mode ", mode_name(mode), " needs a ", wanted + 2, "-D input, got shape ", x.shape().str()));
  if ((mode == InterpolateMode::Nearest || mode == InterpolateMode::NearestExact || mode == InterpolateMode::Area) &&
      o.align_corners())
    throw ValueError(message(op, ": align_corners is for the linear modes and bicubic, not ", mode_name(mode)));
  if (!x.is_floating_point())
    throw TypeError(message(op, ": expected a floating-point input, got ", dtype_name(x.dtype())));
  const Dims& size = o.size();
  const std::vector<double>& factor = o.scale_factor();
  if (size.empty() == factor.empty())
    throw ValueError(message(op, ": give either size or scale_factor (", size.empty() ? "neither" : "both", " given)"));
  if (!size.empty() && size.size() != 1 && size.size() != axes)
    throw ValueError(message(op, ": size takes one value or ", axes, ", got ", size.str()));
  if (!factor.empty() && factor.size() != 1 && static_cast<int>(factor.size()) != axes)
    throw ValueError(message(op, ": scale_factor takes one value or ", axes, ", got ", factor.size()));
  Tensor y = x;
  Dims sizes;
  for (int a = 0; a < axes; ++a) {
    const std::int64_t in = x.shape()[2 + a];
    std::int64_t out;
    if (!size.empty()) {
      out = size[size.size() == 1 ? 0 : a];
    } else {
      const double f = axis_factor(factor, a);
      if (!(f > 0.0)) throw ValueError(message(op, ": scale_factor must be positive, got ", f));
      out = static_cast<std::int64_t>(std::floor(static_cast<double>(in) * f));
    }
    if (out < 1 || in < 1)
      throw ValueError(message(op, ": an input of shape ", x.shape().str(), " resampled to size ", out, " along axis ",
                               2 + a, ": both must be at least 1"));
    sizes.push_back(out);
    if (mode == InterpolateMode::Area) continue;
    y = mode == InterpolateMode::Bicubic ? resample_axis_cubic(y, 2 + a, in, out, factor, a, o.align_corners())
                                         : resample_axis(y, 2 + a, axis_reads(in, out, factor, a, o));
  }
  if (mode == InterpolateMode::Area)
    return axes == 1   ? adaptive_avg_pool1d(x, sizes)
           : axes == 2 ? adaptive_avg_pool2d(x, sizes)
                       : adaptive_avg_pool3d(x, sizes);
  return y;
}

Tensor pixel_shuffle(const Tensor& x, std::int64_t r) {
  const char* op = "pixel_shuffle";
  if (x.dim() < 3) throw ShapeError(message(op, ": expected an input of shape (*, C, H, W), got ", x.shape().str()));
  const std::int64_t c = x.shape()[x.dim() - 3], h = x.shape()[x.dim() - 2], w = x.shape()[x.dim() - 1];
  if (r < 1 || c % (r * r) != 0)
    throw ValueError(message(op, ": upscale_factor ", r, " must be at least 1 and its square divide the ", c,
                             " channels of an input of shape ", x.shape().str()));
  const int lead = x.dim() - 3;
  const Tensor blocks = reshape(x, detail::lead_then_shape(x, 3, {c / (r * r), r, r, h, w}));  // (*, C, r, r, H, W)
  return reshape(permute(blocks, detail::lead_then(lead, {0, 3, 1, 4, 2})),
                 detail::lead_then_shape(x, 3, {c / (r * r), h * r, w * r}));
}

Tensor pixel_unshuffle(const Tensor& x, std::int64_t r) {
  const char* op = "pixel_unshuffle";
  if (x.dim() < 3) throw ShapeError(message(op, ": expected an input of shape (*, C, H, W), got ", x.shape().str()));
  const std::int64_t c = x.shape()[x.dim() - 3], h = x.shape()[x.dim() - 2], w = x.shape()[x.dim() - 1];
  if (r < 1 || h % r != 0 || w % r != 0)
    throw ValueError(message(op, ": downscale_factor ", r, " must be at least 1 and divide the height and width of ",
                             "an input of shape ", x.shape().str()));
  const int lead = x.dim() - 3;
  const Tensor blocks =
      reshape(x, detail::lead_then_shape(x, 3, {c, h / r, r, w / r, r}));  // (*, C, H / r, r, W / r, r)
  return reshape(permute(blocks, detail::lead_then(lead, {0, 2, 4, 1, 3})),
                 detail::lead_then_shape(x, 3, {c * r * r, h / r, w / r}));
}

}  // namespace tapegrad::nn::functional
