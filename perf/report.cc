#include "perf/report.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

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

void Report::print(const CommonOptions& options) const {
  if (options.json) {
    nlohmann::json out = {{"benchmark", title_}, {"machine", machineDescription()}, {"rows", rows_}};
    for (auto& [key, value] : notes_.items()) out[key] = value;
    std::printf("%s\n", out.dump(2).c_str());
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
