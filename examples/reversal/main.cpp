// sequence_reversal: models learn to reverse strings over the alphabet a-e (the second exercise
// of the lecture "implementing a transformer") on strings of up to 10 letters, and are then asked
// to reverse strings of other lengths, shorter and longer, to see which of them learned the rule
// rather than the training lengths:
//
//   data     2000 random strings of 1 to 10 letters (seed 0) for training; 100 other strings of
//            length 10 held out; 100 strings of each length 5, 10, 12, 15, 20 and 30 for the test
//   tokens   <pad> 0, <sos> 1, <eos> 2, a..e 3..7
//   models   transformers (pre-norm EncoderDecoder, d_model 64, 4 heads, 2 + 2 layers, FFN 256) with
//            learned, sinusoidal or rotary positions; seq2seq, a recurrent encoder-decoder with
//            attention (bidirectional LSTM encoder, LSTM decoder, hidden 64, Luong's general
//            score); pointer, a pointer network (the same encoder, additive attention over the
//            source positions is its output, its decoder fed the encoder state it pointed at);
//            pointer_location, the same with location-aware attention (it sees where it pointed
//            the step before) and a decoder without state across steps
//   loss     cross-entropy over every target position (the pointer's targets are positions);
//            Adam lr 1e-3, batch 32, 2000 steps; each model trained with 3 seeds
//   metric   exact match (every letter and the final <eos>) and token accuracy, by length, with
//            greedy decoding and with beam search (4 beams)
//
// Files (run_dir, default runs/sequence_reversal/): config.json, summary.json
// (exact_match_by_length and token_accuracy_by_length per model and decoder, means over seeds,
// and per seed), loss.svg with one curve per model (first seed), per model and seed
// <model>/seed_<k>/metrics.jsonl and checkpoint/, and attention_<model>.svg: the decoder's
// attention over the source for one string of length 15 (first seed). Reversal shows as the
// anti-diagonal: the step that writes the i-th letter of the reversed string looks at source
// position L-1-i.
//
// The pieces: reversal.h (options, data, models, measures), data.cpp, models.cpp, and this file
// (training and report).
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

#include "examples/common/data_parallel.h"
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

// One model trained with one seed, and its evaluations.
struct RunResult {
  Accuracy heldout;
  std::map<std::string, std::map<std::int64_t, Accuracy>> by_length;  // decoder -> length -> accuracy
  double seconds = 0, final_loss = 0;
  std::int64_t steps = 0;
  std::int64_t first_perfect_step = -1;  // first evaluation with 100% held-out exact match
};

struct EvalSet {
  std::int64_t length;
  Tensors tensors;
};

