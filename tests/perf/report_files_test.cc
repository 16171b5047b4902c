// Benchmark reports written with --out: the JSON beside the table, and SVG
// plots whose lines carry exactly the rows they were asked for.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "perf/report.h"
#include "perf/svg_plot.h"

namespace ibdt::perf {
namespace {

std::string slurp(const std::filesystem::path& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(SvgPlot, DrawsEveryPointOfEverySeriesAndEscapesNames) {
  LinePlot plot{"t <&> \"q\"", "bytes", "us", true, true,
                {{"a<b", {{8, 1}, {64, 2}, {4096, 3}}}, {"c&d", {{8, 10}, {0, 5}, {64, 20}}}}};
  const std::string svg = renderSvg(plot);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_EQ(count(svg, "<circle"), 5u) << "x = 0 has no place on a log axis and is dropped";
  EXPECT_EQ(count(svg, "<path"), 2u);
  EXPECT_NE(svg.find("a&lt;b"), std::string::npos);
  EXPECT_NE(svg.find("c&amp;d"), std::string::npos);
  EXPECT_NE(svg.find("t &lt;&amp;&gt; &quot;q&quot;"), std::string::npos);
  EXPECT_EQ(svg.find("a<b"), std::string::npos);
  EXPECT_NE(svg.find(">1k<"), std::string::npos) << "decade ticks are labelled 1k, not 1000";
}

TEST(SvgPlot, LinearAxesStartAtZeroAndEmptyPlotsAreStillDocuments) {
  LinePlot plot{"linear", "x", "y", false, false, {{"s", {{5, 50}, {10, 100}}}}};
  const std::string svg = renderSvg(plot);
  EXPECT_NE(svg.find(">0<"), std::string::npos);
  EXPECT_EQ(count(svg, "<circle"), 2u);
  const std::string empty = renderSvg(LinePlot{"nothing", "x", "y", true, true, {}});
  EXPECT_NE(empty.find("</svg>"), std::string::npos);
  EXPECT_EQ(count(empty, "<circle"), 0u);
}

TEST(Report, OutDirGetsTheJsonAndOnePlotPerRequestFilteredByWhere) {
  const auto dir = std::filesystem::temp_directory_path() / ("ibdt-report-test-" + std::to_string(getpid()));
  Report report("alltoall: test rows", {"ranks", "bytes", "row", "us"});
  for (int ranks : {2, 4}) {
    for (int bytes : {8, 64, 512}) {
      report.add({{"ranks", ranks}, {"bytes", bytes}, {"row", "ibdt"}, {"us", ranks * bytes * 0.5}});
      report.add({{"ranks", ranks}, {"bytes", bytes}, {"row", "Open MPI"}, {"us", ranks * bytes * 1.0}});
    }
  }
  report.plot({"p4", "four ranks", "bytes", "us", "row", "", "", {{"ranks", 4}}});
  report.plot({"wide", "as columns", "bytes", "", "", "", "", {{"row", "ibdt"}}, {"us", "ranks"}});
  CommonOptions options;
  options.outDir = dir.string();
  testing::internal::CaptureStdout();
  report.print(options);
  const std::string table = testing::internal::GetCapturedStdout();
  EXPECT_NE(table.find("Open MPI"), std::string::npos) << "the table still goes to stdout";

  const auto json = nlohmann::json::parse(slurp(dir / "alltoall.json"));
  EXPECT_EQ(json["rows"].size(), 12u);
  const std::string p4 = slurp(dir / "alltoall-p4.svg");
  EXPECT_EQ(count(p4, "<circle"), 6u) << "3 sizes x 2 rows at 4 ranks, none at 2";
  EXPECT_NE(p4.find("ibdt: 512, 1024</title>"), std::string::npos) << "4 ranks x 512 B x 0.5";
  EXPECT_EQ(p4.find("ibdt: 512, 512</title>"), std::string::npos) << "the 2-rank row must not be drawn";
  const std::string wide = slurp(dir / "alltoall-wide.svg");
  EXPECT_EQ(count(wide, "<path"), 2u);
  EXPECT_EQ(count(wide, "<circle"), 12u) << "2 columns x 6 ibdt rows";
  std::filesystem::remove_all(dir);
}

TEST(Report, FileStemIsTheTitleBeforeTheColonUnlessSet) {
  Report report("ibdt-bench pack: GB/s", {"case"});
  EXPECT_EQ(report.fileStem(), "ibdt-bench-pack");
  report.setFileStem("pack");
  EXPECT_EQ(report.fileStem(), "pack");
}

}  // namespace
}  // namespace ibdt::perf

namespace ibdt::perf {
namespace {

TEST(RobustSummary, TukeyDropsTheUpperOutliersAndBracketsTheMedian) {
  // 40 samples 1..40 and two far above the upper fence (Q3 + 1.5 IQR).
  std::vector<double> samples;
  for (int i = 1; i <= 40; ++i) samples.push_back(i);
  samples.push_back(1000);
  samples.push_back(5000);
  RobustSummary s = robustSummarize(samples);
  EXPECT_EQ(s.dropped, 2u);
  EXPECT_EQ(s.kept, 40u);
  EXPECT_DOUBLE_EQ(s.median, 20.5);
  EXPECT_DOUBLE_EQ(s.max, 40);
  // n = 40: order statistics floor(20 - 6.2) = 13 and ceil(20 + 6.2 + 1) = 28.
  EXPECT_DOUBLE_EQ(s.ciLow, 13);
  EXPECT_DOUBLE_EQ(s.ciHigh, 28);
  // Nothing is dropped from a sample without outliers, and low values stay.
  RobustSummary flat = robustSummarize({0.001, 4, 5, 5, 6, 7});
  EXPECT_EQ(flat.dropped, 0u);
  EXPECT_DOUBLE_EQ(flat.min, 0.001);
  EXPECT_EQ(robustSummarize({}).kept, 0u);
  RobustSummary one = robustSummarize({3});
  EXPECT_EQ(one.kept, 1u);
  EXPECT_DOUBLE_EQ(one.ciLow, 3);
  EXPECT_DOUBLE_EQ(one.ciHigh, 3);
}

}  // namespace
}  // namespace ibdt::perf
