#pragma once
// The nn layer: modules, layers, initialisers.

#include "tapegrad/nn/attention.h"
#include "tapegrad/nn/functional.h"
#include "tapegrad/nn/init.h"
#include "tapegrad/nn/layers.h"
#include "tapegrad/nn/linear.h"
#include "tapegrad/nn/losses.h"
#include "tapegrad/nn/module.h"
#include "tapegrad/nn/moe.h"
#include "tapegrad/nn/transformer.h"
#include "tapegrad/nn/positions.h"
