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

// Kernel names that differ only past the cut (template arguments) must not print alike: each gets
// the part where it first differs, within the width; equal names stay equal, short ones whole.
TEST(StatsOutput, NamesThatWouldPrintAlikeShowWhereTheyDiffer) {
  const std::string stem = "void split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_";
  const std::vector<std::string> names = {stem + "cta_per_row_1<float, float, long>(Params const&)",
                                          stem + "warp_per_row_1<float, float, long>(Params const&)",
                                          stem + "cta_per_row_1<float, float, long>(Params const&)",
                                          "ncclKernel_AllReduce", stem + "cta_per_row_1<c10::Half, float>(P)"};
  for (size_t width : {16u, 24u, 40u}) {
    const std::vector<std::string> out = ElideDistinct(names, width);
    ASSERT_EQ(out.size(), names.size());
    for (size_t i = 0; i < names.size(); ++i) {
      EXPECT_LE(out[i].size(), width) << out[i];
      for (size_t j = 0; j < names.size(); ++j) {
        EXPECT_EQ(out[i] == out[j], names[i] == names[j]) << width << ": " << out[i] << " / " << out[j];
      }
    }
    if (width >= names[3].size()) {
      EXPECT_EQ(out[3], "ncclKernel_AllReduce");  // it fits: whole
    }
  }
  // Without a collision a name is cut as ElideMiddle cuts it.
  EXPECT_EQ(ElideDistinct({"void kernel<float, 128>(Params const&)"}, 20)[0], "void kern... const&)");
  // Names whose windows show the same characters get numbers: A's window is where it differs from C
  // (position 100), B's where it differs from A (position 60), and both read "aaapaaaaa".
  const std::string a = std::string(60, 'a') + "x" + std::string(39, 'a') + "p" + std::string(60, 'a');
  const std::string b = std::string(60, 'a') + "p" + std::string(200, 'a');
  const std::string c = std::string(60, 'a') + "x" + std::string(39, 'a') + "q" + std::string(60, 'a');
  const std::vector<std::string> out = ElideDistinct({a, b, c}, 20);
  EXPECT_NE(out[0], out[1]);
  EXPECT_NE(out[0], out[2]);
  EXPECT_NE(out[1], out[2]);
  EXPECT_TRUE(out[0].ends_with("#1") || out[1].ends_with("#1")) << out[0] << " / " << out[1];
  for (const std::string& o : out) {
    EXPECT_LE(o.size(), 20u) << o;
  }
}

// docs/cli.md: comm, size, rank and maxrk sort ascending, a row without one first.
TEST(StatsOutput, RankLikeKeysSortAscendingWithAbsentFirst) {
  std::vector<OpStatsRow> rows = {Row("a", 10, 1, 1.0), Row("b", 20, 1, 1.0), Row("c", 30, 1, 1.0)};
  rows[0].max_rank = 5;
  rows[1].max_rank = 1;
  rows[0].rank = 2;
  rows[1].rank = 0;
  rows[2].rank = 1;
  auto names = [&] { return rows[0].name + rows[1].name + rows[2].name; };
  ASSERT_TRUE(SortStatsRows(rows, "maxrk"));
  EXPECT_EQ(names(), "cba");
  ASSERT_TRUE(SortStatsRows(rows, "rank"));
  EXPECT_EQ(names(), "bca");
}

// NVTX messages and Python frames may be UTF-8: a cut counts characters, never splits one (a
// split leaves invalid UTF-8 a terminal shows as garbage), and a short one is padded to its column.
TEST(StatsOutput, UnicodeNamesAreCutAndPaddedByCharacter) {
  const std::string name = "前向传播 – слой 12 – 後方伝播 ☃☃☃";  // 25 characters
  const std::string cut = ElideMiddle(name, 20);
  EXPECT_EQ(cut, "前向传播 – сл...後方伝播 ☃☃☃");  // 9 + 3 + 8 characters
  EXPECT_EQ(ElideMiddle("αβγ", 2), "αβ");
  OpStatsRow greek = Row("αβγδ", 10, 1, 1.0);
  OpStatsRow latin = Row("abcd", 5, 1, 1.0);
  OpStats stats;
  StatsContext ctx;
  ctx.path = "u.h5";
  ctx.rows_total = 2;
  std::ostringstream os;
  WriteStatsText(stats, {greek, latin}, ctx, os);
  std::istringstream lines(os.str());
  std::vector<std::string> rows;
  for (std::string line; std::getline(lines, line);) {
    rows.push_back(line);
  }
  ASSERT_EQ(rows.size(), 4u) << os.str();
  // The kind column starts at the same character on both rows.
  const std::string g = rows[2], l = rows[3];
  const size_t g_kind = g.find(" mpi "), l_kind = l.find(" mpi ");
  ASSERT_NE(g_kind, std::string::npos);
  ASSERT_NE(l_kind, std::string::npos);
  EXPECT_EQ(g_kind - (std::string("αβγδ").size() - 4), l_kind) << os.str();  // 2-byte letters
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

// A job of 128 ranks where one rank alone runs an operation has imbalance 128 (metrics.md §12.2),
// and a copy of 4 MiB timed at 1 ns (an imported trace's rounding) has 4.2e6 GB/s: each cell must
// fit its column whole, not lose its last digits to the column's width ("128.0", "4.2e+0").
TEST(StatsOutput, LargeImbalanceAndBandwidthFitTheirColumnsWhole) {
  OpStatsRow lone = Row("MPI_Comm_split", 5000, 1, 128.0);
  lone.max_rank = 77;
  OpStatsRow spread = Row("MPI_Bcast", 4000, 8, 42.31);
  spread.max_rank = 3;
  OpStatsRow copy = Row("HtoD", 1, 1, 1.0);
  copy.category = "memcpy";
  copy.bytes = 4 << 20;
  copy.bandwidth_gbps = 4194304.0;
  OpStats stats;
  stats.ranks = {0, 1};
  StatsContext ctx;
  ctx.path = "big.h5";
  ctx.rows_total = 3;
  std::ostringstream os;
  WriteStatsText(stats, {lone, spread, copy}, ctx, os);
  std::istringstream lines(os.str());
  std::vector<std::vector<std::string>> cells;
  for (std::string line; std::getline(lines, line);) {
    EXPECT_LE(line.size(), kStatsTextWidth) << line;
    std::istringstream words(line);
    cells.emplace_back();
    for (std::string w; words >> w;) {
      cells.back().push_back(w);
    }
  }
  ASSERT_EQ(cells.size(), 5u) << os.str();  // the file line, the header, three rows
  // The last two cells of a row: imbal, maxrk; gbps before them.
  EXPECT_EQ(cells[2][cells[2].size() - 2], "128") << os.str();
  EXPECT_EQ(cells[2].back(), "77");
  EXPECT_EQ(cells[3][cells[3].size() - 2], "42.3") << os.str();  // 3 digits
  EXPECT_EQ(cells[4][cells[4].size() - 3], "4e+06") << os.str();
}

}  // namespace
}  // namespace commprof
