#pragma once
// Everything in tapegrad::train: the Trainer (training loop) and its metrics file, progress display and
// checkpoint directory; the moving average of weights (ModelEma), checkpoint averaging, and TensorBoard
// event files (SummaryWriter).

#include "tapegrad/train/average.h"
#include "tapegrad/train/checkpoint.h"
#include "tapegrad/train/ema.h"
#include "tapegrad/train/lr_finder.h"
#include "tapegrad/train/metrics.h"
#include "tapegrad/train/progress.h"
#include "tapegrad/train/tensorboard.h"
#include "tapegrad/train/trainer.h"
