// perf/vector_targets: the targets judged from `ibdt-bench vector`
// rows — ratios, each bound at its x, and which targets a size missed.
#include "perf/vector_targets.h"

#include <gtest/gtest.h>

namespace ibdt::perf {
namespace {

nlohmann::json row(const std::string& name, int64_t x, double us, const std::string& carriedBy) {
  return {{"row", name}, {"x", x}, {"latency us", us}, {"carried by", carriedBy}};
}

const nlohmann::json* at(const VectorTargets& targets, int64_t x) {
  for (const nlohmann::json& r : targets.table.rows()) {
    if (r["x"] == x) return &r;
  }
  return nullptr;
}

TEST(VectorTargets, JudgesEachSizeAgainstItsBounds) {
  nlohmann::json rows = nlohmann::json::array({
      // x = 16: eager everywhere; auto 0.4 x Open MPI and 1.5 x Contig: met.
      row("auto", 16, 2.0, "eager"), row("Open MPI", 16, 5.0, "MPI_Type_vector"), row("Contig", 16, 1.34, "eager"),
      row("RWG-UP", 16, 1.0, "eager"),  // eager: not a forced choice, not "best"
      // x = 256: 0.6 x Open MPI (needs 0.5), 1.2 x RWG-UP (needs 1.1), 1.25 x Contig (ok).
      row("auto", 256, 30.0, "rwg-up"), row("Open MPI", 256, 50.0, "MPI_Type_vector"),
      row("Contig", 256, 24.0, "contig"), row("RWG-UP", 256, 25.0, "rwg-up"), row("P-RRS", 256, 40.0, "p-rrs"),
      // x = 2048: no Open MPI row; Multi-W best.
      row("auto", 2048, 100.0, "multi-w"), row("Multi-W", 2048, 100.0, "multi-w"), row("Contig", 2048, 90.0, "contig"),
  });
  VectorTargets targets = vectorTargets(rows);
  ASSERT_EQ(targets.table.rows().size(), 3u);

  const nlohmann::json* x16 = at(targets, 16);
  ASSERT_NE(x16, nullptr);
  EXPECT_DOUBLE_EQ((*x16)["auto/Open MPI"].get<double>(), 0.4);
  EXPECT_EQ((*x16)["Open MPI need"], "<= 0.5");
  EXPECT_FALSE(x16->contains("best forced"));
  EXPECT_EQ((*x16)["Contig need"], "<= 2");
  EXPECT_EQ((*x16)["verdict"], "met");

  const nlohmann::json* x256 = at(targets, 256);
  ASSERT_NE(x256, nullptr);
  EXPECT_EQ((*x256)["best forced"], "RWG-UP");
  EXPECT_DOUBLE_EQ((*x256)["auto/best"].get<double>(), 1.2);
  EXPECT_EQ((*x256)["Contig need"], "<= 1.3");
  EXPECT_EQ((*x256)["verdict"], "missed: Open MPI, best");

  const nlohmann::json* x2048 = at(targets, 2048);
  ASSERT_NE(x2048, nullptr);
  EXPECT_FALSE(x2048->contains("auto/Open MPI"));
  EXPECT_EQ((*x2048)["best forced"], "Multi-W");
  EXPECT_EQ((*x2048)["verdict"], "met");  // 1.11 x Contig is within 1.3

  EXPECT_EQ(targets.summary, "every target met at 2 of 3 sizes judged");
}

TEST(VectorTargets, NothingToJudgeWithoutAnAutoRow) {
  VectorTargets targets = vectorTargets(nlohmann::json::array({row("Open MPI", 1, 2.0, "MPI_Type_vector")}));
  EXPECT_TRUE(targets.table.rows().empty());
  EXPECT_EQ(targets.summary, "no auto row was run: nothing to judge");
}

TEST(VectorTargets, ASizeWithOnlyAutoIsNotJudged) {
  VectorTargets targets = vectorTargets(nlohmann::json::array({row("auto", 4, 2.0, "eager")}));
  ASSERT_EQ(targets.table.rows().size(), 1u);
  EXPECT_EQ(targets.table.rows()[0]["verdict"], "-");
  EXPECT_EQ(targets.summary, "every target met at 0 of 0 sizes judged");
}

}  // namespace
}  // namespace ibdt::perf
