#include "perf/vector_targets.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ibdt::perf {
namespace {

const char* const kForcedSchemes[] = {"Generic", "BC-SPUP", "RWG-UP", "P-RRS", "Multi-W"};

bool isForcedScheme(const std::string& row) {
  return std::find(std::begin(kForcedSchemes), std::end(kForcedSchemes), row) != std::end(kForcedSchemes);
}

// "BC-SPUP" -> "bc-spup": how the rows' "carried by" names a scheme.
std::string lowerCase(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// Median latency (us) by row name, then by x.
using Latencies = std::map<std::string, std::map<int64_t, double>>;

std::optional<double> latency(const Latencies& all, const std::string& row, int64_t x) {
  auto byRow = all.find(row);
  if (byRow == all.end()) return std::nullopt;
  auto at = byRow->second.find(x);
  if (at == byRow->second.end()) return std::nullopt;
  return at->second;
}

std::string bound(double limit) {
  char text[16];
  std::snprintf(text, sizeof text, "<= %g", limit);
  return text;
}

// One x: fills the ratio columns and returns the names of the targets missed
// (nullopt when no target could be judged at this x).
std::optional<std::vector<std::string>> judge(const Latencies& all, int64_t x, double autoUs, nlohmann::json& row) {
  std::vector<std::string> missed;
  bool judged = false;
  auto check = [&](const std::string& what, double ratio, double limit) {
    row["auto/" + what] = ratio;
    row[what + " need"] = bound(limit);
    judged = true;
    if (ratio > limit) missed.push_back(what);
  };
  if (auto ompi = latency(all, "Open MPI", x)) {
    row["Open MPI us"] = *ompi;
    check("Open MPI", autoUs / *ompi, x <= 256 ? 0.5 : 1.0);
  }
  std::optional<double> best;
  for (const char* scheme : kForcedSchemes) {
    auto us = latency(all, scheme, x);
    if (us && (!best || *us < *best)) {
      best = us;
      row["best forced"] = scheme;
    }
  }
  if (best) check("best", autoUs / *best, 1.1);
  if (auto contig = latency(all, "Contig", x)) {
    row["Contig us"] = *contig;
    if (x >= 16) {
      check("Contig", autoUs / *contig, x >= 256 ? 1.3 : 2.0);
    } else {
      row["auto/Contig"] = autoUs / *contig;  // no target below 16 columns
    }
  }
  if (!judged) return std::nullopt;
  return missed;
}

}  // namespace

VectorTargets vectorTargets(const nlohmann::json& rows) {
  Latencies all;
  for (const nlohmann::json& row : rows) {
    const std::string name = row.at("row").get<std::string>();
    // A forced scheme only counts where it carried the messages: below the
    // rendezvous threshold every row goes eager and there is nothing to choose.
    if (isForcedScheme(name) && row.value("carried by", "").find(lowerCase(name)) == std::string::npos) continue;
    all[name][row.at("x").get<int64_t>()] = row.at("latency us").get<double>();
  }
  Report targets("targets (issue 6), from the latency medians above; auto/<row> < 1: auto is faster",
                 {"x", "auto us", "Open MPI us", "auto/Open MPI", "Open MPI need", "best forced", "auto/best",
                  "best need", "Contig us", "auto/Contig", "Contig need", "verdict"});
  targets.setFileStem("vector-targets");
  int judgedSizes = 0, metSizes = 0;
  auto autoRow = all.find("auto");
  if (autoRow != all.end()) {
    for (const auto& [x, autoUs] : autoRow->second) {
      nlohmann::json row = {{"x", x}, {"auto us", autoUs}};
      auto missed = judge(all, x, autoUs, row);
      if (!missed) {
        row["verdict"] = "-";
      } else {
        ++judgedSizes;
        std::string verdict;
        for (const std::string& what : *missed) verdict += (verdict.empty() ? "missed: " : ", ") + what;
        if (verdict.empty()) ++metSizes;
        row["verdict"] = verdict.empty() ? "met" : verdict;
      }
      targets.add(std::move(row));
    }
  }
  std::string summary = autoRow == all.end() ? std::string("no auto row was run: nothing to judge")
                                             : "every target met at " + std::to_string(metSizes) + " of " +
                                                   std::to_string(judgedSizes) + " sizes judged";
  targets.note("best forced", "the fastest forced scheme that carried the messages itself (none at eager sizes)");
  targets.note("summary", summary);
  return {std::move(targets), std::move(summary)};
}

}  // namespace ibdt::perf
