// examples/common: typed configuration and flags, SVG pictures, binary metrics, multinomial
// Naive Bayes, atomic run files. Expected numbers are worked by hand in the comments. Over 400
// lines because it is the one test file of examples/common, whose helpers are small and many.

#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "examples/common/config.h"
#include "examples/common/metrics.h"
#include "examples/common/naive_bayes.h"
#include "examples/common/run_dir.h"
#include "examples/common/svg.h"
#include "tapegrad/autograd/error.h"
#include "tapegrad/io/file.h"
#include "tests/testing.h"

using namespace tapegrad;
using namespace tapegrad::examples;
using tapegrad::testing::TempDir;

namespace {

Config sample_config() {
  Config c("prog", "a test program");
  c.add_int("steps", 100, "optimiser steps");
  c.add_float("lr", 1e-3, "learning rate");
  c.add_bool("resume", false, "continue a run");
  c.add_string("positions", "learned", "position encoding", {"learned", "rotary"});
  c.add_string("data_dir", "", "corpus folder");
  return c;
}

std::vector<std::string> parse(Config& c, std::vector<const char*> args) {
  args.insert(args.begin(), "prog");
  return c.parse_args(static_cast<int>(args.size()), args.data());
}

std::size_t count(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) ++n;
  return n;
}

}  // namespace

TEST_CASE("examples config: defaults, typed getters, flags in both spellings") {
  Config c = sample_config();
  CHECK(c.get_int("steps") == 100);
  CHECK(c.get_float("lr") == 1e-3);
  CHECK_FALSE(c.get_bool("resume"));
  CHECK(c.get_string("positions") == "learned");
  CHECK_THROWS_AS(c.get_float("steps"), ConfigError);  // declared integer
  CHECK_THROWS_AS(c.get_int("missing"), ConfigError);

  const auto rest = parse(
      c, {"train", "--steps", "7", "--lr=0.5", "--resume", "--positions", "rotary", "--data-dir", "/x", "file.eml"});
  CHECK(rest == std::vector<std::string>{"train", "file.eml"});
  CHECK(c.get_int("steps") == 7);
  CHECK(c.get_float("lr") == 0.5);
  CHECK(c.get_bool("resume"));  // a bare bool flag means true
  CHECK(c.get_string("positions") == "rotary");
  CHECK(c.get_string("data_dir") == "/x");  // --data-dir is --data_dir

  Config d = sample_config();
  parse(d, {"--resume", "false", "--lr", "2", "--", "--steps"});
  CHECK_FALSE(d.get_bool("resume"));
  CHECK(d.get_float("lr") == 2.0);   // an integer literal is a fine float
  CHECK(d.get_int("steps") == 100);  // after "--" nothing is a flag
}

TEST_CASE("examples config: unknown and ill-typed flags name the key and the expected type") {
  Config c = sample_config();
  CHECK_THROWS_WITH_AS(parse(c, {"--stpes", "3"}), "prog: unknown option --stpes (see --help)", ConfigError);
  CHECK_THROWS_WITH_AS(parse(c, {"--steps", "3.5"}), "prog: option --steps expects an integer, got \"3.5\"",
                       ConfigError);
  CHECK_THROWS_WITH_AS(parse(c, {"--steps=1e3"}), doctest::Contains("--steps expects an integer"), ConfigError);
  CHECK_THROWS_WITH_AS(parse(c, {"--steps", "99999999999999999999"}), doctest::Contains("--steps expects an integer"),
                       ConfigError);
  CHECK_THROWS_WITH_AS(parse(c, {"--lr", "fast"}), "prog: option --lr expects a float, got \"fast\"", ConfigError);
  CHECK_THROWS_WITH_AS(parse(c, {"--lr", "nan"}), doctest::Contains("--lr expects a float"), ConfigError);
  CHECK_THROWS_WITH_AS(parse(c, {"--resume", "maybe"}), "prog: option --resume expects a bool, got \"maybe\"",
                       ConfigError);
  CHECK_THROWS_WITH_AS(parse(c, {"--positions", "sinusoidal"}),
                       "prog: option --positions expects one of learned, rotary, got \"sinusoidal\"", ConfigError);
  CHECK_THROWS_WITH_AS(parse(c, {"--steps"}), doctest::Contains("--steps needs a value"), ConfigError);
  // A rejected value leaves the option as it was.
  CHECK(c.get_int("steps") == 100);
}

