#include "perf/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace ibdt::perf {
namespace {

constexpr double kWidth = 900, kHeight = 520;
constexpr double kLeft = 80, kRight = 220, kTop = 50, kBottom = 60;  // margins; the legend sits right
// Colours distinguishable in print and by most colour-blind readers (Okabe-Ito, then greys).
constexpr const char* kColours[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00",
                                    "#56B4E9", "#F0E442", "#000000", "#777777", "#BBBBBB"};

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}

// Axis labels: 1k, 64k, 1M rather than 1000, 65536, 1e+06.
std::string tickLabel(double v) {
  const char* suffix[] = {"", "k", "M", "G", "T"};
  int power = 0;
  while (std::fabs(v) >= 1000 && power < 4) v /= 1000, ++power;
  return number(v) + suffix[power];
}

// Maps data values to pixels along one axis, linear or log10.
struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  double pixelLo = 0, pixelHi = 1;

  double value(double v) const { return log ? std::log10(v) : v; }
  double pixel(double v) const { return pixelLo + (value(v) - lo) / (hi - lo) * (pixelHi - pixelLo); }
  // Tick positions: every decade on a log axis, about 6 round steps on a linear one.
  std::vector<double> ticks() const {
    std::vector<double> out;
    if (log) {
      for (double e = std::floor(lo); e <= std::ceil(hi) + 1e-9; e += 1) {
        if (e >= lo - 1e-9 && e <= hi + 1e-9) out.push_back(std::pow(10.0, e));
      }
      return out;
    }
    const double raw = (hi - lo) / 6, magnitude = std::pow(10.0, std::floor(std::log10(raw)));
    const double step = raw / magnitude < 2 ? 2 * magnitude : raw / magnitude < 5 ? 5 * magnitude : 10 * magnitude;
    for (double t = std::ceil(lo / step) * step; t <= hi + 1e-9 * step; t += step) out.push_back(t);
    return out;
  }
};

Axis fitAxis(const LinePlot& plot, bool xAxis, double pixelLo, double pixelHi) {
  Axis axis;
  axis.log = xAxis ? plot.logX : plot.logY;
  axis.pixelLo = pixelLo;
  axis.pixelHi = pixelHi;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const PlotSeries& s : plot.series) {
    for (auto [x, y] : s.points) {
      const double v = xAxis ? x : y;
      if (axis.log && v <= 0) continue;
      lo = std::min(lo, axis.value(v));
      hi = std::max(hi, axis.value(v));
    }
  }
  if (!std::isfinite(lo)) lo = 0, hi = 1;
  if (axis.log) lo = std::floor(lo), hi = std::max(std::ceil(hi), lo + 1);
  if (!axis.log && lo > 0) lo = 0;  // linear axes start at zero so ratios read true
  if (hi <= lo) hi = lo + 1;
  axis.lo = lo;
  axis.hi = hi;
  return axis;
}

}  // namespace

std::string renderSvg(const LinePlot& plot) {
  const Axis x = fitAxis(plot, true, kLeft, kWidth - kRight);
  const Axis y = fitAxis(plot, false, kHeight - kBottom, kTop);
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << kHeight
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << kWidth / 2 << "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">" << escape(plot.title)
      << "</text>\n";
  for (double t : x.ticks()) {
    const double px = x.pixel(t);
    svg << "<line x1=\"" << px << "\" y1=\"" << kTop << "\" x2=\"" << px << "\" y2=\"" << kHeight - kBottom
        << "\" stroke=\"#e5e5e5\"/><text x=\"" << px << "\" y=\"" << kHeight - kBottom + 16
        << "\" text-anchor=\"middle\">" << tickLabel(t) << "</text>\n";
  }
  for (double t : y.ticks()) {
    const double py = y.pixel(t);
    svg << "<line x1=\"" << kLeft << "\" y1=\"" << py << "\" x2=\"" << kWidth - kRight << "\" y2=\"" << py
        << "\" stroke=\"#e5e5e5\"/><text x=\"" << kLeft - 6 << "\" y=\"" << py + 4 << "\" text-anchor=\"end\">"
        << tickLabel(t) << "</text>\n";
  }
  svg << "<rect x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << kWidth - kLeft - kRight << "\" height=\""
      << kHeight - kTop - kBottom << "\" fill=\"none\" stroke=\"#444\"/>\n"
      << "<text x=\"" << (kLeft + kWidth - kRight) / 2 << "\" y=\"" << kHeight - 18 << "\" text-anchor=\"middle\">"
      << escape(plot.xLabel) << "</text>\n"
      << "<text transform=\"translate(18," << (kTop + kHeight - kBottom) / 2
      << ") rotate(-90)\" text-anchor=\"middle\">" << escape(plot.yLabel) << "</text>\n";
  for (size_t i = 0; i < plot.series.size(); ++i) {
    const PlotSeries& s = plot.series[i];
    const char* colour = kColours[i % std::size(kColours)];
    auto points = s.points;
    std::sort(points.begin(), points.end());
    std::string path;
    for (auto [px, py] : points) {
      if ((x.log && px <= 0) || (y.log && py <= 0)) continue;
      path += (path.empty() ? "M" : " L") + number(x.pixel(px)) + "," + number(y.pixel(py));
      svg << "<circle cx=\"" << x.pixel(px) << "\" cy=\"" << y.pixel(py) << "\" r=\"2.5\" fill=\"" << colour
          << "\"><title>" << escape(s.name) << ": " << number(px) << ", " << number(py) << "</title></circle>\n";
    }
    if (!path.empty()) svg << "<path d=\"" << path << "\" fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"1.6\"/>\n";
    const double ly = kTop + 10 + 18 * static_cast<double>(i);
    svg << "<line x1=\"" << kWidth - kRight + 14 << "\" y1=\"" << ly << "\" x2=\"" << kWidth - kRight + 34 << "\" y2=\""
        << ly << "\" stroke=\"" << colour << "\" stroke-width=\"2\"/><text x=\"" << kWidth - kRight + 40 << "\" y=\""
        << ly + 4 << "\">" << escape(s.name) << "</text>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace ibdt::perf
