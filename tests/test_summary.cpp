// nn::summarize (tapegrad/nn/summary.h): one row per module call with its output shape and
// parameter counts, totals that include modules the forward never calls, outputs of any type, and
// the hooks gone afterwards.

#include <doctest/doctest.h>

#include <string>

#include "tapegrad/autograd/error.h"
#include "tapegrad/nn/nn.h"

using namespace tapegrad;

TEST_CASE("summary: a Sequential's rows, shapes, counts and totals") {
  Generator gen(0);
  nn::Sequential model(nn::Linear(nn::LinearOptions(4, 8).generator(&gen)), nn::ReLU(),
                       nn::Linear(nn::LinearOptions(8, 2).generator(&gen)));
  model->named_parameters()[2].second.requires_grad_(false);  // the second Linear's weight (16) frozen
  const Tensor x = zeros({3, 4});
  const nn::ModelSummary s = nn::summarize(*model, [&] { model(x); });
  REQUIRE(s.rows.size() == 4);
  CHECK(s.rows[0].path == "");
  CHECK(s.rows[0].type == "Sequential");
  CHECK(s.rows[0].depth == 0);
  CHECK(s.rows[0].output == "(3,2)");
  CHECK(s.rows[0].parameters == 58);
  CHECK(s.rows[0].trainable == 42);
  CHECK(s.rows[1].path == "0");
  CHECK(s.rows[1].type == "Linear");
  CHECK(s.rows[1].depth == 1);
  CHECK(s.rows[1].output == "(3,8)");
  CHECK(s.rows[1].parameters == 40);
  CHECK(s.rows[2].type == "ReLU");
  CHECK(s.rows[2].parameters == 0);
  CHECK(s.rows[3].output == "(3,2)");
  CHECK(s.rows[3].parameters == 18);
  CHECK(s.rows[3].trainable == 2);
  CHECK(s.total_parameters == 58);
  CHECK(s.trainable_parameters == 42);
  CHECK(s.parameter_bytes == 58 * 4);
  const std::string table = s.table();
  CAPTURE(table);
  CHECK(table.find("Layer (type)") == 0);
  CHECK(table.find("  2 (Linear)") != std::string::npos);
  CHECK(table.find("Total parameters: 58\n") != std::string::npos);
  CHECK(table.find("Non-trainable parameters: 16\n") != std::string::npos);
  // No hook is left behind, and the forward ran without recording a graph.
  CHECK_FALSE(model->has_forward_hooks());
  for (const auto& [path, m] : model->named_modules()) CHECK_FALSE(m->has_forward_hooks());
}

TEST_CASE("summary: nested modules, outputs that are not tensors, uncalled modules and a throwing forward") {
  nn::TransformerEncoder encoder(nn::TransformerLayerOptions(8, 2).dim_feedforward(16), 2);
  const Tensor x = zeros({2, 5, 8});
  const nn::ModelSummary s = nn::summarize(*encoder, [&] { encoder(x); });
  CHECK(s.total_parameters == encoder->num_parameters());
  bool saw_attention = false;
  for (const nn::SummaryRow& row : s.rows) {
    CAPTURE(row.path);
    CHECK_FALSE(row.output.empty());
    if (row.type == "MultiHeadAttention") {
      saw_attention = true;
      CHECK(row.output == "AttentionResult");  // a struct: its type's name
      CHECK(row.depth == 3);                   // layers.0.self_attn
    }
  }
  CHECK(saw_attention);
  CHECK(s.table().find("Total parameters: ") != std::string::npos);

  // A module never called has no row, but its parameters count.
  Generator gen(1);
  const nn::Linear first(nn::LinearOptions(2, 2).generator(&gen));
  nn::Sequential two(first, nn::Linear(nn::LinearOptions(2, 3).generator(&gen)));
  const nn::ModelSummary partial = nn::summarize(*two, [&] { first(zeros({1, 2})); });
  REQUIRE(partial.rows.size() == 1);
  CHECK(partial.rows[0].path == "0");
  CHECK(partial.total_parameters == 6 + 9);

  CHECK_THROWS_AS(nn::summarize(*two, [&] { first(zeros({1, 5})); }), ShapeError);
  for (const auto& [path, m] : two->named_modules()) CHECK_FALSE(m->has_forward_hooks());
  CHECK_THROWS_WITH_AS(nn::summarize(*two, {}), "summarize: the forward function is empty", ValueError);
}