TEST_CASE("examples config: JSON files are type-checked and flags override them") {
  TempDir dir;
  const std::string good = dir.file("good.json");
  testing::write_text(good, R"({"steps": 20, "lr": 3, "positions": "rotary"})");
  Config c = sample_config();
  // The flag wins although it comes before --config on the line.
  parse(c, {"--steps", "5", "--config", good.c_str()});
  CHECK(c.get_int("steps") == 5);
  CHECK(c.get_float("lr") == 3.0);
  CHECK(c.get_string("positions") == "rotary");

  const std::string unknown = dir.file("unknown.json");
  testing::write_text(unknown, R"({"stpes": 20})");
  Config d = sample_config();
  const std::string unknown_message = unknown + ": unknown key \"stpes\" (see --help)";
  CHECK_THROWS_WITH_AS(parse(d, {"--config", unknown.c_str()}), unknown_message.c_str(), ConfigError);
  const std::string typed = dir.file("typed.json");
  testing::write_text(typed, R"({"steps": 2.5})");
  const std::string int_message = typed + ": key \"steps\" expects an integer, got 2.5";
  CHECK_THROWS_WITH_AS(parse(d, {"--config", typed.c_str()}), int_message.c_str(), ConfigError);
  testing::write_text(typed, R"({"resume": "yes"})");
  const std::string bool_message = typed + ": key \"resume\" expects a bool, got \"yes\"";
  CHECK_THROWS_WITH_AS(parse(d, {"--config", typed.c_str()}), bool_message.c_str(), ConfigError);
  const std::string broken = dir.file("broken.json");
  testing::write_text(broken, "{\"steps\": ");
  CHECK_THROWS_WITH_AS(parse(d, {"--config", broken.c_str()}), doctest::Contains((broken + ": not valid JSON").c_str()),
                       ConfigError);
  testing::write_text(broken, "[1, 2]");
  CHECK_THROWS_WITH_AS(parse(d, {"--config", broken.c_str()}), doctest::Contains("expected a JSON object"),
                       ConfigError);
  const std::string absent = dir.file("absent.json");
  CHECK_THROWS_WITH_AS(parse(d, {"--config", absent.c_str()}), doctest::Contains(("cannot open " + absent).c_str()),
                       ConfigError);
  // A directory, a number beyond a double, a repeated key and nesting 100,000 levels deep: each a
  // ConfigError naming the file (before, the first two escaped as std::ios_failure and
  // nlohmann's out_of_range, and the last overflowed the stack).
  CHECK_THROWS_WITH_AS(parse(d, {"--config", dir.str().c_str()}),
                       doctest::Contains(("cannot read " + dir.str() + ": it is a directory").c_str()), ConfigError);
  const std::string bad = dir.file("bad.json");
  testing::write_text(bad, R"({"lr": 1e400})");
  CHECK_THROWS_WITH_AS(parse(d, {"--config", bad.c_str()}),
                       doctest::Contains((bad + ": number overflow parsing '1e400' (at lr)").c_str()), ConfigError);
  testing::write_text(bad, R"({"steps": 1, "lr": 0.5, "steps": 2})");
  CHECK_THROWS_WITH_AS(parse(d, {"--config", bad.c_str()}),
                       doctest::Contains((bad + ": duplicate key \"steps\" in one object (at steps)").c_str()),
                       ConfigError);
  testing::write_text(bad, std::string(100000, '[') + std::string(100000, ']'));
  CHECK_THROWS_WITH_AS(parse(d, {"--config", bad.c_str()}),
                       doctest::Contains((bad + ": JSON nested more than 64 levels deep").c_str()), ConfigError);
}

TEST_CASE("examples config: to_json round-trips and --help lists every key with type and default") {
  Config c = sample_config();
  parse(c, {"--steps", "9", "--resume", "true"});
  Config d = sample_config();
  d.merge_json(c.to_json(), "saved");
  CHECK(d.to_json() == c.to_json());
  CHECK(d.get_int("steps") == 9);

  const std::string help = c.help();
  CHECK(help.find("--steps <integer>  (default 100)") != std::string::npos);
  CHECK(help.find("--lr <float>  (default 0.001)") != std::string::npos);
  CHECK(help.find("--resume <bool>  (default false)") != std::string::npos);
  CHECK(help.find("--positions <learned|rotary>  (default \"learned\")") != std::string::npos);
  CHECK(help.find("learning rate") != std::string::npos);
  CHECK(help.find("--config FILE") != std::string::npos);

  CHECK_THROWS_AS(c.add_int("steps", 1, "again"), ConfigError);
  CHECK_THROWS_AS(c.add_int("help", 1, "reserved"), ConfigError);
  CHECK_THROWS_AS(c.add_string("mode", "x", "not a choice", {"a", "b"}), ConfigError);
}

