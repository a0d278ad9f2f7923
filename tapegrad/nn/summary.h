#pragma once
// A model summary from one forward pass, as torchinfo prints one: every module call in the order
// the calls begin, indented by depth, with the module's type, the shape of its output and its
// parameters (its own and its children's), then the totals.
//
//   nn::ModelSummary s = nn::summarize(*model, [&] { model(tokens, mask); });
//   std::cout << s.table();
//
//   Layer (type)                   Output shape    Param #     Trainable
//   ---------------------------------------------------------------------
//   (SpamClassifier)               (2,2)           1,388,418   1,388,418
//     tok_emb (Embedding)          (2,128,64)      1,280,000   1,280,000
//   ...
//
// The forward runs under NoGradGuard, in the model's current mode; the hooks it needs are removed
// afterwards, also when the forward throws. Modules the forward does not call have no row, but
// their parameters are in the totals.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tapegrad/nn/module.h"

namespace tapegrad::nn {

struct SummaryRow {
  std::string path;             // "encoder.layers.0.self_attn"; "" for the model itself
  std::string type;             // Module::name(): "MultiHeadAttention"
  std::int64_t depth = 0;       // 0 for the model, 1 for its children, ...
  std::string output;           // "(2,5,64)"; "(2,5,64), (2,5)" for a list of tensors; the type's name otherwise
  std::int64_t parameters = 0;  // elements of its parameters, children's included
  std::int64_t trainable = 0;   // those that require grad
};

struct ModelSummary {
  std::vector<SummaryRow> rows;       // one per module call, in the order the calls began
  std::int64_t total_parameters = 0;  // the model's, whether called or not
  std::int64_t trainable_parameters = 0;
  std::int64_t parameter_bytes = 0;
  std::int64_t buffer_bytes = 0;

  // The rows as a fixed-width table, then the totals (counts with thousands separators).
  std::string table() const;
};

// Runs forward() once with a hook on every module of model and collects the rows.
// ValueError for an empty forward.
ModelSummary summarize(Module& model, const std::function<void()>& forward);

}  // namespace tapegrad::nn
