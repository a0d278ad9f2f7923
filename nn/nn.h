#pragma once
// The nn layer: modules, layers, initialisers.

#include "nn/attention.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/linear.h"
#include "nn/losses.h"
#include "nn/module.h"
#include "nn/moe.h"
#include "nn/transformer.h"
#include "nn/positions.h"
