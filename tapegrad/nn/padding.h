#pragma once
// Padding modules with PyTorch's names: ZeroPad1d / 2d / 3d, ConstantPad1d / 2d / 3d, ReflectionPad1d / 2d / 3d,
// ReplicationPad1d / 2d / 3d and CircularPad1d / 2d / 3d (torch 2's), each functional::pad in its mode over
// the last one, two or three axes.
//
//   nn::ReflectionPad2d pad{nn::PadOptions({1, 1, 2, 0})};  // (left, right, top, bottom): H + 2, W + 2
//   nn::ConstantPad1d fill{nn::PadOptions({3}).value(-1)};  // three -1 each side of the last axis
//
// The padding is one value (every side) or two per padded axis, the last axis's pair first, as
// torch's. The modes' limits are F::pad's (a reflection smaller than the axis, and so on).

#include <cstdint>
#include <vector>

#include "tapegrad/nn/functional.h"
#include "tapegrad/nn/module.h"

namespace tapegrad::nn {

struct PadOptions {
  PadOptions(const Dims& padding) : padding_(padding) {}  // NOLINT(google-explicit-constructor)
  TAPEGRAD_ARG(Dims, padding);
  TAPEGRAD_ARG(double, value) = 0.0;  // the Constant mode's
};

// The modules below: pad the last `axes` axes in `mode`. ValueError at construction for a padding
// that is neither one value nor two per axis.
class PadImpl : public UnaryModule {
 public:
  Tensor forward(const Tensor& x) override;
  const std::vector<std::int64_t>& pads() const { return pads_; }  // two per axis, the last axis's first

 protected:
  PadImpl(const PadOptions& options, functional::PadMode mode, int axes, const char* name);

 private:
  std::vector<std::int64_t> pads_;
  functional::PadMode mode_;
  double value_;
  int axes_;
  const char* name_;
};

class ZeroPad1dImpl : public PadImpl {
 public:
  explicit ZeroPad1dImpl(const PadOptions& options)
      : PadImpl(PadOptions(options.padding()), functional::PadMode::Constant, 1, "ZeroPad1d") {}
};
TAPEGRAD_MODULE(ZeroPad1d);

class ZeroPad2dImpl : public PadImpl {
 public:
  explicit ZeroPad2dImpl(const PadOptions& options)
      : PadImpl(PadOptions(options.padding()), functional::PadMode::Constant, 2, "ZeroPad2d") {}
};
TAPEGRAD_MODULE(ZeroPad2d);

class ZeroPad3dImpl : public PadImpl {
 public:
  explicit ZeroPad3dImpl(const PadOptions& options)
      : PadImpl(PadOptions(options.padding()), functional::PadMode::Constant, 3, "ZeroPad3d") {}
};
TAPEGRAD_MODULE(ZeroPad3d);

class ConstantPad1dImpl : public PadImpl {
 public:
  explicit ConstantPad1dImpl(const PadOptions& options)
      : PadImpl(options, functional::PadMode::Constant, 1, "ConstantPad1d") {}
};
TAPEGRAD_MODULE(ConstantPad1d);

class ConstantPad2dImpl : public PadImpl {
 public:
  explicit ConstantPad2dImpl(const PadOptions& options)
      : PadImpl(options, functional::PadMode::Constant, 2, "ConstantPad2d") {}
};
TAPEGRAD_MODULE(ConstantPad2d);

class ConstantPad3dImpl : public PadImpl {
 public:
  explicit ConstantPad3dImpl(const PadOptions& options)
      : PadImpl(options, functional::PadMode::Constant, 3, "ConstantPad3d") {}
};
TAPEGRAD_MODULE(ConstantPad3d);

class ReflectionPad1dImpl : public PadImpl {
 public:
  explicit ReflectionPad1dImpl(const PadOptions& options)
      : PadImpl(options, functional::PadMode::Reflect, 1, "ReflectionPad1d") {}
};
TAPEGRAD_MODULE(ReflectionPad1d);

class ReflectionPad2dImpl : public PadImpl {
 public:
  explicit ReflectionPad2dImpl(const PadOptions& options)
      : PadImpl(options, functional::PadMode::Reflect, 2, "ReflectionPad2d") {}
};
TAPEGRAD_MODULE(ReflectionPad2d);

class ReflectionPad3dImpl : public PadImpl {
 public:
  explicit ReflectionPad3dImpl(const PadOptions& options)
      : PadImpl(options, functional::PadMode::Reflect, 3, "ReflectionPad3d") {}
};
TAPEGRAD_MODULE(ReflectionPad3d);

class ReplicationPad1dImpl : public PadImpl {
 public:
  explicit ReplicationPad1dImpl(const PadOptions& options)
      : PadImpl(options, functional::PadMode::Replicate, 1, "ReplicationPad1d") {}
};
TAPEGRAD_MODULE(ReplicationPad1d);

class ReplicationPad2dImpl : public PadImpl {
 public:
  explicit ReplicationPad2dImpl(const PadOptions& options)
      : PadImpl(options, functional::PadMode::Replicate, 2, "ReplicationPad2d") {}
};
TAPEGRAD_MODULE(ReplicationPad2d);

class ReplicationPad3dImpl : public PadImpl {
 public:
  explicit ReplicationPad3dImpl(const PadOptions& options)
      : PadImpl(options, functional::PadMode::Replicate, 3, "ReplicationPad3d") {}
};
TAPEGRAD_MODULE(ReplicationPad3d);

class CircularPad1dImpl : public PadImpl {
 public:
  explicit CircularPad1dImpl(const PadOptions& options)
      : PadImpl(options, functional::PadMode::Circular, 1, "CircularPad1d") {}
};
TAPEGRAD_MODULE(CircularPad1d);

class CircularPad2dImpl : public PadImpl {
 public:
  explicit CircularPad2dImpl(const PadOptions& options)
      : PadImpl(options, functional::PadMode::Circular, 2, "CircularPad2d") {}
};
TAPEGRAD_MODULE(CircularPad2d);

class CircularPad3dImpl : public PadImpl {
 public:
  explicit CircularPad3dImpl(const PadOptions& options)
      : PadImpl(options, functional::PadMode::Circular, 3, "CircularPad3d") {}
};
TAPEGRAD_MODULE(CircularPad3d);

}  // namespace tapegrad::nn
