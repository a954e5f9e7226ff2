// `commprof stats` output pieces (analysis/report/stats_output.h): time units, name elision,
// sorting by each documented key, and the CSV quoting of names with commas and quotes.
#include "analysis/report/stats_output.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace commprof {
namespace {

OpStatsRow Row(const std::string& name, int64_t total, uint64_t calls, double imbalance) {
  OpStatsRow r;
  r.category = "mpi";
  r.name = name;
  r.total_ns = total;
  r.self_ns = total;
  r.calls = calls;
  r.imbalance = imbalance;
  return r;
}

TEST(StatsOutput, TimesHaveThreeDigitsAndAUnitInAtMostSixCharacters) {
  EXPECT_EQ(FormatStatsTime(0), "0ns");
  EXPECT_EQ(FormatStatsTime(999), "999ns");
  EXPECT_EQ(FormatStatsTime(1000), "1.00us");
  EXPECT_EQ(FormatStatsTime(10'500), "10.5us");
  EXPECT_EQ(FormatStatsTime(999'400), "999us");
  EXPECT_EQ(FormatStatsTime(999'600), "1.00ms");
  EXPECT_EQ(FormatStatsTime(3.13e6), "3.13ms");
  EXPECT_EQ(FormatStatsTime(2.5e9), "2.50s");
  EXPECT_EQ(FormatStatsTime(4.2e12), "4200s");
  for (double ns = 1; ns < 1e14; ns *= 1.7) {
    EXPECT_LE(FormatStatsTime(ns).size(), 6u) << ns;
  }
}

TEST(StatsOutput, LongNamesAreCutInTheMiddleKeepingBothEnds) {
  EXPECT_EQ(ElideMiddle("MPI_Allreduce", 20), "MPI_Allreduce");
  const std::string cut = ElideMiddle("void kernel<float, 128>(Params const&)", 20);
  EXPECT_EQ(cut.size(), 20u);
  EXPECT_EQ(cut, "void kern... const&)");  // 9 + 3 + 8
}

TEST(StatsOutput, SortKeysOrderFiguresLargestFirstAndNamesAlphabetically) {
  std::vector<OpStatsRow> rows = {Row("b", 10, 5, 1.5), Row("a", 30, 1, 1.0), Row("c", 20, 9, 3.0)};
  auto names = [&] {
    std::string s;
    for (const OpStatsRow& r : rows) {
      s += r.name;
    }
    return s;
  };
  ASSERT_TRUE(SortStatsRows(rows, "total"));
  EXPECT_EQ(names(), "acb");
  ASSERT_TRUE(SortStatsRows(rows, "calls"));
  EXPECT_EQ(names(), "cba");
  ASSERT_TRUE(SortStatsRows(rows, "imbalance"));  // an alias of imbal
  EXPECT_EQ(names(), "cba");
  ASSERT_TRUE(SortStatsRows(rows, "name"));
  EXPECT_EQ(names(), "abc");
  EXPECT_FALSE(SortStatsRows(rows, "speed"));
  EXPECT_EQ(names(), "abc");  // untouched
}

TEST(StatsOutput, CsvQuotesNamesWithCommasAndQuotes) {
  std::ostringstream os;
  WriteStatsCsv({Row("f<int, 2>(\"x\")", 7, 1, 1.0)}, os);
  std::string line = os.str().substr(os.str().find('\n') + 1);
  EXPECT_EQ(line.rfind("mpi,\"f<int, 2>(\"\"x\"\")\",,,,,,1,7,7,", 0), 0u) << line;
}

}  // namespace
}  // namespace commprof
