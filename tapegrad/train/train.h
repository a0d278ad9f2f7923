#pragma once
// Everything in tapegrad::train: the Trainer (training loop, metrics, progress, checkpoints).

#include "tapegrad/train/trainer.h"
