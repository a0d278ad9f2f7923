#pragma once
// Everything in tapegrad::optim: optimisers, gradient clipping, learning-rate schedules.

#include "tapegrad/optim/adam.h"
#include "tapegrad/optim/clip.h"
#include "tapegrad/optim/optimizer.h"
#include "tapegrad/optim/schedule.h"
#include "tapegrad/optim/sgd.h"
