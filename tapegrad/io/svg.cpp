#include "tapegrad/io/svg.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/format.h"
#include "tapegrad/io/file.h"

namespace tapegrad::io {

namespace {

const std::array<const char*, 8> kPalette = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                             "#9467bd", "#8c564b", "#e377c2", "#17becf"};

// Text for XML: the five special characters as entities, and the control characters XML 1.0 does
// not allow (all below 0x20 but tab, newline and carriage return) dropped, so the file stays valid.
std::string escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') continue;
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// Coordinates with two decimals: enough for a screen, short files.
std::string num(double v) { return format_fixed(v, 2); }

// Tick labels: up to 4 significant digits, no trailing zeros, no "-0".
std::string tick_label(double v) {
  if (std::abs(v) < 1e-12) return "0";
  return format_significant(v, 4);
}

std::string text(double x, double y, const std::string& content, const char* anchor = "middle", int size = 12,
                 const std::string& extra = "") {
  return "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" font-size=\"" + std::to_string(size) + "\" text-anchor=\"" +
         anchor + "\"" + extra + ">" + escape(content) + "</text>\n";
}

std::string header(int width, int height) {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
         std::to_string(width) + "\" height=\"" + std::to_string(height) + "\" viewBox=\"0 0 " + std::to_string(width) +
         " " + std::to_string(height) +
         "\" font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
}

// Ticks of a log axis over [lo, hi] (both > 0), as values: the powers of ten, and 2 and 5 times
// them when the range spans at most three decades.
std::vector<double> log_ticks(double lo, double hi) {
  const int first = static_cast<int>(std::floor(std::log10(lo) + 1e-9));
  const int last = static_cast<int>(std::ceil(std::log10(hi) - 1e-9));
  std::vector<double> ticks;
  const bool dense = last - first <= 3;
  for (int e = first; e <= last; ++e) {
    for (const double m : {1.0, 2.0, 5.0}) {
      if (m != 1.0 && !dense) continue;
      const double v = m * std::pow(10.0, e);
      if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) ticks.push_back(v);
    }
  }
  return ticks;
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi) || lo > hi)
    throw ValueError("nice_ticks: need finite lo <= hi, got " + tick_label(lo) + ", " + tick_label(hi));
  if (target < 2 || target > 1000) throw ValueError(message("nice_ticks: target must be in [2, 1000], got ", target));
  if (lo == hi) return {lo};
  const double raw = (hi / 2 - lo / 2) / (target - 1) * 2;  // halves first: hi - lo may overflow
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude * 10;
  for (const double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * magnitude >= raw * (1 - 1e-9)) {
      step = m * magnitude;
      break;
    }
  }
  // A range too narrow for its magnitude (1 to 1 + 1e-15), too narrow to have a step at all, or whose
  // round ends overflow: its two ends are the ticks.
  const double first_step = std::floor(lo / step + 1e-9), last_step = std::ceil(hi / step - 1e-9);
  if (!(step > 0) || !std::isfinite(step) || std::abs(first_step) > 1e15 || std::abs(last_step) > 1e15 ||
      !std::isfinite(first_step * step) || !std::isfinite(last_step * step))
    return {lo, hi};
  const auto first = static_cast<std::int64_t>(first_step);
  const auto last = static_cast<std::int64_t>(last_step);
  std::vector<double> ticks;
  for (std::int64_t k = first; k <= last; ++k) {
    // k * step carries rounding noise (3 * 0.2 = 0.6000000000000001); 12 digits drop it.
    ticks.push_back(std::strtod(format_significant(static_cast<double>(k) * step, 12).c_str(), nullptr) + 0.0);
  }
  return ticks;
}

