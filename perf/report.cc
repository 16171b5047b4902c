#include "perf/report.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "perf/svg_plot.h"

namespace ibdt::perf {

Summary summarize(std::vector<double> samples) {
  Summary summary;
  summary.count = samples.size();
  if (samples.empty()) return summary;
  std::sort(samples.begin(), samples.end());
  size_t mid = samples.size() / 2;
  summary.median = samples.size() % 2 == 1 ? samples[mid] : 0.5 * (samples[mid - 1] + samples[mid]);
  summary.min = samples.front();
  summary.max = samples.back();
  return summary;
}

namespace {

// The q-quantile of sorted samples, interpolated between order statistics.
double quantile(const std::vector<double>& sorted, double q) {
  const double at = q * static_cast<double>(sorted.size() - 1);
  const size_t low = static_cast<size_t>(at);
  const size_t high = std::min(low + 1, sorted.size() - 1);
  return sorted[low] + (at - static_cast<double>(low)) * (sorted[high] - sorted[low]);
}

}  // namespace

RobustSummary robustSummarize(std::vector<double> samples) {
  RobustSummary out;
  if (samples.empty()) return out;
  std::sort(samples.begin(), samples.end());
  const double q1 = quantile(samples, 0.25), q3 = quantile(samples, 0.75);
  const double fence = q3 + 1.5 * (q3 - q1);
  const size_t total = samples.size();
  while (samples.size() > 1 && samples.back() > fence) samples.pop_back();
  out.kept = samples.size();
  out.dropped = total - out.kept;
  const Summary plain = summarize(samples);
  out.median = plain.median;
  out.min = plain.min;
  out.max = plain.max;
  const double n = static_cast<double>(samples.size());
  const double half = 0.98 * std::sqrt(n);  // 1.96 * sqrt(n) / 2
  const auto rankAt = [&](double rank) {
    const double clamped = std::clamp(rank, 1.0, n);  // 1-based order statistic
    return samples[static_cast<size_t>(clamped) - 1];
  };
  out.ciLow = rankAt(std::floor(n / 2 - half));
  out.ciHigh = rankAt(std::ceil(n / 2 + half + 1));
  return out;
}

Report::Report(std::string title, std::vector<std::string> columns)
    : title_(std::move(title)), columns_(std::move(columns)) {}

void Report::add(nlohmann::json row) { rows_.push_back(std::move(row)); }

void Report::note(const std::string& key, nlohmann::json value) { notes_[key] = std::move(value); }

namespace {

std::string cell(const nlohmann::json& value) {
  if (value.is_null()) return "-";
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_integer()) return std::to_string(value.get<int64_t>());
  if (value.is_number()) {
    char text[32];
    double v = value.get<double>();
    std::snprintf(text, sizeof text, v != 0 && (v < 0.01 && v > -0.01) ? "%.3g" : "%.3f", v);
    return text;
  }
  return value.dump();
}

}  // namespace

void Report::plot(RowPlot plot) { plots_.push_back(std::move(plot)); }

nlohmann::json Report::toJson() const {
  nlohmann::json out = {{"benchmark", title_}, {"machine", machineDescription()}, {"rows", rows_}};
  for (auto& [key, value] : notes_.items()) out[key] = value;
  return out;
}

std::string Report::fileStem() const {
  if (!fileStem_.empty()) return fileStem_;
  std::string stem;
  for (char c : title_.substr(0, title_.find(':'))) {
    if (std::isalnum(static_cast<unsigned char>(c))) stem += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else if (!stem.empty() && stem.back() != '-') stem += '-';
  }
  while (!stem.empty() && stem.back() == '-') stem.pop_back();
  return stem.empty() ? "report" : stem;
}

namespace {

LinePlot linePlotOf(const RowPlot& spec, const nlohmann::json& rows) {
  LinePlot plot{spec.title, spec.xLabel.empty() ? spec.x : spec.xLabel, spec.yLabel.empty() ? spec.y : spec.yLabel,
                spec.logX, spec.logY, {}};
  std::map<std::string, size_t> index;  // series name -> position, in order of first appearance
  auto addPoint = [&](const std::string& name, const nlohmann::json& x, const nlohmann::json& y) {
    if (!x.is_number() || !y.is_number()) return;
    auto [at, added] = index.emplace(name, plot.series.size());
    if (added) plot.series.push_back({name, {}});
    plot.series[at->second].points.emplace_back(x.get<double>(), y.get<double>());
  };
  for (const auto& row : rows) {
    bool match = true;
    for (auto& [key, value] : spec.where.items()) match = match && row.value(key, nlohmann::json()) == value;
    if (!match) continue;
    const nlohmann::json x = row.value(spec.x, nlohmann::json());
    for (const std::string& column : spec.columns) addPoint(column, x, row.value(column, nlohmann::json()));
    if (!spec.columns.empty()) continue;
    const nlohmann::json label = row.value(spec.series, nlohmann::json());
    addPoint(label.is_string() ? label.get<std::string>() : label.dump(), x, row.value(spec.y, nlohmann::json()));
  }
  return plot;
}

}  // namespace

// Files are a convenience beside stdout: a failure to write one is reported
// on stderr and does not fail the benchmark.
void Report::writeFiles(const std::string& dir) const {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  const std::string stem = dir + "/" + fileStem();
  auto write = [](const std::string& path, const std::string& text) {
    std::ofstream file(path);
    file << text;
    if (!file) std::fprintf(stderr, "ibdt-bench: could not write %s\n", path.c_str());
    else std::fprintf(stderr, "ibdt-bench: wrote %s\n", path.c_str());
  };
  write(stem + ".json", toJson().dump(2) + "\n");
  for (const RowPlot& plot : plots_) write(stem + "-" + plot.name + ".svg", renderSvg(linePlotOf(plot, rows_)));
}

void Report::print(const CommonOptions& options) const {
  if (!options.outDir.empty()) writeFiles(options.outDir);
  if (options.json) {
    std::printf("%s\n", toJson().dump(2).c_str());
    return;
  }
  std::vector<size_t> width(columns_.size());
  for (size_t c = 0; c < columns_.size(); ++c) {
    width[c] = columns_[c].size();
    for (const auto& row : rows_) width[c] = std::max(width[c], cell(row.value(columns_[c], nlohmann::json())).size());
  }
  std::printf("\n%s\n", title_.c_str());
  for (size_t c = 0; c < columns_.size(); ++c) std::printf("%s%*s", c ? "  " : "", static_cast<int>(width[c]), columns_[c].c_str());
  std::printf("\n");
  for (const auto& row : rows_) {
    for (size_t c = 0; c < columns_.size(); ++c) {
      std::printf("%s%*s", c ? "  " : "", static_cast<int>(width[c]), cell(row.value(columns_[c], nlohmann::json())).c_str());
    }
    std::printf("\n");
  }
  for (auto& [key, value] : notes_.items()) std::printf("%s: %s\n", key.c_str(), cell(value).c_str());
  std::fflush(stdout);
}

std::string machineDescription() {
  std::string model = "unknown CPU";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  }
  utsname name{};
  uname(&name);
  std::ostringstream out;
  out << model << ", " << sysconf(_SC_NPROCESSORS_ONLN) << " cores, Linux " << name.release;
  return out.str();
}

}  // namespace ibdt::perf
