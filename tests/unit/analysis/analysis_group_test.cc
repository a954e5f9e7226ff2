// The `/analysis` group's tables at every size class: empty, contiguous (up to 4096 rows), and
// chunked (more), including the sizes between one chunk's worth and the chunk length that once
// failed to store. Each table is read back by our reader and by h5py.
#include "analysis/report/analysis_group.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "core/schema/analysis_tables.h"
#include "support/test_support.h"

namespace commprof {
namespace {

using test_support::TempDir;

std::pair<int, std::string> RunCommand(const std::string& cmd) {
  std::string out;
  std::FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) {
    return {-1, ""};
  }
  std::array<char, 512> buf;
  while (std::fgets(buf.data(), buf.size(), p) != nullptr) {
    out += buf.data();
  }
  int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// Point i of the memory series: values that differ per row and per column, so a shifted,
// truncated or mis-typed column shows.
MemoryPoint Point(size_t i) {
  const auto k = static_cast<int64_t>(i);
  return {1000 + 10 * k, 4096 * k, (i % 2 == 0 ? 1 : -1) * (k + 1)};
}

class AnalysisTableRows : public ::testing::TestWithParam<size_t> {};

TEST_P(AnalysisTableRows, AreStoredAndReadBackByOurReaderAndH5py) {
  const size_t n = GetParam();
  TempDir dir;
  const std::string path = dir / "rows.h5";
  // A finalized one-rank file without events, then its analysis: one memory series of n points
  // and n ranks rows (the two tables built straight from report vectors).
  test_support::WriteProfile(path, {test_support::RankData{}}).reset();
  JobReport report;
  MemorySeries m;
  m.rank = 3;
  m.device = 1;
  m.memory_kind = 2;
  for (size_t i = 0; i < n; ++i) {
    m.points.push_back(Point(i));
  }
  report.memory.push_back(m);
  Status st = WriteAnalysisGroup(path, report);
  ASSERT_TRUE(st.ok()) << n << " rows: " << st.message();

  auto rows = ReadAnalysisTable<schema::MemoryRow>(path);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  ASSERT_EQ(rows.value().size(), n);
  int64_t sum_bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    const schema::MemoryRow& r = rows.value()[i];
    const MemoryPoint want = Point(i);
    ASSERT_EQ(r.rank, 3u) << "row " << i;
    ASSERT_EQ(r.device, 1u) << "row " << i;
    ASSERT_EQ(r.memory_kind, 2u) << "row " << i;
    ASSERT_EQ(r.time_ns, want.time_ns) << "row " << i;
    ASSERT_EQ(r.bytes_in_use, want.bytes_in_use) << "row " << i;
    ASSERT_EQ(r.delta_bytes, want.delta_bytes) << "row " << i;
    sum_bytes += r.bytes_in_use;
  }
  // The other tables exist, empty, so readers find every documented dataset.
  for (auto size : {ReadAnalysisTable<schema::RankRow>(path).value().size(),
                    ReadAnalysisTable<schema::InstanceRow>(path).value().size()}) {
    EXPECT_EQ(size, 0u);
  }

  // h5py reads the same rows through the column names.
  if (std::system("/usr/bin/python3 -c 'import h5py' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "no /usr/bin/python3 with h5py";
  }
  const std::string script = dir / "check.py";
  {
    std::ofstream s(script);
    s << "import sys, h5py\n"
         "m = h5py.File(sys.argv[1], 'r')['analysis/memory'][:]\n"
         "last = m[-1] if len(m) else None\n"
         "print('n=%d sum=%d last_time=%d last_delta=%d kinds=%s' % (len(m), int(m['bytes_in_use'].sum()),\n"
         "      last['time_ns'] if last is not None else -1, last['delta_bytes'] if last is not None else 0,\n"
         "      sorted(set(int(k) for k in m['memory_kind']))))\n";
  }
  auto [rc, out] = RunCommand("/usr/bin/python3 " + script + " " + path);
  ASSERT_EQ(rc, 0) << out;
  const MemoryPoint last = n > 0 ? Point(n - 1) : MemoryPoint{-1, 0, 0};
  const std::string want = "n=" + std::to_string(n) + " sum=" + std::to_string(sum_bytes) +
                           " last_time=" + std::to_string(last.time_ns) +
                           " last_delta=" + std::to_string(last.delta_bytes) + " kinds=" + (n > 0 ? "[2]" : "[]");
  EXPECT_NE(out.find(want), std::string::npos) << "h5py printed: " << out << "\nwanted: " << want;
}

// 4096: the largest contiguous table; 4097-16383: chunked, fewer rows than a chunk (the sizes that
// used to fail); 16384 and 16385: one chunk and just over; 100000: several chunks.
INSTANTIATE_TEST_SUITE_P(EverySizeClass, AnalysisTableRows,
                         ::testing::Values(0, 1, 4096, 4097, 16383, 16384, 16385, 100000));

TEST(AnalysisRanksTable, StoresEachRanksFiguresUnderTheirColumnNames) {
  TempDir dir;
  const std::string path = dir / "ranks.h5";
  JobReport report;
  // The report describes the file's ranks (the JSON report beside the tables reads them).
  report.info = test_support::WriteProfile(path, {test_support::RankData{}, test_support::RankData{}})->info();
  for (uint32_t r = 0; r < 2; ++r) {
    RankWaitMetrics m;
    m.rank = r;
    m.instances = 12;
    m.times_last = 9 - 6 * r;
    m.expected_last = 6.5 - r;  // the sum of 1 / participants over its instances
    m.wait_time_ns = 1000 + r;
    report.wait.ranks.push_back(m);
  }
  ASSERT_TRUE(WriteAnalysisGroup(path, report).ok());
  auto rows = ReadAnalysisTable<schema::RankRow>(path);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  ASSERT_EQ(rows.value().size(), 2u);
  for (uint32_t r = 0; r < 2; ++r) {
    const schema::RankRow& row = rows.value()[r];
    EXPECT_EQ(row.rank, r);
    EXPECT_EQ(row.instances, 12u);
    EXPECT_EQ(row.times_last, 9u - 6 * r);
    EXPECT_DOUBLE_EQ(row.expected_last, 6.5 - r);
    EXPECT_EQ(row.wait_time_ns, 1000 + static_cast<int64_t>(r));
  }
}

TEST(AnalysisTableRead, AFileWithoutTheGroupIsNotFound) {
  TempDir dir;
  const std::string path = dir / "none.h5";
  test_support::WriteProfile(path, {test_support::RankData{}}).reset();
  auto rows = ReadAnalysisTable<schema::ArrivalRow>(path);
  ASSERT_FALSE(rows.ok());
  EXPECT_EQ(rows.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace commprof
