#pragma once
// The Trainer's checkpoint directory, run_dir/checkpoint/:
//   model.safetensors      model.state_dict()
//   optimizer.safetensors  optimizer.state_tensors()
//   ema.safetensors        ModelEma::state(), when the Trainer has one (set_ema)
//   trainer.json           {"format":"tapegrad.trainer","version":2,"step":k,"scheduler_step":..|null,
//                           "optimizer_steps":..,"generators":{name: state},"lrs":[per group],"loss":..,
//                           "elapsed_s":..,"early_stopping":null|{"metric":..,"best":..,"best_step":..,
//                           "bad_evals":..},"plateau":null|{"metric":..,"mode":"min"|"max","best":..|"inf"|"-inf","bad_evals":..,
//                           "cooldown_counter":..,"evals":..},"log_interval":{"steps":..,"loss_sum":..},
//                           "accumulation_steps":k,"ema":bool,"checksum":"<CRC-32>"}
// The checksum covers the rest of trainer.json (its compact JSON with sorted keys), and the
// safetensors files carry per-tensor checksums and the step in their metadata: a changed bit in any
// of the files, or files from two different saves, are an IoError at load. Version 1 files (before
// checksums) are still read.
// A save writes checkpoint.tmp-XXXXXX/ (every file fsynced), renames checkpoint/ to checkpoint.old/, the
// new directory to checkpoint/, fsyncs run_dir, then removes checkpoint.old/: a crash at any point leaves
// one complete checkpoint. Loading falls back to checkpoint.old/ when checkpoint/ is missing, and both
// remove leftover checkpoint.tmp-* directories. Trainer::save_checkpoint / load_checkpoint use these.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tapegrad/autograd/graph.h"
#include "tapegrad/optim/plateau.h"

namespace tapegrad::train {

// What trainer.json holds.
struct CheckpointState {
  std::int64_t step = 0;
  std::int64_t scheduler_step = -1;                             // -1: no scheduler (null in the file)
  std::int64_t optimizer_steps = -1;                            // Optimizer::steps_taken(); -1: version 1
  std::vector<std::pair<std::string, std::string>> generators;  // name, Generator::state()
  std::vector<double> lrs;                                      // per parameter group
  double loss = 0.0;
  double elapsed_s = 0.0;
  // Early stopping (absent from files written without it: metric empty).
  std::string early_metric;
  double best = 0.0;
  std::int64_t best_step = -1;  // -1: no evaluation yet
  std::int64_t bad_evals = 0;
  // A plateau scheduler's counters (absent from files written without one: metric empty).
  std::string plateau_metric;
  optim::PlateauMode plateau_mode = optim::PlateauMode::Min;
  optim::PlateauState plateau;
  // The steps since the last metrics line and the sum of their losses (absent from older files: 0).
  std::int64_t interval_steps = 0;
  double interval_loss_sum = 0.0;
  std::int64_t accumulation_steps = 1;  // micro-batches per step (absent from older files: 1)
  bool ema = false;                     // ema.safetensors holds a ModelEma's state (absent: false)
};

// Writes run_dir/checkpoint/ as above (creating run_dir if needed). IoError naming the path on failure,
// which leaves the previous checkpoint in place.
// With state.ema, `ema` (ModelEma::state()) goes to ema.safetensors beside them.
void write_checkpoint(const std::string& run_dir, const NamedTensors& model, const NamedTensors& optimizer,
                      const CheckpointState& state, const NamedTensors& ema = {});

// Removes leftover checkpoint.tmp-* directories, then returns run_dir/checkpoint, or run_dir/checkpoint.old
// when only that exists, or "" when there is no checkpoint.
std::string find_checkpoint(const std::string& run_dir);

// Reads and checks a trainer.json: IoError naming the file and the field when it is unreadable, not the
// format above, or holds a value of the wrong type or sign.
CheckpointState read_trainer_json(const std::string& file);
// IoError "Trainer: checkpoint file <file>: field '<name>' <why>".
[[noreturn]] void bad_field(const std::string& file, const std::string& name, const std::string& why);

// The step of the checkpoint a resume would use, -1 when there is none or it is unreadable.
std::int64_t checkpoint_step_on_disk(const std::string& run_dir);

}  // namespace tapegrad::train