TEST_CASE("examples config: parse_command_line exit statuses") {
  std::vector<std::string> rest;
  {
    Config c = sample_config();
    const char* argv[] = {"prog", "--bogus", "1"};
    CHECK(parse_command_line(c, 3, argv, 1, &rest) == kConfigErrorExit);
  }
  {
    Config c = sample_config();
    const char* argv[] = {"prog", "stray"};
    CHECK(parse_command_line(c, 2, argv, 1, &rest) == kConfigErrorExit);  // no positional arguments allowed
  }
  {
    Config c = sample_config();
    const char* argv[] = {"prog", "--steps", "3", "a.eml", "b.eml"};
    CHECK(parse_command_line(c, 5, argv, 1, &rest, "", 10) == -1);
    CHECK(rest == std::vector<std::string>{"a.eml", "b.eml"});
    CHECK(c.get_int("steps") == 3);
  }
}

namespace {

// A typed config as the examples write theirs: the fields listed once.
struct SampleOptions {
  std::int64_t steps = 100;
  double lr = 1e-3;
  bool resume = false;
  std::string positions = "learned";

  template <class F>
  static void fields(F& f) {
    f("steps", &SampleOptions::steps, "optimiser steps");
    f("lr", &SampleOptions::lr, "learning rate");
    f("resume", &SampleOptions::resume, "continue a run");
    f("positions", &SampleOptions::positions, "position encoding", {"learned", "rotary"});
  }
};

}  // namespace

TEST_CASE("examples config: a struct's field list gives the options, their defaults, flags and messages") {
  Config c = make_config<SampleOptions>("prog", "a test program");
  CHECK(c.to_json() == nlohmann::json{{"steps", 100}, {"lr", 1e-3}, {"resume", false}, {"positions", "learned"}});
  SampleOptions defaults = read_config<SampleOptions>(c);
  CHECK(defaults.steps == 100);
  CHECK(defaults.positions == "learned");

  parse(c, {"--steps", "7", "--lr=0.5", "--resume", "--positions", "rotary"});
  const SampleOptions o = read_config<SampleOptions>(c);
  CHECK(o.steps == 7);
  CHECK(o.lr == 0.5);
  CHECK(o.resume);
  CHECK(o.positions == "rotary");

  Config bad = make_config<SampleOptions>("prog", "");
  CHECK_THROWS_WITH_AS(parse(bad, {"--stpes", "1"}), "prog: unknown option --stpes (see --help)", ConfigError);
  CHECK_THROWS_WITH_AS(parse(bad, {"--steps", "ten"}), "prog: option --steps expects an integer, got \"ten\"",
                       ConfigError);
  CHECK_THROWS_WITH_AS(parse(bad, {"--positions", "none"}),
                       "prog: option --positions expects one of learned, rotary, got \"none\"", ConfigError);

  CHECK(key_of(&SampleOptions::lr) == "lr");
  CHECK(flag(&SampleOptions::positions) == "--positions");
  CHECK(got(o, &SampleOptions::steps, &SampleOptions::lr, &SampleOptions::positions) ==
        ", got --steps 7, --lr 0.5, --positions \"rotary\"");
  SampleOptions negative = o;
  negative.steps = -3;
  CHECK_NOTHROW(require_positive("prog", o, &SampleOptions::steps, &SampleOptions::lr));
  CHECK_THROWS_WITH_AS(require_positive("prog", negative, &SampleOptions::lr, &SampleOptions::steps),
                       "prog: --steps must be positive, got -3", ConfigError);
  CHECK_THROWS_WITH_AS(require_non_negative("prog", negative, &SampleOptions::steps),
                       "prog: --steps must be >= 0, got -3", ConfigError);
  CHECK_THROWS_WITH_AS(require(false, "prog", "--lr is wrong"), "prog: --lr is wrong", ConfigError);
}