RunResult train_one(const ReversalConfig& config, const std::string& name, std::int64_t seed_index,
                    const data::Dataset& train_set, const Tensors& heldout, const std::vector<EvalSet>& tests,
                    const examples::RunDir& run, examples::DataParallel& parallel) {
  // Every model of one seed index starts from the same generator state.
  ReversalModel model = build_model(config, name, static_cast<std::uint64_t>(config.seed + 1 + seed_index));
  parallel.replicate(*model.module);
  optim::Adam optimizer(model.module->parameters(), optim::AdamOptions(config.lr));

  data::DataLoaderOptions loader_options;
  loader_options.batch_size = config.batch_size;
  loader_options.seed = static_cast<std::uint64_t>(config.seed + seed_index);
  loader_options.pad_id = kPad;
  loader_options.num_replicas = parallel.size();  // batch_size is the global batch
  loader_options.rank = parallel.rank();
  const data::DataLoader loader(train_set, loader_options);

  examples::RunDir dir(run.file(name + "/seed_" + std::to_string(seed_index)));
  if (!config.resume && parallel.is_main()) dir.clear_previous_run();
  train::TrainerOptions trainer_options;
  trainer_options.max_steps = config.steps;
  trainer_options.steps_per_epoch = loader.batches_per_epoch();
  trainer_options.log_every = config.log_every;
  trainer_options.eval_every = config.eval_every;
  trainer_options.checkpoint_every = config.checkpoint_every;
  trainer_options.run_dir = dir.path();
  trainer_options.resume = config.resume;
  trainer_options.progress = train::parse_progress(config.progress);
  trainer_options.precision = train::parse_precision(config.precision);
  trainer_options.replicas = parallel.replicas();
  train::Trainer trainer(*model.module, optimizer, trainer_options);

  const auto step_fn = [&](std::int64_t step) {
    const data::Batch batch = loader.batch_at(step);
    // Throughput figures for the global batch: every rank's share has as many strings (tokens roughly so).
    return train::StepOutput{model.loss(batch), batch.size() * parallel.size(),
                             (batch.tokens + batch.target_tokens) * parallel.size()};
  };
  const auto eval_fn = [&](std::int64_t /*step*/) {
    const Accuracy a = decode_accuracy(model, heldout, 1);
    return std::map<std::string, double>{{"heldout_exact_match", a.exact}, {"heldout_token_accuracy", a.tokens}};
  };
  if (parallel.is_main())
    std::cerr << "sequence_reversal: training " << name << ", seed " << seed_index << " ("
              << model.module->num_parameters() << " parameters, " << parallel.size() << " process(es))\n";
  const train::TrainResult trained = trainer.fit(step_fn, eval_fn);
  RunResult result;
  result.steps = trained.steps;
  if (!parallel.is_main()) return result;  // rank 0 measures and writes
  // From the metrics file rather than the evaluations of this call, which a resumed run only half saw.
  for (const nlohmann::json& line : examples::read_jsonl(dir.file("metrics.jsonl")))
    if (line.contains("eval") && line.at("eval").value("heldout_exact_match", 0.0) == 1.0) {
      result.first_perfect_step = line.at("step").get<std::int64_t>();
      break;
    }
  result.seconds = trained.total_seconds;
  result.final_loss = trained.final_loss;
  result.heldout = decode_accuracy(model, heldout, 1);
  for (const EvalSet& test : tests) {
    result.by_length["greedy"][test.length] = decode_accuracy(model, test.tensors, 1);
    result.by_length["beam"][test.length] = decode_accuracy(model, test.tensors, config.beam_size);
  }
  dir.write_loss_plot("sequence reversal, " + name + ", seed " + std::to_string(seed_index));
  if (seed_index == 0 && !tests.empty()) {
    // The test set of length 15 (or the longest), its first string.
    const EvalSet* shown = &tests.front();
    for (const EvalSet& test : tests)
      if (test.length == 15 || (shown->length != 15 && test.length > shown->length)) shown = &test;
    const Tensor src = shown->tensors.src.narrow(0, 0, 1).contiguous();
    const Tensor tgt_in = shown->tensors.tgt_in.narrow(0, 0, 1).contiguous();
    examples::write_svg(
        run.file("attention_" + name + ".svg"),
        examples::heat_map_svg(model.attention(src, tgt_in),
                               name + ": attention over a string of length " + std::to_string(shown->length)));
  }
  return result;
}

std::string length_key(std::int64_t length) { return std::to_string(length); }

