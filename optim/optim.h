// Everything in tapegrad::optim: optimisers, clipping, learning-rate schedules, the training loop.
#pragma once

#include "optim/adam.h"
#include "optim/clip.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "optim/sgd.h"
#include "optim/trainer.h"
