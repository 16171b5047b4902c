// perf/report.h — honest measurement and reporting shared by every benchmark.
//
// measure() warms up, then times each repetition separately; summarize()
// reports the median with min and max. A Report collects rows, prints them as
// an aligned table and, with --json, as machine-readable JSON on stdout; with
// --out DIR it also writes the JSON and its SVG plots into DIR.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ibdt::perf {

struct Summary {
  double median = 0;
  double min = 0;
  double max = 0;
  size_t count = 0;
};

Summary summarize(std::vector<double> samples);

// Träff, Rougier and Hunold's statistics (docs/alltoall-bruck.md, "Benchmark
// statistics"): Tukey's filter drops the samples above Q3 + 1.5 IQR (the
// upper fence only: noise on a loaded machine only ever adds time), then the
// median of the rest with its distribution-free 95 % confidence interval
// (the order statistics at n/2 -+ 0.98 sqrt(n), as for a binomial(n, 1/2)).
struct RobustSummary {
  double median = 0;
  double ciLow = 0, ciHigh = 0;  // 95 % confidence interval of the median
  double min = 0, max = 0;       // of the kept samples
  size_t kept = 0, dropped = 0;
};
RobustSummary robustSummarize(std::vector<double> samples);

// Runs fn() `warmup` times untimed, then `reps` times, each timed on its own;
// returns the seconds of each timed run. `inner` calls per repetition are
// averaged (for operations too short to time one by one).
template <typename Fn>
std::vector<double> measure(int warmup, int reps, int inner, Fn&& fn) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> seconds;
  seconds.reserve(static_cast<size_t>(reps));
  for (int r = 0; r < reps; ++r) {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < inner; ++i) fn();
    std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    seconds.push_back(elapsed.count() / inner);
  }
  return seconds;
}

// Options every benchmark shares.
struct CommonOptions {
  bool json = false;
  int reps = 15;
  int warmup = 3;
  bool quick = false;  // fewer sizes and repetitions (used by the test suite)
  std::string outDir;  // non-empty: write <report>.json and its plots (<report>-<plot>.svg) here
};

// A line plot of a report's rows: one line per distinct value of `series`,
// a point (row[x], row[y]) for every row whose `where` entries all match.
// With `columns` instead (wide rows), one line per column: (row[x], row[column]).
struct RowPlot {
  std::string name;  // the SVG file is <report>-<name>.svg
  std::string title;
  std::string x, y, series;
  std::string xLabel, yLabel;  // default: the keys
  nlohmann::json where = nlohmann::json::object();
  std::vector<std::string> columns;
  bool logX = true, logY = true;
};

class Report {
 public:
  Report(std::string title, std::vector<std::string> columns);
  // A row maps column names to values (numbers are printed with 3 significant decimals).
  void add(nlohmann::json row);
  // Free-form facts printed under the table and stored in the JSON ("machine", "note", ...).
  void note(const std::string& key, nlohmann::json value);
  void plot(RowPlot plot);
  void print(const CommonOptions& options) const;
  const nlohmann::json& rows() const { return rows_; }
  // The report's file name in --out: its title up to the first ':', as a
  // slug, unless set (reports of one benchmark need distinct names).
  std::string fileStem() const;
  void setFileStem(std::string stem) { fileStem_ = std::move(stem); }

 private:
  std::string title_;
  std::vector<std::string> columns_;
  nlohmann::json rows_ = nlohmann::json::array();
  nlohmann::json notes_ = nlohmann::json::object();
  std::vector<RowPlot> plots_;
  std::string fileStem_;

  nlohmann::json toJson() const;
  void writeFiles(const std::string& dir) const;
};

// A short description of this machine (CPU model, cores, kernel) for reports.
std::string machineDescription();

}  // namespace ibdt::perf