int run(const Config& options) {
  const ReversalConfig config = examples::read_config<ReversalConfig>(options);
  validate(config);
  const std::vector<std::int64_t> lengths = parse_lengths(config.eval_lengths);
  Generator gen(static_cast<std::uint64_t>(config.seed));
  std::set<std::vector<std::int64_t>> seen;
  const Strings train =
      random_strings(config.train_size, config.min_train_length, config.train_length, config.alphabet, gen, seen);
  const Strings heldout =
      random_strings(config.heldout_size, config.train_length, config.train_length, config.alphabet, gen, seen);
  std::vector<EvalSet> tests;
  for (std::int64_t length : lengths)
    tests.push_back({length, to_tensors(random_strings(config.eval_size, length, length, config.alphabet, gen, seen))});
  const data::Dataset train_set = to_dataset(train);
  const Tensors heldout_tensors = to_tensors(heldout);

  // Under mpirun every process trains on its share of each global batch; rank 0 writes the files.
  examples::DataParallel parallel = examples::DataParallel::from_environment();
  examples::RunDir run(config.run_dir);
  if (config.resume) {
    run.check_same_config(options, {examples::key_of(&C::resume), examples::key_of(&C::checkpoint_every),
                                    examples::key_of(&C::progress)});
  } else if (parallel.is_main()) {
    // A fresh run: nothing of an earlier one (another --models, say) may be left beside it.
    run.clear_previous_run();
    for (const std::string& name : kAllModels) {
      std::error_code error;
      std::filesystem::remove_all(run.file(name), error);
      std::filesystem::remove(run.file("attention_" + name + ".svg"), error);
    }
  }
  if (parallel.is_main()) run.write_config(options);
  std::vector<std::string> models = kAllModels;
  if (config.models != "all") models = {config.models};

  nlohmann::json exact_json, tokens_json, per_seed_json, heldout_json, seconds_json, loss_json, perfect_json;
  examples::LinePlot plot;
  plot.title = "sequence reversal: training loss (first seed)";
  plot.x_label = "step";
  plot.y_label = "loss";
  plot.log_y = true;
  std::int64_t steps = 0;
  double total_seconds = 0;
  for (const std::string& name : models) {
    std::vector<RunResult> runs;
    for (std::int64_t s = 0; s < config.seeds; ++s)
      runs.push_back(train_one(config, name, s, train_set, heldout_tensors, tests, run, parallel));
    if (!parallel.is_main()) continue;
    double heldout_mean = 0, seconds = 0;
    for (const RunResult& r : runs) {
      heldout_mean += r.heldout.exact / static_cast<double>(runs.size());
      seconds += r.seconds;
      perfect_json[name].push_back(r.first_perfect_step >= 0 ? nlohmann::json(r.first_perfect_step)
                                                             : nlohmann::json(nullptr));
      loss_json[name].push_back(r.final_loss);
      steps = r.steps;
    }
    heldout_json[name] = heldout_mean;
    seconds_json[name] = seconds;
    total_seconds += seconds;
    std::printf("%-10s held-out exact match %.3f (mean of %lld seeds, greedy), %.1f s\n", name.c_str(), heldout_mean,
                static_cast<long long>(runs.size()), seconds);
    for (const char* decoder : {"greedy", "beam"}) {
      std::printf("  %-6s exact match by length:", decoder);
      for (std::int64_t length : lengths) {
        double exact = 0, tokens = 0;
        for (const RunResult& r : runs) {
          const Accuracy& a = r.by_length.at(decoder).at(length);
          exact += a.exact / static_cast<double>(runs.size());
          tokens += a.tokens / static_cast<double>(runs.size());
          per_seed_json[name][decoder][length_key(length)].push_back(a.exact);
        }
        exact_json[name][decoder][length_key(length)] = exact;
        tokens_json[name][decoder][length_key(length)] = tokens;
        std::printf("  %lld: %.2f", static_cast<long long>(length), exact);
      }
      std::printf("\n");
    }
    std::fflush(stdout);
    examples::Series series{name, {}, {}};
    for (const nlohmann::json& line : examples::read_jsonl(run.file(name + "/seed_0/metrics.jsonl")))
      if (line.contains("loss")) {
        series.x.push_back(line["step"].get<double>());
        series.y.push_back(line["loss"].get<double>());
      }
    plot.series.push_back(std::move(series));
  }
  if (!parallel.is_main()) return 0;
  examples::write_svg(run.file("loss.svg"), examples::line_plot_svg(plot));
  const nlohmann::json summary = {
      {"exact_match_by_length", exact_json},
      {"token_accuracy_by_length", tokens_json},
      {"exact_match_by_length_per_seed", per_seed_json},
      {"heldout_exact_match", heldout_json},
      {"train_seconds", seconds_json},
      {"train_seconds_total", total_seconds},
      {"steps", steps},
      {"seeds", config.seeds},
      {"beam_size", config.beam_size},
      {"final_loss", loss_json},
      {"first_step_heldout_all_correct", perfect_json},
      {"min_train_length", config.min_train_length},
      {"train_length", config.train_length},
  };
  run.write_summary(summary);
  std::printf("summary written to %s\n", run.file("summary.json").c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Config config = examples::make_config<ReversalConfig>(
      "sequence_reversal",
      "transformers (learned, sinusoidal, rotary and randomized positions), a recurrent seq2seq with attention "
      "and two pointer networks learn to reverse strings of a-e of up to 10 letters and are tested on other "
      "lengths");
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
