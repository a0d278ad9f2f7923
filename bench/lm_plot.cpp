// lm_compare_plot: the held-out loss of two or more language-model runs against training time, as one SVG
// (bench/lm_compare.sh draws the tapegrad and libtorch runs with it), and a markdown table of their results.
//
//   lm_compare_plot --out bench/lm_curves.svg tapegrad=runs/lm_tapegrad libtorch=runs/lm_libtorch
//
// Each run directory holds metrics.jsonl in train::Trainer's format and, when the run finished, summary.json.
// Per run the plot has "<label>" (the "val_loss" of the evaluation lines against their "elapsed_s") and
// "<label> train" (the logged training loss against "elapsed_s"). The table gives, per run, the steps, the
// final held-out loss in nats per byte, bits per character (loss / ln 2) and training tokens per second,
// from summary.json ("steps", "heldout_loss", "heldout_bpc", "tokens_per_s"); a key it lacks is taken from
// metrics.jsonl where it can be (the last step, the last evaluation) and shown as n/a otherwise.
//
// Exit status: 0 on success, 2 for a bad command line, 1 when a file cannot be read or holds no evaluation.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "examples/common/config.h"
#include "examples/common/run_dir.h"
#include "examples/common/svg.h"
#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/format.h"
#include "tapegrad/io/json.h"

using namespace tapegrad;

namespace {

constexpr const char* kProgram = "lm_compare_plot";
constexpr const char* kUsage = "usage: lm_compare_plot --out FILE.svg LABEL=RUN_DIR LABEL=RUN_DIR [...]\n";

struct RunSpec {
  std::string label;
  std::string dir;
};

struct Arguments {
  std::string out;
  std::vector<RunSpec> runs;
};

// --out FILE and one or more LABEL=DIR (one run alone is drawn too); ConfigError (exit status 2) otherwise.
Arguments parse_arguments(int argc, char** argv) {
  Arguments args;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--out") {
      if (i + 1 >= argc) throw examples::ConfigError(std::string(kProgram) + ": --out needs a file name");
      args.out = argv[++i];
    } else if (arg.rfind("--out=", 0) == 0) {
      args.out = arg.substr(6);
    } else if (arg.rfind("--", 0) == 0) {
      throw examples::ConfigError(std::string(kProgram) + ": unknown option " + arg);
    } else {
      const std::size_t eq = arg.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size())
        throw examples::ConfigError(std::string(kProgram) + ": expected LABEL=RUN_DIR, got \"" + arg + "\"");
      args.runs.push_back({arg.substr(0, eq), arg.substr(eq + 1)});
    }
  }
  if (args.out.empty()) throw examples::ConfigError(std::string(kProgram) + ": --out FILE.svg is required");
  if (args.runs.empty()) throw examples::ConfigError(std::string(kProgram) + ": no LABEL=RUN_DIR given");
  return args;
}

struct RunData {
  RunSpec spec;
  examples::Series heldout, train;  // against elapsed_s
  std::int64_t last_step = 0;
  std::optional<double> last_heldout;
  nlohmann::json summary;  // empty object when the run has no summary.json
};

std::optional<double> number_at(const nlohmann::json& object, const std::string& key) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

RunData read_run(const RunSpec& spec) {
  namespace fs = std::filesystem;
  RunData run{spec, {spec.label, {}, {}}, {spec.label + " train", {}, {}}, 0, std::nullopt, nlohmann::json::object()};
  const std::string metrics = (fs::path(spec.dir) / "metrics.jsonl").string();
  for (const nlohmann::json& line : examples::read_jsonl(metrics)) {
    const auto step = number_at(line, "step");
    const auto elapsed = number_at(line, "elapsed_s");
    if (!step || !elapsed) continue;
    run.last_step = std::max(run.last_step, static_cast<std::int64_t>(*step));
    if (const auto loss = number_at(line, "loss")) {
      run.train.x.push_back(*elapsed);
      run.train.y.push_back(*loss);
    }
    if (line.contains("eval") && line["eval"].is_object()) {
      if (const auto val = number_at(line["eval"], "val_loss")) {
        run.heldout.x.push_back(*elapsed);
        run.heldout.y.push_back(*val);
        run.last_heldout = *val;
      }
    }
  }
  if (run.heldout.x.empty()) throw IoError(metrics + ": no evaluation line with eval.val_loss");
  const fs::path summary = fs::path(spec.dir) / "summary.json";
  if (fs::exists(summary)) run.summary = io::read_json_file(summary.string());
  if (!run.summary.is_object()) throw IoError(summary.string() + ": expected a JSON object");
  return run;
}

std::string cell(const std::optional<double>& v, int digits) { return v ? format_fixed(*v, digits) : "n/a"; }

// The markdown table of the runs' results.
std::string results_table(const std::vector<RunData>& runs) {
  std::string text =
      "| run | steps | held-out loss (nats/byte) | held-out bpc | training tokens/s |\n"
      "| --- | --- | --- | --- | --- |\n";
  for (const RunData& run : runs) {
    const std::optional<double> steps = number_at(run.summary, "steps").value_or(static_cast<double>(run.last_step));
    std::optional<double> loss = number_at(run.summary, "heldout_loss");
    if (!loss) loss = run.last_heldout;
    std::optional<double> bpc = number_at(run.summary, "heldout_bpc");
    if (!bpc && loss) bpc = *loss / std::log(2.0);
    text += "| " + run.spec.label + " | " + cell(steps, 0) + " | " + cell(loss, 4) + " | " + cell(bpc, 4) + " | " +
            cell(number_at(run.summary, "tokens_per_s"), 0) + " |\n";
  }
  return text;
}

void draw(const std::vector<RunData>& runs, const std::string& out) {
  examples::LinePlot plot;
  plot.title = "held-out loss at equal wall-clock time";
  plot.x_label = "training time (s), evaluations included";
  plot.y_label = "cross-entropy (nats per byte)";
  for (const RunData& run : runs) plot.series.push_back(run.heldout);
  for (const RunData& run : runs) plot.series.push_back(run.train);
  examples::write_svg(out, examples::line_plot_svg(plot));
}

}  // namespace

int main(int argc, char** argv) {
  Arguments args;
  try {
    args = parse_arguments(argc, argv);
  } catch (const examples::ConfigError& e) {
    std::cerr << e.what() << "\n" << kUsage;
    return examples::kConfigErrorExit;
  }
  try {
    std::vector<RunData> runs;
    for (const RunSpec& spec : args.runs) runs.push_back(read_run(spec));
    draw(runs, args.out);
    std::cout << results_table(runs);
    std::cerr << kProgram << ": wrote " << args.out << "\n";
  } catch (const std::exception& e) {
    std::cerr << kProgram << ": " << e.what() << "\n";
    return 1;
  }
  return 0;
}