std::string scale_colour(double t) {
  // Five stops of the viridis scale, interpolated linearly.
  static const double stops[5][3] = {{68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}};
  if (!std::isfinite(t)) t = 0;
  t = std::clamp(t, 0.0, 1.0) * 4;
  const int i = std::min(static_cast<int>(t), 3);
  const double f = t - i;
  char buffer[8];
  int rgb[3];
  for (int c = 0; c < 3; ++c) rgb[c] = static_cast<int>(std::lround(stops[i][c] + f * (stops[i + 1][c] - stops[i][c])));
  std::snprintf(buffer, sizeof buffer, "#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
  return buffer;
}

namespace {

// The ticks of an axis over [lo, hi]. On a log axis, decades (with 2 and 5 between when there are few);
// the axis spans the data. Else round numbers, and the axis widens to the outer ticks.
std::vector<double> axis_ticks(double& lo, double& hi, bool log) {
  std::vector<double> ticks;
  if (log) {
    ticks = log_ticks(lo, hi);
    if (ticks.size() < 2) {
      ticks.clear();
      for (const double t : nice_ticks(lo, hi, 4))
        if (t > 0) ticks.push_back(t);
    }
  } else {
    ticks = nice_ticks(lo, hi);
    lo = std::min(lo, ticks.front());
    hi = std::max(hi, ticks.back());
  }
  return ticks;
}

}  // namespace

std::string line_plot_svg(const LinePlot& plot) {
  // The margins take 90 x 95 pixels (with a title): anything smaller leaves no room for the plot.
  if (plot.width < 100 || plot.height < 100)
    throw ValueError(message("line_plot_svg: size must be at least 100x100, got ", plot.width, "x", plot.height));
  for (const Series& s : plot.series)
    if (s.x.size() != s.y.size())
      throw ValueError(message("line_plot_svg: series \"", s.name, "\" has ", s.x.size(), " x values and ", s.y.size(),
                               " y values"));
  auto drawable = [&](double x, double y) {
    return std::isfinite(x) && std::isfinite(y) && (!plot.log_x || x > 0) && (!plot.log_y || y > 0);
  };
  auto tx = [&](double x) { return plot.log_x ? std::log10(x) : x; };
  auto ty = [&](double y) { return plot.log_y ? std::log10(y) : y; };

  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo, y_lo = x_lo, y_hi = -x_lo;
  for (const Series& s : plot.series)
    for (std::size_t i = 0; i < s.x.size(); ++i)
      if (drawable(s.x[i], s.y[i])) {
        x_lo = std::min(x_lo, s.x[i]);
        x_hi = std::max(x_hi, s.x[i]);
        y_lo = std::min(y_lo, s.y[i]);
        y_hi = std::max(y_hi, s.y[i]);
      }
  const bool empty = !(x_lo <= x_hi);
  if (empty) {
    x_lo = plot.log_x ? 1 : 0, x_hi = plot.log_x ? 10 : 1, y_lo = plot.log_y ? 1 : 0, y_hi = plot.log_y ? 10 : 1;
  }
  if (x_lo == x_hi) {
    if (plot.log_x) x_lo /= 2, x_hi *= 2;
    else x_lo -= 0.5, x_hi += 0.5;
  }
  if (y_lo == y_hi) {
    if (plot.log_y) y_lo /= 2, y_hi *= 2;
    else y_lo -= 0.5, y_hi += 0.5;
  }
  const std::vector<double> x_ticks = axis_ticks(x_lo, x_hi, plot.log_x);
  const std::vector<double> y_ticks = axis_ticks(y_lo, y_hi, plot.log_y);

  const double left = 70, right = 20, top = plot.title.empty() ? 20 : 40, bottom = 55;
  const double pw = plot.width - left - right, ph = plot.height - top - bottom;
  const double ly_lo = ty(y_lo), ly_hi = ty(y_hi);
  const double lx_lo = tx(x_lo), lx_hi = tx(x_hi);
  const double x_slack = 1e-9 * (std::abs(x_lo) + std::abs(x_hi));
  auto in_x_range = [&](double t) { return t >= x_lo - x_slack && t <= x_hi + x_slack; };
  auto sx = [&](double x) { return left + (tx(x) - lx_lo) / (lx_hi - lx_lo) * pw; };
  auto sy = [&](double y) { return top + ph - (ty(y) - ly_lo) / (ly_hi - ly_lo) * ph; };

  std::ostringstream out;
  out << header(plot.width, plot.height);
  if (!plot.title.empty()) out << text(plot.width / 2.0, 24, plot.title, "middle", 15);
  // Grid and ticks.
  out << "<g stroke=\"#dddddd\" stroke-width=\"1\">\n";
  for (const double t : x_ticks)
    if (in_x_range(t))
      out << "<line x1=\"" << num(sx(t)) << "\" y1=\"" << num(top) << "\" x2=\"" << num(sx(t)) << "\" y2=\""
          << num(top + ph) << "\"/>\n";
  for (const double t : y_ticks)
    if (t >= y_lo * (1 - 1e-9) && t <= y_hi * (1 + 1e-9))
      out << "<line x1=\"" << num(left) << "\" y1=\"" << num(sy(t)) << "\" x2=\"" << num(left + pw) << "\" y2=\""
          << num(sy(t)) << "\"/>\n";
  out << "</g>\n";
  out << "<rect x=\"" << num(left) << "\" y=\"" << num(top) << "\" width=\"" << num(pw) << "\" height=\"" << num(ph)
      << "\" fill=\"none\" stroke=\"black\"/>\n";
  for (const double t : x_ticks)
    if (in_x_range(t)) out << text(sx(t), top + ph + 16, tick_label(t));
  for (const double t : y_ticks)
    if (t >= y_lo * (1 - 1e-9) && t <= y_hi * (1 + 1e-9)) out << text(left - 6, sy(t) + 4, tick_label(t), "end");
  if (!plot.x_label.empty())
    out << text(left + pw / 2, plot.height - 12, plot.x_label + (plot.log_x ? " (log scale)" : ""), "middle", 13);
  if (!plot.y_label.empty())
    out << text(16, top + ph / 2, plot.y_label + (plot.log_y ? " (log scale)" : ""), "middle", 13,
                " transform=\"rotate(-90 16 " + num(top + ph / 2) + ")\"");
  // Lines, broken at points that cannot be drawn.
  for (std::size_t k = 0; k < plot.series.size(); ++k) {
    const Series& s = plot.series[k];
    const char* colour = kPalette[k % kPalette.size()];
    std::string points;
    auto flush = [&]() {
      if (!points.empty())
        out << "<polyline fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"1.5\" points=\"" << points
            << "\"/>\n";
      points.clear();
    };
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if (!drawable(s.x[i], s.y[i])) {
        flush();
        continue;
      }
      points += (points.empty() ? "" : " ") + num(sx(s.x[i])) + "," + num(sy(s.y[i]));
    }
    flush();
  }
  // Legend, top right inside the plot.
  if (plot.series.size() > 1 || (plot.series.size() == 1 && !plot.series[0].name.empty())) {
    double y = top + 16;
    for (std::size_t k = 0; k < plot.series.size(); ++k, y += 18) {
      const double x = left + pw - 150;
      out << "<line x1=\"" << num(x) << "\" y1=\"" << num(y - 4) << "\" x2=\"" << num(x + 24) << "\" y2=\""
          << num(y - 4) << "\" stroke=\"" << kPalette[k % kPalette.size()] << "\" stroke-width=\"2\"/>\n";
      out << text(x + 30, y, plot.series[k].name, "start");
    }
  }
  if (empty) out << text(left + pw / 2, top + ph / 2, "no data");
  out << "</svg>\n";
  return out.str();
}

