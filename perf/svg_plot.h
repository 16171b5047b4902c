// perf/svg_plot.h — line plots as standalone SVG files, for benchmark results
// that people would rather look at than read (time against message size, one
// line per algorithm or library).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace ibdt::perf {

struct PlotSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y); drawn in x order
};

struct LinePlot {
  std::string title;
  std::string xLabel, yLabel;
  bool logX = true, logY = true;  // log axes drop points <= 0
  std::vector<PlotSeries> series;
};

// The plot as a complete SVG document (no external fonts or scripts).
std::string renderSvg(const LinePlot& plot);

}  // namespace ibdt::perf
