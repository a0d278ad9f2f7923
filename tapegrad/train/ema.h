#pragma once
// ModelEma: an exponential moving average of a model's weights, the copy many recipes evaluate and
// ship (Polyak averaging). After each optimiser step every floating-point entry of the model's
// state_dict (parameters and buffers) moves its average toward the new value,
//   average = d * average + (1 - d) * value,
// with d = decay, or with warm-up d = min(decay, (1 + n) / (10 + n)) where n counts the earlier
// updates, so that the average follows the fast early changes instead of remembering the random
// initial weights; entries of other dtypes (counters, masks) are copied. The averages start as a
// copy of the model.
//
//   train::ModelEma ema(model, train::EmaOptions().decay(0.999));
//   trainer.set_ema(&ema, /*evaluate_on_ema=*/true);   // updated after each step, kept in checkpoints
//   ...
//   {
//     auto applied = ema.apply();   // the model holds the averages until `applied` goes away
//     evaluate(model);
//   }
//   io::save_safetensors("ema.safetensors", ema.averages());   // the averaged model's state_dict

#include <cstdint>

#include "tapegrad/autograd/arg.h"
#include "tapegrad/autograd/tensor.h"
#include "tapegrad/nn/module.h"

namespace tapegrad::train {

struct EmaOptions {
  TAPEGRAD_ARG(double, decay) = 0.999;  // in [0, 1]
  TAPEGRAD_ARG(bool, warmup) = true;    // d = min(decay, (1 + n) / (10 + n))
};

class ModelEma {
 public:
  // Keeps a reference to model, which must outlive the average. ValueError for a decay outside [0, 1].
  explicit ModelEma(nn::Module& model, EmaOptions options = {});

  // One step of the average toward the model's current values (without recording on the tape).
  void update();
  // The decay the next update uses.
  double next_decay() const;
  std::int64_t updates() const { return updates_; }

  // The averaged state_dict: the model's names and shapes, the averages as values (copies).
  NamedTensors averages() const;
  // What a checkpoint keeps: the averages and "num_updates" (an Int64 scalar).
  NamedTensors state() const;
  // Restores state(): every average by name, and num_updates. ValueError / ShapeError naming the entry
  // for a missing, unexpected or mismatching one; on any error nothing changes.
  void load_state(const NamedTensors& state);

  // Puts the averages into the model until the returned guard is destroyed, which puts the model's own
  // values back (for evaluating the averaged weights in the middle of training).
  class Applied {
   public:
    Applied(Applied&& other) noexcept;
    Applied(const Applied&) = delete;
    Applied& operator=(const Applied&) = delete;
    Applied& operator=(Applied&&) = delete;
    ~Applied();

   private:
    friend class ModelEma;
    Applied(nn::Module& model, NamedTensors saved) : model_(&model), saved_(std::move(saved)) {}
    nn::Module* model_;
    NamedTensors saved_;  // the model's own values
  };
  [[nodiscard]] Applied apply() const;

 private:
  nn::Module& model_;
  EmaOptions options_;
  NamedTensors average_;  // one per state_dict entry, in its order
  std::int64_t updates_ = 0;
};

}  // namespace tapegrad::train
