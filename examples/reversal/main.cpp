// sequence_reversal: a small encoder-decoder transformer learns to reverse strings over the
// alphabet a-e (the second exercise of the lecture "implementing a transformer", done with a
// real multi-head, multi-layer model), and is then asked to reverse longer strings than it was
// trained on, once for each way of telling it positions: learned, sinusoidal and rotary.
//
//   data     500 random strings of length 10 (seed 0) for training, 100 other strings of
//            length 10 held out, 100 strings of length 15 for the length-generalisation test
//   tokens   <pad> 0, <sos> 1, <eos> 2, a..e 3..7
//   source   the string;  decoder input  <sos> + reversed;  target  reversed + <eos>
//   model    pre-norm EncoderDecoder, d_model 64, 4 heads, 2 + 2 layers, FFN 256 with ReLU, no
//            dropout, causal decoder self-attention, cross-attention, Linear(64, 8) on top
//   loss     cross-entropy over every target position;  Adam lr 1e-3, batch 32
//   metric   exact match of greedy decoding (every letter and the final <eos>), and the fraction
//            of target positions decoded correctly
//
// Files (run_dir, default runs/sequence_reversal/): config.json, summary.json, loss.svg with one
// curve per encoding, and per encoding <encoding>/metrics.jsonl, <encoding>/checkpoint/,
// <encoding>/loss.svg and cross_attention_<encoding>.svg: the decoder's cross-attention
// weights (mean over heads, one panel per layer) for one held-out string. Reversal shows as
// the anti-diagonal: the decoder step that writes the i-th letter of the reversed string looks
// at source position L-1-i.
//
// The pieces: reversal.h (options, data, measures), data.cpp, and this file (training and report).
//
// Usage: sequence_reversal [--config FILE] [--key value ...]   (--help lists the keys)

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "examples/common/run_dir.h"
#include "examples/common/svg.h"
#include "examples/reversal/reversal.h"
#include "tapegrad/optim/optim.h"
#include "tapegrad/train/trainer.h"

using namespace tapegrad;
using namespace tapegrad::examples::reversal;
using examples::Config;
using examples::ConfigError;

