#pragma once
// Averaging the weights of a run's last checkpoints into one model file (as fairseq's and
// Vaswani et al.'s recipes average the last few checkpoints of a transformer).
//
// A Trainer with keep_checkpoints = k keeps, beside checkpoint/, the model of each of its last k
// checkpoints as run_dir/checkpoints/model-<step>.safetensors (written after the checkpoint, older
// ones removed; a fresh run removes those an earlier run left, a resumed run those past its
// checkpoint). Then:
//
//   auto files = train::kept_checkpoints("runs/lm");              // oldest first
//   train::average_checkpoints(files, "runs/lm/averaged.safetensors");
//   model->load_state_dict(io::load_safetensors("runs/lm/averaged.safetensors").tensors);

#include <cstdint>
#include <string>
#include <vector>

#include "tapegrad/autograd/graph.h"
#include "tapegrad/autograd/tensor.h"

namespace tapegrad::train {

// The kept model files of run_dir (run_dir/checkpoints/model-<step>.safetensors), ordered by step,
// oldest first; the last `last` of them when last > 0. Empty when there are none.
std::vector<std::string> kept_checkpoints(const std::string& run_dir, std::int64_t last = 0);

// The step in a kept model file's name (".../model-<step>.safetensors"), or -1 for another name.
std::int64_t kept_checkpoint_step(const std::string& path);

// The mean of the models in `files` (safetensors files with the same entries: names, shapes and
// dtypes), computed in float64 and stored in each entry's dtype; entries that are not floating point
// (counters, masks) must be equal in every file and are copied. Returns the averaged tensors and,
// when out_path is not empty, writes them there atomically with the metadata "averaged_from" (the
// files, comma-separated). ValueError for no files; IoError for an unreadable file; ValueError /
// ShapeError / TypeError naming the file and the entry for a missing, extra or mismatching one.
NamedTensors average_checkpoints(const std::vector<std::string>& files, const std::string& out_path = "");

}  // namespace tapegrad::train
