#pragma once
// The learning-rate range test (Smith 2017; the "LR finder" of fastai and torch-lr-finder): train for a
// few steps with a learning rate that grows exponentially from start_lr to end_lr, record the loss at
// each, stop once the loss has clearly diverged, and suggest the rate where the smoothed loss falls
// fastest. Model and optimiser are put back as they were afterwards, so the real run starts from the
// same weights.
//
//   train::LrRangeTest test = train::lr_range_test(model, optimizer, [&](std::int64_t step) {
//     const data::Batch batch = loader.batch_at(step);
//     return nn::cross_entropy(model(batch.input), batch.labels);
//   });
//   test.save_svg("runs/x/lr_range_test.svg");     // loss against learning rate, the suggestion marked
//   optimizer.set_lr(0, test.suggested_lr);

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tapegrad/autograd/arg.h"
#include "tapegrad/autograd/tensor.h"
#include "tapegrad/nn/module.h"
#include "tapegrad/optim/optimizer.h"

namespace tapegrad::train {

struct LrRangeTestOptions {
  TAPEGRAD_ARG(double, start_lr) = 1e-7;
  TAPEGRAD_ARG(double, end_lr) = 10.0;
  TAPEGRAD_ARG(std::int64_t, steps) = 100;  // lr_i = start_lr * (end_lr / start_lr)^(i / (steps - 1))
  // The loss is smoothed by an exponential moving average with this factor (bias-corrected, as Adam's
  // moments), and the test stops when the smoothed loss exceeds `divergence` times the lowest seen.
  TAPEGRAD_ARG(double, smoothing) = 0.98;
  TAPEGRAD_ARG(double, divergence) = 4.0;
  // Put the parameters, buffers and the optimiser's state and learning rates back afterwards.
  TAPEGRAD_ARG(bool, restore) = true;
};

struct LrRangeTest {
  std::vector<double> lrs;       // the rate of each step taken
  std::vector<double> losses;    // its loss, as returned
  std::vector<double> smoothed;  // the moving average
  bool diverged = false;         // stopped before `steps` because the loss diverged (or became NaN/inf)
  // The rate at the steepest descent of the smoothed loss against log(lr), among the steps before the
  // lowest smoothed loss (central differences); min_loss_lr / 10 when there are fewer than 3 such steps.
  double suggested_lr = 0.0;
  double min_loss_lr = 0.0;  // the rate at the lowest smoothed loss

  // Loss and smoothed loss against the learning rate (log axis), with the suggested rate marked.
  std::string svg() const;
  // Writes svg() atomically (IoError naming the path).
  void save_svg(const std::string& path) const;
};

// Runs the test: for each step i, sets every parameter group's lr to lr_i, zeroes the gradients, calls
// loss_fn(i) (a scalar loss of the model on the step's batch), backpropagates and steps the optimiser.
// ValueError for start_lr <= 0, end_lr <= start_lr, steps < 2, smoothing outside [0, 1) or divergence
// <= 1; an exception from loss_fn propagates after the model and optimiser are restored.
LrRangeTest lr_range_test(nn::Module& model, optim::Optimizer& optimizer,
                          const std::function<Tensor(std::int64_t step)>& loss_fn,
                          const LrRangeTestOptions& options = {});

}  // namespace tapegrad::train
