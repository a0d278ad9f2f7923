#pragma once
// Everything in tapegrad::optim: optimisers (SGD, Adam, AdamW, SparseAdam, Adagrad, RMSprop, Adadelta, Adamax,
// NAdam, RAdam, Rprop, ASGD, LBFGS), gradient clipping, learning-rate schedules, ReduceLROnPlateau.

#include "tapegrad/optim/adadelta.h"
#include "tapegrad/optim/adagrad.h"
#include "tapegrad/optim/adam.h"
#include "tapegrad/optim/adam_variants.h"
#include "tapegrad/optim/asgd.h"
#include "tapegrad/optim/clip.h"
#include "tapegrad/optim/lbfgs.h"
#include "tapegrad/optim/optimizer.h"
#include "tapegrad/optim/plateau.h"
#include "tapegrad/optim/rmsprop.h"
#include "tapegrad/optim/rprop.h"
#include "tapegrad/optim/schedule.h"
#include "tapegrad/optim/sgd.h"
#include "tapegrad/optim/sparse_adam.h"
