#pragma once
// W3's model on tapegrad (docs/bench.md): the decoder-only language model both tapegrad_bench and
// tapegrad_ddp_bench train, drawn from the default generator seeded 0.
#include "bench/bench_common.h"
#include "tapegrad/nn/nn.h"

namespace bench {

inline tapegrad::nn::LanguageModel w3_model() {
  using namespace tapegrad;
  using C = LmConfig;
  manual_seed(0);
  return nn::LanguageModel{nn::LanguageModelOptions()
                               .vocab_size(C::kVocab)
                               .max_len(C::kLength)
                               .num_layers(C::kLayers)
                               .layer(nn::TransformerLayerOptions(C::kDModel, C::kHeads)
                                          .dim_feedforward(C::kFfn)
                                          .activation(nn::Activation::GELU)
                                          .dropout(0.0)
                                          .norm_first(true))};
}

}  // namespace bench