TEST_CASE("examples metrics: binary confusion, precision, recall, F1") {
  // tp = 2 (rows 0, 4), fp = 1 (row 1), fn = 1 (row 3), tn = 2 (rows 2, 5).
  const BinaryMetrics m = binary_metrics({1, 1, 0, 0, 1, 0}, {1, 0, 0, 1, 1, 0});
  CHECK(m.tp == 2);
  CHECK(m.fp == 1);
  CHECK(m.fn == 1);
  CHECK(m.tn == 2);
  CHECK(m.accuracy() == doctest::Approx(4.0 / 6));
  CHECK(m.precision() == doctest::Approx(2.0 / 3));
  CHECK(m.recall() == doctest::Approx(2.0 / 3));
  CHECK(m.f1() == doctest::Approx(2.0 / 3));
  CHECK(m.confusion() == std::vector<std::vector<std::int64_t>>{{2, 1}, {1, 2}});
  CHECK(m.to_json()["confusion"][1][1] == 2);

  // p = 1/1, r = 1/3: F1 = 2 * (1/3) / (4/3) = 0.5.
  CHECK(binary_metrics({1, 0, 0, 0}, {1, 1, 1, 0}).f1() == doctest::Approx(0.5));
  // Nothing predicted positive: precision and F1 are 0, not NaN.
  const BinaryMetrics none = binary_metrics({0, 0}, {1, 0});
  CHECK(none.precision() == 0.0);
  CHECK(none.f1() == 0.0);
  CHECK(none.accuracy() == 0.5);
  CHECK(binary_metrics({}, {}).accuracy() == 0.0);
  CHECK_THROWS_WITH_AS(binary_metrics({1}, {1, 0}), "binary_metrics: 1 predictions for 2 labels", ValueError);
  CHECK_THROWS_WITH_AS(binary_metrics({2}, {1}), doctest::Contains("labels must be 0 or 1, got predicted 2"),
                       ValueError);
}

TEST_CASE("examples naive Bayes: Laplace-smoothed multinomial likelihoods worked by hand") {
  // spam: {free, money}, {free, free, win}; ham: {meeting, money}. |V| = 4, alpha = 1.
  // spam counts free 3, money 1, win 1, meeting 0 (total 5): P(free | spam) = 4 / 9.
  // ham counts meeting 1, money 1 (total 2): P(free | ham) = 1 / 6, P(meeting | ham) = 2 / 6.
  MultinomialNaiveBayes nb(1.0);
  nb.fit({{"free", "money"}, {"free", "free", "win"}, {"meeting", "money"}}, {1, 1, 0});
  CHECK(nb.num_classes() == 2);
  CHECK(nb.vocabulary_size() == 4);
  CHECK(nb.log_prior()[1] == doctest::Approx(std::log(2.0 / 3)));
  CHECK(nb.log_likelihood("free", 1) == doctest::Approx(std::log(4.0 / 9)));
  CHECK(nb.log_likelihood("meeting", 1) == doctest::Approx(std::log(1.0 / 9)));
  CHECK(nb.log_likelihood("free", 0) == doctest::Approx(std::log(1.0 / 6)));
  // {free, meeting, unseen}: spam 2/3 * 4/9 * 1/9 = 8/243, ham 1/3 * 1/6 * 2/6 = 1/54; the unseen
  // word is ignored.
  const std::vector<std::string> doc = {"free", "meeting", "unseen"};
  const std::vector<double> s = nb.scores(doc);
  CHECK(s[1] == doctest::Approx(std::log(8.0 / 243)));
  CHECK(s[0] == doctest::Approx(std::log(1.0 / 54)));
  CHECK(nb.predict(doc) == 1);
  const double spam = 8.0 / 243, ham = 1.0 / 54;
  CHECK(nb.predict_proba(doc)[1] == doctest::Approx(spam / (spam + ham)));
  CHECK(nb.predict(std::vector<std::string>{"meeting"}) == 0);  // ham 1/3 * 2/6 = 1/9 > spam 2/3 * 1/9 = 2/27
  CHECK(nb.predict(std::vector<std::vector<std::string>>{{"win"}, {"meeting", "meeting"}}) ==
        std::vector<std::int64_t>{1, 0});

  // A larger alpha pulls the likelihoods towards uniform: (3 + 10) / (5 + 40).
  MultinomialNaiveBayes smooth(10.0);
  smooth.fit({{"free", "money"}, {"free", "free", "win"}, {"meeting", "money"}}, {1, 1, 0});
  CHECK(smooth.log_likelihood("free", 1) == doctest::Approx(std::log(13.0 / 45)));

  CHECK_THROWS_AS(MultinomialNaiveBayes(0.0), ValueError);
  CHECK_THROWS_WITH_AS(MultinomialNaiveBayes().predict(doc), "MultinomialNaiveBayes: predict called before fit",
                       ValueError);
  CHECK_THROWS_WITH_AS(nb.fit({{"a"}}, {1, 0}), "MultinomialNaiveBayes::fit: 1 documents but 2 labels", ValueError);
  CHECK_THROWS_AS(nb.fit({{"a"}}, {-1}), ValueError);
  CHECK_THROWS_AS(nb.log_likelihood("unseen", 0), ValueError);
}

