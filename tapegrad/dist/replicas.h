#pragma once
// The Trainer's view of a process group (train::Replicas): rank 0 writes the run's files, losses and
// metrics are averaged over the ranks, and every rank stops at the same step.
//
//   dist::ProcessGroup world = dist::init();
//   train::TrainerOptions options;
//   options.replicas = dist::replicas(world);

#include "tapegrad/dist/process_group.h"
#include "tapegrad/train/trainer.h"

namespace tapegrad::dist {

train::Replicas replicas(const ProcessGroup& group);

}  // namespace tapegrad::dist
