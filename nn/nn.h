#pragma once
// The nn layer: modules, layers, initialisers.

#include "nn/init.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/moe.h"