TEST_CASE("examples svg: nice ticks and the colour scale") {
  CHECK(nice_ticks(0, 1, 6) == std::vector<double>{0, 0.2, 0.4, 0.6, 0.8, 1});
  const std::vector<double> t = nice_ticks(3, 1234, 6);  // step 500: 0, 500, 1000, 1500
  CHECK(t == std::vector<double>{0, 500, 1000, 1500});
  const std::vector<double> n = nice_ticks(-0.37, 0.12, 5);  // step 0.2 covering [-0.37, 0.12]
  CHECK(n.front() <= -0.37);
  CHECK(n.back() >= 0.12);
  CHECK(n.size() == 4);
  CHECK(nice_ticks(2, 2) == std::vector<double>{2});
  CHECK_THROWS_AS(nice_ticks(1, 0), ValueError);
  // Ranges with no round step: too narrow for their magnitude, narrower than the smallest double
  // step (a zero step, then 0 / 0 cast to an integer), or wider than a double (hi - lo overflows).
  CHECK(nice_ticks(1, 1 + 1e-15) == std::vector<double>{1, 1 + 1e-15});
  CHECK(nice_ticks(0, 5e-324) == std::vector<double>{0, 5e-324});
  CHECK(nice_ticks(-1.7e308, 1.7e308) == std::vector<double>{-1.7e308, 1.7e308});
  const std::vector<double> wide = nice_ticks(-1e307, 1e307);
  CHECK(wide.front() <= -1e307);
  CHECK(wide.back() >= 1e307);
  CHECK_THROWS_WITH_AS(nice_ticks(0, 1, 1), "nice_ticks: target must be in [2, 1000], got 1", ValueError);
  CHECK_THROWS_AS(nice_ticks(0, 1, 2147483647), ValueError);
  CHECK(scale_colour(0) == "#440154");
  CHECK(scale_colour(1) == "#fde725");
  CHECK(scale_colour(-5) == scale_colour(0));
  CHECK(scale_colour(0.5) == "#21918c");
}

TEST_CASE("examples svg: line plot with series, breaks, log axis and escaped text") {
  LinePlot plot;
  plot.title = "loss <train & val>";
  plot.x_label = "step";
  plot.y_label = "loss";
  plot.series.push_back({"train", {1, 2, 3, 4}, {2.0, 1.0, 0.5, 0.25}});
  plot.series.push_back({"val", {1, 2, 3}, {2.5, std::nan(""), 0.4}});  // NaN splits the line in two
  const std::string svg = line_plot_svg(plot);
  CHECK(svg.rfind("<?xml", 0) == 0);
  CHECK(svg.size() >= 7);
  CHECK(svg.substr(svg.size() - 7) == "</svg>\n");
  CHECK(count(svg, "<polyline") == 3);
  CHECK(count(svg, "<text") == count(svg, "</text>"));
  CHECK(svg.find("loss &lt;train &amp; val&gt;") != std::string::npos);
  CHECK(svg.find("<train") == std::string::npos);
  CHECK(svg.find(">train<") != std::string::npos);  // legend entries
  CHECK(svg.find(">val<") != std::string::npos);

  plot.log_y = true;
  plot.series[0].y = {1.0, 0.1, 0.0, 0.001};  // 0 cannot be drawn on a log axis: a break
  const std::string log_svg = line_plot_svg(plot);
  CHECK(count(log_svg, "<polyline") == 4);
  CHECK(log_svg.find(">0.01<") != std::string::npos);  // a decade tick
  CHECK(log_svg.find("loss (log scale)") != std::string::npos);

  LinePlot empty;
  CHECK(line_plot_svg(empty).find("no data") != std::string::npos);
  plot.series[1].y.pop_back();
  CHECK_THROWS_WITH_AS(line_plot_svg(plot), "line_plot_svg: series \"val\" has 3 x values and 2 y values", ValueError);
  LinePlot control;  // a label with control characters XML does not allow
  control.title = std::string(
      "a\x01"
      "b\x1f"
      "c\td");
  CHECK(line_plot_svg(control).find(">abc\td</text>") != std::string::npos);
  LinePlot tiny;  // smaller than its margins: the plot area would have a negative size
  tiny.width = 10;
  tiny.height = 10;
  CHECK_THROWS_WITH_AS(line_plot_svg(tiny), "line_plot_svg: size must be at least 100x100, got 10x10", ValueError);
}