std::string heat_map_svg(const std::vector<HeatMap>& panels, const std::string& title) {
  const double cell = 28, label_w = 60, label_h = 50, bar_w = 14, bar_gap = 12, bar_label_w = 46, gap = 30;
  const double top = title.empty() ? 20 : 44;
  double width = 10, height = 0;
  for (std::size_t p = 0; p < panels.size(); ++p) {
    const HeatMap& m = panels[p];
    const std::size_t rows = m.values.size(), cols = rows ? m.values[0].size() : 0;
    for (std::size_t r = 0; r < rows; ++r)
      if (m.values[r].size() != cols)
        throw ValueError(
            message("heat_map_svg: panel ", p, " row ", r, " has ", m.values[r].size(), " values, row 0 has ", cols));
    if (!m.row_labels.empty() && m.row_labels.size() != rows)
      throw ValueError(
          message("heat_map_svg: panel ", p, " has ", m.row_labels.size(), " row labels for ", rows, " rows"));
    if (!m.col_labels.empty() && m.col_labels.size() != cols)
      throw ValueError(
          message("heat_map_svg: panel ", p, " has ", m.col_labels.size(), " column labels for ", cols, " columns"));
    if ((m.min && !std::isfinite(*m.min)) || (m.max && !std::isfinite(*m.max)) || (m.min && m.max && *m.min >= *m.max))
      throw ValueError(message("heat_map_svg: panel ", p, " needs a finite min below a finite max, got ",
                               m.min ? tick_label(*m.min) : std::string("none"), " and ",
                               m.max ? tick_label(*m.max) : std::string("none")));
    width += label_w + cols * cell + bar_gap + bar_w + bar_label_w + gap;
    height = std::max(height, top + 24 + rows * cell + label_h);
  }
  height = std::max(height, top + 100);
  std::ostringstream out;
  out << header(static_cast<int>(std::ceil(width)), static_cast<int>(std::ceil(height)));
  if (!title.empty()) out << text(width / 2, 26, title, "middle", 15);
  double x0 = 10;
  for (const HeatMap& m : panels) {
    const std::size_t rows = m.values.size(), cols = rows ? m.values[0].size() : 0;
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (const auto& row : m.values)
      for (const double v : row)
        if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
    if (!(lo <= hi)) lo = 0, hi = 1;
    if (m.min) lo = *m.min;
    if (m.max) hi = *m.max;
    if (hi <= lo) hi = lo + 1;  // one value (or a given min above the data): a scale of width 1 from it
    const double gx = x0 + label_w, gy = top + 24;
    if (!m.title.empty()) out << text(gx + cols * cell / 2, top + 10, m.title, "middle", 13);
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t c = 0; c < cols; ++c) {
        const double v = m.values[r][c];
        const std::string fill = std::isfinite(v) ? scale_colour((v - lo) / (hi - lo)) : "#cccccc";
        out << "<rect x=\"" << num(gx + c * cell) << "\" y=\"" << num(gy + r * cell) << "\" width=\"" << num(cell)
            << "\" height=\"" << num(cell) << "\" fill=\"" << fill << "\"><title>" << escape(tick_label(v))
            << "</title></rect>\n";
      }
      if (!m.row_labels.empty()) out << text(gx - 5, gy + r * cell + cell / 2 + 4, m.row_labels[r], "end", 11);
    }
    for (std::size_t c = 0; c < cols && !m.col_labels.empty(); ++c)
      out << text(gx + c * cell + cell / 2, gy + rows * cell + 14, m.col_labels[c], "middle", 11);
    if (!m.x_label.empty()) out << text(gx + cols * cell / 2, gy + rows * cell + 34, m.x_label, "middle", 12);
    if (!m.y_label.empty())
      out << text(x0 + 10, gy + rows * cell / 2, m.y_label, "middle", 12,
                  " transform=\"rotate(-90 " + num(x0 + 10) + " " + num(gy + rows * cell / 2) + ")\"");
    // Colour bar: a vertical gradient of the scale with its range marked.
    const double bx = gx + cols * cell + bar_gap, bh = std::max(rows * cell, 80.0);
    const int steps = 32;
    for (int i = 0; i < steps; ++i) {
      const double t = 1.0 - (i + 0.5) / steps;
      out << "<rect x=\"" << num(bx) << "\" y=\"" << num(gy + i * bh / steps) << "\" width=\"" << num(bar_w)
          << "\" height=\"" << num(bh / steps + 0.5) << "\" fill=\"" << scale_colour(t) << "\"/>\n";
    }
    out << "<rect x=\"" << num(bx) << "\" y=\"" << num(gy) << "\" width=\"" << num(bar_w) << "\" height=\"" << num(bh)
        << "\" fill=\"none\" stroke=\"black\"/>\n";
    for (const double t : nice_ticks(lo, hi, 5)) {
      if (t < lo - 1e-12 || t > hi + 1e-12) continue;
      const double y = gy + bh - (t - lo) / (hi - lo) * bh;
      out << "<line x1=\"" << num(bx + bar_w) << "\" y1=\"" << num(y) << "\" x2=\"" << num(bx + bar_w + 4) << "\" y2=\""
          << num(y) << "\" stroke=\"black\"/>\n";
      out << text(bx + bar_w + 6, y + 4, tick_label(t), "start", 10);
    }
    x0 = bx + bar_w + bar_label_w + gap;
  }
  out << "</svg>\n";
  return out.str();
}

void write_svg(const std::string& path, const std::string& svg) { write_file_atomic(path, svg); }

}  // namespace tapegrad::io
