#pragma once
// The examples' plots are the library's (tapegrad/io/svg.h), under the names the examples use.

#include "tapegrad/io/svg.h"

namespace tapegrad::examples {

using io::heat_map_svg;
using io::HeatMap;
using io::line_plot_svg;
using io::LinePlot;
using io::nice_ticks;
using io::scale_colour;
using io::Series;
using io::write_svg;

}  // namespace tapegrad::examples