TEST_CASE("examples svg: heat maps with labels and colour bars") {
  HeatMap map;
  map.title = "cross-attention";
  map.values = {{0.0, 0.5, 1.0}, {1.0, 0.0, 0.25}};
  map.row_labels = {"<sos>", "e"};
  map.col_labels = {"a0", "b1", "c2"};
  const std::string svg = heat_map_svg({map, map}, "two panels");
  CHECK(count(svg, "<title>") == 12);  // one per cell, two panels of 2 x 3
  CHECK(svg.find("&lt;sos&gt;") != std::string::npos);
  CHECK(svg.find(">c2<") != std::string::npos);
  CHECK(svg.find(scale_colour(1.0)) != std::string::npos);  // the largest cell
  CHECK(svg.find("two panels") != std::string::npos);
  CHECK(count(svg, "<text") == count(svg, "</text>"));

  HeatMap ragged = map;
  ragged.values[1].pop_back();
  CHECK_THROWS_WITH_AS(heat_map_svg({ragged}), "heat_map_svg: panel 0 row 1 has 2 values, row 0 has 3", ValueError);
  HeatMap labels = map;
  labels.col_labels.pop_back();
  CHECK_THROWS_WITH_AS(heat_map_svg({labels}), "heat_map_svg: panel 0 has 2 column labels for 3 columns", ValueError);
  HeatMap scale = map;
  scale.min = std::nan("");
  CHECK_THROWS_WITH_AS(heat_map_svg({map, scale}),
                       "heat_map_svg: panel 1 needs a finite min below a finite max, got nan "
                       "and none",
                       ValueError);
  scale.min = 5.0;
  scale.max = 1.0;
  CHECK_THROWS_WITH_AS(heat_map_svg({scale}),
                       "heat_map_svg: panel 0 needs a finite min below a finite max, got 5 and 1", ValueError);
}

TEST_CASE("examples run files: atomic writes, JSON lines, loss plot from metrics") {
  TempDir dir;
  const std::string path = dir.file("a.svg");
  write_svg(path, "<svg/>");
  write_svg(path, "<svg>second</svg>");
  CHECK(testing::read_text(path) == "<svg>second</svg>");
  CHECK(dir.count_files() == 1);  // no temporary file left behind
  CHECK_THROWS_AS(io::write_file_atomic(dir.file("missing/a.txt"), "x"), IoError);

  const std::string metrics = dir.file("metrics.jsonl");
  testing::write_text(
      metrics, "{\"step\":10,\"loss\":2.0}\n\n{\"step\":20,\"loss\":1.0}\n{\"step\":20,\"eval\":{\"val_loss\":1.5}}\n");
  const auto lines = read_jsonl(metrics);
  REQUIRE(lines.size() == 3);
  CHECK(lines[2]["eval"]["val_loss"] == 1.5);
  const std::string svg = loss_plot_from_metrics(lines, "t");
  CHECK(count(svg, "<polyline") == 2);  // train loss and val_loss
  testing::write_text(metrics, "{\"step\":10}\nnot json\n");
  CHECK_THROWS_WITH_AS(read_jsonl(metrics), doctest::Contains((metrics + ":2: not valid JSON").c_str()), IoError);

  RunDir run(dir.file("runs/x"));
  testing::write_text(run.file("metrics.jsonl"), "{\"step\":1,\"loss\":1.0}\n");
  testing::write_text(run.file("vocab.json"), "{}");
  CHECK(run.write_loss_plot("x"));
  run.write_summary({{"f1", 0.5}});
  CHECK(io::read_json_file(run.file("summary.json"))["f1"] == 0.5);
  run.clear_previous_run();
  CHECK_FALSE(run.exists("metrics.jsonl"));
  CHECK_FALSE(run.exists("summary.json"));
  CHECK_FALSE(run.exists("loss.svg"));
  CHECK(run.exists("vocab.json"));  // not a file of the earlier run's training
  CHECK_FALSE(run.write_loss_plot("x"));
}
