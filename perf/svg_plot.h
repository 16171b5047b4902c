// perf/svg_plot.h — a small SVG line chart writer for benchmark reports:
// panels side by side, log-log axes, one polyline per series.
#pragma once

#include <string>
#include <vector>

#include "ibdt/status.h"

namespace ibdt::perf {

struct PlotSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), both > 0
};

struct PlotPanel {
  std::string title;
  std::vector<PlotSeries> series;
};

// Writes the panels to `path` (x and y on log scales, labelled `xLabel`
// and `yLabel`); a legend names every series by colour.
Status writeSvgPlot(const std::string& path, const std::string& title, const std::string& xLabel,
                    const std::string& yLabel, const std::vector<PlotPanel>& panels);

}  // namespace ibdt::perf
