#pragma once
// The nn layer: module handles, layers, attention, transformers, MoE, losses, functional forms.

#include "tapegrad/nn/alignment.h"
#include "tapegrad/nn/attention.h"
#include "tapegrad/nn/decoding.h"
#include "tapegrad/nn/functional.h"
#include "tapegrad/nn/init.h"
#include "tapegrad/nn/latent_attention.h"
#include "tapegrad/nn/layers.h"
#include "tapegrad/nn/linear.h"
#include "tapegrad/nn/losses.h"
#include "tapegrad/nn/module.h"
#include "tapegrad/nn/moe.h"
#include "tapegrad/nn/positions.h"
#include "tapegrad/nn/recurrent.h"
#include "tapegrad/nn/routing.h"
#include "tapegrad/nn/similarity.h"
#include "tapegrad/nn/transformer.h"