namespace {

using C = ReversalConfig;

struct EncodingResult {
  Accuracy heldout, long_match;
  double seconds = 0, final_loss = 0;
  std::int64_t steps = 0;
  std::int64_t first_perfect_step = -1;  // first evaluation with 100% held-out exact match
};

// One panel per decoder layer: (T_tgt, S) weights averaged over heads.
std::vector<examples::HeatMap> cross_attention_panels(const nn::EncoderDecoder& model, const Tensors& set,
                                                      std::int64_t index) {
  NoGradGuard no_grad;
  model->eval();
  const Tensor src = set.src.narrow(0, index, 1).contiguous();        // (1, L)
  const Tensor tgt_in = set.tgt_in.narrow(0, index, 1).contiguous();  // (1, L + 1)
  const std::vector<Tensor> weights =
      model->decode(tgt_in, model->encode(src), {}, nn::AttentionForwardOptions().need_weights(true)).cross_weights;
  model->train();
  std::vector<std::string> cols, rows;
  for (std::int64_t s = 0; s < src.shape()[1]; ++s)
    cols.push_back(kTokenNames[static_cast<std::size_t>(src.at({0, s}))] + std::to_string(s));
  for (std::int64_t t = 0; t < tgt_in.shape()[1]; ++t)
    rows.push_back(kTokenNames[static_cast<std::size_t>(tgt_in.at({0, t}))]);
  std::vector<examples::HeatMap> panels;
  for (std::size_t layer = 0; layer < weights.size(); ++layer) {
    const Tensor mean = weights[layer].mean({1}).select(0, 0);  // (1, H, T, S) -> (T, S)
    examples::HeatMap map;
    map.title = "decoder layer " + std::to_string(layer) + " (mean of heads)";
    map.row_labels = rows;
    map.col_labels = cols;
    map.x_label = "source letter and position";
    map.y_label = "decoder input";
    map.min = 0.0;
    map.max = 1.0;
    for (std::int64_t t = 0; t < mean.shape()[0]; ++t) {
      std::vector<double> row;
      for (std::int64_t s = 0; s < mean.shape()[1]; ++s) row.push_back(mean.at({t, s}));
      map.values.push_back(std::move(row));
    }
    panels.push_back(std::move(map));
  }
  return panels;
}

EncodingResult train_one(const ReversalConfig& config, const std::string& encoding, const data::Dataset& train_set,
                         const Tensors& heldout, const Tensors& long_set, const examples::RunDir& run) {
  const std::int64_t vocab = static_cast<std::int64_t>(kTokenNames.size());
  // The same initial weights' seed for every encoding, so they differ in positions only.
  Generator init(static_cast<std::uint64_t>(config.seed) + 1);
  nn::EncoderDecoder model{nn::EncoderDecoderOptions()
                               .src_vocab(vocab)
                               .tgt_vocab(vocab)
                               .max_len(config.max_len)
                               .encoder_layers(config.encoder_layers)
                               .decoder_layers(config.decoder_layers)
                               .positions(encoding == "learned"      ? nn::PositionEncoding::Learned
                                          : encoding == "sinusoidal" ? nn::PositionEncoding::Sinusoidal
                                                                     : nn::PositionEncoding::Rotary)
                               .layer(nn::TransformerLayerOptions(config.d_model, config.heads)
                                          .dim_feedforward(config.ff_hidden)
                                          .activation(nn::Activation::ReLU)
                                          .dropout(config.dropout)
                                          .norm_first(true))
                               .generator(&init)};
  optim::Adam optimizer(model->parameters(), optim::AdamOptions(config.lr));

  data::DataLoaderOptions loader_options;
  loader_options.batch_size = config.batch_size;
  loader_options.seed = static_cast<std::uint64_t>(config.seed);
  loader_options.pad_id = kPad;
  const data::DataLoader loader(train_set, loader_options);

  examples::RunDir dir(run.file(encoding));
  if (!config.resume) dir.clear_previous_run();
  train::TrainerOptions trainer_options;
  trainer_options.max_steps = config.steps;
  trainer_options.steps_per_epoch = loader.batches_per_epoch();
  trainer_options.log_every = config.log_every;
  trainer_options.eval_every = config.eval_every;
  trainer_options.checkpoint_every = config.checkpoint_every;
  trainer_options.run_dir = dir.path();
  trainer_options.resume = config.resume;
  trainer_options.progress = train::parse_progress(config.progress);
  train::Trainer trainer(model, optimizer, trainer_options);

  EncodingResult result;
  const auto step_fn = [&](std::int64_t step) {
    const data::Batch batch = loader.batch_at(step);
    const std::int64_t t = batch.target.shape()[1];
    const Tensor tgt_in = batch.target.narrow(1, 0, t - 1).contiguous();   // (B, L + 1)
    const Tensor tgt_out = batch.target.narrow(1, 1, t - 1).contiguous();  // (B, L + 1)
    const Tensor logits = model(batch.input, tgt_in);                      // (B, L + 1, V)
    return train::StepOutput{sequence_loss(logits, tgt_out), batch.size(), batch.tokens + batch.target_tokens};
  };
  const auto eval_fn = [&](std::int64_t /*step*/) {
    const double match = greedy_accuracy(model, heldout).exact;
    const Tensor logits = model(heldout.src, heldout.tgt_in);
    return std::map<std::string, double>{{"val_loss", sequence_loss(logits, heldout.tgt_out).item()},
                                         {"heldout_exact_match", match}};
  };
  std::cerr << "sequence_reversal: training with " << encoding << " positions (" << model->num_parameters()
            << " parameters)\n";
  const train::TrainResult trained = trainer.fit(step_fn, eval_fn);
  result.steps = trained.steps;
  // From the metrics file rather than the evaluations of this call, which a resumed run only half saw.
  for (const nlohmann::json& line : examples::read_jsonl(dir.file("metrics.jsonl")))
    if (line.contains("eval") && line.at("eval").value("heldout_exact_match", 0.0) == 1.0) {
      result.first_perfect_step = line.at("step").get<std::int64_t>();
      break;
    }
  result.seconds = trained.total_seconds;
  result.final_loss = trained.final_loss;
  result.heldout = greedy_accuracy(model, heldout);
  result.long_match = greedy_accuracy(model, long_set);
  dir.write_loss_plot("sequence reversal, " + encoding + " positions");

  const std::int64_t example = config.heatmap_example;
  examples::write_svg(run.file("cross_attention_" + encoding + ".svg"),
                      examples::heat_map_svg(
                          cross_attention_panels(model, heldout, example),
                          "cross-attention, " + encoding + " positions, held-out string " + std::to_string(example)));
  return result;
}

int run(const Config& options) {
  const ReversalConfig config = examples::read_config<ReversalConfig>(options);
  validate(config);
  const std::int64_t alphabet = config.alphabet;
  Generator gen(static_cast<std::uint64_t>(config.seed));
  std::set<std::vector<std::int64_t>> seen;
  const Strings train = random_strings(config.train_size, config.train_length, alphabet, gen, seen);
  const Strings heldout = random_strings(config.heldout_size, config.train_length, alphabet, gen, seen);
  const Strings longer = random_strings(config.long_size, config.long_length, alphabet, gen, seen);
  const data::Dataset train_set = to_dataset(train);
  const Tensors heldout_tensors = to_tensors(heldout);
  const Tensors long_tensors = to_tensors(longer);

  examples::RunDir run(config.run_dir);
  const std::vector<std::string> all_encodings = {"learned", "sinusoidal", "rotary"};
  if (config.resume) {
    run.check_same_config(options, {examples::key_of(&C::resume), examples::key_of(&C::checkpoint_every),
                                    examples::key_of(&C::progress)});
  } else {
    // A fresh run: nothing of an earlier one (another --positions, say) may be left beside it.
    run.clear_previous_run();
    for (const std::string& encoding : all_encodings) {
      std::error_code error;
      std::filesystem::remove_all(run.file(encoding), error);
      std::filesystem::remove(run.file("cross_attention_" + encoding + ".svg"), error);
    }
  }
  run.write_config(options);
  std::vector<std::string> encodings = all_encodings;
  if (config.positions != "all") encodings = {config.positions};

  nlohmann::json heldout_json, long_json, heldout_tokens_json, long_tokens_json, seconds_json, loss_json, perfect_json;
  examples::LinePlot plot;
  plot.title = "sequence reversal: training loss";
  plot.x_label = "step";
  plot.y_label = "loss";
  plot.log_y = true;
  std::int64_t steps = 0;
  double total_seconds = 0;
  for (const std::string& encoding : encodings) {
    const EncodingResult r = train_one(config, encoding, train_set, heldout_tensors, long_tensors, run);
    heldout_json[encoding] = r.heldout.exact;
    long_json[encoding] = r.long_match.exact;
    heldout_tokens_json[encoding] = r.heldout.tokens;
    long_tokens_json[encoding] = r.long_match.tokens;
    seconds_json[encoding] = r.seconds;
    loss_json[encoding] = r.final_loss;
    perfect_json[encoding] = r.first_perfect_step >= 0 ? nlohmann::json(r.first_perfect_step) : nlohmann::json(nullptr);
    steps = r.steps;
    total_seconds += r.seconds;
    std::printf(
        "%-10s  held-out exact match %.3f (tokens %.3f)  length-%lld exact match %.3f (tokens %.3f)  (%lld steps, %.1f "
        "s)\n",
        encoding.c_str(), r.heldout.exact, r.heldout.tokens, static_cast<long long>(config.long_length),
        r.long_match.exact, r.long_match.tokens, static_cast<long long>(r.steps), r.seconds);
    std::fflush(stdout);
    examples::Series series{encoding, {}, {}};
    for (const nlohmann::json& line : examples::read_jsonl(run.file(encoding + "/metrics.jsonl")))
      if (line.contains("loss")) {
        series.x.push_back(line["step"].get<double>());
        series.y.push_back(line["loss"].get<double>());
      }
    plot.series.push_back(std::move(series));
  }
  examples::write_svg(run.file("loss.svg"), examples::line_plot_svg(plot));
  const nlohmann::json summary = {
      {"heldout_exact_match", heldout_json},
      {"long_exact_match", long_json},
      {"heldout_token_accuracy", heldout_tokens_json},
      {"long_token_accuracy", long_tokens_json},
      {"train_seconds", seconds_json},
      {"train_seconds_total", total_seconds},
      {"steps", steps},
      {"final_loss", loss_json},
      {"first_step_heldout_all_correct", perfect_json},
      {"train_length", config.train_length},
      {"long_length", config.long_length},
  };
  run.write_summary(summary);
  std::printf("summary written to %s\n", run.file("summary.json").c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Config config = examples::make_config<ReversalConfig>(
      "sequence_reversal",
      "an encoder-decoder transformer learns to reverse strings of a-e and is tested on longer ones, "
      "with learned, sinusoidal and rotary positions");
  if (const int status = examples::parse_command_line(config, argc, argv, 1, nullptr); status >= 0) return status;
  try {
    return run(config);
  } catch (const ConfigError& e) {
    std::cerr << e.what() << "\n";
    return examples::kConfigErrorExit;
  } catch (const Error& e) {
    std::cerr << "sequence_reversal: " << e.what() << "\n";
    return 1;
  }
}
