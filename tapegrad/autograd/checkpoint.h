#pragma once
// Activation checkpointing: trade compute for memory. checkpoint(fn, inputs) runs fn as usual,
// but the tensors its ops save for backward are dropped as soon as they are saved (through the
// saved-tensor hooks of graph.h); the first time backward needs one of them, fn is run again on
// the same inputs to rebuild them all, and the backward goes on with those.
//
//   // Each block's activations live only while its own backward runs.
//   for (auto& block : blocks)
//     h = autograd::checkpoint([&](const TensorList& in) { return block(in[0]); }, {h});
//
// fn must compute the same thing twice: the same ops in the same order on the same values. The
// calling thread's default generator is rewound for the rerun, so dropout drawing from it draws
// the same masks; other generators fn draws from are listed in `generators` to be rewound too.
// The gradient of a checkpointed segment cannot itself be differentiated (create_graph through it
// is a GraphError): the rebuilt tensors carry no history.

#include <functional>
#include <vector>

#include "tapegrad/autograd/generator.h"
#include "tapegrad/autograd/graph.h"
#include "tapegrad/autograd/tensor.h"

namespace tapegrad::autograd {

using CheckpointFunction = std::function<Tensor(const TensorList& inputs)>;

Tensor checkpoint(const CheckpointFunction& fn, const TensorList& inputs,
                  const std::vector<Generator*>& generators = {});

}  // namespace tapegrad::autograd
