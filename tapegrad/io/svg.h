#pragma once
// Standalone SVG pictures: a line plot (loss curves, a learning-rate range test) and heat maps
// (attention weights). The functions return the SVG text; write_svg stores it atomically.
//
//   io::LinePlot plot;
//   plot.title = "training loss"; plot.x_label = "step"; plot.y_label = "loss"; plot.log_y = true;
//   plot.series.push_back({"train", steps, losses});
//   io::write_svg("runs/x/loss.svg", io::line_plot_svg(plot));
//
//   io::HeatMap map;                      // values[r][c], r down, c across
//   map.values = weights; map.row_labels = {"<sos>", "e", ...}; map.col_labels = {"a", "b", ...};
//   io::write_svg("runs/x/attention.svg", io::heat_map_svg({map}, "cross-attention"));
//
// Points that cannot be drawn (NaN, infinities, values <= 0 on a log axis) are skipped and break the
// line there. Text is XML-escaped.

#include <optional>
#include <string>
#include <vector>

namespace tapegrad::io {

struct Series {
  std::string name;
  std::vector<double> x;
  std::vector<double> y;  // the same length as x
};

struct LinePlot {
  std::string title;
  std::string x_label;
  std::string y_label;
  bool log_x = false;
  bool log_y = false;
  int width = 720;
  int height = 440;
  std::vector<Series> series;
};

struct HeatMap {
  std::string title;
  std::vector<std::vector<double>> values;  // rows of equal length
  std::vector<std::string> row_labels;      // empty or one per row
  std::vector<std::string> col_labels;      // empty or one per column
  std::string x_label;
  std::string y_label;
  std::optional<double> min;  // colour-scale range; the data's range when absent
  std::optional<double> max;
};

// About `target` evenly spaced round numbers (1, 2 or 5 times a power of ten apart) covering
// [lo, hi]: the first tick <= lo, the last >= hi. A single tick when lo == hi.
std::vector<double> nice_ticks(double lo, double hi, int target = 6);

// Colour of t in [0, 1] on a perceptually ordered scale (dark blue -> green -> yellow), "#rrggbb".
std::string scale_colour(double t);

// ValueError for a series whose x and y differ in length, a size below 100x100.
std::string line_plot_svg(const LinePlot& plot);
// One panel per map, side by side, sharing one title; each panel has its own colour bar.
// ValueError for ragged rows or label counts that do not match the matrix.
std::string heat_map_svg(const std::vector<HeatMap>& panels, const std::string& title = "");

// Writes svg to path atomically (IoError naming the path on failure).
void write_svg(const std::string& path, const std::string& svg);

}  // namespace tapegrad::io
