#include "perf/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

namespace ibdt::perf {
namespace {

constexpr double kPanelWidth = 340, kPanelHeight = 260, kMargin = 50, kLegendHeight = 110;
constexpr const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else out += c;
  }
  return out;
}

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", value);
  return text;
}

// Log-scale bounds of every point of every panel, widened when flat.
void bounds(const std::vector<PlotPanel>& panels, double& lowX, double& highX, double& lowY, double& highY) {
  lowX = lowY = 1e300;
  highX = highY = -1e300;
  for (const PlotPanel& panel : panels) {
    for (const PlotSeries& series : panel.series) {
      for (auto [x, y] : series.points) {
        if (x <= 0 || y <= 0) continue;
        lowX = std::min(lowX, std::log10(x));
        highX = std::max(highX, std::log10(x));
        lowY = std::min(lowY, std::log10(y));
        highY = std::max(highY, std::log10(y));
      }
    }
  }
  if (lowX > highX) lowX = 0, highX = 1, lowY = 0, highY = 1;
  if (highX - lowX < 1e-9) highX = lowX + 1;
  if (highY - lowY < 1e-9) highY = lowY + 1;
}

}  // namespace

Status writeSvgPlot(const std::string& path, const std::string& title, const std::string& xLabel,
                    const std::string& yLabel, const std::vector<PlotPanel>& panels) {
  double lowX, highX, lowY, highY;
  bounds(panels, lowX, highX, lowY, highY);
  std::map<std::string, const char*> colourOf;
  for (const PlotPanel& panel : panels) {
    for (const PlotSeries& series : panel.series) {
      if (!colourOf.count(series.name)) colourOf[series.name] = kColours[colourOf.size() % std::size(kColours)];
    }
  }
  const double width = kMargin + panels.size() * (kPanelWidth + kMargin);
  const double height = 2 * kMargin + kPanelHeight + kLegendHeight;
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << kMargin << "\" y=\"20\" font-size=\"14\">" << escape(title) << "</text>\n";
  for (size_t p = 0; p < panels.size(); ++p) {
    const double left = kMargin + p * (kPanelWidth + kMargin), top = kMargin;
    auto px = [&](double x) { return left + (std::log10(x) - lowX) / (highX - lowX) * kPanelWidth; };
    auto py = [&](double y) { return top + kPanelHeight - (std::log10(y) - lowY) / (highY - lowY) * kPanelHeight; };
    svg << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << kPanelWidth << "\" height=\"" << kPanelHeight
        << "\" fill=\"none\" stroke=\"#999\"/>\n<text x=\"" << left + 4 << "\" y=\"" << top - 6 << "\">"
        << escape(panels[p].title) << "</text>\n";
    for (double e = std::ceil(lowY); e <= highY; e += 1) {  // decades on y, labelled
      svg << "<text x=\"" << left - 4 << "\" y=\"" << py(std::pow(10, e)) + 4 << "\" text-anchor=\"end\">"
          << number(std::pow(10, e)) << "</text>\n";
    }
    for (double e = std::ceil(lowX); e <= highX; e += 1) {
      svg << "<text x=\"" << px(std::pow(10, e)) << "\" y=\"" << top + kPanelHeight + 14
          << "\" text-anchor=\"middle\">" << number(std::pow(10, e)) << "</text>\n";
    }
    svg << "<text x=\"" << left + kPanelWidth / 2 << "\" y=\"" << top + kPanelHeight + 30
        << "\" text-anchor=\"middle\">" << escape(xLabel) << "</text>\n";
    if (p == 0) {
      svg << "<text transform=\"rotate(-90)\" x=\"" << -(top + kPanelHeight / 2) << "\" y=\"14\" text-anchor=\"middle\">"
          << escape(yLabel) << "</text>\n";
    }
    for (const PlotSeries& series : panels[p].series) {
      svg << "<polyline fill=\"none\" stroke-width=\"1.5\" stroke=\"" << colourOf[series.name] << "\" points=\"";
      for (auto [x, y] : series.points) {
        if (x > 0 && y > 0) svg << px(x) << "," << py(y) << " ";
      }
      svg << "\"/>\n";
    }
  }
  double legendY = 2 * kMargin + kPanelHeight;
  double legendX = kMargin;
  for (const auto& [name, colour] : colourOf) {
    svg << "<rect x=\"" << legendX << "\" y=\"" << legendY - 8 << "\" width=\"12\" height=\"3\" fill=\"" << colour
        << "\"/><text x=\"" << legendX + 16 << "\" y=\"" << legendY << "\">" << escape(name) << "</text>\n";
    legendX += 200;
    if (legendX + 200 > width) legendX = kMargin, legendY += 16;
  }
  svg << "</svg>\n";
  std::ofstream out(path);
  out << svg.str();
  if (!out) return makeError(Code::kSystem, "svg plot: cannot write ", path);
  return Status::ok();
}

}  // namespace ibdt::perf
